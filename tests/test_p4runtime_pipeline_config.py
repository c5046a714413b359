"""SetForwardingPipelineConfig actions as the P4Runtime specification defines them, and
per-update errors of a large failing batch that a default gRPC client can still read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from softswitch.device_config import device_config_from_source
from softswitch.p4runtime.server import P4RuntimeService, default_loader, start_server
from softswitch.p4runtime.status import DETAILS_BUDGET, StatusError, batch_status
from softswitch.ports import MemoryPort
from softswitch.switch import SwitchDataPlane
from tests.p4runtime_fakes import FWD_ID, Client, InProcessSwitch, table_entry_update

INSERT = p4runtime_pb2.Update.INSERT
FwdReq = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetReq = p4runtime_pb2.GetForwardingPipelineConfigRequest
REPO = Path(__file__).resolve().parent.parent
PORT_FORWARD = (REPO / "tests" / "p4" / "port_forward.p4").read_text()
FWD_ENTITY = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD_ID))


@pytest.fixture
def ready() -> Iterator[tuple[InProcessSwitch, Client]]:
    """The fake pipeline committed, with one entry in fwd."""
    sw = InProcessSwitch()
    try:
        c = sw.client((0, 1))
        c.set_config()
        c.write(table_entry_update(INSERT, 1, 2))
        yield sw, c
    finally:
        sw.stop()


def request(
    c: Client, action: FwdReq.Action.ValueType, with_config: bool = False,
    device_config: bytes = b"fake"
) -> FwdReq:
    req = FwdReq(device_id=0, action=action)
    req.election_id.high, req.election_id.low = c.election_id
    if with_config:
        from tests.p4runtime_fakes import fake_p4info

        req.config.p4info.CopyFrom(fake_p4info())
        req.config.p4_device_config = device_config
    return req


def code_of(c: Client, req: FwdReq) -> grpc.StatusCode:
    try:
        c.stub.SetForwardingPipelineConfig(req, timeout=10)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_commit_without_save_fails_and_keeps_state(ready: tuple[InProcessSwitch, Client]) -> None:
    """COMMIT with nothing saved is NOT_FOUND; with a config it is INVALID_ARGUMENT; in
    both cases the running pipeline and its entries are untouched (they used to be wiped)."""
    sw, c = ready
    running = sw.switch.pipeline
    assert (
        code_of(c, request(c, FwdReq.COMMIT, with_config=True)) == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert code_of(c, request(c, FwdReq.COMMIT)) == grpc.StatusCode.NOT_FOUND
    assert sw.switch.pipeline is running
    assert len(c.read(FWD_ENTITY)) == 1


def test_verify_checks_without_changing_anything(ready: tuple[InProcessSwitch, Client]) -> None:
    """VERIFY accepts a good config and rejects a missing or bad one (INVALID_ARGUMENT);
    none of them touches the running pipeline or saves anything for COMMIT."""
    sw, c = ready
    running = sw.switch.pipeline
    assert code_of(c, request(c, FwdReq.VERIFY, with_config=True)) == grpc.StatusCode.OK
    assert code_of(c, request(c, FwdReq.VERIFY)) == grpc.StatusCode.INVALID_ARGUMENT
    bad = request(c, FwdReq.VERIFY, with_config=True, device_config=b"garbage")
    assert code_of(c, bad) == grpc.StatusCode.INVALID_ARGUMENT
    assert sw.switch.pipeline is running and len(c.read(FWD_ENTITY)) == 1
    assert code_of(c, request(c, FwdReq.COMMIT)) == grpc.StatusCode.NOT_FOUND


def test_save_then_writes_go_to_saved_config_until_commit(
    ready: tuple[InProcessSwitch, Client]
) -> None:
    """After VERIFY_AND_SAVE, Read and Write refer to the saved config; the data plane keeps
    the old pipeline until COMMIT realizes the saved one with those writes; a second
    COMMIT has nothing left to commit."""
    sw, c = ready
    running = sw.switch.pipeline
    assert code_of(c, request(c, FwdReq.VERIFY_AND_SAVE, with_config=True)) == grpc.StatusCode.OK
    assert sw.switch.pipeline is running
    assert c.read(FWD_ENTITY) == []  # the saved config starts empty
    c.write(table_entry_update(INSERT, 3, 1))
    assert [e.table_entry.match[0].exact.value for e in c.read(FWD_ENTITY)] == [b"\x03"]
    assert running is not None
    assert len(running.tables["MyIngress.fwd"].entries()) == 1  # still the old entry only
    assert code_of(c, request(c, FwdReq.COMMIT)) == grpc.StatusCode.OK
    assert sw.switch.pipeline is not running and sw.switch.pipeline is not None
    assert len(sw.switch.pipeline.tables["MyIngress.fwd"].entries()) == 1
    assert [e.table_entry.match[0].exact.value for e in c.read(FWD_ENTITY)] == [b"\x03"]
    assert code_of(c, request(c, FwdReq.COMMIT)) == grpc.StatusCode.NOT_FOUND


def test_failed_save_saves_nothing(ready: tuple[InProcessSwitch, Client]) -> None:
    """A VERIFY_AND_SAVE that fails leaves nothing to COMMIT."""
    sw, c = ready
    bad = request(c, FwdReq.VERIFY_AND_SAVE, with_config=True, device_config=b"garbage")
    assert code_of(c, bad) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(c, request(c, FwdReq.COMMIT)) == grpc.StatusCode.NOT_FOUND
    assert len(c.read(FWD_ENTITY)) == 1


def test_actions_need_a_config(ready: tuple[InProcessSwitch, Client]) -> None:
    """VERIFY_AND_SAVE, VERIFY_AND_COMMIT and RECONCILE_AND_COMMIT without a config are
    INVALID_ARGUMENT; UNSPECIFIED and unknown actions too."""
    sw, c = ready
    actions: list[FwdReq.Action.ValueType] = [
        FwdReq.VERIFY_AND_SAVE, FwdReq.VERIFY_AND_COMMIT, FwdReq.RECONCILE_AND_COMMIT,
        FwdReq.UNSPECIFIED,
        9,  # type: ignore[list-item]  # no such action
    ]
    for action in actions:
        assert code_of(c, request(c, action)) == grpc.StatusCode.INVALID_ARGUMENT, action
    assert len(c.read(FWD_ENTITY)) == 1


def test_get_config_invalid_response_type(ready: tuple[InProcessSwitch, Client]) -> None:
    """An unknown response_type is INVALID_ARGUMENT."""
    sw, c = ready
    with pytest.raises(grpc.RpcError) as err:
        c.stub.GetForwardingPipelineConfig(GetReq(response_type=7))  # type: ignore[arg-type]
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ------------------------------------------------- RECONCILE_AND_COMMIT, real programs

EXTRA_TABLE = PORT_FORWARD.replace(
    "    apply { fwd.apply(); }",
    """    table extra {
        key = { hdr.ethernet.etherType: exact; }
        actions = { drop; NoAction; }
        default_action = NoAction();
    }
    apply { fwd.apply(); extra.apply(); }""",
)
NARROW_KEY = PORT_FORWARD.replace(
    "action set_port(bit<9> port) { standard_metadata.egress_spec = port; }",
    "action set_port(bit<2> port) { standard_metadata.egress_spec = (bit<9>)port; }",
)


class RealSwitch:
    """The P4Runtime service with the real loader (P4 source as device config)."""

    def __init__(self) -> None:
        self.switch = SwitchDataPlane([MemoryPort(1), MemoryPort(2)], None)
        self.service = P4RuntimeService(self.switch, 0)
        self.server, port = start_server(self.service, "127.0.0.1:0")
        self.thread = threading.Thread(target=self.switch.run, daemon=True)
        self.thread.start()
        self.client = Client(f"127.0.0.1:{port}")
        self.client.arbitrate((0, 1))

    def p4info(self) -> p4info_pb2.P4Info:
        """The P4Info of the installed pipeline."""
        state = self.service.state
        assert state is not None
        return state.p4info

    def push(self, source: str, action: FwdReq.Action.ValueType) -> grpc.StatusCode:
        dc = device_config_from_source(source)
        _pipe, info = default_loader(dc)
        req = FwdReq(device_id=0, action=action)
        req.election_id.low = 1
        req.config.p4info.CopyFrom(info)
        req.config.p4_device_config = dc
        self.info = info
        return code_of(self.client, req)

    def fwd_entries(self) -> list[p4runtime_pb2.Entity]:
        tid = next(
            t.preamble.id
            for t in self.p4info().tables
            if t.preamble.name.endswith("fwd")
        )
        return self.client.read(
            p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=tid))
        )

    def stop(self) -> None:
        self.client.close()
        self.server.stop(grace=0).wait(5)
        self.switch.stop()
        self.thread.join(5)
        self.switch.close()


@pytest.fixture
def real() -> Iterator[RealSwitch]:
    r = RealSwitch()
    try:
        yield r
    finally:
        r.stop()


def _fwd_insert(real: RealSwitch, in_port: int, out_port: int) -> None:
    info = real.p4info()
    table = next(t for t in info.tables if t.preamble.name.endswith("fwd"))
    action = next(a for a in info.actions if a.preamble.name.endswith("set_port"))
    u = p4runtime_pb2.Update(type=INSERT)
    te = u.entity.table_entry
    te.table_id = table.preamble.id
    te.match.add(field_id=1).exact.value = bytes([in_port])
    te.action.action.action_id = action.preamble.id
    te.action.action.params.add(param_id=1, value=bytes([out_port]))
    real.client.write(u)


def _fwd_default(real: RealSwitch, out_port: int) -> p4runtime_pb2.Update:
    """Set fwd's default action to set_port(out_port); returns the update."""
    info = real.p4info()
    table = next(t for t in info.tables if t.preamble.name.endswith("fwd"))
    action = next(a for a in info.actions if a.preamble.name.endswith("set_port"))
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    te = u.entity.table_entry
    te.table_id = table.preamble.id
    te.is_default_action = True
    te.action.action.action_id = action.preamble.id
    te.action.action.params.add(param_id=1, value=bytes([out_port]))
    real.client.write(u)
    return u


