"""Python classes for P4 headers, structs and header unions, generated as source text.

Each composite type becomes one class with ``__slots__`` (fields as plain ints, nested
composites as objects, a ``_v`` validity flag for headers). Headers get byte-exact
``_ext`` (parse) and ``_pack`` (deparse) methods built from shifts and masks, so no
per-field loop runs per packet. Composite values keep their identity: an assignment copies
into the existing object (``_set``), which is what keeps references held by the generated
code valid.
"""

from __future__ import annotations

import keyword
import weakref

from softswitch import ir
from softswitch.errors import UnsupportedError

_RESERVED = {"h", "n"}  # Stack attributes; header/struct helpers all start with "_"


def attr(name: str) -> str:
    """The Python attribute name for a P4 field name."""
    if keyword.iskeyword(name) or name.startswith("_") or keyword.issoftkeyword(name):
        return "f_" + name
    return name


def scalar_width(t: ir.Type) -> int:
    """Bit width of a scalar type as it is serialised (bool 1, error/enum 32)."""
    t = ir.strip_newtype(t)
    if isinstance(t, ir.BitType):
        return t.width
    if isinstance(t, ir.BoolType):
        return 1
    if isinstance(t, ir.EnumType):
        return t.underlying.width if t.underlying is not None else 32
    if isinstance(t, ir.ErrorType):
        return 32
    raise UnsupportedError(f"a field of type {type(t).__name__} here")


#: Headers of at least this many fields of one byte-aligned width are held as one array
#: (payloads such as netreduce's elements; softswitch.engine.codegen_vector).
VECTOR_MIN_FIELDS = 128  # below, scalar fields are faster (docs/benchmarks.md)
_VECTOR_DTYPES = {8: ">u1", 16: ">u2", 32: ">u4"}


def vector_header_width(t: ir.HeaderType) -> int | None:
    """The field width of a header held as one ``int64`` array (``_a``), or None: at least
    ``VECTOR_MIN_FIELDS`` fields, all ``bit<W>``/``int<W>`` with the same W of 8, 16 or 32.
    Asked once per field access of a vectorised block (thousands of times for netreduce's
    256 elements, a third of a pipeline load), so the answer is kept per header type."""
    return _vector_layout(t)[0]


def vector_field_index(t: ir.HeaderType, name: str) -> int | None:
    """The index of field ``name`` in the array of a vectorised header ``t`` (None when ``t``
    is not held as one array or has no such field)."""
    width, index = _vector_layout(t)
    return None if width is None else index.get(name)


_LAYOUTS: weakref.WeakKeyDictionary[ir.HeaderType, tuple[int | None, dict[str, int]]] = (
    weakref.WeakKeyDictionary()
)


def _vector_layout(t: ir.HeaderType) -> tuple[int | None, dict[str, int]]:
    """(vector width or None, field name -> index), computed once per header type (IR types
    are not changed after the front end; they hash by identity)."""
    cached = _LAYOUTS.get(t)
    if cached is None:
        cached = (_vector_width(t.fields), {f.name: k for k, f in enumerate(t.fields)})
        _LAYOUTS[t] = cached
    return cached


def _vector_width(fields: list[ir.StructField]) -> int | None:
    if len(fields) < VECTOR_MIN_FIELDS:
        return None
    widths = set()
    for f in fields:
        ft = ir.strip_newtype(f.type)
        if not isinstance(ft, ir.BitType) or ft.width not in _VECTOR_DTYPES:
            return None
        widths.add(ft.width)
    if len(widths) != 1:
        return None
    return widths.pop()


def is_composite(t: ir.Type) -> bool:
    """True for types whose values are mutable objects (copied on assignment)."""
    t = ir.strip_newtype(t)
    return isinstance(t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType, ir.StackType))


