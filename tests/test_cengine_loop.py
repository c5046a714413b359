"""The C packet loop (``softswitch run --io c``, :mod:`softswitch.cengine.loop`).

Frames go into in-memory ports (datagram socket pairs, which the C thread reads and
writes with the same recvmmsg/sendmmsg calls as AF_PACKET sockets) or, as root, into veth
pairs; every test compares what comes out with the Python engine's ``Pipeline.process`` on
the same program and table entries, or with the Python loop. Readiness is read from the
port counters under the switch's lock (which waits for the C thread's batch to end), never
from a sleep.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
from softswitch.pipeline import Pipeline
from softswitch.ports import AfPacketPort, MemoryPort, Port
from softswitch.stf import Packet, parse_stf, run_stf
from softswitch.switch import SwitchDataPlane, c_clock_tdf, parse_args
from tests.netns import NetnsTopology, can_use_netns
from vtime import VirtualClock

REPO = Path(__file__).resolve().parent.parent
P4 = REPO / "tests" / "p4"
WAIT_S = 20.0  # how long a readiness check waits before the test fails
CPU = 64
FRAME = bytes.fromhex("000000000002000000000001") + b"\x08\x00" + bytes(range(50))

DIGEST_P4 = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct headers { eth_t eth; }
struct learn_t { bit<48> src; bit<9> port; }
struct metadata { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        digest<learn_t>(1, {hdr.eth.src, sm.ingress_port});
        sm.egress_spec = 2;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def wait_for(what: str, check: Callable[[], bool]) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.001)


class Running:
    """A SwitchDataPlane running on a thread over in-memory ports 0..nports-1."""

    def __init__(self, pipeline: Any, nports: int = 10, expect_c: bool = True,
                 **kw: Any) -> None:
        self.ports = [MemoryPort(n) for n in range(nports)]
        self.sw = SwitchDataPlane(self.ports, pipeline, **kw)
        self.thread = threading.Thread(target=self.sw.run, name="switch-loop")
        self.thread.start()
        if expect_c and kw.get("io", "c") == "c" and getattr(pipeline, "engine", "") == "c":
            wait_for("the C loop", lambda: self.sw.io_loop == "c")

    def rx(self, port: int) -> int:
        with self.sw.lock:  # waits for the C thread's batch to end
            return int(self.ports[port].counters.rx_packets)

    def send(self, port: int, frame: bytes, expect: int | None = None) -> list[tuple[int, bytes]]:
        """Send ``frame`` into ``port`` and return what came out (all ports, in port
        order), once the switch has processed it. On the C loop that is known from the
        ingress port's count (the lock waits for the thread's batch to end); the Python loop
        counts before it runs the frame, so there ``expect`` (how many frames come out)
        says when it is done."""
        target = self.rx(port) + 1
        self.ports[port].inject(frame)
        wait_for(f"frame on port {port}", lambda: self.rx(port) >= target)
        if expect is None:
            assert self.sw.io_loop == "c", "the Python loop needs expect="
            return self.collect()
        out: list[tuple[int, bytes]] = []

        def arrived() -> bool:
            out.extend(self.collect())
            return len(out) >= expect

        wait_for(f"{expect} frame(s) out", arrived)
        return sorted(out, key=lambda x: x[0])

    def collect(self) -> list[tuple[int, bytes]]:
        out = []
        for p in self.ports:
            out += [(p.number, f) for f in p.receive_all(0.0)]
        return out

    def stop(self) -> None:
        """Stop the loop and join its thread (the ports stay open until :meth:`close`)."""
        self.sw.stop()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()

    def close(self) -> None:
        if self.thread.is_alive():
            self.stop()
        self.sw.close()


@pytest.fixture()
def running() -> Iterator[Callable[..., Running]]:
    made: list[Running] = []

    def make(pipeline: Any, **kw: Any) -> Running:
        r = Running(pipeline, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


class LoopPipeline:
    """``Pipeline``-like: ``process`` runs a frame through the running C loop (for the STF
    runner and the NetReduce job helpers); everything else is the pipeline's."""

    def __init__(self, pipeline: Pipeline, run: Running) -> None:
        self._pipeline = pipeline
        self._run = run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipeline, name)

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self._run.send(port, frame)


