"""Collectives as dependency graphs of network operations, the input of the simulator.

A :class:`Schedule` is a list of operations (``send``: one worker sends a number of bytes to
another; ``ina``: one worker contributes a message to an in-network aggregation job and waits
for the sum) and dependencies between them ("op A may start once op B has completed").
Building the graph in numpy keeps 1024-worker rings (two million operations) to a fraction of
a second; the simulator then runs it without calling back into Python.

Workers are numbered host by host (``w = host * gpus_per_host + gpu``) and hosts leaf by leaf,
as in the emulation. Per-worker "ready" arrays chain phases: ``ready[w]`` is the op after
which worker ``w`` holds the data the next phase needs (``-1``: ready from the start).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms import registry
from sim.fabric import Fabric

OP_SEND = 0
OP_INA = 1

#: Algorithms the simulator and the cost models both know (names as in workloads' stats).
ALGORITHMS = registry.sim_names()


@dataclass(frozen=True)
class Schedule:
    """Operations (parallel arrays) and dependencies ``dep_op[i]`` after ``dep_on[i]``."""

    kind: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    job: np.ndarray
    dep_op: np.ndarray
    dep_on: np.ndarray

    @property
    def ops(self) -> int:
        """Number of operations."""
        return int(self.kind.size)


def _column(values: np.ndarray | int, n: int, dtype: type) -> np.ndarray:
    """``values`` as a flat array of ``n`` entries (a scalar is repeated)."""
    arr: np.ndarray = np.asarray(values, dtype=dtype)
    return np.full(n, arr, dtype=dtype) if arr.ndim == 0 else arr.ravel()


class _Builder:
    """Accumulates operation blocks and dependency blocks; ids are assigned in order."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, ...]] = []
        self.deps: list[tuple[np.ndarray, np.ndarray]] = []
        self.count = 0

    def add(self, kind: int, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray | int,
            job: np.ndarray | int = -1) -> np.ndarray:
        src = np.asarray(src, dtype=np.int32).ravel()
        n = src.size
        ids = np.arange(self.count, self.count + n, dtype=np.int64)
        self.count += n
        self.blocks.append((
            np.full(n, kind, dtype=np.int32),
            src,
            np.asarray(dst, dtype=np.int32).ravel(),
            _column(nbytes, n, np.int64),
            _column(job, n, np.int32),
        ))
        return ids

    def depend(self, ops: np.ndarray, on: np.ndarray) -> None:
        ops = np.asarray(ops, dtype=np.int64).ravel()
        on = np.asarray(on, dtype=np.int64).ravel()
        keep = on >= 0
        if keep.any():
            self.deps.append((ops[keep], on[keep]))

    def build(self) -> Schedule:
        def cat(i: int, dtype: type) -> np.ndarray:
            parts = [b[i] for b in self.blocks]
            return np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0, dtype),
                                        dtype=dtype)

        dep_op = np.concatenate([d[0] for d in self.deps]) if self.deps else np.zeros(0)
        dep_on = np.concatenate([d[1] for d in self.deps]) if self.deps else np.zeros(0)
        return Schedule(cat(0, np.int32), cat(1, np.int32), cat(2, np.int32), cat(3, np.int64),
                        cat(4, np.int32), np.ascontiguousarray(dep_op, dtype=np.int64),
                        np.ascontiguousarray(dep_on, dtype=np.int64))


def chunk_sizes(nbytes: int, parts: int) -> np.ndarray:
    """``parts`` near-equal sizes summing to ``nbytes`` (the larger ones first)."""
    base, extra = divmod(int(nbytes), parts)
    return np.array([base + (1 if i < extra else 0) for i in range(parts)], dtype=np.int64)


def _ring_pass(b: _Builder, groups: np.ndarray, sizes: np.ndarray, mode: str,
               ready: np.ndarray) -> np.ndarray:
    """Rings over the rows of ``groups`` (all of the same size q), run concurrently.

    ``mode``: ``"rs"`` reduce-scatter or ``"ag"`` all-gather (``q-1`` steps each; in step k
    member i sends chunk ``(i-k) mod q`` resp. ``(i+1-k) mod q`` to member i+1) or ``"ar"``
    (both). ``sizes[c]`` is the byte size of chunk c. Returns the new ready array.
    """
    g, q = groups.shape
    if q == 1:
        return ready
    steps = {"rs": [("rs", k) for k in range(q - 1)], "ag": [("ag", k) for k in range(q - 1)]}
    plan = steps["rs"] + steps["ag"] if mode == "ar" else steps[mode]
    pos = np.arange(q)
    dst = np.roll(groups, -1, axis=1)
    prev: np.ndarray | None = None
    for index, (phase, k) in enumerate(plan):
        chunk = (pos - k) % q if phase == "rs" else (pos + 1 - k) % q
        ids = b.add(OP_SEND, groups, dst, np.broadcast_to(sizes[chunk], (g, q)).copy()).reshape(
            g, q
        )
        if prev is None:
            b.depend(ids, ready[groups])
        else:
            # member i forwards what it received from member i-1 in the previous step
            b.depend(ids, np.roll(prev, 1, axis=1))
            if index == 1:
                b.depend(ids, ready[groups])
        prev = ids
    assert prev is not None
    out = ready.copy()
    out[groups] = np.roll(prev, 1, axis=1)
    return out


