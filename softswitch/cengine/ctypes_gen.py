"""C types of a program's values: one C struct per header/struct type, ``uint64_t`` for
every scalar of at most 64 bits and ``wide_t`` (a fixed array of 64-bit words) above.

Scalars are kept canonical: a ``bit<W>`` value never has bits above W set, an ``int<W>``
is its W-bit two's-complement pattern (sign-extended only where an operation needs the
sign), a bool is 0 or 1.
"""

from __future__ import annotations

from softswitch import ir
from softswitch.cengine.errors import CUnsupported

MAX_WIDE_BITS = 1024  # widest scalar the C back end takes (wide_t is sized per program)


def strip(t: ir.Type) -> ir.Type:
    return ir.strip_newtype(t)


def scalar_width(t: ir.Type) -> int:
    """Bits of a scalar type (bool 1, error 32, a plain enum 32)."""
    t = strip(t)
    if isinstance(t, ir.BitType):
        return t.width
    if isinstance(t, ir.BoolType):
        return 1
    if isinstance(t, ir.EnumType):
        return t.underlying.width if t.underlying is not None else 32
    if isinstance(t, (ir.ErrorType, ir.MatchKindType, ir.IntLitType)):
        return 32 if not isinstance(t, ir.IntLitType) else 64
    raise CUnsupported(f"a value of type {type(t).__name__}")


def is_scalar(t: ir.Type) -> bool:
    t = strip(t)
    return isinstance(
        t, (ir.BitType, ir.BoolType, ir.EnumType, ir.ErrorType, ir.MatchKindType, ir.IntLitType)
    )


def is_wide(t: ir.Type) -> bool:
    t = strip(t)
    return isinstance(t, ir.BitType) and t.width > 64


def is_signed(t: ir.Type) -> bool:
    t = strip(t)
    return isinstance(t, ir.BitType) and t.signed


def c_ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


class CTypes:
    """The struct declarations of one program, in dependency order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._names: dict[int, str] = {}
        self._used: set[str] = set()
        self.max_bits = 128

    def ctype(self, t: ir.Type) -> str:
        """The C type of values of ``t``."""
        t = strip(t)
        if isinstance(t, ir.BitType):
            if t.width > 64:
                if t.width > MAX_WIDE_BITS:
                    raise CUnsupported(f"bit<{t.width}> (wider than {MAX_WIDE_BITS} bits)")
                self.max_bits = max(self.max_bits, t.width)
                return "wide_t"
            return "uint64_t"
        if is_scalar(t):
            return "uint64_t"
        if isinstance(t, (ir.HeaderType, ir.StructType)):
            return self._struct(t)
        if isinstance(t, ir.StackType):
            return self._stack(t)
        if isinstance(t, ir.HeaderUnionType):
            return self._struct(t)
        if isinstance(t, ir.VarbitType):
            return self._varbit(t)
        if isinstance(t, ir.TupleType):
            return self._tuple(t)
        raise CUnsupported(f"values of type {type(t).__name__}")

    def _tuple(self, t: ir.TupleType) -> str:
        """A tuple's elements as fields ``e0``, ``e1``, ...; tuples of the same element
        types share one C type."""
        elems = [self.ctype(x) for x in t.elems]
        name = "T_" + "_".join(c_ident(e) for e in elems) if elems else "T_empty"
        if name not in self._used:
            self._used.add(name)
            fields = (
                "".join(f"    {e} e{i};\n" for i, e in enumerate(elems)) or "    uint64_t _pad;\n"
            )
            self.lines.append(f"typedef struct {{\n{fields}}} {name};")
        return name

    def _stack(self, t: ir.StackType) -> str:
        """``h[N]`` plus one spare element (what an out-of-range index reaches) and
        ``n`` (nextIndex)."""
        elem = self.ctype(t.elem)
        name = f"STK_{elem}_{t.size}"
        if name not in self._used:
            self._used.add(name)
            self.lines.append(
                f"typedef struct {{\n    {elem} h[{t.size + 1}];\n    uint64_t n;\n}} {name};"
            )
        return name

    def _varbit(self, t: ir.VarbitType) -> str:
        """The current width in bits and the bytes, big-endian, left-aligned."""
        nbytes = (t.max_width + 7) // 8
        name = f"VB_{nbytes}"
        if name not in self._used:
            self._used.add(name)
            self.lines.append(
                f"typedef struct {{\n    uint64_t nbits;\n    uint8_t b[{max(1, nbytes)}];\n"
                f"}} {name};"
            )
        return name

    def _struct(self, t: ir.HeaderType | ir.StructType | ir.HeaderUnionType) -> str:
        name = self._names.get(id(t))
        if name is not None:
            return name
        prefix = {ir.HeaderType: "H", ir.HeaderUnionType: "U"}.get(type(t), "S")
        base = f"{prefix}_{c_ident(t.name)}"
        name = base
        n = 1
        while name in self._used:
            n += 1
            name = f"{base}_{n}"
        self._used.add(name)
        fields = [f"    {self.ctype(f.type)} f_{c_ident(f.name)};" for f in t.fields]
        if isinstance(t, ir.HeaderType):
            fields.append("    uint64_t _v;")
            if t.bit_width % 8:
                fields.append("    uint64_t _pad;  /* p4c's padding to whole bytes */")
        if not fields:
            fields.append("    uint64_t _pad;")
        self.lines.append(f"typedef struct {{\n{chr(10).join(fields)}\n}} {name};")
        self._names[id(t)] = name
        return name

    @property
    def words(self) -> int:
        """64-bit words of ``wide_t``."""
        return max(2, (self.max_bits + 63) // 64)


def field(name: str) -> str:
    """The C member name of a P4 field."""
    return f"f_{c_ident(name)}"