def port_forward(engine: str = "c", entries: dict[int, int] | None = None) -> Pipeline:
    pl = Pipeline.from_file(str(P4 / "port_forward.p4"), engine=engine)
    for src, dst in ({1: 2, 2: 1} if entries is None else entries).items():
        set_port(pl, src, dst)
    return pl


def set_port(pl: Pipeline, src: int, dst: int, modify: bool = False) -> None:
    table = pl.tables["MyIngress.fwd"]
    entry = TableEntry((FieldMatch(src),), ActionCall("MyIngress.set_port", (dst,)))
    (table.modify if modify else table.insert)(entry)


# ------------------------------------------------------------------ equivalence


STF_PROGRAMS = ["multicast_clone", "ipv4_forward", "counters_registers", "recirculate",
                "calculator", "source_routing", "parser_errors"]


@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_stf_frames_through_the_c_loop(name: str, running: Callable[..., Running]) -> None:
    """Each sample program's STF test passes with its frames going through the C loop's
    sockets, and the frames out per port equal the Python engine's."""
    text = (P4 / f"{name}.stf").read_text()
    pl = Pipeline.from_file(str(P4 / f"{name}.p4"), engine="c")
    assert pl.engine == "c"
    run = running(pl)
    assert run.sw.io_loop == "c"
    result = run_stf(LoopPipeline(pl, run), text, f"{name}.stf")
    assert result.passed, result.first_mismatch
    ref = run_stf(Pipeline.from_file(str(P4 / f"{name}.p4"), engine="python"), text)
    assert ref.outputs == result.outputs
    assert sum(len(v) for v in result.outputs.values()) > 0


def test_c_loop_and_python_loop_send_the_same_frames(running: Callable[..., Running]) -> None:
    """Same program, entries and frames: the same frames out per port on both loops."""
    text = (P4 / "multicast_clone.stf").read_text()
    frames = [(i.command.port, i.command.data) for i in parse_stf(text)
              if isinstance(i.command, Packet)] * 3
    setup = "\n".join(x for x in text.splitlines() if not x.startswith(("packet", "expect")))
    ref = Pipeline.from_file(str(P4 / "multicast_clone.p4"), engine="python")
    run_stf(ref, setup)
    expect = [len(ref.process(port, frame)) for port, frame in frames]
    outs: dict[str, Any] = {}
    for io in ("c", "python"):
        pl = Pipeline.from_file(str(P4 / "multicast_clone.p4"), engine="c")
        run_stf(pl, setup)
        run = running(pl, io=io)
        assert run.sw.io_loop == io
        got: dict[int, list[bytes]] = {}
        for (port, frame), n in zip(frames, expect, strict=True):
            for p, f in run.send(port, frame, expect=n):
                got.setdefault(p, []).append(f)
        run.stop()
        assert run.collect() == []  # nothing more came out
        outs[io] = got
        counters = {n: c.as_dict() for n, c in run.sw.port_counters().items()}
        outs[io + "-counters"] = counters
    assert sum(expect) > 0
    assert outs["c"] == outs["python"]
    assert outs["c-counters"] == outs["python-counters"]


def test_netreduce_aggregation_exact_through_the_c_loop(
    running: Callable[..., Running], tmp_path: Path,
) -> None:
    """A multi-packet NetReduce message from three workers is summed exactly, every
    result on every connection, with the aggregation counters as on Python."""
    from protocol import netreduce as nr
    from tests.netreduce_sizes import netreduce_with
    from tests.test_netreduce import E, counter, exchange_a_message_of_2_5_packets

    pl = Pipeline.from_file(str(netreduce_with(E, tmp_path)), engine="c")
    assert pl.engine == "c"
    run = running(pl, nports=8)
    exchange_a_message_of_2_5_packets(LoopPipeline(pl, run))  # type: ignore[arg-type]
    with run.sw.lock:
        assert counter(pl, nr.AggregationIngressNames.CONTRIBUTIONS, 2) == 9
        assert counter(pl, nr.AggregationIngressNames.COMPLETIONS, 2) == 3


