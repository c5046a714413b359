"""The same programs on p4c, where installed (skipped with the reason where it is not).

These tests hold the built-in target's inputs to the real toolchain: every P4 program of the
project must compile with p4c for BMv2. ``make run`` on BMv2 is tests/test_bmv2_run.py, every
controller verb on BMv2 tests/test_bmv2_controller.py (docs/setup.md: how to install them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(
    [REPO / "p4src" / "netreduce.p4", *(REPO / "tests" / "p4").glob("*.p4")],
    key=lambda p: p.name,
)

needs_p4c = pytest.mark.skipif(
    shutil.which("p4c") is None, reason="p4c is not installed on this machine"
)
needs_bmv2 = pytest.mark.skipif(
    shutil.which("simple_switch_grpc") is None or shutil.which("p4c") is None,
    reason="BMv2 (simple_switch_grpc) and p4c are not both installed on this machine",
)


@needs_p4c
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_p4c_compiles_program_for_bmv2(program: Path, tmp_path: Path) -> None:
    """p4c accepts the program for BMv2 (v1model), as the built-in target does."""
    from tests.p4c_build import p4c_outputs

    built = p4c_outputs(program)  # P4cFailed with p4c's message when it refuses
    assert built.p4info and json.loads(built.json)["pipelines"]


def _program_with_include(src: Path) -> Path:
    """``src/prog.p4``, all of whose text is in the file it includes."""
    src.mkdir()
    (src / "body.p4").write_text((REPO / "tests" / "p4" / "port_forward.p4").read_text())
    (src / "prog.p4").write_text('#include "body.p4"\n')
    return src / "prog.p4"


def _record_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every command subprocess.run runs from now on, as its argv (p4c's compiles are those
    without -E and --version)."""
    runs: list[list[str]] = []
    real_run = subprocess.run

    def run(argv: list[str], *a: Any, **k: Any) -> subprocess.CompletedProcess[Any]:
        runs.append(argv)
        return real_run(argv, *a, **k)

    monkeypatch.setattr(subprocess, "run", run)
    return runs


def _compiles(runs: list[list[str]]) -> list[list[str]]:
    return [a for a in runs if "-E" not in a and "--version" not in a]


@needs_p4c
def test_p4c_cache_serves_the_same_program_elsewhere_with_its_own_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same files in another directory (another clone, worktree or run directory) are a
    hit, and what it writes is byte for byte what p4c writes there: the file names p4c puts
    in the BMv2 JSON are that directory's. Before, the names were part of the key and a
    fresh clone's suite ran p4c on every program again."""
    from topo import p4c_cache
    from topo.nodes import BMv2Switch

    monkeypatch.setenv(p4c_cache.ENV, str(tmp_path / "cache"))
    programs = [_program_with_include(tmp_path / name) for name in ("clone-a", "clone-b")]
    BMv2Switch.compile_program(programs[0], tmp_path / "a")
    runs = _record_runs(monkeypatch)
    hit = BMv2Switch.compile_program(programs[1], tmp_path / "b")
    assert _compiles(runs) == []
    assert hit.device_config is not None and hit.p4info is not None
    data, p4info = hit.device_config.read_bytes(), hit.p4info.read_text()
    assert str(programs[1].parent).encode() in data and b"clone-a" not in data
    shutil.rmtree(tmp_path / "b")
    monkeypatch.setenv(p4c_cache.ENV, "off")
    real = BMv2Switch.compile_program(programs[1], tmp_path / "b")  # p4c, in the same place
    assert real.device_config is not None and real.p4info is not None
    assert data == real.device_config.read_bytes()
    assert p4info == real.p4info.read_text()


@needs_p4c
def test_p4c_outputs_are_cached_by_the_preprocessed_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second compile of the same program (same includes and defines, same p4c) copies
    p4c's outputs from the cache instead of running p4c (~40 s for netreduce.p4 at E 252);
    a change in an included file is a miss; ``INA_P4C_CACHE=off`` turns the cache off."""
    from topo import p4c_cache
    from topo.nodes import BMv2Switch

    cache = tmp_path / "cache"
    monkeypatch.setenv(p4c_cache.ENV, str(cache))
    program = _program_with_include(tmp_path / "src")
    src = program.parent
    first = BMv2Switch.compile_program(program, tmp_path / "a")
    assert len(list(cache.iterdir())) == 1
    runs = _record_runs(monkeypatch)
    second = BMv2Switch.compile_program(program, tmp_path / "b")
    assert _compiles(runs) == []
    assert second.device_config is not None and first.device_config is not None
    assert second.p4info is not None and first.p4info is not None
    # the same but for the output directory (the JSON's "program": p4c's .p4i there)
    assert second.device_config.read_bytes() == first.device_config.read_bytes().replace(
        str(tmp_path / "a").encode(), str(tmp_path / "b").encode())
    assert second.p4info.read_text() == first.p4info.read_text()
    (src / "body.p4").write_text((src / "body.p4").read_text() + "\n// changed\n")
    BMv2Switch.compile_program(program, tmp_path / "c")
    assert len(list(cache.iterdir())) == 2  # the include changed: compiled and stored anew
    monkeypatch.setenv(p4c_cache.ENV, "off")
    runs.clear()
    BMv2Switch.compile_program(program, tmp_path / "d")
    assert _compiles(runs)
