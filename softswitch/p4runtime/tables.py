"""Translation between P4Runtime ``TableEntry`` messages and engine table entries.

Validation follows the P4Runtime specification: every exact field present, don't-care
fields omitted (a ternary mask of zero, an LPM prefix of zero, a full range), no bits set
outside a mask or prefix, priorities only (and always) for tables with ternary, range or
optional fields, and actions taken from the table's action list with the right scope.
"""

from __future__ import annotations

from typing import Any

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from softswitch.engine import externs
from softswitch.engine import tables as engine_tables
from softswitch.p4runtime.codec import decode, encode
from softswitch.p4runtime.schema import MATCH_KIND_NAMES, P4InfoById, TableInfo
from softswitch.p4runtime.status import StatusError, invalid, not_found, unimplemented

MatchKey = tuple[Any, ...]  # tuple of engine FieldMatch | None


def _ones(width: int) -> int:
    return (1 << width) - 1


def decode_matches(info: TableInfo, matches: Any) -> MatchKey:
    """Engine match tuple (one slot per key field, None = don't care) from FieldMatch protos."""
    slots: list[Any] = [None] * len(info.proto.match_fields)
    seen: set[int] = set()
    for fm in matches:
        mf = info.fields_by_id.get(fm.field_id)
        if mf is None:
            raise invalid(f"table {info.name!r} has no match field with id {fm.field_id}")
        if fm.field_id in seen:
            raise invalid(f"match field {mf.name!r} given twice")
        seen.add(fm.field_id)
        kind = fm.WhichOneof("field_match_type")
        expected = MATCH_KIND_NAMES.get(mf.match_type, "other")
        if kind != expected:
            raise invalid(
                f"match field {mf.name!r} of table {info.name!r} is {expected}, got {kind}"
            )
        slots[info.field_index[fm.field_id]] = _decode_field(
            kind, fm, mf.bitwidth, f"match field {mf.name!r}"
        )
    for mf in info.proto.match_fields:
        if mf.match_type == p4info_pb2.MatchField.EXACT and mf.id not in seen:
            raise invalid(f"exact match field {mf.name!r} of table {info.name!r} is missing")
    return tuple(slots)


def _decode_field(kind: str, fm: Any, width: int, what: str) -> Any:
    """One FieldMatch proto of match kind ``kind`` as an engine FieldMatch; a don't-care
    value must have been omitted (a zero mask, prefix length or the full range)."""
    et = engine_tables
    if kind == "exact":
        return et.FieldMatch(value=decode(fm.exact.value, width, what))
    if kind == "ternary":
        value = decode(fm.ternary.value, width, what)
        mask = decode(fm.ternary.mask, width, what + " mask")
        if mask == 0:
            raise invalid(f"{what}: a zero mask must be omitted (don't care)")
        if value & ~mask:
            raise invalid(f"{what}: value has bits set outside the mask")
        return et.FieldMatch(value=value, mask=mask)
    if kind == "lpm":
        return _decode_lpm(fm, width, what)
    if kind == "range":
        low = decode(fm.range.low, width, what + " low")
        high = decode(fm.range.high, width, what + " high")
        if low > high:
            raise invalid(f"{what}: low bound {low} is above high bound {high}")
        if low == 0 and high == _ones(width):
            raise invalid(f"{what}: a full range must be omitted (don't care)")
        return et.FieldMatch(value=low, high=high)
    if kind == "optional":
        return et.FieldMatch(value=decode(fm.optional.value, width, what), mask=_ones(width))
    raise unimplemented(f"{what}: match kind {kind!r} is not supported")


def _decode_lpm(fm: Any, width: int, what: str) -> Any:
    """An LPM match: a prefix length in 1..width, no value bits beyond it."""
    value = decode(fm.lpm.value, width, what)
    plen = fm.lpm.prefix_len
    if plen <= 0 or plen > width:
        if plen == 0:
            raise invalid(f"{what}: a zero prefix length must be omitted (don't care)")
        raise invalid(f"{what}: prefix length {plen} outside 1..{width}")
    if value & _ones(width - plen):
        raise invalid(f"{what}: value has bits set beyond the prefix length {plen}")
    return engine_tables.FieldMatch(value=value, prefix_len=plen)


