"""One index over a P4Info: find P4 objects by name and encode values the P4Runtime way.

:class:`ControlPlaneSchema` answers ``schema.table("ipv4_lpm")`` with the P4Info table whose
full name is ``MyIngress.ipv4_lpm`` (the alias or a unique suffix at a dot boundary is
enough), and a miss with ``no table named 'ipv4_lpn'. Did you mean 'MyIngress.ipv4_lpm'?``;
the look-ups are the shared :class:`p4schema.P4InfoIndex`, so the server resolves names the
same way. The encoders turn Python values (ints, dotted IPv4 addresses, colon MAC addresses,
``"10.0.1.0/24"`` prefixes) into the canonical bytestrings P4Runtime requires (big-endian,
leading zero bytes stripped, at least one byte) and back.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.errors import SchemaError
from p4schema import P4InfoIndex, P4InfoLookupError

MatchType = p4info_pb2.MatchField.MatchType

# A match value as the caller writes it: exact/optional -> value; lpm -> (value, prefix_len)
# or "a.b.c.d/len"; ternary -> (value, mask); range -> (low, high).
MatchValue = Any


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read P4Info in text (``.txt``/``.txtpb``/``.pb.txt``) or binary format."""
    data = Path(path).read_bytes()
    info = p4info_pb2.P4Info()
    try:
        text_format.Parse(data.decode("utf-8"), info)
    except (UnicodeDecodeError, text_format.ParseError) as text_err:
        try:
            info.ParseFromString(data)
        except Exception:  # protobuf raises DecodeError or RuntimeWarning-style errors
            raise SchemaError(f"{path}: not a P4Info file ({text_err})") from None
    return info


