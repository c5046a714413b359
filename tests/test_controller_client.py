"""P4Runtime transport, schema index and reconciliation against an in-process fake server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller import entities as ents
from controller.errors import SchemaError
from controller.p4client import P4Client, P4RuntimeRequestError
from controller.schema import ControlPlaneSchema, encode_int
from controller.switch import ManagedSwitch, SwitchOptions
from tests.p4runtime_server_fake import SERVER_THREAD_PREFIX, FakeP4RuntimeServer

P4INFO_TEXT = """
tables {
  preamble { id: 1 name: "MyIngress.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  action_refs { id: 10 }
  action_refs { id: 11 }
  size: 1024
}
tables {
  preamble { id: 2 name: "MyIngress.acl" alias: "acl" }
  match_fields { id: 1 name: "hdr.ethernet.dstAddr" bitwidth: 48 match_type: TERNARY }
  match_fields { id: 2 name: "meta.port" bitwidth: 9 match_type: RANGE }
  action_refs { id: 11 }
  size: 16
}
tables {
  preamble { id: 3 name: "MyEgress.ipv4_lpm" alias: "eg_lpm" }
  match_fields { id: 1 name: "x" bitwidth: 8 match_type: EXACT }
  action_refs { id: 11 }
  size: 16
}
actions {
  preamble { id: 10 name: "MyIngress.set_nhop" alias: "set_nhop" }
  params { id: 1 name: "dmac" bitwidth: 48 }
  params { id: 2 name: "port" bitwidth: 9 }
}
actions { preamble { id: 11 name: "NoAction" alias: "NoAction" } }
counters {
  preamble { id: 20 name: "MyIngress.port_rx" alias: "port_rx" }
  spec { unit: BOTH }
  size: 8
}
registers {
  preamble { id: 30 name: "MyIngress.slots" alias: "slots" }
  type_spec { bitstring { bit { bitwidth: 32 } } }
  size: 4
}
"""


@pytest.fixture
def p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_TEXT, p4info_pb2.P4Info())


@pytest.fixture
def server() -> Iterator[FakeP4RuntimeServer]:
    with FakeP4RuntimeServer(device_id=3) as srv:
        yield srv


def _wait(predicate: Callable[[], object], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_schema_finds_by_suffix_and_full_name(p4info: p4info_pb2.P4Info) -> None:
    """A unique suffix or the full name finds the object; ids work too."""
    schema = ControlPlaneSchema(p4info)
    assert schema.action("set_nhop").preamble.id == 10
    assert schema.table("MyIngress.ipv4_lpm").preamble.id == 1
    assert schema.table(2).preamble.name == "MyIngress.acl"
    assert schema.counter("port_rx").size == 8


def test_schema_miss_suggests_close_name(p4info: p4info_pb2.P4Info) -> None:
    """A misspelt name is answered with the closest one."""
    schema = ControlPlaneSchema(p4info)
    with pytest.raises(SchemaError,
                       match=r"no table named 'MyIngress.ipv4_lpn'. Did you mean "
                             r"'MyIngress.ipv4_lpm'\?"):
        schema.table("MyIngress.ipv4_lpn")
    with pytest.raises(SchemaError,
                       match=r"no action named 'set_nhp'. Did you mean 'MyIngress.set_nhop'\?"):
        schema.action("set_nhp")


def test_schema_ambiguous_suffix_is_an_error(p4info: p4info_pb2.P4Info) -> None:
    """A suffix shared by two tables names both."""
    with pytest.raises(SchemaError, match="ambiguous: MyEgress.ipv4_lpm, MyIngress.ipv4_lpm"):
        ControlPlaneSchema(p4info).table("ipv4_lpm")


def test_encode_strips_leading_zeros() -> None:
    """Canonical bytestrings: no leading zero bytes, zero is one byte, too wide is an error."""
    assert encode_int(0, 9) == b"\x00"
    assert encode_int(1, 48) == b"\x01"
    assert encode_int(0x1FF, 9) == b"\x01\xff"
    with pytest.raises(SchemaError, match="does not fit in 9 bits"):
        encode_int(512, 9)


def test_table_entry_encoding_round_trip(p4info: p4info_pb2.P4Info) -> None:
    """Addresses, prefixes, ternary and range values encode canonically and decode back."""
    schema = ControlPlaneSchema(p4info)
    te = schema.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.1.7/24"},
                            "set_nhop", {"dmac": "00:00:0a:00:01:01", "port": 1})
    assert te.match[0].lpm.value == bytes([10, 0, 1, 0])
    assert te.match[0].lpm.prefix_len == 24
    assert [p.value for p in te.action.action.params] == [bytes([0x0A, 0, 1, 1]), b"\x01"]
    desc = schema.describe_entry(te)
    assert desc["match"] == {"hdr.ipv4.dstAddr": "10.0.1.0/24"}
    assert desc["params"] == {"dmac": 0x0A000101, "port": 1}
    acl = schema.table_entry("acl", {"dstAddr": ("00:00:00:00:00:05", 0xFF), "meta.port": (2, 7)},
                             "NoAction", priority=5)
    assert acl.match[0].ternary.value == b"\x05" and acl.match[0].ternary.mask == b"\xff"
    assert acl.match[1].range.low == b"\x02" and acl.match[1].range.high == b"\x07"


def test_table_entry_bad_values_name_the_field(p4info: p4info_pb2.P4Info) -> None:
    """Bad parameters and actions are reported with the table/action and field names."""
    schema = ControlPlaneSchema(p4info)
    with pytest.raises(SchemaError, match="parameter 'port'.*does not fit in 9 bits"):
        schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.0.0/8"}, "set_nhop",
                           {"dmac": 1, "port": 600})
    with pytest.raises(SchemaError, match="parameter 'port' missing"):
        schema.action_call("set_nhop", {"dmac": 1})
    with pytest.raises(SchemaError, match="has no action 'MyIngress.set_nhop'"):
        schema.table_entry("acl", {}, "set_nhop", {"dmac": 1, "port": 1})
    with pytest.raises(SchemaError, match="no match field named 'dstAdr'"):
        schema.table_entry("MyIngress.ipv4_lpm", {"dstAdr": 1})


def test_client_connects_as_primary(server: FakeP4RuntimeServer) -> None:
    """The first client with an election id becomes primary."""
    with P4Client(server.address, 3, election_id=10) as client:
        arb = client.connect()
        assert arb.primary and arb.election_id == 10
        assert client.capabilities() == "1.4.1"


def test_lower_election_id_is_backup_and_refused(server: FakeP4RuntimeServer,
                                                 p4info: p4info_pb2.P4Info) -> None:
    """A second controller with a lower election id is backup; its writes are refused."""
    with P4Client(server.address, 3, election_id=10) as first, \
            P4Client(server.address, 3, election_id=5) as second:
        first.connect()
        arb = second.connect()
        assert not arb.primary and arb.election_id == 10
        schema = ControlPlaneSchema(p4info)
        te = schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.0.0/8"}, "NoAction")
        with pytest.raises(P4RuntimeRequestError) as info:
            second.write([ents.update(p4runtime_pb2.Update.INSERT, ents.entity(te))])
        assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert info.value.operation == "Write"


def test_backup_becomes_primary_when_primary_leaves(server: FakeP4RuntimeServer) -> None:
    """When the primary disconnects the backup is told it is primary now."""
    first = P4Client(server.address, 3, election_id=10)
    second = P4Client(server.address, 3, election_id=5)
    try:
        first.connect()
        assert not second.connect().primary
        first.close()
        assert _wait(lambda: second.is_primary)
    finally:
        first.close()
        second.close()


def test_same_election_id_is_refused(server: FakeP4RuntimeServer) -> None:
    """A client reusing the primary's election id gets an arbitration error."""
    with P4Client(server.address, 3, election_id=10) as first, \
            P4Client(server.address, 3, election_id=10) as second:
        first.connect()
        with pytest.raises(P4RuntimeRequestError) as info:
            second.connect()
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT


def _client_threads() -> dict[int | None, str]:
    """This process's threads other than the fake server's pool (whose threads come and go
    with the server's calls, not the client's)."""
    return {t.ident: t.name for t in threading.enumerate()
            if not t.name.startswith(SERVER_THREAD_PREFIX)}


def test_opening_a_channel_leaves_no_thread_behind(server: FakeP4RuntimeServer) -> None:
    """Waiting for the channel starts no thread that outlives the wait:
    channel_ready_future's connectivity poller kept running after it and held the
    channel's close() up to 0.2 s (every controller CLI command's)."""
    warm = P4Client(server.address, 3, election_id=10)  # grpc's own first-channel set-up
    warm.open_channel()
    warm.close()
    before = _client_threads()
    # The server's idle thread is busy elsewhere, as when it has sent the warm-up's answer
    # but not yet told its pool it is free: the pool starts a thread for the next call.
    release = threading.Event()
    server.pool.submit(release.wait, 10.0)
    try:
        with P4Client(server.address, 3, election_id=10) as client:
            client.open_channel()
            new = {i: n for i, n in _client_threads().items() if i not in before}
            assert not new, f"threads started by open_channel: {sorted(new.values())}"
    finally:
        release.set()
    with P4Client("127.0.0.1:1", 0, election_id=1) as client:  # nobody there: still none
        with pytest.raises(P4RuntimeRequestError):
            client.open_channel(timeout_s=0.3)
        new = {i: n for i, n in _client_threads().items() if i not in before}
        assert not new, f"threads started by a failed open_channel: {sorted(new.values())}"


def test_unreachable_switch_is_unavailable() -> None:
    """Connecting to a port nobody listens on fails quickly with UNAVAILABLE."""
    with P4Client("127.0.0.1:1", 0, election_id=1) as client:
        with pytest.raises(P4RuntimeRequestError) as info:
            client.connect(timeout_s=0.5)
    assert info.value.unreachable
    assert "did not answer" in str(info.value)


def test_write_errors_are_decoded_per_update(server: FakeP4RuntimeServer,
                                             p4info: p4info_pb2.P4Info) -> None:
    """Per-update p4.v1.Error details come back with their batch index."""
    schema = ControlPlaneSchema(p4info)
    a = ents.entity(schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.0.0/8"}, "NoAction"))
    b = ents.entity(schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.1.0.0/16"},
                                       "NoAction"))
    with P4Client(server.address, 3, election_id=1) as client:
        client.connect()
        client.write([ents.update(p4runtime_pb2.Update.INSERT, a)])
        with pytest.raises(P4RuntimeRequestError) as info:
            client.write(ents.updates(p4runtime_pb2.Update.INSERT, [b, a]))
    err = info.value
    assert [(e.index, e.code) for e in err.errors] == [(1, grpc.StatusCode.ALREADY_EXISTS)]
    assert err.only(grpc.StatusCode.ALREADY_EXISTS)
    assert "update 1: ALREADY_EXISTS" in str(err)


def test_wrong_device_id_is_not_found(server: FakeP4RuntimeServer) -> None:
    """A Read for another device id fails with NOT_FOUND naming the operation."""
    with P4Client(server.address, 3, election_id=1) as client:
        client.connect()
        client.device_id = 4
        with pytest.raises(P4RuntimeRequestError) as info:
            client.read([p4runtime_pb2.Entity()])
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert str(info.value).startswith("Read failed: NOT_FOUND")


def _switch(server: FakeP4RuntimeServer, p4info: p4info_pb2.P4Info, election_id: int = 1,
            **kw: Any) -> ManagedSwitch:
    sw = ManagedSwitch(SwitchOptions("s1", server.address, 3, election_id=election_id, **kw))
    sw.load_program(p4info, b"device-config")
    return sw


def test_sync_pushes_pipeline_then_inserts(server: FakeP4RuntimeServer,
                                           p4info: p4info_pb2.P4Info) -> None:
    """First sync pushes the pipeline and inserts everything; a second sync changes nothing."""
    sw = _switch(server, p4info)
    schema = ControlPlaneSchema(p4info)
    want = [
        ents.entity(schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.1.0/24"},
                                       "set_nhop", {"dmac": 1, "port": 1})),
        ents.multicast_group(5, [(1, 0), (2, 1)]),
    ]
    try:
        sw.connect()
        report = sw.sync(want)
        assert report.pipeline_pushed and report.inserted == 2
        writes = server.servicer.writes
        again = sw.sync()
        assert not again.pipeline_pushed and again.changed == 0 and again.unchanged == 2
        assert server.servicer.writes == writes
    finally:
        sw.close()