def test_reconcile_keeps_entries_across_programs(real: RealSwitch) -> None:
    """RECONCILE_AND_COMMIT to a program with one more table keeps the fwd entries (they
    forward packets right after) and the default action set by the client, where
    VERIFY_AND_COMMIT would start empty."""
    assert (
        real.push(PORT_FORWARD, FwdReq.RECONCILE_AND_COMMIT) == grpc.StatusCode.OK
    )  # first: a commit
    _fwd_insert(real, 1, 2)
    default = _fwd_default(real, 3)
    before = real.switch.pipeline
    assert real.push(EXTRA_TABLE, FwdReq.RECONCILE_AND_COMMIT) == grpc.StatusCode.OK
    assert real.switch.pipeline is not before
    assert len(real.fwd_entries()) == 1
    got = real.client.read(p4runtime_pb2.Entity(table_entry=default.entity.table_entry))
    assert [e.table_entry.action for e in got] == [default.entity.table_entry.action]
    frame = bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes(46)
    port1, port2 = real.switch.ports[1], real.switch.ports[2]
    assert isinstance(port1, MemoryPort) and isinstance(port2, MemoryPort)
    port1.inject(frame)
    assert port2.receive(5.0) == frame
    assert real.push(EXTRA_TABLE, FwdReq.VERIFY_AND_COMMIT) == grpc.StatusCode.OK
    assert real.fwd_entries() == []


