"""Under ``make test TEST_JOBS=2`` the tests of modules with ``root`` tests run on one
pytest-xdist worker (tests/conftest.py): their Mininet networks share names and module
fixtures. With pytest 9.2 and xdist 3.8 xdist's own grouping was silently ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import _may_renice

REPO = Path(__file__).resolve().parent.parent

CONFTEST = """
from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the hook under test)
"""
INI = """[pytest]
markers =
    root: needs root
    netns: namespaces only
    xdist_group: xdist
"""
MODULE = """
import os
from pathlib import Path
import pytest
MARK
OUT = Path(OUTDIR)

def _note(name):
    (OUT / name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
""" + "".join(f"""
def test_PREFIX{i}():
    _note("PREFIX{i}")
""" for i in range(6))


def _run_suite(tmp_path: Path, conftest: str, modules: dict[str, str], *pytest_args: str,
               preexec_fn: Callable[[], object] | None = None) -> subprocess.CompletedProcess[str]:
    """Write a small suite (its conftest, the ini, ``modules`` by file name) under
    ``tmp_path/suite`` and run pytest on it with ``pytest_args``; it must pass."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(conftest)
    (suite / "pytest.ini").write_text(INI)
    for name, text in modules.items():
        (suite / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *pytest_args, str(suite)], cwd=suite, env=env, capture_output=True,
                         text=True, timeout=120, preexec_fn=preexec_fn)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


ROOT_MARK = "pytestmark = pytest.mark.root"
NETNS_MARK = "pytestmark = [pytest.mark.root, pytest.mark.netns]"


def _modules(template: str, name_key: str, out: Path, marks: dict[str, str]) -> dict[str, str]:
    """One module from ``template`` per file name in ``marks``, with that ``MARK`` line
    (``OUTDIR`` and ``name_key`` filled in: the tests' names from the file's)."""
    return {name: template.replace("MARK", mark).replace("OUTDIR", repr(str(out)))
            .replace(name_key, name[5:-3]) for name, mark in marks.items()}


