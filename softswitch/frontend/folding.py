"""Constant folding with P4's fixed-width arithmetic (wrap-around, two's complement)."""

from __future__ import annotations

import operator
from collections.abc import Callable

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend.literals import MAX_WIDTH


def mask(value: int, width: int) -> int:
    """``value`` reduced to ``width`` bits (two's complement for negatives)."""
    return value & ((1 << width) - 1)


def as_signed(value: int, width: int) -> int:
    """Interpret a ``width``-bit pattern as a signed number."""
    value = mask(value, width)
    return value - (1 << width) if value >> (width - 1) else value


def _value(c: ir.Const) -> int:
    """Mathematical value of a constant (signed types interpreted as signed)."""
    t = ir.strip_newtype(c.type)
    if isinstance(t, ir.BitType) and t.signed:
        return as_signed(c.value, t.width)
    return c.value


def _make(t: ir.Type, value: int, loc: ir.Loc) -> ir.Const:
    st = ir.strip_newtype(t)
    if isinstance(st, ir.BitType):
        return ir.Const(st, loc, mask(value, st.width))
    return ir.Const(ir.IntLitType(), loc, value)


def fold_unary(op: str, e: ir.Const, loc: ir.Loc) -> ir.Const:
    """Fold ``-e`` or ``~e``."""
    t = ir.strip_newtype(e.type)
    if op == "-":
        return _make(t, -_value(e), loc)
    if isinstance(t, ir.BitType):
        return _make(t, ~e.value, loc)
    return _make(t, ~e.value, loc)


def fold_binary(
    op: str, a: ir.Const | ir.BoolConst, b: ir.Const | ir.BoolConst, loc: ir.Loc
) -> ir.Expr:
    """Fold a binary operation on two constants of unified types (shifts: any widths)."""
    if isinstance(a, ir.BoolConst) or isinstance(b, ir.BoolConst):
        if op not in ("==", "!="):
            raise P4Error(f"'{op}' cannot be applied to bool operands", loc)
        return ir.BoolConst(ir.BoolType(), loc, _COMPARISONS[op](a.value, b.value))
    t = ir.strip_newtype(a.type)
    x, y = _value(a), _value(b)
    if op in _COMPARISONS:
        return ir.BoolConst(ir.BoolType(), loc, _COMPARISONS[op](x, y))
    if op in _ARITHMETIC:
        return _make(t, _ARITHMETIC[op](x, y), loc)
    if op in ("/", "%"):
        return _make(t, _divide(op, x, y, loc), loc)
    if op == "<<":
        return _shift_left(t, x, b.value, loc)
    if op == ">>":
        return _make(t, x >> b.value, loc)
    if op in ("|+|", "|-|") and isinstance(t, ir.BitType):
        return _make(t, _saturate(t, x + y if op == "|+|" else x - y), loc)
    raise P4Error(f"cannot fold operator '{op}'", loc)


_COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
    "<=": operator.le, ">=": operator.ge,
}
_ARITHMETIC: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
}


def _divide(op: str, x: int, y: int, loc: ir.Loc) -> int:
    """``x / y`` or ``x % y``: defined on non-negative values, never by zero."""
    if y == 0:
        raise P4Error("division by zero", loc)
    if x < 0 or y < 0:
        raise P4Error(f"'{op}' is not defined on negative values", loc)
    return x // y if op == "/" else x % y


def _shift_left(t: ir.Type, x: int, amount: int, loc: ir.Loc) -> ir.Expr:
    """``x << amount``: every bit of a fixed width shifted out is 0 (no huge intermediate);
    an unsized result may not exceed the widest supported value."""
    if isinstance(t, ir.BitType) and amount >= t.width:
        return _make(t, 0, loc)
    if not isinstance(t, ir.BitType) and x and amount + x.bit_length() > MAX_WIDTH:
        raise P4Error(f"{x} << {amount} is too wide: at most {MAX_WIDTH} bits are supported", loc)
    return _make(t, x << amount, loc)


def _saturate(t: ir.BitType, r: int) -> int:
    """``r`` clamped to the range of ``t`` (saturating ``|+|``/``|-|``)."""
    if t.signed:
        lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    else:
        lo, hi = 0, (1 << t.width) - 1
    return min(max(r, lo), hi)


def fold_cast(e: ir.Const | ir.BoolConst, dst: ir.Type, loc: ir.Loc) -> ir.Expr:
    """Fold ``(dst) e`` for numeric and bool constants."""
    if isinstance(dst, ir.BoolType):
        return ir.BoolConst(ir.BoolType(), loc, bool(e.value))
    if isinstance(e, ir.BoolConst):
        return _make(dst, int(e.value), loc)
    src = ir.strip_newtype(e.type)
    if (
        isinstance(dst, ir.BitType)
        and isinstance(src, ir.BitType)
        and src.signed
        and dst.width > src.width
    ):
        # widening a signed value sign-extends
        return _make(dst, as_signed(e.value, src.width), loc)
    return _make(dst, _value(e) if isinstance(src, ir.IntLitType) else e.value, loc)
