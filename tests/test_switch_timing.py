"""Dilated time and the link delay line of the built-in switch (``--tdf``, ``--port-delay``,
``--port-ingress-delay``).

Every time here comes from an injected fake clock: a test advances it by hand, so no assert
depends on how fast the machine runs. At TDF 10 everything the emulated world sees
(timestamps, meter rates, pcap record times) must move 10 times slower than the fake real
clock, and a delayed frame must wait ``delay * 10`` of it.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from softswitch.engine.externs import GREEN, RED, MeterConfig
from softswitch.p4runtime.server import default_loader
from softswitch.pcap import read_pcap
from softswitch.pipeline import Pipeline
from softswitch.ports import MemoryPort
from softswitch.stats import build_document, format_table
from softswitch.switch import (
    SwitchDataPlane,
    SwitchOptions,
    _UsageError,
    load_program,
    parse_args,
    pipeline_options,
)
from softswitch.timing import DelayLine, SwitchTiming, parse_port_delay, pipeline_clock_ns
from vtime import VirtualClock

REPO = Path(__file__).resolve().parent.parent
MS = 1_000_000  # ns
FRAME = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + bytes(range(50))

# Writes every v1model timestamp and a packet meter's colour into the packet.
TIMESTAMPS_P4 = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header t_t { bit<48> igts; bit<48> egts; bit<32> enq_ts; bit<32> deq_td; bit<8> colour; }
struct headers { eth_t eth; t_t t; }
struct metadata { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.t); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    meter(1, MeterType.packets) m;
    apply {
        sm.egress_spec = 2;
        hdr.t.igts = sm.ingress_global_timestamp;
        bit<2> colour;
        m.execute_meter(0, colour);
        hdr.t.colour = (bit<8>) colour;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.t.egts = sm.egress_global_timestamp;
        hdr.t.enq_ts = sm.enq_timestamp;
        hdr.t.deq_td = sm.deq_timedelta;
    }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.t); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
T_FIELDS = (("igts", 6), ("egts", 6), ("enq_ts", 4), ("deq_td", 4), ("colour", 1))


def t_frame() -> bytes:
    return bytes(6) + bytes(6) + b"\x88\xb5" + bytes(sum(w for _, w in T_FIELDS))


def t_fields(data: bytes) -> dict[str, int]:
    out, pos = {}, 14
    for name, width in T_FIELDS:
        out[name] = int.from_bytes(data[pos : pos + width], "big")
        pos += width
    return out


class FakeClock:
    """A real-time source (integer ns) that only moves when the test says so."""

    def __init__(self, start_ns: int = 7_000 * MS) -> None:
        self.ns = start_ns

    def __call__(self) -> int:
        return self.ns

    def advance(self, ns: int) -> None:
        self.ns += ns


@pytest.fixture
def fake() -> FakeClock:
    return FakeClock()


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "timestamps.p4"
    path.write_text(TIMESTAMPS_P4)
    return path


def switch_pipeline(program: Path, clock: VirtualClock, *flags: str) -> Pipeline:
    """The pipeline as ``softswitch run`` builds it from its flags and clock."""
    opts = parse_args([str(program), "--tdf", str(clock.tdf), *flags])
    pipeline: Pipeline
    pipeline, _p4info, _config = load_program(str(program), **pipeline_options(opts, clock))
    return pipeline


# ================================================================ dilated pipeline clock


def test_timestamps_are_emulated_time_at_tdf_10(program: Path, fake: FakeClock) -> None:
    """At TDF 10 every v1model timestamp advances a tenth of the real time that passed
    (one left in real time would read 10x larger)."""
    p = switch_pipeline(program, VirtualClock(10, real_ns=fake), "--egress-order", "fifo")
    fake.advance(1000 * MS)  # 1 s real = 100 ms emulated
    p.receive(1, t_frame())
    fake.advance(3000 * MS)  # 3 s real queued = 300 ms emulated
    (port, data), = p.transmit()
    f = t_fields(data)
    assert port == 2
    assert (f["igts"], f["enq_ts"]) == (100_000, 100_000)  # µs since the pipeline started
    assert f["deq_td"] == 300_000
    assert f["egts"] == 400_000


def test_sync_mode_timestamps_at_tdf_10(program: Path, fake: FakeClock) -> None:
    """The synchronous pipeline reads the same dilated clock."""
    p = switch_pipeline(program, VirtualClock(10, real_ns=fake))
    fake.advance(2500 * MS)
    (_, data), = p.process(1, t_frame())
    f = t_fields(data)
    assert f["igts"] == f["egts"] == f["enq_ts"] == 250_000


def test_tdf_1_pipeline_reads_the_real_clock_itself() -> None:
    """Undilated, the pipeline's time source is the real clock function, unchanged."""
    assert pipeline_clock_ns(VirtualClock(1)) is time.monotonic_ns
    fake = FakeClock()
    assert pipeline_clock_ns(VirtualClock(1, real_ns=fake)) is fake
    assert pipeline_clock_ns(VirtualClock(4, real_ns=fake))() == fake.ns // 4


