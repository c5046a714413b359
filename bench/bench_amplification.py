"""What one lost leaf-to-spine packet costs (issue 16, finding 4), before and after.

Spine-leaf of :mod:`bench.netreduce_soak` (two leaves of two workers, one spine), one
one-packet message per worker. Leaf 0's partial is lost; then each of leaf 0's workers
retransmits ``r`` times before the spine's answer is back (the answers are delivered
after all retransmissions, as when they cross a slow uplink). Counted: every packet the
three switches send from the first retransmission on. The least that can be is 7: leaf
0's partial once more, the spine's result to each leaf, each leaf's result to its two
workers. The switches share one clock, advanced by a worker timeout (10 ms) after the
loss, so the result does not depend on the machine's speed.

Both variants run in the same process: the program as this checkout has it, and the
program at ``BEFORE`` (the last commit before the fix), read with ``git show``; the
latter is skipped when git or that commit is not available.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped
from bench.netreduce_job import REPO, program
from bench.netreduce_soak import ELEMS, SW_MAC, UPLINK, SpineLeaf
from protocol import netreduce as nr

BEFORE = "ddc8c54"
FILES = ("p4src/netreduce.p4", "p4src/include/nr_headers.p4", "p4src/include/nr_elems.p4")


def lost_uplink_cost(program_path: str, retransmissions: int) -> int:
    """Packets the switches send for one message when leaf 0's partial is lost once."""
    from workloads.netreduce_headers import worker_packet

    net = SpineLeaf(loss=0.0, reorder=0.0, egress_order="sync", program_path=program_path)
    now = [10**9]
    for pipe in (*net.leaves, net.spine):
        pipe.set_clock(lambda: now[0])
    frames = []
    for k, w in enumerate(net.job.workers):
        peer = net.job.worker(w.peer)
        frames.append(bytes(worker_packet(
            src_mac=net.hosts[k].mac, dst_mac=SW_MAC, src_ip=w.ip, dst_ip=peer.ip,
            sport=w.sport, dqpn=peer.recv_qpn, psn=100 * k, pkt_idx=0, npkts=1,
            elems=[k + 1] * ELEMS, job=1, msg=0, slot=0, rank=w.position)))
    leaf0 = net.leaves[0]
    net._insert(leaf0, nr.PortLossNames.EGRESS, [UPLINK], nr.PortLossNames.EGRESS_ACTION,
                [65536])
    for k in range(4):
        net.process(net.hosts[k].port, frames[k])
    leaf0.tables[nr.PortLossNames.EGRESS].clear()
    now[0] += 10_000_000  # a worker timeout later
    sent = 0
    uplink: list[bytes] = []
    for _ in range(retransmissions):
        for k in (0, 1):
            for port, frame in leaf0.process(1 + k, frames[k]):
                sent += 1
                if port == UPLINK:
                    uplink.append(frame)
    for frame in uplink:
        for port, down in net.spine.process(1, frame):
            sent += 1
            sent += len(net.leaves[port - 1].process(UPLINK, down))
    return sent


def _old_program(tmp: Path) -> Path | None:
    for name in FILES:
        res = subprocess.run(["git", "-C", str(REPO), "show", f"{BEFORE}:{name}"],
                             capture_output=True, text=True)
        if res.returncode != 0:
            return None
        out = tmp / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(res.stdout)
    return tmp / FILES[0]


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        old = _old_program(Path(tmp))
        variants = [("after", str(program()))] + (
            [("before", str(program(source=old, dest=Path(tmp) / "before")))] if old else [])
        if not old:
            raise BenchSkipped(f"commit {BEFORE} (the program before the fix) not in git")
        for r in (1, 3, 5):
            for name, path in variants:
                rows.append({
                    "name": f"lost uplink packet, {name} (issue 16)",
                    "metric": f"switch packets after {r} retransmission(s) per worker",
                    "value": lost_uplink_cost(path, r), "unit": "pkt",
                    "notes": "spine-leaf, 2 workers per leaf, leaf 0's partial lost; "
                             f"'before' = netreduce.p4 at {BEFORE}",
                })
    return rows
