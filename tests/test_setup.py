"""The project's set-up: the venv's imports, the Makefile targets, the set-up and test scripts,
and the benchmark harness."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import harness
from bench.bench_process import _rows_from

DEBIAN_MININET = Path("/usr/lib/python3/dist-packages/mininet")
VENV = Path(sys.prefix)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter of the running venv."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def _make(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(repo_root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_runs_in_project_venv(repo_root: Path) -> None:
    """The suite runs under the project's .venv with Python 3.11."""
    assert Path(sys.prefix).resolve() == (repo_root / ".venv").resolve()
    assert sys.version_info[:2] == (3, 11)


@pytest.mark.skipif(not DEBIAN_MININET.is_dir(), reason="Debian package 'mininet' is not installed")
def test_venv_imports_mininet_only() -> None:
    """The venv imports Debian's mininet without the rest of Debian's dist-packages."""
    proc = _python(
        """
        import os, sys
        import mininet.net, mininet.topo
        print(os.path.realpath(mininet.net.__file__))
        print("/usr/lib/python3/dist-packages" in sys.path)
        """
    )
    assert proc.returncode == 0, proc.stderr
    path, debian_on_path = proc.stdout.split()
    assert path == str(DEBIAN_MININET / "net.py")
    assert debian_on_path == "False"


def test_venv_imports_p4runtime_protos() -> None:
    """The P4Runtime and P4Info protos import and round-trip a message."""
    from p4.config.v1 import p4info_pb2
    from p4.v1 import p4runtime_pb2

    req = p4runtime_pb2.WriteRequest(device_id=1)
    req.updates.add().type = p4runtime_pb2.Update.INSERT
    assert p4runtime_pb2.WriteRequest.FromString(req.SerializeToString()) == req
    info = p4info_pb2.P4Info()
    info.tables.add().preamble.name = "MyIngress.ipv4_lpm"
    assert info.tables[0].preamble.name == "MyIngress.ipv4_lpm"