# ------------------------------------------------------------------ control plane


def test_table_writes_during_traffic(running: Callable[..., Running]) -> None:
    """Entries rewritten (under the switch's lock, as P4Runtime does) while a thread
    streams frames: every frame leaves exactly once, intact, on a port that an entry
    named, and after the last write the frames follow it."""
    pl = port_forward(entries={1: 2})
    run = running(pl)
    n = 3000
    sent = [FRAME[:14] + i.to_bytes(4, "big") + FRAME[18:] for i in range(n)]

    def stream() -> None:
        for f in sent:
            run.ports[1].inject(f)

    sender = threading.Thread(target=stream)
    sender.start()
    dst = 2
    while sender.is_alive():
        dst = 3 if dst == 2 else 2
        with run.sw.lock:
            set_port(pl, 1, dst, modify=True)
    sender.join()
    wait_for("all frames", lambda: run.rx(1) >= n)
    got = run.collect()
    assert sorted(f for _p, f in got) == sorted(sent)
    assert {p for p, _f in got} <= {2, 3}
    for p in (2, 3):  # each port's frames in the order they were sent
        seq = [int.from_bytes(f[14:18], "big") for q, f in got if q == p]
        assert seq == sorted(seq)
    assert run.send(1, FRAME) == [(dst, FRAME)]


def test_writes_without_the_lock_reach_c(running: Callable[..., Running]) -> None:
    """A write made without the switch's lock (a test, a tool) still reaches the C tables:
    the switch's Python thread reloads them."""
    pl = port_forward(entries={})
    run = running(pl)
    assert run.send(1, FRAME) == []
    set_port(pl, 1, 3)
    wait_for("the reload", lambda: not pl._switch.dirty)  # type: ignore[attr-defined]
    assert run.send(1, FRAME) == [(3, FRAME)]


def test_direct_counters_and_registers_read_consistently(
    running: Callable[..., Running],
) -> None:
    """Counters the data plane updates read the same through the C loop as on Python."""
    text = (P4 / "counters_registers.stf").read_text()
    pl = Pipeline.from_file(str(P4 / "counters_registers.p4"), engine="c")
    run = running(pl)
    run_stf(LoopPipeline(pl, run), text)
    ref = Pipeline.from_file(str(P4 / "counters_registers.p4"), engine="python")
    run_stf(ref, text)
    with run.sw.lock:
        for name, ctr in ref.counters.items():
            assert list(pl.counters[name].packets) == list(ctr.packets), name
            assert list(pl.counters[name].bytes) == list(ctr.bytes), name
        for name, reg in ref.registers.items():
            assert list(pl.registers[name].values) == list(reg.values), name


# ------------------------------------------------------------------ Python's part


def test_cpu_port_frames_and_packet_out(running: Callable[..., Running]) -> None:
    """Frames the program sends to the CPU port reach Python (PacketIn), and a PacketOut
    injected at the CPU port takes the C loop's path out."""
    pl = port_forward(entries={1: CPU, CPU: 2})
    got: list[bytes] = []
    run = running(pl, cpu_port=CPU)
    run.sw.on_cpu_frame = got.append
    assert run.send(1, FRAME) == []
    wait_for("the PacketIn", lambda: len(got) == 1)
    assert got == [FRAME]
    run.sw.inject(CPU, FRAME[::-1])
    wait_for("the PacketOut", lambda: run.ports[2].counters.tx_packets == 1)
    assert run.collect() == [(2, FRAME[::-1])]
    assert run.sw.stats.cpu_frames == 1 and run.sw.stats.packet_outs == 1


