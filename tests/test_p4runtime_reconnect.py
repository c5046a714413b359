"""The data plane keeps forwarding while P4Runtime controllers come and go (root, netns).

h1 (ns) --veth-- [switch port 1]   [switch port 2] --veth-- h2 (ns). The switch process
runs tests/p4/port_forward.p4; h1 sends a paced stream of numbered frames to h2 while the
controller's stream is torn down (closed, or the controller process killed) and a new
controller connects as primary and writes. Every frame of the stream must arrive, in
order. The same set-up checks the process's debug traces and its stats file.
"""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2

from tests.netns import NetnsTopology, can_use_netns, topology
from tests.p4runtime_fakes import Client

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,  # its own namespaces, an ephemeral gRPC port: beside the networks
    pytest.mark.slow,
    pytest.mark.skipif(not can_use_netns(), reason="needs root and ip(8)"),
]

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "p4" / "port_forward.p4"
READY = re.compile(r"softswitch ready: .*grpc=(\S+):(\d+)")
ETHERTYPE = 0x88B5
STREAM_FRAMES = 1500  # paced 1 per ms: the stream lasts ~1.5 s
RX_IDLE_S = 2.0  # the receiver ends this long after its last frame
RX_DONE_IDLE_S = 0.2  # ... or this long once every frame sent came (a duplicate would)
RX_GRACE_S = 2.0  # after the sender ended: frames still in flight arrive well within this

# h1: send COUNT numbered frames, one per GAP_US microseconds; prints the count sent
SENDER = r"""
import socket, struct, sys, time
count, gap = int(sys.argv[1]), int(sys.argv[2]) * 1000
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
head = bytes.fromhex("020000000002020000000001") + struct.pack("!H", 0x88B5)
nxt = time.monotonic_ns()
for seq in range(count):
    while time.monotonic_ns() < nxt:
        pass
    s.send(head + struct.pack("!I", seq) + bytes(40))
    nxt += gap
print(count, flush=True)
"""

# h2: print "ready", then the sequence numbers received (JSON) after IDLE s of silence (DONE
# s once all of 0..EXPECT-1 came), or at once on SIGTERM (sent when the sender is done and
# nothing came for a while)
RECEIVER = r"""
import json, os, signal, socket, struct, sys
idle, first_wait, expect, done_idle = (float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]),
                                       float(sys.argv[4]))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88B5))
s.bind(("eth0", 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.settimeout(first_wait)
seqs = []
missing = set(range(expect))

def stop(*_):
    print(json.dumps(seqs), flush=True)
    os._exit(0)

signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    try:
        data, addr = s.recvfrom(65535)
    except socket.timeout:
        break
    if addr[2] == socket.PACKET_OUTGOING or len(data) < 18:
        continue
    seqs.append(struct.unpack_from("!I", data, 14)[0])
    missing.discard(seqs[-1])
    s.settimeout(idle if missing else done_idle)
print(json.dumps(seqs), flush=True)
"""

# a controller in its own process: arbitrate, then print "primary" and wait to be killed
CONTROLLER = r"""
import sys, time
from tests.p4runtime_fakes import Client
c = Client(sys.argv[1])
msg = c.arbitrate((0, int(sys.argv[2])))
print("primary" if msg is not None and msg.arbitration.status.code == 0 else f"not primary {msg}",
      flush=True)
time.sleep(600)
"""


