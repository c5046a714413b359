"""P4Info generation for the built-in target, following p4c's rules for v1model.

A controller written against BMv2 must work unchanged against the built-in target, so the
P4Info we emit has to carry the same names, ids and shapes as the one ``p4c --p4runtime-files``
writes:

* ids are ``prefix << 24 | (jenkins_one_at_a_time(name) & 0xffffff)``; ``@id`` wins, and
  collisions are resolved by linear probing over the names sorted per object kind;
* match-field / parameter / metadata ids are positional (1, 2, ...) unless ``@id`` is given;
* the actions are those a table references or a control's apply body calls directly (p4c
  writes P4Info after its front end, which inlines only actions called from other actions
  and drops unused ones); top-level actions such as ``NoAction`` come first in each control;
  an action no table references is listed without parameters (p4c binds its arguments at
  the call);
* ``@hidden`` tables, actions and controller-header fields are left out but still reserve
  their ids and take part in alias computation;
* the alias of an object is its shortest unique dot-separated suffix among all names.

Besides :func:`build_p4info`, this module holds the text-format helpers; look-ups by name or
id go through the shared index, :class:`p4schema.P4InfoIndex`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2, p4types_pb2

from softswitch import ir
from softswitch.ir_walk import walk_in_order

log = logging.getLogger(__name__)

# P4Ids prefixes (p4info.proto, enum P4Ids.Prefix).
ACTION = 0x01
TABLE = 0x02
VALUE_SET = 0x03
CONTROLLER_HEADER = 0x04
ACTION_PROFILE = 0x11
COUNTER = 0x12
DIRECT_COUNTER = 0x13
METER = 0x14
DIRECT_METER = 0x15
REGISTER = 0x16
DIGEST = 0x17

DEFAULT_TABLE_SIZE = 1024  # v1model's default, as p4c writes it into P4Info
ENUM_WIDTH = 32  # BMv2 represents (non-serializable) enums on 32 bits

_SKIPPED_ANNOTATIONS = frozenset({"name", "id", "brief", "description"})
_COUNTER_UNITS = {
    "packets": p4info_pb2.CounterSpec.PACKETS,
    "bytes": p4info_pb2.CounterSpec.BYTES,
    "packets_and_bytes": p4info_pb2.CounterSpec.BOTH,
}
_METER_UNITS = {"packets": p4info_pb2.MeterSpec.PACKETS, "bytes": p4info_pb2.MeterSpec.BYTES}
_MATCH_TYPES = {
    "exact": p4info_pb2.MatchField.EXACT,
    "lpm": p4info_pb2.MatchField.LPM,
    "ternary": p4info_pb2.MatchField.TERNARY,
    "range": p4info_pb2.MatchField.RANGE,
    "optional": p4info_pb2.MatchField.OPTIONAL,
}


# ------------------------------------------------------------------------------ ids


def jenkins_hash(name: str) -> int:
    """Bob Jenkins' one-at-a-time hash over the UTF-8 bytes of ``name`` (as p4c computes it)."""
    h = 0
    for byte in name.encode("utf-8"):
        h = (h + byte) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class P4InfoError(Exception):
    """A program whose control-plane API cannot be expressed (bad ``@id``, duplicate names)."""


class _SymbolTable:
    """Names per object kind; ids are assigned once every name is known (as p4c does)."""

    def __init__(self) -> None:
        self._names: dict[int, dict[str, int | None]] = {}
        self._assigned: set[int] = set()
        self._all_names: set[str] = set()
        self._ids: dict[tuple[int, str], int] = {}

    def add(self, prefix: int, name: str, explicit: int | None = None) -> None:
        table = self._names.setdefault(prefix, {})
        if name in table:
            return
        self._all_names.add(name)
        if explicit is not None:
            full = explicit
            if full >> 24 == 0:
                full |= prefix << 24
            elif full >> 24 != prefix:
                raise P4InfoError(f"{name}: @id {explicit:#x} has the wrong 8-bit prefix")
            if full in self._assigned:
                raise P4InfoError(f"@id {full:#x} is assigned to multiple declarations")
            self._assigned.add(full)
            table[name] = full
        else:
            table[name] = None

    def assign(self) -> None:
        for prefix in sorted(self._names):
            table = self._names[prefix]
            for name in sorted(n for n, i in table.items() if i is None):
                value = jenkins_hash(name)
                start = value
                while (prefix << 24 | (value & 0xFFFFFF)) in self._assigned:
                    value = (value + 1) & 0xFFFFFFFF
                    if value == start:
                        raise P4InfoError(f"no available id to represent {name} in P4Runtime")
                full = prefix << 24 | (value & 0xFFFFFF)
                table[name] = full
                self._assigned.add(full)

    def id(self, prefix: int, name: str) -> int:
        value = self._names[prefix][name]
        assert value is not None, "ids are read only after assign()"
        return value

    def alias(self, name: str) -> str:
        """Shortest suffix of whole dot-separated components that no other name shares."""
        parts = name.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            others = sum(
                1 for other in self._all_names if other == suffix or other.endswith("." + suffix)
            )
            if others < 2:
                return suffix
        return name


