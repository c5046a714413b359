"""The same illegal P4Runtime requests for any server, with the status codes expected from
the specification, from this switch and from BMv2's ``simple_switch_grpc`` (used by
tests/test_p4runtime_bmv2_codes.py; docs/conformance.md shows the table).

Requests name P4 objects of tests/p4/p4rt_codes.p4 by name and are resolved against the
P4Info each server was given, so p4c's ids and ours need not agree; they are built with the
catalogue's builders in reliability/illegal.py (the campaign sends some of the same).
``spec`` is "-" where the specification leaves the code open; ``ours`` then follows BMv2
unless the note says why not. Run ``python -m tests.p4runtime_illegal`` for the Markdown
table.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.p4client import wait_until_ready
from reliability.illegal import (
    BAD_ACTION_ID,
    BAD_COUNTER_ID,
    BAD_DIGEST_ID,
    BAD_METER_ID,
    BAD_PROFILE_ID,
    BAD_TABLE_ID,
    UpdateType,
    clone_session,
    counter_entry,
    default_entry,
    digest_entry,
    direct_counter_entry,
    exact,
    indirect_entry,
    lpm,
    meter_entry,
    multicast_group,
    profile_group,
    profile_member,
    range_match,
    register_entry,
    table_entry,
    ternary,
    with_type,
)
from softswitch.p4runtime.server import P4RuntimeService, start_server
from softswitch.switch import SwitchDataPlane

Update = p4runtime_pb2.Update
FwdReq = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetReq = p4runtime_pb2.GetForwardingPipelineConfigRequest
ELECTION = (0, 1)


class Ids:
    """Names of tests/p4/p4rt_codes.p4 -> ids in one server's P4Info."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self._by_name: dict[str, int] = {}
        for kind in ("tables", "actions", "counters", "meters", "registers", "digests",
                     "action_profiles", "direct_counters"):
            for obj in getattr(p4info, kind):
                self._by_name[obj.preamble.name.split(".")[-1]] = obj.preamble.id

    def __getitem__(self, name: str) -> int:
        return self._by_name[name]

    def field(self, table: str, name: str) -> int:
        t = next(t for t in self.p4info.tables if t.preamble.id == self[table])
        return next(f.id for f in t.match_fields if f.name.endswith(name))


# ------------------------------------------------------------------ request builders
# (the general ones are reliability.illegal's; these name p4rt_codes.p4's objects)


def exact_entry(ids: Ids, ethertype: bytes | None = b"\x08\x00",
                port: bytes | None = b"\x01",
                action: str = "set_port", params: tuple[bytes, ...] = (b"\x02",)) -> Update:
    matches = [exact(1, ethertype)] if ethertype is not None else []
    if port is not None:
        matches.append(exact(2, port))
    return table_entry(ids["t_exact"], matches, ids[action] if action else BAD_ACTION_ID,
                       list(enumerate(params, 1)))


def edit(u: Update, fn: Callable[[Any], Any]) -> Update:
    fn(u.entity.table_entry)
    return u


def lpm_entry(ids: Ids, value: bytes, plen: int) -> Update:
    return table_entry(ids["t_lpm"], [lpm(1, value, plen)], ids["drop"])


def acl_entry(ids: Ids, priority: int = 10, value: bytes = b"\x02", mask: bytes = b"\xff",
              low: bytes | None = None, high: bytes | None = None) -> Update:
    matches = [ternary(1, value, mask)]
    if low is not None:
        assert high is not None
        matches.append(range_match(2, low, high))
    return table_entry(ids["t_acl"], matches, ids["acl_drop"], priority=priority)


def member(ids: Ids, mid: int = 1, port: bytes = b"\x01", profile: int | None = None) -> Update:
    return profile_member(ids["sel"] if profile is None else profile, mid, ids["set_port"],
                          [(1, port)])


def counter(ids: Ids, index: int, utype: UpdateType = Update.MODIFY,
            cid: int | None = None) -> Update:
    return counter_entry(ids["ctr"] if cid is None else cid, index, utype)