def test_sync_modifies_and_prunes(server: FakeP4RuntimeServer, p4info: p4info_pb2.P4Info) -> None:
    """Changed entries are modified, unwanted ones deleted, equal ones left alone."""
    sw = _switch(server, p4info)
    schema = ControlPlaneSchema(p4info)
    r1 = ents.entity(schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.1.0/24"},
                                        "set_nhop", {"dmac": 1, "port": 1}))
    r2 = ents.entity(schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.2.0/24"},
                                        "set_nhop", {"dmac": 2, "port": 2}))
    r1b = ents.entity(schema.table_entry("MyIngress.ipv4_lpm", {"dstAddr": "10.0.1.0/24"},
                                         "set_nhop", {"dmac": 1, "port": 3}))
    try:
        sw.connect()
        sw.sync([r1, r2])
        report = sw.sync([r1b])
        assert (report.modified, report.deleted, report.inserted) == (1, 1, 0)
        stored = [schema.describe_entry(e.table_entry) for e in server.entities]
        assert stored == [{"table": "MyIngress.ipv4_lpm",
                           "match": {"hdr.ipv4.dstAddr": "10.0.1.0/24"},
                           "action": "MyIngress.set_nhop", "params": {"dmac": 1, "port": 3}}]
    finally:
        sw.close()


