"""The machine-wide root-network lock (tests/rootlock.py) and the names it protects.

Two suites on one machine collided (CI's run failed on ``twl1-eth3 already exists`` while
another ``make test`` ran a module with the same prefix): root modules now take turns through
one lock, and no two test modules share a name prefix.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HOLD = """
import sys
from pathlib import Path
from tests.rootlock import machine_lock
with machine_lock(sys.argv[1], Path(sys.argv[2])):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


def _hold(name: str, lock: Path, repo_root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", HOLD, name, str(lock)], cwd=repo_root,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_second_holder_waits_says_for_whom_and_gets_the_lock_after(tmp_path: Path,
                                                                   repo_root: Path) -> None:
    lock = tmp_path / "root.lock"
    first = _hold("tests/test_a.py", lock, repo_root)
    second = None
    try:
        assert first.stdout is not None and first.stdin is not None
        assert first.stdout.readline().strip() == "held"
        second = _hold("tests/test_b.py", lock, repo_root)
        assert second.stderr is not None and second.stdout is not None
        waiting = second.stderr.readline()
        waiting = waiting.strip() or second.stderr.readline()  # after a newline of its own
        assert f"[tests/test_b.py] waiting for {lock}, held by pid {first.pid}: " \
               "tests/test_a.py" in waiting
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() == "released"
        assert second.stdout.readline().strip() == "held"
        assert lock.read_text() == f"pid {second.pid}: tests/test_b.py\n"
        second.communicate("\n", timeout=30)
        assert second.returncode == 0
        assert lock.read_text() == ""  # released: nobody named as holder
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


SUITE_CONFTEST = """
from tests.conftest import _root_network_turn, pytest_collection_modifyitems  # noqa: F401
"""
SUITE_MODULE = """
import os
import pytest
MARK

def test_sees_the_locks():
    for suffix in ("", ".netns"):
        lock = os.environ["INA_TEST_LOCK"] + suffix
        text = open(lock).read() if os.path.exists(lock) else ""
        open(os.environ["OUT"] + "/NAME" + suffix, "w").write(text)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="root tests are skipped when not root")
def test_root_modules_run_holding_the_lock_and_others_do_not(tmp_path: Path,
                                                             repo_root: Path) -> None:
    """The suite's autouse fixture holds the lock around each module with a root test; a
    namespace-only module (``netns``) holds the second lock instead."""
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    (suite / "conftest.py").write_text(SUITE_CONFTEST)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    root: needs root\n"
                                      "    netns: namespaces only\n")
    for name, mark in (("test_net.py", "pytestmark = pytest.mark.root"), ("test_plain.py", ""),
                       ("test_ns.py", "pytestmark = [pytest.mark.root, pytest.mark.netns]")):
        (suite / name).write_text(SUITE_MODULE.replace("MARK", mark).replace("NAME", name))
    env = dict(os.environ, PYTHONPATH=str(repo_root), INA_TEST_LOCK=str(tmp_path / "lock"),
               OUT=str(out))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(suite)], cwd=suite, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (out / "test_net.py").read_text().startswith("pid ")
    assert (out / "test_net.py").read_text().endswith(f"{suite / 'test_net.py'}\n")
    assert (out / "test_ns.py.netns").read_text().endswith(f"{suite / 'test_ns.py'}\n")
    assert (out / "test_ns.py.netns").read_text().startswith("pid ")
    assert [(out / name).read_text() for name in (
        "test_net.py.netns", "test_ns.py", "test_plain.py", "test_plain.py.netns")] == [""] * 4


PREFIX_RE = re.compile(r'''(?:^PREFIX = |name_prefix=)f?["']([^"'{]+)''', re.M)


def test_no_two_test_modules_share_a_name_prefix(repo_root: Path) -> None:
    """Network names are ``<prefix><node>``: a prefix used by two modules gives two
    networks the same interfaces (the collision above was ``tw`` in two modules)."""
    owners: dict[str, set[str]] = {}
    for path in sorted((repo_root / "tests").glob("test_*.py")):
        for prefix in PREFIX_RE.findall(path.read_text()):
            owners.setdefault(prefix, set()).add(path.name)
    assert "tk" in owners and "tw" in owners  # the scan sees both kinds of literal
    shared = {p: sorted(m) for p, m in owners.items() if len(m) > 1}
    assert shared == {}


NETNS_RE = re.compile(r"^(?:pytestmark = |    |@)pytest\.mark\.netns\b", re.M)


def test_namespace_only_modules_build_no_mininet_network(repo_root: Path) -> None:
    """A ``netns`` module runs beside the Mininet modules under the other lock: it must not
    build a Mininet network, start a run or name its network by a fixed prefix, unless it
    does all of that on namespaced machines of its own (tests/machines.py: nodes, links and
    processes inside namespaces the module creates, nothing in the root namespace)."""
    netns = [path for path in sorted((repo_root / "tests").glob("test_*.py"))
             if NETNS_RE.search(path.read_text())]
    assert {"test_ports_vlan.py", "test_cluster.py"} <= {path.name for path in netns}
    wrong = {path.name: words for path in netns
             if "from tests.machines import" not in (text := path.read_text())
             and (words := [w for w in ("from mininet", "import mininet", "experiment.run",
                                        "PREFIX = ", "name_prefix=", "reliability")
                            if w in text])}
    assert wrong == {}


def test_a_module_on_namespaced_machines_runs_every_network_there(repo_root: Path) -> None:
    """What lets test_cluster.py run beside the Mininet modules: each of its runs goes through
    the lab's master namespace (``run_in_master``) with the lab's servers."""
    text = (repo_root / "tests" / "test_cluster.py").read_text()
    runs = text.count('"-m", "experiment.run"')
    assert runs >= 2
    assert text.count("lab.run_in_master(argv") == runs
    assert text.count('"--servers", ",".join(lab.addresses)') == runs
