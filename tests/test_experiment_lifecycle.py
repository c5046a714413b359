"""The experiment lifecycle (experiment/lifecycle.py): whatever ends the body -- a normal exit,
an exception, Ctrl-C, a failure while programming -- the host processes it launched are
killed, its controller closed and its network stopped. Fakes stand in for Mininet and the
controller (real child processes stand in for the host processes); one test does the same
on a real Mininet rack."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.jobs import JobRequest
from experiment.lifecycle import ExperimentNetwork, Snapshot, Window
from topo.model import describe
from topo.topologies import SpineLeafTopo

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


class FakeRunDir:
    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.recorded: list[tuple[str, str, int]] = []

    def record_process(self, name: str, kind: str, pid: int) -> None:
        self.recorded.append((name, kind, pid))


class FakeNode:
    def popen(self, argv: list[str], cwd: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class FakeNetwork:
    """What the lifecycle uses of topo.network.Network."""

    def __init__(self, rundir: Path, topology: Any = None) -> None:
        self.rundir = FakeRunDir(rundir)
        self.topology = topology
        self.switches: list[Any] = []
        self.warnings: list[str] = []
        self.stops = 0

    def node(self, name: str) -> FakeNode:
        return FakeNode()

    def stop(self) -> None:
        self.stops += 1


class FakeController:
    def __init__(self, fail_push: BaseException | None = None) -> None:
        self.fail_push = fail_push
        self.calls: list[str] = []
        self.closed = 0
        self.switches = ["s1"]

    def push_pipeline(self) -> None:
        self.calls.append("push_pipeline")
        if self.fail_push is not None:
            raise self.fail_push

    def program_routes(self) -> None:
        self.calls.append("program_routes")

    def switch_counters(self, name: str) -> dict[str, Any]:
        return {"ports": {"1": {"rx_bytes": 10, "tx_bytes": 20}}}

    def create_job(self, request: JobRequest) -> Any:
        raise NotImplementedError("the lifecycle creates no job")

    def delete_job(self, key: str) -> None:
        raise NotImplementedError("the lifecycle deletes no job")

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def fakes(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A network starter and a controller; every process a test started is gone after it."""
    made: dict[str, Any] = {"controller": FakeController(), "starts": []}

    def start(topo: Any, target: str, rundir: Any, program: Any, **keywords: Any) -> FakeNetwork:
        network = made["network"] = FakeNetwork(tmp_path)
        made["starts"].append((target, program, keywords))
        return network

    made["start"] = start
    made["connect"] = lambda network: made["controller"]
    procs: list[subprocess.Popen[bytes]] = []
    made["procs"] = procs
    yield made
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _lab(fakes: dict[str, Any], **kw: Any) -> ExperimentNetwork:
    return ExperimentNetwork(None, "softswitch", None, Path("prog.p4"),
                             start_network=fakes["start"], connect=fakes["connect"], **kw)


@pytest.mark.parametrize("error", [RuntimeError("the body failed"), KeyboardInterrupt()])
def test_body_that_raises_tears_down_processes_controller_and_network(fakes: dict[str, Any],
                                                                      error: BaseException
                                                                      ) -> None:
    """An exception or Ctrl-C in the body: every launched process killed, the controller
    closed, the network stopped; the error itself reaches the caller unchanged."""
    with pytest.raises(type(error)):
        with _lab(fakes) as lab:
            assert fakes["controller"].calls == ["push_pipeline", "program_routes"]
            procs = [lab.popen("h1", SLEEP), lab.popen("h2", SLEEP)]
            fakes["procs"].extend(procs)
            assert [p.poll() for p in lab.processes] == [None, None]
            raise error
    assert [p.poll() for p in procs] == [-9, -9]
    assert fakes["controller"].closed == 1 and fakes["network"].stops == 1
    assert lab.network is None and lab.processes == []
    # recorded for a cleanup after a killed run
    assert [(n, pid) for n, _kind, pid in fakes["network"].rundir.recorded] == [
        ("h1", procs[0].pid), ("h2", procs[1].pid)]


def test_programming_failure_while_starting_stops_everything(fakes: dict[str, Any]) -> None:
    """A pipeline push that fails (or is interrupted) while starting: the network is stopped
    and the controller closed before the error propagates."""
    fakes["controller"] = FakeController(fail_push=KeyboardInterrupt())
    lab = _lab(fakes)
    with pytest.raises(KeyboardInterrupt):
        lab.start()
    assert fakes["network"].stops == 1 and fakes["controller"].closed == 1
    assert lab.network is None


