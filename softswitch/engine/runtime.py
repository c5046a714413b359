"""Helpers that the generated per-program code calls at run time.

The code generator (:mod:`softswitch.engine.codegen`) inlines everything that is cheap to
inline (field access, arithmetic, table dispatch); what is left here is either rare (parser
errors, ``exit``, signed arithmetic corner cases) or too long to repeat at every use
(bit packing for hashes and checksums, header stacks).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any


class ParserReject(Exception):
    """Raised inside a parser to stop it with error code ``code`` (an index into
    ``Program.errors``); the generated parser function catches it."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class P4Exit(Exception):
    """``exit`` — unwinds to the control block the architecture invoked."""


class P4AssertionFailed(Exception):
    """``assert``/``assume`` with a false condition (BMv2 aborts; we drop the packet)."""


class Stack:
    """A header stack: ``h`` holds the element objects, ``n`` is ``nextIndex``."""

    __slots__ = ("h", "n")

    def __init__(self, elems: list[Any]) -> None:
        self.h = elems
        self.n = 0

    @property
    def size(self) -> int:
        return len(self.h)

    def _copy(self) -> Stack:
        c = Stack([e._copy() for e in self.h])
        c.n = self.n
        return c

    def _set(self, other: Stack) -> None:
        for mine, theirs in zip(self.h, other.h, strict=False):
            mine._set(theirs)
        self.n = other.n

    def _reset(self) -> None:
        for e in self.h:
            e._reset()
        self.n = 0

    def _eq(self, other: Stack) -> bool:
        return all(a._eq(b) for a, b in zip(self.h, other.h, strict=False))

    def push_front(self, count: int) -> None:
        """Shift elements up by ``count``; the first ``count`` become invalid."""
        h = self.h
        size = len(h)
        for i in range(size - 1, -1, -1):
            if i >= count:
                h[i]._set(h[i - count])
            else:
                h[i]._reset()
        self.n = min(self.n + count, size)

    def pop_front(self, count: int) -> None:
        """Shift elements down by ``count``; the last ``count`` become invalid."""
        h = self.h
        size = len(h)
        for i in range(size):
            if i + count < size:
                h[i]._set(h[i + count])
            else:
                h[i]._reset()
        self.n = max(self.n - count, 0)


def stack_next(stk: Stack, err: int) -> Any:
    """``stk.next`` in a parser; past the end is error.StackOutOfBounds."""
    if stk.n >= len(stk.h):
        raise ParserReject(err)
    return stk.h[stk.n]


def stack_last(stk: Stack, err: int) -> Any:
    """``stk.last``; an empty stack is error.StackOutOfBounds."""
    if stk.n == 0:
        raise ParserReject(err)
    return stk.h[stk.n - 1]


def stack_at(stk: Stack, index: int, spare: Any) -> Any:
    """``stk[i]`` with a run-time index: out of bounds reads/writes go to a spare
    element (P4 leaves them undefined; BMv2 would log an error)."""
    if 0 <= index < len(stk.h):
        return stk.h[index]
    spare._reset()
    return spare


def stack_at_parser(stk: Stack, index: int, err: int) -> Any:
    """``stk[i]`` with a run-time index in a parser: out of range is
    error.StackOutOfBounds (the parser stops and the packet goes on to ingress)."""
    if 0 <= index < len(stk.h):
        return stk.h[index]
    raise ParserReject(err)


def sext(value: int, width: int) -> int:
    """Two's-complement bit pattern -> Python signed int."""
    if value >> (width - 1):
        return value - (1 << width)
    return value


def shl(value: int, amount: int, width: int) -> int:
    """``value << amount`` on ``bit<width>`` without building huge ints."""
    if amount >= width:
        return 0
    return (value << amount) & ((1 << width) - 1)


def sshr(value: int, amount: int, width: int) -> int:
    """Arithmetic shift right of a signed pattern."""
    if amount >= width:
        amount = width - 1
    return (sext(value, width) >> amount) & ((1 << width) - 1)


def udiv(a: int, b: int) -> int:
    """Unsigned division; division by zero gives 0 (undefined in P4)."""
    return a // b if b else 0


def umod(a: int, b: int) -> int:
    """Unsigned modulo; modulo zero gives 0 (undefined in P4)."""
    return a % b if b else 0