@pytest.mark.skipif(os.geteuid() != 0, reason="root tests are skipped when not root")
def test_root_modules_run_on_one_worker(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    modules = _modules(MODULE, "PREFIX", out,
                       {"test_net_a.py": ROOT_MARK, "test_net_b.py": "", "test_plain.py": ""})
    # one root test makes the whole module networked
    modules["test_net_b.py"] = modules["test_net_b.py"].replace(
        "def test_net_b0", "@pytest.mark.root\ndef test_net_b0")
    _run_suite(tmp_path, CONFTEST, modules, "-n", "2", "--dist", "loadgroup")
    workers = {f.name: f.read_text() for f in out.iterdir()}
    networked = {w for n, w in workers.items() if n.startswith(("net_a", "net_b"))}
    assert len(workers) == 18 and len(networked) == 1, workers
    assert networked != {"none"}  # they did run under xdist


@pytest.mark.skipif(os.geteuid() != 0, reason="root tests are skipped when not root")
def test_namespace_only_modules_run_beside_the_root_group(tmp_path: Path) -> None:
    """A module whose root tests are all ``netns`` is a group of its own, which starts on
    the other worker than the root group; one root test without ``netns`` keeps a module
    in the root group."""
    out = tmp_path / "out"
    out.mkdir()
    modules = _modules(MODULE, "PREFIX", out, {"test_net.py": ROOT_MARK, "test_ns.py": NETNS_MARK,
                                               "test_mixed.py": ROOT_MARK, "test_plain.py": ""})
    modules["test_mixed.py"] = modules["test_mixed.py"].replace(
        "def test_mixed0", "@pytest.mark.netns\ndef test_mixed0")
    _run_suite(tmp_path, CONFTEST, modules, "-n", "2", "--dist", "loadgroup")
    workers = {f.name: f.read_text() for f in out.iterdir()}
    root = {w for n, w in workers.items() if n.startswith(("net", "mixed"))}
    netns = {w for n, w in workers.items() if n.startswith("ns")}
    assert len(workers) == 24 and len(root) == len(netns) == 1, workers
    assert root != netns and "none" not in root | netns, workers


PRIORITY_CONFTEST = """
from tests.conftest import pytest_collection_modifyitems, pytest_runtest_setup  # noqa: F401
"""
PRIORITY_MODULE = """
import os
import subprocess
import sys
from pathlib import Path
import pytest
MARK
OUT = Path(OUTDIR)
""" + "".join(f"""
def test_NAME{i}():
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(0, 0))"],
                           capture_output=True, text=True, check=True)
    (OUT / "NAME{i}").write_text(f"{{os.getpriority(os.PRIO_PROCESS, 0)}} {{child.stdout}}")
""" for i in range(4))


@pytest.mark.skipif(not _may_renice(), reason="needs root with CAP_SYS_NICE")
def test_other_tests_run_nicer_than_the_root_group(tmp_path: Path) -> None:
    """Under xdist a test outside the root groups, and what it starts, runs
    ``OTHER_TESTS_NICE`` lower than the root groups' tests (Mininet's and the namespace
    group), which keep the session's own priority."""
    from tests.conftest import OTHER_TESTS_NICE

    out = tmp_path / "out"
    out.mkdir()
    modules = _modules(PRIORITY_MODULE, "NAME", out,
                       {"test_net.py": ROOT_MARK, "test_ns.py": NETNS_MARK, "test_plain.py": ""})
    base = os.getpriority(os.PRIO_PROCESS, 0)
    _run_suite(tmp_path, PRIORITY_CONFTEST, modules, "-n", "2", "--dist", "loadgroup")
    seen = {f.name: tuple(int(v) for v in f.read_text().split()) for f in out.iterdir()}
    other = min(base + OTHER_TESTS_NICE, 19)
    assert seen == {**{f"net{i}": (base, base) for i in range(4)},
                    **{f"ns{i}": (base, base) for i in range(4)},
                    **{f"plain{i}": (other, other) for i in range(4)}}, seen


SIGINT_CONFTEST = """
from tests.conftest import pytest_configure  # noqa: F401  (the hook under test)
"""
SIGINT_MODULE = """
import signal
import subprocess
import sys
import pytest

CHILD = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"

def test_sigint_interrupts():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                           check=True)
    assert child.stdout.strip() == "True"
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_suite_started_with_sigint_ignored_interrupts_as_usual(tmp_path: Path,
                                                                 workers: str) -> None:
    """``make test &`` in a script starts the suite with SIGINT ignored, which Python keeps
    and hands to every child: a fresh-clone run started so failed the tests that interrupt
    a run (``DID NOT RAISE KeyboardInterrupt``) and hung a cluster run. The suite gives
    SIGINT its handler back, in itself, its xdist workers and what they start."""
    res = _run_suite(tmp_path, SIGINT_CONFTEST, {"test_sigint.py": SIGINT_MODULE}, "-n", workers,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert "1 passed" in res.stdout, res.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="root tests are skipped when not root")
@pytest.mark.parametrize("workers", [["-n", "2", "--dist", "loadgroup"], ["-n", "0"]],
                         ids=["xdist", "serial"])
def test_the_summary_says_how_long_the_root_group_took(tmp_path: Path,
                                                       workers: list[str]) -> None:
    """``make test`` ends with the seconds of the root group (the critical path) and of the
    other tests, each test counted once, so a suite over its time says where to cut."""
    out = tmp_path / "out"
    out.mkdir()
    modules = _modules(MODULE, "PREFIX", out,
                       {"test_net_a.py": ROOT_MARK, "test_ns.py": NETNS_MARK, "test_plain.py": ""})
    res = _run_suite(
        tmp_path,
        "from tests.conftest import pytest_collection_modifyitems, pytest_configure  # noqa\n",
        modules, *workers)
    lines = [line for line in res.stdout.splitlines() if line.startswith("test time:")]
    assert len(lines) == 1, res.stdout
    assert lines[0].startswith("test time: root group "), lines
    assert " s in 6 tests; netns group " in lines[0], lines
    assert " s in 6 tests; other " in lines[0] and lines[0].count(" s in 6 tests") == 3, lines


def test_the_summary_says_nothing_when_no_test_ran(tmp_path: Path) -> None:
    """--collect-only (or a -k that selects nothing) ran no test: no empty "test time:" line."""
    modules = _modules(MODULE, "PREFIX", tmp_path, {"test_plain.py": ""})
    res = _run_suite(
        tmp_path,
        "from tests.conftest import pytest_collection_modifyitems, pytest_configure  # noqa\n",
        modules, "--collect-only")
    assert "test_plain.py" in res.stdout and "test time:" not in res.stdout, res.stdout
