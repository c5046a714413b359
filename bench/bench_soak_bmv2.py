"""Soak on BMv2: in-network all-reduces through ``simple_switch_grpc`` switches on a Mininet
spine-leaf with loss or reordering on every link (issue 16): 0 wrong sums and 0 hangs
expected; retransmissions and duplicates reported.

The same cells as :mod:`bench.bench_soak` (1 %, 5 %, 10 % loss, 5 % reordering), the same
job shape (4 workers, 256 int32 each: 2 messages of 4 packets, 2 credits) and the same
hosts' timeouts, through :mod:`bench.netreduce_soak_net` (one network for all cells, a
fresh job per cell). ``NR_SOAK_BMV2_COUNT`` sets the all-reduces per cell like
``NR_SOAK_COUNT`` (default 1000); ``NR_SOAK_CELLS`` picks cells. Needs root, Mininet,
``simple_switch_grpc`` and ``p4c``; skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.bench_soak import CELLS, VALUES, counts, soak_rows
from bench.harness import BenchSkipped
from bench.netreduce_soak import SOAK_MAX_RTO, SOAK_RTO, SoakResult


def _rows(name: str, r: SoakResult) -> list[dict[str, Any]]:
    what = (f"Mininet spine-leaf of simple_switch_grpc, 4 workers on 4 hosts, {VALUES} int32 "
            f"each, loss {r.loss:g} / reorder {r.reorder:g} on every link direction; "
            f"{r.count} run (NR_SOAK_BMV2_COUNT)")
    return soak_rows(f"soak bmv2 {name}", r, what,
                     f"shared, loaded 2-core machine; hosts' timeouts {SOAK_RTO:g}-"
                     f"{SOAK_MAX_RTO:g} s (adaptive); includes the hosts' process start")


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (Mininet)"
    if importlib.util.find_spec("mininet") is None:
        return "Mininet is not installed"
    for binary in ("simple_switch_grpc", "p4c"):
        if shutil.which(binary) is None:
            return f"{binary} is not installed"
    return None


def run() -> list[dict[str, Any]]:
    why = _missing()
    if why is not None:
        raise BenchSkipped(why)
    from bench.netreduce_soak_net import soak_cell, spine_leaf

    per_cell = counts(os.environ.get("NR_SOAK_BMV2_COUNT", ""))
    names = [n for n in os.environ.get("NR_SOAK_CELLS", ",".join(CELLS)).split(",") if n]
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        raise ValueError(f"NR_SOAK_CELLS: unknown cell {unknown[0]!r} (cells: {', '.join(CELLS)})")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="soak-bmv2-") as tmp, \
            spine_leaf("bmv2", Path(tmp), name_prefix="sb") as (network, controller):
        for name in names:
            cell = CELLS[name]
            rows += _rows(name, soak_cell(network, controller, per_cell[name], values=VALUES,
                                          label="bmv2", loss=cell.get("loss", 0.0),
                                          reorder=cell.get("reorder", 0.0)))
    return rows
