"""Packets/s of the built-in target's pipeline per egress order (sync, fifo, random).

The default ``sync`` mode must keep the speed the target had before the traffic manager
existed (its code path is unchanged); ``fifo`` and ``random`` put every packet through
per-port egress queues. Measured in the same run, alternating the modes round by round
(the machine is shared and noisy, so each figure is the median of the rounds), on two
programs: tests/p4/ipv4_forward.p4 (unicast, LPM hit, the frame of bench_engine) and
p4src/netreduce.p4 with a 4-worker job (each completed message is multicast to 4 ports).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.harness import BenchSkipped

ORDERS = ("sync", "fifo", "random")
ROUNDS = 5
DEFAULT_SECONDS = 2.0
WORKERS = 4


def _unicast_case() -> tuple[Callable[[str], Any], list[tuple[int, bytes]]]:
    from bench import bench_engine

    base = bench_engine.build_pipeline()  # with its route

    def make(order: str) -> Any:
        from softswitch.pipeline import Pipeline

        p = Pipeline(base.program, egress_order=order, egress_seed=1)
        for name, table in base.tables.items():
            for entry in table.entries():
                p.tables[name].insert(entry)
        return p

    return make, [(bench_engine.INGRESS_PORT, bench_engine.routed_frame())]


def _netreduce_case(messages: int) -> tuple[Callable[[str], Any], list[tuple[int, bytes]]]:
    from bench.netreduce_job import SOURCE, AggregationJob, make_workers
    from bench.netreduce_job import program as nr_program
    from softswitch.frontend import compile_file

    if not SOURCE.exists():
        raise BenchSkipped(f"{SOURCE.name} does not exist")
    program = compile_file(nr_program())
    job = AggregationJob(1, make_workers(WORKERS))

    def make(order: str) -> Any:
        from softswitch.pipeline import Pipeline

        p = Pipeline(program, egress_order=order, egress_seed=1)
        job.configure(p)
        return p

    return make, job.stream(messages)


def _measure(pipeline: Any, frames: list[tuple[int, bytes]], seconds: float) -> tuple[float, int]:
    """(packets/s, frames transmitted) over ``frames`` (repeated for unicast streams)."""
    process = pipeline.process
    sent = 0
    count = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while True:
        for port, frame in frames:
            sent += len(process(port, frame))
        count += len(frames)
        if time.perf_counter() >= deadline or len(frames) > 1:
            break
    sent += len(pipeline.transmit())
    return count / (time.perf_counter() - start), sent


def run(seconds: float = DEFAULT_SECONDS) -> list[dict[str, Any]]:
    """Median packets/s of each egress order on both programs."""
    try:
        from softswitch.traffic_manager import EGRESS_ORDERS  # noqa: F401
    except ImportError as exc:
        raise BenchSkipped(f"no traffic manager ({exc})") from exc
    per_round = seconds / ROUNDS
    cases = {
        "ipv4_forward.p4 unicast": _unicast_case(),
        f"netreduce.p4 P={WORKERS}": _netreduce_case(max(50, int(per_round * 8000) // WORKERS)),
    }
    rows: list[dict[str, Any]] = []
    for label, (make, frames) in cases.items():
        pps: dict[str, list[float]] = {o: [] for o in ORDERS}
        outputs: dict[str, set[int]] = {o: set() for o in ORDERS}
        for _ in range(ROUNDS):
            for order in ORDERS:
                rate, sent = _measure(make(order), frames, per_round)
                pps[order].append(rate)
                outputs[order].add(sent if len(frames) > 1 else 0)
        if len({frozenset(v) for v in outputs.values()}) != 1:
            raise RuntimeError(f"{label}: the egress orders transmitted different counts {outputs}")
        base = statistics.median(pps["sync"])
        notes = (
            f"median of {ROUNDS} alternating rounds of {per_round:g} s; shared 2-core machine "
            "with a compiler build running (noisy)"
        )
        for order in ORDERS:
            med = statistics.median(pps[order])
            rows.append({"name": f"egress_order={order}, {label}", "metric": "throughput",
                         "value": med, "unit": "pkt/s", "notes": notes})
            if order != "sync":
                rows.append({"name": f"egress_order={order}, {label}", "metric": "vs sync",
                             "value": med / base if base else 0.0, "unit": "x", "notes": notes})
    return rows
