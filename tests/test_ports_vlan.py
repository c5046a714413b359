"""VLAN tags on real ports: the kernel strips the outer 802.1Q/802.1ad tag on receive
(VLAN offload, on by default for veths); the port must put it back so that the program
sees the frame as it was on the wire, and must transmit tagged frames unchanged."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether

from protocol import netreduce as nr
from softswitch.ports import (
    AUXDATA,
    PACKET_AUXDATA,
    SOL_PACKET,
    TP_STATUS_VLAN_TPID_VALID,
    TP_STATUS_VLAN_VALID,
    AfPacketPort,
    restore_vlan_tag,
)
from tests.netns import NetnsTopology, can_use_netns, topology

if TYPE_CHECKING:
    from softswitch.pipeline import Pipeline
    from softswitch.switch import SwitchDataPlane

pytestmark = pytest.mark.netns

REPO = Path(__file__).resolve().parent.parent
HOST_MAC = "02:00:00:00:00:01"
PEER_MAC = "02:00:00:00:00:02"
SW_MAC = "02:00:00:00:00:fe"
MARK = b"vlan-port-test!!" * 3

needs_netns = pytest.mark.skipif(not can_use_netns(), reason="needs root and ip(8)")

SEND_RAW = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for frame in sys.argv[1:]:
    s.send(bytes.fromhex(frame))
"""

# What the wire carried, written independently of softswitch.ports: the kernel always
# takes the outer tag off received frames (skb_vlan_untag), so read it from the auxdata.
RECV_SRC = """
import socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind(("eth0", 0))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
s.settimeout(float(sys.argv[2]))
src = bytes.fromhex(sys.argv[1])
want = int(sys.argv[3])
print("ready", flush=True)
try:
    while want:
        data, anc, _, addr = s.recvmsg(65535, 64)
        if addr[2] == socket.PACKET_OUTGOING or data[6:12] != src:
            continue
        for level, kind, aux in anc:
            status, _l, _s, _m, _n, tci, tpid = struct.unpack("=IIIHHHH", aux[:20])
            if level == 263 and kind == 8 and status & 0x10:
                tpid = tpid if status & 0x40 else 0x8100
                data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
        print(data.hex(), flush=True)
        want -= 1
except socket.timeout:
    print("timeout", flush=True)
"""


def _aux(status: int, tci: int, tpid: int) -> list[tuple[int, int, bytes]]:
    return [(SOL_PACKET, PACKET_AUXDATA, AUXDATA.pack(status, 60, 60, 0, 14, tci, tpid))]