class Lab:
    """The running switch process, its namespaces and the P4Info ids the tests need."""

    def __init__(
        self, topo: NetnsTopology, proc: subprocess.Popen[str], address: str, workdir: Path
    ) -> None:
        self.topo = topo
        self.proc = proc
        self.address = address
        self.workdir = workdir
        from softswitch.frontend import compile_file
        from softswitch.p4info import build_p4info

        info = build_p4info(compile_file(str(PROGRAM)))
        self.fwd_id = next(t.preamble.id for t in info.tables if t.preamble.name == "MyIngress.fwd")
        self.set_port_id = next(
            a.preamble.id for a in info.actions if a.preamble.name == "MyIngress.set_port"
        )

    def fwd_update(
        self, in_port: int, out_port: int,
        utype: p4runtime_pb2.Update.Type.ValueType = p4runtime_pb2.Update.INSERT
    ) -> p4runtime_pb2.Update:
        u = p4runtime_pb2.Update(type=utype)
        te = u.entity.table_entry
        te.table_id = self.fwd_id
        te.match.add(field_id=1).exact.value = in_port.to_bytes(2, "big")
        te.action.action.action_id = self.set_port_id
        te.action.action.params.add(param_id=1, value=out_port.to_bytes(2, "big"))
        return u

    def start_stream(self, src: int, dst: int, count: int) -> Callable[[], list[int]]:
        """Start a paced stream host ``src`` -> ``dst``; the returned call waits for it
        and gives the sequence numbers ``dst`` received."""
        rx = self.topo.popen_in(self.topo.links[dst - 1].netns, RECEIVER,
                                args=[str(RX_IDLE_S), "30", str(count), str(RX_DONE_IDLE_S)])
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        tx = self.topo.popen_in(self.topo.links[src - 1].netns, SENDER, args=[str(count), "1000"])

        def finish() -> list[int]:
            out, err = tx.communicate(timeout=120)
            assert tx.returncode == 0, err
            try:  # a receiver that got frames ends RX_IDLE_S after the last one (all: sooner)
                rx_out, rx_err = rx.communicate(timeout=RX_IDLE_S + RX_GRACE_S)
            except subprocess.TimeoutExpired:  # nothing came (a dropped stream): stop waiting
                rx.terminate()
                rx_out, rx_err = rx.communicate(timeout=30)
            assert rx.returncode == 0, rx_err
            got: list[int] = json.loads(rx_out.strip().splitlines()[-1])
            return got

        return finish


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def start_lab(tmp_path: Path) -> Iterator[Callable[..., Lab]]:
    """Start the switch (with extra flags) between two namespaces; always torn down."""
    stack: list[tuple[NetnsTopology, subprocess.Popen[str]]] = []
    topo_cm = topology(2)
    topo = topo_cm.__enter__()

    def start(*extra: str) -> Lab:
        cmd = [
            sys.executable,
            "-m",
            "softswitch",
            "run",
            str(PROGRAM),
            "--grpc-server-addr",
            "127.0.0.1:0",
            "--log-file",
            str(tmp_path / "switch.log"),
            "-i",
            f"1@{topo.links[0].switch_end}",
            "-i",
            f"2@{topo.links[1].switch_end}",
            *extra,
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
        )
        stack.append((topo, proc))
        return Lab(topo, proc, _ready_address(proc), tmp_path)

    try:
        yield start
    finally:
        try:
            for _topo, proc in stack:
                _stop_switch(proc)
        finally:
            topo_cm.__exit__(None, None, None)


