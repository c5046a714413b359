"""P4Runtime binary strings <-> ints.

Requests may carry a value in canonical form (no leading zero bytes) or padded with zeros;
either is accepted when the number fits the declared width. An empty string or a number
wider than the field is INVALID_ARGUMENT: the specification's sections on match fields,
action parameters and register data prescribe that code for values that break the
bytestring rules (its generic bytestring section says OUT_OF_RANGE; the specific rules
win, and BMv2 answers INVALID_ARGUMENT too). Responses always use the canonical form,
whose shortest encoding of zero is one zero byte.
"""

from __future__ import annotations

from softswitch.p4runtime.status import invalid


def decode(value: bytes, width: int, what: str) -> int:
    """The int in ``value`` after checking it fits ``width`` bits; ``what`` names it in errors."""
    if not value:
        raise invalid(f"{what}: empty byte string")
    n = int.from_bytes(value, "big")
    if width > 0 and n >> width:
        raise invalid(f"{what}: value 0x{value.hex()} does not fit in {width} bits")
    return n


def encode(n: int) -> bytes:
    """Canonical binary string of a non-negative int."""
    if n <= 0:
        return b"\x00"
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


def encode_width(n: int, width: int) -> bytes:
    """Fixed-size big-endian encoding in ``ceil(width/8)`` bytes (for packing headers)."""
    return n.to_bytes(max(1, (width + 7) // 8), "big")


def unpack_fields(data: bytes, widths: list[int]) -> list[int]:
    """Inverse of :func:`softswitch.engine.externs.pack_fields` on the first
    ``ceil(sum(widths)/8)`` bytes of data."""
    total = sum(widths)
    nbytes = (total + 7) // 8
    acc = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - total)
    out: list[int] = []
    shift = total
    for width in widths:
        shift -= width
        out.append((acc >> shift) & ((1 << width) - 1))
    return out
