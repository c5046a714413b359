"""``make run`` under time dilation, end to end on the built-in target (needs root): tdf=auto
calibrates once and keeps the run faithful where real time cannot, and a TDF forced too small
is reported unfaithful in the summary and in experiment.json. The calibration cache is the
test's own (INA_CALIBRATION_CACHE in tmp_path); the switch's program and C caches are the
machine's (with XDG_CACHE_HOME moved, each run parsed and compiled netreduce.p4 from
nothing: 34 s of its calibration's 42 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment.calibrate import CACHE_ENV
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.nodes import free_port_base

pytestmark = [pytest.mark.root, pytest.mark.slow]

PREFIX = "td"
SWITCHES = [f"{PREFIX}s1"]


def _calibration_file(tmp_path: Path) -> Path:
    return tmp_path / "calibration.json"


@pytest.fixture(autouse=True)
def _no_leftover_interfaces() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces(SWITCHES) + switch_interfaces(["cals1"]))


def _run(tmp_path: Path, repo_root: Path, name: str, *extra: str
         ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    rundir = tmp_path / name
    argv = [sys.executable, "-m", "experiment.run", "--topo", "rack", "--hosts", "2",
            "--target", "softswitch", "--no-cli", "--live", "off", "--link-check-seconds", "0",
            "--bw", "100M", "--elements", "65536", "--name-prefix", PREFIX,
            "--grpc-port", str(free_port_base(1, 25000)), "--rundir", str(rundir), *extra]
    env = {**os.environ, "COLUMNS": "200", CACHE_ENV: str(_calibration_file(tmp_path))}
    proc = subprocess.run(argv, cwd=repo_root, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((rundir / "results" / "experiment.json").read_text())
    return proc, data


def test_auto_calibrates_and_a_tdf_forced_too_small_is_unfaithful(tmp_path: Path,
                                                                   repo_root: Path) -> None:
    """100 Mbit/s links are beyond this machine in real time: tdf=auto calibrates (once: the
    cache file appears), dilates and is faithful and exact, with emulated and real times
    recorded; the same run forced to TDF 1 is reported NOT faithful, in the summary and in
    experiment.json, with the reason."""
    proc, data = _run(tmp_path, repo_root, "auto")
    out = " ".join(proc.stdout.split())
    assert "calibrating softswitch" in out
    assert _calibration_file(tmp_path).is_file()
    runs = {r["algorithm"]: r for r in data["runs"]}
    tdf = runs["innetwork"]["tdf"]
    assert tdf > 1 and f"time dilation: TDF {tdf:g}" in out
    assert data["dilation"]["tdf"] == tdf and data["dilation"]["auto"] is True
    for run in runs.values():
        assert run["exact"] and run["fidelity"]["faithful"], run["fidelity"]
        assert run["real_seconds"] == pytest.approx(run["seconds"] * tdf)

    forced, data1 = _run(tmp_path, repo_root, "forced", "--tdf", "1")
    text = " ".join(forced.stdout.split())
    assert "calibrating" not in text  # the forced run reuses the cached calibration
    verdicts = [r["fidelity"] for r in data1["runs"]]
    assert not all(v["faithful"] for v in verdicts)
    assert "NOT faithful" in text and "do not publish this comparison" in text
