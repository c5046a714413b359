"""Throughput and latency through a running softswitch process between two network namespaces.

The measurement itself lives in ``bench.process_rig`` (it owns the namespaces, veths and
the switch process); this driver only calls its ``run(seconds=...)`` and turns the result into
report rows. It needs root for the namespaces.
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

from bench.harness import BenchSkipped

DEFAULT_SECONDS = 3.0
MODULE = "bench.process_rig"

# Units for the metric names bench.process_rig.run() may return in a flat dict.
UNITS = {
    "pkts_per_s": "pkt/s",
    "pps": "pkt/s",
    "p50_us": "us",
    "p99_us": "us",
    "mean_us": "us",
    "sent": "pkt",
    "received": "pkt",
    "lost": "pkt",
}


def _rows_from(result: object, seconds: float) -> list[dict[str, Any]]:
    """Accepts a list of rows, a dict of metric -> value, or a bare packets/s number."""
    notes = (
        f"switch process between two namespaces, ipv4_forward.p4 with routes written over "
        f"P4Runtime, 128 B IPv4/UDP; flood {seconds:g} s (pps over what arrived), "
        "latency of 500 probes paced at 1/ms"
    )
    if isinstance(result, list):
        return result
    if isinstance(result, dict):
        return [
            {
                "name": "softswitch process",
                "metric": key,
                "value": value,
                "unit": UNITS.get(key, ""),
                "notes": notes,
            }
            for key, value in result.items()
            if isinstance(value, int | float)
        ]
    if isinstance(result, int | float):
        return [
            {
                "name": "softswitch process",
                "metric": "throughput",
                "value": float(result),
                "unit": "pkt/s",
                "notes": notes,
            }
        ]
    raise TypeError(
        f"{MODULE}.run() returned {type(result).__name__}; expected rows, dict or number"
    )


def run(seconds: float = DEFAULT_SECONDS) -> list[dict[str, Any]]:
    """Runs the process benchmark; skips while it is missing or without root."""
    try:
        mod = importlib.import_module(MODULE)
    except ImportError as exc:
        raise BenchSkipped(f"{MODULE} is not available yet ({exc})") from exc
    bench_run = getattr(mod, "run", None)
    if not callable(bench_run):
        raise BenchSkipped(f"{MODULE} has no run() returning results yet (only main())")
    if os.geteuid() != 0:
        raise BenchSkipped("needs root for network namespaces")
    if "seconds" in inspect.signature(bench_run).parameters:
        result = bench_run(seconds=seconds)
    else:
        result = bench_run()
    return _rows_from(result, seconds)
