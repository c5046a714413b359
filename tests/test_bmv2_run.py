"""``make run``'s non-interactive path on BMv2, for both topologies (root; BMv2 installed).

``python -m experiment.run --target bmv2 --no-cli`` must run the same job as on the built-in target
and print the same summary, with both all-reduces exact and, with no loss configured, nothing
lost: the switches' job counters (saved in experiment.json) show every in-network
retransmission (a probe after a timer fired while BMv2 was starved of CPU on a loaded
machine) arriving as a duplicate, and every slot getting each member's contribution once.
Before BMv2's ports had their offloads turned off (``topo.nodes.pcap_ring_offloads_off``) its
8-frame receive rings dropped hundreds of packets per run. Node names carry a per-process
prefix, gRPC and Thrift ports are found free at run time, ``experiment.run`` is stopped with
SIGTERM (it then takes its network down) if it overruns, and leftover interfaces of our
switches are removed after each test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

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
def test_make_run_on_bmv2_is_exact_without_retransmissions(topo: str, tmp_path: Path,
                                                           repo_root: Path) -> None:
    """Both all-reduces exact on BMv2, the same job and summary lines as on the built-in
    target, no loss seen by the in-network transport (no NAK, no timeout that was not
    spurious) with none configured, Thrift ports recorded, nothing left behind."""
    rundir = tmp_path / "run"
    base = free_port_block(8)
    proc = run_topo(["--topo", topo, "--target", "bmv2", "--no-cli", "--tdf", "1",
                     "--link-check-seconds", "0", "--elements", str(ELEMENTS),
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
    # the agents waited at least as BMv2's queue needs (experiment.session.TARGET_TIMERS),
    # and longer where a window takes longer to leave the host (3 Mbit/s: 256 packets in
    # 0.75 s, experiment.dilation.timer_bounds)
    low, high = runs["innetwork"]["timers"]
    assert low >= 0.5 and high == pytest.approx(max(1.0, 2 * low))
    assert runs["ring"]["timers"] == [None, None]
    retx = sum(rank["retransmissions"] for rank in ranks)
    assert rows["innetwork"][3].split()[0] == str(retx)
    # nothing is lost with no loss configured: no receiver saw a gap (NAK), and every
    # retransmission (a probe after a timer fired while BMv2, starved of CPU on a loaded
    # machine, worked through the window) reached the workers' switches as a duplicate;
    # every slot got each member's contribution exactly once, at every switch
    assert sum(r["naks"] for r in ranks) == 0
    counters = runs["innetwork"]["switch_counters"]
    parts = data["job"]["parts"]
    assert sorted(counters) == sorted(parts)
    at_workers = {w["switch"] for w in data["job"]["workers"]}
    duplicates = sum(counters[s]["duplicates"] for s in at_workers)
    resent = sum(r["retransmissions_all"] for r in ranks)  # barrier and final drain too
    assert resent >= retx
    assert resent == duplicates, (f"{resent} in-network retransmissions, {duplicates} "
                                  f"duplicates at the workers' switches: packets were lost "
                                  f"({counters})")
    completions = {c["completions"] for c in counters.values()}
    assert len(completions) == 1 and completions.pop() > 0, counters
    for name, c in counters.items():
        assert c["contributions"] == parts[name]["expected"] * c["completions"], (name, c)
        assert not set(c["drops"]) - {"repeat_result"}, (name, c["drops"])

    topology = json.loads((rundir / "topology.json").read_text())
    assert topology["target"] == "bmv2"
    assert sorted(s["thrift_port"] for s in topology["switches"]) == [
        base + 4 + i for i in range(len(SWITCHES[topo]))]
    _owner, records = read_pids(rundir / "pids.json")
    assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
    assert switch_interfaces([PREFIX + s for s in SWITCHES[topo]]) == []
