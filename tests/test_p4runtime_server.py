"""P4Runtime service tests against an in-process switch on in-memory ports (fake pipeline)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from tests.p4runtime_fakes import (
    ACL_ID,
    CPU_PORT,
    CTR_ID,
    DIGEST_ID,
    DROP_ID,
    FWD_ID,
    LEARN_ETHERTYPE,
    METER_ID,
    NOACTION_ID,
    REG_ID,
    SET_PORT_ID,
    Client,
    InProcessSwitch,
    fake_p4info,
    table_entry_update,
)

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE
FwdReq = p4runtime_pb2.SetForwardingPipelineConfigRequest

FRAME = bytes.fromhex("ffffffffffff0000000000010800") + bytes(range(50))


@pytest.fixture
def sw() -> Iterator[InProcessSwitch]:
    s = InProcessSwitch()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def ready(sw: InProcessSwitch) -> Iterator[tuple[InProcessSwitch, Client]]:
    """A switch with the fake pipeline pushed by a primary client."""
    c = sw.client((0, 1))
    c.set_config()
    yield sw, c


def write_errors(err: grpc.RpcError) -> list[tuple[int, str]]:
    """(canonical code, message) per update from a failed batch Write."""
    assert err.code() == grpc.StatusCode.UNKNOWN
    md = {datum.key: datum.value for datum in err.trailing_metadata()}
    status = status_pb2.Status.FromString(md["grpc-status-details-bin"])
    out = []
    for detail in status.details:
        e = p4runtime_pb2.Error()
        assert detail.Unpack(e)
        out.append((e.canonical_code, e.message))
    return out


def _pipeline(sw: InProcessSwitch) -> Any:
    """The switch's installed pipeline (the fixtures install one)."""
    pipeline = sw.switch.pipeline
    assert pipeline is not None
    return pipeline


def single_error(client: Client, *updates: p4runtime_pb2.Update) -> tuple[int, str]:
    with pytest.raises(grpc.RpcError) as info:
        client.write(*updates)
    errs = write_errors(info.value)
    assert len(errs) == len(updates)
    return errs[-1]


# ----------------------------------------------------------------- basics / config


def test_capabilities(sw: InProcessSwitch) -> None:
    """Capabilities reports the P4Runtime API version."""
    c = sw.client(None)
    resp = c.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest())
    assert resp.p4runtime_api_version == "1.4.1"


def test_write_before_pipeline_is_failed_precondition(sw: InProcessSwitch) -> None:
    """A write before any pipeline config fails with FAILED_PRECONDITION."""
    c = sw.client()
    with pytest.raises(grpc.RpcError) as info:
        c.write(table_entry_update(INSERT, 1, 2))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_get_config_before_set_has_no_config(sw: InProcessSwitch) -> None:
    """GetForwardingPipelineConfig without a pipeline answers with the config unset
    (specification); with one, the config is set even for COOKIE_ONLY without a cookie."""
    c = sw.client()
    Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    assert not c.stub.GetForwardingPipelineConfig(Get()).HasField("config")
    c.set_config()
    assert c.stub.GetForwardingPipelineConfig(Get(response_type=Get.COOKIE_ONLY)).HasField("config")


def test_get_config_response_types(ready: tuple[InProcessSwitch, Client]) -> None:
    """Each response type returns exactly the requested parts plus the cookie."""
    sw, c = ready
    c.set_config(cookie=42)
    Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    r = c.stub.GetForwardingPipelineConfig(Get(response_type=Get.ALL)).config
    assert r.p4info == fake_p4info() and r.p4_device_config == b"fake" and r.cookie.cookie == 42
    r = c.stub.GetForwardingPipelineConfig(Get(response_type=Get.COOKIE_ONLY)).config
    assert not r.HasField("p4info") and r.p4_device_config == b"" and r.cookie.cookie == 42
    r = c.stub.GetForwardingPipelineConfig(Get(response_type=Get.P4INFO_AND_COOKIE)).config
    assert r.HasField("p4info") and r.p4_device_config == b""
    r = c.stub.GetForwardingPipelineConfig(Get(response_type=Get.DEVICE_CONFIG_AND_COOKIE)).config
    assert not r.HasField("p4info") and r.p4_device_config == b"fake"


