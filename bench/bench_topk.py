"""MSTopK against exact top-k (``np.argpartition``) on 25 M floats at 1 % density.

Both selections run in the same process one after the other, on the same gradient; the
speed-up row is their ratio in that run, with MSTopK's recall against the exact selection.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

TOPK_ELEMENTS = 25_000_000
TOPK_DENSITY = 0.01


def _row(name: str, metric: str, value: float, unit: str = "", notes: str = "") -> dict[str, Any]:
    return {"name": name, "metric": metric, "value": value, "unit": unit, "notes": notes}


def run() -> list[dict[str, Any]]:
    """Exact top-k, then MSTopK (sampled threshold) on the same gradient."""
    from workloads.mstopk import k_for_density, mstopk, recall, topk_exact

    rng = np.random.default_rng(0)
    g = rng.standard_normal(TOPK_ELEMENTS, dtype=np.float32)
    k = k_for_density(g.size, TOPK_DENSITY)
    t0 = time.perf_counter()
    exact = topk_exact(g, k)
    t_exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    approx = mstopk(g, k)
    t_ms = time.perf_counter() - t0
    note = f"{TOPK_ELEMENTS / 1e6:g}M normal float32, k = {k} (1 %)"
    rec = recall(approx.indices, exact.indices)
    return [
        _row("top-k exact (argpartition)", "time", t_exact * 1e3, "ms", note),
        _row("MSTopK (sampled threshold, 20 rounds)", "time", t_ms * 1e3, "ms", note),
        _row("MSTopK (sampled threshold, 20 rounds)", "recall vs exact", rec, "",
             "exactly k selected"),
        _row("MSTopK vs exact top-k", "speed-up (same run)", t_exact / t_ms, "x",
             f"recall {rec:.3f}"),
    ]
