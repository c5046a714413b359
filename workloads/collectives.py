"""Dense all-reduce baselines over any :class:`~workloads.comm.PointToPoint` transport: the
TCP :class:`~workloads.comm.Communicator` or the RoCE v2
:class:`~workloads.rocecomm.RoceCommunicator` (each algorithm is written once, for both).

* :func:`ring_allreduce` - reduce-scatter then all-gather around a ring: ``2(P-1)`` steps,
  each rank sends and receives ``2(P-1)/P · n`` bytes.
* :func:`torus2d_allreduce` - the 2D-torus all-reduce (2DTAR) on a ``rows × cols`` grid whose
  rows are ``cols`` consecutive ranks (one host's GPUs when ranks are numbered host by host):
  reduce-scatter along each row, all-reduce of the row's shard along each column, all-gather
  along each row. Only ``1/cols`` of the tensor crosses the column (inter-host) links.
* :func:`hierarchical_ring_allreduce` - the leader-based hierarchical ring (the shape of
  Horovod's hierarchical all-reduce): each host's ranks reduce onto the host's first rank
  (a ring reduce-scatter inside the host, the shards gathered at the leader), the leaders
  run the ring all-reduce across hosts, and each leader sends the result to its host's
  ranks. One rank per host talks across the network.

Every collective returns ``(result, CollectiveStats)``; the result has the input's shape and
dtype and is bitwise identical on all ranks (each element is reduced on exactly one rank, in
a fixed order, and then copied). Integer sums wrap like the switch's 32-bit adders.
All ranks of a group must call the same collectives in the same order. Times are emulated
seconds of the communicator's clock (real seconds / TDF).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workloads.comm import PointToPoint, Traffic

PHASE_SHIFT = 16  # tag = op base + (phase << PHASE_SHIFT) + step


@dataclass(frozen=True)
class CollectiveStats:
    """What one rank spent on one collective call."""

    algorithm: str
    ranks: int
    elements: int
    bytes_sent: int
    bytes_received: int
    payload_sent: int
    payload_received: int
    messages_sent: int
    seconds: float  # emulated (the communicator's clock)
    phases: tuple[tuple[str, float], ...] = ()


class StatsMeter:
    """Measures traffic and (emulated) time of one collective call on one rank, phase by
    phase, on the communicator's clock."""

    def __init__(self, comm: PointToPoint, algorithm: str, ranks: int, elements: int) -> None:
        self._comm = comm
        self._algorithm = algorithm
        self._ranks = ranks
        self._elements = elements
        self._start_traffic = comm.traffic()
        self._clock = comm.clock
        self._start = self._clock.now()
        self._mark = self._start
        self._phases: list[tuple[str, float]] = []

    def phase(self, name: str) -> None:
        """Close the phase that just ended under ``name``."""
        now = self._clock.now()
        self._phases.append((name, now - self._mark))
        self._mark = now

    def finish(self) -> CollectiveStats:
        """The totals since the meter was created."""
        delta: Traffic = self._comm.traffic() - self._start_traffic
        return CollectiveStats(
            self._algorithm,
            self._ranks,
            self._elements,
            delta.bytes_sent,
            delta.bytes_received,
            delta.payload_sent,
            delta.payload_received,
            delta.messages_sent,
            self._clock.now() - self._start,
            tuple(self._phases),
        )


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``[start, stop)`` ranges covering ``n`` elements, sizes differing by
    at most one (the first ``n % parts`` are the longer ones)."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    base, extra = divmod(n, parts)
    bounds, start = [], 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _position(comm: PointToPoint, group: Sequence[int]) -> int:
    if len(set(group)) != len(group):
        raise ValueError(f"group {list(group)} lists a rank twice")
    if any(not 0 <= r < comm.size for r in group):
        raise ValueError(f"group {list(group)} names a rank outside 0..{comm.size - 1}")
    try:
        return list(group).index(comm.rank)
    except ValueError:
        raise ValueError(f"rank {comm.rank} is not in group {list(group)}") from None


def reduce_scatter_inplace(
    comm: PointToPoint, flat: np.ndarray, group: Sequence[int], tag: int
) -> tuple[int, int]:
    """Ring reduce-scatter of the 1-D ``flat`` over ``group``, in place.

    Returns the ``[start, stop)`` range this rank now holds fully reduced: the chunk with index
    ``(position + 1) % len(group)`` of :func:`chunk_bounds`.
    """
    p = len(group)
    pos = _position(comm, group)
    bounds = chunk_bounds(flat.size, p)
    if p == 1:
        return bounds[0]
    right, left = group[(pos + 1) % p], group[(pos - 1) % p]
    for step in range(p - 1):
        s_lo, s_hi = bounds[(pos - step) % p]
        comm.send(right, flat[s_lo:s_hi], tag + step)
        r_lo, r_hi = bounds[(pos - step - 1) % p]
        incoming = comm.recv(left, tag + step)
        flat[r_lo:r_hi] += incoming
    return bounds[(pos + 1) % p]