def test_verify_does_not_commit(sw: InProcessSwitch) -> None:
    """VERIFY checks a config without installing it."""
    c = sw.client()
    c.set_config(action=FwdReq.VERIFY)
    assert sw.switch.pipeline is None


def test_verify_and_save_then_commit(sw: InProcessSwitch) -> None:
    """VERIFY_AND_SAVE keeps the config; COMMIT installs it."""
    c = sw.client()
    c.set_config(action=FwdReq.VERIFY_AND_SAVE)
    assert sw.switch.pipeline is None
    req = FwdReq(device_id=0, action=FwdReq.COMMIT)
    req.election_id.low = 1
    c.stub.SetForwardingPipelineConfig(req)
    assert sw.switch.pipeline is not None


def test_commit_without_saved_config_fails(sw: InProcessSwitch) -> None:
    """COMMIT with nothing saved fails with NOT_FOUND (specification)."""
    c = sw.client()
    req = FwdReq(device_id=0, action=FwdReq.COMMIT)
    req.election_id.low = 1
    with pytest.raises(grpc.RpcError) as info:
        c.stub.SetForwardingPipelineConfig(req)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_reconcile_keeps_state_for_same_config(ready: tuple[InProcessSwitch, Client]) -> None:
    """RECONCILE_AND_COMMIT with the same config keeps the installed entries."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    c.set_config(action=FwdReq.RECONCILE_AND_COMMIT)
    assert (
        len(c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD_ID))))
        == 1
    )


def test_verify_and_commit_resets_state(ready: tuple[InProcessSwitch, Client]) -> None:
    """VERIFY_AND_COMMIT installs a fresh pipeline without the old entries."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    c.set_config()
    assert c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD_ID))) == []


def test_mismatched_p4info_rejected(sw: InProcessSwitch) -> None:
    """A P4Info whose table ids differ from the program's is INVALID_ARGUMENT."""
    c = sw.client()
    info = fake_p4info()
    info.tables[0].preamble.id = 0x02000099
    with pytest.raises(grpc.RpcError) as err:
        c.set_config(p4info=info)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "MyIngress.fwd" in (err.value.details() or "")


def test_bad_device_config_rejected(sw: InProcessSwitch) -> None:
    """An unloadable device config is INVALID_ARGUMENT with the loader's message."""
    c = sw.client()
    with pytest.raises(grpc.RpcError) as err:
        c.set_config(device_config=b"garbage")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown device config" in (err.value.details() or "")


def test_unspecified_action_rejected(sw: InProcessSwitch) -> None:
    """SetForwardingPipelineConfig with action UNSPECIFIED is INVALID_ARGUMENT."""
    c = sw.client()
    with pytest.raises(grpc.RpcError) as err:
        c.set_config(action=FwdReq.UNSPECIFIED)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_wrong_device_id_is_not_found(ready: tuple[InProcessSwitch, Client]) -> None:
    """A Write for another device id fails with NOT_FOUND."""
    sw, c = ready
    req = p4runtime_pb2.WriteRequest(device_id=7)
    req.election_id.low = 1
    with pytest.raises(grpc.RpcError) as err:
        c.stub.Write(req)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


# ----------------------------------------------------------------------- tables


def test_insert_forwards_packet(ready: tuple[InProcessSwitch, Client]) -> None:
    """An inserted fwd entry makes port 1 traffic leave on port 2 unchanged."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    sw.port(1).inject(FRAME)
    assert sw.port(2).receive(2.0) == FRAME


def test_modify_and_delete_entry(ready: tuple[InProcessSwitch, Client]) -> None:
    """MODIFY changes the output port; DELETE falls back to the default (drop)."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    c.write(table_entry_update(MODIFY, 1, 3))
    sw.port(1).inject(FRAME)
    assert sw.port(3).receive(2.0) == FRAME
    c.write(table_entry_update(DELETE, 1))
    sw.port(1).inject(FRAME)
    assert sw.port(3).receive(0.3) is None
    assert sw.port(2).receive(0.1) is None