def meter(ids: Ids, index: int, cir: int = 100, mid: int | None = None) -> Update:
    return meter_entry(ids["mtr"] if mid is None else mid, index, cir)


def setup_updates(ids: Ids) -> list[Update]:
    """State the cases rely on: one t_exact entry, one member, one multicast group, one
    t_acl entry, digest configured."""
    return [exact_entry(ids), member(ids, 1), multicast_group(1), acl_entry(ids),
            digest_entry(ids["learn_t"])]


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One illegal request; ``kind`` is write (one update), write_rpc, read, set or get."""

    name: str
    kind: str
    build: Callable[[Ids], Any]
    spec: str
    ours: str
    bmv2: str
    note: str = ""


def _write_req(ids: Ids, **kw: Any) -> p4runtime_pb2.WriteRequest:
    """A WriteRequest from the primary unless ``kw`` says otherwise."""
    kw.setdefault("election_id", p4runtime_pb2.Uint128(high=ELECTION[0], low=ELECTION[1]))
    return p4runtime_pb2.WriteRequest(**kw)


def _read(entity: dict[str, Any], device_id: int = 0) -> Callable[[Ids], Any]:
    def build(ids: Ids) -> p4runtime_pb2.ReadRequest:
        req = p4runtime_pb2.ReadRequest(device_id=device_id)
        ent = req.entities.add()
        for kind, fields in entity.items():
            sub = getattr(ent, kind)
            sub.SetInParent()
            for k, v in fields.items():
                v = ids[v] if isinstance(v, str) else v
                if k == "index":
                    sub.index.index = v
                else:
                    setattr(sub, k, v)
        return req
    return build


IA, NF, OK, OOR, PD, AE, UN, UK, FP = (
    "INVALID_ARGUMENT", "NOT_FOUND", "OK", "OUT_OF_RANGE", "PERMISSION_DENIED",
    "ALREADY_EXISTS", "UNIMPLEMENTED", "UNKNOWN", "FAILED_PRECONDITION",
)

CASES: list[Case] = [
    # ---- the Write RPC itself
    Case("write: unknown device id", "write_rpc",
         lambda ids: (_write_req(ids, device_id=7), [exact_entry(ids, port=b"\x05")]),
         NF, NF, PD,
         "BMv2 makes a new empty device for any id; its check then fails on arbitration"),
    Case("write: election id of a backup", "write_rpc",
         lambda ids: (_write_req(ids, election_id=p4runtime_pb2.Uint128(low=0)),
                      [exact_entry(ids, port=b"\x05")]),
         PD, PD, PD),
    Case("write: ROLLBACK_ON_ERROR atomicity", "write_rpc",
         lambda ids: (_write_req(ids, atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR),
                      [exact_entry(ids, port=b"\x05")]),
         "-", UN, UN),
    Case("write: unknown role", "write_rpc",
         lambda ids: (_write_req(ids, role="nosuchrole"), [exact_entry(ids, port=b"\x05")]),
         NF, NF, OK, "BMv2's server has no roles: it ignores the field and applies the write"),
    # ---- table entries
    Case("table: unknown table id", "write",
         lambda ids: edit(exact_entry(ids), lambda te: setattr(te, "table_id", BAD_TABLE_ID)),
         "-", IA, IA),
    Case("table: unknown action id", "write", lambda ids: exact_entry(ids, b"\x08\x06", action=""),
         "-", IA, IA),
    Case("table: action not in the table", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", action="acl_drop", params=()), IA, IA, IA),
    Case("table: @defaultonly action in an entry", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", action="only_default", params=()), PD, PD, PD),
    Case("table: @tableonly action as default", "write",
         lambda ids: default_entry(ids["t_exact"], ids["only_in_table"]), PD, PD, PD),
    Case("table: exact value wider than the field", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", port=b"\x02\x00"), IA, IA, IA,
         "the match-format rules say INVALID_ARGUMENT (the generic bytestring rule OUT_OF_RANGE)"),
    Case("table: exact value empty", "write", lambda ids: exact_entry(ids, b"", port=b"\x07"), IA,
         IA, OK,
         "BMv2 pads the empty string to zero; the specification always rejects it"),
    Case("table: exact value with leading zero bytes", "write",
         lambda ids: exact_entry(ids, b"\x00\x00\x08\x07", port=b"\x01"), OK, OK, OK),
    Case("table: missing exact field", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", port=None), IA, IA, IA),
    Case("table: unknown match field id", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x06"),
                          lambda te: setattr(te.match[1], "field_id", 9)), IA, IA, IA),
    Case("table: match field given twice", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x06"),
                          lambda te: te.match.add().CopyFrom(te.match[1])), IA, IA, IA),
    Case("table: ternary match on an exact field", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x06", port=None), lambda te: te.match.add(
             field_id=2, ternary=p4runtime_pb2.FieldMatch.Ternary(value=b"\x01", mask=b"\x01"))),
             IA, IA, IA),
    Case("table: action parameter too wide", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", params=(b"\x02\x00",)), IA, IA, IA),
    Case("table: action parameter missing", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", action="set_both", params=(b"\x01",)), IA, IA,
         IA),
    Case("table: unknown action parameter id", "write",
         lambda ids: exact_entry(ids, b"\x08\x06", params=(b"\x01", b"\x02")), IA, IA, IA),
    Case("table: action parameter empty", "write",
         lambda ids: exact_entry(ids, b"\x08\x08", params=(b"",)), IA, IA, OK,
         "BMv2 pads the empty string to zero; the specification always rejects it"),
    Case("table: entry without an action", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x06"), lambda te: te.ClearField("action")), IA,
         IA, IA),
    Case("table: priority on an exact table", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x06"), lambda te: setattr(te, "priority", 5)), IA,
         IA, IA),
    Case("table: ternary table without priority", "write", lambda ids: acl_entry(ids, priority=0),
         IA, IA, IA),
    Case("table: ternary value outside the mask", "write",
         lambda ids: acl_entry(ids, value=b"\x03", mask=b"\x01"), IA, IA, IA),
    Case("table: ternary mask zero (don't care)", "write",
         lambda ids: acl_entry(ids, value=b"\x00", mask=b"\x00"), IA, IA, IA),
    Case("table: range low above high", "write",
         lambda ids: acl_entry(ids, value=b"\x04", low=b"\x09", high=b"\x01"), IA, IA, IA),
    Case("table: LPM prefix longer than the field", "write",
         lambda ids: lpm_entry(ids, b"\x0a", 49), IA, IA, IA),
    Case("table: LPM bits beyond the prefix", "write",
         lambda ids: lpm_entry(ids, b"\x0a\x00\x00\x00\x00\x01", 8), IA, IA, IA),
    Case("table: duplicate entry", "write", lambda ids: exact_entry(ids), AE, AE, AE),
    Case("table: modify a missing entry", "write",
         lambda ids: with_type(exact_entry(ids, b"\x08\x99"), Update.MODIFY), NF, NF, NF),
    Case("table: delete a missing entry", "write",
         lambda ids: with_type(exact_entry(ids, b"\x08\x99"), Update.DELETE), NF, NF, NF),
    Case("table: update type UNSPECIFIED", "write",
         lambda ids: with_type(exact_entry(ids, b"\x08\x06"), Update.UNSPECIFIED), "-", IA, IA),
    Case("table: is_const set in a write", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x0a"), lambda te: setattr(te, "is_const", True)),
         IA, IA, OK,
         "BMv2 ignores the flag and inserts the entry"),
    Case("table: INSERT of the default entry", "write",
         lambda ids: with_type(default_entry(ids["t_exact"], ids["drop"]), Update.INSERT), IA, IA,
         IA),
    Case("table: default entry with a match", "write",
         lambda ids: edit(default_entry(ids["t_exact"], ids["drop"]), lambda te: te.match.add(
             field_id=2).exact.__setattr__("value", b"\x01")), IA, IA, IA),
    Case("table: change a const default action", "write",
         lambda ids: default_entry(ids["t_const_default"], ids["drop"]), PD, PD, PD),
    Case("table: INSERT into a keyless table", "write",
         lambda ids: _keyless_insert(ids), IA, IA, UK,
         "BMv2 does not check for a match key; its target then fails (UNKNOWN)"),
    Case("table: time_since_last_hit in a write", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x0b"),
                          lambda te: te.time_since_last_hit.SetInParent()),
         "-", IA, IA),
    Case("table: direct action in an indirect table", "write",
         lambda ids: edit(indirect_entry(ids["t_indirect"], [exact(1, b"\x01")], 1),
                          lambda te: te.action.action.__setattr__("action_id", ids["drop"])),
         IA, IA, IA),
    Case("table: member id in a direct table", "write",
         lambda ids: edit(exact_entry(ids, b"\x08\x0c"), lambda te: setattr(
             te.action, "action_profile_member_id", 1)), IA, IA, IA),
    Case("table: missing member in an indirect entry", "write",
         lambda ids: indirect_entry(ids["t_indirect"], [exact(1, b"\x02")], 99), NF, NF, IA,
         "the specification prescribes NOT_FOUND for a member that was not inserted"),
    # ---- action profiles
    Case("profile: unknown action profile id", "write",
         lambda ids: member(ids, 2, profile=BAD_PROFILE_ID), "-", IA, IA),
    Case("profile: duplicate member", "write", lambda ids: member(ids, 1), AE, AE, AE),
    Case("profile: delete a missing member", "write",
         lambda ids: with_type(member(ids, 77), Update.DELETE), NF, NF, NF),
    Case("profile: group with a missing member", "write",
         lambda ids: profile_group(ids["sel"], 1, (55,)), NF, NF, NF),
    # ---- counters, meters, registers
    Case("counter: unknown counter id", "write", lambda ids: counter(ids, 0, cid=BAD_COUNTER_ID),
         "-", IA, IA),
    Case("counter: index past the end", "write", lambda ids: counter(ids, 8), OOR, OOR, UK,
         "BMv2 reports its target's failure as UNKNOWN"),
    Case("counter: negative index", "write", lambda ids: counter(ids, -1), IA, IA, IA),
    Case("counter: INSERT", "write", lambda ids: counter(ids, 0, Update.INSERT), IA, IA, IA),
    Case("direct counter: no such entry", "write",
         lambda ids: direct_counter_entry(ids["t_acl"], [ternary(1, b"\x09", b"\xff")], 10, 5),
         NF, NF, IA,
         "the specification prescribes NOT_FOUND; BMv2 cannot map the entry and says "
         "INVALID_ARGUMENT"),
    Case("meter: unknown meter id", "write", lambda ids: meter(ids, 0, mid=BAD_METER_ID), "-", IA,
         IA),
    Case("meter: index past the end", "write", lambda ids: meter(ids, 4), OOR, OOR, UK,
         "BMv2 reports its target's failure as UNKNOWN"),
    Case("meter: negative rate", "write", lambda ids: meter(ids, 0, cir=-5), IA, IA, IA),
    Case("register: index past the end", "write", lambda ids: register_entry(ids["reg"], 8), OOR,
         OOR, UN,
         "BMv2's P4Runtime server does not implement register writes at all"),
    # ---- packet replication engine, digests
    Case("multicast: group id 0", "write", lambda ids: multicast_group(0), IA, IA, IA),
    Case("multicast: duplicate group", "write", lambda ids: multicast_group(1), AE, AE, AE),
    Case("multicast: modify a missing group", "write",
         lambda ids: multicast_group(9, utype=Update.MODIFY), NF, NF, NF),
    Case("multicast: duplicate replica", "write",
         lambda ids: multicast_group(2, ((1, 0), (1, 0))), "-", IA, IA),
    Case("clone session: id 0", "write", lambda ids: clone_session(0), IA, IA, IA),
    Case("digest: unknown digest id", "write", lambda ids: digest_entry(BAD_DIGEST_ID), "-", NF,
         NF),
    Case("digest: configured twice", "write", lambda ids: digest_entry(ids["learn_t"]), AE, AE, AE),
    Case("write: empty entity", "write", lambda ids: Update(type=Update.INSERT), IA, IA, UK,
         "a malformed entity is INVALID_ARGUMENT (Write section); BMv2 says UNKNOWN"),
    # ---- Read
    Case("read: unknown device id", "read", _read({"table_entry": {}}, device_id=7), NF, NF, FP,
         "BMv2 makes a new device without a pipeline for any id"),
    Case("read: unknown table id", "read", _read({"table_entry": {"table_id": BAD_TABLE_ID}}), "-",
         IA, IA),
    Case("read: unknown counter id", "read",
         _read({"counter_entry": {"counter_id": BAD_COUNTER_ID}}), "-", IA, IA),
    Case("read: unknown meter id", "read", _read({"meter_entry": {"meter_id": BAD_METER_ID}}), "-",
         IA, IA),
    Case("read: unknown action profile id", "read",
         _read({"action_profile_member": {"action_profile_id": BAD_PROFILE_ID}}), "-", IA, IA),
    Case("read: counter index past the end", "read",
         _read({"counter_entry": {"counter_id": "ctr", "index": 8}}),
         "-", OOR, UK, "as for writes, where the specification says OUT_OF_RANGE"),
    Case("read: negative counter index", "read",
         _read({"counter_entry": {"counter_id": "ctr", "index": -1}}),
         "-", IA, IA),
    # ---- GetForwardingPipelineConfig
    Case("get config: unknown device id", "get", lambda ids: GetReq(device_id=7), NF, NF, FP,
         "BMv2 makes a new device without a pipeline for any id"),
    Case("get config: unknown response type", "get", lambda ids: GetReq(response_type=9),  # type: ignore[arg-type]  # illegal on purpose
         "-", IA,
         IA),
    # ---- SetForwardingPipelineConfig (last: BMv2 may change its pipeline here)
    Case("set config: unknown device id", "set", lambda ids: _set(ids, FwdReq.VERIFY, device_id=7),
         NF, NF, PD,
         "BMv2 makes a new device for any id; no client is primary there"),
    Case("set config: election id of a backup", "set",
         lambda ids: _set(ids, FwdReq.VERIFY, election=0), PD, PD, PD),
    Case("set config: action UNSPECIFIED", "set", lambda ids: _set(ids, FwdReq.UNSPECIFIED), "-",
         IA, IA),
    Case("set config: VERIFY without a config", "set",
         lambda ids: _set(ids, FwdReq.VERIFY, config=False),
         IA, IA, OK, "BMv2 verifies the empty P4Info and accepts it"),
    Case("set config: COMMIT with a config", "set", lambda ids: _set(ids, FwdReq.COMMIT), IA, IA,
         UK,
         "BMv2 ignores the config, ends a device update never started and fails (UNKNOWN)"),
    Case("set config: COMMIT with nothing saved", "set",
         lambda ids: _set(ids, FwdReq.COMMIT, config=False),
         NF, NF, UK, "BMv2 ends a device update that was never started and fails (UNKNOWN)"),
]


def _keyless_insert(ids: Ids) -> Update:
    return table_entry(ids["t_keyless"], (), ids["drop"])


def _set(
    ids: Ids, action: FwdReq.Action.ValueType, device_id: int = 0, election: int = 1,
    config: bool = True
) -> FwdReq:
    req = FwdReq(device_id=device_id, action=action)
    req.election_id.low = election
    if config:
        req.config.p4info.CopyFrom(ids.p4info)
        req.config.p4_device_config = ids.device_config  # type: ignore[attr-defined]
    return req


# --------------------------------------------------------------------------- running


class Target:
    """A P4Runtime server under test: channel, stub and a primary StreamChannel."""

    def __init__(self, address: str, p4info: p4info_pb2.P4Info, device_config: bytes) -> None:
        import queue

        self.channel = grpc.insecure_channel(address)
        assert wait_until_ready(self.channel, 30), f"no P4Runtime server at {address}"
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.ids = Ids(p4info)
        self.ids.device_config = device_config  # type: ignore[attr-defined]
        self._out: queue.Queue[Any] = queue.Queue()
        self._in: queue.Queue[Any] = queue.Queue()
        stream = self.stub.StreamChannel(iter(self._out.get, None))

        def pump() -> None:
            try:
                for msg in stream:
                    self._in.put(msg)
            except grpc.RpcError as err:
                self._in.put(err)

        threading.Thread(target=pump, daemon=True).start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = 0
        req.arbitration.election_id.high, req.arbitration.election_id.low = ELECTION
        self._out.put(req)
        answer = self._in.get(timeout=30)
        if isinstance(answer, grpc.RpcError) or answer.arbitration.status.code != 0:
            raise RuntimeError(f"arbitration failed: {answer}")

    def push_pipeline(self) -> None:
        self.stub.SetForwardingPipelineConfig(_set(self.ids, FwdReq.VERIFY_AND_COMMIT), timeout=60)

    def write(self, updates: list[Update], req: p4runtime_pb2.WriteRequest | None = None) -> None:
        req = req or _write_req(self.ids)
        req.updates.extend(updates)
        self.stub.Write(req, timeout=30)

    def code(self, case: Case) -> str:
        """The status code name this server answers ``case`` with (the update's own code
        for a one-update Write, as both servers report it in the error details)."""
        built = case.build(self.ids)
        try:
            if case.kind == "write":
                self.write([built])
            elif case.kind == "write_rpc":
                req, updates = built
                self.write(updates, req)
            elif case.kind == "read":
                for _ in self.stub.Read(built, timeout=30):
                    pass
            elif case.kind == "get":
                self.stub.GetForwardingPipelineConfig(built, timeout=30)
            else:
                self.stub.SetForwardingPipelineConfig(built, timeout=60)
        except grpc.RpcError as err:
            return update_code(err) if case.kind == "write" else err.code().name
        return "OK"

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


@contextlib.contextmanager
def our_server() -> Iterator[str]:
    """This switch's P4Runtime server (real compiler, no ports) on a free loopback port;
    its address."""
    switch = SwitchDataPlane([], None)
    service = P4RuntimeService(switch, 0)
    switch.on_cpu_frame = service.on_cpu_frame
    server, port = start_server(service, "127.0.0.1:0")
    thread = threading.Thread(target=switch.run, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=0).wait(5)
        switch.stop()
        thread.join(5)
        switch.close()


def update_code(err: grpc.RpcError) -> str:
    """The code of the single update in a failed Write (the RPC code if no details)."""
    for datum in err.trailing_metadata() or ():
        if datum.key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(datum.value)
            for detail in status.details:
                e = p4runtime_pb2.Error()
                detail.Unpack(e)
                if e.canonical_code:
                    name: str = next(c.name for c in grpc.StatusCode
                                     if c.value[0] == e.canonical_code)
                    return name
    code: str = err.code().name
    return code


def markdown_table() -> str:
    """The side-by-side table for docs/conformance.md."""
    lines = ["| # | Request | Specification | This switch | BMv2 | Why they differ |",
             "|---|---|---|---|---|---|"]
    for i, c in enumerate(CASES, 1):
        spec = c.spec if c.spec != "-" else "(open)"
        why = c.note if c.ours != c.bmv2 or c.note else ""
        lines.append(f"| {i} | {c.name} | {spec} | {c.ours} | {c.bmv2} | {why} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
