"""Constant folding with P4's fixed-width arithmetic (wrap-around, two's complement)."""

from __future__ import annotations

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
        av, bv = a.value, b.value
        if op == "==":
            return ir.BoolConst(ir.BoolType(), loc, av == bv)
        if op == "!=":
            return ir.BoolConst(ir.BoolType(), loc, av != bv)
        raise P4Error(f"'{op}' cannot be applied to bool operands", loc)
    t = ir.strip_newtype(a.type)
    x, y = _value(a), _value(b)
    if op in ("==", "!=", "<", ">", "<=", ">="):
        holds = {"==": x == y, "!=": x != y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
        return ir.BoolConst(ir.BoolType(), loc, holds)
    if op == "+":
        return _make(t, x + y, loc)
    if op == "-":
        return _make(t, x - y, loc)
    if op == "*":
        return _make(t, x * y, loc)
    if op in ("/", "%"):
        if y == 0:
            raise P4Error("division by zero", loc)
        if x < 0 or y < 0:
            raise P4Error(f"'{op}' is not defined on negative values", loc)
        return _make(t, x // y if op == "/" else x % y, loc)
    if op == "&":
        return _make(t, x & y, loc)
    if op == "|":
        return _make(t, x | y, loc)
    if op == "^":
        return _make(t, x ^ y, loc)
    if op == "<<":
        if isinstance(t, ir.BitType) and b.value >= t.width:
            return _make(t, 0, loc)  # every bit shifted out (no huge intermediate)
        if not isinstance(t, ir.BitType) and x and b.value + x.bit_length() > MAX_WIDTH:
            raise P4Error(
                f"{x} << {b.value} is too wide: at most {MAX_WIDTH} bits are supported", loc
            )
        return _make(t, x << b.value, loc)
    if op == ">>":
        return _make(t, x >> b.value, loc)
    if op in ("|+|", "|-|") and isinstance(t, ir.BitType):
        r = x + y if op == "|+|" else x - y
        if t.signed:
            lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
        else:
            lo, hi = 0, (1 << t.width) - 1
        return _make(t, min(max(r, lo), hi), loc)
    raise P4Error(f"cannot fold operator '{op}'", loc)


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
