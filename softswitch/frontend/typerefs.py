"""Type references as written -> :class:`ir.Type`, and the extern declarations' method
signatures the expression checker asks for."""

from __future__ import annotations

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import syntax as s
from softswitch.frontend.ir_ext import SpecializedType, TypeVar
from softswitch.frontend.literals import check_width, parse_int
from softswitch.frontend.scope import Scope
from softswitch.frontend.typeops import type_str
from softswitch.frontend.visitor import Visitor

_BASE_TYPES: dict[str, ir.Type] = {
    "bool_type": ir.BoolType(),
    "error_type": ir.ErrorType(),
    "string_type": ir.StringType(),
    "match_kind_type": ir.MatchKindType(),
    "bit1_type": ir.BitType(1),
    "int_any_type": ir.IntLitType(),
    "void_type": ir.VoidType(),
    "dontcare_type": ir.DontCareType(),
}


class TypeResolver(Visitor):
    """Resolves type references (typedefs resolved away) in a scope."""

    def resolve_type(self, tree: s.TypeRef, scope: Scope) -> ir.Type:
        """A type reference -> ir.Type (typedefs resolved away)."""
        result: ir.Type = self.visit(tree, scope)
        return result

    def visit_other(self, tree: s.TypeRef, scope: Scope) -> ir.Type:
        raise P4Error(f"unsupported type '{self.ctx.source_text(tree)}'", tree.loc)

    def visit_BaseTypeRef(self, tree: s.BaseTypeRef, scope: Scope) -> ir.Type:
        return _BASE_TYPES[tree.kind]

    def visit_BitTypeRef(self, tree: s.BitTypeRef, scope: Scope) -> ir.Type:
        loc = tree.loc
        kind = tree.kind
        if isinstance(tree.width, str):
            width = parse_int(tree.width, tree.width_loc).value
        else:
            width = self.ctx.exprs.const_int(tree.width, scope, "type width")
        if width <= 0 and kind != "bit_type" or width < 0:
            raise P4Error(f"invalid width {width}", loc)
        check_width(width, loc, "type")
        if kind == "varbit_type":
            return ir.VarbitType(width)
        return ir.BitType(width, kind == "int_type")

    def visit_TypeName(self, tree: s.TypeName, scope: Scope) -> ir.Type:
        return self.named_type(tree.name, self.ctx.top if tree.dotted else scope, tree.loc)

    def visit_SpecializedTypeRef(self, tree: s.SpecializedTypeRef, scope: Scope) -> ir.Type:
        base = self.resolve_type(tree.base, scope)
        args = tuple(self.resolve_type(a, scope) for a in tree.args)
        if isinstance(base, ir.ExternType):
            decl = self.ctx.externs.get(base.name)
            if decl is not None and len(decl.type_params) != len(args):
                raise P4Error(
                    f"extern '{base.name}' expects {len(decl.type_params)} type arguments, "
                    f"got {len(args)}",
                    tree.loc,
                )
            return ir.ExternType(base.name, args)
        return SpecializedType(base, args)

    def visit_StackTypeRef(self, tree: s.StackTypeRef, scope: Scope) -> ir.Type:
        loc = tree.loc
        elem = self.resolve_type(tree.elem, scope)
        size = self.ctx.exprs.const_int(tree.size, scope, "stack size")
        if not isinstance(ir.strip_newtype(elem), (ir.HeaderType, ir.HeaderUnionType)):
            raise P4Error(f"header stacks need a header element type, not {type_str(elem)}", loc)
        if size <= 0:
            raise P4Error(f"invalid header stack size {size}", loc)
        return ir.StackType(elem, size)

    def visit_TupleTypeRef(self, tree: s.TupleTypeRef, scope: Scope) -> ir.Type:
        return ir.TupleType(tuple(self.resolve_type(a, scope) for a in tree.elems))

    def named_type(self, name: str, scope: Scope, loc: ir.Loc) -> ir.Type:
        """The type a type name refers to."""
        t = scope.lookup_type(name)
        if t is None:
            raise P4Error(f"no type named '{name}'", loc)
        if isinstance(t, ir.ExternDecl):
            return ir.ExternType(t.name)
        if isinstance(t, (ir.ParserDecl, ir.ControlDecl)):
            return ir.BlockType(t)
        assert isinstance(t, ir.Type)
        return t

    def extern_decl(self, name: str, loc: ir.Loc) -> ir.ExternDecl:
        """The declaration of extern object type ``name``."""
        decl = self.ctx.externs.get(name)
        if decl is None:
            raise P4Error(f"no extern named '{name}'", loc)
        return decl

    def method_type_params(self, params: list[ir.Param]) -> list[str]:
        """Type parameters of the extern method overload with parameter list ``params``."""
        return self.ctx.method_info[id(params)][0]

    def method_return(self, params: list[ir.Param]) -> ir.Type:
        """Return type of the extern method overload with parameter list ``params``."""
        return self.ctx.method_info[id(params)][1]

    def type_param_scope(
        self, type_params: tuple[s.Ident, ...], scope: Scope
    ) -> tuple[list[str], Scope]:
        """Names of the type parameters ``type_params`` and a scope that knows them."""
        inner = scope.child()
        names: list[str] = []
        for tp in type_params:
            names.append(tp.name)
            inner.declare_type(tp.name, TypeVar(tp.name), tp.loc)
        return names, inner
