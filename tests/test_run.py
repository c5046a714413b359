"""``python -m experiment.run`` end to end on the built-in target (needs root).

The non-interactive ``make run`` path (``--no-cli``, no terminal) must exit 0 only with exact
all-reduce results, and must leave nothing behind: after success, after a crash inside the
experiment and after Ctrl-C. Every run uses node names with the prefix ``tr`` and gRPC ports
found free at run time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import experiment.run
import stackdump
from softswitch.cengine.build import C_CACHE_ENV
from tests.output_wait import read_until
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.nodes import free_port_base
from topo.rundir import read_cmdline, read_pids

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
]

PREFIX = "tr"
SWITCHES = [f"{PREFIX}s1"]


def _free_port() -> int:
    return free_port_base(1, 25000)


def _argv(rundir: Path, *extra: str) -> list[str]:
    # real time (--tdf 1): these tests are about the run's life, not its calibration
    return ["--topo", "rack", "--hosts", "2", "--target", "softswitch", "--no-cli",
            "--tdf", "1", "--elements", "2048", "--name-prefix", PREFIX,
            "--grpc-port", str(_free_port()), "--rundir", str(rundir), *extra]


def _left_behind(rundir: Path) -> tuple[list[str], list[int]]:
    """Interfaces of our switch still present, and recorded processes still running."""
    _owner, records = read_pids(rundir / "pids.json")
    alive = [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)]
    return switch_interfaces(SWITCHES), alive


@pytest.fixture(autouse=True)
def _no_leftover_interfaces() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces(SWITCHES))


def test_no_cli_run_exits_zero_with_exact_allreduce(tmp_path: Path, repo_root: Path) -> None:
    """`python -m experiment.run --no-cli` programs the rack, both all-reduces are exact, status
    0; on the C engine, make run's default (issue 28), compiled into the run's own cache
    before the switch starts and loaded by it (that ``--engine c`` asks for it too is
    tests/test_cengine_engine_option.py's; ``--engine python``: tests/test_run_cengine.py)."""
    rundir, cache = tmp_path / "run", tmp_path / "cache"
    # wide enough that rich wraps no table cell (a wrapped header breaks the words apart);
    # its own C cache at -O0: the compile is checked, not the optimiser (the network tests
    # that use the user's cache run the -O2 code)
    env = {**os.environ, "COLUMNS": "200", C_CACHE_ENV: str(cache), "SOFTSWITCH_C_OPT": "-O0"}
    env.pop("SOFTSWITCH_ENGINE", None)
    proc = stackdump.run([sys.executable, "-m", "experiment.run", *_argv(rundir)], 240,
                         cwd=repo_root, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((rundir / "results" / "experiment.json").read_text())
    assert data["exact"] is True and data["elems"] == 252  # sim validate derives frames from it
    assert [(r["algorithm"], r["exact"]) for r in data["runs"]] == [
        ("innetwork", True),
        ("ring", True),
    ]
    assert "exact" in proc.stdout and "NOT exact" not in proc.stdout
    # the summary says what limited each run and puts the measured ratio beside the ideal
    # (whether a 2048-element run is link-bound depends on timing: not asserted)
    text = " ".join(proc.stdout.split())  # rich wraps lines at 80 columns without a terminal
    assert "bottleneck" in text and "link-bound" in text
    assert re.search(r"ideal 2\(P-1\)/P = 1\.00 for P = 2 \(\d\.\d\d counting frame sizes at "
                     r"E = 252, host-link packets\)", text), text
    assert "links: host 3 Mbit/s" in text
    assert (rundir / "build" / "netreduce.p4info.txtpb").is_file()  # the source as written
    for stage in ("controller: pushing the pipeline", "controller: programming IPv4 routes",
                  "innetwork all-reduce", "ring all-reduce"):
        assert stage in proc.stderr  # the progress display names every start-up stage
    assert data["engine"] == "c" and "(c engine)" in proc.stdout
    assert "compiling the C data path" in proc.stderr
    log = (rundir / "logs" / f"{PREFIX}s1.log").read_text()
    assert "--engine c" in log and "running on the C engine" in log, log
    # the switch loaded the compile made before it started
    assert len([p for p in cache.iterdir() if p.name.startswith(("_p4_", "p4_"))]) == 1
    assert _left_behind(rundir) == ([], [])


def test_crash_in_experiment_exits_one_and_cleans_up(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """An unexpected exception during the experiment gives status 1, one error line, and
    the network is still taken down completely."""
    def boom(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("injected failure")

    monkeypatch.setattr(experiment.run, "run_allreduce_experiment", boom)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        status = experiment.run.main(_argv(tmp_path / "run"))
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert status == 1
    assert "error: unexpected RuntimeError: injected failure (the network was stopped)" in err
    assert "Traceback" not in err
    assert _left_behind(tmp_path / "run") == ([], [])


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_experiment_exits_130_and_cleans_up(tmp_path: Path, repo_root: Path) -> None:
    """SIGINT while the controller programs the switches stops everything; status 130."""
    rundir = tmp_path / "run"
    # A shell's background job (`make test &`) starts with SIGINT ignored, and Python keeps an
    # inherited SIG_IGN: give the run the default disposition a terminal's Ctrl-C meets.
    proc = subprocess.Popen([sys.executable, "-m", "experiment.run", *_argv(rundir)], cwd=repo_root,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    try:
        assert proc.stderr is not None
        # the stage has finished
        seen = read_until(proc.stderr, lambda line: "starting 1 softswitch switches" in line,
                          120)
        assert any("starting 1 softswitch switches" in s for s in seen), "".join(seen)
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
        assert proc.returncode == 130, "".join(seen) + rest
        assert "interrupted: network stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _left_behind(rundir) == ([], [])