def test_digests_reach_python(running: Callable[..., Running], tmp_path: Path) -> None:
    src = tmp_path / "digest.p4"
    src.write_text(DIGEST_P4)
    pl = Pipeline.from_file(str(src), engine="c")
    assert pl.engine == "c"
    got: list[tuple[str, tuple[int, ...]]] = []
    run = running(pl)
    run.sw.on_digests = got.extend
    assert run.send(1, FRAME) == [(2, FRAME)]
    wait_for("the digest", lambda: len(got) == 1)
    assert got[0][1] == (0x000000000001, 1)


def test_port_and_switch_counters(running: Callable[..., Running], tmp_path: Path) -> None:
    """rx/tx/dropped/malformed and frames to a port that does not exist, as the Python
    loop counts them, in the counters and in the stats file."""
    pl = port_forward(entries={1: 2, 2: 9, 3: 77})
    run = running(pl, nports=4, stats_file=tmp_path / "s.json", stats_interval=3600)
    assert run.send(1, FRAME) == [(2, FRAME)]
    assert run.send(1, FRAME[:10]) == [(2, FRAME[:10])]  # short: malformed, still forwarded
    assert run.send(0, FRAME) == []  # no entry: dropped
    assert run.send(3, FRAME) == []  # port 77 does not exist
    c = run.sw.port_counters()
    assert (c[1].rx_packets, c[1].rx_bytes, c[1].malformed) == (2, len(FRAME) + 10, 1)
    assert (c[2].tx_packets, c[2].tx_bytes) == (2, len(FRAME) + 10)
    assert c[0].dropped == 1 and c[3].dropped == 0
    doc = run.sw.stats_document()
    assert doc["switch_stats"]["no_such_port"] == 1
    assert doc["ports"]["1"]["rx_packets"] == 2
    run.stop()
    assert run.sw.stats.no_such_port == 1
    assert run.sw.port_counters()[2].tx_packets == 2


# ------------------------------------------------------------------ delay lines


def test_delay_line_holds_frames_until_stop(running: Callable[..., Running]) -> None:
    """A frame on a port with a long link delay stays held (counted in the stats) and is
    let go when the switch stops."""
    pl = port_forward()
    run = running(pl, nports=3, port_delays={2: 3600.0})
    run.ports[1].inject(FRAME)
    wait_for("the held frame", lambda: run.sw.delay_line_stats()["held"] == 1)
    stats = run.sw.delay_line_stats()
    assert stats["egress"]["2"]["held"] == 1 and stats["egress"]["2"]["max_held"] == 1
    assert run.ports[2].receive(0.0) is None
    run.stop()
    assert run.ports[2].receive(1.0) == FRAME
    assert run.sw.released_at_stop == 1
    assert run.sw.port_counters()[2].tx_packets == 1


@pytest.mark.parametrize("where", ["egress", "ingress"])
def test_delay_line_releases_no_earlier_than_delay_times_tdf(
    where: str, running: Callable[..., Running]
) -> None:
    """Frames leave no earlier than arrival + delay * TDF (real), in order. (A lower
    bound only: a slow machine makes it later, never earlier.)"""
    delay, tdf = 0.005, 4.0
    pl = Pipeline.from_file(str(P4 / "port_forward.p4"), engine="c",
                            clock_ns=VirtualClock(tdf).now_ns)
    set_port(pl, 1, 2)
    kw = {"port_delays": {2: delay}} if where == "egress" else {"port_ingress_delays": {1: delay}}
    run = running(pl, nports=3, clock=VirtualClock(tdf), **kw)
    frames = [FRAME + bytes([i]) for i in range(20)]
    t0 = time.monotonic()
    for f in frames:
        run.ports[1].inject(f)
    got = [run.ports[2].receive(WAIT_S) for _ in frames]
    elapsed = time.monotonic() - t0
    assert got == frames
    assert elapsed >= delay * tdf
    assert run.sw.delay_line_stats()["held"] == 0


