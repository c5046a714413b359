"""Soak: in-network all-reduces on a spine-leaf with loss or reordering on every link
(issue 16): 0 wrong sums and 0 hangs expected; retransmissions and duplicates reported.

Cells: 1 %, 5 %, 10 % loss on every link, and 5 % reordering on every link (a held packet
is overtaken by up to 8 others), each with BMv2-like random egress order in all three
switches (built-in target, one process: :mod:`bench.netreduce_soak`). ``NR_SOAK_COUNT``
sets the all-reduces per cell: one number for all (default 1000, the issue's figure:
over an hour on a loaded 2-core machine), or per cell, ``loss1=1000,loss10=300``; cells
not named get 1000. ``NR_SOAK_CELLS`` picks cells by name (comma-separated).
``NR_SOAK_JOBS`` runs that many cells at once, each in its own process (default 1): the
cells' time is mostly timeouts, so running them side by side shortens the run a lot; it
changes no count, but the times per all-reduce then include the other cells' load.
The BMv2 soak is :mod:`bench.bench_soak_bmv2` (its own rows, so that either can be run
again alone).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypedDict

from bench.netreduce_soak import SOAK_MAX_RTO, SOAK_RTO, SoakResult, soak


class Cell(TypedDict, total=False):
    """The impairments of one soak cell (keyword arguments of ``soak``)."""

    loss: float
    reorder: float


CELLS: dict[str, Cell] = {
    "loss1": {"loss": 0.01},
    "loss5": {"loss": 0.05},
    "loss10": {"loss": 0.10},
    "reorder5": {"reorder": 0.05},
}
VALUES = 256  # int32 per worker and all-reduce: 8 packets, 2 messages of 4


def _rows(name: str, r: SoakResult, jobs: int = 1) -> list[dict[str, Any]]:
    what = (f"spine-leaf, 4 workers, {VALUES} int32 each, loss {r.loss:g} / reorder "
            f"{r.reorder:g} on every link, egress order {r.egress_order}")
    load = (f"shared, loaded 2-core machine, {jobs} cells at once: timeouts "
            f"({SOAK_RTO:g}-{SOAK_MAX_RTO:g} s, adaptive) dominate")
    return soak_rows(f"soak {name}", r, what + f"; {r.count} run (NR_SOAK_COUNT)", load,
                     f"{r.stale_results} stale results refused")


def soak_rows(label: str, r: SoakResult, what: str, time_note: str,
              extra: str = "") -> list[dict[str, Any]]:
    """The report rows of one soak cell (built-in or BMv2): counts, then costs per
    all-reduce."""
    n = max(1, r.completed)
    held = f"{r.held} packets held by reordering" + (f", {extra}" if extra else "")
    return [
        {"name": label, "metric": "all-reduces completed", "value": r.completed,
         "unit": f"of {r.count}", "notes": what},
        {"name": label, "metric": "wrong sums", "value": r.wrong, "unit": ""},
        {"name": label, "metric": "hangs", "value": r.hangs, "unit": "",
         "notes": "; ".join(r.errors)[:200]},
        {"name": label, "metric": "retransmitted packets per all-reduce",
         "value": round(r.retransmitted / n, 2), "unit": "pkt",
         "notes": f"{r.retransmitted} in all, {r.timeouts} timeouts"},
        {"name": label, "metric": "duplicates per all-reduce",
         "value": round((r.duplicates_at_workers + r.duplicates_at_switches) / n, 2),
         "unit": "pkt", "notes": f"{r.duplicates_at_switches} at switches, "
                                 f"{r.duplicates_at_workers} at receivers; {held}"},
        {"name": label, "metric": "time per all-reduce",
         "value": round(1000 * r.seconds / n, 1), "unit": "ms", "notes": time_note},
    ]


DEFAULT_COUNT = 1000


def counts(spec: str) -> dict[str, int]:
    """All-reduces per cell from ``NR_SOAK_COUNT``: ``N`` or ``cell=N,cell=N``."""
    out = dict.fromkeys(CELLS, DEFAULT_COUNT)
    spec = spec.strip()
    if not spec:
        return out
    if "=" not in spec:
        return dict.fromkeys(CELLS, _positive("NR_SOAK_COUNT", spec))
    for part in spec.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in CELLS:
            raise ValueError(f"NR_SOAK_COUNT: unknown cell {name.strip()!r} "
                             f"(cells: {', '.join(CELLS)})")
        out[name.strip()] = _positive(f"NR_SOAK_COUNT {name.strip()}", value)
    return out


def _positive(what: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{what}: {value!r} is not a whole number") from None
    if n < 1:
        raise ValueError(f"{what}: {n} must be at least 1")
    return n


def _cell_run(name: str, count: int) -> SoakResult:
    """One cell (module-level: a worker process of the pool runs it)."""
    return soak(count, values=VALUES, seed=7, **CELLS[name])


def run() -> list[dict[str, Any]]:
    per_cell = counts(os.environ.get("NR_SOAK_COUNT", ""))
    names = [n for n in os.environ.get("NR_SOAK_CELLS", ",".join(CELLS)).split(",") if n]
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        raise ValueError(f"NR_SOAK_CELLS: unknown cell {unknown[0]!r} (cells: {', '.join(CELLS)})")
    jobs = _positive("NR_SOAK_JOBS", os.environ.get("NR_SOAK_JOBS", "1"))
    rows: list[dict[str, Any]] = []
    if jobs == 1:
        for name in names:
            rows += _rows(name, _cell_run(name, per_cell[name]))
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(names))) as pool:
            futures = {n: pool.submit(_cell_run, n, per_cell[n]) for n in names}
            for name in names:
                rows += _rows(name, futures[name].result(), min(jobs, len(names)))
    return rows
