"""The reliability campaign (issue 20): its pieces offline (malformed frames, verdicts, hang
bound, report), the teardown fix (a `make run` after one that was SIGKILLed starts without
`make clean`) and (root) the shortened campaign end to end. Networks use the name prefixes
``rq`` (campaign) and ``rqx`` / ``ru`` (teardown runs)."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import stackdump
from controller.jobs import JobRequest
from reliability.frames import KINDS, FrameFactory, ip_checksum
from reliability.leaks import TAG_VARIABLE, find_leaks
from reliability.report import render, verdicts
from reliability.results import CampaignResult, JobTally, LossCell, RestartCell, judge
from reliability.teardown import run_argv
from reliability.testbed import free_port_block, hang_bound, ideal_seconds
from tests.thread_imports import read_report, summary

REPO = Path(__file__).resolve().parent.parent
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet)")


def _run(exact: bool, errors: tuple[str | None, ...], wall: float = 1.0) -> SimpleNamespace:
    ranks = tuple(
        SimpleNamespace(error=e, exact=exact and e is None, retransmissions=1, loss_seen=0)
        for e in errors
    )
    return SimpleNamespace(
        exact=exact and all(e is None for e in errors),
        ranks=ranks,
        wall_seconds=wall,
        seconds=wall / 2,
        errors=[f"rank {i}: {e}" for i, e in enumerate(errors) if e],
    )


def test_judge_tells_exact_wrong_hang_and_named_failures() -> None:
    assert judge(_run(True, (None, None)), 10) == "exact"
    assert judge(_run(False, ("result differs from the exact sum", None)), 10) == "wrong"
    assert judge(_run(False, ("no result within 40 s (killed)", None)), 10) == "hang"
    assert judge(_run(True, (None, None), wall=11), 10) == "hang"
    assert judge(_run(False, ("switch unreachable: connection refused", None)), 10) == "failed"
    tally = JobTally(bound_s=10)
    for run in (_run(True, (None,)), _run(False, ("timed out after 10 s",))):
        tally.add(run)
    assert (tally.count, tally.exact, tally.hangs, tally.retransmissions) == (2, 1, 1, 2)
    assert tally.errors and tally.errors[0].startswith("hang: rank 0: timed out")


def test_new_job_goes_on_after_a_failed_create(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller cell kills `ina-controller serve` while all-reduces run: a new_job
    that had deleted the previous job and then failed to create the next one left the
    deleted job as the current plan, so every later new_job failed deleting it, and the
    cell waited for ever for one more job (CI hung). The next call now goes on."""
    import contextlib

    from controller.errors import JobError
    from reliability.testbed import Testbed, TestbedConfig

    class FakeController:
        def __init__(self) -> None:
            self.jobs: set[str] = set()
            self.fail_create = False

        def delete_job(self, name: str) -> None:
            if name not in self.jobs:
                raise JobError("job", f"no job named {name!r}")
            self.jobs.remove(name)

        def create_job(self, request: JobRequest) -> SimpleNamespace:
            if self.fail_create:
                raise RuntimeError("the serving controller was killed")
            self.jobs.add(request.name)
            return SimpleNamespace(to_dict=lambda: {"name": request.name})

    ctl = FakeController()
    bed = Testbed(TestbedConfig(), tmp_path)
    bed.network = SimpleNamespace(topology=SimpleNamespace(
        hosts=[SimpleNamespace(name=f"h{i}") for i in range(4)]))
    bed.controller = SimpleNamespace(state=None)
    bed.results = tmp_path
    monkeypatch.setattr(bed, "_primary", lambda: contextlib.nullcontext(ctl))
    monkeypatch.setattr("reliability.testbed.load_state", lambda rundir: None)
    monkeypatch.setattr(Testbed, "rundir", property(lambda self: tmp_path))
    assert bed.new_job()["name"] == "soak1"
    ctl.fail_create = True
    with pytest.raises(RuntimeError):
        bed.new_job()
    ctl.fail_create = False
    assert bed.new_job()["name"] == "soak3"
    assert ctl.jobs == {"soak3"}