def test_normal_exit_stops_once_and_start_options_reach_the_network(fakes: dict[str, Any]) -> None:
    from experiment.lifecycle import StartOptions

    start = StartOptions(egress_order="random", seed=7, start_timeout=30.0)
    with _lab(fakes, start=start, program_fabric=False) as lab:
        assert fakes["controller"].calls == []  # programmed later, on request
        lab.program()
        assert lab.programmed
    lab.stop()  # idempotent
    assert fakes["network"].stops == 1 and fakes["controller"].closed == 1
    (target, program, keywords), = fakes["starts"]
    assert (target, program) == ("softswitch", Path("prog.p4"))
    assert (keywords["egress_order"], keywords["seed"], keywords["start_timeout"]) == (
        "random", 7, 30.0)


def test_a_network_started_in_an_earlier_runs_directory_forgets_its_jobs(
        fakes: dict[str, Any], tmp_path: Path) -> None:
    """Regression: ``make run`` a second time with the same ``--rundir`` failed to create its
    job ("a job named 'allreduce' already exists"): the controller state of the first run's
    network, whose switches are gone, was taken for the new network's."""
    from controller.jobs import JobPlan
    from controller.state import ControllerState, load_state, locked, save_state

    plan = JobPlan(job_id=0, name="allreduce", credits=4, slots=128, msg_pkts=32,
                   workers=[], parts={})
    earlier = ControllerState(election_id=3, routes=True, jobs={0: plan})
    with locked(tmp_path):
        save_state(tmp_path, earlier)
    assert load_state(tmp_path).job("allreduce")
    with _lab(fakes, program_fabric=False):
        state = load_state(tmp_path)
        assert (state.jobs, state.routes, state.election_id) == ({}, False, 0)


def test_around_a_network_owns_only_its_processes(fakes: dict[str, Any], tmp_path: Path) -> None:
    """A lifecycle around a network started elsewhere kills its processes but leaves the
    network and the given controller to their owner."""
    network, ctl = FakeNetwork(tmp_path), FakeController()
    lab = ExperimentNetwork.around(network, ctl)
    proc = lab.popen("h1", SLEEP)
    fakes["procs"].append(proc)
    lab.stop()
    assert proc.poll() == -9
    assert (network.stops, ctl.closed) == (0, 0)


def test_run_processes_collects_rows_and_leaves_nothing_running(fakes: dict[str, Any],
                                                                tmp_path: Path) -> None:
    lab = ExperimentNetwork.around(FakeNetwork(tmp_path))
    talk = [sys.executable, "-c", "print('{\"rank\": 0}')"]
    rows = lab.run_processes({"a": ("h1", talk), "b": ("h2", SLEEP)}, timeout_s=1.0)
    assert rows["a"] == [{"rank": 0}]
    assert rows["b"] == "no result within 1 s (killed)"
    assert lab.processes == []


def test_window_of_two_snapshots() -> None:
    """Switch CPU as cores over the window, machine load, per-link bytes and rates."""
    topology = describe(SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=2, host_bw=8.0),
                        target="softswitch")
    before = Snapshot({("l1", 1): (0, 0)}, {"l1": 1.0}, (100, 200), 10.0)
    after = Snapshot({("l1", 1): (1000, 2_000_000)}, {"l1": 2.5}, (150, 400), 12.0)
    window = Window(before, after)
    assert window.wall == 2.0
    assert window.switch_cpu_seconds == {"l1": 1.5} and window.switch_cpu == {"l1": 0.75}
    assert window.machine_busy == pytest.approx(0.75)
    usage = {(u.switch, u.port): u for u in window.links(topology)}
    assert (usage[("l1", 1)].tx_bytes, usage[("l1", 1)].rx_bytes) == (2_000_000, 1000)
    assert usage[("l1", 1)].utilization == pytest.approx(1.0)  # 8 Mbit/s over 2 s


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or importlib.util.find_spec("mininet") is None,
                    reason="needs root and Mininet")
def test_mininet_network_is_torn_down_when_the_body_raises(tmp_path: Path) -> None:
    """On a real rack (no program: nothing to push): a process inside a host and the
    switch are gone, and no interface is left, after the body raised."""
    from topo.cleanup import remove_interfaces, switch_interfaces
    from topo.nodes import free_port_base
    from topo.rundir import read_cmdline, read_pids
    from topo.topologies import RackTopo

    base = free_port_base(1, 25000)
    topo = RackTopo(hosts=2, name_prefix="lc", grpc_base_port=base)
    try:
        with pytest.raises(RuntimeError, match="body"):
            with ExperimentNetwork(topo, "softswitch", tmp_path / "run") as lab:
                proc = lab.popen("lch1", SLEEP)
                assert proc.poll() is None
                raise RuntimeError("body")
        _owner, records = read_pids(tmp_path / "run" / "pids.json")
        assert {r.kind for r in records} >= {"in-host", "switch", "host-shell"}
        assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
        assert switch_interfaces(["lcs1"]) == []
    finally:
        remove_interfaces(switch_interfaces(["lcs1"]))
