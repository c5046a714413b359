"""Ports: the in-memory port, and the AF_PACKET port on a veth whose peer is in a namespace."""

from __future__ import annotations

import time

import pytest

from softswitch.ports import AfPacketPort, MemoryPort, PortError
from tests.netns import can_use_netns, topology

pytestmark = pytest.mark.netns

FRAME = bytes.fromhex("020000000002020000000001") + b"\x88\xb5" + bytes(range(46))

SEND_RAW = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for _ in range(int(sys.argv[2])):
    s.send(bytes.fromhex(sys.argv[1]))
"""

RECV_RAW = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind(("eth0", 0))
s.settimeout(float(sys.argv[1]))
print("ready", flush=True)
try:
    while True:
        data, addr = s.recvfrom(65535)
        if addr[2] != socket.PACKET_OUTGOING:
            print(data.hex(), flush=True)
            break
except socket.timeout:
    print("timeout", flush=True)
"""

needs_netns = pytest.mark.skipif(not can_use_netns(), reason="needs root and ip(8)")


def test_memory_port_inject_and_receive() -> None:
    """Frames injected on a memory port are read in a batch; sent frames come out in order."""
    p = MemoryPort(1)
    try:
        p.inject(b"a" * 20)
        p.inject(b"b" * 30)
        assert p.recv_batch(64) == [b"a" * 20, b"b" * 30]
        assert p.recv_batch(64) == []
        assert p.send(b"c" * 14) and p.send(b"d" * 15)
        assert p.receive_all() == [b"c" * 14, b"d" * 15]
    finally:
        p.close()


def test_memory_port_batch_limit() -> None:
    """recv_batch returns at most max_frames and keeps the rest queued."""
    p = MemoryPort(2)
    try:
        for i in range(5):
            p.inject(bytes([i]) * 14)
        assert len(p.recv_batch(3)) == 3
        assert len(p.recv_batch(3)) == 2
    finally:
        p.close()


def test_memory_port_receive_timeout() -> None:
    """receive returns None when nothing was sent within the timeout."""
    p = MemoryPort(3)
    try:
        assert p.receive(0.05) is None
    finally:
        p.close()


def test_missing_interface_rejected() -> None:
    """Opening an AF_PACKET port on a missing interface raises PortError naming it."""
    with pytest.raises(PortError, match="nosuchif0"):
        AfPacketPort(1, "nosuchif0")


@pytest.mark.root
@needs_netns
def test_af_packet_receives_from_namespace() -> None:
    """A frame sent in the host namespace is received byte-exact on the switch end."""
    with topology(1) as topo:
        link = topo.links[0]
        port = AfPacketPort(1, link.switch_end)
        try:
            res = topo.run_in(link.netns, SEND_RAW, args=[FRAME.hex(), "1"])
            assert res.returncode == 0, res.stderr
            deadline = time.monotonic() + 5
            got: list[bytes] = []
            while not got and time.monotonic() < deadline:
                got = [f for f in port.recv_batch(64) if f[12:14] == b"\x88\xb5"]
                if not got:
                    time.sleep(0.01)
            assert got == [FRAME]
        finally:
            port.close()


@pytest.mark.root
@needs_netns
def test_af_packet_send_reaches_namespace_and_no_echo() -> None:
    """A frame sent on the port arrives in the namespace; the port does not read its own copy."""
    with topology(1) as topo:
        link = topo.links[0]
        port = AfPacketPort(1, link.switch_end)
        try:
            rx = topo.popen_in(link.netns, RECV_RAW, args=["5"])
            assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
            assert port.send(FRAME)
            out, err = rx.communicate(timeout=10)
            assert out.strip() == FRAME.hex(), err
            assert [f for f in port.recv_batch(64) if f == FRAME] == []
            assert port.counters.tx_drops == 0
        finally:
            port.close()