def _host_groups(f: Fabric) -> np.ndarray:
    """One row per host: its GPUs."""
    return np.arange(f.workers, dtype=np.int32).reshape(f.hosts, f.gpus_per_host)


def ring(f: Fabric, nbytes: int, density: float = 0.01) -> Schedule:
    """Flat ring all-reduce over all workers in host-contiguous order."""
    b = _Builder()
    groups = np.arange(f.workers, dtype=np.int32)[None, :]
    _ring_pass(b, groups, chunk_sizes(nbytes, f.workers), "ar", np.full(f.workers, -1))
    return b.build()


def torus_grid(f: Fabric) -> tuple[int, int]:
    """``(rows, cols)`` of the 2D torus: rows are hosts (cols = GPUs per host); with one GPU
    per host, rows are leaves (cols = hosts per leaf)."""
    if f.gpus_per_host > 1:
        return f.hosts, f.gpus_per_host
    return f.leaves, f.hosts_per_leaf


def torus2d(f: Fabric, nbytes: int, density: float = 0.01) -> Schedule:
    """2D-torus all-reduce: row reduce-scatter, column all-reduce of the shard, row all-gather."""
    rows, cols = torus_grid(f)
    grid = np.arange(f.workers, dtype=np.int32).reshape(rows, cols)
    b = _Builder()
    ready = np.full(f.workers, -1, dtype=np.int64)
    row_sizes = chunk_sizes(nbytes, cols)
    ready = _ring_pass(b, grid, row_sizes, "rs", ready)
    # after the row reduce-scatter, row position i holds chunk (i+1) mod cols; the columns
    # (same position in every row) all-reduce that chunk
    for i in range(cols):
        shard = int(row_sizes[(i + 1) % cols])
        column = grid[:, i][None, :]
        ready = _ring_pass(b, column, chunk_sizes(shard, rows), "ar", ready)
    ready = _ring_pass(b, grid, row_sizes, "ag", ready)
    return b.build()


def ina(f: Fabric, nbytes: int, density: float = 0.01) -> Schedule:
    """Flat in-network all-reduce: every worker sends its whole gradient to the switches."""
    b = _Builder()
    workers = np.arange(f.workers, dtype=np.int32)
    b.add(OP_INA, workers, workers, nbytes, 0)
    return b.build()


def ina_hier(f: Fabric, nbytes: int, density: float = 0.01) -> Schedule:
    """Hierarchical in-network all-reduce: intra-host reduce-scatter, in-network all-reduce
    of each GPU's shard (one job per shard index), intra-host all-gather."""
    g = f.gpus_per_host
    if g == 1:
        return ina(f, nbytes)
    b = _Builder()
    hosts = _host_groups(f)
    sizes = chunk_sizes(nbytes, g)
    ready = _ring_pass(b, hosts, sizes, "rs", np.full(f.workers, -1, dtype=np.int64))
    shard_of = (np.arange(g) + 1) % g  # ring position i holds chunk (i+1) mod g
    workers = hosts.ravel()
    shard = np.tile(shard_of, f.hosts)
    ids = b.add(OP_INA, workers, workers, sizes[shard], shard)
    b.depend(ids, ready[workers])
    ready = ready.copy()
    ready[workers] = ids
    _ring_pass(b, hosts, sizes, "ag", ready)
    return b.build()


def sparse_block_bytes(nbytes: int, density: float, value_bytes: int = 4,
                       index_bytes: int = 4) -> int:
    """Bytes of one worker's top-k (values and indices) for a dense ``nbytes`` gradient."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density must be in (0, 1], got {density}")
    k = max(1, round(density * nbytes / value_bytes))
    return k * (value_bytes + index_bytes)


def hitopk(f: Fabric, nbytes: int, density: float = 0.01) -> Schedule:
    """HiTopKComm: intra-host reduce-scatter, ring all-gather of each shard's top-k between
    hosts (one ring per shard index), intra-host all-gather. One GPU per host: a plain
    sparse ring all-gather over all workers."""
    g = f.gpus_per_host
    b = _Builder()
    hosts = _host_groups(f)
    sizes = chunk_sizes(nbytes, g)
    ready = _ring_pass(b, hosts, sizes, "rs", np.full(f.workers, -1, dtype=np.int64))
    shard_of = (np.arange(g) + 1) % g if g > 1 else np.zeros(1, dtype=np.int64)
    for i in range(g):
        block = sparse_block_bytes(int(sizes[shard_of[i]]), density)
        column = hosts[:, i][None, :]
        ready = _ring_pass(b, column, np.full(f.hosts, block, dtype=np.int64), "ag", ready)
    _ring_pass(b, hosts, sizes, "ag", ready)
    return b.build()


def build(algorithm: str, f: Fabric, nbytes: int, density: float = 0.01) -> Schedule:
    """The schedule of ``algorithm`` (one of :data:`ALGORITHMS`) for ``nbytes`` per worker."""
    if nbytes < 0:
        raise ValueError(f"message size must be >= 0 bytes, got {nbytes}")
    try:
        alg = registry.get(algorithm)
    except registry.UnknownAlgorithmError:
        alg = None
    if alg is None or alg.sim_name is None:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    schedule: Schedule = alg.schedule_fn()(f, nbytes, density)
    return schedule