class TypeRegistry:
    """Generates one class per composite type on first use and knows default values."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}
        self._keep: list[ir.Type] = []  # keeps ids stable
        self.lines: list[str] = []
        self._count = 0
        # module-level ``struct.Struct`` objects for byte-aligned headers: format -> name
        self.structs: dict[str, str] = {}

    # ----------------------------------------------------------------- public helpers

    def cls(self, t: ir.Type) -> str:
        """Class name for a header/struct/union type (generating it if needed)."""
        t = ir.strip_newtype(t)
        key = id(t)
        if key in self._names:
            return self._names[key]
        self._count += 1
        safe = "".join(ch if ch.isalnum() else "_" for ch in getattr(t, "name", "T"))
        name = f"C{self._count}_{safe}"
        self._names[key] = name
        self._keep.append(t)
        if isinstance(t, ir.HeaderType):
            self._gen_header(name, t)
        elif isinstance(t, ir.StructType):
            self._gen_struct(name, t)
        elif isinstance(t, ir.HeaderUnionType):
            self._gen_union(name, t)
        else:
            raise UnsupportedError(f"values of type {type(t).__name__}")
        return name

    def default(self, t: ir.Type) -> str:
        """Python expression building the default (zero / invalid) value of ``t``."""
        t = ir.strip_newtype(t)
        if isinstance(t, ir.BoolType):
            return "False"
        if isinstance(t, (ir.BitType, ir.IntLitType, ir.ErrorType, ir.EnumType)):
            return "0"
        if isinstance(t, ir.VarbitType):
            return "(0, 0)"
        if isinstance(t, ir.StackType):
            return f"_Stack([{self.default(t.elem)} for _ in range({t.size})])"
        if isinstance(t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType)):
            return f"{self.cls(t)}()"
        if isinstance(t, ir.TupleType):
            inner = "".join(self.default(e) + ", " for e in t.elems)
            return f"({inner})"
        if isinstance(t, ir.StringType):
            return "''"
        return "None"

    # ----------------------------------------------------------------- class builders

    def _field_default(self, f: ir.StructField) -> str:
        return self.default(f.type)

    def _common(
        self, name: str, fields: list[ir.StructField], extra_slots: list[str], extra_init: list[str]
    ) -> list[str]:
        slots = [attr(f.name) for f in fields] + extra_slots
        out = [f"class {name}:", f"    __slots__ = {tuple(slots)!r}"]
        out.append("    def __init__(self):")
        body = [f"        self.{attr(f.name)} = {self._field_default(f)}" for f in fields]
        body += extra_init
        out += body or ["        pass"]
        out.append("    def _reset(self):")
        # scalar fields with the same default in one chained assignment (one constant
        # load for all): this runs for every header of every packet
        resets = [f"        self.{attr(f.name)}._reset()" for f in fields if is_composite(f.type)]
        by_default: dict[str, list[str]] = {}
        for f in fields:
            if not is_composite(f.type):
                by_default.setdefault(self._field_default(f), []).append(f"self.{attr(f.name)}")
        for default, targets in by_default.items():
            if default in ("0", "False", "(0, 0)"):  # immutable: one object for all
                resets.append(f"        {' = '.join(targets)} = {default}")
            else:
                resets += [f"        {t} = {default}" for t in targets]
        resets += extra_init
        out += resets or ["        pass"]
        out.append("    def _copy(self):")
        out.append(f"        c = {name}.__new__({name})")
        for f in fields:
            a = attr(f.name)
            if is_composite(f.type):
                out.append(f"        c.{a} = self.{a}._copy()")
            else:
                out.append(f"        c.{a} = self.{a}")
        for s in extra_slots:
            out.append(f"        c.{s} = self.{s}")
        out.append("        return c")
        out.append("    def _set(self, o):")
        setters = []
        for f in fields:
            a = attr(f.name)
            if is_composite(f.type):
                setters.append(f"        self.{a}._set(o.{a})")
            else:
                setters.append(f"        self.{a} = o.{a}")
        setters += [f"        self.{s} = o.{s}" for s in extra_slots]
        out += setters or ["        pass"]
        return out

    def _eq_terms(self, fields: list[ir.StructField]) -> str:
        terms = []
        for f in fields:
            a = attr(f.name)
            if is_composite(f.type):
                terms.append(f"self.{a}._eq(o.{a})")
            else:
                terms.append(f"self.{a} == o.{a}")
        return " and ".join(terms) or "True"

    def _gen_struct(self, name: str, t: ir.StructType) -> None:
        for f in t.fields:  # nested classes first
            self._ensure(f.type)
        out = self._common(name, t.fields, [], [])
        out.append("    def _eq(self, o):")
        out.append(f"        return {self._eq_terms(t.fields)}")
        self.lines += out + [""]

    def _gen_union(self, name: str, t: ir.HeaderUnionType) -> None:
        for f in t.fields:
            self._ensure(f.type)
        out = self._common(name, t.fields, [], [])
        members = [attr(f.name) for f in t.fields]
        out.append("    def _valid(self):")
        out.append("        return " + (" or ".join(f"self.{m}._v" for m in members) or "False"))
        out.append("    def _only(self, keep):")
        out.append("        for m in " + repr(tuple(members)) + ":")
        out.append("            if m != keep:")
        out.append("                getattr(self, m)._v = False")
        out.append("    def _eq(self, o):")
        out.append(f"        return {self._eq_terms(t.fields)}")
        self.lines += out + [""]

    def _ensure(self, t: ir.Type) -> None:
        t = ir.strip_newtype(t)
        if isinstance(t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType)):
            self.cls(t)
        elif isinstance(t, ir.StackType):
            self._ensure(t.elem)

    def _gen_vector_header(self, name: str, t: ir.HeaderType, width: int) -> None:
        """A header held as one int64 array ``_a`` (the fields are properties over it for
        scalar code; array code in codegen_vector uses ``_a`` directly)."""
        n = len(t.fields)
        nbytes = n * width // 8
        dtype = _VECTOR_DTYPES[width]
        out = [f"class {name}:", "    __slots__ = ('_a', '_v')"]
        out += [f"    {attr(f.name)} = _vec_field({k})" for k, f in enumerate(t.fields)]
        out += [
            "    def __init__(self):",
            f"        self._a = _vec_zeros({n})",
            "        self._v = False",
            "    def _reset(self):",
            f"        self._a = _vec_zeros({n})",
            "        self._v = False",
            "    def _copy(self):",
            f"        c = {name}.__new__({name})",
            "        c._a = self._a.copy()",
            "        c._v = self._v",
            "        return c",
            "    def _set(self, o):",
            "        self._a = o._a.copy()",
            "        self._v = o._v",
            f"    _nbytes = {nbytes}",
            "    def _eq(self, o):",
            "        if self._v != o._v:",
            "            return False",
            "        return (not self._v) or bool((self._a == o._a).all())",
            "    def _ext(self, data, pos, err):",
            f"        end = pos + {nbytes}",
            "        if end > len(data):",
            "            raise _ParserReject(err)",
            f"        self._a = _vec_parse(data, pos, {n}, {dtype!r})",
            "        self._v = True",
            "        return end",
            "    def _pack(self):",
            f"        return self._a.astype({dtype!r}).tobytes()",
        ]
        self.lines += out + [""]

    def _gen_header(self, name: str, t: ir.HeaderType) -> None:
        width = vector_header_width(t)
        if width is not None:
            self._gen_vector_header(name, t, width)
            return
        fields = t.fields
        varbits = [f for f in fields if isinstance(ir.strip_newtype(f.type), ir.VarbitType)]
        if len(varbits) > 1:
            raise UnsupportedError("a header with more than one varbit field", t.loc)
        fixed_bits = t.bit_width
        if fixed_bits % 8 and varbits:
            raise UnsupportedError(
                f"header {t.name} with a varbit field and a size ({fixed_bits} bits) that is "
                "not a multiple of 8",
                t.loc,
            )
        layout = layout_fields(t)  # with p4c's padding field when not whole bytes
        wire = wire_fields(t)  # the same with struct-typed fields flattened
        nbytes = (fixed_bits + 7) // 8
        out = self._common(name, layout, ["_v"], ["        self._v = False"])
        out.append(f"    _nbytes = {nbytes}")
        out.append("    def _eq(self, o):")
        out.append("        if self._v != o._v:")
        out.append("            return False")
        out.append(f"        return (not self._v) or ({self._eq_terms(fields)})")
        if not varbits:
            out += self._fixed_ext_pack(wire, nbytes, self.struct_name(wire))
        else:
            out += self._varbit_ext_pack(wire, varbits[0], fixed_bits)
        self.lines += out + [""]

    def struct_name(self, fields: list[ir.StructField]) -> str | None:
        """Name of a module-level ``struct.Struct`` that (un)packs ``fields`` in one call,
        when every field is a whole 8/16/32/64-bit word (None otherwise). One C call
        instead of a shift and a mask per field on a wide integer: several times faster
        for headers such as a 32-element payload."""
        fmt = _struct_format(fields)
        if fmt is None:
            return None
        name = self.structs.get(fmt)
        if name is None:
            name = f"_S_{fmt[1:]}"
            self.structs[fmt] = name
        return name

    def struct_lines(self) -> list[str]:
        """Module-level definitions of the ``struct.Struct`` objects used (``_Struct`` is
        ``struct.Struct`` in the generated module's namespace)."""
        return [f"{name} = _Struct({fmt!r})" for fmt, name in self.structs.items()]

    @staticmethod
    def _fixed_ext_pack(fields: list[ir.StructField], nbytes: int, struct: str | None) -> list[str]:
        out = [
            "    def _ext(self, data, pos, err):",
            f"        end = pos + {nbytes}",
            "        if end > len(data):",
            "            raise _ParserReject(err)",
        ]
        if struct is not None:
            out.append("        " + _struct_extraction(fields, "self", struct, "data", "pos"))
        else:
            out += [
                "        " + x
                for x in _field_extraction(fields, nbytes, "self", "v", "data[pos:end]")
            ]
        out += ["        self._v = True", "        return end"]
        out.append("    def _pack(self):")
        if struct is not None:
            out.append(f"        return {_struct_pack(fields, 'self', struct)}")
        else:
            out.append(f"        return {_pack_expression(fields, nbytes, 'self')}")
        return out

    def fixed_size(self, t: ir.Type) -> int | None:
        """Byte size of a header type without varbit fields (None otherwise)."""
        t = ir.strip_newtype(t)
        if not isinstance(t, ir.HeaderType):
            return None
        if any(isinstance(ir.strip_newtype(f.type), ir.VarbitType) for f in t.fields):
            return None
        return (t.bit_width + 7) // 8

    def inline_extract(
        self, t: ir.HeaderType, h: str, data: str, pos: str, err: int, v: str
    ) -> list[str]:
        """Statements extracting header ``h`` (of type ``t``) at ``pos`` and advancing
        ``pos`` (what ``_ext`` does, without the method call)."""
        nbytes = self.fixed_size(t) or 0
        out = [
            f"if {pos} + {nbytes} > len({data}):",
            f"    raise _ParserReject({err})",
        ]
        width = vector_header_width(t)
        if width is not None:
            n = len(t.fields)
            return out + [
                f"{h}._a = _vec_parse({data}, {pos}, {n}, {_VECTOR_DTYPES[width]!r})",
                f"{h}._v = True",
                f"{pos} += {nbytes}",
            ]
        fields = wire_fields(t)
        struct = self.struct_name(fields)
        if struct is not None:
            out.append(_struct_extraction(fields, h, struct, data, pos))
        else:
            out += _field_extraction(fields, nbytes, h, v, f"{data}[{pos}:{pos} + {nbytes}]")
        out += [f"{h}._v = True", f"{pos} += {nbytes}"]
        return out

    def pack_expr(self, t: ir.HeaderType, h: str) -> str:
        """Expression of the bytes of valid header ``h`` (what ``_pack`` returns)."""
        width = vector_header_width(t)
        if width is not None:
            return f"{h}._a.astype({_VECTOR_DTYPES[width]!r}).tobytes()"
        fields = wire_fields(t)
        struct = self.struct_name(fields)
        if struct is not None:
            return _struct_pack(fields, h, struct)
        return _pack_expression(fields, self.fixed_size(t) or 0, h)

    @staticmethod
    def _varbit_ext_pack(
        fields: list[ir.StructField], vb: ir.StructField, fixed_bits: int
    ) -> list[str]:
        vt = ir.strip_newtype(vb.type)
        assert isinstance(vt, ir.VarbitType), "the varbit field of a header"
        max_w = vt.max_width
        idx = next(i for i, f in enumerate(fields) if f.type is vb.type)
        before, after = fields[:idx], fields[idx + 1 :]
        out = [
            "    def _extv(self, data, pos, nbits, err_short, err_long, err_arg):",
            f"        if nbits > {max_w}:",
            "            raise _ParserReject(err_long)",
            "        if nbits % 8:",
            "            raise _ParserReject(err_arg)",
            f"        end = pos + ({fixed_bits} + nbits) // 8",
            "        if end > len(data):",
            "            raise _ParserReject(err_short)",
            "        v = int.from_bytes(data[pos:end], 'big')",
            f"        shift = {fixed_bits} + nbits",
        ]
        for f in before:
            w = scalar_width(f.type)
            out.append(f"        shift -= {w}")
            out.append(f"        {path('self', f.name)} = (v >> shift) & {(1 << w) - 1:#x}")
        out.append("        shift -= nbits")
        out.append(f"        self.{attr(vb.name)} = (nbits, (v >> shift) & ((1 << nbits) - 1))")
        for f in after:
            w = scalar_width(f.type)
            out.append(f"        shift -= {w}")
            out.append(f"        {path('self', f.name)} = (v >> shift) & {(1 << w) - 1:#x}")
        out += ["        self._v = True", "        return end"]
        out.append("    def _pack(self):")
        out.append("        v = 0")
        for f in before:
            out.append(f"        v = (v << {scalar_width(f.type)}) | {path('self', f.name)}")
        out.append(f"        vw, vv = self.{attr(vb.name)}")
        out.append("        v = (v << vw) | vv")
        for f in after:
            out.append(f"        v = (v << {scalar_width(f.type)}) | {path('self', f.name)}")
        out.append(f"        return v.to_bytes(({fixed_bits} + vw) // 8, 'big')")
        return out


PAD_FIELD = "_padding"  # attr() makes it "f__padding", which no P4 field can be


def layout_fields(t: ir.HeaderType) -> list[ir.StructField]:
    """A header's fields as they are on the wire: as p4c's BMv2 back end does, a header
    whose fixed fields are not whole bytes gets a trailing padding field (extracted and
    emitted like any other, invisible to the program)."""
    pad = -t.bit_width % 8
    if not pad:
        return list(t.fields)
    return [*t.fields, ir.StructField(PAD_FIELD, ir.BitType(pad))]


def wire_fields(t: ir.HeaderType) -> list[ir.StructField]:
    """:func:`layout_fields` with struct-typed fields replaced by their scalar leaves, in
    order, named by their dotted path (``row.alt0.valid``; see :func:`path`)."""
    out: list[ir.StructField] = []

    def visit(f: ir.StructField, prefix: str) -> None:
        ft = ir.strip_newtype(f.type)
        if isinstance(ft, ir.StructType):
            for g in ft.fields:
                visit(g, f"{prefix}{f.name}.")
        else:
            out.append(
                f if not prefix else ir.StructField(prefix + f.name, f.type, f.annotations, f.loc)
            )

    for f in layout_fields(t):
        visit(f, "")
    return out


def path(obj: str, dotted: str) -> str:
    """Python expression of the field at ``dotted`` (a :func:`wire_fields` name) of ``obj``."""
    return obj + "".join("." + attr(part) for part in dotted.split("."))


def _field_extraction(
    fields: list[ir.StructField], nbytes: int, h: str, v: str, chunk: str
) -> list[str]:
    """Statements setting the fields of ``h`` from the bytes ``chunk`` (``nbytes`` long)."""
    if not nbytes:
        return [f"{path(h, f.name)} = 0" for f in fields]
    out = [f"{v} = int.from_bytes({chunk}, 'big')"]
    shift = nbytes * 8
    for f in fields:
        w = scalar_width(f.type)
        shift -= w
        a = path(h, f.name)
        mask = (1 << w) - 1
        if shift == 0 and w == nbytes * 8:
            out.append(f"{a} = {v}")
        elif shift == 0:
            out.append(f"{a} = {v} & {mask:#x}")
        elif shift + w == nbytes * 8:
            out.append(f"{a} = {v} >> {shift}")
        else:
            out.append(f"{a} = ({v} >> {shift}) & {mask:#x}")
    return out


_STRUCT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


def _struct_format(fields: list[ir.StructField]) -> str | None:
    """Big-endian ``struct`` format of ``fields`` when each is one whole word (the run
    of codes compressed, ``>32I``), else None."""
    codes = []
    for f in fields:
        t = ir.strip_newtype(f.type)
        if not isinstance(t, ir.BitType) or t.width not in _STRUCT_CODES:
            return None
        codes.append(_STRUCT_CODES[t.width])
    if not codes:
        return None
    out = []
    i = 0
    while i < len(codes):
        j = i
        while j < len(codes) and codes[j] == codes[i]:
            j += 1
        out.append(f"{j - i}{codes[i]}" if j - i > 1 else codes[i])
        i = j
    return ">" + "".join(out)


def _struct_extraction(
    fields: list[ir.StructField], h: str, struct: str, data: str, pos: str
) -> str:
    """One statement setting every field of ``h`` from ``data`` at ``pos`` (bounds
    already checked)."""
    targets = "".join(path(h, f.name) + ", " for f in fields)
    return f"{targets}= {struct}.unpack_from({data}, {pos})"


def _struct_pack(fields: list[ir.StructField], h: str, struct: str) -> str:
    """Expression of the bytes of the fields of ``h`` (all already within their widths)."""
    return f"{struct}.pack({', '.join(path(h, f.name) for f in fields)})"


def _pack_expression(fields: list[ir.StructField], nbytes: int, h: str) -> str:
    if not nbytes:
        return "b''"
    shift = nbytes * 8
    terms = []
    for f in fields:
        shift -= scalar_width(f.type)
        a = path(h, f.name)
        terms.append(f"({a} << {shift})" if shift else a)
    return f"({' | '.join(terms)}).to_bytes({nbytes}, 'big')"