def allgather_inplace(comm: PointToPoint, flat: np.ndarray, group: Sequence[int], tag: int) -> None:
    """Ring all-gather in place, where the rank at ``position`` holds chunk ``(position+1) % P``
    (the layout :func:`reduce_scatter_inplace` leaves)."""
    p = len(group)
    pos = _position(comm, group)
    if p == 1:
        return
    bounds = chunk_bounds(flat.size, p)
    right, left = group[(pos + 1) % p], group[(pos - 1) % p]
    for step in range(p - 1):
        s_lo, s_hi = bounds[(pos + 1 - step) % p]
        comm.send(right, flat[s_lo:s_hi], tag + step)
        r_lo, r_hi = bounds[(pos - step) % p]
        flat[r_lo:r_hi] = comm.recv(left, tag + step)


def _flat_copy(x: np.ndarray) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"cannot all-reduce arrays of dtype {arr.dtype}")
    return np.array(arr, copy=True).reshape(-1)


def ring_allreduce(
    comm: PointToPoint, x: np.ndarray, group: Sequence[int] | None = None
) -> tuple[np.ndarray, CollectiveStats]:
    """Element-wise sum of ``x`` over ``group`` (default: all ranks) with the ring algorithm."""
    ranks = list(range(comm.size)) if group is None else list(group)
    flat = _flat_copy(x)
    meter = StatsMeter(comm, "ring", len(ranks), flat.size)
    base = comm.next_op_tag()
    reduce_scatter_inplace(comm, flat, ranks, base)
    meter.phase("reduce_scatter")
    allgather_inplace(comm, flat, ranks, base + (1 << PHASE_SHIFT))
    meter.phase("allgather")
    return flat.reshape(np.shape(x)), meter.finish()


def torus_groups(rank: int, rows: int, cols: int) -> tuple[list[int], list[int]]:
    """``(row, column)`` groups of ``rank`` on a ``rows × cols`` grid numbered row by row."""
    if rows < 1 or cols < 1:
        raise ValueError(f"grid must be at least 1x1, got {rows}x{cols}")
    r, c = divmod(rank, cols)
    return [r * cols + j for j in range(cols)], [i * cols + c for i in range(rows)]


def torus2d_allreduce(
    comm: PointToPoint, x: np.ndarray, rows: int, cols: int
) -> tuple[np.ndarray, CollectiveStats]:
    """Element-wise sum of ``x`` over all ranks with the 2D-torus algorithm (``rows·cols = P``)."""
    if rows * cols != comm.size:
        raise ValueError(f"a {rows}x{cols} grid does not match {comm.size} ranks")
    row, col = torus_groups(comm.rank, rows, cols)
    flat = _flat_copy(x)
    meter = StatsMeter(comm, "torus2d", comm.size, flat.size)
    base = comm.next_op_tag()
    lo, hi = reduce_scatter_inplace(comm, flat, row, base)
    meter.phase("row_reduce_scatter")
    shard = flat[lo:hi]
    reduce_scatter_inplace(comm, shard, col, base + (1 << PHASE_SHIFT))
    allgather_inplace(comm, shard, col, base + (2 << PHASE_SHIFT))
    meter.phase("column_allreduce")
    allgather_inplace(comm, flat, row, base + (3 << PHASE_SHIFT))
    meter.phase("row_allgather")
    return flat.reshape(np.shape(x)), meter.finish()


def hierarchical_ring_allreduce(
    comm: PointToPoint, x: np.ndarray, gpus_per_host: int
) -> tuple[np.ndarray, CollectiveStats]:
    """Element-wise sum of ``x`` over all ranks with the leader-based hierarchical ring;
    ranks are numbered host by host, ``gpus_per_host`` consecutive ranks per host."""
    g = gpus_per_host
    if g < 1 or comm.size % g:
        raise ValueError(f"gpus_per_host {g} does not divide {comm.size} ranks")
    first = comm.rank - comm.rank % g
    local = list(range(first, first + g))
    leaders = list(range(0, comm.size, g))
    flat = _flat_copy(x)
    meter = StatsMeter(comm, "hier", comm.size, flat.size)
    base = comm.next_op_tag()
    lo, hi = reduce_scatter_inplace(comm, flat, local, base)
    bounds = chunk_bounds(flat.size, g)
    if comm.rank != first:
        comm.send(first, flat[lo:hi], base + (1 << PHASE_SHIFT))
    else:
        for pos in range(1, g):
            s_lo, s_hi = bounds[(pos + 1) % g]
            flat[s_lo:s_hi] = comm.recv(first + pos, base + (1 << PHASE_SHIFT))
    meter.phase("intra_reduce")
    if comm.rank == first:
        reduce_scatter_inplace(comm, flat, leaders, base + (2 << PHASE_SHIFT))
        allgather_inplace(comm, flat, leaders, base + (3 << PHASE_SHIFT))
    meter.phase("inter_allreduce")
    if comm.rank == first:
        for member in local[1:]:
            comm.send(member, flat, base + (4 << PHASE_SHIFT))
    else:
        flat[:] = comm.recv(first, base + (4 << PHASE_SHIFT))
    meter.phase("intra_broadcast")
    return flat.reshape(np.shape(x)), meter.finish()