def _mac(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


UNTAGGED = _mac(PEER_MAC) + _mac(HOST_MAC) + b"\x88\xb5" + MARK


# ------------------------------------------------------------------ pure reconstruction


def test_restore_tag_with_tpid() -> None:
    """An 802.1ad tag reported with its TPID goes back after the MAC addresses."""
    stripped = UNTAGGED
    aux = _aux(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID, 0x2064, 0x88A8)
    assert (
        restore_vlan_tag(stripped, aux) == UNTAGGED[:12] + bytes.fromhex("88a82064") + UNTAGGED[12:]
    )


def test_restore_tag_without_tpid_is_8021q() -> None:
    """Kernels that report no TPID get 802.1Q, as libpcap assumes."""
    aux = _aux(TP_STATUS_VLAN_VALID, 0x0005, 0)
    assert (
        restore_vlan_tag(UNTAGGED, aux) == UNTAGGED[:12] + bytes.fromhex("81000005") + UNTAGGED[12:]
    )


def test_restore_priority_tag_vid_zero() -> None:
    """A tag with TCI 0 (priority 0, VID 0) is still a tag when the kernel says it is valid."""
    aux = _aux(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID, 0, 0x8100)
    assert (
        restore_vlan_tag(UNTAGGED, aux) == UNTAGGED[:12] + bytes.fromhex("81000000") + UNTAGGED[12:]
    )


def test_no_tag_leaves_frame_alone() -> None:
    """Without the valid flag and with TCI 0 there was no tag; other control messages are
    ignored."""
    assert restore_vlan_tag(UNTAGGED, _aux(0, 0, 0)) == UNTAGGED
    assert restore_vlan_tag(UNTAGGED, [(socket.SOL_SOCKET, 1, b"\x00" * 20)]) == UNTAGGED
    assert restore_vlan_tag(UNTAGGED, []) == UNTAGGED


def test_old_kernel_nonzero_tci_without_flag() -> None:
    """Kernels before the VLAN_VALID flag only reported a non-zero TCI: still restored."""
    out = restore_vlan_tag(UNTAGGED, _aux(0, 0x0123, 0))
    assert out == UNTAGGED[:12] + bytes.fromhex("81000123") + UNTAGGED[12:]


# ------------------------------------------------------------------- through a real veth

TAGGED_FRAMES = {
    "untagged": UNTAGGED,
    "802.1Q": UNTAGGED[:12] + bytes.fromhex("8100a07b") + UNTAGGED[12:],
    "802.1Q VID 0": UNTAGGED[:12] + bytes.fromhex("81000000") + UNTAGGED[12:],
    "802.1ad+802.1Q": UNTAGGED[:12] + bytes.fromhex("88a8206481003005") + UNTAGGED[12:],
    "802.1Q+802.1Q": UNTAGGED[:12] + bytes.fromhex("8100000a8100000b") + UNTAGGED[12:],
}


def _plain_socket(iface: str) -> socket.socket:
    """A raw socket read with plain recv, as the ports did before: it sees stripped frames."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    s.setblocking(False)
    return s


def _plain_collect(sock: socket.socket, src: bytes, n: int, timeout: float = 5.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        try:
            data = sock.recv(65535)
        except BlockingIOError:
            time.sleep(0.005)
            continue
        if data[6:12] == src:
            got.append(data)
    return got


def _collect(port: AfPacketPort, src: bytes, n: int, timeout: float = 5.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += [f for f in port.recv_batch(64) if f[6:12] == src]
        if len(got) < n:
            time.sleep(0.005)
    return got


@pytest.mark.root
@needs_netns
def test_tagged_frames_received_as_on_the_wire() -> None:
    """Untagged, single-, priority- and double-tagged frames arrive byte-exact, although
    the kernel stripped the outer tag of each (a plain recv shows it did)."""
    with topology(1) as topo:
        link = topo.links[0]
        port = AfPacketPort(1, link.switch_end)
        plain = _plain_socket(link.switch_end)
        try:
            frames = list(TAGGED_FRAMES.values())
            res = topo.run_in(link.netns, SEND_RAW, args=[f.hex() for f in frames])
            assert res.returncode == 0, res.stderr
            got = _collect(port, _mac(HOST_MAC), len(frames))
            assert [f.hex() for f in got] == [f.hex() for f in frames]
            stripped = _plain_collect(plain, _mac(HOST_MAC), len(frames))
            assert stripped[1] == UNTAGGED  # the premise: the 802.1Q tag was taken off
            assert stripped[3] == UNTAGGED[:12] + bytes.fromhex("81003005") + UNTAGGED[12:]
        finally:
            plain.close()
            port.close()


@pytest.mark.root
@needs_netns
def test_tagged_frames_transmitted_intact() -> None:
    """Frames the port sends keep their tags on the wire."""
    with topology(1) as topo:
        link = topo.links[0]
        port = AfPacketPort(1, link.switch_end)
        frames = [_mac(PEER_MAC) + _mac(SW_MAC) + f[12:] for f in TAGGED_FRAMES.values()]
        rx = topo.popen_in(link.netns, RECV_SRC, args=[_mac(SW_MAC).hex(), "5", str(len(frames))])
        try:
            assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
            for f in frames:
                assert port.send(f)
            out, err = rx.communicate(timeout=15)
            assert out.split() == [f.hex() for f in frames], err
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.communicate()
            port.close()


# ------------------------------------------------------------------ through the switch


@contextmanager
def running_switch(topo: NetnsTopology, pipeline: Pipeline) -> Iterator[SwitchDataPlane]:
    """A SwitchDataPlane on AF_PACKET ports 1..n (the topology's veths) in a thread; always
    stopped."""
    from softswitch.switch import SwitchDataPlane

    ports = []
    try:
        for i, link in enumerate(topo.links, 1):
            ports.append(AfPacketPort(i, link.switch_end))
        switch = SwitchDataPlane(ports, pipeline)
    except BaseException:
        for p in ports:
            p.close()
        raise
    thread = threading.Thread(target=switch.run, daemon=True)
    thread.start()
    try:
        yield switch
    finally:
        switch.stop()
        thread.join(10)
        switch.close()


def _wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


@pytest.fixture(scope="module")
def compile_p4() -> Callable[..., Any]:
    from softswitch.frontend import compile_file

    return compile_file


@pytest.mark.root
@needs_netns
def test_netreduce_drops_tagged_ipv4(compile_p4: Callable[..., Any]) -> None:
    """netreduce.p4 parses only untagged IPv4: a tagged IPv4 frame is dropped (not IPv4),
    the same frame untagged is routed. Before the ports restored tags, both were routed."""
    from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
    from softswitch.pipeline import Pipeline

    pipe = Pipeline.from_program(compile_p4(str(REPO / "p4src" / "netreduce.p4")))
    dst_ip = "10.0.0.2"
    pipe.tables[nr.Ipv4ForwardingNames.IPV4_LPM].insert(TableEntry(
        matches=(FieldMatch(value=int.from_bytes(socket.inet_aton(dst_ip), "big"), prefix_len=32),),
        action=ActionCall(nr.Ipv4ForwardingNames.SET_NHOP,
                          (int.from_bytes(_mac(SW_MAC), "big"),
                           int.from_bytes(_mac(PEER_MAC), "big"), 2))))
    ip = IP(src="10.0.0.1", dst=dst_ip, ttl=9) / UDP(sport=5, dport=6) / MARK
    tagged = [
        bytes(Ether(src=HOST_MAC, dst=SW_MAC) / Dot1Q(vlan=7) / ip),
        bytes(Ether(src=HOST_MAC, dst=SW_MAC) / Dot1AD(vlan=100) / Dot1Q(vlan=5) / ip),
    ]
    plain = bytes(Ether(src=HOST_MAC, dst=SW_MAC) / ip)
    drops = pipe.counters[nr.SwitchCounters.INGRESS_DROPS]
    not_ipv4 = 11  # DROP_NOT_IPV4 in p4src/include/nr_headers.p4
    with topology(2) as topo, running_switch(topo, pipe):
        h1, h2 = topo.links
        rx = topo.popen_in(h2.netns, RECV_SRC, args=[_mac(SW_MAC).hex(), "10", "1"])
        try:
            assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
            res = topo.run_in(h1.netns, SEND_RAW, args=[f.hex() for f in tagged])
            assert res.returncode == 0, res.stderr
            assert _wait_for(lambda: drops.packets[not_ipv4] == 2), drops.packets[not_ipv4]
            res = topo.run_in(h1.netns, SEND_RAW, args=[plain.hex()])
            assert res.returncode == 0, res.stderr
            out, err = rx.communicate(timeout=20)
            first = (
                bytes.fromhex(out.split()[0])
                if out.split() and out.split()[0] != "timeout"
                else b""
            )
            # The first frame out of port 2 is the untagged one, routed (TTL 8):
            assert first[12:14] == b"\x08\x00", (out, err)
            assert first[14 + 8] == 8 and first.endswith(MARK)
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.communicate()


@pytest.mark.root
@needs_netns
def test_program_sees_and_keeps_tags(compile_p4: Callable[..., Any]) -> None:
    """A program that parses VLAN sees the outer tag (it adds one to the VID) and the inner
    tag; the frame leaves port 2 with both tags; an untagged frame is dropped by it."""
    from softswitch.pipeline import Pipeline

    pipe = Pipeline.from_program(compile_p4(str(REPO / "tests" / "p4" / "vlan_tags.p4")))
    head = _mac(PEER_MAC) + _mac(HOST_MAC)
    sent = [
        head + MARK,  # untagged: dropped by the program
        head + bytes.fromhex("8100a07b") + b"\x88\xb5" + MARK,
        head + bytes.fromhex("88a8206481003005") + b"\x88\xb5" + MARK,
    ]
    expected = [
        head + bytes.fromhex("8100a07c") + b"\x88\xb5" + MARK,
        head + bytes.fromhex("88a8206581003005") + b"\x88\xb5" + MARK,
    ]
    with topology(2) as topo, running_switch(topo, pipe):
        h1, h2 = topo.links
        rx = topo.popen_in(h2.netns, RECV_SRC, args=[_mac(HOST_MAC).hex(), "10", "2"])
        try:
            assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
            res = topo.run_in(h1.netns, SEND_RAW, args=[f.hex() for f in sent])
            assert res.returncode == 0, res.stderr
            out, err = rx.communicate(timeout=20)
            assert out.split() == [f.hex() for f in expected], err
        finally:
            if rx.poll() is None:
                rx.kill()
                rx.communicate()


def test_auxdata_layout() -> None:
    """tpacket_auxdata is 20 bytes (three u32, four u16), as in linux/if_packet.h."""
    assert AUXDATA.size == 20
    assert struct.calcsize("=IIIHHHH") == 20
