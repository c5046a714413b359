"""End to end: the switch process on veths, hosts in namespaces, p4runtime-shell as client.

h1 (ns) --veth-- [switch port 1]   [switch port 2] --veth-- h2 (ns);  CPU port 64.
The real front end and engine compile the program below; p4runtime-shell pushes it.
"""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest

from softswitch import frontend
from tests.netns import NetnsTopology, can_use_netns, topology

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.skipif(not can_use_netns(), reason="needs root and ip(8)"),
]

REPO = Path(__file__).resolve().parent.parent
READY = re.compile(r"softswitch ready: .*grpc=(\S+):(\d+)")
CPU_PORT = 64

PROGRAM = """\
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers_t { packet_in_t packet_in; packet_out_t packet_out; ethernet_t ethernet; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            64: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out { pkt.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet { pkt.extract(hdr.ethernet); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(8, CounterType.packets_and_bytes) port_ctr;
    action drop() { mark_to_drop(standard_metadata); }
    action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
    action to_cpu() {
        standard_metadata.egress_spec = 64;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        hdr.packet_in._pad = 0;
    }
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; to_cpu; drop; }
        default_action = drop();
        size = 64;
    }
    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            port_ctr.count((bit<32>)standard_metadata.ingress_port);
            fwd.apply();
        }
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.packet_in); pkt.emit(hdr.ethernet); }
}
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
"""

FRAME = bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes(range(60))

SCAPY_SEND = """
import sys
from scapy.all import Ether, sendp
sendp(Ether(bytes.fromhex(sys.argv[1])), iface="eth0", count=int(sys.argv[2]), verbose=False)
"""

RECV = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind(("eth0", 0))
s.settimeout(float(sys.argv[1]))
want = int(sys.argv[2])
print("ready", flush=True)
got = 0
try:
    while got < want:
        data, addr = s.recvfrom(65535)
        if addr[2] != socket.PACKET_OUTGOING:
            print(data.hex(), flush=True)
            got += 1
except socket.timeout:
    pass
