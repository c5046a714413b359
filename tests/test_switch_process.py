"""The switch process: flags, readiness, clean stop, the packet loop's robustness, pcaps."""

from __future__ import annotations

import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from p4.v1 import p4runtime_pb2

from softswitch.pcap import read_pcap
from softswitch.ports import MemoryPort
from softswitch.switch import SwitchDataPlane, parse_args
from tests.p4runtime_fakes import (
    CPU_PORT,
    FakePipeline,
    InProcessSwitch,
    table_entry_update,
)

REPO = Path(__file__).resolve().parent.parent
READY = re.compile(r"softswitch ready: .*grpc=(\S+):(\d+)")
FRAME = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + bytes(range(50))


class SwitchProcess:
    """``python -m softswitch run ...`` as a subprocess, with a readiness wait."""

    def __init__(self, args: list[str], cwd: Path = REPO) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "softswitch", "run", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.address: str | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_ready(self, timeout: float = 60.0) -> str:
        """The gRPC address from the readiness line; fails with stderr if the process died."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                pytest.fail("switch did not become ready in time")
            if line is None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"switch exited with {self.proc.wait()}: {err}")
            m = READY.search(line)
            if m:
                self.address = f"{m.group(1)}:{m.group(2)}"
                return self.address

    def terminate(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9


#: Starts a switch process with these arguments (the fixture stops them all).
Spawn = Callable[..., SwitchProcess]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    procs: list[SwitchProcess] = []

    def start(*args: str) -> SwitchProcess:
        p = SwitchProcess(list(args))
        procs.append(p)
        return p

    try:
        yield start
    finally:
        for p in procs:
            p.terminate()
            for stream in (p.proc.stdout, p.proc.stderr):
                if stream is not None:
                    stream.close()


def wait_for(predicate: Callable[[], object], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "softswitch", "run", *args],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--no-p4", "--bogus"], "--bogus"),
        (["--no-p4", "-i", "veth0"], "PORT@IFACE"),
        (["--no-p4", "-i", "x@veth0"], "'x'"),
        (["--no-p4", "-i", "600@veth0"], "600"),
        (["--no-p4", "--device-id", "abc"], "--device-id"),
        (["--no-p4", "--grpc-server-addr", "localhost"], "--grpc-server-addr"),
        (["--no-p4", "-L", "loud"], "--log-level"),
        (["--no-p4", "-i", "1@a", "-i", "1@b"], "port 1 given twice"),
        (["--no-p4", "--cpu-port", "1", "-i", "1@a"], "--cpu-port"),
        ([], "--no-p4"),
        (["/no/such/prog.p4"], "no such file"),
    ],
)
def test_bad_flag_is_one_line_exit_2(args: list[str], needle: str) -> None:
    """A bad flag or value gives exit code 2 and one error line naming it."""
    res = run_cli(*args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr


def test_missing_interface_exit_2() -> None:
    """An -i interface that does not exist is a one-line error naming it, exit 2."""
    res = run_cli("--no-p4", "-i", "1@nosuchif0", "--grpc-server-addr", "127.0.0.1:0")
    assert res.returncode == 2
    assert "nosuchif0" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_parse_args_defaults() -> None:
    """Defaults match simple_switch_grpc: device 0, 0.0.0.0:9559, no CPU port."""
    opts = parse_args(["--no-p4"])
    assert (opts.device_id, opts.grpc_addr, opts.cpu_port) == (0, "0.0.0.0:9559", None)


def test_thrift_port_accepted_with_note(spawn: Spawn) -> None:
    """--thrift-port is accepted and ignored with a note; the switch still starts."""
    p = spawn("--no-p4", "--thrift-port", "9090", "--grpc-server-addr", "127.0.0.1:0")
    p.wait_ready()
    assert p.terminate() == 0
    assert p.proc.stderr is not None and "thrift" in p.proc.stderr.read().lower()


# ------------------------------------------------------------------ process life


def test_ready_then_clean_sigterm(spawn: Spawn, tmp_path: Path) -> None:
    """The switch answers Capabilities after its readiness line and exits 0 on SIGTERM."""
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    log_file = tmp_path / "sw.log"
    p = spawn("--no-p4", "--grpc-server-addr", "127.0.0.1:0", "--log-file", str(log_file))
    addr = p.wait_ready()
    with grpc.insecure_channel(addr) as ch:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        resp = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=10)
    assert resp.p4runtime_api_version == "1.4.1"
    assert p.terminate() == 0
    assert "softswitch ready" in log_file.read_text()


def test_sigint_also_clean(spawn: Spawn) -> None:
    """SIGINT stops the switch with exit code 0 as well."""
    p = spawn("--no-p4", "--grpc-server-addr", "127.0.0.1:0")
    p.wait_ready()
    p.proc.send_signal(signal.SIGINT)
    assert p.proc.wait(20) == 0


def test_grpc_port_in_use_fails(spawn: Spawn) -> None:
    """A gRPC address that is already taken is a one-line error, exit 1."""
    p = spawn("--no-p4", "--grpc-server-addr", "127.0.0.1:0")
    addr = p.wait_ready()
    res = run_cli("--no-p4", "--grpc-server-addr", addr)
    assert res.returncode == 1 and "--grpc-server-addr" in res.stderr


# ------------------------------------------------------------ the packet loop


@pytest.fixture
def memsw() -> Iterator[InProcessSwitch]:
    s = InProcessSwitch(preload=True)
    try:
        yield s
    finally:
        s.stop()


def test_fuzz_frames_do_not_kill_loop(memsw: InProcessSwitch) -> None:
    """Thousands of random and truncated frames pass; forwarding works afterwards."""
    c = memsw.client()
    c.write(table_entry_update(p4runtime_pb2.Update.INSERT, 1, 2))
    rng = random.Random(1234)
    n = 3000
    for i in range(n):
        size = rng.choice([0, 1, 5, 13, 14, 15, 33, 60, rng.randrange(0, 1600)])
        memsw.port(1 + i % 3).inject(rng.randbytes(size))
    # a marker frame sent after the burst arrives after every fuzz frame was handled
    marker = FRAME + b"marker"
    memsw.port(1).inject(marker)
    deadline_frames = []
    while True:
        f = memsw.port(2).receive(10.0)
        assert f is not None, "switch stopped forwarding"
        deadline_frames.append(f)
        if f == marker:
            break
    counters = memsw.switch.port_counters()
    # frames of ports 2 and 3 may still be queued behind the marker of port 1
    assert wait_for(lambda: sum(c.rx_packets for c in counters.values()) == n + 1, 20.0)
    assert sum(c.rx_errors for c in counters.values()) > 0
    assert counters[1].malformed > 0


def test_port_counters(memsw: InProcessSwitch) -> None:
    """rx/tx packet and byte counters follow forwarded traffic; unknown ports are counted."""
    c = memsw.client()
    c.write(table_entry_update(p4runtime_pb2.Update.INSERT, 1, 2),
            table_entry_update(p4runtime_pb2.Update.INSERT, 2, 9))
    for _ in range(4):
        memsw.port(1).inject(FRAME)
        assert memsw.port(2).receive(5.0) == FRAME
    memsw.port(2).inject(FRAME)
    memsw.port(1).inject(FRAME)
    assert memsw.port(2).receive(5.0) == FRAME
    pc = memsw.switch.port_counters()
    assert (pc[1].rx_packets, pc[1].rx_bytes) == (5, 5 * len(FRAME))
    assert (pc[2].tx_packets, pc[2].tx_bytes) == (5, 5 * len(FRAME))
    assert wait_for(lambda: memsw.switch.stats.no_such_port == 1)


def test_pcap_files_per_port(tmp_path: Path) -> None:
    """With a pcap dir, received and transmitted frames land in <port>_in/_out.pcap."""
    ports = [MemoryPort(1), MemoryPort(2)]
    pipeline = FakePipeline()
    pipeline.cpu_port = CPU_PORT
    from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry

    pipeline.tables["MyIngress.fwd"].insert(
        TableEntry((FieldMatch(1),), ActionCall("MyIngress.set_port", (2,)))
    )
    sw = SwitchDataPlane(ports, pipeline, cpu_port=CPU_PORT, pcap_dir=tmp_path)
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    try:
        ports[0].inject(FRAME)
        assert ports[1].receive(5.0) == FRAME
    finally:
        sw.stop()
        t.join(5)
        sw.close()
    assert [f for _, f in read_pcap(tmp_path / "port1_in.pcap")] == [FRAME]
    assert [f for _, f in read_pcap(tmp_path / "port2_out.pcap")] == [FRAME]
    assert read_pcap(tmp_path / "port1_out.pcap") == []


def test_no_pipeline_drops(tmp_path: Path) -> None:
    """Frames arriving before any pipeline is set are counted and dropped."""
    port = MemoryPort(1)
    sw = SwitchDataPlane([port])
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    try:
        port.inject(FRAME)
        assert wait_for(lambda: sw.stats.no_pipeline == 1)
    finally:
        sw.stop()
        t.join(5)
        sw.close()


def test_fuzz_real_pipeline_keeps_forwarding(tmp_path: Path) -> None:
    """Thousands of random/truncated frames through the real engine; forwarding survives."""
    from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
    from softswitch.pipeline import Pipeline

    pipeline = Pipeline.from_file(str(REPO / "tests" / "p4" / "port_forward.p4"))
    pipeline.tables["MyIngress.fwd"].insert(
        TableEntry((FieldMatch(1),), ActionCall("MyIngress.set_port", (2,)))
    )
    ports = [MemoryPort(1), MemoryPort(2)]
    sw = SwitchDataPlane(ports, pipeline)
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    rng = random.Random(99)
    n = 2000
    try:
        for _ in range(n):
            ports[0].inject(
                rng.randbytes(rng.choice([0, 1, 7, 13, 14, 15, rng.randrange(0, 1600)]))
            )
        marker = FRAME + b"marker"
        ports[0].inject(marker)
        while True:
            f = ports[1].receive(20.0)
            assert f is not None, "switch stopped forwarding"
            if f == marker:
                break
    finally:
        sw.stop()
        t.join(5)
        sw.close()
    pc = sw.port_counters()
    assert pc[1].rx_packets == n + 1
    assert pc[1].malformed > 0


def test_debug_trace_line_per_packet(caplog: pytest.LogCaptureFixture) -> None:
    """At DEBUG the loop logs one trace line per packet with ports and sizes."""
    import logging

    pipeline = FakePipeline()
    from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry

    pipeline.tables["MyIngress.fwd"].insert(
        TableEntry((FieldMatch(1),), ActionCall("MyIngress.set_port", (2,)))
    )
    ports = [MemoryPort(1), MemoryPort(2)]
    sw = SwitchDataPlane(ports, pipeline)
    with caplog.at_level(logging.DEBUG, logger="softswitch.switch"):
        t = threading.Thread(target=sw.run, daemon=True)
        t.start()
        try:
            ports[0].inject(FRAME)
            assert ports[1].receive(5.0) == FRAME
        finally:
            sw.stop()
            t.join(5)
            sw.close()
    assert any(f"port 1 in {len(FRAME)} bytes" in r.getMessage() and "(2, " in r.getMessage()
               for r in caplog.records)


# ------------------------------------------------------------ stats file


def read_doc(path: Path) -> dict[str, Any] | None:
    from softswitch.stats import StatsError, read_stats

    try:
        return read_stats(path)
    except StatsError:
        return None


def test_parse_args_stats_file_defaults_beside_log_file(tmp_path: Path) -> None:
    """--stats-file defaults to <log-file>.stats.json; an explicit path wins."""
    assert parse_args(["--no-p4"]).stats_file is None
    opts = parse_args(["--no-p4", "--log-file", str(tmp_path / "s1.log")])
    assert opts.stats_file == str(tmp_path / "s1.stats.json")
    opts = parse_args(["--no-p4", "--log-file", "a.log", "--stats-file", "x.json"])
    assert opts.stats_file == "x.json"


def test_bad_stats_interval_exit_2() -> None:
    """A non-positive --stats-interval is a one-line error, exit 2."""
    res = run_cli("--no-p4", "--stats-interval", "0")
    assert res.returncode == 2 and "--stats-interval" in res.stderr


def test_stats_file_counts_per_port(tmp_path: Path) -> None:
    """The stats file written on request holds each port's rx/tx/drop counters."""
    pipeline = FakePipeline()
    from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry

    pipeline.tables["MyIngress.fwd"].insert(
        TableEntry((FieldMatch(1),), ActionCall("MyIngress.set_port", (2,)))
    )
    ports = [MemoryPort(1, "veth1"), MemoryPort(2, "veth2")]
    stats = tmp_path / "sw.stats.json"
    sw = SwitchDataPlane(ports, pipeline, stats_file=stats, stats_interval=3600, device_id=7)
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    try:
        for _ in range(3):
            ports[0].inject(FRAME)
            assert ports[1].receive(5.0) == FRAME
        ports[1].inject(FRAME)  # no entry for port 2: dropped
        ports[0].inject(b"\x01\x02")  # malformed (and dropped)
        assert wait_for(lambda: sw.port_counters()[1].rx_packets == 4)
        assert wait_for(lambda: sw.port_counters()[2].rx_packets == 1)
        sw.request_stats("test")
        assert wait_for(lambda: (read_doc(stats) or {}).get("reason") == "test")
    finally:
        sw.stop()
        t.join(5)
        sw.close()
    doc = read_doc(stats)
    assert doc is not None and doc["reason"] == "stop" and doc["device_id"] == 7
    p1, p2 = doc["ports"]["1"], doc["ports"]["2"]
    assert p1["name"] == "veth1"
    assert (p1["rx_packets"], p1["rx_bytes"]) == (4, 3 * len(FRAME) + 2)
    assert (p1["malformed"], p1["dropped"]) == (1, 1)
    assert (p2["tx_packets"], p2["tx_bytes"]) == (3, 3 * len(FRAME))
    assert (p2["rx_packets"], p2["dropped"]) == (1, 1)
    assert doc["totals"]["rx_packets"] == 5


