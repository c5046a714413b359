"""Illegal P4Runtime requests against a running netreduce.p4 switch.

Each request is wrong in one way (an id the P4Info lacks, a value wider than its field, an
action the table does not allow, missing parameters, an index out of range, an entry that
does not exist, the wrong device, a backup's election id, a device config that is not a
program). The switch must refuse each with an error status and change nothing; the
campaign then checks that it still forwards and that a reconcile finds nothing to write.
Requests go through :class:`controller.p4client.P4Client` as a primary of its own (a fresh
election id, higher than the serving controller's, which gets primary back on close).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from p4.v1 import p4runtime_pb2

from controller.p4client import P4Client, P4RuntimeRequestError
from controller.schema import ControlPlaneSchema
from controller.state import next_election_id
from controller.topology import load_topology

log = logging.getLogger(__name__)

Update: TypeAlias = p4runtime_pb2.Update
BAD_ID = 0x0200FFFF


def _table_entry(schema: ControlPlaneSchema, table: str) -> tuple[Update, Any]:
    info = schema.table(table)
    u = Update(type=Update.INSERT)
    u.entity.table_entry.table_id = info.preamble.id
    return u, info


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

    def attempt(name: str, call: Callable[[], object]) -> None:
        try:
            call()
            code = "OK"
        except P4RuntimeRequestError as err:
            code = err.code.name if err.code is not None else "UNKNOWN"
            if err.errors:
                inner = [e for e in err.errors if getattr(e, "code", None)]
                if inner:
                    code = f"{code} ({inner[0].code.name})"
        results.append({"request": name, "code": code})

    def write(u: Update) -> Callable[[], object]:
        return lambda: primary.write([u])

    try:
        lpm = schema.table("ipv4_lpm")
        set_nhop = schema.action("set_nhop")
        u, _ = _table_entry(schema, "ipv4_lpm")
        u.entity.table_entry.table_id = BAD_ID
        attempt("insert into a table id the P4Info lacks", write(u))

        u, _ = _table_entry(schema, "ipv4_lpm")
        m = u.entity.table_entry.match.add(field_id=lpm.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = b"\x0a\x00\x00\x00\x01", 32
        a = u.entity.table_entry.action.action
        a.action_id = set_nhop.preamble.id
        for p in set_nhop.params:
            a.params.add(param_id=p.id, value=b"\x01")
        attempt("LPM key wider than its 32-bit field", write(u))

        u, _ = _table_entry(schema, "ipv4_lpm")
        m = u.entity.table_entry.match.add(field_id=lpm.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = b"\x0a\x63\x00\x00", 40
        a = u.entity.table_entry.action.action
        a.action_id = set_nhop.preamble.id
        for p in set_nhop.params:
            a.params.add(param_id=p.id, value=b"\x01")
        attempt("LPM prefix length 40 on a 32-bit field", write(u))

        u, _ = _table_entry(schema, "ipv4_lpm")
        m = u.entity.table_entry.match.add(field_id=lpm.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = b"\x0a\x63\x00\x00", 16
        other = next(x for x in schema.p4info.actions
                     if x.preamble.id not in {r.id for r in lpm.action_refs})
        u.entity.table_entry.action.action.action_id = other.preamble.id
        attempt(f"action {other.preamble.name} that ipv4_lpm does not allow", write(u))

        u, _ = _table_entry(schema, "ipv4_lpm")
        m = u.entity.table_entry.match.add(field_id=lpm.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = b"\x0a\x63\x00\x00", 16
        u.entity.table_entry.action.action.action_id = set_nhop.preamble.id
        attempt("set_nhop without its parameters", write(u))

        u, _ = _table_entry(schema, "ipv4_lpm")
        u.type = Update.MODIFY
        m = u.entity.table_entry.match.add(field_id=lpm.match_fields[0].id)
        m.lpm.value, m.lpm.prefix_len = b"\xc6\x33\x64\x00", 24
        a = u.entity.table_entry.action.action
        a.action_id = set_nhop.preamble.id
        for p in set_nhop.params:
            a.params.add(param_id=p.id, value=b"\x01")
        attempt("modify an entry that does not exist", write(u))

        counter = schema.p4info.counters[0]
        u = Update(type=Update.MODIFY)
        u.entity.counter_entry.counter_id = counter.preamble.id
        u.entity.counter_entry.index.index = counter.size + 1000
        attempt(f"counter {counter.preamble.name} index beyond its size", write(u))

        register = schema.p4info.registers[0]
        u = Update(type=Update.MODIFY)
        u.entity.register_entry.register_id = register.preamble.id
        u.entity.register_entry.index.index = register.size + 1000
        u.entity.register_entry.data.bitstring = b"\x01"
        attempt(f"register {register.preamble.name} index beyond its size", write(u))

        u = Update(type=Update.DELETE)
        u.entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 4000
        attempt("delete a multicast group that does not exist", write(u))

        attempt("an update with no entity", write(Update(type=Update.INSERT)))

        def wrong_device() -> None:
            other = P4Client(info.grpc_addr, info.device_id + 77, eid, timeout_s=30.0)
            try:
                other.open_channel()
                u, _ = _table_entry(schema, "ipv4_lpm")
                other.write([u])
            finally:
                other.close()
        attempt("write to a device id the switch does not have", wrong_device)

        def backup() -> None:
            other = P4Client(info.grpc_addr, info.device_id, 1, timeout_s=30.0)
            try:
                other.open_channel()
                u, _ = _table_entry(schema, "ipv4_lpm")
                other.write([u])
            finally:
                other.close()
        attempt("write with a backup's election id", backup)

        def read_bad() -> None:
            ent = p4runtime_pb2.Entity()
            ent.table_entry.table_id = BAD_ID
            primary.read([ent])
        attempt("read a table id the P4Info lacks", read_bad)

        def verify_garbage() -> None:
            primary.set_pipeline(schema.p4info, b"\x00not a program\xff" * 8,
                                 action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY)
        attempt("verify a device config that is not a program", verify_garbage)
    finally:
        primary.close()
    return results