def test_a_testbed_that_fails_to_start_serving_stops_what_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The testbed starts through the experiment lifecycle: a failure after the network is
    up and programmed (here the serving controller finds no topology.json) stops the
    network and closes the programming controller before the error is raised."""
    from controller.errors import FabricTopologyError
    from experiment.lifecycle import ExperimentNetwork
    from reliability.testbed import Testbed, TestbedConfig
    from tests.test_experiment_lifecycle import FakeController, FakeNetwork

    network = FakeNetwork(tmp_path / "run")
    controller = FakeController()

    def on_fakes(*args: Any, **kw: Any) -> ExperimentNetwork:
        return ExperimentNetwork(*args, **kw, start_network=lambda *a, **k: network,
                                 connect=lambda net: controller)

    monkeypatch.setattr("reliability.testbed.ExperimentNetwork", on_fakes)
    bed = Testbed(TestbedConfig(grpc_port=27000), tmp_path / "runs")
    with pytest.raises(FabricTopologyError, match="topology.json: no such file"):
        bed.start()
    assert controller.calls == ["push_pipeline", "program_routes"]
    assert controller.closed == 1 and network.stops == 1
    assert bed.lab is None and bed.network is None and bed.server is None
    bed.stop()  # idempotent
    assert network.stops == 1


def test_hang_bound_follows_the_link_rate() -> None:
    slow, fast = hang_bound(8192, 32, 1.0), hang_bound(8192, 32, 100.0)
    assert slow > fast > 30.0
    # under loss: 3 x the expected retransmission timeouts (256 packets, six lossy link
    # directions per round, 250 ms each) on top
    assert hang_bound(8192, 32, 10.0, 0.1) - hang_bound(8192, 32, 10.0) == pytest.approx(
        3 * 256 * (0.9**-6 - 1) * 0.25
    )
    # the quick campaign's 10 % cell: a 41.5 s run with 641 drops was counted as a hang
    # against the old bound of 39.1 s
    assert hang_bound(2048, 32, 10.0, 0.1) > 41.5 * 1.5
    # 256 packets of 202 bytes (Ethernet, IPv4, UDP, BTH, tag, 32 int32, ICRC), up and back
    assert ideal_seconds(8192, 32, 10.0) == pytest.approx(2 * 256 * 202 * 8 / 10e6)


def test_frames_cover_every_kind_and_are_wrong_as_announced() -> None:
    factory = FrameFactory("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.1.1", "10.0.1.2", 3)
    frames = factory.frames(len(KINDS) * 3)
    assert [k for k, _ in frames[: len(KINDS)]] == list(KINDS)
    by_kind = dict(frames)
    ip = by_kind["ip_checksum"][14:34]
    assert ip_checksum(ip[:10] + b"\0\0" + ip[12:]) != struct.unpack("!H", ip[10:12])[0]
    good = by_kind["no_route"][14:34]
    assert ip_checksum(good[:10] + b"\0\0" + good[12:]) == struct.unpack("!H", good[10:12])[0]
    assert socket.inet_ntoa(good[16:20]).startswith("192.0.2.")
    assert by_kind["arp"][12:14] == b"\x08\x06"
    assert by_kind["ip_ttl"][22] in (0, 1)
    assert len(by_kind["runt"]) < 14 + 20
    assert by_kind["roce_bad_tag"][36:38] == b"\x12\xb7"  # UDP destination 4791
    # the same seed, the same frames
    again = FrameFactory("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.1.1", "10.0.1.2", 3)
    assert again.frames(len(KINDS) * 3) == frames


def test_report_states_each_target_and_the_command() -> None:
    tally = JobTally(bound_s=31, count=3, exact=3, seconds=[0.5, 0.6, 0.7], retransmissions=4)
    bad = JobTally(bound_s=31, count=2, exact=1, hangs=1, errors=["hang: rank 1: timed out"])
    result = CampaignResult(
        command="sudo make soak",
        mode="full campaign",
        started="now",
        loss=[LossCell(0.01, 20, tally, 7), LossCell(0.1, 20, bad, 30)],
        restart=RestartCell(attempts=2, survived=2),
    )
    checks = verdicts(result)
    assert checks[0][1] is False and "1 hangs" in checks[0][2]
    assert checks[1][:2] == ("2/2 switch restarts survived", True)
    assert checks[1][2].startswith("2/2 jobs exact")
    text = render(result, None)
    assert "`sudo make soak`" in text and "| loss 1% (20 link directions) | 3 | 3 | 0 | 0 |" in text
    assert "**no**" in text and "hang: rank 1: timed out" in text


def test_leak_scan_sees_only_its_own_tag(tmp_path: Path) -> None:
    tag = f"rqtest{os.getpid()}"
    env = dict(os.environ, **{TAG_VARIABLE: tag})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = find_leaks("rqzz", tmp_path, tag)
            if found.processes:
                break
            time.sleep(0.05)
        assert [p.split(":")[0] for p in found.processes] == [str(proc.pid)]
        assert find_leaks("rqzz", tmp_path, "another-tag").total == 0
    finally:
        proc.kill()
        proc.wait()
    assert find_leaks("rqzz", tmp_path, tag).total == 0


def _wait_file(path: Path, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, "the run ended before its network was up"
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.1)


@root_only
@pytest.mark.root
@pytest.mark.slow
def test_a_run_after_a_sigkilled_run_starts_without_make_clean(tmp_path: Path) -> None:
    """Regression (issue 20): a `make run` killed with SIGKILL left its switch processes,
    host shells and interfaces, and the next run refused to start ("already exist ...
    `make clean` removes them")."""
    prefix, tag = "ru", f"ru{os.getpid()}"
    env = dict(os.environ, **{TAG_VARIABLE: tag})
    port = free_port_block(2)
    first = tmp_path / "runs" / "a"
    argv = run_argv(prefix, port, first, experiment=True, tdf="1")  # no calibration to wait
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_file(first / "topology.json", proc, 120)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert find_leaks(prefix, tmp_path / "runs", tag).processes  # it did leave things
        second = stackdump.run(
            run_argv(prefix, port, tmp_path / "runs" / "b", False, tdf="1"),
            180,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
        assert "cleaned up after an earlier run" in second.stdout
        left = find_leaks(prefix, tmp_path / "runs", tag)
        assert left.total == 0, left.describe()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        from topo.cleanup import clean_all

        clean_all(tmp_path / "runs")


@root_only
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_campaign_meets_every_target(tmp_path: Path) -> None:
    """The shortened campaign (`python -m reliability --quick`): loss, switch and controller
    restarts, teardown and bad input, each target met."""
    out = tmp_path / "reliability.md"
    try:
        res = _run_quick_campaign(tmp_path, out)
    finally:
        # a campaign killed by a timeout leaves its switches and interfaces: stop them by
        # their runs' records so the next run of the test (or of CI) starts clean
        from topo.cleanup import clean_all

        for root in ("testbed", "teardown"):
            clean_all(tmp_path / "runs" / root, force=True)
    data = json.loads((tmp_path / "r.json").read_text())
    assert res.returncode == 0, res.stderr[-3000:]
    assert [(c["loss"], c["reorder"]) for c in data["loss"]] == [(0.10, 0.0), (0.0, 0.05)]
    assert all(c["tally"]["wrong"] == 0 and c["tally"]["hangs"] == 0 for c in data["loss"])
    assert all(c["tally"]["exact"] == c["tally"]["count"] == 1 for c in data["loss"])
    assert data["restart"]["survived"] == data["restart"]["attempts"] > 0
    assert data["controller"]["reconcile_changes"] == 0
    assert data["bad_input"]["port_rx"] == data["bad_input"]["frames_sent"]
    assert data["teardown"]["next_run_ok"] is True
    assert "## Verdict" in out.read_text()
    findings = read_report(tmp_path / "thread-imports.jsonl")
    assert not findings, "modules imported for the first time on a thread:\n" + summary(findings)


def _run_quick_campaign(tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The campaign, with the recorder of first imports on threads in every Python process
    it starts (tests/test_thread_imports.py); one still running at the timeout is asked for
    its threads' stacks (the failure shows them) and killed."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "threadcheck"),
               INA_THREAD_IMPORTS=str(tmp_path / "thread-imports.jsonl"))
    return stackdump.run(
        [
            sys.executable,
            "-m",
            "reliability",
            "--quick",
            "--parallel",
            "--prefix",
            "rq",
            "--runs-root",
            str(tmp_path / "runs"),
            "--out",
            str(out),
            "--json",
            str(tmp_path / "r.json"),
        ],
        850,
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )


def test_cleanup_leaves_a_live_runs_interfaces_alone(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (issue 20): ``make run`` now cleans its runs root before it starts; an older
    dead run there with the same switch names must not take a live run's interfaces."""
    from topo import cleanup
    from topo.rundir import read_cmdline

    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        while read_cmdline(owner.pid) is None or "time.sleep" not in " ".join(
            read_cmdline(owner.pid) or []
        ):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        for run, pid in (("old", 999999), ("live", owner.pid)):
            (tmp_path / run).mkdir()
            cmd = read_cmdline(owner.pid) if run == "live" else ["gone"]
            (tmp_path / run / "pids.json").write_text(
                json.dumps(
                    {
                        "owner": {"pid": pid, "cmdline": cmd},
                        "processes": [
                            {
                                "name": "rqws1",
                                "kind": "switch",
                                "pid": 999998,
                                "pgid": None,
                                "cmdline": ["gone"],
                            }
                        ],
                    }
                )
            )
        asked: list[list[str]] = []

        def remove(intfs: Iterable[str]) -> list[str]:
            asked.append(list(intfs))
            return []

        monkeypatch.setattr(cleanup, "switch_interfaces", lambda names: sorted(names))
        monkeypatch.setattr(cleanup, "remove_interfaces", remove)
        report = cleanup.clean_all(tmp_path)
        assert report.skipped_runs == [str(tmp_path / "live")]
        assert asked == [[]]  # the old run's rqws1 is the live run's too: left alone
        cleanup.clean_all(tmp_path, force=True)
        assert ["rqws1"] in asked
    finally:
        owner.kill()
        owner.wait()


def test_pool_rows_judged_like_process_runs() -> None:
    """The loss cells' host workers answer with one row each; a missing row is a hang, a
    wrong sum is wrong, every row exact is exact (the same verdicts as one process per
    host and all-reduce)."""
    from experiment.session import AllreduceRun
    from reliability.pool import _outcome

    ok = {"rank": 0, "host": "h1", "seconds": 0.2, "check": True, "retransmissions": 3,
          "timeouts": 1, "spurious_timeouts": 0, "naks": 2, "lone_timeouts": 0, "error": None}
    missing = "no result within 45 s"

    def verdict(rows: list[dict[str, object] | None]) -> str:
        outcomes = tuple(_outcome(r, i, f"h{i}", missing) for i, r in enumerate(rows))
        return JobTally(bound_s=30.0).add(AllreduceRun("innetwork", 512, outcomes,
                                                       wall_seconds=1.0))

    assert verdict([ok, ok]) == "exact"
    assert verdict([ok, None]) == "hang"
    assert verdict([ok, {**ok, "check": False}]) == "wrong"
    assert verdict([ok, {**ok, "check": None, "error": "rank 1 failed: bind: busy"}]) == "failed"
    assert _outcome(ok, 0, "h1", missing).loss_seen == 3


def test_worker_answers_a_bad_request_with_an_error_row(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """A host worker that cannot run a request (here: no such job plan) says why in its
    row and goes on with the next line, so the campaign counts a failure, not a hang."""
    import io

    from reliability import worker

    lines = [json.dumps({"plan": str(tmp_path / "none.json"), "seed": 1, "size": 8,
                         "timeout": 5.0})] * 2
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert worker.main(["--host", "h1", "--elems", "32"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and all("cannot read job plan" in r["error"] for r in rows)
    # the inputs: a 2^-8 grid, so the fixed-point sum is exact
    total = worker.exact_sum(4, 64, 3)
    assert np.array_equal(total * 256, np.round(total * 256))


def test_teardown_cell_runs_until_enough_runs_were_interrupted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``interrupted`` set, a run that ends before its signal does not count: the cell
    starts runs until that many got their signal (stand-ins for ``make run``: the
    "experiment" runs end at once, the others wait for the signal), then the final one."""
    import random
    from dataclasses import replace

    from reliability import teardown
    from reliability.leaks import Leaks

    def argv(prefix: str, grpc_port: int, rundir: Path, experiment: bool,
             tdf: str = "auto") -> list[str]:
        return [sys.executable, "-c", "" if experiment else "import time; time.sleep(2)"]

    monkeypatch.setattr(teardown, "run_argv", argv)
    monkeypatch.setattr(teardown, "find_leaks", lambda *args: Leaks())
    plan = replace(teardown.TeardownPlan(), runs=2, interrupted=4, experiment_every=2,
                   sigint=0.5, sigkill=0.5, max_delay_s=0.4, prefix="tq")
    cell = teardown.teardown_cell(plan, tmp_path, random.Random(3), lambda _: None)
    assert cell.signals.get("SIGINT", 0) + cell.signals.get("SIGKILL", 0) == 4
    assert cell.signals.get("none (ended before the signal)", 0) >= 1
    assert cell.runs == 4 + cell.signals["none (ended before the signal)"]
    assert cell.next_run_ok and cell.leaks_after_each == 0
