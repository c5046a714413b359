"""Illegal P4Runtime requests: the one catalogue of how to build a request that is wrong
in one way, and the ones the reliability campaign sends to a running netreduce.p4 switch.

The builders (``table_entry``, ``counter_entry``, ``multicast_group`` ...) make one
``p4.v1.Update`` each from ids; a caller makes it wrong by what it passes (an id the P4Info
lacks, a value wider than its field, an index out of range ...). tests/p4runtime_illegal.py
builds its conformance table (77 requests against tests/p4/p4rt_codes.p4, with the codes
expected from the specification, this switch and BMv2) from them.

The campaign's requests (an id the P4Info lacks, a value wider than its field, an action
the table does not allow, missing parameters, an index out of range, an entry that does
not exist, the wrong device, a backup's election id, a device config that is not a
program): the switch must refuse each with an error status and change nothing; the
campaign then checks that it still forwards and that a reconcile finds nothing to write.
Requests go through :class:`controller.p4client.P4Client` as a primary of its own (a fresh
election id, higher than the serving controller's, which gets primary back on close).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from p4.v1 import p4runtime_pb2

from controller.p4client import P4Client, P4RuntimeRequestError
from controller.schema import ControlPlaneSchema
from controller.state import next_election_id
from controller.topology import load_topology

log = logging.getLogger(__name__)

Update: TypeAlias = p4runtime_pb2.Update
FieldMatch: TypeAlias = p4runtime_pb2.FieldMatch
UpdateType: TypeAlias = p4runtime_pb2.Update.Type.ValueType

# ids no P4Info gives (the top byte is the object kind, as P4Info ids have it)
BAD_TABLE_ID = 0x0200FFFF
BAD_ACTION_ID = 0x0100FFFF
BAD_PROFILE_ID = 0x1100FFFF
BAD_COUNTER_ID = 0x1200FFFF
BAD_METER_ID = 0x1500FFFF
BAD_DIGEST_ID = 0x1800FFFF


# ------------------------------------------------------------------ request builders


def exact(field_id: int, value: bytes) -> FieldMatch:
    return FieldMatch(field_id=field_id, exact=FieldMatch.Exact(value=value))


def lpm(field_id: int, value: bytes, prefix_len: int) -> FieldMatch:
    return FieldMatch(field_id=field_id, lpm=FieldMatch.LPM(value=value, prefix_len=prefix_len))


def ternary(field_id: int, value: bytes, mask: bytes) -> FieldMatch:
    return FieldMatch(field_id=field_id, ternary=FieldMatch.Ternary(value=value, mask=mask))


def range_match(field_id: int, low: bytes, high: bytes) -> FieldMatch:
    return FieldMatch(field_id=field_id, range=FieldMatch.Range(low=low, high=high))


def table_entry(
    table_id: int,
    matches: Sequence[FieldMatch] = (),
    action_id: int | None = None,
    params: Sequence[tuple[int, bytes]] = (),
    utype: UpdateType = Update.INSERT,
    priority: int = 0,
) -> Update:
    """A table entry update; ``params`` are the action's (parameter id, value) pairs, an
    ``action_id`` of None leaves the action out."""
    u = Update(type=utype)
    te = u.entity.table_entry
    te.table_id = table_id
    te.priority = priority
    for m in matches:
        te.match.add().CopyFrom(m)
    if action_id is not None:
        te.action.action.action_id = action_id
        for pid, value in params:
            te.action.action.params.add(param_id=pid, value=value)
    return u


def default_entry(table_id: int, action_id: int) -> Update:
    """A table's default entry set to ``action_id`` (a MODIFY, as it always exists)."""
    u = table_entry(table_id, (), action_id, utype=Update.MODIFY)
    u.entity.table_entry.is_default_action = True
    return u


def indirect_entry(table_id: int, matches: Sequence[FieldMatch], member_id: int) -> Update:
    """An entry of a table with an action profile, naming a member."""
    u = table_entry(table_id, matches)
    u.entity.table_entry.action.action_profile_member_id = member_id
    return u