# ------------------------------------------------------------------ choosing the loop


def test_io_python_and_fallbacks(running: Callable[..., Running], tmp_path: Path,
                                 caplog: pytest.LogCaptureFixture) -> None:
    """--io python forces the Python loop; pcap capture falls back with one log line;
    a pipeline on the Python engine runs the Python loop."""
    run = running(port_forward(), nports=3, io="python")
    assert run.send(1, FRAME, expect=1) == [(2, FRAME)] and run.sw.io_loop == "python"
    run.stop()
    with caplog.at_level(logging.WARNING, logger="softswitch.switch"):
        run = running(port_forward(), nports=3, pcap_dir=tmp_path, expect_c=False)
        assert run.send(1, FRAME, expect=1) == [(2, FRAME)] and run.sw.io_loop == "python"
        run.stop()
    said = [r.getMessage() for r in caplog.records if "C packet loop" in r.getMessage()]
    assert said == ["C packet loop: pcap capture (--pcap) needs the Python loop; using the "
                    "Python loop"]
    run = running(port_forward(engine="python"), nports=3)
    assert run.send(1, FRAME, expect=1) == [(2, FRAME)] and run.sw.io_loop == "python"
    with pytest.raises(ValueError, match="io 'x'"):
        SwitchDataPlane([], io="x")


def test_cli_io_option() -> None:
    assert parse_args(["--no-p4"]).io == "c"
    assert parse_args(["--no-p4", "--io", "python"]).io == "python"
    from softswitch.switch import _UsageError

    with pytest.raises(_UsageError, match="--io fast: choose from c, python"):
        parse_args(["--no-p4", "--io", "fast"])


def test_clock_factor() -> None:
    assert c_clock_tdf(time.monotonic_ns) == 1.0
    assert c_clock_tdf(VirtualClock(2.5).now_ns) == 2.5
    assert c_clock_tdf(VirtualClock(2.5, real_ns=lambda: 0).now_ns) is None
    assert c_clock_tdf(lambda: 0) is None


def test_pipeline_swap_restarts_the_loop(running: Callable[..., Running]) -> None:
    """A new pipeline (SetForwardingPipelineConfig) stops the old C thread before any
    frame runs on it; the new pipeline gets its own thread, or the Python loop."""
    run = running(port_forward(entries={1: 2}), nports=4)
    assert run.send(1, FRAME) == [(2, FRAME)]
    with run.sw.lock:
        run.sw.install_pipeline(port_forward(entries={1: 3}))
    assert run.send(1, FRAME) == [(3, FRAME)]
    wait_for("the new C loop", lambda: run.sw.io_loop == "c")
    with run.sw.lock:
        run.sw.install_pipeline(port_forward(engine="python", entries={1: 2}))
    assert run.send(1, FRAME, expect=1) == [(2, FRAME)]
    assert run.sw.io_loop == "python"
    assert run.sw.port_counters()[1].rx_packets == 3


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _tasks() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def _unnamed(tids: set[str]) -> set[str]:
    """The threads among ``tids`` that still carry the process's name: ours (Python's and
    the C loop's). Other libraries name theirs (gRPC's pools) and start and end them on
    their own; a test that ran earlier in this worker can leave one coming or going."""
    own = Path("/proc/self/comm").read_text()
    kept = set()
    for tid in tids:
        with contextlib.suppress(FileNotFoundError):  # it ended meanwhile
            if Path(f"/proc/self/task/{tid}/comm").read_text() == own:
                kept.add(tid)
    return kept


