"""``make run topo=spineleaf`` under time dilation: does the run show the paper's effect?

For each setting, ``REPEATS`` runs of ``python -m experiment.run --topo spineleaf --no-cli``
(make run's defaults otherwise), the settings alternating so machine noise hits all alike:

- the defaults (3 Mbit/s links) at TDF 1, the undilated "before";
- the defaults with ``tdf=auto``;
- the papers' network, ``bw=100G delay=2us`` with ``tdf=auto``;
- on BMv2 too where simple_switch_grpc and p4c are installed (its 100G/2us row needs netem
  or delay nodes for BMv2 links; it is left out with the reason when the run is refused).
  BMv2 is the ``simple_switch_grpc`` first on ``PATH`` (docs/setup.md: the performance
  build beside the default one).

``INA_BENCH_VTIME_SETTINGS`` (``;``-separated ``target/setting`` names as in the rows, e.g.
``softswitch/bw=100G delay=2us, tdf=auto``; a prefix is enough) runs only those settings.
A run has ``RUN_TIMEOUT_S`` of real time (a 100 Gbit/s run on BMv2 is dilated some 10^5
times: minutes of real time per all-reduce).

Rows per setting: the TDF chosen, ring / in-network against the frame-size ideal (the share
of it, the done-when is >= 0.95 in every run), how many runs were link-bound, faithful (the
fidelity guard) and exact, in-network retransmissions, and the real seconds of the
in-network all-reduce. Needs root. The calibration cache is the machine's own (the first
run of a setting calibrates).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_makerun import make_run
from bench.harness import BenchSkipped

REPEATS = 5
RUN_TIMEOUT_S = 1200.0
SETTINGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("defaults, TDF 1", "softswitch", ("--tdf", "1")),
    ("defaults, tdf=auto", "softswitch", ()),
    ("bw=100G delay=2us, tdf=auto", "softswitch", ("--bw", "100G", "--delay", "2us")),
    ("defaults, TDF 1", "bmv2", ("--tdf", "1")),
    ("defaults, tdf=auto", "bmv2", ()),
    ("bw=100G delay=2us, tdf=auto", "bmv2", ("--bw", "100G", "--delay", "2us")),
)


def summarize(data: dict[str, Any]) -> dict[str, float]:
    """What one experiment.json says of the question."""
    from experiment.run import ideal_ratio

    runs = {r["algorithm"]: r for r in data["runs"]}
    inn, ring = runs["innetwork"], runs["ring"]
    job = data["job"]
    spine = any(part.get("role") == "leaf" for part in job.get("parts", {}).values())
    msg_pkts = int(job["msg_pkts"])
    _, framed = ideal_ratio(len(inn["ranks"]), data["elems"], spine, msg_pkts,
                            int(job["credits"]) * msg_pkts)
    ratio = ring["seconds"] / inn["seconds"]
    return {
        "tdf": float(inn["tdf"]),
        "ratio": ratio,
        "share": ratio / framed if framed else float("nan"),
        "link_bound": float(all(_link_bound(r) for r in (inn, ring))),
        "faithful": float(all(r["fidelity"]["faithful"] for r in (inn, ring))),
        "exact": float(data["exact"]),
        "retx": float(sum(r["retransmissions"] for r in inn["ranks"])),
        "real_s": float(inn["real_seconds"]),
    }


def _link_bound(run: dict[str, Any]) -> bool:
    from experiment.run import LINK_BOUND_RUN_UTILIZATION

    utils = [u["utilization"] for u in run["links"] if u.get("utilization") is not None]
    return bool(utils) and max(utils) >= LINK_BOUND_RUN_UTILIZATION


METRICS = (  # key, metric, unit, format of one run in the notes
    ("tdf", "TDF", "x", "{:g}"),
    ("ratio", "ring / in-network", "x", "{:.2f}"),
    ("share", "ring / in-network, share of the frame-size ideal", "x", "{:.3f}"),
    ("link_bound", "runs with both all-reduces link-bound", "share", "{:.0f}"),
    ("faithful", "runs faithful (fidelity guard)", "share", "{:.0f}"),
    ("exact", "runs exact", "share", "{:.0f}"),
    ("retx", "in-network retransmissions", "pkt", "{:.0f}"),
    ("real_s", "in-network all-reduce, real time", "s", "{:.2f}"),
)


def _chosen_settings(bmv2: bool) -> list[tuple[str, str, tuple[str, ...]]]:
    """The settings to run: BMv2's only where it is installed, and only those
    ``INA_BENCH_VTIME_SETTINGS`` names (target/name prefixes, ';'-separated) when set."""
    settings = [s for s in SETTINGS if s[1] == "softswitch" or bmv2]
    chosen = [c.strip() for c in os.environ.get("INA_BENCH_VTIME_SETTINGS", "").split(";")
              if c.strip()]
    if chosen:
        settings = [s for s in settings if any(f"{s[1]}/{s[0]}".startswith(c) for c in chosen)]
        if not settings:
            raise BenchSkipped(f"INA_BENCH_VTIME_SETTINGS={';'.join(chosen)} names no setting")
    return settings


def run() -> list[dict[str, Any]]:
    """All rows (see the module docstring)."""
    if os.geteuid() != 0:
        raise BenchSkipped("needs root (Mininet)")
    bmv2 = all(shutil.which(b) for b in ("simple_switch_grpc", "p4c"))
    settings = _chosen_settings(bmv2)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    refused: dict[tuple[str, str], str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-vtime-") as tmp:
        for rep in range(REPEATS):
            for name, target, extra in settings:
                if (name, target) in refused:
                    continue
                rundir = Path(tmp) / f"{target}-{rep}-{time.monotonic_ns()}"
                try:
                    data = make_run("spineleaf", target, rundir, extra, RUN_TIMEOUT_S)
                except RuntimeError as exc:
                    refused[(name, target)] = str(exc)[-200:]
                    continue
                results.setdefault((name, target), []).append(summarize(data))
    out = []
    for (name, target), runs in results.items():
        for key, metric, unit, fmt in METRICS:
            values = [r[key] for r in runs]
            value = statistics.fmean(values)
            out.append({"name": f"make run spineleaf on {target}, {name}", "metric": metric,
                        "value": value, "unit": unit,
                        "notes": f"{len(values)} runs: {', '.join(fmt.format(v) for v in values)}"})
    for (name, target), why in refused.items():
        out.append({"name": f"make run spineleaf on {target}, {name}", "metric": "refused",
                    "value": float("nan"), "unit": "", "notes": why})
    if not bmv2:
        out.append({"name": "make run spineleaf on bmv2", "metric": "not run",
                    "value": float("nan"), "unit": "",
                    "notes": "simple_switch_grpc or p4c not installed"})
    return out
