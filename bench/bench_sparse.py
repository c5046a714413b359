"""The sparse-update operator: vectorised scatter-add of top-k values vs a plain loop.

Applying a sparse gradient (``k`` index/value pairs gathered from every worker) to a dense
model is the step Shi et al. (2020) speed up with a parallel tensor operator. Here the
vectorised forms of :mod:`workloads.mstopk` (``np.add.at``, fancy indexing for unique
indices, ``bincount``) are timed against the Python loop they replace, on the shapes of a
real exchange: ``P`` workers' top-k of a 1M-element gradient at 1 % density. Every form is
checked to give exactly the loop's result before it is timed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np

from workloads.mstopk import scatter_add, scatter_add_bincount, scatter_add_loop

ELEMENTS = 1 << 20
DENSITY = 0.01
WORKERS = 4
DEFAULT_SECONDS = 1.0


def _updates(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``WORKERS`` blocks of unique indices (overlapping between workers), float32 values
    that are small integers, so every summation order gives the same float result."""
    k = int(ELEMENTS * DENSITY)
    idx = np.concatenate([np.sort(rng.choice(ELEMENTS, k, replace=False))
                          for _ in range(WORKERS)])
    vals = rng.integers(-64, 64, idx.size).astype(np.float32)
    return idx.astype(np.int64), vals


def _time(fn: Callable[[], object], seconds: float) -> float:
    """Median seconds per call over about ``seconds`` of repetitions (at least 3)."""
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run(seconds: float = DEFAULT_SECONDS) -> list[dict[str, object]]:
    """One row per operator (seconds per sparse update, speed-up over the loop)."""
    rng = np.random.default_rng(0)
    idx, vals = _updates(rng)
    base = rng.integers(-1000, 1000, ELEMENTS).astype(np.float32)
    expected = scatter_add_loop(base.copy(), idx, vals)
    forms: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "loop": lambda d: scatter_add_loop(d, idx, vals),
        "np.add.at": lambda d: scatter_add(d, idx, vals),
        "bincount": lambda d: scatter_add_bincount(d, idx, vals),
    }
    for name, fn in forms.items():
        if not np.array_equal(fn(base.copy()), expected):
            raise AssertionError(f"scatter-add form {name} differs from the loop")
    # Fancy indexing is only valid per block of unique indices: apply block by block.
    k = idx.size // WORKERS
    blocks = [(idx[i * k:(i + 1) * k], vals[i * k:(i + 1) * k]) for i in range(WORKERS)]

    def fancy(d: np.ndarray) -> np.ndarray:
        for bi, bv in blocks:
            scatter_add(d, bi, bv, unique=True)
        return d

    if not np.array_equal(fancy(base.copy()), expected):
        raise AssertionError("scatter-add with unique blocks differs from the loop")
    forms["fancy (unique blocks)"] = fancy
    budget = max(0.05, seconds / len(forms))
    dense = base.copy()
    timings = {name: _time(functools.partial(fn, dense), budget) for name, fn in forms.items()}
    note = f"{WORKERS} x {idx.size // WORKERS} updates into {ELEMENTS} float32"
    rows: list[dict[str, object]] = []
    for name, secs in timings.items():
        rows.append({"name": f"scatter_add {name}", "metric": "time per sparse update",
                     "value": secs * 1e3, "unit": "ms", "notes": note})
        if name != "loop":
            rows.append({"name": f"scatter_add {name}", "metric": "speed-up over loop",
                         "value": timings["loop"] / secs, "unit": "x", "notes": "exact result"})
    return rows