def profile_member(profile_id: int, member_id: int, action_id: int,
                   params: Sequence[tuple[int, bytes]] = ()) -> Update:
    u = Update(type=Update.INSERT)
    m = u.entity.action_profile_member
    m.action_profile_id = profile_id
    m.member_id = member_id
    m.action.action_id = action_id
    for pid, value in params:
        m.action.params.add(param_id=pid, value=value)
    return u


def profile_group(profile_id: int, group_id: int, members: Sequence[int],
                  max_size: int = 8) -> Update:
    u = Update(type=Update.INSERT)
    g = u.entity.action_profile_group
    g.action_profile_id = profile_id
    g.group_id = group_id
    g.max_size = max_size
    for m in members:
        g.members.add(member_id=m, weight=1)
    return u


def with_type(u: Update, utype: UpdateType) -> Update:
    """``u`` as another update type (MODIFY or DELETE of what was an INSERT)."""
    u.type = utype
    return u


def counter_entry(
    counter_id: int, index: int, utype: UpdateType = Update.MODIFY, packets: int | None = 1
) -> Update:
    u = Update(type=utype)
    c = u.entity.counter_entry
    c.counter_id = counter_id
    c.index.index = index
    if packets is not None:
        c.data.packet_count = packets
    return u


def direct_counter_entry(table_id: int, matches: Sequence[FieldMatch], priority: int,
                         packets: int) -> Update:
    """The direct counter of the entry with these matches and priority."""
    u = Update(type=Update.MODIFY)
    d = u.entity.direct_counter_entry
    d.table_entry.table_id = table_id
    d.table_entry.priority = priority
    for m in matches:
        d.table_entry.match.add().CopyFrom(m)
    d.data.packet_count = packets
    return u


def meter_entry(meter_id: int, index: int, cir: int = 100) -> Update:
    u = Update(type=Update.MODIFY)
    m = u.entity.meter_entry
    m.meter_id = meter_id
    m.index.index = index
    m.config.CopyFrom(p4runtime_pb2.MeterConfig(cir=cir, cburst=10, pir=max(cir, 200), pburst=10))
    return u


def register_entry(register_id: int, index: int, data: bytes = b"\x01") -> Update:
    u = Update(type=Update.MODIFY)
    r = u.entity.register_entry
    r.register_id = register_id
    r.index.index = index
    r.data.bitstring = data
    return u


def multicast_group(
    gid: int, replicas: Sequence[tuple[int, int]] = ((1, 0),), utype: UpdateType = Update.INSERT
) -> Update:
    """A multicast group with (egress port, instance) replicas."""
    u = Update(type=utype)
    g = u.entity.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = gid
    for port, inst in replicas:
        g.replicas.add(egress_port=port, instance=inst)
    return u


def clone_session(sid: int) -> Update:
    u = Update(type=Update.INSERT)
    c = u.entity.packet_replication_engine_entry.clone_session_entry
    c.session_id = sid
    c.replicas.add(egress_port=1, instance=0)
    return u


def digest_entry(did: int) -> Update:
    u = Update(type=Update.INSERT)
    u.entity.digest_entry.digest_id = did
    u.entity.digest_entry.config.max_list_size = 1
    return u


# ------------------------------------------------------------------ the campaign's requests


