"""``make run``'s non-interactive path on BMv2, for both topologies (root; BMv2 installed).

``python -m experiment.run --target bmv2 --no-cli`` must run the same job as on the built-in target
and print the same summary, with both all-reduces exact and, with no loss configured, no
in-network retransmission caused by a loss (a timer firing late on a loaded machine is told
apart by the transport as spurious). Node names carry a per-process prefix, gRPC and Thrift ports
are found free at run time, ``experiment.run`` is stopped with SIGTERM (it then takes its network
down) if it overruns, and leftover interfaces of our switches are removed after each test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests.bmv2 import free_port_block, missing_binaries, run_topo, skip_reason
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.rundir import read_cmdline, read_pids

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(bool(missing_binaries()), reason=skip_reason()),
]

PREFIX = f"b{os.getpid() % 100}"
SWITCHES = {"rack": ["s1"], "spineleaf": ["l1", "l2", "sp1", "sp2"]}
ELEMENTS = 16384  # float32 per worker: a quarter of make run's default, same packets and window


@pytest.fixture(autouse=True)
def _no_leftover_interfaces() -> Iterator[None]:
    yield
    remove_interfaces(switch_interfaces([PREFIX + s for names in SWITCHES.values()
                                         for s in names]))


def _rows(stdout: str) -> dict[str, list[str]]:
    """The all-reduce table's first line per algorithm: {algorithm: cells}."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] in ("innetwork", "ring") and cells[0] not in rows:
            rows[cells[0]] = cells
    return rows


@pytest.mark.parametrize("topo", ["rack", "spineleaf"])
def test_make_run_on_bmv2_is_exact_without_retransmissions(topo, tmp_path, repo_root) -> None:
    """Both all-reduces exact on BMv2, the same job and summary lines as on the built-in
    target, no loss seen by the in-network transport (no NAK, no timeout that was not
    spurious) with none configured, Thrift ports recorded, nothing left behind."""
    rundir = tmp_path / "run"
    base = free_port_block(8)
    proc = run_topo(["--topo", topo, "--target", "bmv2", "--no-cli", "--elements", str(ELEMENTS),
                     "--name-prefix", PREFIX, "--grpc-port", str(base),
                     "--thrift-port", str(base + 4), "--rundir", str(rundir)],
                    repo_root, timeout_s=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = " ".join(proc.stdout.split())  # rich wraps lines without a terminal
    workers = 4
    parts = {"rack": f"{PREFIX}s1 (root)",
             "spineleaf": f"{PREFIX}l1 (leaf), {PREFIX}l2 (leaf), {PREFIX}sp1 (root)"}[topo]
    assert (f"aggregation job allreduce (id 0): {workers} workers, {ELEMENTS} float32 each; "
            f"switches {parts}") in text
    assert f"ideal 2(P-1)/P = 1.50 for P = {workers}" in text
    assert "NOT exact" not in text and f"{topo} on bmv2" in text

    rows = _rows(proc.stdout)
    assert (rows["innetwork"][1], rows["ring"][1]) == ("exact", "exact")
    data = json.loads((rundir / "results" / "experiment.json").read_text())
    assert data["exact"] is True
    runs = {r["algorithm"]: r for r in data["runs"]}
    ranks = runs["innetwork"]["ranks"]
    retx = sum(rank["retransmissions"] for rank in ranks)
    assert rows["innetwork"][3].split()[0] == str(retx)
    # nothing is lost on these links: no receiver saw a gap (NAK), and a timer may only fire
    # while BMv2 (starved of CPU on a loaded machine) works through the window: the transport
    # then knows it was spurious (results beyond the probe arrived), or cannot know because
    # the probe was the only packet in flight; such a probe is the only retransmission
    assert sum(r["naks"] for r in ranks) == 0
    lost = sum(max(0, r["timeouts"] - r["spurious_timeouts"] - r["lone_timeouts"])
               for r in ranks)
    assert lost == 0, (f"{retx} in-network retransmissions after {lost} losses seen on BMv2 "
                       "with no loss configured")
    assert retx <= sum(r["timeouts"] for r in ranks), "more than one probe per timeout"

    topology = json.loads((rundir / "topology.json").read_text())
    assert topology["target"] == "bmv2"
    assert sorted(s["thrift_port"] for s in topology["switches"]) == [
        base + 4 + i for i in range(len(SWITCHES[topo]))]
    _owner, records = read_pids(rundir / "pids.json")
    assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
    assert switch_interfaces([PREFIX + s for s in SWITCHES[topo]]) == []
