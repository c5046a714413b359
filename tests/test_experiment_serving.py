"""What the fault campaigns add to the experiment lifecycle (experiment/serving.py): counter
reads that survive a switch restart (retried, gated, given up with an empty reading) and a
controller serving in a thread, ended with the lifecycle whatever ends its body. Fake
controllers stand in for the switches; the quick reliability campaign and the scenario
examples run the real ones."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.errors import ControllerError
from experiment.lifecycle import ExperimentNetwork
from experiment.serving import EventLog, ServingController, TolerantReads
from tests.test_experiment_lifecycle import FakeController, FakeNetwork

READING = {"switch": "s1", "ports": {1: {"rx_bytes": 5, "tx_bytes": 7}}, "drops": {}}


class Connection:
    def __init__(self) -> None:
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


class FlakyReader:
    """A controller whose counter reads fail ``failures`` times (a switch restarting), then
    succeed; ``error`` is what a failed read raises."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error if error is not None else ControllerError("s1 unreachable")
        self.reads = 0
        self.connection = Connection()
        self.switches = ["s1"]

    def switch_counters(self, switch: str) -> dict[str, Any]:
        self.reads += 1
        if self.reads <= self.failures:
            raise self.error
        return READING

    def switch(self, name: str) -> Connection:
        return self.connection


class PlainReader:
    """A reader without connections of its own (no ``switch``)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.reads = 0
        self.switches = ["s1"]

    def switch_counters(self, switch: str) -> dict[str, Any]:
        self.reads += 1
        if self.reads <= self.failures:
            raise ControllerError("s1 unreachable")
        return READING


def test_a_read_is_retried_after_dropping_the_connection_with_growing_pauses() -> None:
    reader = FlakyReader(failures=2)
    pauses: list[float] = []
    reads = TolerantReads(reader, retries=5, pause_s=0.1, sleep=pauses.append)
    assert list(reads.switches) == ["s1"]
    assert reads.switch_counters("s1") == READING
    assert reader.reads == 3
    assert reader.connection.closes == 2  # the next attempt connects anew
    assert pauses == pytest.approx([0.1, 0.2])


def test_a_switch_that_stays_away_reads_empty_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    reader = FlakyReader(failures=100)
    pauses: list[float] = []
    with caplog.at_level(logging.WARNING, logger="experiment.serving"):
        got = TolerantReads(reader, retries=4, pause_s=0.5, sleep=pauses.append
                            ).switch_counters("s1")
    assert got == {"switch": "s1", "ports": {}, "drops": {}}
    assert reader.reads == 4 and reader.connection.closes == 4
    assert pauses == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert "s1: port counters unavailable (s1 unreachable)" in caplog.text


def test_other_errors_are_not_swallowed() -> None:
    reader = FlakyReader(failures=1, error=KeyError("a bug"))
    with pytest.raises(KeyError):
        TolerantReads(reader, sleep=lambda s: None).switch_counters("s1")
    assert reader.reads == 1


def test_a_reader_without_connections_is_just_asked_again() -> None:
    reader = PlainReader(failures=1)
    assert TolerantReads(reader, sleep=lambda s: None).switch_counters("s1") == READING
    assert reader.reads == 2


def test_at_least_one_attempt() -> None:
    with pytest.raises(ValueError, match="retries must be at least 1, got 0"):
        TolerantReads(PlainReader(0), retries=0)


def test_a_read_waits_while_the_gate_is_held_and_pauses_outside_it() -> None:
    """The scenarios' fault timeline holds the gate while a switch restarts and recovers: no
    read reaches the switch then, and a retry's pause leaves the gate free."""
    gate = threading.Lock()
    reader = FlakyReader(failures=1)
    gate_free_in_pause: list[bool] = []

    def pause(seconds: float) -> None:
        gate_free_in_pause.append(not gate.locked())

    reads = TolerantReads(reader, gate=gate, sleep=pause)
    got: list[dict[str, Any]] = []
    reader_thread = threading.Thread(target=lambda: got.append(reads.switch_counters("s1")))
    with gate:
        reader_thread.start()
        reader_thread.join(0.3)
        assert reader_thread.is_alive() and reader.reads == 0
    reader_thread.join(10.0)
    assert got == [READING] and reader.reads == 2
    assert gate_free_in_pause == [True]


# ----------------------------------------------------------------------------- serving