def campaign_writes(schema: ControlPlaneSchema) -> list[tuple[str, Update]]:
    """The illegal writes the campaign sends to a netreduce.p4 switch, by name."""
    lpm_table = schema.table("ipv4_lpm")
    tid, fid = lpm_table.preamble.id, lpm_table.match_fields[0].id
    set_nhop = schema.action("set_nhop")
    aid = set_nhop.preamble.id
    params = [(p.id, b"\x01") for p in set_nhop.params]
    other = next(x for x in schema.p4info.actions
                 if x.preamble.id not in {r.id for r in lpm_table.action_refs})
    counter = schema.p4info.counters[0]
    register = schema.p4info.registers[0]
    return [
        ("insert into a table id the P4Info lacks", table_entry(BAD_TABLE_ID)),
        ("LPM key wider than its 32-bit field",
         table_entry(tid, [lpm(fid, b"\x0a\x00\x00\x00\x01", 32)], aid, params)),
        ("LPM prefix length 40 on a 32-bit field",
         table_entry(tid, [lpm(fid, b"\x0a\x63\x00\x00", 40)], aid, params)),
        (f"action {other.preamble.name} that ipv4_lpm does not allow",
         table_entry(tid, [lpm(fid, b"\x0a\x63\x00\x00", 16)], other.preamble.id)),
        ("set_nhop without its parameters",
         table_entry(tid, [lpm(fid, b"\x0a\x63\x00\x00", 16)], aid)),
        ("modify an entry that does not exist",
         table_entry(tid, [lpm(fid, b"\xc6\x33\x64\x00", 24)], aid, params, Update.MODIFY)),
        (f"counter {counter.preamble.name} index beyond its size",
         counter_entry(counter.preamble.id, counter.size + 1000, packets=None)),
        (f"register {register.preamble.name} index beyond its size",
         register_entry(register.preamble.id, register.size + 1000)),
        ("delete a multicast group that does not exist",
         multicast_group(4000, (), Update.DELETE)),
        ("an update with no entity", Update(type=Update.INSERT)),
    ]


def illegal_requests(rundir: Path, switch: str) -> list[dict[str, str]]:
    """Sends every illegal request to ``switch`` of the run in ``rundir``; returns
    ``[{"request": ..., "code": ...}]`` (``OK`` would be a bug: the switch accepted it)."""
    topo = load_topology(rundir)
    info = topo.switch(switch)
    if topo.p4info is None:
        raise ValueError(f"{rundir}: the run has no P4Info (no program was pushed)")
    schema = ControlPlaneSchema.from_file(topo.p4info)
    eid = next_election_id(rundir)
    primary = P4Client(info.grpc_addr, info.device_id, eid, timeout_s=30.0)
    primary.connect()
    results: list[dict[str, str]] = []
    try:
        for name, u in campaign_writes(schema):
            results.append(_attempt(name, _write_with(primary, u)))

        def other_client(device_id: int, election_id: int) -> Callable[[], object]:
            return lambda: _write_as(info.grpc_addr, device_id, election_id,
                                     table_entry(schema.table("ipv4_lpm").preamble.id))

        results.append(_attempt("write to a device id the switch does not have",
                                other_client(info.device_id + 77, eid)))
        results.append(_attempt("write with a backup's election id",
                                other_client(info.device_id, 1)))
        bad_read = p4runtime_pb2.Entity()
        bad_read.table_entry.table_id = BAD_TABLE_ID
        results.append(_attempt("read a table id the P4Info lacks",
                                lambda: primary.read([bad_read])))
        results.append(_attempt(
            "verify a device config that is not a program",
            lambda: primary.set_pipeline(
                schema.p4info, b"\x00not a program\xff" * 8,
                action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY)))
    finally:
        primary.close()
    return results


def _write_with(client: P4Client, u: Update) -> Callable[[], object]:
    return lambda: client.write([u])


def _write_as(address: str, device_id: int, election_id: int, u: Update) -> None:
    """One write from a client of its own (another device id, a backup's election id)."""
    other = P4Client(address, device_id, election_id, timeout_s=30.0)
    try:
        other.open_channel()
        other.write([u])
    finally:
        other.close()


def _attempt(name: str, call: Callable[[], object]) -> dict[str, str]:
    """The status a request got: ``OK``, or its code (and the first update's own code)."""
    try:
        call()
        code = "OK"
    except P4RuntimeRequestError as err:
        code = err.code.name if err.code is not None else "UNKNOWN"
        if err.errors:
            inner = [e for e in err.errors if getattr(e, "code", None)]
            if inner:
                code = f"{code} ({inner[0].code.name})"
    return {"request": name, "code": code}
