"""lark parse tree -> typed syntax nodes (:mod:`softswitch.frontend.syntax`).

A bottom-up transformer run once after parsing (lark's ``Transformer`` protocol: one method
per rule, called with the rule's tree after its children were transformed): declaration,
statement, expression and type-reference rules become dataclasses with their original source
location; the helper rules (names, parameter lists, annotations ...) stay lark trees that only
this module reads. The location rule is a rule's own position, or its first child's when it
has none. The walk is our own rather than ``lark.Transformer``: lark's wraps every call in a
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
    "annotation", "param", "struct_field", "header_decl", "header_union_decl", "struct_decl",
    "enum_decl", "enum_value", "ser_enum_decl", "typedef_decl", "newtype_decl", "error_decl",
    "match_kind_decl", "const_decl", "variable_decl", "instantiation", "method", "ctor",
    "extern_obj_decl", "extern_func_decl", "parser_type_decl", "control_type_decl",
    "package_decl", "action_decl", "function_decl", "value_set_decl", "tuple_keyset",
    "keyset_mask", "keyset_range", "keyset_default", "select_case", "transition_direct",
    "transition_select", "parser_state", "parser_decl", "key_element", "key_prop",
    "action_item", "actions_prop", "entry", "entries_prop", "simple_prop", "table_decl",
    "control_decl", "start",
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

    def for_var(self, tree: Tree) -> s.VariableDecl:
        return self.variable_decl(tree)

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


    # ------------------------------------------------------------------ declarations

    def _annotations(self, tree: Tree) -> s.Annotations:
        """The annotations among the direct children of ``tree``, in order."""
        found = _child(tree, "annotations")
        return tuple(found.children) if found is not None else ()

    def _name(self, tree: Tree) -> tuple[str, ir.Loc]:
        """A declaration's ``name`` child."""
        found = _child(tree, "name")
        assert found is not None
        return tree_name(found), self.loc(found)

    def _type_params(self, tree: Tree) -> tuple[s.Ident, ...]:
        found = _child(tree, "type_params")
        if found is None:
            return ()
        return tuple(
            s.Ident(name=str(tok), loc=self.loc(tok), span=(tok.start_pos, tok.end_pos))
            for tok in found.children
            if isinstance(tok, Token) and tok.type == "TYPE_IDENTIFIER"
        )

    def _params(self, tree: Tree | None) -> tuple[s.Param, ...]:
        found = _child(tree, "params") if tree is not None else None
        return tuple(found.children) if found is not None else ()

    def _ctor_params(self, tree: Tree) -> tuple[s.Param, ...] | None:
        found = _child(tree, "ctor_params")
        return self._params(found) if found is not None else None

    def _nodes(self, tree: Tree, kind: type | tuple[type, ...]) -> tuple[Any, ...]:
        return tuple(c for c in tree.children if isinstance(c, kind))

    def _ident(self, tree: Tree) -> s.Ident:
        return s.Ident(name=tree_name(tree), **self._pos(tree))

    def _plain(self, tree: Tree) -> list[Any]:
        """Children that are neither annotations nor the helper lists read by name."""
        skip = ("annotations", "type_params", "params", "ctor_params", "const_kw", "direction")
        return [c for c in tree.children if not (isinstance(c, Tree) and c.data in skip)]

    def annotation(self, tree: Tree) -> s.Annotation:
        body = next(
            (str(c) for c in tree.children if isinstance(c, Token) and c.type == "ANNOTATION_BODY"),
            None,
        )
        return s.Annotation(name=tree_name(tree.children[0]), body=body, **self._pos(tree))

    def param(self, tree: Tree) -> s.Param:
        direction = _child(tree, "direction")
        t, name, *default = self._plain(tree)
        return s.Param(
            annotations=self._annotations(tree),
            direction=str(direction.children[0]) if direction is not None else "",
            type=t, name=tree_name(name), name_loc=self.loc(name),
            default=default[0] if default else None, **self._pos(tree),
        )  # fmt: skip

    def struct_field(self, tree: Tree) -> s.StructField:
        t, name = self._plain(tree)
        return s.StructField(
            annotations=self._annotations(tree), type=t, name=tree_name(name), **self._pos(tree)
        )

    def _struct_like(self, tree: Tree, cls: type[s.StructLikeDecl]) -> s.StructLikeDecl:
        name, name_loc = self._name_token(tree)
        return cls(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            fields=self._nodes(tree, s.StructField), **self._pos(tree),
        )  # fmt: skip

    def header_decl(self, tree: Tree) -> s.StructLikeDecl:
        return self._struct_like(tree, s.HeaderDecl)

    def header_union_decl(self, tree: Tree) -> s.StructLikeDecl:
        return self._struct_like(tree, s.HeaderUnionDecl)

    def struct_decl(self, tree: Tree) -> s.StructLikeDecl:
        return self._struct_like(tree, s.StructDecl)

    def enum_decl(self, tree: Tree) -> s.EnumDecl:
        name, name_loc = self._name_token(tree)
        members = tuple(self._ident(c) for c in tree.children if _is(c, "name"))
        return s.EnumDecl(
            annotations=self._annotations(tree), name=name, name_loc=name_loc, members=members,
            **self._pos(tree),
        )  # fmt: skip

    def _name_token(self, tree: Tree) -> tuple[str, ir.Loc]:
        """The first type-name token (the declared name where ``name`` children are members)."""
        tok = next(c for c in tree.children if isinstance(c, Token) and c.type == "TYPE_IDENTIFIER")
        return str(tok), self.loc(tok)

    def enum_value(self, tree: Tree) -> s.EnumValue:
        name, value = tree.children
        return s.EnumValue(name=tree_name(name), value=value, **self._pos(tree))

    def ser_enum_decl(self, tree: Tree) -> s.SerEnumDecl:
        name, name_loc = self._name_token(tree)
        return s.SerEnumDecl(
            annotations=self._annotations(tree), underlying=self._plain(tree)[0], name=name,
            name_loc=name_loc, members=self._nodes(tree, s.EnumValue), **self._pos(tree),
        )  # fmt: skip

    def typedef_decl(self, tree: Tree) -> s.TypedefDecl:
        t, name = self._plain(tree)
        return s.TypedefDecl(
            annotations=self._annotations(tree), type=t, name=tree_name(name),
            name_loc=self.loc(name), **self._pos(tree),
        )  # fmt: skip

    def newtype_decl(self, tree: Tree) -> s.NewTypeDecl:
        t, name = self._plain(tree)
        return s.NewTypeDecl(
            annotations=self._annotations(tree), type=t, name=tree_name(name),
            name_loc=self.loc(name), **self._pos(tree),
        )  # fmt: skip

    def error_decl(self, tree: Tree) -> s.ErrorDecl:
        return s.ErrorDecl(members=tuple(self._ident(c) for c in tree.children), **self._pos(tree))

    def match_kind_decl(self, tree: Tree) -> s.MatchKindDecl:
        members = tuple(self._ident(c) for c in tree.children)
        return s.MatchKindDecl(members=members, **self._pos(tree))

    def const_decl(self, tree: Tree) -> s.ConstDecl:
        t, name, value = self._plain(tree)
        return s.ConstDecl(
            annotations=self._annotations(tree), type=t, name=tree_name(name),
            name_loc=self.loc(name), value=value, **self._pos(tree),
        )  # fmt: skip

    def variable_decl(self, tree: Tree) -> s.VariableDecl:
        t, name, *init = self._plain(tree)
        return s.VariableDecl(
            annotations=self._annotations(tree), type=t, name=tree_name(name),
            name_loc=self.loc(name), init=init[0] if init else None, **self._pos(tree),
        )  # fmt: skip

    def instantiation(self, tree: Tree) -> s.Instantiation:
        t, args, name = self._plain(tree)
        return s.Instantiation(
            annotations=self._annotations(tree), type=t, args=args, name=tree_name(name),
            name_loc=self.loc(name), **self._pos(tree),
        )  # fmt: skip

    def method(self, tree: Tree) -> s.MethodProto:
        rtype, name = self._plain(tree)
        return s.MethodProto(
            annotations=self._annotations(tree), return_type=rtype, name=tree_name(name),
            name_loc=self.loc(name), type_params=self._type_params(tree),
            params=self._params(tree), **self._pos(tree),
        )  # fmt: skip

    def ctor(self, tree: Tree) -> s.CtorProto:
        tok = next(c for c in tree.children if isinstance(c, Token))
        return s.CtorProto(
            annotations=self._annotations(tree), name=str(tok), name_loc=self.loc(tok),
            params=self._params(tree), **self._pos(tree),
        )  # fmt: skip

    def extern_obj_decl(self, tree: Tree) -> s.ExternObjDecl:
        name, name_loc = self._name_token(tree)
        return s.ExternObjDecl(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            type_params=self._type_params(tree),
            members=self._nodes(tree, (s.MethodProto, s.CtorProto)), **self._pos(tree),
        )  # fmt: skip

    def extern_func_decl(self, tree: Tree) -> s.ExternFuncDecl:
        rtype, name = self._plain(tree)
        return s.ExternFuncDecl(
            annotations=self._annotations(tree), return_type=rtype, name=tree_name(name),
            name_loc=self.loc(name), type_params=self._type_params(tree),
            params=self._params(tree), **self._pos(tree),
        )  # fmt: skip

    def _block_type(self, tree: Tree, cls: type[s.BlockTypeDecl]) -> s.BlockTypeDecl:
        name, name_loc = self._name_token(tree)
        return cls(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            type_params=self._type_params(tree), params=self._params(tree), **self._pos(tree),
        )  # fmt: skip

    def parser_type_decl(self, tree: Tree) -> s.BlockTypeDecl:
        return self._block_type(tree, s.ParserTypeDecl)

    def control_type_decl(self, tree: Tree) -> s.BlockTypeDecl:
        return self._block_type(tree, s.ControlTypeDecl)

    def package_decl(self, tree: Tree) -> s.BlockTypeDecl:
        return self._block_type(tree, s.PackageDecl)

    def action_decl(self, tree: Tree) -> s.ActionDecl:
        name, name_loc = self._name(tree)
        return s.ActionDecl(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            params=self._params(tree), body=self._nodes(tree, s.Block)[0], **self._pos(tree),
        )  # fmt: skip

    def function_decl(self, tree: Tree) -> s.FunctionDecl:
        rtype, name, body = self._plain(tree)
        return s.FunctionDecl(
            annotations=self._annotations(tree), return_type=rtype, name=tree_name(name),
            name_loc=self.loc(name), type_params=self._type_params(tree),
            params=self._params(tree), body=body, **self._pos(tree),
        )  # fmt: skip

    def value_set_decl(self, tree: Tree) -> s.ValueSetDecl:
        targs, size, name = _trees(self._plain(tree))
        return s.ValueSetDecl(
            annotations=self._annotations(tree), type_args=targs, size=size,
            name=tree_name(name), name_loc=self.loc(name), **self._pos(tree),
        )  # fmt: skip

    # --- parsers

    def tuple_keyset(self, tree: Tree) -> s.TupleKeyset:
        return s.TupleKeyset(items=tuple(tree.children), **self._pos(tree))

    def keyset_mask(self, tree: Tree) -> s.MaskKeyset:
        value, mask = tree.children
        return s.MaskKeyset(value=value, mask=mask, **self._pos(tree))

    def keyset_range(self, tree: Tree) -> s.RangeKeyset:
        low, high = tree.children
        return s.RangeKeyset(low=low, high=high, **self._pos(tree))

    def keyset_default(self, tree: Tree) -> s.DefaultKeyset:
        return s.DefaultKeyset(**self._pos(tree))

    def select_case(self, tree: Tree) -> s.SelectCase:
        keyset, name = tree.children
        return s.SelectCase(
            keyset=keyset, next_state=tree_name(name), next_loc=self.loc(name), **self._pos(tree)
        )

    def transition_direct(self, tree: Tree) -> s.DirectTransition:
        (name,) = tree.children
        return s.DirectTransition(
            next_state=tree_name(name), next_loc=self.loc(name), **self._pos(tree)
        )

    def transition_select(self, tree: Tree) -> s.SelectTransition:
        subjects, *cases = tree.children
        return s.SelectTransition(subjects=subjects, cases=tuple(cases), **self._pos(tree))

    def parser_state(self, tree: Tree) -> s.ParserState:
        name, name_loc = self._name(tree)
        body: list[Any] = []
        transition = None
        for c in tree.children:
            if isinstance(c, (s.DirectTransition, s.SelectTransition)):
                transition = c
            elif isinstance(c, (s.Stmt, s.Decl)):
                body.append(c)
        return s.ParserState(
            annotations=self._annotations(tree), name=name, name_loc=name_loc, body=tuple(body),
            transition=transition, **self._pos(tree),
        )  # fmt: skip

    def parser_decl(self, tree: Tree) -> s.ParserDecl:
        name, name_loc = self._name_token(tree)
        return s.ParserDecl(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            type_params=self._type_params(tree), params=self._params(tree),
            ctor_params=self._ctor_params(tree), locals=self._nodes(tree, s.Decl),
            states=self._nodes(tree, s.ParserState), **self._pos(tree),
        )  # fmt: skip

    # --- controls and tables

    def key_element(self, tree: Tree) -> s.KeyElement:
        expr, mk, *annos = tree.children
        return s.KeyElement(
            expr=expr, match_kind=tree_name(mk), match_kind_loc=self.loc(mk),
            annotations=tuple(annos[0].children) if annos else (), **self._pos(tree),
        )  # fmt: skip

    def key_prop(self, tree: Tree) -> s.KeyProperty:
        return s.KeyProperty(elements=tuple(tree.children), **self._pos(tree))

    def _action_name(self, tree: Tree) -> s.NameRef:
        """The ``prefixed_name`` of an action item or entry as a name reference."""
        return s.NameRef(name=tree_name(tree), dotted=tree_dotted(tree), **self._pos(tree))

    def action_item(self, tree: Tree) -> s.ActionItem:
        name = next(c for c in tree.children if _is(c, "prefixed_name") or _is(c, "dotted_name"))
        args = self._nodes(tree, s.Args)
        return s.ActionItem(
            annotations=self._annotations(tree), action=self._action_name(name),
            args=args[0] if args else None, **self._pos(tree),
        )  # fmt: skip

    def actions_prop(self, tree: Tree) -> s.ActionsProperty:
        return s.ActionsProperty(items=tuple(tree.children), **self._pos(tree))

    def entry(self, tree: Tree) -> s.Entry:
        annos: list[s.Annotation] = []
        for c in tree.children:
            if _is(c, "annotations"):
                annos += c.children
        prio = _child(tree, "entry_priority")
        keyset, name, *args = (
            c
            for c in tree.children
            if not (isinstance(c, Tree) and c.data in ("annotations", "const_kw", "entry_priority"))
        )
        action: s.Expr = self._action_name(name)
        if args:
            action = s.Call(action.loc, action.span, action, (), args[0])
        return s.Entry(
            const=_child(tree, "const_kw") is not None,
            priority=prio.children[0] if prio is not None else None, keyset=keyset,
            action=action, annotations=tuple(annos), **self._pos(tree),
        )  # fmt: skip

    def entries_prop(self, tree: Tree) -> s.EntriesProperty:
        return s.EntriesProperty(
            annotations=self._annotations(tree), const=_child(tree, "const_kw") is not None,
            entries=self._nodes(tree, s.Entry), **self._pos(tree),
        )  # fmt: skip

    def simple_prop(self, tree: Tree) -> s.SimpleProperty:
        tok = next(c for c in tree.children if isinstance(c, Token) and c.type == "IDENTIFIER")
        return s.SimpleProperty(
            annotations=self._annotations(tree), const=_child(tree, "const_kw") is not None,
            name=str(tok), value=tree.children[-1], **self._pos(tree),
        )  # fmt: skip

    def table_decl(self, tree: Tree) -> s.TableDecl:
        name, name_loc = self._name(tree)
        props = (s.KeyProperty, s.ActionsProperty, s.EntriesProperty, s.SimpleProperty)
        return s.TableDecl(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            properties=self._nodes(tree, props), **self._pos(tree),
        )  # fmt: skip

    def control_decl(self, tree: Tree) -> s.ControlDecl:
        name, name_loc = self._name_token(tree)
        return s.ControlDecl(
            annotations=self._annotations(tree), name=name, name_loc=name_loc,
            type_params=self._type_params(tree), params=self._params(tree),
            ctor_params=self._ctor_params(tree), locals=self._nodes(tree, s.Decl),
            body=self._nodes(tree, s.Block)[0], **self._pos(tree),
        )  # fmt: skip

    def start(self, tree: Tree) -> s.Program:
        return s.Program(decls=self._nodes(tree, s.Decl), **self._pos(tree))


def _child(tree: Tree, data: str) -> Tree | None:
    """The first direct child tree of rule ``data``."""
    for c in tree.children:
        if isinstance(c, Tree) and c.data == data:
            return c
    return None


def _is(node: object, data: str) -> bool:
    return isinstance(node, Tree) and node.data == data


def build_syntax(tree: Tree, pre: Preprocessed) -> s.Program:
    """The typed syntax tree of a parsed program."""
    result: s.Program = SyntaxBuilder(pre).transform(tree)
    return result
