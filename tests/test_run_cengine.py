"""``python -m experiment.run --engine c`` end to end on the built-in target (needs root):
the all-reduces are exact with every switch on the C engine, the run records the engine,
and nothing is left behind. Node names use the prefix ``cp``; gRPC ports are found free at
run time; the C programs compile into the test's own cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import stackdump
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.nodes import free_port_base
from topo.rundir import read_cmdline, read_pids

pytestmark = [pytest.mark.root, pytest.mark.slow]

PREFIX = "cp"
SWITCHES = [f"{PREFIX}s1"]


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces(SWITCHES))


def test_c_engine_run_is_exact(tmp_path: Path, repo_root: Path) -> None:
    """The C engine is make run's default (issue 28; that ``--engine c`` asks for it too is
    tests/test_cengine_engine_option.py's, without a network)."""
    rundir = tmp_path / "run"
    cache = tmp_path / "cache"
    env = {**os.environ, "COLUMNS": "200", "SOFTSWITCH_CACHE_DIR": str(cache)}
    env.pop("SOFTSWITCH_ENGINE", None)
    argv = [sys.executable, "-m", "experiment.run", "--topo", "rack", "--hosts", "2",
            "--target", "softswitch", "--no-cli", "--tdf", "1",
            "--elements", "2048", "--name-prefix", PREFIX,
            "--grpc-port", str(free_port_base(1, 25100)), "--rundir", str(rundir)]
    proc = stackdump.run(argv, 300, cwd=repo_root, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, env=env)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        data = json.loads((rundir / "results" / "experiment.json").read_text())
        assert data["exact"] is True and data["engine"] == "c"
        assert [(r["algorithm"], r["exact"]) for r in data["runs"]] == [
            ("innetwork", True), ("ring", True)]
        assert "(c engine)" in proc.stdout
        assert "compiling the C data path" in proc.stderr
        log = (rundir / "logs" / f"{PREFIX}s1.log").read_text()
        assert "--engine c" in log and "running on the C engine" in log, log
        # the switch loaded the compile made before it started
        assert len([p for p in cache.iterdir() if p.name.startswith(("_p4_", "p4_"))]) == 1
    finally:
        _owner, records = read_pids(rundir / "pids.json")
        alive = [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)]
        assert (switch_interfaces(SWITCHES), alive) == ([], [])


def test_python_engine_is_one_flag_away(tmp_path: Path, repo_root: Path) -> None:
    """``--engine python`` (``make run engine=python``) runs every switch on the Python
    reference engine: nothing compiled to C, exact all-reduces, the engine recorded."""
    rundir = tmp_path / "run"
    cache = tmp_path / "cache"
    env = {**os.environ, "COLUMNS": "200", "SOFTSWITCH_CACHE_DIR": str(cache)}
    env.pop("SOFTSWITCH_ENGINE", None)
    argv = [sys.executable, "-m", "experiment.run", "--topo", "rack", "--hosts", "2",
            "--target", "softswitch", "--engine", "python", "--no-cli", "--tdf", "1",
            "--elements", "2048", "--name-prefix", PREFIX,
            "--grpc-port", str(free_port_base(1, 25100)), "--rundir", str(rundir)]
    proc = stackdump.run(argv, 300, cwd=repo_root, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, env=env)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        data = json.loads((rundir / "results" / "experiment.json").read_text())
        assert data["exact"] is True and data["engine"] == "python"
        assert "(python engine)" in proc.stdout
        assert "compiling the C data path" not in proc.stderr
        log = (rundir / "logs" / f"{PREFIX}s1.log").read_text()
        assert "running on the C engine" not in log, log
        compiled = [p for p in cache.iterdir() if p.name.startswith(("_p4_", "p4_"))]
        assert compiled == []  # (the cache keeps the front end's output either way)
    finally:
        _owner, records = read_pids(rundir / "pids.json")
        alive = [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)]
        assert (switch_interfaces(SWITCHES), alive) == ([], [])