def test_backup_switch_refuses_to_sync(server: FakeP4RuntimeServer,
                                       p4info: p4info_pb2.P4Info) -> None:
    """A ManagedSwitch that is only backup raises PERMISSION_DENIED naming the primary."""
    primary = _switch(server, p4info, election_id=9)
    backup = _switch(server, p4info, election_id=2)
    try:
        primary.connect()
        backup.connect()
        with pytest.raises(P4RuntimeRequestError, match="is a backup; election id 9 is primary"):
            backup.sync([])
    finally:
        primary.close()
        backup.close()


def test_reconnect_after_server_restart_resyncs(p4info: p4info_pb2.P4Info) -> None:
    """When the switch restarts, the ManagedSwitch reconnects, re-pushes the pipeline and its
    entries."""
    first = FakeP4RuntimeServer(device_id=3).start()
    port = first.port
    schema = ControlPlaneSchema(p4info)
    want = [ents.multicast_group(7, [(1, 0)])]
    sw = ManagedSwitch(SwitchOptions("s1", first.address, 3, reconnect=True,
                                     reconnect_deadline_s=20))
    sw.load_program(p4info, b"cfg")
    second = None
    try:
        sw.connect()
        sw.sync(want)
        first.stop()
        second = FakeP4RuntimeServer(device_id=3)
        second._server.add_insecure_port(f"127.0.0.1:{port}")  # same address as before
        second.start()
        assert sw.wait_recovered(1, timeout_s=20)
        assert second.servicer.config is not None
        assert [ents.entity_key(e) for e in second.entities] == [("mcast", 7)]
        assert schema.table_names()  # schema unaffected
    finally:
        sw.close()
        first.stop()
        if second is not None:
            second.stop()