def test_stop_joins_the_thread_and_leaks_nothing(running: Callable[..., Running]) -> None:
    pl = port_forward()
    fds = _fds()
    before = _tasks()
    run = running(pl, nports=3)
    # the C thread: new, carrying the process's name, and not one of Python's threads
    c_tids = _unnamed(_tasks() - before) - {str(t.native_id) for t in threading.enumerate()}
    assert run.thread.is_alive() and c_tids  # the Python loop's thread and the C thread
    assert run.send(1, FRAME) == [(2, FRAME)]
    # the C thread blocks every signal: SIGTERM and SIGUSR1/2 go to Python's main thread
    for tid in c_tids:
        status = Path(f"/proc/self/task/{tid}/status").read_text()
        blocked = int(next(x for x in status.splitlines() if x.startswith("SigBlk:")).split()[1],
                      16)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
            assert blocked & (1 << (sig - 1)), (tid, sig)
    run.close()
    assert not run.thread.is_alive()
    assert c_tids & _tasks() == set()
    assert _fds() <= fds


# ------------------------------------------------------------------ veth (root)


RECEIVER = """
import sys
from softswitch.ports import AfPacketPort
port = AfPacketPort(0, "eth0")
want = int(sys.argv[1])
print("ready", flush=True)
got = []
import select, time
deadline = time.monotonic() + 20
while len(got) < want and time.monotonic() < deadline:
    select.select([port.fileno()], [], [], 0.5)
    got += [f for f in port.recv_batch(64) if f[12:14] in (b"\\x81\\x00", b"\\x08\\x00")]
for f in got:
    print(f.hex())
"""

SENDER = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for h in sys.argv[1:]:
    s.send(bytes.fromhex(h))
"""


BURST_SENDER = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
head = bytes.fromhex(sys.argv[1])
for i in range(int(sys.argv[2])):
    s.send(head + i.to_bytes(4, "big") * (4 + i % 300))
"""

BURST_RECEIVER = """
import select, sys, time
from softswitch.ports import AfPacketPort
port = AfPacketPort(0, "eth0")
print("ready", flush=True)
got = []
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if not select.select([port.fileno()], [], [], 2.0)[0]:
        break
    got += [f for f in port.recv_batch(256) if f[12:14] == b"\\x08\\x00"]
for f in got:
    print(f.hex())
"""


@pytest.mark.skipif(not can_use_netns(), reason="needs root and ip(8)")
@pytest.mark.parametrize("tx_rings", [True, False])
def test_transmit_ring_burst_arrives_intact(tx_rings: bool) -> None:
    """More frames than the transmit ring holds, of many sizes: every frame that arrives
    is one that was sent, byte for byte (no ring slot reused under a frame in flight),
    and every forwarded frame is counted as sent or dropped; the same with sendmmsg."""
    topo = NetnsTopology(2, tag=f"cb{uuid.uuid4().hex[:6]}")
    ports: list[Port] = []
    sw: SwitchDataPlane | None = None
    thread: threading.Thread | None = None
    count = 3000
    try:
        topo.start()
        ports = [AfPacketPort(i, topo.links[i - 1].switch_end) for i in (1, 2)]
        sw = SwitchDataPlane(ports, port_forward(), io="c", tx_rings=tx_rings)
        thread = threading.Thread(target=sw.run)
        thread.start()
        wait_for("the C loop", lambda: sw.io_loop == "c")
        assert sw._cloop is not None and sw._cloop.tx_rings == (2 if tx_rings else 0)
        assert sw._cloop.rings == 2
        recv = topo.popen_in(topo.namespaces[1], BURST_RECEIVER, [])
        assert recv.stdout is not None and recv.stdout.readline().strip() == "ready"
        head = FRAME[:14]
        sent = topo.run_in(topo.namespaces[0], BURST_SENDER, args=[head.hex(), str(count)])
        assert sent.returncode == 0, sent.stderr
        out, err = recv.communicate(timeout=90)
        got = [bytes.fromhex(x) for x in out.split()]
        assert got, err
        for frame in got:
            i = int.from_bytes(frame[14:18], "big")
            assert frame == head + i.to_bytes(4, "big") * (4 + i % 300)
        sw.stop()
        thread.join(WAIT_S)
        c1, c2 = sw.port_counters()[1], sw.port_counters()[2]
        assert c2.tx_packets >= len(got)
        assert c2.tx_packets + c2.tx_drops == c1.rx_packets - c1.dropped
    finally:
        if sw is not None and thread is not None and thread.is_alive():
            sw.stop()
            thread.join(WAIT_S)
        for p in ports:
            p.close()
        topo.stop()


