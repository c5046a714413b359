"""lark parse tree -> typed syntax nodes (:mod:`softswitch.frontend.syntax`).

A lark ``Transformer`` run once after parsing: expression and type-reference rules become
dataclasses with their original source location; the other rules stay lark trees (their
expression and type children are the new nodes). The location rule is the one the checker
used on raw trees: a rule's own position, or its first child's when it has none.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, Tree, v_args
from lark.exceptions import VisitError

from softswitch import ir
from softswitch.frontend import syntax as s
from softswitch.frontend.preprocess import Preprocessed

_BINARY_RULES = (
    "lor", "land", "equality", "relational", "bor", "bxor", "band", "additive", "multiplicative",
)  # fmt: skip
_BASE_TYPE_RULES = (
    "bool_type", "error_type", "string_type", "match_kind_type", "bit1_type", "int_any_type",
    "void_type", "dontcare_type",
)  # fmt: skip
_UNARY_RULES = {"not_expr": "!", "compl_expr": "~", "neg_expr": "-", "pos_expr": "+"}


def tree_name(tree: Tree | Token) -> str:
    """Text of a name-like lark node (``name``, ``member``, ``prefixed_name`` ...)."""
    if isinstance(tree, Token):
        return str(tree)
    for c in tree.children:
        return tree_name(c)
    return ""


def tree_dotted(tree: Tree | Token) -> bool:
    """True for a ``.name`` (top-level) reference."""
    if isinstance(tree, Tree):
        if tree.data == "dotted_name":
            return True
        return any(tree_dotted(c) for c in tree.children if isinstance(c, Tree))
    return False


def _trees(children: list[Any]) -> list[Any]:
    """Children without the ``r_angle`` punctuation and the tokens lark keeps for it."""
    return [c for c in children if not (isinstance(c, Tree) and c.data == "r_angle")]


@v_args(tree=True)
class SyntaxBuilder(Transformer):  # type: ignore[type-arg]
    """Builds :mod:`softswitch.frontend.syntax` nodes bottom-up."""

    def __init__(self, pre: Preprocessed) -> None:
        super().__init__(visit_tokens=False)
        self.pre = pre

    # ------------------------------------------------------------------ positions

    def loc(self, node: Any) -> ir.Loc:
        """Original location of a lark node, token or syntax node."""
        if isinstance(node, s.Node):
            return node.loc
        if isinstance(node, Token):
            return self.pre.loc(node.line or 1, node.column or 1)
        meta = node.meta
        if getattr(meta, "empty", True):
            for c in node.children:
                if isinstance(c, (Tree, Token, s.Node)):
                    return self.loc(c)
            return ir.NOLOC
        return self.pre.loc(meta.line, meta.column)

    def _span(self, tree: Tree) -> tuple[int, int]:
        meta = tree.meta
        if getattr(meta, "empty", True):
            return (0, 0)
        return (meta.start_pos, meta.end_pos)

    def _pos(self, tree: Tree) -> dict[str, Any]:
        return {"loc": self.loc(tree), "span": self._span(tree)}

    # ------------------------------------------------------------------ types

    def __default__(self, data: Any, children: Any, meta: Any) -> Any:
        if data in _BINARY_RULES:
            left, op, right = children
            tree = Tree(data, children, meta)
            return s.Binary(op=str(op), left=left, right=right, **self._pos(tree))
        if data in _BASE_TYPE_RULES:
            return s.BaseTypeRef(kind=str(data), **self._pos(Tree(data, children, meta)))
        if data in _UNARY_RULES:
            return s.Unary(op=_UNARY_RULES[data], operand=children[0], **self._pos(Tree(data, children, meta)))
        if data in ("bit_type", "int_type", "varbit_type"):
            tree = Tree(data, children, meta)
            width = children[0].children[0]
            text = str(width) if isinstance(width, Token) else width
            return s.BitTypeRef(kind=str(data), width=text, width_loc=self.loc(width), **self._pos(tree))
        return super().__default__(data, children, meta)

    def type_name(self, tree: Tree) -> s.TypeName:
        dotted = False
        if not tree.meta.empty:
            dotted = self.pre.text[tree.meta.start_pos : tree.meta.start_pos + 1] == "."
        return s.TypeName(name=str(tree.children[-1]), dotted=dotted, **self._pos(tree))

    def type_args(self, tree: Tree) -> s.TypeArgs:
        return s.TypeArgs(items=tuple(tree.children), **self._pos(tree))

    def specialized_type(self, tree: Tree) -> s.SpecializedTypeRef:
        base, targs = _trees(tree.children)
        return s.SpecializedTypeRef(base=base, args=targs.items, **self._pos(tree))

    def stack_type(self, tree: Tree) -> s.StackTypeRef:
        elem, size = tree.children
        return s.StackTypeRef(elem=elem, size=size, **self._pos(tree))

    def tuple_type(self, tree: Tree) -> s.TupleTypeRef:
        (targs,) = _trees(tree.children)
        return s.TupleTypeRef(elems=targs.items, **self._pos(tree))

    # ------------------------------------------------------------------ literals, names

    def int_lit(self, tree: Tree) -> s.IntLit:
        return s.IntLit(text=str(tree.children[0]), **self._pos(tree))

    def str_lit(self, tree: Tree) -> s.StrLit:
        return s.StrLit(text=str(tree.children[0]), **self._pos(tree))

    def true_lit(self, tree: Tree) -> s.BoolLit:
        return s.BoolLit(value=True, **self._pos(tree))

    def false_lit(self, tree: Tree) -> s.BoolLit:
        return s.BoolLit(value=False, **self._pos(tree))

    def dontcare_expr(self, tree: Tree) -> s.DontCareExpr:
        return s.DontCareExpr(**self._pos(tree))

    def invalid_expr(self, tree: Tree) -> s.InvalidExpr:
        return s.InvalidExpr(**self._pos(tree))

    def name_ref(self, tree: Tree) -> s.NameRef:
        return s.NameRef(name=tree_name(tree), dotted=tree_dotted(tree), **self._pos(tree))

    def type_member(self, tree: Tree) -> s.TypeMember:
        tname, member = tree.children
        return s.TypeMember(
            type=tname, member=tree_name(member), member_loc=self.loc(member), **self._pos(tree)
        )

    def error_member(self, tree: Tree) -> s.ErrorMember:
        return s.ErrorMember(member=tree_name(tree.children[0]), **self._pos(tree))

    # ------------------------------------------------------------------ compound

    def expression_list(self, tree: Tree) -> s.ExprList:
        return s.ExprList(items=tuple(tree.children), **self._pos(tree))

    def list_expr(self, tree: Tree) -> s.ListExpr:
        items = tree.children[0].items if tree.children else ()
        return s.ListExpr(items=items, **self._pos(tree))

    def kv_pair(self, tree: Tree) -> s.KeyValue:
        name, value = tree.children
        return s.KeyValue(name=tree_name(name), value=value, **self._pos(tree))

    def struct_init(self, tree: Tree) -> s.StructInit:
        return s.StructInit(fields=tuple(tree.children), **self._pos(tree))

    def mux(self, tree: Tree) -> s.Mux:
        cond, then, else_ = tree.children
        return s.Mux(cond=cond, then=then, else_=else_, **self._pos(tree))

    def shl(self, tree: Tree) -> s.Binary:
        return s.Binary(op="<<", left=tree.children[0], right=tree.children[-1], **self._pos(tree))

    def shr(self, tree: Tree) -> s.Binary:
        return s.Binary(op=">>", left=tree.children[0], right=tree.children[-1], **self._pos(tree))

    def cast_expr(self, tree: Tree) -> s.Cast:
        t, operand = tree.children
        return s.Cast(type=t, operand=operand, **self._pos(tree))

    def member_expr(self, tree: Tree) -> s.Member:
        base, member = tree.children
        return s.Member(
            base=base, member=tree_name(member), member_loc=self.loc(member), **self._pos(tree)
        )

    def index_expr(self, tree: Tree) -> s.Index:
        base, index = tree.children
        return s.Index(base=base, index=index, **self._pos(tree))

    def slice_expr(self, tree: Tree) -> s.Slice:
        base, hi, lo = tree.children
        return s.Slice(base=base, hi=hi, lo=lo, **self._pos(tree))

    def named_arg(self, tree: Tree) -> s.NamedArg:
        name, value = tree.children
        return s.NamedArg(name=tree_name(name), value=value, **self._pos(tree))

    def args(self, tree: Tree) -> s.Args:
        return s.Args(items=tuple(tree.children), **self._pos(tree))

    def call_expr(self, tree: Tree) -> s.Call:
        callee, args = tree.children
        return s.Call(callee=callee, type_args=(), args=args, **self._pos(tree))

    def generic_call_expr(self, tree: Tree) -> s.Call:
        callee, _lt, targs, args = _trees(tree.children)
        return s.Call(callee=callee, type_args=targs.items, args=args, **self._pos(tree))

    def ctor_call(self, tree: Tree) -> s.CtorCall:
        t, args = tree.children
        return s.CtorCall(type=t, args=args, **self._pos(tree))


def build_syntax(tree: Tree, pre: Preprocessed) -> Tree:
    """The parse tree with its expressions and type references as typed syntax nodes."""
    try:
        result: Tree = SyntaxBuilder(pre).transform(tree)
    except VisitError as exc:  # lark wraps what a rule method raises (RecursionError)
        raise exc.orig_exc from None
    return result