def test_pipeline_cookie_follows_the_loaded_program(server: FakeP4RuntimeServer,
                                                   p4info: p4info_pb2.P4Info) -> None:
    """The cookie (kept between syncs, not recomputed for each) is the digest of the program
    loaded now: loading another device config changes it, loading the first one again
    gives the first cookie back."""
    from controller.switch import pipeline_cookie

    sw = _switch(server, p4info)
    first = sw.cookie
    assert first == pipeline_cookie(p4info, b"device-config") == sw.cookie
    sw.load_program(p4info, b"another config")
    assert sw.cookie == pipeline_cookie(p4info, b"another config") != first
    sw.load_program(p4info, b"device-config")
    assert sw.cookie == first


def test_two_threads_connecting_one_client_leave_one_stream(
        server: FakeP4RuntimeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A switch's recovery thread and a serving controller's resync can connect the same
    client at once. Interleaved, the second connect replaced the first's stream without
    closing it: that stream kept the election id at the switch, which refused every later
    arbitration ("election id 7 is already used by another client"), and serve retried for
    ever (seen in a fresh-clone run: the restarted switch never got its pipeline back)."""
    slow_open = P4Client.open_channel
    inside = [0, 0]  # connects opening a channel now, most at once
    count = threading.Lock()

    def open_channel(self: P4Client, timeout_s: float | None = None) -> None:
        with count:
            inside[0] += 1
            inside[1] = max(inside)
        time.sleep(0.1)  # long enough for the other connect to get here too, unserialized
        try:
            slow_open(self, timeout_s)
        finally:
            with count:
                inside[0] -= 1

    monkeypatch.setattr(P4Client, "open_channel", open_channel)
    client = P4Client(server.address, 3, election_id=7)
    errors: list[Exception] = []

    def connect() -> None:
        try:
            client.connect(timeout_s=5.0)
        except P4RuntimeRequestError as err:  # a refusal while the other stream leaves
            errors.append(err)

    threads = [threading.Thread(target=connect) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert inside[1] == 1, "two connects of one client ran at once"
    client.close()
    assert _wait(lambda: not server.servicer.sessions), (
        f"{len(server.servicer.sessions)} stream(s) left open after close; {errors}")