# ------------------------------------------------------------------- values
def encode_int(value: int, bitwidth: int, what: str = "value") -> bytes:
    """Canonical P4Runtime bytestring of ``value`` (which must fit ``bitwidth`` bits)."""
    if value < 0:
        raise SchemaError(f"{what}: {value} is negative")
    if bitwidth and value >> bitwidth:
        raise SchemaError(f"{what}: {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_int(data: bytes) -> int:
    return int.from_bytes(data, "big")


def parse_value(value: Any, bitwidth: int, what: str = "value") -> int:
    """An int from an int, a bool, a numeric string, a dotted IPv4 or a colon MAC address."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return decode_int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            if "." in text and bitwidth in (0, 32):
                return int(ipaddress.IPv4Address(text))
            if ":" in text and bitwidth in (0, 48):
                parts = text.split(":")
                if len(parts) == 6 and all(len(p) in (1, 2) for p in parts):
                    return int("".join(p.zfill(2) for p in parts), 16)
            return int(text, 0)
        except ValueError:
            pass
    raise SchemaError(f"{what}: cannot use {value!r} as a {bitwidth}-bit value")


def format_value(value: int, bitwidth: int, hint: str = "") -> str:
    """A readable form: dotted IPv4 for 32-bit addresses, colon MAC for 48-bit ones."""
    name = hint.lower()
    if bitwidth == 32 and ("addr" in name or "ip" in name):
        return str(ipaddress.IPv4Address(value))
    if bitwidth == 48 and ("addr" in name or "mac" in name):
        raw = value.to_bytes(6, "big")
        return ":".join(f"{b:02x}" for b in raw)
    return str(value)


# --------------------------------------------------------------- the index
R = TypeVar("R")


def _found(find: Callable[[], R]) -> R:
    """The result of a look-up in the shared index, its miss raised as a SchemaError."""
    try:
        return find()
    except P4InfoLookupError as err:
        raise SchemaError(str(err)) from None


class ControlPlaneSchema:
    """Read-only index of one P4Info (the shared :class:`p4schema.P4InfoIndex`) with the
    controller's encoders; every miss raises :class:`SchemaError`."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.index = P4InfoIndex(p4info)

    @classmethod
    def from_file(cls, path: str | Path) -> ControlPlaneSchema:
        return cls(load_p4info(path))

    # ---- look-ups (by full name, alias, unique suffix, or id)
    def table(self, key: str | int) -> p4info_pb2.Table:
        return _found(lambda: self.index.table(key))

    def action(self, key: str | int) -> p4info_pb2.Action:
        return _found(lambda: self.index.action(key))

    def counter(self, key: str | int) -> p4info_pb2.Counter:
        return _found(lambda: self.index.counter(key))

    def direct_counter(self, key: str | int) -> p4info_pb2.DirectCounter:
        return _found(lambda: self.index.direct_counter(key))

    def register(self, key: str | int) -> p4info_pb2.Register:
        return _found(lambda: self.index.register(key))

    def meter(self, key: str | int) -> p4info_pb2.Meter:
        return _found(lambda: self.index.meter(key))

    def action_profile(self, key: str | int) -> p4info_pb2.ActionProfile:
        return _found(lambda: self.index.action_profile(key))

    def digest(self, key: str | int) -> p4info_pb2.Digest:
        return _found(lambda: self.index.digest(key))

    def packet_metadata(self, key: str | int) -> p4info_pb2.ControllerPacketMetadata:
        return _found(lambda: self.index.packet_metadata(key))

    def table_names(self) -> list[str]:
        return sorted(self.index.tables.names())

    def counter_names(self) -> list[str]:
        return sorted(self.index.counters.names())

    def register_names(self) -> list[str]:
        return sorted(self.index.registers.names())

    def has_table(self, key: str) -> bool:
        return self.index.tables.get(key) is not None

    @staticmethod
    def match_field(table: p4info_pb2.Table, key: str | int) -> p4info_pb2.MatchField:
        return _found(lambda: P4InfoIndex.match_field(table, key))

    @staticmethod
    def action_param(action: p4info_pb2.Action, key: str | int) -> p4info_pb2.Action.Param:
        return _found(lambda: P4InfoIndex.param(action, key))

    def table_actions(self, table: p4info_pb2.Table) -> list[str]:
        return _found(lambda: self.index.table_actions(table))

    # ---- encoders
    def field_match(self, table: p4info_pb2.Table, name: str | int,
                    value: MatchValue) -> p4runtime_pb2.FieldMatch | None:
        """The FieldMatch for one key field, or None for a don't-care (omitted) match."""
        mf = self.match_field(table, name)
        what = f"{table.preamble.name}: match field {mf.name!r}"
        width = mf.bitwidth
        fm = p4runtime_pb2.FieldMatch(field_id=mf.id)
        kind = mf.match_type
        if kind == MatchType.EXACT:
            fm.exact.value = encode_int(parse_value(value, width, what), width, what)
        elif kind == MatchType.OPTIONAL:
            if value is None:
                return None
            fm.optional.value = encode_int(parse_value(value, width, what), width, what)
        elif kind == MatchType.LPM:
            return _lpm_match(fm, value, width, what)
        elif kind == MatchType.TERNARY:
            return _ternary_match(fm, value, width, what)
        elif kind == MatchType.RANGE:
            return _range_match(fm, value, width, what)
        else:
            raise SchemaError(f"{what}: unsupported match type {kind}")
        return fm

    def action_call(self, action_name: str | int,
                    params: Mapping[str, Any] | None = None) -> p4runtime_pb2.Action:
        """An Action with every parameter given (by name), encoded canonically."""
        action = self.action(action_name)
        given = dict(params or {})
        msg = p4runtime_pb2.Action(action_id=action.preamble.id)
        for p in action.params:
            if p.name not in given:
                raise SchemaError(f"action {action.preamble.name!r}: parameter {p.name!r} missing")
            what = f"{action.preamble.name}: parameter {p.name!r}"
            value = parse_value(given.pop(p.name), p.bitwidth, what)
            msg.params.add(param_id=p.id, value=encode_int(value, p.bitwidth, what))
        if given:
            bad = next(iter(given))
            self.action_param(action, bad)  # raises with a suggestion
        return msg

    def table_entry(self, table_name: str | int, match: Mapping[str, MatchValue] | None = None,
                    action: str | None = None, params: Mapping[str, Any] | None = None,
                    priority: int = 0, is_default: bool = False,
                    group_id: int | None = None) -> p4runtime_pb2.TableEntry:
        """A TableEntry from names and Python values (match fields sorted by id)."""
        table = self.table(table_name)
        entry = p4runtime_pb2.TableEntry(table_id=table.preamble.id, priority=priority,
                                         is_default_action=is_default)
        fms = []
        for name, value in (match or {}).items():
            fm = self.field_match(table, name, value)
            if fm is not None:
                fms.append(fm)
        entry.match.extend(sorted(fms, key=lambda f: f.field_id))
        if group_id is not None:
            entry.action.action_profile_group_id = group_id
        elif action is not None:
            allowed = self.table_actions(table)
            full = self.action(action).preamble.name
            if full not in allowed:
                raise SchemaError(
                    f"table {table.preamble.name!r} has no action {full!r} "
                    f"(actions: {', '.join(allowed)})"
                )
            entry.action.action.CopyFrom(self.action_call(action, params))
        return entry

    # ---- decoders
    def decode_match(self, table: p4info_pb2.Table,
                     fm: p4runtime_pb2.FieldMatch) -> tuple[str, str]:
        """(field name, readable value) of one FieldMatch."""
        mf = self.match_field(table, fm.field_id)
        width, name = mf.bitwidth, mf.name
        kind = fm.WhichOneof("field_match_type")
        if kind == "exact":
            return name, format_value(decode_int(fm.exact.value), width, name)
        if kind == "optional":
            return name, format_value(decode_int(fm.optional.value), width, name)
        if kind == "lpm":
            return (
                name,
                f"{format_value(decode_int(fm.lpm.value), width, name)}/{fm.lpm.prefix_len}",
            )
        if kind == "ternary":
            return name, (f"{format_value(decode_int(fm.ternary.value), width, name)}"
                          f" &&& {decode_int(fm.ternary.mask):#x}")
        if kind == "range":
            return name, f"{decode_int(fm.range.low)}..{decode_int(fm.range.high)}"
        return name, "?"

    def decode_action(self, action: p4runtime_pb2.Action) -> tuple[str, dict[str, int]]:
        """(action full name, {param name: int})."""
        info = self.action(action.action_id)
        params = {self.action_param(info, p.param_id).name: decode_int(p.value)
                  for p in action.params}
        return info.preamble.name, params

    def describe_entry(self, entry: p4runtime_pb2.TableEntry) -> dict[str, Any]:
        """A JSON-friendly description of a table entry."""
        table = self.table(entry.table_id)
        out: dict[str, Any] = {
            "table": table.preamble.name,
            "match": dict(self.decode_match(table, fm) for fm in entry.match),
        }
        if entry.priority:
            out["priority"] = entry.priority
        if entry.is_default_action:
            out["default"] = True
        kind = entry.action.WhichOneof("type")
        if kind == "action":
            name, params = self.decode_action(entry.action.action)
            out["action"] = name
            out["params"] = params
        elif kind == "action_profile_group_id":
            out["group"] = entry.action.action_profile_group_id
        elif kind == "action_profile_member_id":
            out["member"] = entry.action.action_profile_member_id
        if entry.HasField("counter_data"):
            out["packets"] = entry.counter_data.packet_count
            out["bytes"] = entry.counter_data.byte_count
        return out


def _lpm_match(fm: p4runtime_pb2.FieldMatch, value: MatchValue, width: int,
               what: str) -> p4runtime_pb2.FieldMatch | None:
    """``"addr/len"``, ``(value, len)`` or a value (the whole width); /0 is don't-care."""
    if isinstance(value, str) and "/" in value:
        addr, _, plen_text = value.partition("/")
        val, plen = parse_value(addr, width, what), int(plen_text)
    elif isinstance(value, tuple):
        val, plen = parse_value(value[0], width, what), int(value[1])
    else:
        val, plen = parse_value(value, width, what), width
    if not 0 <= plen <= width:
        raise SchemaError(f"{what}: prefix length {plen} outside 0..{width}")
    if plen == 0:
        return None
    mask = ((1 << plen) - 1) << (width - plen)
    fm.lpm.value = encode_int(val & mask, width, what)
    fm.lpm.prefix_len = plen
    return fm


def _pair(value: MatchValue, width: int, what: str, needs: str) -> tuple[int, int]:
    """The two numbers of a ``(a, b)`` match value."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise SchemaError(f"{what}: {needs}, got {value!r}")
    return parse_value(value[0], width, what), parse_value(value[1], width, what)


def _ternary_match(fm: p4runtime_pb2.FieldMatch, value: MatchValue, width: int,
                   what: str) -> p4runtime_pb2.FieldMatch | None:
    """``(value, mask)``; mask 0 is don't-care."""
    val, mask = _pair(value, width, what, "ternary match needs (value, mask)")
    if mask == 0:
        return None
    fm.ternary.value = encode_int(val & mask, width, what)
    fm.ternary.mask = encode_int(mask, width, what)
    return fm


def _range_match(fm: p4runtime_pb2.FieldMatch, value: MatchValue, width: int,
                 what: str) -> p4runtime_pb2.FieldMatch | None:
    """``(low, high)``; the full range is don't-care."""
    low, high = _pair(value, width, what, "range match needs (low, high)")
    if low > high:
        raise SchemaError(f"{what}: range low {low} > high {high}")
    if low == 0 and high == (1 << width) - 1:
        return None
    fm.range.low = encode_int(low, width, what)
    fm.range.high = encode_int(high, width, what)
    return fm