def test_duplicate_insert_already_exists(ready: tuple[InProcessSwitch, Client]) -> None:
    """Inserting the same key twice is ALREADY_EXISTS."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    code, _ = single_error(c, table_entry_update(INSERT, 1, 3))
    assert code == code_pb2.ALREADY_EXISTS


def test_modify_missing_not_found(ready: tuple[InProcessSwitch, Client]) -> None:
    """Modifying an absent entry is NOT_FOUND."""
    sw, c = ready
    code, _ = single_error(c, table_entry_update(MODIFY, 5, 3))
    assert code == code_pb2.NOT_FOUND


def test_batch_reports_each_update(ready: tuple[InProcessSwitch, Client]) -> None:
    """A batch with one bad update reports OK for the others and applies them."""
    sw, c = ready
    with pytest.raises(grpc.RpcError) as info:
        c.write(table_entry_update(INSERT, 1, 2), table_entry_update(INSERT, 1, 2),
                table_entry_update(INSERT, 2, 1))
    codes = [code for code, _ in write_errors(info.value)]
    assert codes == [code_pb2.OK, code_pb2.ALREADY_EXISTS, code_pb2.OK]
    assert (
        len(c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD_ID))))
        == 2
    )


def test_value_too_wide_invalid_argument(ready: tuple[InProcessSwitch, Client]) -> None:
    """A match value wider than the field is INVALID_ARGUMENT (the match-format rules)."""
    sw, c = ready
    code, msg = single_error(c, table_entry_update(INSERT, 1024, 2))
    assert code == code_pb2.INVALID_ARGUMENT and "9 bits" in msg


def test_unknown_table_invalid_argument(ready: tuple[InProcessSwitch, Client]) -> None:
    """A table id not in P4Info makes the update malformed: INVALID_ARGUMENT (as BMv2)."""
    sw, c = ready
    u = table_entry_update(INSERT, 1, 2)
    u.entity.table_entry.table_id = 0x0200FFFF
    code, _ = single_error(c, u)
    assert code == code_pb2.INVALID_ARGUMENT


def test_missing_param_invalid(ready: tuple[InProcessSwitch, Client]) -> None:
    """An action without its parameter is INVALID_ARGUMENT."""
    sw, c = ready
    code, msg = single_error(c, table_entry_update(INSERT, 1, None))
    assert code == code_pb2.INVALID_ARGUMENT and "port" in msg


def test_defaultonly_action_in_entry_permission_denied(
    ready: tuple[InProcessSwitch, Client]
) -> None:
    """A @defaultonly action in a table entry is PERMISSION_DENIED (the specification's code
    for an action used outside its scope; BMv2 answers the same)."""
    sw, c = ready
    code, msg = single_error(c, table_entry_update(INSERT, 1, None, action_id=NOACTION_ID))
    assert code == code_pb2.PERMISSION_DENIED and "defaultonly" in msg


def test_ternary_needs_priority(ready: tuple[InProcessSwitch, Client]) -> None:
    """A ternary table entry without priority is INVALID_ARGUMENT."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=INSERT)
    te = u.entity.table_entry
    te.table_id = ACL_ID
    t = te.match.add(field_id=1).ternary
    t.value, t.mask = b"\x08\x00", b"\xff\xff"
    te.action.action.action_id = DROP_ID
    code, msg = single_error(c, u)
    assert code == code_pb2.INVALID_ARGUMENT and "priority" in msg


def test_zero_mask_rejected(ready: tuple[InProcessSwitch, Client]) -> None:
    """A ternary match with a zero mask must be omitted: INVALID_ARGUMENT."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=INSERT)
    te = u.entity.table_entry
    te.table_id, te.priority = ACL_ID, 1
    t = te.match.add(field_id=1).ternary
    t.value, t.mask = b"\x00", b"\x00"
    te.action.action.action_id = DROP_ID
    code, _ = single_error(c, u)
    assert code == code_pb2.INVALID_ARGUMENT


def test_lpm_bits_beyond_prefix_rejected(ready: tuple[InProcessSwitch, Client]) -> None:
    """An LPM value with bits beyond the prefix is INVALID_ARGUMENT."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=INSERT)
    te = u.entity.table_entry
    te.table_id, te.priority = ACL_ID, 1
    lpm = te.match.add(field_id=2).lpm
    lpm.value, lpm.prefix_len = bytes([10, 0, 0, 1]), 8
    te.action.action.action_id = DROP_ID
    code, msg = single_error(c, u)
    assert code == code_pb2.INVALID_ARGUMENT and "prefix" in msg