def colours(p: Pipeline, gap_real_ns: int, fake: FakeClock, n: int = 3) -> list[int]:
    out = []
    for _ in range(n):
        (_, data), = p.process(1, t_frame())
        out.append(t_fields(data)["colour"])
        fake.advance(gap_real_ns)
    return out


@pytest.mark.parametrize(("tdf", "gap_ms", "expected"), [
    (1, 200, [GREEN, GREEN, GREEN]),   # 200 ms at 10 packets/s: 2 tokens per gap
    (10, 200, [GREEN, RED, RED]),      # 20 ms emulated: 0.2 tokens per gap
    (10, 1000, [GREEN, GREEN, GREEN]),  # 100 ms emulated: 1 token per gap
])
def test_meter_rates_are_per_emulated_second(
    program: Path, fake: FakeClock, tdf: int, gap_ms: int, expected: list[int]
) -> None:
    """A meter at 10 packets/s admits 10 packets per emulated second, whatever the TDF."""
    p = switch_pipeline(program, VirtualClock(tdf, real_ns=fake))
    p.meters["I.m"].set_config(0, MeterConfig(cir=10, cburst=1, pir=10, pburst=1))
    assert colours(p, gap_ms * MS, fake) == expected


def test_pipelines_set_over_p4runtime_keep_the_dilated_clock(fake: FakeClock) -> None:
    """SetForwardingPipelineConfig's loader builds its pipelines on the switch's clock."""
    opts = parse_args(["--no-p4", "--tdf", "10"])
    clock = VirtualClock(10, real_ns=fake)
    loader = functools.partial(default_loader, **pipeline_options(opts, clock))
    pipeline, _ = loader(TIMESTAMPS_P4.encode())
    fake.advance(5000 * MS)
    (_, data), = pipeline.process(1, t_frame())
    assert t_fields(data)["igts"] == 500_000


# ================================================================ the delay line itself


def test_delay_line_holds_for_delay_times_tdf(fake: FakeClock) -> None:
    """1 ms at TDF 10 is 10 ms of real time, to the nanosecond."""
    line: DelayLine[str] = DelayLine({1: 1e-3}, VirtualClock(10, real_ns=fake))
    assert line.hold(1, "a")
    assert line.next_deadline() == fake.ns + 10 * MS
    fake.advance(10 * MS - 1)
    assert line.pop_due() == []
    fake.advance(1)
    assert line.pop_due() == [(1, "a")]
    assert (line.held, line.max_held) == (0, 1)