def sdiv(a: int, b: int, width: int) -> int:
    """Signed division truncating toward zero, as a bit pattern."""
    x, y = sext(a, width), sext(b, width)
    if y == 0:
        return 0
    q = abs(x) // abs(y)
    if (x < 0) != (y < 0):
        q = -q
    return q & ((1 << width) - 1)


def smod(a: int, b: int, width: int) -> int:
    """Signed remainder (sign of the dividend), as a bit pattern."""
    x, y = sext(a, width), sext(b, width)
    if y == 0:
        return 0
    r = abs(x) % abs(y)
    if x < 0:
        r = -r
    return r & ((1 << width) - 1)


def ssat_add(a: int, b: int, width: int) -> int:
    """Saturating signed addition."""
    r = sext(a, width) + sext(b, width)
    hi = (1 << (width - 1)) - 1
    lo = -(1 << (width - 1))
    return max(lo, min(hi, r)) & ((1 << width) - 1)


def ssat_sub(a: int, b: int, width: int) -> int:
    """Saturating signed subtraction."""
    r = sext(a, width) - sext(b, width)
    hi = (1 << (width - 1)) - 1
    lo = -(1 << (width - 1))
    return max(lo, min(hi, r)) & ((1 << width) - 1)


def pack_bits(fields: tuple[tuple[int, int], ...]) -> bytes:
    """Concatenate ``(value, width)`` pairs MSB first into bytes, zero-padding the last
    byte on the right — how BMv2 builds the input of hashes and checksums."""
    acc = 0
    nbits = 0
    for value, width in fields:
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = (-nbits) % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


@dataclass(slots=True)
class PacketCtx:
    """Per-packet state that externs touch beyond the P4-visible objects: the raw bytes,
    the parser position, and the v1model "registers" BMv2 keeps beside the PHV."""

    data: bytes = b""
    pos: int = 0  # bytes consumed by the parser
    ingress_length: int = 0  # frame length as received (direct counters, meters)
    length_reg: int = 0  # BMv2's PACKET_LENGTH register, adjusted by setValid/setInvalid
    checksum_error: int = 0
    clone_session: int | None = None
    clone_fl: int | None = None
    resubmit_fl: int | None = None  # -1: resubmit without field list
    recirculate_fl: int | None = None
    digest: tuple[str, tuple[int, ...]] | None = None
    truncate: int = 0
    meter_color: int = 0  # last direct meter result

    @property
    def payload(self) -> bytes:
        """The bytes the parser did not consume."""
        return self.data[self.pos :]


def crc32(data: bytes) -> int:
    """BMv2 ``crc32`` (IEEE 802.3, as zlib)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def csum16_int(value: int, nbytes: int) -> int:
    """BMv2 ``csum16`` (RFC 1071) of the ``nbytes``-byte big-endian string ``value``.

    The ones'-complement sum of 16-bit words equals the number modulo 0xFFFF (2^16 is 1
    there), except that a non-zero input never sums to 0 but to 0xFFFF; an odd length is
    padded with a zero byte on the right.
    """
    if nbytes & 1:
        value <<= 8
    r = value % 0xFFFF
    if r == 0 and value:
        r = 0xFFFF
    return 0xFFFF - r


def csum16_payload(value: int, nbytes: int, payload: bytes) -> int:
    """``csum16`` of ``nbytes`` bytes given as an integer followed by ``payload``."""
    n = len(payload)
    return csum16_int((value << (8 * n)) | int.from_bytes(payload, "big"), nbytes + n)


def lookahead_bits(data: bytes, pos: int, width: int, err: int) -> int:
    """``lookahead<bit<width>>()`` at byte ``pos``; too few bytes is ``err``."""
    nbytes = (width + 7) // 8
    if pos + nbytes > len(data):
        raise ParserReject(err)
    return int.from_bytes(data[pos : pos + nbytes], "big") >> (nbytes * 8 - width)


def advance(data: bytes, pos: int, nbits: int, err: int) -> int:
    """``advance(nbits)``: the new byte position (whole bytes, as BMv2)."""
    end = pos + (nbits >> 3)
    if end > len(data):
        raise ParserReject(err)
    return end
