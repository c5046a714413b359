"""Shared helpers for the P4Runtime and switch tests (this module defines no tests).

* :func:`fake_p4info` / :class:`FakePipeline`: a hand-written P4Info and a tiny pipeline over
  the real engine tables and externs, so the server and the packet loop can be tested
  without the front end;
* :class:`Client`: a minimal P4Runtime client (stub + StreamChannel with a receive queue);
* :class:`InProcessSwitch`: a SwitchDataPlane on in-memory ports plus the P4Runtime server on a free
  loopback port, run in threads and always stopped.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, TypeAlias

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.p4client import wait_until_ready
from softswitch.engine.externs import Counter, Meter, Register
from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.tables import ActionCall, KeyField, MatchKind, Table
from softswitch.p4runtime.server import P4RuntimeService, start_server
from softswitch.ports import MemoryPort
from softswitch.switch import SwitchDataPlane

CPU_PORT = 64
FwdReq = p4runtime_pb2.SetForwardingPipelineConfigRequest
FwdAction: TypeAlias = FwdReq.Action.ValueType
FWD_ID = 0x02000001
ACL_ID = 0x02000002
SET_PORT_ID = 0x01000001
DROP_ID = 0x01000002
NOACTION_ID = 0x01000003
REG_ID = 0x05000001
CTR_ID = 0x12000001
METER_ID = 0x15000001
DCTR_ID = 0x13000001
DIGEST_ID = 0x18000001
PKT_IN_ID = 0x03000001
PKT_OUT_ID = 0x03000002
LEARN_ETHERTYPE = 0x1234


def fake_p4info() -> p4info_pb2.P4Info:
    """P4Info of the fake program: fwd (exact on ingress port), acl (ternary + lpm,
    direct counter), one register, counter, meter, digest and both controller headers."""
    info = p4info_pb2.P4Info()
    for aid, name, params in (
        (SET_PORT_ID, "MyIngress.set_port", [("port", 9)]),
        (DROP_ID, "MyIngress.drop", []),
        (NOACTION_ID, "NoAction", []),
    ):
        a = info.actions.add()
        a.preamble.id, a.preamble.name = aid, name
        for i, (pname, width) in enumerate(params, 1):
            a.params.add(id=i, name=pname, bitwidth=width)
    t = info.tables.add()
    t.preamble.id, t.preamble.name = FWD_ID, "MyIngress.fwd"
    t.match_fields.add(id=1, name="standard_metadata.ingress_port", bitwidth=9,
                       match_type=p4info_pb2.MatchField.EXACT)
    t.action_refs.add(id=SET_PORT_ID)
    t.action_refs.add(id=DROP_ID)
    t.action_refs.add(id=NOACTION_ID, scope=p4info_pb2.ActionRef.DEFAULT_ONLY)
    t.size = 64
    t = info.tables.add()
    t.preamble.id, t.preamble.name = ACL_ID, "MyIngress.acl"
    t.match_fields.add(id=1, name="hdr.ethernet.etherType", bitwidth=16,
                       match_type=p4info_pb2.MatchField.TERNARY)
    t.match_fields.add(id=2, name="hdr.ipv4.dstAddr", bitwidth=32,
                       match_type=p4info_pb2.MatchField.LPM)
    t.action_refs.add(id=DROP_ID)
    t.action_refs.add(id=NOACTION_ID)
    t.direct_resource_ids.append(DCTR_ID)
    t.size = 4
    dc = info.direct_counters.add()
    dc.preamble.id, dc.preamble.name = DCTR_ID, "MyIngress.acl_counter"
    dc.spec.unit = p4info_pb2.CounterSpec.BOTH
    dc.direct_table_id = ACL_ID
    r = info.registers.add()
    r.preamble.id, r.preamble.name = REG_ID, "MyIngress.reg"
    r.type_spec.bitstring.bit.bitwidth = 32
    r.size = 8
    c = info.counters.add()
    c.preamble.id, c.preamble.name = CTR_ID, "MyIngress.ctr"
    c.spec.unit = p4info_pb2.CounterSpec.BOTH
    c.size = 8
    m = info.meters.add()
    m.preamble.id, m.preamble.name = METER_ID, "MyIngress.m"
    m.spec.unit = p4info_pb2.MeterSpec.BYTES
    m.size = 4
    d = info.digests.add()
    d.preamble.id, d.preamble.name = DIGEST_ID, "learn_t"
    d.type_spec.struct.name = "learn_t"
    for cid, name, fields in (
        (PKT_IN_ID, "packet_in", [("ingress_port", 9), ("_pad", 7)]),
        (PKT_OUT_ID, "packet_out", [("egress_port", 9), ("_pad", 7)]),
    ):
        cpm = info.controller_packet_metadata.add()
        cpm.preamble.id, cpm.preamble.name = cid, name
        for i, (fname, width) in enumerate(fields, 1):
            cpm.metadata.add(id=i, name=fname, bitwidth=width)
    return info


class FakePipeline:
    """fwd[ingress_port] -> set_port(p) / drop; acl counts hits; frames to the CPU port get
    a 2-byte packet_in header; packet-outs are sent to their header's egress port; frames
    of EtherType 0x1234 raise a digest; frames shorter than 14 bytes raise ValueError."""

    def __init__(self) -> None:
        self.cpu_port: int | None = None
        self.tables = {
            "MyIngress.fwd": Table(
                "MyIngress.fwd",
                [KeyField("standard_metadata.ingress_port", MatchKind.EXACT, 9)],
                ["MyIngress.set_port", "MyIngress.drop", "NoAction"],
                size=64,
                default_action=ActionCall("MyIngress.drop"),
                action_params={"MyIngress.set_port": [9], "MyIngress.drop": [], "NoAction": []},
                defaultonly=["NoAction"],
            ),
            "MyIngress.acl": Table(
                "MyIngress.acl",
                [KeyField("hdr.ethernet.etherType", MatchKind.TERNARY, 16),
                 KeyField("hdr.ipv4.dstAddr", MatchKind.LPM, 32)],
                ["MyIngress.drop", "NoAction"],
                size=4,
            ),
        }
        self.registers = {"MyIngress.reg": Register("MyIngress.reg", 8, 32)}
        self.counters = {"MyIngress.ctr": Counter("MyIngress.ctr", 8, "packets_and_bytes")}
        self.meters = {"MyIngress.m": Meter("MyIngress.m", 4, "bytes")}
        self.pre = PacketReplicationEngine()
        self._digests: list[tuple[str, tuple[int, ...]]] = []

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        if port == self.cpu_port:
            hdr = int.from_bytes(frame[:2], "big")
            return [(hdr >> 7, frame[2:])]
        if len(frame) < 14:
            raise ValueError("runt frame")
        self.counters["MyIngress.ctr"].count(port % 8, len(frame))
        ethertype = int.from_bytes(frame[12:14], "big")
        acl = self.tables["MyIngress.acl"]
        hit = acl.lookup((ethertype, 0))
        if hit is not None:
            acl.record_hit(hit, len(frame))
            if hit.action is not None and hit.action.name == "MyIngress.drop":
                return []
        if ethertype == LEARN_ETHERTYPE:
            self._digests.append(("learn_t", (port, len(frame))))
        fwd = self.tables["MyIngress.fwd"]
        entry = fwd.lookup((port,))
        action = entry.action if entry is not None else fwd.default_action
        if action is None or action.name != "MyIngress.set_port":
            return []
        out = action.args[0]
        if out == self.cpu_port:
            return [(out, ((port << 7) & 0xFFFF).to_bytes(2, "big") + frame)]
        return [(out, frame)]

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        out, self._digests = self._digests, []
        return out


def fake_loader(device_config: bytes) -> tuple[Any, p4info_pb2.P4Info]:
    """Loader for the service: b"fake" is the only valid device config."""
    if device_config != b"fake":
        raise ValueError(f"unknown device config {device_config[:20]!r}")
    return FakePipeline(), fake_p4info()


class Client:
    """A minimal P4Runtime client: unary calls plus a StreamChannel with a receive queue."""

    def __init__(self, address: str, device_id: int = 0) -> None:
        self.device_id = device_id
        self.channel = grpc.insecure_channel(address)
        assert wait_until_ready(self.channel, 10), f"no P4Runtime server at {address}"
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue[Any] = queue.Queue()
        self.received: queue.Queue[Any] = queue.Queue()
        self.election_id = (0, 0)
        self._stream = self.stub.StreamChannel(iter(self._out.get, None))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for msg in self._stream:
                self.received.put(msg)
        except grpc.RpcError as err:
            self.received.put(err)
        self.received.put(None)

    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(self, election: tuple[int, int] = (0, 1), device_id: int | None = None) -> Any:
        """Send an arbitration request; returns the first stream message that answers it."""
        self.election_id = election
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id if device_id is None else device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = election
        self.send(req)
        return self.next_message()

    def next_message(self, kind: str | None = None, timeout: float = 5.0) -> Any:
        """The next stream message (of ``kind`` if given), an RpcError, or None."""
        while True:
            try:
                msg = self.received.get(timeout=timeout)
            except queue.Empty:
                return None
            if msg is None or isinstance(msg, grpc.RpcError) or kind is None:
                return msg
            if msg.WhichOneof("update") == kind:
                return msg

    def set_config(self, action: FwdAction = FwdReq.VERIFY_AND_COMMIT,
                   device_config: bytes = b"fake",
                   p4info: p4info_pb2.P4Info | None = None, cookie: int | None = None) -> Any:
        req = FwdReq(device_id=self.device_id, action=action)
        req.election_id.high, req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(p4info if p4info is not None else fake_p4info())
        req.config.p4_device_config = device_config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(req, timeout=10)

    def write(self, *updates: p4runtime_pb2.Update, election: tuple[int, int] | None = None) -> Any:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        req.election_id.high, req.election_id.low = election or self.election_id
        req.updates.extend(updates)
        return self.stub.Write(req, timeout=10)

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out: list[p4runtime_pb2.Entity] = []
        for resp in self.stub.Read(req, timeout=10):
            out.extend(resp.entities)
        return out

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


class InProcessSwitch:
    """SwitchDataPlane on in-memory ports 1..n plus the P4Runtime server, each in a thread."""

    def __init__(self, nports: int = 3, cpu_port: int | None = CPU_PORT, device_id: int = 0,
                 preload: bool = False) -> None:
        self.ports = [MemoryPort(i) for i in range(1, nports + 1)]
        self.switch = SwitchDataPlane(self.ports, None, cpu_port=cpu_port)
        initial = None
        if preload:
            from softswitch.p4runtime.entities import PipelineState

            pipeline, info = fake_loader(b"fake")
            self.switch.install_pipeline(pipeline)
            initial = PipelineState(pipeline, info, b"fake", None)
        self.service = P4RuntimeService(self.switch, device_id, loader=fake_loader, initial=initial)
        self.switch.on_cpu_frame = self.service.on_cpu_frame
        self.switch.on_digests = self.service.on_digests
        self.server, self.grpc_port = start_server(self.service, "127.0.0.1:0")
        self.address = f"127.0.0.1:{self.grpc_port}"
        self._thread = threading.Thread(target=self.switch.run, daemon=True)
        self._thread.start()
        self.clients: list[Client] = []

    def port(self, number: int) -> MemoryPort:
        return self.ports[number - 1]

    def client(self, election: tuple[int, int] | None = (0, 1)) -> Client:
        c = Client(self.address)
        self.clients.append(c)
        if election is not None:
            c.arbitrate(election)
        return c

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.server.stop(grace=0).wait(5)
        self.switch.stop()
        self._thread.join(5)
        self.switch.close()


def table_entry_update(utype: p4runtime_pb2.Update.Type.ValueType, port: int,
                       out_port: int | None = None,
                       action_id: int = SET_PORT_ID) -> p4runtime_pb2.Update:
    """An update of fwd: ingress ``port`` -> set_port(out_port) (or drop)."""
    u = p4runtime_pb2.Update(type=utype)
    te = u.entity.table_entry
    te.table_id = FWD_ID
    te.match.add(field_id=1).exact.value = port.to_bytes(2, "big")
    te.action.action.action_id = action_id
    if out_port is not None:
        te.action.action.params.add(param_id=1, value=out_port.to_bytes(2, "big"))
    return u
