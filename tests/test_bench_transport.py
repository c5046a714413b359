"""The transport micro-benchmark exchanges every message and reports per-packet CPU."""

from __future__ import annotations

import math
import threading

from bench import bench_transport


def test_a_short_exchange_reports_cpu_per_packet_and_leaves_no_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    rows = bench_transport.run(messages=3)
    by_metric = {r["metric"]: r for r in rows}
    assert set(by_metric) == {"CPU per packet", "throughput"}
    cpu = by_metric["CPU per packet"]["value"]
    assert by_metric["CPU per packet"]["unit"] == "us" and 0 < cpu < 1e6 and math.isfinite(cpu)
    assert by_metric["throughput"]["value"] > 0
    leftover = {t.name for t in threading.enumerate()} - before
    assert not leftover, f"threads left running: {leftover}"