@pytest.mark.skipif(not can_use_netns(), reason="needs root and ip(8)")
@pytest.mark.parametrize("io", ["c", "python"])
def test_veth_forwarding_and_vlan_tags(io: str) -> None:
    """Through AF_PACKET sockets on veths: plain and VLAN-tagged frames (the tag that
    receive offload strips comes back) are forwarded identically by both loops."""
    topo = NetnsTopology(2, tag=f"cl{uuid.uuid4().hex[:6]}")
    ports: list[Port] = []
    sw: SwitchDataPlane | None = None
    thread: threading.Thread | None = None
    try:
        topo.start()
        ports = [AfPacketPort(i, topo.links[i - 1].switch_end) for i in (1, 2)]
        sw = SwitchDataPlane(ports, port_forward(), io=io)
        thread = threading.Thread(target=sw.run)
        thread.start()
        if io == "c":
            wait_for("the C loop", lambda: sw.io_loop == "c")
            assert sw._cloop is not None and sw._cloop.rings == 2  # PACKET_RX_RING on both
            assert sw._cloop.tx_rings == 2  # and PACKET_TX_RING
        frames = [FRAME, FRAME[:12] + bytes.fromhex("8100002a") + FRAME[12:]]
        recv = topo.popen_in(topo.namespaces[1], RECEIVER, [str(len(frames))])
        assert recv.stdout is not None
        assert recv.stdout.readline().strip() == "ready"
        sent = topo.run_in(topo.namespaces[0], SENDER, args=[f.hex() for f in frames])
        assert sent.returncode == 0, sent.stderr
        out, err = recv.communicate(timeout=60)
        assert [bytes.fromhex(x) for x in out.split()] == frames, err
        sw.stop()
        thread.join(WAIT_S)
        assert not thread.is_alive()
        assert sw.port_counters()[2].tx_packets >= len(frames)
        if io == "c":  # the rings were given back: the Python loop receives again
            assert ports[0].recv_batch(8) == []
            subprocess.run(["ip", "netns", "exec", topo.namespaces[0], sys.executable, "-c",
                            SENDER, FRAME.hex()], check=True, timeout=60, cwd=REPO)
            wait_for("a frame on the plain socket", lambda: ports[0].recv_batch(8) == [FRAME])
            # and sends plainly again (no transmit ring, no virtio_net header left)
            recv = topo.popen_in(topo.namespaces[1], RECEIVER, ["1"])
            assert recv.stdout is not None and recv.stdout.readline().strip() == "ready"
            assert ports[1].send(FRAME)
            assert [bytes.fromhex(x) for x in recv.communicate(timeout=60)[0].split()] == [FRAME]
    finally:
        if sw is not None and thread is not None and thread.is_alive():
            sw.stop()
            thread.join(WAIT_S)
        for p in ports:
            p.close()
        topo.stop()


def test_switch_process_runs_the_c_loop(tmp_path: Path) -> None:
    """``softswitch run --engine c`` logs that the C loop runs (and stops cleanly)."""
    log_file = tmp_path / "sw.log"
    proc = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else "python3",
         "-m", "softswitch", "run", str(P4 / "port_forward.p4"), "--engine", "c",
         "--grpc-server-addr", "127.0.0.1:0", "--log-file", str(log_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("softswitch ready"), proc.stderr.read() if proc.stderr else ""
        wait_for("the loop's log line", lambda: "packet loop: C thread" in log_file.read_text())
    finally:
        proc.terminate()
        assert proc.wait(WAIT_S) == 0