def encode_matches(info: TableInfo, key: MatchKey) -> list[p4runtime_pb2.FieldMatch]:
    """FieldMatch protos (canonical bytes, don't-care fields omitted) of an engine key."""
    out: list[p4runtime_pb2.FieldMatch] = []
    for mf, slot in zip(info.proto.match_fields, key, strict=True):
        if slot is None:
            continue
        fm = _encode_field(mf, slot)
        if fm is not None:
            out.append(fm)
    return out


def _encode_field(mf: Any, slot: Any) -> p4runtime_pb2.FieldMatch | None:
    """One key field's FieldMatch proto (None: a don't-care value, omitted)."""
    fm = p4runtime_pb2.FieldMatch(field_id=mf.id)
    mt = mf.match_type
    if mt == p4info_pb2.MatchField.EXACT:
        fm.exact.value = encode(slot.value)
    elif mt == p4info_pb2.MatchField.TERNARY:
        if not slot.mask:
            return None
        fm.ternary.value = encode(slot.value)
        fm.ternary.mask = encode(slot.mask)
    elif mt == p4info_pb2.MatchField.LPM:
        if not slot.prefix_len:
            return None
        fm.lpm.value = encode(slot.value)
        fm.lpm.prefix_len = slot.prefix_len
    elif mt == p4info_pb2.MatchField.RANGE:
        high = slot.high if slot.high is not None else slot.value
        if slot.value == 0 and high == _ones(mf.bitwidth):
            return None
        fm.range.low = encode(slot.value)
        fm.range.high = encode(high)
    elif mt == p4info_pb2.MatchField.OPTIONAL:
        if slot.mask == 0:
            return None
        fm.optional.value = encode(slot.value)
    return fm


def decode_action(schema: P4InfoById, info: TableInfo | None, action: Any, default: bool) -> Any:
    """Engine ActionCall from a ``p4.v1.Action``; checks the table's action list and scope."""
    et = engine_tables
    a = schema.action(action.action_id)
    name = a.preamble.name
    if info is not None:
        scope = info.action_scopes.get(action.action_id)
        if scope is None:
            raise invalid(f"action {name!r} is not in the action list of table {info.name!r}")
        # A valid action used outside its scope is PERMISSION_DENIED (specification).
        if default and scope == p4info_pb2.ActionRef.TABLE_ONLY:
            raise StatusError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"action {name!r} is @tableonly in table {info.name!r}: not a default action",
            )
        if not default and scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
            raise StatusError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"action {name!r} is @defaultonly in table {info.name!r}: not in an entry",
            )
    params = schema.action_params[action.action_id]
    values: dict[int, int] = {}
    for p in action.params:
        pinfo = params.get(p.param_id)
        if pinfo is None:
            raise invalid(f"action {name!r} has no parameter with id {p.param_id}")
        if p.param_id in values:
            raise invalid(f"parameter {pinfo.name!r} of action {name!r} given twice")
        values[p.param_id] = decode(p.value, pinfo.bitwidth, f"parameter {pinfo.name!r}")
    missing = [p.name for p in a.params if p.id not in values]
    if missing:
        raise invalid(f"action {name!r}: missing parameters {missing}")
    return et.ActionCall(name=name, args=tuple(values[p.id] for p in a.params))


def encode_action(schema: P4InfoById, call: Any) -> p4runtime_pb2.Action:
    aid = schema.action_ids_by_name.get(call.name)
    if aid is None:
        raise StatusError(grpc.StatusCode.INTERNAL, f"engine action {call.name!r} not in P4Info")
    out = p4runtime_pb2.Action(action_id=aid)
    for p, value in zip(schema.actions[aid].params, call.args, strict=False):
        out.params.add(param_id=p.id, value=encode(value))
    return out


def engine_table(pipeline: Any, info: TableInfo) -> Any:
    table = pipeline.tables.get(info.name)
    if table is None:
        raise StatusError(
            grpc.StatusCode.INTERNAL, f"table {info.name!r} is in P4Info but not in the pipeline"
        )
    return table


def meter_config_from_proto(cfg: p4runtime_pb2.MeterConfig) -> Any:
    """The engine's MeterConfig of a P4Runtime one."""
    return externs.MeterConfig(cir=cfg.cir, cburst=cfg.cburst, pir=cfg.pir, pburst=cfg.pburst)


def meter_config_to_proto(cfg: Any) -> p4runtime_pb2.MeterConfig:
    return p4runtime_pb2.MeterConfig(
        cir=int(getattr(cfg, "cir", 0)),
        cburst=int(getattr(cfg, "cburst", 0)),
        pir=int(getattr(cfg, "pir", 0)),
        pburst=int(getattr(cfg, "pburst", 0)),
    )