class FakeServer:
    """Serves like Controller.serve: reports an event, then waits for the stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = 0
        self.served = threading.Event()
        self.poll_s = 0.0

    def serve(self, stop: threading.Event, poll_s: float = 1.0,
              on_event: Callable[[str], None] | None = None) -> None:
        self.poll_s = poll_s
        if on_event is not None:
            on_event(f"{self.name}: recovered (2 entries written)")
        self.served.set()
        stop.wait()

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    made: list[FakeServer] = []
    yield made


def _opener(made: list[FakeServer]) -> Callable[[Path], FakeServer]:
    def open_server(rundir: Path) -> FakeServer:
        made.append(FakeServer(f"s{len(made) + 1}"))
        return made[-1]
    return open_server


def test_serving_controller_reports_stops_and_restarts(tmp_path: Path,
                                                       servers: list[FakeServer]) -> None:
    serving = ServingController(tmp_path, _opener(servers), poll_s=0.2, thread_name="t-serve")
    with serving:
        assert serving.serving and serving.controller is servers[0]
        assert serving.start() is serving and len(servers) == 1  # serving already
        assert serving.wait_event("s1: recovered", 0, 10.0) == "s1: recovered (2 entries written)"
        assert servers[0].poll_s == 0.2
        names = [t.name for t in threading.enumerate()]
        assert "t-serve" in names
        serving.stop()
        assert not serving.serving and servers[0].closed == 1
        assert "t-serve" not in [t.name for t in threading.enumerate()]
        with pytest.raises(RuntimeError, match="not running"):
            _ = serving.controller
        seen = len(serving.events)
        serving.start()  # a new controller: the newest, so primary
        assert serving.controller is servers[1]
        assert serving.wait_event("s2: recovered", seen, 10.0) is not None
        assert serving.wait_event("s1: recovered", seen, 0.0) is None
    assert servers[1].closed == 1 and servers[0].closed == 1
    serving.stop()  # idempotent
    assert servers[1].closed == 1


@pytest.mark.parametrize("error", [RuntimeError("the body failed"), KeyboardInterrupt()])
def test_lifecycle_ends_its_serving_controller_whatever_ends_the_body(
        tmp_path: Path, servers: list[FakeServer], error: BaseException) -> None:
    controller = FakeController()
    network = FakeNetwork(tmp_path)
    lab = ExperimentNetwork(None, "softswitch", None, Path("prog.p4"),
                            start_network=lambda *a, **k: network,
                            connect=lambda net: controller)
    with pytest.raises(type(error)), lab:
        serving = lab.start_serving(_opener(servers), thread_name="lab-serve")
        assert servers[0].served.wait(10.0)
        assert lab.events.snapshot() == ["s1: recovered (2 entries written)"]
        raise error
    assert not serving.serving and servers[0].closed == 1
    assert "lab-serve" not in [t.name for t in threading.enumerate()]
    assert controller.closed == 1 and network.stops == 1


def test_lifecycle_keeps_one_event_list_over_serving_restarts(
        tmp_path: Path, servers: list[FakeServer]) -> None:
    network = FakeNetwork(tmp_path)
    with ExperimentNetwork(None, "softswitch", None, None, start_network=lambda *a, **k: network,
                           connect=lambda net: FakeController()) as lab:
        first = lab.start_serving(_opener(servers))
        assert lab.start_serving(_opener(servers)) is first and len(servers) == 1
        assert first.wait_event("s1: recovered", 0, 10.0)
        lab.stop_serving()
        assert lab.serving is None and servers[0].closed == 1
        lab.start_serving(_opener(servers))
        assert servers[1].served.wait(10.0)
        assert [e.split(":")[0] for e in lab.events.snapshot()] == ["s1", "s2"]
    assert servers[1].closed == 1


def test_event_log_wakes_a_waiter_on_the_append() -> None:
    """A waiter gets the event its prefix names after position ``seen`` as soon as another
    thread appends it (no polling interval), skips older ones, and gets None at its
    deadline when none comes."""
    log_ = EventLog()
    log_.append("s1: recovered (old)")
    seen = len(log_)
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(log_.wait_for("s1: recovered", seen,
                                                                     30.0)))
    waiter.start()
    log_.append("s2: recovered")
    log_.append("s1: recovered (2 entries written)")
    waiter.join(10.0)
    assert not waiter.is_alive() and got == ["s1: recovered (2 entries written)"]
    assert log_.wait_for("s3", 0, 0.05) is None
    assert log_.snapshot() == ["s1: recovered (old)", "s2: recovered",
                               "s1: recovered (2 entries written)"]