def test_venv_imports_p4runtime_shell() -> None:
    """p4runtime-shell's shell module imports (it pulls in IPython and grpc)."""
    proc = _python("import p4runtime_sh.shell as sh; print(callable(sh.setup))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_venv_imports_lark() -> None:
    """lark parses with an LALR grammar."""
    import lark

    parser = lark.Lark('start: "bit" "<" INT ">"\n%import common.INT\n%ignore " "', parser="lalr")
    assert parser.parse("bit < 9 >").children[0] == "9"


def test_venv_imports_scapy() -> None:
    """scapy builds a byte-exact Ethernet/IPv4/UDP frame."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    frame = bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP() / UDP())
    assert len(frame) == 14 + 20 + 8
    assert frame[12:14] == b"\x08\x00"


def test_requirements_match_venv(repo_root: Path) -> None:
    """Every pin in requirements.txt is the version installed in the venv."""
    wrong = []
    for line in (repo_root / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, pinned = line.partition("==")
        assert pinned, f"unpinned requirement: {line}"
        installed = importlib.metadata.version(name)
        if installed != pinned:
            wrong.append(f"{name}: pinned {pinned}, installed {installed}")
    assert wrong == []


def test_protobuf_stubs_match_the_installed_modules(repo_root: Path, tmp_path: Path) -> None:
    """typings/ is what scripts/protobuf_stubs.py makes of the installed P4Runtime modules
    (after a p4runtime upgrade: `make stubs`), and a fresh directory gets every stub."""
    script = str(repo_root / "scripts" / "protobuf_stubs.py")
    check = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stderr
    fresh = subprocess.run([sys.executable, script, "--out", str(tmp_path)], capture_output=True,
                           text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert (tmp_path / "p4" / "v1" / "p4runtime_pb2.pyi").is_file()
    assert (tmp_path / "p4" / "v1" / "__init__.pyi").is_file()
    assert not (tmp_path / "google" / "__init__.pyi").exists()  # google is a namespace


def test_console_script_installed() -> None:
    """`pip install -e .` put the softswitch console script into the venv."""
    assert (VENV / "bin" / "softswitch").is_file()
    eps = importlib.metadata.entry_points(group="console_scripts", name="softswitch")
    assert [ep.value for ep in eps] == ["softswitch.__main__:main"]


@pytest.mark.parametrize("target", ["setup", "test", "run", "bench", "lint", "stubs", "clean",
                                    "distclean", "toolchain", "toolchain-check"])
def test_make_target_exists(repo_root: Path, target: str) -> None:
    """Each documented make target exists (dry run)."""
    proc = _make(repo_root, "-n", target)
    assert proc.returncode == 0, proc.stderr


def test_make_run_passes_options(repo_root: Path) -> None:
    """`make run` turns the make variables into --topo/--spines/... arguments."""
    proc = _make(
        repo_root,
        "-n",
        "run",
        "topo=spineleaf",
        "spines=2",
        "leaves=3",
        "hosts=4",
        "target=softswitch",
        "bw=10",
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(
        r"-m experiment\.run --topo spineleaf --spines 2 --leaves 3 --hosts 4 "
        r"--target softswitch --bw 10\s*$",
        proc.stdout,
        re.MULTILINE,
    ), proc.stdout


def test_make_run_passes_the_baseline_and_its_window_start(repo_root: Path) -> None:
    """`make run baseline=roce cc_start=line`: the RoCE ring, windows started whole."""
    proc = _make(repo_root, "-n", "run", "baseline=roce", "cc_start=line", "settle=4")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"-m experiment\.run --settle 4 --baseline-transport roce "
                     r"--cc-start line\s*$", proc.stdout, re.MULTILINE), proc.stdout


def test_make_targets_write_bytecode_whatever_the_environment_says(repo_root: Path) -> None:
    """PYTHONDONTWRITEBYTECODE (set on the CI machine) does not reach what make starts: with it
    each pytest worker rewrote every test module's asserts again (10 s of CPU a worker)."""
    probe = 'probe: ; @echo "[$${PYTHONDONTWRITEBYTECODE-unset}]"'
    proc = subprocess.run(
        ["make", "--no-print-directory", "-s", "-C", str(repo_root), "--eval", probe, "probe"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.stdout.strip() == "[unset]", proc.stdout + proc.stderr


def test_make_clean_keeps_venv(repo_root: Path) -> None:
    """`make clean` does not touch .venv; `make distclean` does."""
    clean = _make(repo_root, "-n", "clean").stdout
    distclean = _make(repo_root, "-n", "distclean").stdout
    removed = [line for line in clean.splitlines() if line.startswith("rm ")]
    assert removed and not any(".venv" in line for line in removed)
    assert "rm -rf .venv" in distclean


def _stale_bytecode(repo_root: Path) -> list[str]:
    """The project's modules (its packages and tests/) without bytecode of their source as it
    is now: what every process importing them compiles again where nothing writes it."""
    sources = [p for d in repo_root.iterdir()
               if (d / "__init__.py").is_file() or d.name == "tests"
               for p in d.rglob("*.py")]
    stale = []
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        st = source.stat()
        header = cached.read_bytes()[:16] if cached.is_file() else b""
        want = (importlib.util.MAGIC_NUMBER, int(st.st_mtime) & 0xFFFFFFFF,
                st.st_size & 0xFFFFFFFF)
        if len(header) < 16 or (header[:4], *struct.unpack("<II", header[8:16])) != want:
            stale.append(str(source.relative_to(repo_root)))
    return stale


def test_setup_is_a_quiet_no_op_when_done(repo_root: Path) -> None:
    """A second scripts/setup.sh on a prepared checkout changes nothing and prints nothing;
    it leaves every module of the project compiled, also where PYTHONDONTWRITEBYTECODE is
    set (as on the CI machine, where every process the suite started compiled them again)."""
    stamp = VENV / ".requirements.sha256"
    want = hashlib.sha256((repo_root / "requirements.txt").read_bytes()).hexdigest()
    if not stamp.is_file() or stamp.read_text().strip() != want:
        pytest.skip("checkout not prepared by scripts/setup.sh (run `make setup` first)")
    proc = subprocess.run(
        ["bash", str(repo_root / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SETUP_SKIP_APT": "1", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert _stale_bytecode(repo_root) == []


def test_run_tests_reports_no_tests_as_failure(repo_root: Path) -> None:
    """scripts/run_tests.sh keeps pytest's exit 5 (nothing collected) and says so."""
    proc = subprocess.run(
        [
            "bash",
            str(repo_root / "scripts" / "run_tests.sh"),
            "tests/test_setup.py",
            "-k",
            "no_test_has_this_name",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=repo_root,
        # one process: what is tested is the exit status, and three xdist workers starting
        # up to collect nothing cost 20 s of the suite's CPU
        env={**os.environ, "TEST_JOBS": "1"},
    )
    assert proc.returncode == 5
    assert "collected no tests" in proc.stderr


@pytest.mark.parametrize(
    ("jobs", "cores", "expected"),
    [
        ("", 2, "-q -n 3 --dist loadgroup"),
        ("", 8, "-q -n 3 --dist loadgroup"),
        ("", 1, "-q tests"),
        ("1", 2, "-q tests"),
        ("2", 2, "-q -n 2 --dist loadgroup"),
    ],
)
def test_run_tests_runs_three_workers_by_default_on_two_cores(
    repo_root: Path, tmp_path: Path, jobs: str, cores: int, expected: str
) -> None:
    """make test runs three xdist workers where the machine has 2 cores or more (the two
    groups' and one that fills the CPU their networks leave idle; issue 29); TEST_JOBS
    overrides it, 1 runs serially."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nproc").write_text(f"#!/bin/sh\necho {cores}\n")
    (fake / "nproc").chmod(0o755)
    env = {**os.environ, "RUN_TESTS_PRINT": "1", "TEST_JOBS": jobs,
           "PATH": f"{fake}:{os.environ['PATH']}", "CI": ""}
    proc = subprocess.run(["bash", str(repo_root / "scripts" / "run_tests.sh"), "tests"],
                          capture_output=True, text=True, timeout=30, cwd=repo_root, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f".venv/bin/python -m pytest {expected}" + (
        " tests" if "-n" in expected else "")


def test_run_tests_refuses_a_bad_job_count(repo_root: Path) -> None:
    env = {**os.environ, "RUN_TESTS_PRINT": "1", "TEST_JOBS": "two"}
    proc = subprocess.run(["bash", str(repo_root / "scripts" / "run_tests.sh")],
                          capture_output=True, text=True, timeout=30, cwd=repo_root, env=env)
    assert proc.returncode == 2
    assert "TEST_JOBS must be a whole number >= 1, got 'two'" in proc.stderr


def test_ci_script_is_strict(repo_root: Path) -> None:
    """.ci/run is bash with `set -euo pipefail` and runs `make test`."""
    text = (repo_root / ".ci" / "run").read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert "make test" in text


def test_bench_discovers_modules() -> None:
    """The benchmark harness finds the engine and process benchmarks."""
    names = harness.discover()
    assert {"bench_engine", "bench_process"} <= set(names)


def _write_bench_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A throw-away benchmark package with a skipping, a failing and a working module."""
    pkg = tmp_path / "fakebench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bench_skips.py").write_text(
        "from bench.harness import BenchSkipped\n"
        "def run():\n    raise BenchSkipped('engine missing')\n"
    )
    (pkg / "bench_broken.py").write_text("def run():\n    return {'not': 'a list'}\n")
    (pkg / "bench_ok.py").write_text(
        "def run(seconds=1.0):\n"
        "    return [{'name': 'x', 'metric': 'throughput', 'value': seconds * 1000.0,"
        " 'unit': 'pkt/s'}]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakebench"


def test_bench_run_module_outcomes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A skip, a malformed result and good rows are each recorded, never raised."""
    package = _write_bench_package(tmp_path, monkeypatch)
    assert harness.discover(tmp_path / package) == ["bench_broken", "bench_ok", "bench_skips"]
    skipped = harness.run_module("bench_skips", package=package)
    assert (skipped.skipped, skipped.error, skipped.rows) == ("engine missing", None, [])
    broken = harness.run_module("bench_broken", package=package)
    assert broken.error == "TypeError: bench_broken.run() must return a list of dicts, got dict"
    ok = harness.run_module("bench_ok", seconds=2.5, package=package)
    assert ok.rows == [
        {"name": "x", "metric": "throughput", "value": 2500.0, "unit": "pkt/s", "notes": ""}
    ]


def test_bench_report_markdown() -> None:
    """The report lists the machine, the command, a results table and the skipped modules."""
    results = [
        harness.BenchResult(
            "bench_a",
            rows=[
                {
                    "name": "p",
                    "metric": "throughput",
                    "value": 12345.6,
                    "unit": "pkt/s",
                    "notes": "a|b",
                }
            ],
        ),
        harness.BenchResult("bench_b", skipped="needs root"),
    ]
    machine = {"cpu": "Test CPU", "cores": "2", "kernel": "Linux 6", "python": "CPython 3.11.7"}
    text = harness.render_markdown(results, machine, "python -m bench", "2025-01-01 00:00 UTC")
    assert text == (
        "# Benchmarks\n\n"
        "Generated by `make bench` (`python -m bench`); do not edit by hand.\n\n"
        "## Machine\n\n"
        "- cpu: Test CPU\n- cores: 2\n- kernel: Linux 6\n- python: CPython 3.11.7\n"
        "- date: 2025-01-01 00:00 UTC\n- command: `python -m bench`\n\n"
        "## Results\n\n"
        "| module | name | metric | value | unit | notes |\n"
        "| --- | --- | --- | ---: | --- | --- |\n"
        "| bench_a | p | throughput | 12,346 | pkt/s | a\\|b |\n\n"
        "## Not run\n\n"
        "- bench_b: skipped: needs root\n"
    )


def test_bench_process_rows_from_metric_dict() -> None:
    """A metrics dict from bench.process_rig.run() becomes one row per metric."""
    rows = _rows_from({"pkts_per_s": 900.0, "p99_us": 250.0, "label": "x"}, 3.0)
    assert [(r["metric"], r["value"], r["unit"]) for r in rows] == [
        ("pkts_per_s", 900.0, "pkt/s"),
        ("p99_us", 250.0, "us"),
    ]
