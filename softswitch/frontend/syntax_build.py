"""lark parse tree -> typed syntax nodes (:mod:`softswitch.frontend.syntax`).

A bottom-up transformer run once after parsing (lark's ``Transformer`` protocol: one method
per rule, called with the rule's tree after its children were transformed): statement,
expression and type-reference rules become dataclasses with their original source location;
the other rules stay lark trees whose children are the new nodes. The location rule is the
one the checker used on raw trees: a rule's own position, or its first child's when it has
none. The walk is our own rather than ``lark.Transformer``: lark's wraps every call in a
``v_args`` adapter, which made this step cost more than all the checks after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lark import Token, Tree

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


_OWN_RULES = (
    "type_name", "type_args", "specialized_type", "stack_type", "tuple_type",
    "int_lit", "str_lit", "true_lit", "false_lit", "dontcare_expr", "invalid_expr", "name_ref",
    "type_member", "error_member", "expression_list", "list_expr", "kv_pair", "struct_init",
    "mux", "shl", "shr", "cast_expr", "member_expr", "index_expr", "slice_expr", "named_arg",
    "args", "call_expr", "generic_call_expr", "ctor_call",
    "block", "assign_stmt", "compound_assign_stmt", "shr_assign_stmt", "call_stmt",
    "generic_call_stmt", "if_stmt", "empty_stmt", "exit_stmt", "break_stmt", "continue_stmt",
    "return_stmt", "label_default", "label_int", "label_name", "label_type_member",
    "label_error_member", "switch_case", "switch_stmt", "direct_apply", "for_var",
    "for_assign", "for_compound", "for_shr", "for_call", "for_stmt", "for_in_stmt",
    "for_range_stmt",
)  # fmt: skip


class SyntaxBuilder:
    """Builds :mod:`softswitch.frontend.syntax` nodes bottom-up."""

    def __init__(self, pre: Preprocessed) -> None:
        self.pre = pre
        rules: dict[str, Callable[[Tree], Any]] = {r: getattr(self, r) for r in _OWN_RULES}
        for r in _BINARY_RULES:
            rules[r] = self._binary
        for r in _BASE_TYPE_RULES:
            rules[r] = self._base_type
        for r in _UNARY_RULES:
            rules[r] = self._unary
        for r in ("bit_type", "int_type", "varbit_type"):
            rules[r] = self._bit_type
        self._rules = rules

    def transform(self, tree: Tree) -> Any:
        """``tree`` (changed in place) with its rules turned into syntax nodes."""
        tree.children = [self.transform(c) if isinstance(c, Tree) else c for c in tree.children]
        rule = self._rules.get(tree.data)
        return rule(tree) if rule is not None else tree

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

    def _binary(self, tree: Tree) -> s.Binary:
        left, op, right = tree.children
        return s.Binary(op=str(op), left=left, right=right, **self._pos(tree))

    def _base_type(self, tree: Tree) -> s.BaseTypeRef:
        return s.BaseTypeRef(kind=str(tree.data), **self._pos(tree))

    def _unary(self, tree: Tree) -> s.Unary:
        return s.Unary(op=_UNARY_RULES[tree.data], operand=tree.children[0], **self._pos(tree))

    def _bit_type(self, tree: Tree) -> s.BitTypeRef:
        width = tree.children[0].children[0]
        text = str(width) if isinstance(width, Token) else width
        return s.BitTypeRef(
            kind=str(tree.data), width=text, width_loc=self.loc(width), **self._pos(tree)
        )

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

    # ------------------------------------------------------------------ statements

    def block(self, tree: Tree) -> s.Block:
        items = [c for c in tree.children if not (isinstance(c, Tree) and c.data == "annotations")]
        return s.Block(items=tuple(items), **self._pos(tree))

    def assign_stmt(self, tree: Tree) -> s.AssignStmt:
        lhs, rhs = tree.children
        return s.AssignStmt(lhs=lhs, rhs=rhs, **self._pos(tree))

    def compound_assign_stmt(self, tree: Tree) -> s.CompoundAssignStmt:
        lhs, op, rhs = tree.children
        return s.CompoundAssignStmt(op=str(op)[:-1], lhs=lhs, rhs=rhs, **self._pos(tree))

    def shr_assign_stmt(self, tree: Tree) -> s.CompoundAssignStmt:
        lhs, rhs = tree.children
        return s.CompoundAssignStmt(op=">>", lhs=lhs, rhs=rhs, **self._pos(tree))

    def call_stmt(self, tree: Tree) -> s.CallStmt:
        callee, args = tree.children
        pos = self._pos(tree)
        return s.CallStmt(call=s.Call(callee=callee, type_args=(), args=args, **pos), **pos)

    def generic_call_stmt(self, tree: Tree) -> s.CallStmt:
        callee, _lt, targs, args = _trees(tree.children)
        pos = self._pos(tree)
        call = s.Call(callee=callee, type_args=targs.items, args=args, **pos)
        return s.CallStmt(call=call, **pos)

    def if_stmt(self, tree: Tree) -> s.IfStmt:
        cond, then, *rest = tree.children
        return s.IfStmt(cond=cond, then=then, else_=rest[0] if rest else None, **self._pos(tree))

    def empty_stmt(self, tree: Tree) -> s.EmptyStmt:
        return s.EmptyStmt(**self._pos(tree))

    def exit_stmt(self, tree: Tree) -> s.ExitStmt:
        return s.ExitStmt(**self._pos(tree))

    def break_stmt(self, tree: Tree) -> s.BreakStmt:
        return s.BreakStmt(**self._pos(tree))

    def continue_stmt(self, tree: Tree) -> s.ContinueStmt:
        return s.ContinueStmt(**self._pos(tree))

    def return_stmt(self, tree: Tree) -> s.ReturnStmt:
        value = tree.children[0] if tree.children else None
        return s.ReturnStmt(value=value, **self._pos(tree))

    def label_default(self, tree: Tree) -> s.DefaultLabel:
        return s.DefaultLabel(**self._pos(tree))

    def label_int(self, tree: Tree) -> s.IntLit:
        return s.IntLit(text=str(tree.children[0]), **self._pos(tree))

    def label_name(self, tree: Tree) -> s.NameRef:
        return self.name_ref(tree)

    def label_type_member(self, tree: Tree) -> s.TypeMember:
        return self.type_member(tree)

    def label_error_member(self, tree: Tree) -> s.ErrorMember:
        return self.error_member(tree)

    def switch_case(self, tree: Tree) -> s.SwitchCase:
        label, *body = tree.children
        return s.SwitchCase(label=label, body=body[0] if body else None, **self._pos(tree))

    def switch_stmt(self, tree: Tree) -> s.SwitchStmt:
        subject, *cases = tree.children
        return s.SwitchStmt(subject=subject, cases=tuple(cases), **self._pos(tree))

    def direct_apply(self, tree: Tree) -> s.DirectApply:
        t, args = tree.children
        return s.DirectApply(type=t, args=args, **self._pos(tree))

    # a for loop's parts: a declaration stays a (variable_decl) tree, the rest are statements

    def for_var(self, tree: Tree) -> Tree:
        return tree

    def for_assign(self, tree: Tree) -> s.AssignStmt:
        return self.assign_stmt(tree)

    def for_compound(self, tree: Tree) -> s.CompoundAssignStmt:
        return self.compound_assign_stmt(tree)

    def for_shr(self, tree: Tree) -> s.CompoundAssignStmt:
        return self.shr_assign_stmt(tree)

    def for_call(self, tree: Tree) -> s.CallStmt:
        return self.call_stmt(tree)

    def for_stmt(self, tree: Tree) -> s.ForStmt:
        init, cond, updates, body = tree.children
        return s.ForStmt(
            init=tuple(init.children),
            cond=cond.children[0] if cond.children else None,
            updates=tuple(updates.children),
            body=body,
            **self._pos(tree),
        )

    def for_in_stmt(self, tree: Tree) -> s.ForInStmt:
        t, name, coll, body = tree.children
        return s.ForInStmt(
            type=t, name=tree_name(name), name_loc=self.loc(name), collection=coll,
            low=None, high=None, body=body, **self._pos(tree),
        )  # fmt: skip

    def for_range_stmt(self, tree: Tree) -> s.ForInStmt:
        t, name, low, high, body = tree.children
        return s.ForInStmt(
            type=t, name=tree_name(name), name_loc=self.loc(name), collection=None,
            low=low, high=high, body=body, **self._pos(tree),
        )  # fmt: skip


def build_syntax(tree: Tree, pre: Preprocessed) -> Tree:
    """The parse tree with its expressions and type references as typed syntax nodes."""
    result: Tree = SyntaxBuilder(pre).transform(tree)
    return result