def build_entry(schema: P4InfoById, info: TableInfo, msg: p4runtime_pb2.TableEntry) -> Any:
    """Engine TableEntry for an INSERT/MODIFY (not the default entry)."""
    et = engine_tables
    key = decode_matches(info, msg.match)
    check_priority(info, msg.priority)
    action = None
    member_id = None
    group_id = None
    which = msg.action.WhichOneof("type")
    if which == "action":
        action = decode_action(schema, info, msg.action.action, default=False)
    elif which == "action_profile_member_id":
        member_id = msg.action.action_profile_member_id
    elif which == "action_profile_group_id":
        group_id = msg.action.action_profile_group_id
    elif which == "action_profile_action_set":
        raise unimplemented("one-shot action selector programming is not supported")
    else:
        raise invalid(f"table entry for {info.name!r} has no action")
    if (member_id is not None or group_id is not None) and not info.proto.implementation_id:
        raise invalid(f"table {info.name!r} has no action profile implementation")
    if action is not None and info.proto.implementation_id:
        raise invalid(f"table {info.name!r} takes action profile members or groups")
    entry = et.TableEntry(
        matches=key,
        action=action,
        priority=msg.priority,
        member_id=member_id,
        group_id=group_id,
        idle_timeout_ns=msg.idle_timeout_ns,
    )
    if msg.HasField("counter_data"):
        entry.packets = msg.counter_data.packet_count
        entry.bytes = msg.counter_data.byte_count
    if msg.HasField("meter_config"):
        if info.direct_meter is None:
            raise invalid(f"table {info.name!r} has no direct meter")
        entry.meter = meter_config_from_proto(msg.meter_config)
    return entry


def check_priority(info: TableInfo, priority: int) -> None:
    if info.needs_priority and priority <= 0:
        raise invalid(
            f"table {info.name!r} has ternary/range/optional fields: priority must be > 0"
        )
    if not info.needs_priority and priority != 0:
        raise invalid(f"table {info.name!r} has only exact/lpm fields: priority must be 0")
    if priority < 0 or priority >= 1 << 31:
        raise invalid(f"priority {priority} outside 1..2^31-1")


def entry_to_proto(
    schema: P4InfoById, info: TableInfo, entry: Any, metadata: bytes, with_counters: bool
) -> p4runtime_pb2.TableEntry:
    out = p4runtime_pb2.TableEntry(table_id=info.proto.preamble.id, priority=entry.priority)
    out.match.extend(encode_matches(info, entry.matches))
    if entry.action is not None:
        out.action.action.CopyFrom(encode_action(schema, entry.action))
    elif entry.member_id is not None:
        out.action.action_profile_member_id = entry.member_id
    elif entry.group_id is not None:
        out.action.action_profile_group_id = entry.group_id
    if metadata:
        out.metadata = metadata
    if getattr(entry, "is_const", False):
        out.is_const = True
    if entry.idle_timeout_ns:
        out.idle_timeout_ns = entry.idle_timeout_ns
    if with_counters and info.direct_counter is not None:
        out.counter_data.packet_count = entry.packets
        out.counter_data.byte_count = entry.bytes
    if info.direct_meter is not None and getattr(entry, "meter", None) is not None:
        out.meter_config.CopyFrom(meter_config_to_proto(entry.meter))
    return out


def default_entry_to_proto(
    schema: P4InfoById, info: TableInfo, table: Any
) -> p4runtime_pb2.TableEntry:
    out = p4runtime_pb2.TableEntry(table_id=info.proto.preamble.id, is_default_action=True)
    if table.default_action is not None:
        out.action.action.CopyFrom(encode_action(schema, table.default_action))
    return out


def table_error(exc: Exception) -> StatusError:
    """StatusError for an engine TableError (code name + message)."""
    code = getattr(exc, "code", "UNKNOWN")
    message = getattr(exc, "message", str(exc))
    try:
        status = grpc.StatusCode[code]
    except KeyError:
        status = grpc.StatusCode.UNKNOWN
    return StatusError(status, message)


def find_entry(table: Any, key: MatchKey, priority: int, info: TableInfo) -> Any:
    entry = table.find(key, priority)
    if entry is None:
        raise not_found(f"no such entry in table {info.name!r}")
    return entry
