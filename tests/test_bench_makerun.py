"""bench_makerun's arithmetic on make run's experiment.json (the runs themselves need BMv2)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_makerun import rows, summarize


def _experiment(inn_s: tuple[float, ...], ring_s: tuple[float, ...], retx: tuple[int, ...],
                exact: bool = True) -> dict[str, Any]:
    def ranks(times: tuple[float, ...], retx: tuple[int, ...] | None = None
              ) -> list[dict[str, Any]]:
        return [{"rank": i, "seconds": t, "retransmissions": (retx or [0] * len(times))[i],
                 "timeouts": 3, "spurious_timeouts": 1, "naks": 1}
                for i, t in enumerate(times)]
    return {"exact": exact, "runs": [
        {"algorithm": "innetwork", "ranks": ranks(inn_s, retx), "switch_cpu": {"l1": 0.45}},
        {"algorithm": "ring", "ranks": ranks(ring_s), "switch_cpu": {"l1": 0.1, "l2": 0.2}}]}


def test_summary_takes_the_slowest_rank_and_sums_retransmissions() -> None:
    s = summarize(_experiment((1.9, 2.082), (1.222, 1.1), (268, 268)))
    assert s["innetwork_ms"] == pytest.approx(2082) and s["ring_ms"] == pytest.approx(1222)
    assert s["ratio"] == pytest.approx(1.222 / 2.082)
    assert s["retx"] == 536 and s["exact"] == 1.0 and s["cpu"] == pytest.approx(45)
    assert s["lost"] == 2 * (1 + 3 - 1)  # per rank: one NAK, two timeouts that were real


def test_rows_are_means_with_each_run_in_the_notes() -> None:
    runs = [summarize(_experiment((1.0,), (1.2,), (0,))),
            summarize(_experiment((2.0,), (1.2,), (4,), exact=False))]
    out = {r["metric"]: r for r in rows({("rack", "bmv2"): runs})}
    assert out["in-network time"]["value"] == pytest.approx(1500)
    assert out["in-network retransmissions"]["notes"].startswith("runs: 0, 4;")
    assert out["runs exact"]["value"] == pytest.approx(0.5)
    assert {r["name"] for r in out.values()} == {"make run rack on bmv2"}


def test_with_switch_counters_losses_are_retransmissions_not_seen_as_duplicates() -> None:
    data = _experiment((1.0, 1.0), (1.2, 1.2), (3, 2))
    data["job"] = {"workers": [{"rank": 0, "switch": "l1"}, {"rank": 1, "switch": "l2"}]}
    inn = data["runs"][0]
    inn["wall_seconds"] = 2.0
    inn["switch_counters"] = {  # sp1 counts the leaves' resent partials, not workers' packets
        "l1": {"contributions": 100, "duplicates": 3},
        "l2": {"contributions": 100, "duplicates": 1},
        "sp1": {"contributions": 100, "duplicates": 7}}
    s = summarize(data)
    assert (s["retx"], s["switch_dups"], s["lost"]) == (5, 4, 1)
    assert s["cpu_per_pkt"] == pytest.approx(0.45 * 2.0 * 1e3 / 300)
