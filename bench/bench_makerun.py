"""``make run`` on the built-in target and on BMv2, side by side, for both topologies.

Each run is ``python -m experiment.run --topo T --target X --no-cli`` with make run's defaults
(65,536 float32 per worker, E 252, 4 credits x 64 packets, 3 Mbit/s links, no loss):
the same job, in-network then ring. Rows per topology and target: in-network and ring time,
the ring / in-network ratio, in-network retransmissions, the packets lost (retransmissions
that did not reach the workers' switches as duplicates, from the switches' job counters in
experiment.json: with no loss configured there should be none), whether every result was
exact, the busiest switch process's CPU, and the switch processes' CPU time per aggregated
packet (all switches' CPU during the in-network all-reduce over the contributions they
added: what one packet costs a target's pipeline). The targets
alternate (rack softswitch, rack bmv2, spine-leaf softswitch, spine-leaf bmv2, then again),
so machine noise hits both alike; the rows are the mean of ``REPEATS`` runs and the notes give
each run's value.

Needs root and BMv2 (``simple_switch_grpc``, ``p4c``, ``simple_switch_CLI``); skipped
otherwise. About 12 minutes (p4c takes ~40 s of each BMv2 run).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = ("rack", "spineleaf")
TARGETS = ("softswitch", "bmv2")
REPEATS = 3
RUN_TIMEOUT_S = 400.0
PREFIX = "bt"


def _free_base(count: int) -> int:
    """A base port with ``count`` consecutive free ports on 127.0.0.1."""
    from topo.nodes import free_port_base

    return free_port_base(count, 16500)


def make_run(topo: str, target: str, rundir: Path, extra: Sequence[str] = (),
             timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """One ``experiment.run`` (with ``extra`` options); its experiment.json (raises when it
    failed or overran)."""
    base = _free_base(8)
    argv = [sys.executable, "-m", "experiment.run", "--topo", topo, "--target", target, "--no-cli",
            "--name-prefix", PREFIX, "--grpc-port", str(base), "--thrift-port", str(base + 4),
            "--rundir", str(rundir), *extra]
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()  # experiment.run takes its network down on SIGTERM
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        raise RuntimeError(f"{topo} on {target}: no result within {timeout_s:g} s") from None
    result = rundir / "results" / "experiment.json"
    if not result.is_file():
        raise RuntimeError(f"{topo} on {target}: exit {proc.returncode}: {out.strip()[-300:]}")
    return json.loads(result.read_text())


def summarize(data: dict[str, Any]) -> dict[str, float]:
    """Times (ms), ratio, retransmissions, exactness and switch CPU of one experiment.json."""
    runs = {r["algorithm"]: r for r in data["runs"]}
    inn, ring = runs["innetwork"], runs["ring"]
    inn_s = max(r["seconds"] for r in inn["ranks"])
    ring_s = max(r["seconds"] for r in ring["ranks"])
    cpu = max(list(inn["switch_cpu"].values()) + list(ring["switch_cpu"].values()), default=0.0)
    retx = sum(r["retransmissions"] for r in inn["ranks"])
    # every retransmission of the agents (barrier and final drain too): what reaches the switches
    resent = sum(r.get("retransmissions_all", r["retransmissions"]) for r in inn["ranks"])
    counters = inn.get("switch_counters") or {}
    at_workers = {w["switch"] for w in data.get("job", {}).get("workers", [])}
    duplicates = sum(c["duplicates"] for s, c in counters.items() if s in at_workers)
    contributions = sum(c["contributions"] for c in counters.values())
    cpu_s = sum(inn["switch_cpu"].values()) * inn.get("wall_seconds", 0.0)
    return {
        "innetwork_ms": inn_s * 1e3,
        "ring_ms": ring_s * 1e3,
        "ratio": ring_s / inn_s if inn_s > 0 else float("nan"),
        "retx": float(retx),
        # without the switches' counters (an older experiment.json): the transport's view,
        # NAKs and timeouts not known to be spurious or lone
        "lost": float(max(0, resent - duplicates) if counters else sum(
            r.get("naks", 0) + max(0, r.get("timeouts", 0) - r.get("spurious_timeouts", 0)
                                   - r.get("lone_timeouts", 0)) for r in inn["ranks"])),
        "switch_dups": float(duplicates),
        "cpu_per_pkt": cpu_s * 1e3 / contributions if contributions else float("nan"),
        "exact": 1.0 if data["exact"] else 0.0,
        "cpu": cpu * 100,
    }


METRICS = (  # key, metric, unit, format of one run in the notes
    ("innetwork_ms", "in-network time", "ms", "{:.0f}"),
    ("ring_ms", "ring time", "ms", "{:.0f}"),
    ("ratio", "ring / in-network", "x", "{:.2f}"),
    ("retx", "in-network retransmissions", "pkt", "{:.0f}"),
    ("lost", "in-network packets lost", "pkt", "{:.0f}"),
    ("switch_dups", "duplicates at the workers' switches", "pkt", "{:.0f}"),
    ("exact", "runs exact", "share", "{:.0f}"),
    ("cpu", "busiest switch CPU", "% of a core", "{:.0f}"),
    ("cpu_per_pkt", "switch CPU per aggregated packet", "ms", "{:.2f}"),
)


def rows(results: dict[tuple[str, str], list[dict[str, float]]]) -> list[dict[str, Any]]:
    """One row per (topology, target, metric): the mean, each run in the notes."""
    out = []
    for (topo, target), runs in results.items():
        for key, metric, unit, fmt in METRICS:
            values = [r[key] for r in runs]
            out.append({
                "name": f"make run {topo} on {target}", "metric": metric,
                "value": statistics.fmean(values), "unit": unit,
                "notes": (f"runs: {', '.join(fmt.format(v) for v in values)}; 65536 float32 x 4 "
                          "workers, E 252, 4 credits x 64 packets, 3 Mbit/s, no loss; "
                          "shared, loaded 2-core machine"),
            })
    return out


def run() -> list[dict[str, Any]]:
    """All rows (see the module docstring)."""
    if os.geteuid() != 0:
        raise BenchSkipped("needs root (Mininet)")
    missing = [b for b in ("simple_switch_grpc", "p4c", "simple_switch_CLI") if not shutil.which(b)]
    if missing:
        raise BenchSkipped(f"BMv2 toolchain not installed ({', '.join(missing)} not on PATH)")
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        for rep in range(REPEATS):
            for topo in TOPOLOGIES:
                for target in TARGETS:
                    rundir = Path(tmp) / f"{topo}-{target}-{rep}-{time.monotonic_ns()}"
                    data = make_run(topo, target, rundir)
                    results.setdefault((topo, target), []).append(summarize(data))
    return rows(results)