def test_stats_file_refreshed_periodically(tmp_path: Path) -> None:
    """With a short interval the loop rewrites the file by itself (reason 'periodic')."""
    stats = tmp_path / "s.json"
    sw = SwitchDataPlane([MemoryPort(1)], FakePipeline(), stats_file=stats, stats_interval=0.05)
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    try:
        assert wait_for(lambda: (read_doc(stats) or {}).get("reason") == "periodic", 10.0)
    finally:
        sw.stop()
        t.join(5)
        sw.close()


def test_stats_file_of_process_on_sigusr1(spawn: Spawn, tmp_path: Path) -> None:
    """The running process writes <log>.stats.json, rewrites it on SIGUSR1 and at exit."""
    log_file = tmp_path / "sw.log"
    stats = tmp_path / "sw.stats.json"
    p = spawn("--no-p4", "--grpc-server-addr", "127.0.0.1:0", "--log-file", str(log_file),
              "--stats-interval", "3600")
    p.wait_ready()
    assert wait_for(lambda: read_doc(stats) is not None, 20.0)
    doc = read_doc(stats)
    assert doc is not None and doc["pid"] == p.proc.pid
    p.proc.send_signal(signal.SIGUSR1)
    assert wait_for(lambda: (read_doc(stats) or {}).get("reason") == "SIGUSR1", 20.0)
    assert p.terminate() == 0
    doc = read_doc(stats)
    assert doc is not None and doc["reason"] == "stop"