def field_ids(explicit: list[int | None]) -> list[int]:
    """Ids for match fields / params / metadata: ``@id`` first, else the 1-based position
    (skipping ids already taken), exactly as p4c's FieldIdAllocator does."""
    assigned = {i for i in explicit if i is not None}
    if len(assigned) != sum(1 for i in explicit if i is not None):
        raise P4InfoError("an @id value is used more than once in one list")
    out: list[int] = []
    index = 1
    for given in explicit:
        if given is not None:
            out.append(given)
            index += 1
            continue
        while index in assigned:
            index += 1
        assigned.add(index)
        out.append(index)
    return out


# ------------------------------------------------------------------------ annotations


def _annotation_id(annotations: ir.Annotations) -> int | None:
    values = annotations.get("id")
    if not values:
        return None
    raw = values[0]
    try:
        return raw if isinstance(raw, int) else int(str(raw).strip(), 0)
    except ValueError:
        raise P4InfoError(f"@id should be an unsigned integer, not {raw!r}") from None


def _annotation_text(name: str, values: list[object]) -> str:
    """Render an annotation as p4c's ToP4 prints it into P4Info (``@noWarn("unused")``)."""
    if not values:
        return f"@{name}"
    rendered = []
    for value in values:
        if isinstance(value, bool):
            rendered.append("true" if value else "false")
        elif isinstance(value, int):
            rendered.append(str(value))
        else:
            text = str(value)
            if text.startswith('"') and text.endswith('"') and len(text) >= 2:
                rendered.append(text)
            elif isinstance(value, str):
                escaped = text.replace("\\", "\\\\").replace('"', '\\"')
                rendered.append(f'"{escaped}"')
            else:
                rendered.append(text)
    return f"@{name}({', '.join(rendered)})"


class _Strings(Protocol):
    """A repeated string field of a protobuf message."""

    def append(self, value: str, /) -> None: ...


class _Documentation(Protocol):
    """``p4.config.v1.Documentation``."""

    brief: str
    description: str


class _Annotated(Protocol):
    """A P4Info message with ``annotations`` (the p4 protobufs carry no type information)."""

    @property
    def annotations(self) -> _Strings: ...


class _Documented(Protocol):
    """A P4Info message with a ``doc`` (Documentation) field."""

    @property
    def doc(self) -> _Documentation: ...


def _add_annotations(
    message: _Annotated, annotations: ir.Annotations, skip: Iterable[str] = ()
) -> None:
    skipped = _SKIPPED_ANNOTATIONS.union(skip)
    for name, values in annotations.items():
        if name in skipped:
            continue
        message.annotations.append(_annotation_text(name, list(values or [])))


def _add_doc(message: _Documented, annotations: ir.Annotations) -> None:
    brief = annotations.get("brief")
    description = annotations.get("description")
    if brief:
        message.doc.brief = str(brief[0]).strip('"')
    if description:
        message.doc.description = str(description[0]).strip('"')


def _set_preamble(
    preamble: p4info_pb2.Preamble,
    ident: int,
    name: str,
    alias: str,
    annotations: ir.Annotations | None,
) -> None:
    preamble.id = ident
    preamble.name = name
    preamble.alias = alias
    if annotations:
        _add_annotations(preamble, annotations)
        _add_doc(preamble, annotations)


def _hidden(annotations: ir.Annotations) -> bool:
    return "hidden" in annotations


def _cp_name_of(name: str, annotations: ir.Annotations) -> str:
    values = annotations.get("name")
    if values:
        text = str(values[0])
        if len(text) >= 2 and text[0] == text[-1] == '"':
            text = text[1:-1]
        return text
    return name


def _type_name(t: ir.Type) -> str:
    return _cp_name_of(getattr(t, "name", ""), getattr(t, "annotations", {}))


# ------------------------------------------------------------------------------- types


def _translation(t: ir.NewType) -> tuple[str, int | None] | None:
    """(uri, sdn bitwidth or None for ``string``) from ``@p4runtime_translation``."""
    values = t.annotations.get("p4runtime_translation")
    if not values:
        return None
    uri = str(values[0]).strip().strip('"')
    second = str(values[1]).strip() if len(values) > 1 else "string"
    if len(values) > 1 and isinstance(values[1], int):
        return uri, int(values[1])
    if "string" in second:
        return uri, None
    digits = "".join(ch for ch in second if ch.isdigit())
    return uri, int(digits) if digits else None


def control_plane_width(t: ir.Type) -> int:
    """Bit width that P4Info gives a match field / param / metadata of type ``t``."""
    if isinstance(t, ir.NewType):
        translated = _translation(t)
        if translated is not None:
            return translated[1] or 0
        return control_plane_width(t.underlying)
    if isinstance(t, ir.BitType):
        return t.width
    if isinstance(t, ir.BoolType):
        return 1
    if isinstance(t, ir.EnumType):
        return t.underlying.width if t.underlying is not None else ENUM_WIDTH
    if isinstance(t, ir.ErrorType):
        return 0  # p4c treats error like a string
    if isinstance(t, (ir.HeaderType,)):
        return t.bit_width
    return 0