def test_delay_line_keeps_order_per_port_and_ports_apart(fake: FakeClock) -> None:
    """A port's frames leave in order; a port with a short delay never waits behind one
    with a long delay."""
    line: DelayLine[str] = DelayLine({1: 2e-3, 2: 0.5e-3}, VirtualClock(1, real_ns=fake))
    line.hold(1, "a1")
    fake.advance(MS // 10)
    line.hold(1, "a2")
    line.hold(2, "b1")
    fake.advance(MS // 10)
    line.hold(2, "b2")
    fake.advance(MS)  # 1.2 ms: both of port 2 are due, neither of port 1
    assert line.pop_due() == [(2, "b1"), (2, "b2")]
    assert line.port_held(1) == 2
    fake.advance(MS)
    assert line.pop_due() == [(1, "a1"), (1, "a2")]


def test_delay_line_capacity_and_drain(fake: FakeClock) -> None:
    """A full port line drops (counted); drain hands back everything in deadline order."""
    line: DelayLine[int] = DelayLine({1: 1.0, 2: 0.5}, VirtualClock(1, real_ns=fake), capacity=2)
    assert line.hold(1, 1) and line.hold(1, 2) and not line.hold(1, 3)
    line.hold(2, 4)
    assert line.drain() == [(2, 4), (1, 1), (1, 2)]
    snap = line.snapshot()
    assert snap["1"] == {"delay_s": 1.0, "held": 0, "max_held": 2, "overflow": 1}
    assert line.held == 0 and line.next_deadline() is None


# ================================================================ the switch's delay lines


class PortMap:
    """A pipeline stand-in: each ingress port forwards to one egress port."""

    def __init__(self, routes: dict[int, int]) -> None:
        self.routes = routes
        self.cpu_port: int | None = None

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return [(self.routes[port], frame)] if port in self.routes else []

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        return []


@pytest.fixture
def ports() -> Iterator[list[MemoryPort]]:
    made = [MemoryPort(n) for n in (1, 2, 3, 4)]
    yield made
    for p in made:
        p.close()


def delayed_switch(ports: list[MemoryPort], fake: FakeClock, tdf: float = 10,
                   **kw: object) -> SwitchDataPlane:
    return SwitchDataPlane(ports, PortMap({1: 2, 2: 1, 3: 4, 4: 3}),
                           clock=VirtualClock(tdf, real_ns=fake), **kw)  # type: ignore[arg-type]


def test_switch_holds_egress_frames_for_delay_times_tdf(ports: list[MemoryPort],
                                                        fake: FakeClock) -> None:
    """A frame for a port with 1 ms of delay leaves after 10 ms of (fake) real time at
    TDF 10, and is counted as transmitted only then."""
    sw = delayed_switch(ports, fake, port_delays={2: 1e-3})
    sw.inject(1, FRAME)
    assert ports[1].receive(0.0) is None
    assert sw.delay_line_stats()["egress"]["2"]["held"] == 1
    assert sw.next_release() == fake.ns + 10 * MS
    fake.advance(10 * MS - 1)
    assert sw.release_due() == 0 and ports[1].receive(0.0) is None
    assert ports[1].counters.tx_packets == 0
    fake.advance(1)
    assert sw.release_due() == 1
    assert ports[1].receive(0.0) == FRAME
    assert ports[1].counters.tx_packets == 1
    sw.close()


def test_delayed_port_does_not_block_other_ports(ports: list[MemoryPort], fake: FakeClock) -> None:
    """While port 2 holds a frame, a frame for undelayed port 4 leaves at once and one for
    port 3 (shorter delay) leaves first."""
    sw = delayed_switch(ports, fake, port_delays={2: 5e-3, 3: 1e-3})
    sw.inject(1, FRAME + b"to2")
    sw.inject(4, FRAME + b"to3")
    sw.inject(3, FRAME + b"to4")
    assert ports[3].receive(0.0) == FRAME + b"to4"
    fake.advance(10 * MS)
    assert sw.release_due() == 1
    assert ports[2].receive(0.0) == FRAME + b"to3"
    assert ports[1].receive(0.0) is None
    fake.advance(40 * MS)
    assert sw.release_due() == 1 and ports[1].receive(0.0) == FRAME + b"to2"
    sw.close()


def test_delayed_port_keeps_frame_order(ports: list[MemoryPort], fake: FakeClock) -> None:
    """Frames to one delayed port leave in the order they entered, each after its delay."""
    sw = delayed_switch(ports, fake, port_delays={2: 1e-3})
    for i in range(5):
        sw.inject(1, FRAME + bytes([i]))
        fake.advance(MS)  # 1 ms real apart
    fake.advance(6 * MS)  # 11 ms: held at 0..4 ms for 10 ms, the first two are due
    assert sw.release_due() == 2
    fake.advance(MS)
    assert sw.release_due() == 1
    fake.advance(10 * MS)
    assert sw.release_due() == 2
    got = [ports[1].receive(0.0) for _ in range(5)]
    assert got == [FRAME + bytes([i]) for i in range(5)]
    stats = sw.delay_line_stats()
    assert (stats["held"], stats["max_held"]) == (0, 5)
    sw.close()


def run_loop(sw: SwitchDataPlane) -> threading.Thread:
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    return t


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def test_ingress_delay_in_the_packet_loop(ports: list[MemoryPort], fake: FakeClock) -> None:
    """A frame arriving on a port with an ingress delay reaches the pipeline (and the port
    counters) only after delay * TDF; the packet loop releases it by itself."""
    sw = delayed_switch(ports, fake, port_ingress_delays={1: 2e-3})
    t = run_loop(sw)
    try:
        ports[0].inject(FRAME)
        assert wait_for(lambda: sw.delay_line_stats()["ingress"]["1"]["held"] == 1)
        assert ports[0].counters.rx_packets == 0 and ports[1].receive(0.0) is None
        ports[2].inject(FRAME + b"x")  # another port is not held up
        assert ports[3].receive(5.0) == FRAME + b"x"
        fake.advance(20 * MS)
        assert ports[1].receive(5.0) == FRAME
        assert ports[0].counters.rx_packets == 1
    finally:
        sw.stop()
        t.join(5)
        sw.close()
    assert sw.released_at_stop == 0


def test_stop_lets_held_frames_go(ports: list[MemoryPort], fake: FakeClock) -> None:
    """Stopping the switch sends what the delay lines hold (in order) instead of losing it,
    and does not wait for their deadlines."""
    sw = delayed_switch(ports, fake, port_delays={2: 10.0}, port_ingress_delays={3: 10.0})
    t = run_loop(sw)
    try:
        for i in range(3):
            ports[0].inject(FRAME + bytes([i]))
        ports[2].inject(FRAME + b"in")
        assert wait_for(lambda: sw.delay_line_stats()["held"] == 4)
    finally:
        sw.stop()
        t.join(5)
    assert not t.is_alive()
    assert [ports[1].receive(0.0) for _ in range(3)] == [FRAME + bytes([i]) for i in range(3)]
    assert ports[3].receive(0.0) == FRAME + b"in"
    assert sw.released_at_stop == 4 and sw.delay_line_stats()["held"] == 0
    sw.close()


def test_close_without_loop_releases_held_frames(ports: list[MemoryPort], fake: FakeClock) -> None:
    sw = delayed_switch(ports, fake, port_delays={2: 1.0})
    sw.inject(1, FRAME)
    sw.flush_delay_lines()
    assert ports[1].receive(0.0) == FRAME and sw.released_at_stop == 1
    sw.close()


def test_delay_for_unknown_port_is_refused(ports: list[MemoryPort], fake: FakeClock) -> None:
    with pytest.raises(ValueError, match="--port-ingress-delay: port 9 is not a port"):
        delayed_switch(ports, fake, port_ingress_delays={9: 1e-3})


def test_pcap_records_carry_emulated_time(ports: list[MemoryPort], fake: FakeClock,
                                          tmp_path: Path) -> None:
    """At TDF 10 record times advance a tenth of real time; a delayed frame's out record
    carries the moment it left the switch port, an ingress-delayed frame's in record the
    moment it arrived after its delay."""
    sw = delayed_switch(ports, fake, port_delays={2: 1e-3}, port_ingress_delays={3: 2e-3},
                        pcap_dir=tmp_path)
    sw.inject(1, FRAME)  # leaves port 2 (delayed): departure at emulated t0
    fake.advance(1000 * MS)  # 100 ms emulated later
    sw.inject(1, FRAME + b"2")
    fake.advance(100 * MS)
    sw.release_due()
    sw._hold_ingress(ports[2], [FRAME + b"3"])  # noqa: SLF001 - as the loop does on receive
    fake.advance(20 * MS)  # 2 ms emulated
    sw.release_due()
    sw.close()
    (t0, _), (t1, _) = read_pcap(tmp_path / "port2_out.pcap")
    assert t1 - t0 == pytest.approx(0.1, abs=2e-6)
    (t_in, frame_in), = read_pcap(tmp_path / "port3_in.pcap")
    assert frame_in == FRAME + b"3"
    assert t_in - t0 == pytest.approx(0.1 + 0.01 + 0.002, abs=2e-6)


def test_stats_document_reports_delays_and_occupancy(ports: list[MemoryPort],
                                                     fake: FakeClock) -> None:
    sw = delayed_switch(ports, fake, port_delays={2: 1e-3}, port_ingress_delays={1: 5e-6})
    for _ in range(3):
        sw.inject(1, FRAME)
    doc = sw.stats_document()
    sw.close()
    assert doc["tdf"] == 10
    dl = doc["delay_line"]
    assert (dl["held"], dl["max_held"]) == (3, 3)
    assert dl["egress"] == {"2": {"delay_s": 1e-3, "held": 3, "max_held": 3, "overflow": 0}}
    assert dl["ingress"]["1"]["delay_s"] == 5e-6
    text = format_table(doc)
    assert "tdf=10" in text
    assert "delay lines: held=3 max=3; out 2=1 ms (held 3, max 3); in 1=5 us" in text


def test_undelayed_stats_document_has_empty_delay_line() -> None:
    doc = build_document({}, {}, name="s", device_id=0, now=20.0, started=10.0, reason="x")
    assert doc["tdf"] == 1 and doc["uptime_emulated_s"] == 10.0
    assert doc["delay_line"]["held"] == 0 and "delay lines" not in format_table(doc)


# ================================================================ command line


def test_cli_timing_options() -> None:
    opts = parse_args(["--no-p4", "-i", "1@a", "-i", "2@b", "--tdf", "10",
                       "--port-delay", "1=2us", "--port-delay", "2=1.5ms",
                       "--port-ingress-delay", "1=800ns"])
    assert opts.timing.tdf == 10.0
    assert opts.timing.port_delays == ((1, 2e-6), (2, 1.5e-3))
    assert opts.timing.ingress == {1: pytest.approx(8e-7)}
    assert parse_args(["--no-p4"]).timing == SwitchTiming()
    assert SwitchOptions().timing.tdf == 1


def test_switch_timing_argv_round_trips() -> None:
    """What a topology puts on the command line reads back as the same timing."""
    timing = SwitchTiming.of(12.5, {2: 2e-6, 1: 1e-3, 3: 0.0}, {1: 7.3e-6})
    assert timing.port_delays == ((1, 1e-3), (2, 2e-6))
    argv = timing.argv()
    assert argv[:2] == ["--tdf", "12.5"]
    opts = parse_args(["--no-p4", "-i", "1@a", "-i", "2@b", "-i", "3@c", *argv])
    assert opts.timing == timing
    assert SwitchTiming().argv() == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--tdf", "0.5"], "--tdf: '0.5' must be a finite number >= 1"),
    (["--tdf", "x"], "--tdf: 'x' is not a number"),
    (["--port-delay", "1"], "--port-delay 1: expected PORT=DELAY"),
    (["--port-delay", "x=1ms"], "--port-delay x=1ms: port 'x' is not a number"),
    (["--port-delay", "600=1ms"], "--port-delay 600=1ms: port 600 outside 0..510"),
    (["--port-delay", "1=2"], r"--port-delay 1=2: '2' needs a unit \(ns, us, ms or s\)"),
    (["--port-delay", "1=-1ms"], "--port-delay 1=-1ms: '-1ms' is not a delay"),
    (["--port-delay", "1=1ms", "--port-delay", "1=2ms"], "--port-delay 1=2ms: port 1 given twice"),
    (["--port-ingress-delay", "9=1ms"], "--port-ingress-delay 9=1ms: port 9 is not an -i port"),
])
def test_cli_timing_errors_name_option_and_value(argv: list[str], message: str) -> None:
    with pytest.raises(_UsageError, match=message):
        parse_args(["--no-p4", "-i", "1@a", *argv])


def test_parse_port_delay() -> None:
    assert parse_port_delay("3=10ms") == (3, 0.01)
    assert parse_port_delay("0x10=0", "--port-ingress-delay") == (16, 0.0)
    with pytest.raises(ValueError, match="needs a unit"):
        parse_port_delay("3=10")


def test_switch_timing_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="tdf"):
        SwitchTiming(0.5)
    with pytest.raises(ValueError, match="--port-delay: port 1 given twice"):
        SwitchTiming(1, ((1, 1e-3), (1, 2e-3)))
    with pytest.raises(ValueError, match="--port-ingress-delay 2=-1.0"):
        SwitchTiming(1, (), ((2, -1.0),))


def test_process_rejects_bad_tdf_in_one_line() -> None:
    """The switch process answers a bad --tdf with one line naming it, exit status 2."""
    res = subprocess.run([sys.executable, "-m", "softswitch", "run", "--no-p4", "--tdf", "0"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "softswitch run: error: --tdf: '0' must be a finite number >= 1 (1 is real time)")