def test_table_full_resource_exhausted(ready: tuple[InProcessSwitch, Client]) -> None:
    """Inserting beyond the table size is RESOURCE_EXHAUSTED."""
    sw, c = ready
    updates = []
    for i in range(5):
        u = p4runtime_pb2.Update(type=INSERT)
        te = u.entity.table_entry
        te.table_id, te.priority = ACL_ID, 10
        t = te.match.add(field_id=1).ternary
        t.value, t.mask = i.to_bytes(2, "big"), b"\xff\xff"
        te.action.action.action_id = DROP_ID
        updates.append(u)
    with pytest.raises(grpc.RpcError) as info:
        c.write(*updates)
    assert [code for code, _ in write_errors(info.value)][-1] == code_pb2.RESOURCE_EXHAUSTED


def test_read_canonical_and_metadata(ready: tuple[InProcessSwitch, Client]) -> None:
    """Read returns canonical (leading-zero-free) bytes and the entry's metadata cookie."""
    sw, c = ready
    u = table_entry_update(INSERT, 1, 2)
    u.entity.table_entry.metadata = b"cookie"
    c.write(u)
    (ent,) = c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=FWD_ID)))
    te = ent.table_entry
    assert te.match[0].exact.value == b"\x01"
    assert te.action.action.params[0].value == b"\x02"
    assert te.metadata == b"cookie"


def test_read_all_tables_wildcard(ready: tuple[InProcessSwitch, Client]) -> None:
    """A read with table_id 0 returns entries of every table."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    u = p4runtime_pb2.Update(type=INSERT)
    te = u.entity.table_entry
    te.table_id, te.priority = ACL_ID, 5
    lpm = te.match.add(field_id=2).lpm
    lpm.value, lpm.prefix_len = bytes([10, 0, 0, 0]), 8
    te.action.action.action_id = NOACTION_ID
    c.write(u)
    ents = c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert sorted(e.table_entry.table_id for e in ents) == [FWD_ID, ACL_ID]
    acl = [e.table_entry for e in ents if e.table_entry.table_id == ACL_ID][0]
    assert acl.priority == 5 and acl.match[0].lpm.prefix_len == 8
    assert acl.match[0].lpm.value == bytes([10, 0, 0, 0])


def test_default_entry_modify_and_reset(ready: tuple[InProcessSwitch, Client]) -> None:
    """MODIFY of the default entry changes the miss action; an empty action resets it."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=MODIFY)
    te = u.entity.table_entry
    te.table_id, te.is_default_action = FWD_ID, True
    te.action.action.action_id = SET_PORT_ID
    te.action.action.params.add(param_id=1, value=b"\x03")
    c.write(u)
    sw.port(1).inject(FRAME)
    assert sw.port(3).receive(2.0) == FRAME
    probe = p4runtime_pb2.Entity(
        table_entry=p4runtime_pb2.TableEntry(table_id=FWD_ID, is_default_action=True)
    )
    (ent,) = c.read(probe)
    assert ent.table_entry.action.action.action_id == SET_PORT_ID
    reset = p4runtime_pb2.Update(type=MODIFY)
    reset.entity.table_entry.table_id = FWD_ID
    reset.entity.table_entry.is_default_action = True
    c.write(reset)
    (ent,) = c.read(probe)
    assert ent.table_entry.action.action.action_id == DROP_ID


def test_default_entry_insert_invalid(ready: tuple[InProcessSwitch, Client]) -> None:
    """INSERT of a default entry is INVALID_ARGUMENT."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=INSERT)
    u.entity.table_entry.table_id = FWD_ID
    u.entity.table_entry.is_default_action = True
    u.entity.table_entry.action.action.action_id = DROP_ID
    code, _ = single_error(c, u)
    assert code == code_pb2.INVALID_ARGUMENT


# ---------------------------------------------------------------------- externs


def test_register_write_read(ready: tuple[InProcessSwitch, Client]) -> None:
    """A register cell written over P4Runtime reads back canonically."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=MODIFY)
    u.entity.register_entry.register_id = REG_ID
    u.entity.register_entry.index.index = 3
    u.entity.register_entry.data.CopyFrom(p4data_pb2.P4Data(bitstring=b"\x00\x00\x12\x34"))
    c.write(u)
    assert _pipeline(sw).registers["MyIngress.reg"].read(3) == 0x1234
    probe = p4runtime_pb2.Entity()
    probe.register_entry.register_id = REG_ID
    probe.register_entry.index.index = 3
    (ent,) = c.read(probe)
    assert ent.register_entry.data.bitstring == b"\x12\x34"
    all_cells = p4runtime_pb2.Entity()
    all_cells.register_entry.register_id = REG_ID
    assert len(c.read(all_cells)) == 8


