"""The delay node's wire (``python -m softswitch wire``): its command line and how it holds
frames.

Every time comes from an injected fake clock and the ports are in memory, so no assert
depends on how fast the machine runs: at TDF 10 a frame on a link of 1 ms must wait 10 ms of
the fake real clock, not a nanosecond less, in each direction on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from softswitch import cli
from softswitch.ports import MemoryPort
from softswitch.switch import _UsageError
from softswitch.wire import DEFAULT_DELAY_CAPACITY, Wire, WireOptions, main, parse_args, wire_argv
from tests.fake_clock import FakeRealTime

MS = 1_000_000  # ns
FRAME = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + bytes(range(50))


@pytest.fixture
def fake() -> FakeRealTime:
    return FakeRealTime()


@pytest.fixture
def ends() -> Iterator[tuple[MemoryPort, MemoryPort]]:
    a, b = MemoryPort(1, "w-eth1"), MemoryPort(2, "w-eth2")
    yield a, b
    a.close()
    b.close()


def wire(ends: tuple[MemoryPort, MemoryPort], fake: FakeRealTime, delay_s: float = 1e-3,
         tdf: float = 10, capacity: int = DEFAULT_DELAY_CAPACITY) -> Wire:
    return Wire(ends, delay_s, fake.clock(tdf), capacity=capacity)


def take(port: MemoryPort) -> list[bytes]:
    """What the wire transmitted on ``port`` so far (without waiting)."""
    out = []
    while (frame := port.receive(0.0)) is not None:
        out.append(frame)
    return out


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


# ================================================================ holding frames


def test_frame_waits_delay_times_tdf_to_the_nanosecond(ends: tuple[MemoryPort, MemoryPort],
                                                       fake: FakeRealTime) -> None:
    """1 ms at TDF 10: the frame leaves port 2 after exactly 10 ms of real time, byte for
    byte, and is counted received on port 1 at once and transmitted on port 2 only then."""
    a, b = ends
    w = wire(ends, fake)
    w.receive(a, [FRAME])
    assert a.counters.rx_packets == 1 and a.counters.rx_bytes == len(FRAME)
    assert w.next_release() == fake.now_ns() + 10 * MS
    fake.advance(10e-3 - 1e-9)
    assert w.release_due() == 0 and take(b) == [] and b.counters.tx_packets == 0
    fake.advance(1e-9)
    assert w.release_due() == 1
    assert take(b) == [FRAME] and take(a) == []
    assert (b.counters.tx_packets, b.counters.tx_bytes) == (1, len(FRAME))
    w.close()


def test_directions_are_apart_and_each_keeps_its_order(ends: tuple[MemoryPort, MemoryPort],
                                                       fake: FakeRealTime) -> None:
    """Frames of each direction leave in the order they came, each after its own delay,
    and one direction never waits for the other."""
    a, b = ends
    w = wire(ends, fake)
    for i in range(3):
        w.receive(a, [FRAME + b"ab" + bytes([i])])
        fake.advance(1e-3)
    w.receive(b, [FRAME + b"ba"])  # at 3 ms: due at 13 ms
    fake.advance(8e-3)  # 11 ms: the first two a->b frames are due, the b->a frame is not
    assert w.release_due() == 2
    assert take(b) == [FRAME + b"ab\x00", FRAME + b"ab\x01"] and take(a) == []
    fake.advance(2e-3)
    assert w.release_due() == 2
    assert take(b) == [FRAME + b"ab\x02"] and take(a) == [FRAME + b"ba"]
    assert w.next_release() is None
    w.close()


def test_full_line_drops_and_counts(ends: tuple[MemoryPort, MemoryPort],
                                    fake: FakeRealTime) -> None:
    """A direction holds at most ``capacity`` frames; more are dropped (tx_drops of the port
    they would have left), the other direction is unaffected."""
    a, b = ends
    w = wire(ends, fake, capacity=2)
    w.receive(a, [FRAME, FRAME + b"1", FRAME + b"2"])
    w.receive(b, [FRAME + b"back"])
    assert b.counters.tx_drops == 1 and a.counters.tx_drops == 0
    fake.advance(1.0)
    assert w.release_due() == 3
    assert take(b) == [FRAME, FRAME + b"1"] and take(a) == [FRAME + b"back"]
    assert w.stats()["max_held"] == 3
    w.close()


def test_zero_delay_passes_frames_at_once(ends: tuple[MemoryPort, MemoryPort],
                                          fake: FakeRealTime) -> None:
    a, b = ends
    w = wire(ends, fake, delay_s=0.0)
    w.receive(b, [FRAME])
    assert take(a) == [FRAME] and w.next_release() is None
    w.close()


def test_flush_lets_held_frames_go_in_order(ends: tuple[MemoryPort, MemoryPort],
                                            fake: FakeRealTime) -> None:
    """Stopping sends what is held at once, in order, and holds nothing after."""
    a, b = ends
    w = wire(ends, fake, delay_s=10.0)
    w.receive(a, [FRAME + b"1", FRAME + b"2"])
    assert w.flush() == 2 and w.released_at_stop == 2
    assert take(b) == [FRAME + b"1", FRAME + b"2"]
    w.receive(b, [FRAME])
    assert take(a) == [FRAME]
    w.close()


def test_a_wire_has_two_different_ports(fake: FakeRealTime) -> None:
    ports = [MemoryPort(1), MemoryPort(1)]
    try:
        with pytest.raises(ValueError, match="exactly two ports"):
            Wire(ports, 1e-3, fake.clock(1))
        with pytest.raises(ValueError, match="exactly two ports"):
            Wire(ports[:1], 1e-3, fake.clock(1))
    finally:
        for p in ports:
            p.close()


# ================================================================ the loop


def test_loop_releases_by_itself_and_stop_lets_the_rest_go(ends: tuple[MemoryPort, MemoryPort],
                                                           fake: FakeRealTime) -> None:
    """The packet loop holds a frame until the (fake) clock passes its deadline, releases it
    by itself, and on stop sends what it still holds without waiting."""
    a, b = ends
    w = wire(ends, fake, delay_s=2e-3)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        a.inject(FRAME)
        assert wait_for(lambda: w.stats()["held"] == 1)
        assert b.receive(0.0) is None
        fake.advance(20e-3)
        assert b.receive(5.0) == FRAME
        b.inject(FRAME + b"late")
        assert wait_for(lambda: w.stats()["held"] == 1)
    finally:
        w.stop()
        t.join(5)
    assert not t.is_alive()
    assert a.receive(0.0) == FRAME + b"late" and w.released_at_stop == 1
    w.close()


# ================================================================ command line


def test_cli_options_and_argv_round_trip() -> None:
    """What a delay node puts on the command line reads back as the same wire."""
    argv = wire_argv([(1, "dl1-eth1"), (2, "dl1-eth2")], 2e-6, 250.0, "dl1", "/tmp/dl1.log",
                     "debug")
    opts = parse_args(argv)
    assert opts == WireOptions(((1, "dl1-eth1"), (2, "dl1-eth2")), 2e-6, 250.0, "dl1",
                               opts.capacity, "/tmp/dl1.log", False, "debug")
    plain = parse_args(["-i", "1@a", "-i", "2@b", "--delay", "1.5ms"])
    assert (plain.delay_s, plain.tdf, plain.name) == (1.5e-3, 1.0, "wire")
    assert wire_argv([(1, "a"), (2, "b")], 1e-3)[-2:] == ["--delay", "0.001s"]


@pytest.mark.parametrize(("argv", "message"), [
    (["-i", "1@a", "--delay", "1ms"], "-i: a wire has exactly two ports, got 1 (-i 1@a)"),
    (["-i", "1@a", "-i", "2@b", "-i", "3@c", "--delay", "1ms"], "exactly two ports, got 3"),
    (["-i", "1@a", "-i", "1@b", "--delay", "1ms"], "-i: port 1 given twice"),
    (["-i", "1@a", "-i", "2@a", "--delay", "1ms"], "-i: interface 'a' given twice"),
    (["-i", "x@a", "-i", "2@b", "--delay", "1ms"], "-i x@a: port 'x' is not a number"),
    (["-i", "1@a", "-i", "2@b"], "the following arguments are required: --delay"),
    (["-i", "1@a", "-i", "2@b", "--delay", "2"], "--delay 2: '2' needs a unit"),
    (["-i", "1@a", "-i", "2@b", "--delay", "fast"], "--delay fast: 'fast' is not a delay"),
    (["-i", "1@a", "-i", "2@b", "--delay", "1ms", "--tdf", "0.5"],
     "--tdf: '0.5' must be a finite number >= 1"),
    (["-i", "1@a", "-i", "2@b", "--delay", "1ms", "--capacity", "0"],
     "--capacity 0: must be >= 1"),
    (["-i", "1@a", "-i", "2@b", "--delay", "1ms", "--capacity", "many"],
     "--capacity many: not an integer"),
    (["-i", "1@a", "-i", "2@b", "--delay", "1ms", "-L", "loud"], "-L/--log-level loud"),
])
def test_cli_errors_name_the_option_and_value(argv: list[str], message: str) -> None:
    with pytest.raises(_UsageError) as info:
        parse_args(argv)
    assert message in str(info.value)


def test_bad_flags_are_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``python -m softswitch wire``: one line on stderr, no traceback, status 2."""
    assert cli.main(["wire", "-i", "1@a", "--delay", "1ms"]) == 2
    err = capsys.readouterr().err
    assert err == "softswitch wire: error: -i: a wire has exactly two ports, got 1 (-i 1@a)\n"


@pytest.fixture
def own_logging() -> Iterator[None]:
    """``main`` configures the ``softswitch`` logger as its process's: put it back."""
    logger = logging.getLogger("softswitch")
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level = saved[1], saved[2]


def test_missing_interface_is_a_clear_error(capsys: pytest.CaptureFixture[str],
                                            own_logging: None) -> None:
    assert main(["-i", "1@wt-nosuch0", "-i", "2@wt-nosuch1", "--delay", "1ms"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("softswitch wire: error: -i: ")
    assert "'wt-nosuch0' does not exist" in err and "\n" not in err
