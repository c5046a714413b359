"""``make experiments preset=size-small`` end to end (needs root): the small figure preset
runs on a real network at a forced TDF, beside ns-3, and its JSON, table and plot say what
was measured (tests/test_figures.py covers the rest with faked networks)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import stackdump
from tests.output_wait import read_until
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.nodes import free_port_base
from topo.rundir import read_cmdline, read_pids

pytestmark = [pytest.mark.root, pytest.mark.slow]

PREFIX = "fg"
SWITCHES = [f"{PREFIX}s1"]


@pytest.fixture(autouse=True)
def _no_leftover_interfaces() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces(SWITCHES))


def _argv(tmp_path: Path) -> list[str]:
    # no check at twice the TDF: a climb cost 60 s of the suite's root group, one check 15 s
    # (tests/test_figures.py runs the climb on faked networks)
    return [sys.executable, "-m", "experiment", "figure", "size-small", "--tdf", "2",
            "--retries", "0",
            "--name-prefix", PREFIX, "--grpc-port", str(free_port_base(1, 25000)),
            "--rundir", str(tmp_path / "run"), "--out", str(tmp_path / "out"),
            "--plot", str(tmp_path / "fig.png")]


def test_small_preset_runs_beside_ns3(tmp_path: Path, repo_root: Path) -> None:
    """Two tensor sizes, in-network and the RoCE ring, at 10 Mbit/s with 100 us links on two
    workers: every all-reduce exact, its fidelity judged, ns-3's time beside it and within
    10 % where faithful, the time no shorter than what the links allow (the frame-size
    ideal); without the check at a higher TDF no point settles, and the exit status says
    the figure is not fit to publish. (The RoCE ring was 30 %
    above ns-3 here until its barrier stopped leaving a lost first message to the timed
    all-reduce: tests/test_workloads_rocecomm.py.)"""
    out = tmp_path / "out"
    proc = stackdump.run(_argv(tmp_path), 300, cwd=repo_root, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    doc = json.loads(next(out.glob("size-small-*.json")).read_text())
    assert [p["elements"] for p in doc["points"]] == [16384, 65536]
    for point in doc["points"]:
        # run at TDF 2 and not checked: kept, not settled
        assert point["tdf"] == 2 and point["workers"] == 2
        assert point["retried"] == [] and point["converged"] is False
        assert set(point["runs"]) == {"innetwork", "ring-roce"}
        for algo, run in point["runs"].items():
            assert run["exact"], (algo, run)
            assert isinstance(run["faithful"], bool) and run["bottleneck"]
            assert run["real_seconds"] == pytest.approx(point["tdf"] * run["seconds"])
            assert run["ns3_seconds"] > 0
            # the shaped links hold: no all-reduce beats its bytes at the emulated rate
            assert run["seconds"] >= 0.9 * run["frames_ideal_s"], (algo, run)
            if run["faithful"]:  # issue 27: emulation and ns-3 within 10 % per point
                assert abs(run["sim_error"]) <= 0.10, (algo, run)
        assert point["ratio"] > 0 and point["ideal_ratio"] == pytest.approx(1.0, abs=0.05)
    # unsettled points are not fit to publish: exit 1, and the output says why
    assert proc.returncode == 1 and not doc["converged"], proc.stdout
    assert "times did not settle as the TDF rose" in proc.stdout
    assert "| 0.25 | ring-roce |" in proc.stdout and "frame-size ideal" in proc.stdout
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    assert not switch_interfaces(SWITCHES)  # the network is down


def test_sigterm_mid_figure_takes_the_network_down(tmp_path: Path, repo_root: Path) -> None:
    """SIGTERM while a point runs (a CI timeout, kill) stops the figure with status 130 and
    leaves no switch process or interface behind (it left the switch running before)."""
    proc = subprocess.Popen(_argv(tmp_path), cwd=repo_root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        # "point 1/2": the network is up and programmed
        seen = read_until(proc.stdout, lambda line: line.startswith("point 1/2"), 120)
        assert seen and seen[-1].startswith("point 1/2"), "".join(seen)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == 130, "".join(seen) + err
        assert "interrupted: network stopped" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _owner, records = read_pids(tmp_path / "run" / "net0" / "pids.json")
    assert records and not [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)]
    assert not switch_interfaces(SWITCHES)