def test_register_index_out_of_range(ready: tuple[InProcessSwitch, Client]) -> None:
    """A register index beyond its size is OUT_OF_RANGE."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=MODIFY)
    u.entity.register_entry.register_id = REG_ID
    u.entity.register_entry.index.index = 8
    u.entity.register_entry.data.bitstring = b"\x01"
    code, _ = single_error(c, u)
    assert code == code_pb2.OUT_OF_RANGE


def test_register_read_index_out_of_range(ready: tuple[InProcessSwitch, Client]) -> None:
    """Reading a register cell beyond its size is OUT_OF_RANGE (as BMv2's register_read)."""
    sw, c = ready
    probe = p4runtime_pb2.Entity()
    probe.register_entry.register_id = REG_ID
    probe.register_entry.index.index = 8
    with pytest.raises(grpc.RpcError) as err:
        c.read(probe)
    assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE


def test_register_read_engine_smaller_than_p4info(ready: tuple[InProcessSwitch, Client]) -> None:
    """An engine register smaller than P4Info says still answers OUT_OF_RANGE, not 0."""
    from softswitch.engine.externs import Register

    sw, c = ready
    _pipeline(sw).registers["MyIngress.reg"] = Register("MyIngress.reg", 4, 32)
    probe = p4runtime_pb2.Entity()
    probe.register_entry.register_id = REG_ID
    probe.register_entry.index.index = 6
    with pytest.raises(grpc.RpcError) as err:
        c.read(probe)
    assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE


def test_counter_counts_packets(ready: tuple[InProcessSwitch, Client]) -> None:
    """The indexed counter counts forwarded packets and bytes; a write resets it."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    for _ in range(3):
        sw.port(1).inject(FRAME)
        assert sw.port(2).receive(2.0) == FRAME
    probe = p4runtime_pb2.Entity()
    probe.counter_entry.counter_id = CTR_ID
    probe.counter_entry.index.index = 1
    (ent,) = c.read(probe)
    assert (ent.counter_entry.data.packet_count, ent.counter_entry.data.byte_count) == (
        3,
        3 * len(FRAME),
    )
    u = p4runtime_pb2.Update(type=MODIFY)
    u.entity.counter_entry.CopyFrom(probe.counter_entry)
    c.write(u)
    (ent,) = c.read(probe)
    assert ent.counter_entry.data.packet_count == 0


def test_direct_counter_read(ready: tuple[InProcessSwitch, Client]) -> None:
    """Direct counters of acl entries count hits and are read per entry."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    u = p4runtime_pb2.Update(type=INSERT)
    te = u.entity.table_entry
    te.table_id, te.priority = ACL_ID, 1
    t = te.match.add(field_id=1).ternary
    t.value, t.mask = b"\x08\x00", b"\xff\xff"
    te.action.action.action_id = NOACTION_ID
    c.write(u)
    sw.port(1).inject(FRAME)
    assert sw.port(2).receive(2.0) == FRAME
    probe = p4runtime_pb2.Entity()
    probe.direct_counter_entry.table_entry.table_id = ACL_ID
    (ent,) = c.read(probe)
    assert ent.direct_counter_entry.data.packet_count == 1
    assert ent.direct_counter_entry.data.byte_count == len(FRAME)


def test_meter_config_roundtrip(ready: tuple[InProcessSwitch, Client]) -> None:
    """A meter config written to an index reads back; other indices stay unconfigured."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=MODIFY)
    me = u.entity.meter_entry
    me.meter_id, me.index.index = METER_ID, 2
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 100, 10, 200, 20
    c.write(u)
    probe = p4runtime_pb2.Entity()
    probe.meter_entry.meter_id = METER_ID
    ents = c.read(probe)
    assert len(ents) == 4
    assert ents[2].meter_entry.config.pir == 200
    assert not ents[0].meter_entry.HasField("config")


def test_meter_pir_below_cir_invalid(ready: tuple[InProcessSwitch, Client]) -> None:
    """A meter config with PIR below CIR is INVALID_ARGUMENT."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=MODIFY)
    me = u.entity.meter_entry
    me.meter_id, me.index.index = METER_ID, 0
    me.config.cir, me.config.pir = 200, 100
    code, _ = single_error(c, u)
    assert code == code_pb2.INVALID_ARGUMENT


def _presence_rules(client: Client, update: p4runtime_pb2.Update,
                    on_insert: Callable[[], None] | None = None) -> None:
    """The P4Runtime presence rules for one PRE entry: MODIFY before INSERT and a second
    DELETE are NOT_FOUND, a second INSERT is ALREADY_EXISTS. ``on_insert`` checks the
    switch in between."""
    update.type = MODIFY
    assert single_error(client, update)[0] == code_pb2.NOT_FOUND
    update.type = INSERT
    client.write(update)
    if on_insert is not None:
        on_insert()
    assert single_error(client, update)[0] == code_pb2.ALREADY_EXISTS
    update.type = DELETE
    client.write(update)
    assert single_error(client, update)[0] == code_pb2.NOT_FOUND


def test_multicast_group_lifecycle(ready: tuple[InProcessSwitch, Client]) -> None:
    """Multicast groups: presence rules, and an inserted group is replicated and read back."""
    sw, c = ready
    u = p4runtime_pb2.Update()
    g = u.entity.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = 7
    g.replicas.add(egress_port=1, instance=1)
    g.replicas.add(egress_port=2, instance=1)

    def inserted() -> None:
        assert _pipeline(sw).pre.replicas(7) == ((1, 1), (2, 1))
        probe = p4runtime_pb2.Entity()
        probe.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        (ent,) = c.read(probe)
        assert len(ent.packet_replication_engine_entry.multicast_group_entry.replicas) == 2

    _presence_rules(c, u, inserted)


def test_clone_session_roundtrip(ready: tuple[InProcessSwitch, Client]) -> None:
    """A clone session is stored in the PRE and read back with its truncation."""
    sw, c = ready
    u = p4runtime_pb2.Update(type=INSERT)
    cs = u.entity.packet_replication_engine_entry.clone_session_entry
    cs.session_id, cs.packet_length_bytes = 5, 64
    cs.replicas.add(egress_port=3, instance=0)
    c.write(u)
    assert _pipeline(sw).pre.clone_session(5).packet_length_bytes == 64
    probe = p4runtime_pb2.Entity()
    probe.packet_replication_engine_entry.clone_session_entry.session_id = 5
    (ent,) = c.read(probe)
    assert ent.packet_replication_engine_entry.clone_session_entry.replicas[0].egress_port == 3


def test_clone_session_presence_rules(ready: tuple[InProcessSwitch, Client]) -> None:
    """A clone session follows the same presence rules as a multicast group."""
    _sw, c = ready
    u = p4runtime_pb2.Update()
    cs = u.entity.packet_replication_engine_entry.clone_session_entry
    cs.session_id = 9
    cs.replicas.add(egress_port=2, instance=0)
    _presence_rules(c, u)


# ------------------------------------------------------------------ arbitration


def test_first_client_is_primary(sw: InProcessSwitch) -> None:
    """The only client is primary (status OK) and learns its own election id."""
    c = sw.client(None)
    msg = c.arbitrate((0, 5))
    assert msg.arbitration.status.code == code_pb2.OK
    assert msg.arbitration.election_id.low == 5


def test_backup_cannot_write(ready: tuple[InProcessSwitch, Client]) -> None:
    """A client with a lower election id is a backup and gets PERMISSION_DENIED on Write."""
    sw, primary = ready
    backup = sw.client(None)
    msg = backup.arbitrate((0, 0x0))
    assert msg.arbitration.status.code == code_pb2.ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as err:
        backup.write(table_entry_update(INSERT, 1, 2))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    primary.write(table_entry_update(INSERT, 1, 2))


def test_higher_election_takes_over_and_all_are_notified(
    ready: tuple[InProcessSwitch, Client]
) -> None:
    """A higher election id becomes primary; the old primary is told it is now a backup."""
    sw, old = ready
    new = sw.client(None)
    msg = new.arbitrate((0, 9))
    assert msg.arbitration.status.code == code_pb2.OK
    note = old.next_message("arbitration")
    assert note.arbitration.status.code == code_pb2.ALREADY_EXISTS
    assert note.arbitration.election_id.low == 9
    with pytest.raises(grpc.RpcError) as err:
        old.write(table_entry_update(INSERT, 1, 2))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    new.write(table_entry_update(INSERT, 1, 2))


def test_primary_leaving_promotes_backup(ready: tuple[InProcessSwitch, Client]) -> None:
    """When the primary disconnects, the next highest client becomes primary and is told."""
    sw, primary = ready
    backup = sw.client(None)
    backup.arbitrate((0, 0))
    # election id 0 is a valid id below 1
    primary.close()
    note = backup.next_message("arbitration")
    assert note.arbitration.status.code == code_pb2.OK


def test_duplicate_election_id_closes_stream(ready: tuple[InProcessSwitch, Client]) -> None:
    """A second client with the primary's election id gets its stream closed INVALID_ARGUMENT."""
    sw, _ = ready
    dup = sw.client(None)
    msg = dup.arbitrate((0, 1))
    assert isinstance(msg, grpc.RpcError)
    assert msg.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_arbitration_wrong_device_closes_stream(sw: InProcessSwitch) -> None:
    """Arbitration for another device id closes the stream with NOT_FOUND."""
    c = sw.client(None)
    msg = c.arbitrate((0, 1), device_id=3)
    assert isinstance(msg, grpc.RpcError) and msg.code() == grpc.StatusCode.NOT_FOUND


# --------------------------------------------------------------- packet I/O


def test_packet_out_goes_to_header_port(ready: tuple[InProcessSwitch, Client]) -> None:
    """A PacketOut with egress_port metadata leaves on that port without the header."""
    sw, c = ready
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = FRAME
    req.packet.metadata.add(metadata_id=1, value=b"\x02")
    req.packet.metadata.add(metadata_id=2, value=b"\x00")
    c.send(req)
    assert sw.port(2).receive(2.0) == FRAME


def test_packet_out_missing_metadata_stream_error(ready: tuple[InProcessSwitch, Client]) -> None:
    """A PacketOut without its metadata gets a StreamError INVALID_ARGUMENT echoing it."""
    sw, c = ready
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = FRAME
    c.send(req)
    msg = c.next_message("error")
    assert msg.error.canonical_code == code_pb2.INVALID_ARGUMENT
    assert msg.error.packet_out.packet_out.payload == FRAME


def test_packet_in_to_primary(ready: tuple[InProcessSwitch, Client]) -> None:
    """A frame forwarded to the CPU port arrives as PacketIn with ingress_port metadata."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 3, CPU_PORT))
    sw.port(3).inject(FRAME)
    msg = c.next_message("packet")
    assert msg.packet.payload == FRAME
    md = {m.metadata_id: m.value for m in msg.packet.metadata}
    assert md == {1: b"\x03", 2: b"\x00"}


def test_digest_list_after_config(ready: tuple[InProcessSwitch, Client]) -> None:
    """With a DigestEntry configured, a learning frame yields a DigestList; ack accepted."""
    sw, c = ready
    c.write(table_entry_update(INSERT, 1, 2))
    u = p4runtime_pb2.Update(type=INSERT)
    u.entity.digest_entry.digest_id = DIGEST_ID
    u.entity.digest_entry.config.max_list_size = 1
    c.write(u)
    frame = FRAME[:12] + LEARN_ETHERTYPE.to_bytes(2, "big") + FRAME[14:]
    sw.port(1).inject(frame)
    msg = c.next_message("digest")
    assert msg.digest.digest_id == DIGEST_ID
    members = [m.bitstring for m in msg.digest.data[0].struct.members]
    assert members == [b"\x01", bytes([len(frame)])]
    ack = p4runtime_pb2.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = DIGEST_ID, msg.digest.list_id
    c.send(ack)
    probe = p4runtime_pb2.Entity()
    probe.digest_entry.digest_id = 0
    (ent,) = c.read(probe)
    assert ent.digest_entry.config.max_list_size == 1


def test_invalid_requests_do_not_kill_server(ready: tuple[InProcessSwitch, Client]) -> None:
    """After a burst of malformed requests the server still answers correctly."""
    sw, c = ready
    for bad in (p4runtime_pb2.Update(), p4runtime_pb2.Update(type=INSERT)):
        with pytest.raises(grpc.RpcError):
            c.write(bad)
    with pytest.raises(grpc.RpcError):
        c.read(p4runtime_pb2.Entity())
    c.write(table_entry_update(INSERT, 1, 2))
    sw.port(1).inject(FRAME)
    assert sw.port(2).receive(2.0) == FRAME
