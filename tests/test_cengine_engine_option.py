"""The packet engine chosen end to end: ``make run engine=c|python`` -> ``experiment.run
--engine`` -> ``topo`` -> every switch's ``--engine``, with the C data path compiled once
before the switches start (they all load that compile from the cache)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiment import run
from experiment.lifecycle import StartOptions
from softswitch.cengine.build import C_CACHE_ENV
from softswitch.switch import parse_args as switch_parse_args
from topo.errors import TargetError
from topo.nodes import BMv2Switch, SoftSwitch, SwitchLaunch, check_engine

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "p4" / "port_forward.p4"
WAIT_S = 60.0


def _c_entries(cache: Path) -> list[Path]:
    """The compiled C programs in ``cache`` (the front end's entries share the directory)."""
    return sorted(p for p in cache.iterdir() if p.name.startswith(("_p4_", "p4_")))


def test_run_engine_option_names_option_and_value(capsys: pytest.CaptureFixture[str]) -> None:
    for option in ("--engine", "--io"):
        with pytest.raises(SystemExit) as exc:
            run.parse_args([option, "rust"])
        assert exc.value.code == 2
        assert f"{option} 'rust': choose from" in capsys.readouterr().err


def test_bad_engine_environment_is_named(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SOFTSWITCH_ENGINE", "gpu")
    with pytest.raises(SystemExit):
        run.parse_args([])
    assert "SOFTSWITCH_ENGINE=gpu: choose from python, c" in capsys.readouterr().err
    # an explicit --engine does not read the environment
    assert run.parse_args(["--engine", "c"]).engine == "c"


def test_switch_engine_flag_then_environment_then_c(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """make run's switches run the C engine unless told otherwise (issue 28); the Python
    engine is one flag (or the environment) away."""
    monkeypatch.delenv("SOFTSWITCH_ENGINE", raising=False)
    assert run.switch_engine(run.parse_args([]), "softswitch") == "c"
    assert run.switch_engine(run.parse_args(["--engine", "python"]), "softswitch") == "python"
    monkeypatch.setenv("SOFTSWITCH_ENGINE", "python")
    assert run.switch_engine(run.parse_args([]), "softswitch") == "python"
    assert run.switch_engine(run.parse_args(["--engine", "c"]), "softswitch") == "c"
    # BMv2 runs its own engine: nothing to choose unless asked (then refused at start)
    assert run.switch_engine(run.parse_args([]), "bmv2") is None
    assert run.switch_engine(run.parse_args(["--engine", "c"]), "bmv2") == "c"


def test_topology_refuses_bad_engines() -> None:
    with pytest.raises(TargetError, match=r"engine 'jit': choose from python, c"):
        check_engine(SoftSwitch, "jit")
    with pytest.raises(TargetError, match=r"io 'dpdk': choose from c, python"):
        check_engine(SoftSwitch, "c", "dpdk")
    with pytest.raises(TargetError, match=r"engine 'c': only the built-in target"):
        check_engine(BMv2Switch, "c")
    check_engine(SoftSwitch, "c", "python")
    check_engine(BMv2Switch, None)


def test_start_options_pass_the_engine() -> None:
    assert StartOptions(engine="c", io="python").keywords()["engine"] == "c"
    assert StartOptions(engine="c", io="python").keywords()["io"] == "python"
    assert "engine" not in StartOptions().keywords() and "io" not in StartOptions().keywords()


def test_switch_argv_carries_the_engine(tmp_path: Path) -> None:
    """The command line topo builds for a built-in switch asks for the run's engine and
    loop, and the switch's own parser reads them back."""
    launch = SwitchLaunch(name="s1", device_id=3, grpc_addr="127.0.0.1:50051",
                          ports=((1, "s1-eth1"),), log_file=tmp_path / "s1.log",
                          program=PROGRAM, engine="c", io="python")
    argv = SoftSwitch.build_argv(launch)
    assert argv[argv.index("--engine") + 1] == "c" and argv[argv.index("--io") + 1] == "python"
    opts = switch_parse_args(argv[argv.index("run") + 1:])
    assert (opts.engine, opts.io) == ("c", "python")
    default = SoftSwitch.build_argv(SwitchLaunch(name="s1", device_id=3, grpc_addr="x:1",
                                                 ports=(), log_file=tmp_path / "s1.log"))
    assert "--engine" not in default and "--io" not in default


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(C_CACHE_ENV, str(where))
    return where


def _start_switch(log_file: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = SoftSwitch.build_argv(SwitchLaunch(
        name=log_file.stem, device_id=0, grpc_addr="127.0.0.1:0", ports=(),
        log_file=log_file, program=PROGRAM, engine="c"))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, env=env)


@pytest.fixture
def switches() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_switches_share_one_compile(cache: Path, tmp_path: Path,
                                    switches: list[subprocess.Popen[str]]) -> None:
    """``prepare_engine`` compiles the C data path once; two switches started with
    ``--engine c`` then load that compile (the cache still holds that one file) and run
    on the C engine."""
    build = SoftSwitch.compile_program(PROGRAM, tmp_path / "build")
    note = SoftSwitch.prepare_engine(build, "c")
    entries = _c_entries(cache)
    assert len(entries) == 1 and note == f"C data path: {entries[0].name}"
    inode = entries[0].stat().st_ino  # a compile would replace the file (a new inode)
    assert SoftSwitch.prepare_engine(build, "python") is None
    env = {**os.environ, C_CACHE_ENV: str(cache)}
    logs = [tmp_path / f"sw{i}.log" for i in range(2)]
    for log_file in logs:
        switches.append(_start_switch(log_file, env))
    for proc in switches:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("softswitch ready"), proc.stderr.read() if proc.stderr else ""
    deadline = time.monotonic() + WAIT_S
    while not all("running on the C engine" in f.read_text() for f in logs):
        assert time.monotonic() < deadline, [f.read_text() for f in logs]
        time.sleep(0.05)
    assert _c_entries(cache) == entries and entries[0].stat().st_ino == inode

