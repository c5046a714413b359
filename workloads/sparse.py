"""Hierarchical top-k sparse all-reduce (HiTopKComm) and the sparse ring all-gather.

HiTopKComm (Shi et al., 2020) spends the fast intra-host links on dense traffic and the slow
inter-host links on sparse traffic only:

1. reduce-scatter the dense gradient among the ranks of each host; the rank with local
   index ``l`` then holds its host's sum of shard ``(l + 1) % g``;
2. select the top-k of that shard (MSTopK by default; optionally with error feedback) and
   all-gather the ``(index, value)`` pairs around a ring of the ranks that hold the same
   shard on every host; each adds all hosts' pairs into a dense shard;
3. all-gather the dense shards inside each host.

The result, identical on every rank, is ``sum over hosts of topk(host sum)`` shard by shard.
Hosts are given as one host id per rank; every host must hold the same number of ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from workloads.collectives import (
    PHASE_SHIFT,
    CollectiveStats,
    StatsMeter,
    allgather_inplace,
    chunk_bounds,
    reduce_scatter_inplace,
)
from workloads.comm import Communicator
from workloads.mstopk import (
    DEFAULT_ROUNDS,
    Selection,
    k_for_density,
    mstopk,
    scatter_add,
    topk_exact,
)

Selector = Callable[[np.ndarray, int], Selection]


def host_layout(host_ids: Sequence[int]) -> list[list[int]]:
    """Ranks of each host, hosts in ascending id order and ranks ascending within a host."""
    hosts: dict[int, list[int]] = {}
    for rank, host in enumerate(host_ids):
        hosts.setdefault(int(host), []).append(rank)
    groups = [hosts[h] for h in sorted(hosts)]
    sizes = {len(g) for g in groups}
    if len(sizes) > 1:
        raise ValueError(
            f"every host must hold the same number of ranks, got sizes {sorted(sizes)}"
        )
    return groups


def block_hosts(ranks: int, ranks_per_host: int) -> tuple[int, ...]:
    """Host ids when ranks are numbered host by host: rank ``r`` is on host ``r // g``."""
    if ranks_per_host < 1 or ranks % ranks_per_host:
        raise ValueError(f"{ranks} ranks cannot be split into hosts of {ranks_per_host}")
    return tuple(r // ranks_per_host for r in range(ranks))


def sparse_ring_allgather(
    comm: Communicator, indices: np.ndarray, values: np.ndarray, group: Sequence[int], tag: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every group member's ``(indices, values)``, in group order, via a ring (``len-1`` steps).

    Blocks may differ in length; each step forwards the block received in the previous one.
    """
    p = len(group)
    pos = list(group).index(comm.rank)
    blocks: list[tuple[np.ndarray, np.ndarray] | None] = [None] * p
    blocks[pos] = (indices, values)
    right, left = group[(pos + 1) % p], group[(pos - 1) % p]
    for step in range(p - 1):
        out = blocks[(pos - step) % p]
        assert out is not None
        comm.send(right, out[0], tag + 2 * step)
        comm.send(right, out[1], tag + 2 * step + 1)
        got_idx = comm.recv(left, tag + 2 * step)
        got_val = comm.recv(left, tag + 2 * step + 1)
        if got_idx.shape != got_val.shape:
            raise ValueError(f"rank {left} sent {got_idx.size} indices but {got_val.size} values")
        blocks[(pos - step - 1) % p] = (got_idx, got_val)
    return [b for b in blocks if b is not None]


def hitopk_allreduce(
    comm: Communicator,
    x: np.ndarray,
    host_ids: Sequence[int],
    density: float,
    selector: Selector | None = None,
    residual: np.ndarray | None = None,
) -> tuple[np.ndarray, CollectiveStats]:
    """Sparse all-reduce of ``x`` with HiTopKComm; ``density`` is the fraction kept per shard.

    ``selector(shard, k)`` picks the elements (default: :func:`~workloads.mstopk.mstopk`).
    With ``residual`` (a float array shaped like ``x``, owned by this rank across calls), error
    feedback is applied: the residual is added to this rank's reduced shard before selection,
    and afterwards holds what was not sent (zero outside the shard).
    """
    if len(host_ids) != comm.size:
        raise ValueError(f"{len(host_ids)} host ids given for {comm.size} ranks")
    hosts = host_layout(host_ids)
    select = selector if selector is not None else _default_selector
    flat = np.array(np.asarray(x), copy=True).reshape(-1)
    if flat.dtype.kind != "f":
        raise TypeError(f"sparse all-reduce needs a float tensor, got {flat.dtype}")
    if residual is not None and residual.shape != np.shape(x):
        raise ValueError(f"residual shape {residual.shape} differs from tensor shape {np.shape(x)}")
    my_host = next(h for h, ranks in enumerate(hosts) if comm.rank in ranks)
    local = hosts[my_host].index(comm.rank)
    column = [ranks[local] for ranks in hosts]
    meter = StatsMeter(comm, "hitopk", comm.size, flat.size)
    base = comm.next_op_tag()

    lo, hi = reduce_scatter_inplace(comm, flat, hosts[my_host], base)
    meter.phase("intra_reduce_scatter")

    shard = flat[lo:hi]
    if residual is not None:
        res_flat = residual.reshape(-1)
        shard += res_flat[lo:hi].astype(shard.dtype)
    chosen = (
        select(shard, k_for_density(shard.size, density))
        if shard.size
        else Selection(np.empty(0, dtype=np.int64), shard[:0].copy())
    )
    if residual is not None:
        res_flat[:] = 0
        res_flat[lo:hi] = shard
        res_flat[lo + chosen.indices] = 0
    blocks = sparse_ring_allgather(
        comm,
        chosen.indices.astype(np.int32),
        chosen.values.astype(shard.dtype),
        column,
        base + (1 << PHASE_SHIFT),
    )
    shard[:] = 0
    for idx, vals in blocks:  # same order on every rank of the column: identical sums
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= shard.size):
            raise ValueError("a peer sent an index outside its shard")
        scatter_add(shard, idx, vals, unique=True)
    meter.phase("inter_sparse_allgather")

    allgather_inplace(comm, flat, hosts[my_host], base + (2 << PHASE_SHIFT))
    meter.phase("intra_allgather")
    return flat.reshape(np.shape(x)), meter.finish()


def _default_selector(shard: np.ndarray, k: int) -> Selection:
    return mstopk(shard, k, rounds=DEFAULT_ROUNDS)


def exact_selector(shard: np.ndarray, k: int) -> Selection:
    """Exact top-k, for comparison runs."""
    return topk_exact(shard, k)


def hitopk_reference(
    xs: Sequence[np.ndarray],
    host_ids: Sequence[int],
    density: float,
    selector: Selector | None = None,
) -> np.ndarray:
    """What :func:`hitopk_allreduce` computes, from all ranks' inputs at once (for tests and
    for checking emulated runs); host sums are formed in the ring's order."""
    hosts = host_layout(host_ids)
    select = selector if selector is not None else _default_selector
    n = np.asarray(xs[0]).size
    g = len(hosts[0])
    bounds = chunk_bounds(n, g)
    total = np.zeros(n, dtype=np.asarray(xs[0]).dtype)
    for shard_no, (lo, hi) in enumerate(bounds):
        for ranks in hosts:
            # The ring reduce-scatter sums chunk c starting at position c and moving right.
            order = [ranks[(shard_no + j) % g] for j in range(g)]
            acc = np.asarray(xs[order[0]]).reshape(-1)[lo:hi].copy()
            for r in order[1:]:
                acc += np.asarray(xs[r]).reshape(-1)[lo:hi]
            chosen = select(acc, k_for_density(acc.size, density)) if acc.size else None
            if chosen is not None:
                scatter_add(total[lo:hi], chosen.indices, chosen.values, unique=True)
    return total.reshape(np.shape(xs[0]))
