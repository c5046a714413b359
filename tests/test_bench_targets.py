"""bench_targets' rows from measurements (no namespace, no switch) and its CPU reading."""

from __future__ import annotations

import os
import time

import pytest

from bench.bench_targets import Measurement, _cpu, size_rows


def _row(rows: list[dict[str, object]], name: str, metric: str) -> object:
    (row,) = [r for r in rows if r["name"] == name and r["metric"] == metric]
    return row["value"]


def test_rows_give_packets_per_second_cpu_per_packet_and_both_ratios() -> None:
    """Medians per target; the C loop's capacity against the Python path's is the inverse
    ratio of their CPU per packet, whatever the sender let either forward."""
    def runs(pps: float, cpu_us: float) -> list[Measurement]:
        return [Measurement(pps * k, 600e3, cpu_us * 1e-6 * k) for k in (0.9, 1.0, 1.1)]

    rows = size_rows(64, 3.0, {"softswitch": runs(60e3, 16.0),
                               "softswitch-c": runs(570e3, 1.0),
                               "softswitch-c-mmsg": runs(500e3, 1.2),
                               "softswitch-c-pyio": runs(80e3, 10.0),
                               "bmv2": runs(23e3, 40.0)})
    loop = "built-in switch process (C engine, C packet loop), 64 B"
    assert _row(rows, loop, "throughput") == pytest.approx(570e3)
    assert _row(rows, loop, "switch CPU per packet") == pytest.approx(1.0)
    assert _row(rows, loop, "offered load") == pytest.approx(600e3)
    assert _row(rows, "C packet loop / Python path, 64 B",
                "throughput ratio") == pytest.approx(9.5)
    assert _row(rows, "C packet loop / Python path, 64 B",
                "capacity ratio (packets per switch CPU-second)") == pytest.approx(16.0)
    assert _row(rows, "C packet loop / BMv2, 64 B",
                "capacity ratio (packets per switch CPU-second)") == pytest.approx(40.0)


def test_without_bmv2_its_row_says_not_installed() -> None:
    one = [Measurement(1e3, 1e3, 1e-6)]
    rows = size_rows(128, 1.0, {t: one for t in ("softswitch", "softswitch-c",
                                                 "softswitch-c-mmsg", "softswitch-c-pyio")})
    assert _row(rows, "simple_switch_grpc (BMv2)", "throughput") == "not installed"


def test_the_switch_cpu_reading_counts_the_process_and_names_a_gone_one() -> None:
    before = _cpu(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert _cpu(os.getpid()) - before >= 0.045  # the CPU clock, not 10 ms ticks
    with pytest.raises(RuntimeError, match="is gone"):
        _cpu(2**22 + 12345)
