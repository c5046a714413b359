"""In-network aggregation vs ring all-reduce across emulated link rates (issue 13's sweep).

For each payload size E (elements per aggregation packet: 64, and 256 = full RoCE path MTU)
and each link rate (3, 10, 30, 100 Mbit/s) one Mininet spine-leaf (2 spines, 2 leaves,
2 hosts per leaf, 2 GPUs per host) of built-in switches runs netreduce.p4 built with
``NR_ELEMS = E``; on it, with the same job window (4 credits x 64 packets):

* **P = 4**: one worker per host, flat in-network aggregation vs a 4-rank ring;
* **P = 8**: two GPUs per host, NetReduce's hierarchical in-network mode (host sums, one
  network worker per host) vs an 8-rank ring.

Rows per (E, rate, P): the time of each algorithm with its busiest link's utilisation, the
CPU of the busiest switch and of the busiest host process, and which resource bound it
(links when the busiest link carried >= 90 % of its rate; else the CPUs); the ratio ring /
in-network beside the frame-size ideal (``sim.emulation`` payload shares: what the packet
formats allow on the busiest link) and beside 2(P-1)/P. The tensor grows with the rate so
each run lasts about a second at line rate.

Needs root (Mininet); skipped otherwise. RATES / ELEMS / SIZES below narrow it;
``INA_BENCH_RATES=3,10`` and ``INA_BENCH_ELEMS=256`` in the environment do so per run.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

log = logging.getLogger(__name__)

RATES = (3.0, 10.0, 30.0, 100.0)
ELEMS = (64, 256)
#: float32 per worker at each rate (0.3-3 s of the busiest link at line rate)
SIZES = {3.0: 262144, 10.0: 524288, 30.0: 1048576, 100.0: 1048576}
CREDITS, MSG_PKTS = 4, 64
LINK_BOUND = 0.9


def _row(name: str, metric: str, value: float, unit: str = "", notes: str = "") -> dict[str, Any]:
    return {"name": name, "metric": metric, "value": value, "unit": unit, "notes": notes}


def frame_ideal(size: int, workers: int, elems: int, leaf_spine: bool = True) -> float:
    """Ring / in-network time ratio the wire formats allow: ring bytes (2(P-1)/P of the
    tensor in TCP frames) over in-network bytes (the tensor plus the fixed-point clamp word
    in aggregation frames) on the busiest link."""
    from sim.emulation import ina_payload_share, tcp_payload_share

    packets = -(-(size + 1) // elems)
    inc = packets * 4 * elems / ina_payload_share(elems, MSG_PKTS, CREDITS * MSG_PKTS, leaf_spine)
    ring = 2 * (workers - 1) / workers * size * 4 / tcp_payload_share()
    return ring / inc


def _bound(cell: Any) -> str:
    util = cell.busiest_util or 0.0
    if util >= LINK_BOUND:
        return f"link-bound ({util:.0%})"
    return f"NOT link-bound ({util:.0%}): CPUs (machine {cell.machine_busy:.0%} busy)"


def _cell_note(cell: Any) -> str:
    sw = max(cell.switch_cpu.items(), key=lambda kv: kv[1], default=("-", 0.0))
    return (f"busiest link {cell.busiest_link} {(cell.busiest_util or 0.0):.0%}; busiest switch "
            f"{sw[0]} {sw[1]:.0%} of a core; busiest host process {cell.agent_cpu_max:.0%}; "
            f"{_bound(cell)}; retransmissions {cell.retransmissions}, timeouts {cell.timeouts}, "
            f"NAKs {cell.naks}")


def _config_rows(launch: Any, bw: float, elems: int) -> list[dict[str, Any]]:
    from experiment.matrix import ideal_ratio

    size = SIZES[bw]
    rows: list[dict[str, Any]] = []
    hosts = list(launch.gpus)
    gpus = dict(launch.gpus)
    for p in (4, 8):
        # P = 4: one rank per host (hierarchical with one GPU is the flat job, one worker
        # per host); P = 8: both GPUs of every host.
        launch.gpus = {h: (1 if p == 4 else gpus[h]) for h in hosts}
        try:
            ina = launch.allreduce("innetwork-hier", size)
            ring = launch.allreduce("ring", size)
        finally:
            launch.gpus = gpus
        tag = f"P={p}, E={elems}, {bw:g} Mbit/s"
        mib = size * 4 / 2**20
        for cell, name in ((ina, "in-network" + (" (hierarchical)" if p == 8 else "")),
                           (ring, "ring")):
            if not cell.ok:
                rows.append(_row(f"{name}, {tag}", f"time ({mib:g} MiB/worker)", float("nan"),
                                 "ms", "failed: " + "; ".join(cell.errors)[:160]))
                continue
            rows.append(_row(f"{name}, {tag}", f"time ({mib:g} MiB/worker)",
                             cell.seconds * 1e3, "ms", _cell_note(cell)))
        if ina.ok and ring.ok and ina.seconds > 0:
            ratio = ring.seconds / ina.seconds
            ideal = frame_ideal(size, p, elems)
            rows.append(_row(f"ring / in-network, {tag}", "time ratio", ratio, "x",
                             f"{ratio / ideal:.2f} of the frame-size ideal {ideal:.2f}; "
                             f"2(P-1)/P = {ideal_ratio(p):.2f} (frame-size ideal = "
                             f"{ideal / ideal_ratio(p):.2f} of it)"))
    return rows


def _env_list(name: str, default: tuple[Any, ...], kind: type) -> tuple[Any, ...]:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        return tuple(kind(x) for x in text.split(","))
    except ValueError:
        raise BenchSkipped(f"{name}={text!r}: not a comma-separated list of numbers") from None


def run() -> list[dict[str, Any]]:
    """The sweep (module docstring); skipped without root."""
    if os.geteuid() != 0:
        raise BenchSkipped("needs root (Mininet network of built-in switches)")
    from experiment.matrix import MatrixSpec, free_grpc_base, running_network

    rates = _env_list("INA_BENCH_RATES", RATES, float)
    bad = [r for r in rates if r not in SIZES]
    if bad:
        raise BenchSkipped(f"INA_BENCH_RATES: no tensor size for {bad}; choose from {list(SIZES)}")
    rows: list[dict[str, Any]] = []
    for elems in _env_list("INA_BENCH_ELEMS", ELEMS, int):
        for bw in rates:
            spec = MatrixSpec(grpc_base_port=free_grpc_base(4), spines=2, leaves=2,
                              hosts_per_leaf=2, gpus=2, bw_mbit=bw, elems=elems,
                              credits=CREDITS, slots=CREDITS * MSG_PKTS, msg_pkts=MSG_PKTS,
                              iters=1, timeout_s=180.0, name_prefix="bi")
            rundir = Path("run") / f"bench-innetwork-e{elems}-{bw:g}-{time.strftime('%H%M%S')}"
            log.info("in-network sweep: E=%d, %g Mbit/s", elems, bw)
            try:
                with running_network(spec, rundir) as launch:
                    rows += _config_rows(launch, bw, elems)
            except Exception as exc:  # noqa: BLE001 - one failed network must not lose the rest
                log.warning("in-network sweep: E=%d, %g Mbit/s failed: %s", elems, bw, exc)
                rows.append(_row(f"network, E={elems}, {bw:g} Mbit/s", "setup", float("nan"), "",
                                 f"failed: {type(exc).__name__}: {exc}"[:200]))
    return rows