class _TypeConverter:
    """IR types -> P4DataTypeSpec, filling P4TypeInfo as p4c's TypeSpecConverter does."""

    def __init__(self, info: p4types_pb2.P4TypeInfo, program: ir.Program) -> None:
        self.info = info
        self.program = program

    def spec(self, t: ir.Type) -> p4types_pb2.P4DataTypeSpec:
        out = p4types_pb2.P4DataTypeSpec()
        if isinstance(t, ir.BitType):
            if t.signed:
                out.bitstring.int.bitwidth = t.width
            else:
                out.bitstring.bit.bitwidth = t.width
        elif isinstance(t, ir.VarbitType):
            out.bitstring.varbit.max_bitwidth = t.max_width
        elif isinstance(t, ir.BoolType):
            out.bool.SetInParent()
        elif isinstance(t, ir.ErrorType):
            out.error.SetInParent()
            self.error()
        elif isinstance(t, (ir.StructType, ir.HeaderType, ir.HeaderUnionType, ir.EnumType,
                            ir.NewType)):  # fmt: skip
            self.named_spec(out, t)
        elif isinstance(t, ir.TupleType):
            for elem in t.elems:
                out.tuple.members.add().CopyFrom(self.spec(elem))
        elif isinstance(t, ir.StackType):
            self.stack_spec(out, t)
        else:
            raise P4InfoError(f"type {t!r} cannot be described in P4Info")
        return out

    def named_spec(
        self,
        out: p4types_pb2.P4DataTypeSpec,
        t: ir.StructType | ir.HeaderType | ir.HeaderUnionType | ir.EnumType | ir.NewType,
    ) -> None:
        """A type P4Info refers to by name, described once in type_info."""
        if isinstance(t, ir.StructType):
            out.struct.name = _type_name(t)
            self.struct(t)
        elif isinstance(t, ir.HeaderType):
            out.header.name = _type_name(t)
            self.header(t)
        elif isinstance(t, ir.HeaderUnionType):
            out.header_union.name = _type_name(t)
            self.header_union(t)
        elif isinstance(t, ir.EnumType):
            if t.underlying is not None:
                out.serializable_enum.name = _type_name(t)
            else:
                out.enum.name = _type_name(t)
            self.enum(t)
        else:
            out.new_type.name = _type_name(t)
            self.new_type(t)

    def stack_spec(self, out: p4types_pb2.P4DataTypeSpec, t: ir.StackType) -> None:
        """A stack of headers or of header unions."""
        if isinstance(t.elem, ir.HeaderUnionType):
            out.header_union_stack.header_union.name = _type_name(t.elem)
            out.header_union_stack.size = t.size
            self.header_union(t.elem)
        else:
            out.header_stack.header.name = _type_name(t.elem)
            out.header_stack.size = t.size
            assert isinstance(t.elem, ir.HeaderType), "a stack of headers or of unions"
            self.header(t.elem)

    def note(self, t: ir.Type) -> None:
        """Record user-defined types of a match field / param in type_info."""
        if isinstance(t, (ir.NewType, ir.EnumType, ir.ErrorType)):
            self.spec(t)

    def error(self) -> None:
        if not self.info.HasField("error"):
            self.info.error.members.extend(self.program.errors)

    def struct(self, t: ir.StructType) -> None:
        name = _type_name(t)
        if name in self.info.structs:
            return
        entry = p4types_pb2.P4StructTypeSpec()
        for f in t.fields:
            member = entry.members.add()
            member.name = _cp_name_of(f.name, f.annotations)
            member.type_spec.CopyFrom(self.spec(f.type))
        self.info.structs[name].CopyFrom(entry)

    def header(self, t: ir.HeaderType) -> None:
        name = _type_name(t)
        if name in self.info.headers:
            return
        entry = p4types_pb2.P4HeaderTypeSpec()
        for f in t.fields:
            member = entry.members.add()
            member.name = _cp_name_of(f.name, f.annotations)
            spec = self.spec(f.type)
            if not spec.HasField("bitstring"):
                raise P4InfoError(f"header field {name}.{f.name} is not a bit string")
            member.type_spec.CopyFrom(spec.bitstring)
        self.info.headers[name].CopyFrom(entry)

    def header_union(self, t: ir.HeaderUnionType) -> None:
        name = _type_name(t)
        if name in self.info.header_unions:
            return
        entry = p4types_pb2.P4HeaderUnionTypeSpec()
        for f in t.fields:
            member = entry.members.add()
            member.name = _cp_name_of(f.name, f.annotations)
            member.header.name = _type_name(f.type)
            assert isinstance(f.type, ir.HeaderType), "a header union holds headers"
            self.header(f.type)
        self.info.header_unions[name].CopyFrom(entry)

    def enum(self, t: ir.EnumType) -> None:
        name = _type_name(t)
        if t.underlying is None:
            if name in self.info.enums:
                return
            entry = p4types_pb2.P4EnumTypeSpec()
            for m in t.members:
                entry.members.add().name = m
            self.info.enums[name].CopyFrom(entry)
            return
        if name in self.info.serializable_enums:
            return
        ser = p4types_pb2.P4SerializableEnumTypeSpec()
        width = t.underlying.width
        ser.underlying_type.bitwidth = width
        for m in t.members:
            member = ser.members.add()
            member.name = m
            value = t.values.get(m, 0) & ((1 << width) - 1)
            member.value = value.to_bytes(max(1, (width + 7) // 8), "big")
        self.info.serializable_enums[name].CopyFrom(ser)

    def new_type(self, t: ir.NewType) -> None:
        name = _type_name(t)
        if name in self.info.new_types:
            return
        entry = p4types_pb2.P4NewTypeSpec()
        translated = _translation(t)
        underlying: ir.Type = t
        while isinstance(underlying, ir.NewType):
            underlying = underlying.underlying
        if translated is not None:
            entry.translated_type.uri = translated[0]
            if translated[1] is None:
                entry.translated_type.sdn_string.SetInParent()
            else:
                entry.translated_type.sdn_bitwidth = translated[1]
        else:
            entry.original_type.CopyFrom(self.spec(underlying))
        self.info.new_types[name].CopyFrom(entry)


def _named_type(t: ir.Type) -> str | None:
    return _type_name(t) if isinstance(t, ir.NewType) else None


# ------------------------------------------------------------------------- collection


@dataclass
class _Table:
    decl: ir.TableDecl
    name: str
    prefix: str
    control: ir.ControlDecl


@dataclass
class _Extern:
    inst: ir.Instance
    name: str
    kind: str  # extern type name, e.g. "counter"
    direct_table: str | None = None  # for direct counters / meters and in-place profiles


@dataclass
class _Collected:
    tables: list[_Table] = field(default_factory=list)
    # (action, name, its key in table_actions)
    actions: list[tuple[ir.ActionDecl, str, tuple[int, str]]] = field(default_factory=list)
    # extern instances in block order; in-place table properties appear at their table
    externs: list[_Extern] = field(default_factory=list)
    digests: list[ir.Type] = field(default_factory=list)
    value_sets: list[_Extern] = field(default_factory=list)
    top_actions: set[int] = field(default_factory=set)  # ids of top-level ActionDecls
    # (id of ActionDecl, where) of the actions some table references: only those keep their
    # control-plane parameters (p4c binds the arguments of an action it only sees called
    # directly and lists it without parameters)
    table_actions: set[tuple[int, str]] = field(default_factory=set)


def _extern_kind(inst: ir.Instance) -> str | None:
    return inst.type.name if isinstance(inst.type, ir.ExternType) else None


def _walk_exprs(node: object) -> Iterator[ir.Expr]:
    """Every expression under a statement/expression tree, in source order; a called
    function's body is walked at each call, right after the call."""
    # not into struct initialisers, as this walk never went: every P4Info stays as it was
    for n in walk_in_order(node, struct_init_fields=False):
        if isinstance(n, ir.Expr):
            yield n
            if isinstance(n, ir.Call) and isinstance(n.callee, ir.FunctionDecl):
                yield from _walk_exprs(n.callee.body)


def _digest_types(stmts: object) -> list[ir.Type]:
    found: list[ir.Type] = []
    for expr in _walk_exprs(stmts):
        if isinstance(expr, ir.Call) and getattr(expr.callee, "name", None) == "digest":
            if expr.type_args:
                found.append(expr.type_args[0])
            elif len(expr.args) > 1 and expr.args[1] is not None:
                found.append(expr.args[1].type)
    return found


def _flatten_control(
    decl: ir.ControlDecl, prefix: str, bodies: list[object]
) -> list[tuple[object, str]]:
    """The control's locals with sub-control instances spliced in place, each with its
    name prefix: p4c inlines sub-controls in its front end before generating P4Info."""
    bodies.append(decl.body)
    out: list[tuple[object, str]] = []
    for local in decl.locals:
        if isinstance(local, ir.Instance) and isinstance(local.type, ir.BlockType):
            sub = local.type.decl
            if isinstance(sub, ir.ControlDecl):
                out.extend(_flatten_control(sub, ir.qualify(prefix, local.cp_name), bodies))
                continue
        if isinstance(local, ir.ActionDecl):
            bodies.append(local.body)
        out.append((local, prefix))
    return out


def _direct_calls(decl: ir.ControlDecl, prefix: str) -> list[tuple[ir.ActionDecl, str]]:
    """Actions called from the apply body of ``decl`` or of its sub-control instances,
    each with the name prefix of the control that declares the call."""
    out: list[tuple[ir.ActionDecl, str]] = []
    for e in _walk_exprs(decl.body):
        if isinstance(e, ir.Call) and isinstance(e.callee, ir.ActionDecl):
            out.append((e.callee, prefix))
    for local in decl.locals:
        if isinstance(local, ir.Instance) and isinstance(local.type, ir.BlockType):
            sub = local.type.decl
            if isinstance(sub, ir.ControlDecl):
                out.extend(_direct_calls(sub, ir.qualify(prefix, local.cp_name)))
    return out


def _parser_value_sets(decl: ir.ParserDecl, prefix: str, out: _Collected) -> None:
    for local in decl.locals:
        if not isinstance(local, ir.Instance):
            continue
        if isinstance(local.type, ir.BlockType) and isinstance(local.type.decl, ir.ParserDecl):
            _parser_value_sets(local.type.decl, ir.qualify(prefix, local.cp_name), out)
        elif _extern_kind(local) == "value_set":
            name = ir.qualify(prefix, local.cp_name)
            out.value_sets.append(_Extern(local, name, "value_set"))


def _collect(program: ir.Program) -> _Collected:
    """Visit the blocks of ``main`` in p4c's order (top-level externs, then the package's
    blocks in argument order, each with its inlined sub-blocks)."""
    out = _Collected()
    out.top_actions = {id(a) for a in program.actions.values()}
    for inst in program.instances.values():
        kind = _extern_kind(inst)
        if kind is not None:
            out.externs.append(_Extern(inst, ir.qualify("", inst.cp_name), kind))
    added_actions: set[str] = set()
    for arg in program.main.args:
        if not isinstance(arg.type, ir.BlockType):
            continue
        decl, prefix = arg.type.decl, ir.qualify("", arg.cp_name)
        if isinstance(decl, ir.ParserDecl):
            _parser_value_sets(decl, prefix, out)
        else:
            _collect_control(decl, prefix, out, added_actions)
    # direct resources declared as control locals learn their table from the table property
    by_inst = {id(e.inst): e for e in out.externs}
    for table in out.tables:
        for prop in (table.decl.counters, table.decl.meters):
            if prop is not None and id(prop) in by_inst:
                by_inst[id(prop)].direct_table = table.name
    return out


def _collect_control(
    decl: ir.ControlDecl, prefix: str, out: _Collected, added_actions: set[str]
) -> None:
    """One top-level control with its inlined sub-controls: its actions, digests, tables
    and extern instances."""
    bodies: list[object] = []
    items = _flatten_control(decl, prefix, bodies)
    referenced = _referenced_actions(decl, prefix, items, out)
    seen_refs = {(id(action), where) for action, where in referenced}
    # top-level actions are localized into the control (first), then its own actions
    for action, _where in referenced:
        if id(action) in out.top_actions:
            _add_collected_action(out, added_actions, action, "")
    for local, where in items:
        if isinstance(local, ir.ActionDecl) and (id(local), where) in seen_refs:
            _add_collected_action(out, added_actions, local, where)
    out.digests.extend(_digest_types(bodies))
    local_instances = {id(x) for x, _ in items if isinstance(x, ir.Instance)}
    for local, where in items:
        if isinstance(local, ir.TableDecl):
            _collect_table(local, where, decl, local_instances, out)
        elif isinstance(local, ir.Instance) and _extern_kind(local) is not None:
            name = ir.qualify(where, local.cp_name)
            out.externs.append(_Extern(local, name, _extern_kind(local) or ""))


def _referenced_actions(
    decl: ir.ControlDecl, prefix: str, items: list[tuple[object, str]], out: _Collected
) -> list[tuple[ir.ActionDecl, str]]:
    """The actions the control's tables reference (noting them in ``out.table_actions``)
    and then those its apply bodies call, each once, with the prefix of where it is
    declared ("" for a top-level action)."""
    referenced: list[tuple[ir.ActionDecl, str]] = []
    seen_refs: set[tuple[int, str]] = set()

    def note(action: ir.ActionDecl, where: str) -> tuple[int, str]:
        key = (id(action), "" if id(action) in out.top_actions else where)
        if key not in seen_refs:
            seen_refs.add(key)
            referenced.append((action, key[1]))
        return key

    for local, where in items:
        if isinstance(local, ir.TableDecl):
            refs = [r.action for r in local.actions]
            if local.default_action is not None:
                refs.append(local.default_action.action)
            for action in refs:
                out.table_actions.add(note(action, where))
    for action, where in _direct_calls(decl, prefix):
        note(action, where)
    return referenced


def _add_collected_action(
    out: _Collected, added_actions: set[str], action: ir.ActionDecl, where: str
) -> None:
    """List an action once by its full name."""
    name = ir.qualify(where, action.cp_name)
    if name not in added_actions:
        added_actions.add(name)
        out.actions.append((action, name, (id(action), where)))


def _collect_table(
    local: ir.TableDecl,
    where: str,
    decl: ir.ControlDecl,
    local_instances: set[int],
    out: _Collected,
) -> None:
    """A table, and the extern instances its properties declare in place."""
    out.tables.append(_Table(local, ir.qualify(where, local.cp_name), where, decl))
    table_name = out.tables[-1].name
    for prop in (local.implementation, local.counters, local.meters):
        if prop is None or id(prop) in local_instances:
            continue
        kind = _extern_kind(prop) or ""
        direct = table_name if kind in ("direct_counter", "direct_meter") else None
        out.externs.append(_Extern(prop, ir.qualify(where, prop.cp_name), kind, direct))


def _ctor_arg(program: ir.Program, inst: ir.Instance, param: str) -> ir.Expr | None:
    """The constructor argument bound to parameter ``param`` of an extern instance."""
    kind = _extern_kind(inst)
    decl = program.externs.get(kind or "")
    if decl is not None:
        for params in decl.constructors:
            if len(params) == len(inst.args):
                for p, arg in zip(params, inst.args, strict=True):
                    if p.name == param:
                        return arg
    fallback = {
        "counter": {"size": 0, "type": 1},
        "meter": {"size": 0, "type": 1},
        "direct_counter": {"type": 0},
        "direct_meter": {"type": 0},
        "register": {"size": 0},
        "action_profile": {"size": 0},
        "action_selector": {"size": 1},
        "value_set": {"size": 0},
    }
    index = fallback.get(kind or "", {}).get(param)
    if index is not None and index < len(inst.args):
        return inst.args[index]
    return None


def _const_int(expr: ir.Expr | None, what: str) -> int:
    if isinstance(expr, ir.Const):
        return expr.value
    raise P4InfoError(f"{what} must be a compile-time constant")


def _unit(expr: ir.Expr | None) -> str:
    if isinstance(expr, ir.EnumMember):
        return expr.member
    if isinstance(expr, ir.Member):
        return expr.name
    return ""


# ----------------------------------------------------------------------------- builder


def build_p4info(program: ir.Program) -> p4info_pb2.P4Info:
    """The P4Info message p4c would write for ``program`` on the v1model architecture."""
    col = _collect(program)
    headers = [
        t
        for t in program.types.values()
        if isinstance(t, ir.HeaderType) and "controller_header" in t.annotations
    ]
    symbols = _symbols(col, headers)
    p4info = p4info_pb2.P4Info()
    p4info.pkg_info.arch = "v1model"
    types = _TypeConverter(p4info.type_info, program)
    profile_tables = _profile_tables(col)
    for table in col.tables:
        if not _hidden(table.decl.annotations):
            _add_table(p4info, table, col, symbols, types)
    for action, name, key in col.actions:
        if not _hidden(action.annotations):
            _add_action(p4info, action, name, symbols, types, key in col.table_actions)
    for ext in col.externs:
        _add_extern(p4info, program, ext, col, symbols, types, profile_tables)
    for vs in col.value_sets:
        _add_value_set(p4info, program, vs, symbols)
    _add_digests(p4info, col.digests, symbols, types)
    for h in headers:
        if not _hidden(h.annotations):
            _add_controller_header(p4info, h, symbols, types)
    if p4info.tables or p4info.actions:
        p4info.type_info.SetInParent()  # p4c touches it while converting keys and params
    return p4info


_EXTERN_PREFIX = {
    "counter": COUNTER,
    "direct_counter": DIRECT_COUNTER,
    "meter": METER,
    "direct_meter": DIRECT_METER,
    "register": REGISTER,
    "action_profile": ACTION_PROFILE,
    "action_selector": ACTION_PROFILE,
}


def _symbols(col: _Collected, headers: list[ir.HeaderType]) -> _SymbolTable:
    """Every object's id, assigned as p4c does (``@id`` first, then by name)."""
    symbols = _SymbolTable()
    for action, name, _key in col.actions:
        symbols.add(ACTION, name, _annotation_id(action.annotations))
    for table in col.tables:
        symbols.add(TABLE, table.name, _annotation_id(table.decl.annotations))
    for ext in col.externs:
        if ext.kind in _EXTERN_PREFIX:
            symbols.add(_EXTERN_PREFIX[ext.kind], ext.name, _annotation_id(ext.inst.annotations))
    for vs in col.value_sets:
        symbols.add(VALUE_SET, vs.name, _annotation_id(vs.inst.annotations))
    for t in col.digests:
        symbols.add(DIGEST, _type_name(t))
    for h in headers:
        symbols.add(CONTROLLER_HEADER, _type_name(h), _annotation_id(h.annotations))
    symbols.assign()
    return symbols


def _profile_tables(col: _Collected) -> dict[str, list[str]]:
    """The tables of each action profile/selector, by the profile's name."""
    profile_tables: dict[str, list[str]] = {}
    for table in col.tables:
        impl = table.decl.implementation
        if impl is not None:
            owner = next((e for e in col.externs if e.inst is impl), None)
            if owner is not None:
                profile_tables.setdefault(owner.name, []).append(table.name)
    return profile_tables


def _add_digests(
    p4info: p4info_pb2.P4Info, digests: list[ir.Type], symbols: _SymbolTable, types: _TypeConverter
) -> None:
    """One digest per type sent, in the order first sent."""
    seen_digests: set[str] = set()
    for t in digests:
        name = _type_name(t)
        if name in seen_digests:
            continue
        seen_digests.add(name)
        digest = p4info.digests.add()
        _set_preamble(digest.preamble, symbols.id(DIGEST, name), name, symbols.alias(name), None)
        digest.type_spec.CopyFrom(types.spec(t))


def _add_table(
    p4info: p4info_pb2.P4Info,
    table: _Table,
    col: _Collected,
    symbols: _SymbolTable,
    types: _TypeConverter,
) -> None:
    decl = table.decl
    msg = p4info.tables.add()
    _set_preamble(
        msg.preamble,
        symbols.id(TABLE, table.name),
        table.name,
        symbols.alias(table.name),
        decl.annotations,
    )
    _add_match_fields(msg, decl, types)
    _add_action_refs(msg, table, col, symbols)
    by_inst = {id(e.inst): e for e in col.externs}
    if decl.implementation is not None and id(decl.implementation) in by_inst:
        msg.implementation_id = symbols.id(ACTION_PROFILE, by_inst[id(decl.implementation)].name)
    if decl.counters is not None and id(decl.counters) in by_inst:
        msg.direct_resource_ids.append(symbols.id(DIRECT_COUNTER, by_inst[id(decl.counters)].name))
    if decl.meters is not None and id(decl.meters) in by_inst:
        msg.direct_resource_ids.append(symbols.id(DIRECT_METER, by_inst[id(decl.meters)].name))
    size = decl.size or DEFAULT_TABLE_SIZE
    msg.size = size
    if decl.support_timeout:
        msg.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
    if decl.entries is not None:
        if decl.entries_const:
            msg.is_const_table = True
        msg.has_initial_entries = True


def _add_match_fields(msg: p4info_pb2.Table, decl: ir.TableDecl, types: _TypeConverter) -> None:
    """The table's match fields (selector keys are not: they feed the selector)."""
    keys = [k for k in decl.keys if k.match_kind != "selector"]
    ids = field_ids([_annotation_id(k.annotations) for k in keys])
    for key, fid in zip(keys, ids, strict=True):
        mf = msg.match_fields.add()
        mf.id = fid
        mf.name = key.name
        _add_annotations(mf, key.annotations)
        _add_doc(mf, key.annotations)
        mf.bitwidth = control_plane_width(key.expr.type)
        if key.match_kind in _MATCH_TYPES:
            mf.match_type = _MATCH_TYPES[key.match_kind]
        else:
            mf.other_match_type = key.match_kind
        types.note(key.expr.type)
        named = _named_type(key.expr.type)
        if named:
            mf.type_name.name = named


def _add_action_refs(
    msg: p4info_pb2.Table, table: _Table, col: _Collected, symbols: _SymbolTable
) -> None:
    """The table's actions with their scope (@tableonly, @defaultonly), and its const
    default action."""
    decl = table.decl
    top = col.top_actions

    def names_of(action: ir.ActionDecl) -> str:
        prefix = "" if id(action) in top else table.prefix
        return ir.qualify(prefix, action.cp_name)

    names = {id(r.action): names_of(r.action) for r in decl.actions}
    if decl.default_action is not None:
        names[id(decl.default_action.action)] = names_of(decl.default_action.action)
    for ref in decl.actions:
        aref = msg.action_refs.add()
        aref.id = symbols.id(ACTION, names[id(ref.action)])
        _add_annotations(aref, ref.annotations)
        aref.scope = _action_scope(ref, table.name, names[id(ref.action)])
    if decl.default_action is not None and decl.default_action_const:
        msg.const_default_action_id = symbols.id(ACTION, names[id(decl.default_action.action)])


def _action_scope(
    ref: ir.ActionRef, table: str, action: str
) -> p4info_pb2.ActionRef.Scope.ValueType:
    """Where an action may be used in a table: entries only, default only, or both."""
    table_only = "tableonly" in ref.annotations
    default_only = "defaultonly" in ref.annotations
    if table_only and default_only:
        raise P4InfoError(
            f"table '{table}' has an action reference ('{action}') "
            "annotated with both @tableonly and @defaultonly"
        )
    if table_only:
        return p4info_pb2.ActionRef.TABLE_ONLY
    if default_only:
        return p4info_pb2.ActionRef.DEFAULT_ONLY
    return p4info_pb2.ActionRef.TABLE_AND_DEFAULT


def _add_action(
    p4info: p4info_pb2.P4Info,
    action: ir.ActionDecl,
    name: str,
    symbols: _SymbolTable,
    types: _TypeConverter,
    in_table: bool,
) -> None:
    msg = p4info.actions.add()
    _set_preamble(
        msg.preamble, symbols.id(ACTION, name), name, symbols.alias(name), action.annotations
    )
    params = action.cp_params if in_table else []
    ids = field_ids([_annotation_id(p.annotations) for p in params])
    for param, pid in zip(params, ids, strict=True):
        pm = msg.params.add()
        pm.id = pid
        pm.name = _cp_name_of(param.name, param.annotations)
        _add_annotations(pm, param.annotations)
        _add_doc(pm, param.annotations)
        ptype = param.type
        if isinstance(ptype, ir.EnumType) and ptype.underlying is None:
            pm.type_name.name = _type_name(ptype)
        else:
            pm.bitwidth = control_plane_width(ptype)
        types.note(ptype)
        named = _named_type(ptype)
        if named:
            pm.type_name.name = named


def _add_extern(
    p4info: p4info_pb2.P4Info,
    program: ir.Program,
    ext: _Extern,
    col: _Collected,
    symbols: _SymbolTable,
    types: _TypeConverter,
    profile_tables: dict[str, list[str]],
) -> None:
    inst, name, kind = ext.inst, ext.name, ext.kind
    alias = symbols.alias(name)
    if kind == "counter":
        msg = p4info.counters.add()
        _set_preamble(msg.preamble, symbols.id(COUNTER, name), name, alias, inst.annotations)
        msg.spec.unit = _COUNTER_UNITS.get(
            _unit(_ctor_arg(program, inst, "type")), p4info_pb2.CounterSpec.UNSPECIFIED
        )
        msg.size = _const_int(_ctor_arg(program, inst, "size"), f"size of counter {name}")
    elif kind in ("direct_counter", "direct_meter"):
        _add_direct_resource(p4info, program, ext, symbols)
    elif kind == "meter":
        msg_m = p4info.meters.add()
        _set_preamble(msg_m.preamble, symbols.id(METER, name), name, alias, inst.annotations)
        msg_m.spec.unit = _METER_UNITS.get(
            _unit(_ctor_arg(program, inst, "type")), p4info_pb2.MeterSpec.UNSPECIFIED
        )
        msg_m.size = _const_int(_ctor_arg(program, inst, "size"), f"size of meter {name}")
    elif kind == "register":
        msg_r = p4info.registers.add()
        _set_preamble(msg_r.preamble, symbols.id(REGISTER, name), name, alias, inst.annotations)
        msg_r.size = _const_int(_ctor_arg(program, inst, "size"), f"size of register {name}")
        assert isinstance(inst.type, ir.ExternType)
        if inst.type.type_args:
            msg_r.type_spec.CopyFrom(types.spec(inst.type.type_args[0]))
    elif kind in ("action_profile", "action_selector"):
        msg_p = p4info.action_profiles.add()
        _set_preamble(
            msg_p.preamble, symbols.id(ACTION_PROFILE, name), name, alias, inst.annotations
        )
        for table_name in sorted(profile_tables.get(name, [])):
            msg_p.table_ids.append(symbols.id(TABLE, table_name))
        msg_p.with_selector = kind == "action_selector"
        msg_p.size = _const_int(_ctor_arg(program, inst, "size"), f"size of {kind} {name}")
        max_group = inst.annotations.get("max_group_size")
        if max_group:
            msg_p.max_group_size = int(str(max_group[0]), 0)


def _add_direct_resource(
    p4info: p4info_pb2.P4Info, program: ir.Program, ext: _Extern, symbols: _SymbolTable
) -> None:
    """A direct counter or meter, with its table (one attached to none is left out)."""
    inst, name, kind = ext.inst, ext.name, ext.kind
    what = "counter" if kind == "direct_counter" else "meter"
    if ext.direct_table is None:
        log.warning("direct %s %s is not attached to any table; left out", what, name)
        return
    alias = symbols.alias(name)
    unit = _unit(_ctor_arg(program, inst, "type"))
    if kind == "direct_counter":
        msg_dc = p4info.direct_counters.add()
        _set_preamble(
            msg_dc.preamble, symbols.id(DIRECT_COUNTER, name), name, alias, inst.annotations
        )
        msg_dc.spec.unit = _COUNTER_UNITS.get(unit, p4info_pb2.CounterSpec.UNSPECIFIED)
        msg_dc.direct_table_id = symbols.id(TABLE, ext.direct_table)
    else:
        msg_dm = p4info.direct_meters.add()
        _set_preamble(
            msg_dm.preamble, symbols.id(DIRECT_METER, name), name, alias, inst.annotations
        )
        msg_dm.spec.unit = _METER_UNITS.get(unit, p4info_pb2.MeterSpec.UNSPECIFIED)
        msg_dm.direct_table_id = symbols.id(TABLE, ext.direct_table)


def _add_value_set(
    p4info: p4info_pb2.P4Info, program: ir.Program, vs: _Extern, symbols: _SymbolTable
) -> None:
    msg = p4info.value_sets.add()
    _set_preamble(
        msg.preamble,
        symbols.id(VALUE_SET, vs.name),
        vs.name,
        symbols.alias(vs.name),
        vs.inst.annotations,
    )
    msg.size = _const_int(_ctor_arg(program, vs.inst, "size"), f"size of value set {vs.name}")
    assert isinstance(vs.inst.type, ir.ExternType)
    elem = vs.inst.type.type_args[0] if vs.inst.type.type_args else ir.BitType(0)
    if isinstance(elem, ir.StructType):
        ids = field_ids([_annotation_id(f.annotations) for f in elem.fields])
        for f, fid in zip(elem.fields, ids, strict=True):
            match = msg.match.add()
            match.id = fid
            match.name = _cp_name_of(f.name, f.annotations)
            match.bitwidth = control_plane_width(f.type)
            kind = f.annotations.get("match")
            kind_name = str(kind[0]).strip() if kind else "exact"
            if kind_name in _MATCH_TYPES:
                match.match_type = _MATCH_TYPES[kind_name]
            else:
                match.other_match_type = kind_name
            _add_annotations(match, f.annotations, skip=("match",))
    else:
        match = msg.match.add()
        match.id = 1
        match.bitwidth = control_plane_width(elem)
        match.match_type = p4info_pb2.MatchField.EXACT


def _add_controller_header(
    p4info: p4info_pb2.P4Info, h: ir.HeaderType, symbols: _SymbolTable, types: _TypeConverter
) -> None:
    type_name = _type_name(h)
    values = h.annotations.get("controller_header") or [type_name]
    name = str(values[0]).strip().strip('"')
    msg = p4info.controller_packet_metadata.add()
    _set_preamble(msg.preamble, symbols.id(CONTROLLER_HEADER, type_name), name, name, h.annotations)
    ids = field_ids([_annotation_id(f.annotations) for f in h.fields])
    for f, fid in zip(h.fields, ids, strict=True):
        if _hidden(f.annotations):
            continue
        md = msg.metadata.add()
        md.id = fid
        md.name = _cp_name_of(f.name, f.annotations)
        _add_annotations(md, f.annotations)
        md.bitwidth = control_plane_width(f.type)
        types.note(f.type)
        named = _named_type(f.type)
        if named:
            md.type_name.name = named


# -------------------------------------------------------------------------- text format


def p4info_to_text(p4info: p4info_pb2.P4Info) -> str:
    """Protobuf text format, as ``p4c --p4runtime-files x.txt`` writes it."""
    return text_format.MessageToString(p4info)


def p4info_from_text(text: str) -> p4info_pb2.P4Info:
    """Parse P4Info text format; a malformed file raises :class:`P4InfoError`."""
    p4info = p4info_pb2.P4Info()
    try:
        text_format.Parse(text, p4info)
    except text_format.ParseError as err:
        raise P4InfoError(f"not a valid P4Info text file: {err}") from None
    return p4info