def test_reconcile_refuses_state_that_does_not_fit(real: RealSwitch) -> None:
    """An entry whose parameter does not fit the new program makes RECONCILE_AND_COMMIT
    INVALID_ARGUMENT, and the old pipeline and entries stay."""
    assert real.push(PORT_FORWARD, FwdReq.VERIFY_AND_COMMIT) == grpc.StatusCode.OK
    _fwd_insert(real, 1, 9)  # port 9 does not fit bit<2>
    before = real.switch.pipeline
    assert real.push(NARROW_KEY, FwdReq.RECONCILE_AND_COMMIT) == grpc.StatusCode.INVALID_ARGUMENT
    assert real.switch.pipeline is before
    assert len(real.fwd_entries()) == 1


# ------------------------------------------------------------- large failing batches


def test_batch_status_capped_and_summarised() -> None:
    """Details stop within the budget, in update order; the message counts every failure
    and names the first ones beyond the details."""
    errors: list[StatusError | None] = [
        None if i % 3 == 0 else StatusError(grpc.StatusCode.INVALID_ARGUMENT, "x" * 500)
        for i in range(3000)
    ]
    errors[2999] = StatusError(grpc.StatusCode.NOT_FOUND, "missing")
    uncapped = batch_status(errors, budget=1 << 30)
    assert len(uncapped.details) == 3000 and uncapped.ByteSize() > 8192  # the problem
    status = batch_status(errors)
    assert status.ByteSize() <= DETAILS_BUDGET + 1024
    shown = len(status.details)
    assert 10 < shown < 3000
    first = p4runtime_pb2.Error()
    status.details[1].Unpack(first)
    assert first.canonical_code == code_pb2.INVALID_ARGUMENT and len(first.message) <= 160
    assert status.message.startswith("2000 of 3000 updates failed (INVALID_ARGUMENT x1999, "
                                     "NOT_FOUND x1)")
    assert f"details only for updates 0-{shown - 1}" in status.message


