"""``python -m experiment.run`` end to end on the built-in target's Python engine (needs
root), one flag away from make run's default C engine (whose run is tests/test_run.py's
first): exact all-reduces, the engine recorded, and nothing is left behind. Node names use
the prefix ``cp``; gRPC ports are found free at run time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import stackdump
from softswitch.cengine.build import C_CACHE_ENV
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.nodes import free_port_base
from topo.rundir import read_cmdline, read_pids

pytestmark = [pytest.mark.root, pytest.mark.slow]

PREFIX = "cp"
SWITCHES = [f"{PREFIX}s1"]


class _Run(NamedTuple):
    proc: subprocess.CompletedProcess[str]
    data: dict[str, Any]
    log: str  # the switch's log: its command line and what it said
    compiled: list[Path]  # C objects in the run's own cache


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces(SWITCHES))


@contextmanager
def _make_run(tmp_path: Path, repo_root: Path, *engine_args: str) -> Iterator[_Run]:
    """``python -m experiment.run`` on a two-host rack with ``engine_args``, its own C
    cache; checks on the way out (also on failure) that nothing of it is left."""
    rundir, cache = tmp_path / "run", tmp_path / "cache"
    # -O0: the compile is what this checks, made before the switches start; the network
    # tests that use the user's cache run the -O2 code (the C engine's test took 43 s with
    # an -O2 compile of netreduce.p4, 20 s at -O0)
    # its own C cache only: the front end's program cache and parser tables stay the
    # machine's (with SOFTSWITCH_CACHE_DIR both processes parsed netreduce.p4 from nothing)
    env = {**os.environ, "COLUMNS": "200", C_CACHE_ENV: str(cache), "SOFTSWITCH_C_OPT": "-O0"}
    env.pop("SOFTSWITCH_ENGINE", None)
    argv = [sys.executable, "-m", "experiment.run", "--topo", "rack", "--hosts", "2",
            "--target", "softswitch", *engine_args, "--no-cli", "--tdf", "1",
            "--elements", "2048", "--name-prefix", PREFIX,
            "--grpc-port", str(free_port_base(1, 25100)), "--rundir", str(rundir)]
    proc = stackdump.run(argv, 300, cwd=repo_root, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, env=env)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        data = json.loads((rundir / "results" / "experiment.json").read_text())
        assert data["exact"] is True
        assert [(r["algorithm"], r["exact"]) for r in data["runs"]] == [
            ("innetwork", True), ("ring", True)]
        compiled = ([p for p in cache.iterdir() if p.name.startswith(("_p4_", "p4_"))]
                    if cache.is_dir() else [])
        yield _Run(proc, data, (rundir / "logs" / f"{PREFIX}s1.log").read_text(), compiled)
    finally:
        _owner, records = read_pids(rundir / "pids.json")
        alive = [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)]
        assert (switch_interfaces(SWITCHES), alive) == ([], [])


def test_python_engine_is_one_flag_away(tmp_path: Path, repo_root: Path) -> None:
    """``--engine python`` (``make run engine=python``) runs every switch on the Python
    reference engine: nothing compiled to C, exact all-reduces, the engine recorded."""
    with _make_run(tmp_path, repo_root, "--engine", "python") as run:
        assert run.data["engine"] == "python" and "(python engine)" in run.proc.stdout
        assert "compiling the C data path" not in run.proc.stderr
        assert "--engine python" in run.log, run.log  # the switch was told, and stayed there
        assert "running on the C engine" not in run.log, run.log
        assert run.compiled == []
