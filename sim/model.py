"""Alpha-beta predictions (:mod:`workloads.costmodel`) for a :class:`~sim.fabric.Fabric`.

The models take one latency ``α`` per step and one ``β`` (seconds per payload byte) per link
class. They are derived from the fabric so that the simulator and the model describe the
same network:

* ``β`` of a link = wire bytes per payload byte (headers) × 8 / rate;
* ``α`` of a ring step = :meth:`Fabric.mean_hop_latency` over the ring's hops (propagation,
  one packet time per store-and-forward hop, switch processing), for packets of the step's
  chunk size: a ring's critical path crosses every hop equally often, so the mean is right
  where the worst hop would charge every step a spine crossing;
* in-network all-reduce: ``2·L·α`` is the round trip up to the top switch and back
  (:meth:`Fabric.ina_round_trip`), so ``α`` = round trip / ``2L``; ``β`` is that of the
  slower of a host link and a leaf-spine link (:meth:`Fabric.ina_beta`: inter-switch
  packets may carry a bigger header and one job may use fewer than all spines).
"""

from __future__ import annotations

import dataclasses

import algorithms
from sim.fabric import Fabric
from sim.schedules import ALGORITHMS, sparse_block_bytes, torus_grid
from workloads import costmodel as cm


def _cluster(f: Fabric, alpha_inter: float) -> cm.Cluster:
    """The model's view: per-GPU intra links and one NIC per host (payload bytes/s)."""
    return cm.Cluster(
        hosts=f.hosts,
        gpus_per_host=f.gpus_per_host,
        bw_intra=f.intra_bps / 8.0 / f.wire_factor,
        bw_inter=f.host_bps / 8.0 / f.wire_factor,
        alpha_intra=f.intra_latency(),
        alpha_inter=alpha_inter,
    )


def _ring_alpha(f: Fabric, chunk: float) -> float:
    """α of the flat ring over all workers: mean hop latency for ``chunk``-byte packets."""
    same, cross = f.host_ring_hops()
    intra = f.workers - (same + cross) if f.hosts > 1 else f.workers - 1
    return f.mean_hop_latency(intra, same, cross, chunk)


def _column_alpha(f: Fabric, chunk: float) -> float:
    """α of a ring with one member per host (torus columns, sparse all-gather)."""
    same, cross = f.host_ring_hops()
    return f.mean_hop_latency(0, same, cross, chunk)


def ring_cost(f: Fabric, nbytes: float, density: float = 0.01) -> float:
    """Flat ring over all workers."""
    beta = 8.0 * f.wire_factor / f.host_bps
    alpha = _ring_alpha(f, nbytes / f.workers)
    if f.gpus_per_host == 1:
        return cm.ring_allreduce(nbytes, f.workers, alpha, beta)
    return cm.flat_ring(nbytes, _cluster(f, alpha))


def torus2d_cost(f: Fabric, nbytes: float, density: float = 0.01) -> float:
    """2D torus: rows within a host (or a host group), columns across."""
    beta = 8.0 * f.wire_factor / f.host_bps
    rows, cols = torus_grid(f)
    if f.gpus_per_host > 1:
        return cm.torus2d_cluster(nbytes, _cluster(f, _column_alpha(f, nbytes / f.workers)))
    row_alpha = f.mean_hop_latency(0, cols, 0, nbytes / cols)
    col_alpha = f.mean_hop_latency(0, 0, rows, nbytes / f.workers) if rows > 1 else 0.0
    return cm.torus2d_allreduce(nbytes, rows, cols, row_alpha, beta, col_alpha, beta)


def _ina(f: Fabric, nbytes: float, hierarchical: bool) -> float:
    g, p = f.gpus_per_host, f.workers
    levels = f.ina_levels()
    shard = nbytes / g if hierarchical else nbytes
    alpha = f.ina_round_trip(shard) / (2 * levels)
    ina_beta = f.ina_beta()
    if g == 1:
        return cm.innetwork_allreduce(nbytes, p, alpha, ina_beta, levels)
    c = dataclasses.replace(_cluster(f, alpha), bw_inter=1.0 / ina_beta)
    if hierarchical:
        return cm.hierarchical_innetwork(nbytes, c, levels)
    return cm.flat_innetwork(nbytes, c, levels)


def ina_cost(f: Fabric, nbytes: float, density: float = 0.01) -> float:
    """In-network aggregation, every GPU a worker of the switch."""
    return _ina(f, nbytes, hierarchical=False)


def ina_hier_cost(f: Fabric, nbytes: float, density: float = 0.01) -> float:
    """In-network aggregation after a reduction within each host."""
    return _ina(f, nbytes, hierarchical=True)


def hitopk_cost(f: Fabric, nbytes: float, density: float = 0.01) -> float:
    """HiTopK sparse all-gather (``density`` of the elements, values and indices)."""
    beta = 8.0 * f.wire_factor / f.host_bps
    # the density whose (value + index) bytes equal the block the schedule sends
    shard = nbytes / f.gpus_per_host
    block = sparse_block_bytes(int(shard), density)
    effective = min(1.0, block / (2.0 * shard)) if shard else density
    alpha = _column_alpha(f, block)
    if f.gpus_per_host == 1:
        return cm.sparse_allgather(nbytes, f.workers, effective, alpha, beta)
    return cm.hitopk(nbytes, _cluster(f, alpha), effective)


def predict(algorithm: str, f: Fabric, nbytes: float, density: float = 0.01) -> float:
    """Seconds the cost model predicts for ``algorithm`` (a name or alias of
    :mod:`algorithms`; the simulator knows :data:`sim.ALGORITHMS`)."""
    alg = algorithms.get(algorithm)
    if alg.sim_name not in ALGORITHMS:
        raise ValueError(f"no cost model for algorithm {algorithm!r}; "
                         f"choose one of {', '.join(ALGORITHMS)}")
    return float(alg.cost_model_fn()(f, nbytes, density))
