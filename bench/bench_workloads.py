"""Workloads on the emulated network: in-network vs ring all-reduce and model replays.

Network: 2 spines, 2 leaves, 2 hosts per leaf, 2 GPUs per host (P = 8 workers), every link
shaped to 3 Mbit/s, built-in switches running netreduce.p4 with NR_ELEMS = 64 (256-byte
payloads). Why these choices (docs/workloads.md, "Benchmark"): 4 host processes instead of 8
keep the 2-core machine's Python switches and agents below saturation at 3 Mbit/s, so the
links, not the CPUs, bound the all-reduce; two GPUs per host give P = 8 for the ring and
NetReduce's hierarchical mode its setting (host sums over fast intra-host links, one NIC
per host).

Rows:

* ring vs hierarchical in-network all-reduce of 1 MiB (262,144 float32) per worker: time of
  each, their ratio beside ``2(P-1)/P`` and beside the ratio the frame sizes allow (TCP's
  1514-byte frames plus half an ACK vs the aggregation packets on the busiest link: the
  leaf-spine link, whose packets carry RETH + tag on every packet, 346 bytes);
* link utilisation of the in-network run (busiest link and mean over host links), switch
  and machine CPU (a run is only link-bound while the CPUs are not saturated);
* replay iteration time of ResNet-50 and BERT-base (shrunk 2000x) per algorithm.

Needs root (Mininet); skipped otherwise. About 1.5 minutes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

SIZE = 262144
MODELS = ("resnet50", "bert-base")


def _innetwork_frame_bytes(size: int, elems: int, msg_pkts: int, window: int,
                           leaf_spine: bool) -> float:
    """Wire bytes (Ethernet frames) of one worker's in-network message stream on its busiest
    link (``sim.emulation.ina_payload_share``)."""
    from sim.emulation import ina_payload_share

    packets = -(-(size + 1) // elems)  # + the clamp-count word of fixed point
    return packets * 4 * elems / ina_payload_share(elems, msg_pkts, window, leaf_spine)


def _ring_frame_bytes(size: int, workers: int) -> float:
    """Wire bytes of one ring rank's sends: 2(P-1)/P of the tensor as TCP segments."""
    from sim.emulation import tcp_payload_share

    return (2 * (workers - 1) / workers) * size * 4 / tcp_payload_share()


def _row(name: str, metric: str, value: float, unit: str = "", notes: str = "") -> dict[str, Any]:
    return {"name": name, "metric": metric, "value": value, "unit": unit, "notes": notes}


def _network_rows(spec: Any) -> list[dict[str, Any]]:
    from experiment.matrix import ALGOS, ideal_ratio, running_network

    rows: list[dict[str, Any]] = []
    p = spec.workers
    topo_note = (f"{spec.leaves}x{spec.hosts_per_leaf} hosts x {spec.gpus} GPUs, "
                 f"{spec.bw_mbit:g} Mbit/s, NR_ELEMS {spec.elems}")
    rundir = Path("run") / f"bench-workloads-{time.strftime('%Y%m%d-%H%M%S')}"
    with running_network(spec, rundir) as launch:
        ring = launch.allreduce("ring", SIZE)
        hier = launch.allreduce("innetwork-hier", SIZE)
        for cell in (ring, hier):
            if not cell.ok:
                raise RuntimeError(f"{cell.algo} all-reduce failed: {'; '.join(cell.errors)}")
        mib = SIZE * 4 / 2**20
        for cell in (ring, hier):
            cpu = max(cell.switch_cpu.values(), default=0.0)
            rows.append(_row(f"all-reduce {cell.algo}, P={p}", f"time ({mib:g} MiB/worker)",
                             cell.seconds * 1e3, "ms",
                             f"{topo_note}; exact; busiest switch {cpu:.0%} of a core, "
                             f"machine CPU {cell.machine_busy:.0%}"))
        wire_ring = _ring_frame_bytes(SIZE, p)
        wire_inc = _innetwork_frame_bytes(SIZE, spec.elems, spec.msg_pkts,
                                          spec.credits * spec.msg_pkts, spec.leaves > 1)
        rows += [
            _row("ring / in-network (hierarchical)", "time ratio", ring.seconds / hier.seconds,
                 "x", f"ideal 2(P-1)/P = {ideal_ratio(p):.2f}; with frame sizes "
                 f"{wire_ring / wire_inc:.2f}"),
            _row("in-network (hierarchical)", "busiest link utilisation",
                 (hier.busiest_util or 0.0) * 100, "%", hier.busiest_link),
            _row("in-network (hierarchical)", "mean host link utilisation",
                 (hier.host_link_util or 0.0) * 100, "%",
                 f"ring: {(ring.host_link_util or 0.0) * 100:.0f} %"),
            _row("in-network (hierarchical)", "time vs link-bound ideal",
                 wire_inc * 8 / (spec.bw_mbit * 1e6) / hier.seconds * 100, "%",
                 "wire bytes of the aggregation packets on the busiest link / link rate"),
        ]
        for model in MODELS:
            for algo in ALGOS:
                cell = launch.replay(algo, model)
                value = cell.seconds * 1e3 if cell.ok else float("nan")
                note = (f"/{spec.scale:g}, {spec.replay_iters} iterations, comm "
                        f"{cell.comm_seconds * 1e3:.0f} ms" if cell.ok
                        else "failed: " + "; ".join(cell.errors)[:120])
                rows.append(_row(f"replay {model} {algo}", "iteration time", value, "ms", note))
    return rows


def run() -> list[dict[str, Any]]:
    """All rows (see the module docstring); skipped without root."""
    if os.geteuid() != 0:
        raise BenchSkipped("needs root (Mininet network of built-in switches)")
    from experiment.matrix import MatrixSpec, free_grpc_base

    spec = MatrixSpec(grpc_base_port=free_grpc_base(4), spines=2, leaves=2, hosts_per_leaf=2,
                      gpus=2, bw_mbit=3.0, elems=64,
                      credits=4, slots=256, msg_pkts=64, scale=2000.0, replay_iters=2,
                      timeout_s=120.0, name_prefix="bw")
    return _network_rows(spec)