def test_stats_command_prints_table(tmp_path: Path) -> None:
    """`python -m softswitch.stats FILE` prints one row per port and a totals row."""
    from softswitch.stats import build_document, write_atomic

    counters = {"rx_packets": 5, "rx_bytes": 500, "tx_packets": 4, "tx_bytes": 400,
                "tx_drops": 0, "rx_errors": 0, "malformed": 1, "dropped": 1}
    doc = build_document({1: ("veth1", counters), 2: ("veth2", counters)}, {"no_such_port": 0},
                         name="s1", device_id=3, now=110.0, started=100.0, reason="periodic")
    path = tmp_path / "s1.stats.json"
    write_atomic(path, doc)
    res = subprocess.run([sys.executable, "-m", "softswitch.stats", str(path)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("switch s1 device_id=3") and "uptime=10.0s" in lines[0]
    assert lines[1].split() == ["port", "iface", "rx_packets", "rx_bytes", "tx_packets",
                                "tx_bytes", "dropped", "tx_drops", "malformed", "rx_errors"]
    assert lines[2].split() == ["1", "veth1", "5", "500", "4", "400", "1", "0", "1", "0"]
    assert lines[4].split() == ["all", "10", "1000", "8", "800", "2", "0", "2", "0"]


def test_stats_command_bad_file_one_line_error(tmp_path: Path) -> None:
    """A missing or foreign file is a one-line error, exit 1."""
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    for path in (bad, tmp_path / "missing.json"):
        res = subprocess.run([sys.executable, "-m", "softswitch.stats", str(path)],
                             capture_output=True, text=True, timeout=60, cwd=REPO)
        assert res.returncode == 1
        assert len(res.stderr.strip().splitlines()) == 1 and str(path) in res.stderr