def _ready_address(proc: subprocess.Popen[str]) -> str:
    """The gRPC address the switch says it serves on (its stdout read on a thread, so a
    switch that never says it fails the test after 120 s instead of hanging)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        line = lines.get(timeout=120)
        if line is None:
            pytest.fail(f"switch exited: {proc.stderr.read() if proc.stderr else ''}")
        m = READY.search(line)
        if m:
            return f"{m.group(1)}:{m.group(2)}"


def _stop_switch(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 30 s; its pipes closed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def connect_primary(address: str, election: tuple[int, int], timeout: float = 20.0) -> Client:
    """A client that is primary with ``election``; retries while the server still holds
    the previous session with the same id (it answers that with an error)."""
    deadline = time.monotonic() + timeout
    while True:
        c = Client(address)
        msg = c.arbitrate(election)
        if (
            msg is not None
            and not isinstance(msg, grpc.RpcError)
            and msg.arbitration.status.code == 0
        ):
            return c
        c.close()
        if time.monotonic() > deadline:
            pytest.fail(f"could not become primary with {election}: {msg}")
        time.sleep(0.05)


def test_forwarding_survives_controller_close_and_reconnect(start_lab: Callable[..., Lab]) -> None:
    """Traffic flows, the primary closes its stream, traffic still flows, a new primary
    (same election id) connects and writes, and not one frame of the stream is lost."""
    lab = start_lab()
    first = connect_primary(lab.address, (0, 1))
    first.write(lab.fwd_update(1, 2))
    finish = lab.start_stream(1, 2, STREAM_FRAMES)
    first.close()  # the stream ends while the frames flow
    second = connect_primary(lab.address, (0, 1))
    try:
        second.write(lab.fwd_update(2, 1))  # the new primary can write
        got = finish()
        assert got == list(range(STREAM_FRAMES))
        back = lab.start_stream(2, 1, 20)
        assert back() == list(range(20))  # the entry written after reconnecting works
    finally:
        second.close()


def test_forwarding_survives_killed_controller(start_lab: Callable[..., Lab]) -> None:
    """A controller process killed mid-stream (no goodbye) does not disturb forwarding,
    and a backup with a lower election id then becomes primary and can write."""
    lab = start_lab()
    setup = connect_primary(lab.address, (0, 9))
    setup.write(lab.fwd_update(1, 2))
    setup.close()
    ctl = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, lab.address, "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    backup = None
    try:
        assert ctl.stdout is not None and ctl.stdout.readline().strip() == "primary"
        backup = Client(lab.address)
        msg = backup.arbitrate((0, 5))
        assert msg.arbitration.status.code != 0  # a backup while the killed one lives
        finish = lab.start_stream(1, 2, STREAM_FRAMES)
        ctl.kill()
        ctl.wait(30)
        promoted = backup.next_message("arbitration", timeout=20.0)
        assert promoted is not None and promoted.arbitration.status.code == 0
        backup.write(lab.fwd_update(2, 1))
        assert finish() == list(range(STREAM_FRAMES))
        assert lab.start_stream(2, 1, 20)() == list(range(20))
    finally:
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait(30)
        for stream in (ctl.stdout, ctl.stderr):
            if stream is not None:
                stream.close()
        if backup is not None:
            backup.close()


def test_debug_log_traces_each_packet(start_lab: Callable[..., Lab]) -> None:
    """At -L debug the switch log holds one trace block per packet: parser, table, fate."""
    lab = start_lab("-L", "debug")
    c = connect_primary(lab.address, (0, 1))
    try:
        c.write(lab.fwd_update(1, 2))
        assert lab.start_stream(1, 2, 3)() == [0, 1, 2]
        assert lab.start_stream(2, 1, 2)() == []  # no entry for port 2: dropped
    finally:
        c.close()
    lab.proc.send_signal(signal.SIGTERM)
    assert lab.proc.wait(30) == 0
    log = (lab.workdir / "switch.log").read_text()
    assert log.count("    table MyIngress.fwd: hit -> MyIngress.set_port(port=2)") >= 3
    assert log.count("    parser: start > accept; extracted hdr.ethernet") >= 5
    assert "    table MyIngress.fwd: miss -> MyIngress.drop()" in log
    assert "=> drop: egress_spec == 511 at the end of ingress (mark_to_drop() at" in log


def test_stats_file_of_running_switch(start_lab: Callable[..., Lab]) -> None:
    """The stats file beside the log counts the stream on ports 1 and 2 after SIGUSR1."""
    lab = start_lab("--stats-interval", "3600")
    c = connect_primary(lab.address, (0, 1))
    try:
        c.write(lab.fwd_update(1, 2))
        assert len(lab.start_stream(1, 2, 10)()) == 10
    finally:
        c.close()
    stats = lab.workdir / "switch.stats.json"

    def counted() -> bool:
        lab.proc.send_signal(signal.SIGUSR1)
        try:
            doc = json.loads(stats.read_text())
        except (OSError, ValueError):
            return False
        return bool(doc["ports"]["2"]["tx_packets"] >= 10)

    assert wait_for(counted)
    res = subprocess.run(
        [sys.executable, "-m", "softswitch.stats", str(stats)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr
    assert lab.topo.links[0].switch_end in res.stdout
