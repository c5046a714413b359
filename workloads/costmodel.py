"""Closed-form alpha-beta cost models of the collectives the testbed compares.

Notation (docs/workloads.md, background section 4): ``n`` bytes of gradient per worker,
``p`` workers, ``alpha`` seconds of latency per communication step, ``beta`` seconds per byte
(1 / bandwidth). Every function returns seconds. The flat models take ``(n, p, alpha, beta)``;
the multi-GPU models take a :class:`Cluster` with separate intra-host (NVLink-like, per GPU)
and inter-host (one NIC per host, shared by its GPUs) links.

The models count what crosses the slowest link on the critical path and assume full-duplex
links and perfect pipelining within a step; they ignore computation (summing) cost. They are
what the emulated measurements are compared with, not a simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


def _check(n: float, p: int) -> None:
    if n < 0:
        raise ValueError(f"message size must be >= 0 bytes, got {n}")
    if p < 1:
        raise ValueError(f"need at least one worker, got p={p}")


def ring_reduce_scatter(n: float, p: int, alpha: float, beta: float) -> float:
    """Ring reduce-scatter: ``(p-1)`` steps, each moving ``n/p`` bytes."""
    _check(n, p)
    return (p - 1) * alpha + (p - 1) / p * n * beta


def ring_allgather(n: float, p: int, alpha: float, beta: float) -> float:
    """Ring all-gather of ``n`` total bytes (``n/p`` per worker): same cost as reduce-scatter."""
    return ring_reduce_scatter(n, p, alpha, beta)


def ring_allreduce(n: float, p: int, alpha: float, beta: float) -> float:
    """Ring all-reduce: ``2(p-1)·alpha + 2(p-1)/p · n·beta``."""
    return ring_reduce_scatter(n, p, alpha, beta) + ring_allgather(n, p, alpha, beta)


def innetwork_allreduce(n: float, p: int, alpha: float, beta: float, levels: int = 1) -> float:
    """In-network all-reduce through ``levels`` switch levels: ``2·levels·alpha + n·beta``.

    Each worker sends ``n`` bytes once and receives the ``n``-byte sum once (full duplex, so
    the two overlap); extra tree levels add latency but no bytes. Independent of ``p``.
    """
    _check(n, p)
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    if p == 1:
        return 0.0
    return 2 * levels * alpha + n * beta


def spine_leaf_levels(p: int, workers_per_leaf: int) -> int:
    """Switch levels an in-network all-reduce crosses: 1 within one leaf, else 2 (leaf + spine)."""
    if workers_per_leaf < 1:
        raise ValueError(f"workers_per_leaf must be >= 1, got {workers_per_leaf}")
    _check(0, p)
    return 1 if p <= workers_per_leaf else 2


def torus2d_allreduce(
    n: float,
    rows: int,
    cols: int,
    alpha_row: float,
    beta_row: float,
    alpha_col: float,
    beta_col: float,
) -> float:
    """2D-torus all-reduce on a ``rows × cols`` grid (each row holds ``cols`` workers).

    Phase 1: ring reduce-scatter along each row (``n`` bytes, ``cols`` workers); phase 2: ring
    all-reduce along each column of the ``n/cols``-byte shard (``rows`` workers); phase 3: ring
    all-gather along each row. ``beta_col`` is per worker: pass the shared-NIC value yourself
    when the columns share a link (or use :func:`torus2d_cluster`).
    """
    _check(n, rows * cols)
    return (
        ring_reduce_scatter(n, cols, alpha_row, beta_row)
        + ring_allreduce(n / cols, rows, alpha_col, beta_col)
        + ring_allgather(n, cols, alpha_row, beta_row)
    )


def sparse_allgather(
    n: float,
    p: int,
    density: float,
    alpha: float,
    beta: float,
    value_bytes: int = 4,
    index_bytes: int = 4,
) -> float:
    """Ring all-gather of every worker's top-k (value + index).

    ``(p-1)·alpha + (p-1)·ρ·n·(1 + i/v)·beta`` for ``v``-byte values and ``i``-byte indices.

    With 4-byte values and indices each worker receives ``(p-1)·ρ·n·2`` bytes.
    """
    _check(n, p)
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be in [0, 1], got {density}")
    per_worker = density * n * (1.0 + index_bytes / value_bytes)
    return (p - 1) * alpha + (p - 1) * per_worker * beta


def sparse_breakeven_density(p: int, value_bytes: int = 4, index_bytes: int = 4) -> float:
    """Density below which the sparse all-gather moves fewer bytes than a dense ring all-reduce."""
    _check(0, p)
    return 2.0 / (p * (1.0 + index_bytes / value_bytes))


@dataclass(frozen=True)
class Cluster:
    """``hosts`` machines of ``gpus_per_host`` workers; bandwidths in bytes per second.

    ``bw_intra`` is each worker's link inside a host; ``bw_inter`` is the host's one NIC,
    shared by all its workers.
    """

    hosts: int
    gpus_per_host: int
    bw_intra: float
    bw_inter: float
    alpha_intra: float = 0.0
    alpha_inter: float = 0.0

    def __post_init__(self) -> None:
        if self.hosts < 1 or self.gpus_per_host < 1:
            raise ValueError("hosts and gpus_per_host must be >= 1")
        if self.bw_intra <= 0 or self.bw_inter <= 0:
            raise ValueError("bandwidths must be > 0 bytes/s")

    @property
    def workers(self) -> int:
        """Total number of workers ``P = hosts · gpus_per_host``."""
        return self.hosts * self.gpus_per_host


def flat_ring(n: float, c: Cluster) -> float:
    """Ring all-reduce over all workers, host-contiguous order: the NIC paces every step."""
    _check(n, c.workers)
    if c.hosts == 1:
        return ring_allreduce(n, c.workers, c.alpha_intra, 1.0 / c.bw_intra)
    slowest = min(c.bw_intra, c.bw_inter)
    return ring_allreduce(n, c.workers, c.alpha_inter, 1.0 / slowest)


def _intra_rs_ag(n: float, c: Cluster) -> float:
    """Intra-host reduce-scatter plus all-gather: ``2(g-1)·alpha_i + 2(g-1)/g · n / B_intra``."""
    return ring_allreduce(n, c.gpus_per_host, c.alpha_intra, 1.0 / c.bw_intra)


def flat_innetwork(n: float, c: Cluster, levels: int = 1) -> float:
    """In-network all-reduce where every worker sends its full ``n`` through the shared NIC."""
    _check(n, c.workers)
    if c.hosts == 1:
        return ring_allreduce(n, c.workers, c.alpha_intra, 1.0 / c.bw_intra)
    return innetwork_allreduce(
        c.gpus_per_host * n, c.workers, c.alpha_inter, 1.0 / c.bw_inter, levels
    )


def hierarchical_innetwork(n: float, c: Cluster, levels: int = 1) -> float:
    """Hierarchical NetReduce: intra-host reduce-scatter, in-network all-reduce of each worker's
    ``n/g`` shard (``n`` bytes per NIC in all), intra-host all-gather."""
    _check(n, c.workers)
    if c.hosts == 1:
        return _intra_rs_ag(n, c)
    network = innetwork_allreduce(n, c.workers, c.alpha_inter, 1.0 / c.bw_inter, levels)
    return _intra_rs_ag(n, c) + network


def torus2d_cluster(n: float, c: Cluster) -> float:
    """2D-torus all-reduce with rows = hosts: the ``g`` column rings share each NIC."""
    _check(n, c.workers)
    g = c.gpus_per_host
    # Each of the g concurrent column rings moves n/g-byte shards through the same NIC,
    # so per worker the effective seconds per byte is g / bw_inter.
    return torus2d_allreduce(
        n, c.hosts, g, c.alpha_intra, 1.0 / c.bw_intra, c.alpha_inter, g / c.bw_inter
    )


def hitopk(
    n: float, c: Cluster, density: float, value_bytes: int = 4, index_bytes: int = 4
) -> float:
    """HiTopKComm: intra-host reduce-scatter, sparse all-gather of each shard's top-k between
    hosts (``g`` concurrent all-gathers share the NIC), intra-host all-gather of the dense
    shards."""
    _check(n, c.workers)
    g = c.gpus_per_host
    network = sparse_allgather(
        n / g, c.hosts, density, c.alpha_inter, g / c.bw_inter, value_bytes, index_bytes
    )
    return _intra_rs_ag(n, c) + network


def hierarchical_crossover_alpha0(gpus_per_host: int, workers: int) -> float:
    """Closed form (alpha = 0, result >= 1) of :func:`hierarchical_crossover` versus the flat ring.

    Hierarchical wins when ``B_intra / B_inter > 2(g-1)·P / (g·(P-2))``; 0 means it always
    wins (one worker per host), ``inf`` that it never strictly wins (``P <= 2``).
    """
    g, p = gpus_per_host, workers
    if p <= 2:
        return math.inf
    return 2.0 * (g - 1) * p / (g * (p - 2))


def hierarchical_crossover(
    n: float,
    hosts: int,
    gpus_per_host: int,
    bw_inter: float,
    alpha_intra: float = 0.0,
    alpha_inter: float = 0.0,
    baseline: str = "ring",
    levels: int = 1,
) -> float:
    """Smallest ``B_intra / B_inter`` at which hierarchical in-network beats ``baseline``.

    ``baseline`` is ``"ring"`` (flat ring over all workers) or ``"torus"`` (2D torus). The
    search covers ratios ``>= 1`` (intra-host links at least as fast as the NIC, the regime
    hierarchical schemes are built for; there the baseline's time is fixed by the NIC and the
    hierarchical time falls as ``B_intra`` grows, so the answer is unique). Found by bisection
    on a log scale over ``[1, 1e9]``: returns 0.0 if hierarchical already wins at ratio 1 and
    ``inf`` if it does not win at 1e9.
    """
    baselines: dict[str, Callable[[float, Cluster], float]] = {
        "ring": flat_ring,
        "torus": torus2d_cluster,
    }
    if baseline not in baselines:
        raise ValueError(f"unknown baseline {baseline!r}; choose one of {sorted(baselines)}")
    other = baselines[baseline]

    def margin(ratio: float) -> float:
        c = Cluster(hosts, gpus_per_host, ratio * bw_inter, bw_inter, alpha_intra, alpha_inter)
        return other(n, c) - hierarchical_innetwork(n, c, levels)

    lo, hi = 1.0, 1e9
    if margin(lo) > 0:
        return 0.0
    if margin(hi) <= 0:
        return math.inf
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if margin(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-12:
            break
    return hi
