"""``make run topo=<file>`` on the shipped fat-tree (needs root): exact in-network and ring
all-reduces through a three-level aggregation tree, leaf -> aggregation -> core.

Kept small for CI: k = 2 (2 leaves, 2 aggregation switches, 1 core; 4 hosts) and 1024 float32
per worker. Node names carry the prefix ``tt``; gRPC ports are found free at run time; the
switches' interfaces are removed even when the run fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import stackdump
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.nodes import free_port_base
from topo.rundir import read_cmdline, read_pids

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
]

PREFIX = "tt"
SWITCHES = [f"{PREFIX}{n}" for n in ("l1", "l2", "a1", "a2", "c1")]


def _free_base(count: int) -> int:
    """A base port with ``count`` free ports after it."""
    return free_port_base(count, 26000)


@pytest.fixture(autouse=True)
def _no_leftover_interfaces() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces(SWITCHES))


def test_fattree_file_runs_exact_allreduces_through_three_levels(tmp_path: Path,
                                                                 repo_root: Path) -> None:
    """`python -m experiment.run --topo topo/files/fattree.yaml --param k=2`: the job's tree is
    leaf -> aggregation -> core, both all-reduces are exact, `job show` prints the tree, and
    nothing is left behind."""
    rundir = tmp_path / "run"
    argv = [sys.executable, "-m", "experiment.run", "--topo",
            str(repo_root / "topo/files/fattree.yaml"),
            "--param", "k=2", "--target", "softswitch", "--no-cli", "--link-check-seconds", "0",
            "--tdf", "1",
            "--elements", "1024",
            "--name-prefix", PREFIX, "--grpc-port", str(_free_base(len(SWITCHES))),
            "--rundir", str(rundir)]
    proc = stackdump.run(argv, 300, cwd=repo_root, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((rundir / "results" / "experiment.json").read_text())
    assert [(r["algorithm"], r["exact"]) for r in data["runs"]] == [
        ("innetwork", True),
        ("ring", True),
    ]
    parts = data["job"]["parts"]
    assert data["job"]["root"] == f"{PREFIX}c1"
    assert {name: (p["level"], p["parent"]) for name, p in parts.items()} == {
        f"{PREFIX}c1": (0, None),
        f"{PREFIX}a1": (1, f"{PREFIX}c1"), f"{PREFIX}a2": (1, f"{PREFIX}c1"),
        f"{PREFIX}l1": (2, f"{PREFIX}a1"), f"{PREFIX}l2": (2, f"{PREFIX}a2")}
    # the in-network all-reduce crossed the core: partials up and results down both ports
    core = [u for u in data["runs"][0]["links"] if u["switch"] == f"{PREFIX}c1"]
    assert len(core) == 2 and all(u["rx_bytes"] > 0 and u["tx_bytes"] > 0 for u in core)
    topology = json.loads((rundir / "topology.json").read_text())
    assert topology["kind"] == "fattree" and topology["extra"]["params"]["k"] == 2
    assert [s["role"] for s in topology["switches"]] == [
        "leaf",
        "leaf",
        "aggregation",
        "aggregation",
        "core",
    ]
    show = subprocess.run([sys.executable, "-m", "controller", "--rundir", str(rundir), "job",
                           "show", "allreduce"], cwd=repo_root, capture_output=True, text=True,
                          timeout=60)
    assert show.returncode == 0, show.stderr
    lines = [ln.strip() for ln in show.stdout.splitlines()]
    tree = [ln for ln in show.stdout.splitlines() if ": level " in ln]
    assert tree[0].strip().startswith(f"{PREFIX}c1: level 0")
    assert any(ln.startswith(f"{PREFIX}l1: level 2") for ln in lines)
    owner_records = read_pids(rundir / "pids.json")[1]
    assert switch_interfaces(SWITCHES) == []
    assert [r.pid for r in owner_records if read_cmdline(r.pid) == list(r.cmdline)] == []