def test_small_batch_has_every_detail() -> None:
    """A batch that fits gets one detail per update and a plain message."""
    status = batch_status([None, StatusError(grpc.StatusCode.NOT_FOUND, "no entry")])
    assert len(status.details) == 2 and status.message == "1 of 2 updates failed"


def test_default_client_sees_details_of_large_failing_batch(
    ready: tuple[InProcessSwitch, Client]
) -> None:
    """A default gRPC client (no metadata size option) gets the per-update errors of a
    3000-update failing batch instead of a bare RESOURCE_EXHAUSTED."""
    sw, c = ready
    updates = []
    for i in range(3000):
        u = table_entry_update(INSERT, 1, 2)
        u.entity.table_entry.table_id = 0x0200F000 + i  # not in P4Info
        updates.append(u)
    with pytest.raises(grpc.RpcError) as info:
        c.write(*updates)
    err = info.value
    assert err.code() == grpc.StatusCode.UNKNOWN, (err.code(), err.details())
    assert (err.details() or "").startswith("3000 of 3000 updates failed")
    trailers = {datum.key: datum.value for datum in err.trailing_metadata()}
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert len(status.details) > 10
    e = p4runtime_pb2.Error()
    status.details[0].Unpack(e)
    assert e.canonical_code == code_pb2.INVALID_ARGUMENT and "0x200f000" in e.message.lower() or \
        str(0x0200F000) in e.message


def test_reconcile_carries_every_kind_of_state(ready: tuple[InProcessSwitch, Client]) -> None:
    """RECONCILE_AND_COMMIT to another device config (a fresh pipeline) carries entries,
    the register and counter values, meter configs, multicast groups and digest configs."""
    from tests.p4runtime_fakes import CTR_ID, DIGEST_ID, METER_ID, REG_ID, FakePipeline, fake_p4info

    sw, c = ready

    def loader(dc: bytes) -> tuple[FakePipeline, p4info_pb2.P4Info]:
        if dc in (b"fake", b"fake2"):
            return FakePipeline(), fake_p4info()
        raise ZeroDivisionError("not a fake device config")

    sw.service.loader = loader
    MODIFY = p4runtime_pb2.Update.MODIFY
    reg = p4runtime_pb2.Update(type=MODIFY)
    reg.entity.register_entry.register_id = REG_ID
    reg.entity.register_entry.index.index = 3
    reg.entity.register_entry.data.bitstring = b"\x2a"
    ctr = p4runtime_pb2.Update(type=MODIFY)
    ctr.entity.counter_entry.counter_id = CTR_ID
    ctr.entity.counter_entry.index.index = 2
    ctr.entity.counter_entry.data.packet_count = 7
    ctr.entity.counter_entry.data.byte_count = 700
    mtr = p4runtime_pb2.Update(type=MODIFY)
    mtr.entity.meter_entry.meter_id = METER_ID
    mtr.entity.meter_entry.index.index = 1
    mtr.entity.meter_entry.config.CopyFrom(
        p4runtime_pb2.MeterConfig(cir=10, cburst=5, pir=20, pburst=5)
    )
    grp = p4runtime_pb2.Update(type=INSERT)
    grp.entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 4
    grp.entity.packet_replication_engine_entry.multicast_group_entry.replicas.add(
        egress_port=2, instance=1
    )
    dig = p4runtime_pb2.Update(type=INSERT)
    dig.entity.digest_entry.digest_id = DIGEST_ID
    dig.entity.digest_entry.config.max_list_size = 3
    c.write(reg, ctr, mtr, grp, dig)
    everything = [
        FWD_ENTITY,
        p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry(register_id=REG_ID)),
        p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(counter_id=CTR_ID)),
        p4runtime_pb2.Entity(meter_entry=p4runtime_pb2.MeterEntry(meter_id=METER_ID)),
        p4runtime_pb2.Entity(
            packet_replication_engine_entry=p4runtime_pb2.PacketReplicationEngineEntry()),
        p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry()),
    ]
    before = c.read(*everything)
    running = sw.switch.pipeline
    assert code_of(c, request(c, FwdReq.RECONCILE_AND_COMMIT, with_config=True,
                              device_config=b"fake2")) == grpc.StatusCode.OK
    assert sw.switch.pipeline is not running and sw.switch.pipeline is not None
    assert c.read(*everything) == before
    assert sw.switch.pipeline.registers["MyIngress.reg"].values[3] == 42