print("done", flush=True)
"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Namespaces h1/h2, the program compiled to P4Info + device config, the switch running."""
    from softswitch.device_config import make_device_config
    from softswitch.p4info import build_p4info, p4info_to_text

    prog = tmp_path / "fwd.p4"
    prog.write_text(PROGRAM)
    program = frontend.compile_file(str(prog))
    (tmp_path / "p4info.txt").write_text(p4info_to_text(build_p4info(program)))
    (tmp_path / "device_config.json").write_bytes(make_device_config(prog))
    with topology(2) as topo:
        cmd = [sys.executable, "-m", "softswitch", "run", "--no-p4",
               "--grpc-server-addr", "127.0.0.1:0", "--cpu-port", str(CPU_PORT),
               "--pcap", str(tmp_path / "pcaps"), "--log-file", str(tmp_path / "switch.log"),
               "-i", f"1@{topo.links[0].switch_end}", "-i", f"2@{topo.links[1].switch_end}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=REPO)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            address = None
            while address is None:
                line = lines.get(timeout=60)
                if line is None:
                    pytest.fail(f"switch exited: {proc.stderr.read() if proc.stderr else ''}")
                m = READY.search(line)
                if m:
                    address = f"{m.group(1)}:{m.group(2)}"
            yield {"topo": topo, "address": address, "dir": tmp_path, "proc": proc}
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            assert rc == 0


@pytest.fixture
def shell(lab: dict[str, Any]) -> Iterator[ModuleType]:
    """p4runtime-shell connected as primary with the pipeline pushed."""
    from p4runtime_sh import shell as sh

    sh.setup(device_id=0, grpc_addr=lab["address"], election_id=(0, 10),
             config=sh.FwdPipeConfig(str(lab["dir"] / "p4info.txt"),
                                     str(lab["dir"] / "device_config.json")),
             verbose=False)
    try:
        yield sh
    finally:
        if sh.client is not None:
            sh.teardown()


def send_and_receive(topo: NetnsTopology, frame: bytes, count: int = 1,
                     timeout: float = 10.0) -> list[bytes]:
    """Send ``frame`` from h1 with scapy; return what h2 receives (EtherType 0x88b5)."""
    rx = topo.popen_in(topo.links[1].netns, RECV, args=[str(timeout), str(count)])
    assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
    res = topo.run_in(topo.links[0].netns, SCAPY_SEND, args=[frame.hex(), str(count)], timeout=120)
    assert res.returncode == 0, res.stderr
    out, _ = rx.communicate(timeout=timeout + 30)
    return [bytes.fromhex(x) for x in out.split() if x not in ("ready", "done")]


def test_forwarding_between_namespaces(lab: dict[str, Any], shell: ModuleType) -> None:
    """An entry pushed with p4runtime-shell forwards h1's frame to h2 byte-exact."""
    te = shell.TableEntry("MyIngress.fwd")(action="MyIngress.set_port")
    te.match["standard_metadata.ingress_port"] = "1"
    te.action["port"] = "2"
    te.insert()
    assert send_and_receive(lab["topo"], FRAME) == [FRAME]


def test_no_entry_drops(lab: dict[str, Any], shell: ModuleType) -> None:
    """Without an entry the default action drops the frame."""
    assert send_and_receive(lab["topo"], FRAME, timeout=2.0) == []


def test_counter_read_after_traffic(lab: dict[str, Any], shell: ModuleType) -> None:
    """The indexed counter read over P4Runtime counts h1's frames on port 1."""
    te = shell.TableEntry("MyIngress.fwd")(action="MyIngress.set_port")
    te.match["standard_metadata.ingress_port"] = "1"
    te.action["port"] = "2"
    te.insert()
    assert len(send_and_receive(lab["topo"], FRAME, count=3)) == 3
    ce = shell.CounterEntry("MyIngress.port_ctr")
    ce.index = 1
    (entry,) = list(ce.read())
    assert entry.data.packet_count == 3
    assert entry.data.byte_count == 3 * len(FRAME)


def test_packet_out_reaches_h2(lab: dict[str, Any], shell: ModuleType) -> None:
    """A PacketOut to port 2 arrives at h2 without the controller header."""
    rx = lab["topo"].popen_in(lab["topo"].links[1].netns, RECV, args=["10", "1"])
    assert rx.stdout.readline().strip() == "ready"
    pkt = shell.PacketOut()
    pkt.payload = FRAME
    pkt.metadata["egress_port"] = "2"
    pkt.metadata["_pad"] = "0"
    pkt.send()
    out, _ = rx.communicate(timeout=40)
    assert [x for x in out.split() if x not in ("ready", "done")] == [FRAME.hex()]


def test_packet_in_from_h1(lab: dict[str, Any], shell: ModuleType) -> None:
    """A frame punted by to_cpu arrives as PacketIn with ingress_port 1."""
    te = shell.TableEntry("MyIngress.fwd")(action="MyIngress.to_cpu")
    te.match["standard_metadata.ingress_port"] = "1"
    te.insert()
    sniff = shell.PacketIn()
    res = lab["topo"].run_in(lab["topo"].links[0].netns, SCAPY_SEND, args=[FRAME.hex(), "1"],
                             timeout=120)
    assert res.returncode == 0, res.stderr
    # the first PacketIn, as soon as it comes (sniff(timeout=10) always waits the 10 s)
    got = sniff.packet_in_queue.get(timeout=10)
    assert got.packet.payload == FRAME
    assert got.packet.metadata[0].value == b"\x01"


def test_backup_client_denied(lab: dict[str, Any], shell: ModuleType) -> None:
    """A second client with a lower election id cannot write (PERMISSION_DENIED)."""
    from tests.p4runtime_fakes import Client

    backup = Client(lab["address"])
    try:
        msg = backup.arbitrate((0, 5))
        assert msg.arbitration.status.code != 0
        from p4.v1 import p4runtime_pb2

        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        te = shell.TableEntry("MyIngress.fwd")(action="MyIngress.drop")
        te.match["standard_metadata.ingress_port"] = "2"
        u.entity.table_entry.CopyFrom(te._entry)
        with pytest.raises(grpc.RpcError) as err:
            backup.write(u)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        backup.close()


def test_pcaps_written(lab: dict[str, Any], shell: ModuleType) -> None:
    """Frames through the switch land in the per-interface pcap files."""
    from softswitch.pcap import read_pcap

    te = shell.TableEntry("MyIngress.fwd")(action="MyIngress.set_port")
    te.match["standard_metadata.ingress_port"] = "1"
    te.action["port"] = "2"
    te.insert()
    assert send_and_receive(lab["topo"], FRAME) == [FRAME]
    shell.teardown()
    lab["proc"].send_signal(signal.SIGTERM)
    assert lab["proc"].wait(30) == 0
    sw1, sw2 = lab["topo"].links[0].switch_end, lab["topo"].links[1].switch_end
    assert FRAME in [f for _, f in read_pcap(lab["dir"] / "pcaps" / f"{sw1}_in.pcap")]
    assert FRAME in [f for _, f in read_pcap(lab["dir"] / "pcaps" / f"{sw2}_out.pcap")]
