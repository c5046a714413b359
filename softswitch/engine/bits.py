"""Width helpers for run-time values.

Every run-time value is a non-negative Python ``int`` already masked to its width; a signed
``int<W>`` is kept as its two's-complement bit pattern. These helpers are called from the
generated pipeline code, so they stay tiny and branch-light.
"""

from __future__ import annotations


def mask(width: int) -> int:
    """All-ones value of ``width`` bits (0 for width 0)."""
    return (1 << width) - 1


def to_signed(value: int, width: int) -> int:
    """Interpret the ``width``-bit pattern ``value`` as a two's-complement integer."""
    if width == 0:
        return 0
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def from_signed(value: int, width: int) -> int:
    """Two's-complement bit pattern of the (possibly negative) integer ``value``, wrapped."""
    return value & ((1 << width) - 1)


def sat_add_u(a: int, b: int, width: int) -> int:
    """Unsigned saturating ``a |+| b``: clamps at the all-ones value."""
    s = a + b
    m = (1 << width) - 1
    return m if s > m else s


def sat_sub_u(a: int, b: int, width: int) -> int:
    """Unsigned saturating ``a |-| b``: clamps at 0."""
    return a - b if a > b else 0


def sat_add_s(a: int, b: int, width: int) -> int:
    """Signed saturating ``a |+| b`` on bit patterns; the result is a bit pattern."""
    if width == 0:
        return 0
    s = to_signed(a, width) + to_signed(b, width)
    hi = (1 << (width - 1)) - 1
    lo = -(1 << (width - 1))
    if s > hi:
        s = hi
    elif s < lo:
        s = lo
    return s & ((1 << width) - 1)


def sat_sub_s(a: int, b: int, width: int) -> int:
    """Signed saturating ``a |-| b`` on bit patterns; the result is a bit pattern."""
    if width == 0:
        return 0
    s = to_signed(a, width) - to_signed(b, width)
    hi = (1 << (width - 1)) - 1
    lo = -(1 << (width - 1))
    if s > hi:
        s = hi
    elif s < lo:
        s = lo
    return s & ((1 << width) - 1)


def shl(value: int, shift: int, width: int) -> int:
    """``value << shift`` truncated to ``width`` (P4: shifts by >= width give 0)."""
    if shift >= width:
        return 0
    return (value << shift) & ((1 << width) - 1)


def ashr(value: int, shift: int, width: int) -> int:
    """Arithmetic right shift of a signed ``width``-bit pattern (sign bits shift in)."""
    if width == 0:
        return 0
    if shift >= width:
        return ((1 << width) - 1) if value >> (width - 1) else 0
    return (to_signed(value, width) >> shift) & ((1 << width) - 1)


def get_slice(value: int, hi: int, lo: int) -> int:
    """``value[hi:lo]`` (inclusive bounds, as in P4)."""
    return (value >> lo) & ((1 << (hi - lo + 1)) - 1)


def set_slice(value: int, hi: int, lo: int, part: int) -> int:
    """``value`` with bits ``[hi:lo]`` replaced by ``part`` (truncated to the slice width)."""
    m = ((1 << (hi - lo + 1)) - 1) << lo
    return (value & ~m) | ((part << lo) & m)


def concat(a: int, b: int, width_b: int) -> int:
    """``a ++ b`` where ``b`` has ``width_b`` bits."""
    return (a << width_b) | b


def int_to_bytes(value: int, width: int) -> bytes:
    """Big-endian bytes of a ``width``-bit value, ``ceil(width / 8)`` long."""
    return (value & ((1 << width) - 1)).to_bytes((width + 7) >> 3, "big")


def bytes_to_int(data: bytes) -> int:
    """Big-endian ``bytes`` as an unsigned integer."""
    return int.from_bytes(data, "big")
