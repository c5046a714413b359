"""Key sets of parser select cases and table entries."""

from __future__ import annotations

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import syntax as s
from softswitch.frontend.scope import Scope
from softswitch.frontend.typeops import type_str
from softswitch.frontend.visitor import Visitor


class KeysetChecker(Visitor):
    """Checks key sets against the key types into :class:`ir.Keyset` values."""

    def keysets(
        self, tree: s.Keyset, types: list[ir.Type], scope: Scope, what: str
    ) -> list[ir.Keyset]:
        """A select case / entry key set: one keyset per expression."""
        loc = tree.loc
        if isinstance(tree, s.TupleKeyset):
            return self.tuple_keysets(list(tree.items), types, scope, what, loc)
        if isinstance(tree, (s.DefaultKeyset, s.DontCareExpr)):
            return [ir.KeysetDefault(loc) for _ in types]
        if len(types) != 1:
            if isinstance(tree, s.ListExpr):
                return self.tuple_keysets(list(tree.items), types, scope, what, loc)
            raise P4Error(f"{what} has 1 element, but {len(types)} are expected", loc)
        return [self.simple_keyset(tree, types[0], scope, what)]

    def tuple_keysets(
        self, elems: list[s.Keyset], types: list[ir.Type], scope: Scope, what: str, loc: ir.Loc
    ) -> list[ir.Keyset]:
        """``(k1, k2, ...)``: one keyset per key (a lone ``default`` covers them all)."""
        if len(elems) == 1 and len(types) != 1 and isinstance(elems[0], s.DefaultKeyset):
            return [ir.KeysetDefault(loc) for _ in types]
        if len(elems) != len(types):
            raise P4Error(f"{what} has {len(elems)} elements, but {len(types)} are expected", loc)
        return [self.simple_keyset(e, t, scope, what) for e, t in zip(elems, types, strict=False)]

    def simple_keyset(self, tree: s.Keyset, t: ir.Type, scope: Scope, what: str) -> ir.Keyset:
        """One keyset element: value, ``v &&& m``, ``lo .. hi``, ``default`` or ``_``."""
        result: ir.Keyset = self.visit(tree, t, scope, what)
        return result

    def visit_DefaultKeyset(
        self, tree: s.DefaultKeyset, t: ir.Type, scope: Scope, what: str
    ) -> ir.Keyset:
        return ir.KeysetDefault(tree.loc)

    def visit_DontCareExpr(
        self, tree: s.DontCareExpr, t: ir.Type, scope: Scope, what: str
    ) -> ir.Keyset:
        return ir.KeysetDefault(tree.loc)

    def visit_MaskKeyset(
        self, tree: s.MaskKeyset, t: ir.Type, scope: Scope, what: str
    ) -> ir.Keyset:
        st = ir.strip_newtype(t)
        # the mask of a serializable enum key is a plain number of the underlying type
        mt = st.underlying if isinstance(st, ir.EnumType) and st.underlying is not None else t
        value = self.key_value(tree.value, t, scope, what)
        return ir.KeysetMask(value, self.key_value(tree.mask, mt, scope, what), tree.loc)

    def visit_RangeKeyset(
        self, tree: s.RangeKeyset, t: ir.Type, scope: Scope, what: str
    ) -> ir.Keyset:
        low = self.key_value(tree.low, t, scope, what)
        return ir.KeysetRange(low, self.key_value(tree.high, t, scope, what), tree.loc)

    def visit_other(self, tree: s.Keyset, t: ir.Type, scope: Scope, what: str) -> ir.Keyset:
        """A value (any other expression)."""
        assert isinstance(tree, s.Expr)  # the grammar nests no tuple in a tuple
        return ir.KeysetValue(self.key_value(tree, t, scope, what), tree.loc)

    def key_value(self, tree: s.Expr, t: ir.Type, scope: Scope, what: str) -> int:
        """A constant of a keyset, as the integer the engine compares with."""
        loc = tree.loc
        e = self.ctx.exprs.expr(tree, scope, t)
        st = ir.strip_newtype(t)
        try:
            e = self.ctx.exprs.convert(e, t, loc, what)
        except P4Error:
            raise P4Error(
                f"{what}: value of type {type_str(e.type)} does not match the key type "
                f"{type_str(t)}",
                loc,
            ) from None
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.BoolConst):
            return int(e.value)
        if isinstance(e, ir.ErrorMember):
            return e.code
        if isinstance(e, ir.EnumMember) and isinstance(st, ir.EnumType):
            return st.values[e.member] if st.underlying is not None else st.members.index(e.member)
        raise P4Error(f"{what}: key set values must be compile-time constants", loc)
