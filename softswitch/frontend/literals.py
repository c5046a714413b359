"""Literal and annotation-body decoding."""

from __future__ import annotations

import re

from softswitch import ir
from softswitch.errors import P4Error

_INT_RE = re.compile(r"^(?:(\d+)([ws]))?(0[xX]|0[oO]|0[bB]|0[dD])?([0-9a-fA-F_]+)$")
_BASES = {"0x": 16, "0o": 8, "0b": 2, "0d": 10}

#: Widest bit string a type, literal or constant shift may have (p4c's default limit).
MAX_WIDTH = 2048


def check_width(width: int, loc: ir.Loc, what: str = "bit string") -> None:
    """Refuse absurd widths up front (before anything is allocated for them)."""
    if width > MAX_WIDTH:
        raise P4Error(
            f"{what} of width {width} is too wide: at most {MAX_WIDTH} bits are supported", loc
        )


def parse_int(text: str, loc: ir.Loc) -> ir.Const:
    """``8w5``, ``16w0x10``, ``8s5``, ``0b1010``, ``1_000`` -> a typed :class:`ir.Const`."""
    m = _INT_RE.match(text)
    if m is None:
        raise P4Error(f"invalid integer literal '{text}'", loc)
    width_s, kind, base_s, digits = m.groups()
    base = _BASES[base_s.lower()] if base_s else 10
    try:
        value = int(digits.replace("_", ""), base)
    except ValueError:
        raise P4Error(f"invalid integer literal '{text}'", loc) from None
    if width_s is None:
        return ir.Const(ir.IntLitType(), loc, value)
    if len(width_s) > 6:
        raise P4Error(
            f"integer literal '{text[:20]}...' is too wide: at most {MAX_WIDTH} bits are supported",
            loc,
        )
    width = int(width_s)
    check_width(width, loc, "integer literal")
    signed = kind == "s"
    if width <= 0 or (signed and width < 1):
        raise P4Error(f"invalid width {width} in integer literal '{text}'", loc)
    return ir.Const(ir.BitType(width, signed), loc, value & ((1 << width) - 1))


def unescape(text: str) -> str:
    """Body of a string literal token (without quotes, with C escapes decoded)."""
    body = text[1:-1]
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "0": "\0"}
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(simple.get(body[i + 1], body[i + 1]))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def split_top_level(body: str) -> list[str]:
    """Split an annotation body at commas that are not inside brackets or strings."""
    parts: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == '"':
            j = i + 1
            while j < len(body) and body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return [p.strip() for p in parts]


def annotation_values(body: str | None) -> list[object]:
    """``"x"`` -> ["x"]; ``5`` -> [5]; anything else is kept as its raw text."""
    if body is None or not body.strip():
        return []
    values: list[object] = []
    for part in split_top_level(body):
        if len(part) >= 2 and part[0] == '"' and part[-1] == '"' and part.count('"') == 2:
            values.append(unescape(part))
            continue
        m = _INT_RE.match(part)
        if m is not None:
            try:
                values.append(parse_int(part, ir.NOLOC).value)
                continue
            except P4Error:
                pass
        values.append(part)
    return values
