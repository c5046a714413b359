"""Gradient exchanges: the pluggable collectives the trainer sums gradients with.

Each exchange is made once per rank (it may keep state across steps, like the error-feedback
residual) and called as ``exchange(comm, grad, epoch) -> (sum over ranks, ExchangeStats)``:

* ``fp32-ring``  - float32 ring all-reduce (:func:`workloads.collectives.ring_allreduce`);
* ``inswitch-reference`` - fixed-point aggregation with exactly the switch's arithmetic:
  gradients encoded by :class:`workloads.fixedpoint.FixedPoint` (plus the clamp-count word of
  the rescale-and-retry policy) and summed as int32 with saturation, in rank order, by rank 0
  acting as the switch (every rank sends its message once and receives the sum once, the
  in-network traffic pattern);
* ``inswitch``   - the same through the real P4 switch when the caller passes an aggregator
  (:func:`channel_aggregator` over a :class:`workloads.innetwork.AggregationChannel`);
  without one (loopback: there is no switch) the reference;
* ``mstopk``     - MSTopK sparsification with error feedback (HiTopKComm, one rank per host
  unless told otherwise);
* ``hybrid``     - MSTopK for the first ``sparse_epochs`` epochs, then the dense 2D torus
  (:class:`workloads.schedule.HybridSchedule`).

The names, their aliases (``ring``, ``ina``, ``topk``...) and which factory below builds each
exchange come from the algorithm registry (:class:`algorithms.registry.TrainingExchange`):
adding an exchange is one factory here and one entry there. ``ExchangeStats.seconds`` is
emulated (the communicator's clock).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from algorithms import registry
from workloads.collectives import ring_allreduce
from workloads.comm import Communicator
from workloads.fixedpoint import INT32_MAX, RescalePolicy, aggregate_with_retry
from workloads.schedule import HybridSchedule
from workloads.sparse import block_hosts, hitopk_allreduce

log = logging.getLogger(__name__)

INT32_MIN = -(2**31)
#: The training names of the exchanges, from the algorithm registry.
COLLECTIVES: tuple[str, ...] = registry.training_names()

IntAggregator = Callable[[np.ndarray], np.ndarray]
"""Takes this rank's int32 message, returns the element-wise int32 sum over all ranks."""


@dataclass(frozen=True)
class ExchangeStats:
    """What one exchange cost this rank."""

    algorithm: str
    seconds: float
    payload_sent: int
    bytes_sent: int
    detail: dict[str, object] = field(default_factory=dict)


class GradientExchange(Protocol):
    """A per-rank gradient collective."""

    name: str

    def __call__(
        self, comm: Communicator, grad: np.ndarray, epoch: int
    ) -> tuple[np.ndarray, ExchangeStats]: ...


def _measured(
    comm: Communicator, algorithm: str, run: Callable[[], tuple[np.ndarray, dict[str, object]]]
) -> tuple[np.ndarray, ExchangeStats]:
    before = comm.traffic()
    start = comm.clock.now()
    result, detail = run()
    seconds = comm.clock.now() - start
    delta = comm.traffic() - before
    return result, ExchangeStats(algorithm, seconds, delta.payload_sent, delta.bytes_sent, detail)


class RingExchange:
    """Dense float32 ring all-reduce."""

    name = "fp32-ring"

    def __call__(
        self, comm: Communicator, grad: np.ndarray, epoch: int
    ) -> tuple[np.ndarray, ExchangeStats]:
        return _measured(comm, self.name, lambda: (ring_allreduce(comm, grad)[0], {}))


def saturating_sum(messages: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Int32 sum of ``messages`` added one after another with saturation, as the switch's
    ``|+|`` does; also returns where an addition saturated (the switch's overflow flag)."""
    if not messages:
        raise ValueError("nothing to sum")
    acc = np.asarray(messages[0], dtype=np.int64).copy()
    overflow = np.zeros(acc.shape, dtype=bool)
    for msg in messages[1:]:
        acc += np.asarray(msg, dtype=np.int64)
        over = (acc > INT32_MAX) | (acc < INT32_MIN)
        if over.any():
            overflow |= over
            np.clip(acc, INT32_MIN, INT32_MAX, out=acc)
    return acc.astype(np.int32), overflow


def switch_reference_aggregator(comm: Communicator) -> IntAggregator:
    """An :data:`IntAggregator` in which rank 0 plays the switch: every other rank sends its
    message to rank 0, which adds all of them in rank order with saturation and sends the
    sum back. A saturated element also bumps the last word (the clamp count of
    :func:`~workloads.fixedpoint.aggregate_with_retry`), so every worker retries at a
    smaller scale, as the switch's overflow flag would make them."""

    def aggregate(message: np.ndarray) -> np.ndarray:
        msg = np.ascontiguousarray(message, dtype=np.int32)
        tag = comm.next_op_tag()
        if comm.rank != 0:
            comm.send(0, msg, tag)
            return comm.recv(0, tag + 1)
        parts = [msg] + [comm.recv(r, tag) for r in range(1, comm.size)]
        total, overflow = saturating_sum(parts)
        if overflow.any() and total.size:
            total[-1] = max(int(total[-1]), 1)
        for r in range(1, comm.size):
            comm.send(r, total, tag + 1)
        return total

    return aggregate


class IntChannel(Protocol):
    """What :class:`workloads.innetwork.AggregationChannel` offers the trainer."""

    def allreduce_int32(self, words: np.ndarray) -> tuple[np.ndarray, bool]: ...


class ChannelAggregator:
    """An :data:`IntAggregator` through the real switch: the channel's int32 all-reduce, with
    the switch's overflow flag turned into a non-zero clamp word (all workers retry).

    It also counts what it sent, since RoCE traffic bypasses the communicator's counters:
    ``payload_sent`` (int32 bytes handed to the switch) and :meth:`wire_bytes` (the RoCE
    requester's UDP payload bytes, retransmissions included, when the channel exposes them)."""

    def __init__(self, channel: IntChannel) -> None:
        self.channel = channel
        self.payload_sent = 0

    def __call__(self, message: np.ndarray) -> np.ndarray:
        total, overflow = self.channel.allreduce_int32(message)
        self.payload_sent += 4 * int(np.asarray(message).size)
        total = np.array(total, dtype=np.int32, copy=True)
        if overflow and total.size and total[-1] == 0:
            total[-1] = 1
        return total

    def wire_bytes(self) -> int:
        """RoCE bytes this worker's requester has sent (0 when the channel does not say)."""
        stats = getattr(getattr(self.channel, "req", None), "stats", None)
        return int(getattr(stats, "bytes_sent", 0))


def channel_aggregator(channel: IntChannel) -> ChannelAggregator:
    """The switch's int32 all-reduce on ``channel`` as the trainer's integer aggregator."""
    return ChannelAggregator(channel)


class InSwitchExchange:
    """Fixed-point aggregation with rescale-and-retry through an integer aggregator."""

    def __init__(
        self,
        comm: Communicator,
        policy: RescalePolicy,
        aggregator: IntAggregator | None = None,
        name: str = "inswitch-reference",
    ) -> None:
        self.name = name
        self.policy = policy
        self._aggregate = (aggregator if aggregator is not None
                           else switch_reference_aggregator(comm))
        self.retries = 0

    def __call__(
        self, comm: Communicator, grad: np.ndarray, epoch: int
    ) -> tuple[np.ndarray, ExchangeStats]:
        def run() -> tuple[np.ndarray, dict[str, object]]:
            result, report = aggregate_with_retry(grad, self._aggregate, comm.size, self.policy)
            self.retries += report.attempts - 1
            return result, {"frac_bits": report.frac_bits, "attempts": report.attempts}

        agg = self._aggregate
        if not isinstance(agg, ChannelAggregator):
            return _measured(comm, self.name, run)
        # Through the switch the bytes go over RoCE, not the communicator: count them there.
        payload0, wire0 = agg.payload_sent, agg.wire_bytes()
        result, stats = _measured(comm, self.name, run)
        return result, dataclasses.replace(
            stats, payload_sent=stats.payload_sent + agg.payload_sent - payload0,
            bytes_sent=stats.bytes_sent + agg.wire_bytes() - wire0)


class SparseExchange:
    """MSTopK + HiTopKComm with error feedback (the residual stays on this rank)."""

    name = "mstopk"

    def __init__(self, size: int, density: float, host_ids: Sequence[int]) -> None:
        self.density = density
        self.host_ids = tuple(host_ids)
        self.residual = np.zeros(size, dtype=np.float32)

    def __call__(
        self, comm: Communicator, grad: np.ndarray, epoch: int
    ) -> tuple[np.ndarray, ExchangeStats]:
        return _measured(
            comm,
            self.name,
            lambda: (
                hitopk_allreduce(comm, grad, self.host_ids, self.density,
                                 residual=self.residual)[0],
                {"density": self.density},
            ),
        )


class HybridExchange:
    """The hybrid schedule: sparse MSTopK early, dense 2D-torus all-reduce later.

    ``sparse_hosts`` (optional) groups the ranks differently for the sparse phase's
    HiTopKComm than the torus grid does: on the emulated network every host is a machine of
    its own (one rank each), so HiTopKComm's dense intra-host step would cross a slow link,
    while the torus' rows are the racks."""

    name = "hybrid"

    def __init__(self, size: int, schedule: HybridSchedule,
                 sparse_hosts: Sequence[int] | None = None) -> None:
        self.schedule = schedule
        self.sparse_hosts = tuple(sparse_hosts) if sparse_hosts is not None else None
        self.residual = np.zeros(size, dtype=np.float32)

    def _allreduce(self, comm: Communicator, grad: np.ndarray, epoch: int) -> np.ndarray:
        if self.sparse_hosts is not None and self.schedule.mode(epoch) == "sparse":
            return hitopk_allreduce(comm, grad, self.sparse_hosts, self.schedule.density,
                                    residual=self.residual)[0]
        return self.schedule.allreduce(comm, grad, epoch, residual=self.residual)[0]

    def __call__(
        self, comm: Communicator, grad: np.ndarray, epoch: int
    ) -> tuple[np.ndarray, ExchangeStats]:
        mode = self.schedule.mode(epoch)
        return _measured(
            comm,
            f"{self.name}:{mode}",
            lambda: (self._allreduce(comm, grad, epoch), {"mode": mode}),
        )


def default_ranks_per_host(workers: int) -> int:
    """Ranks per emulated host for the torus/HiTopK grid when not given: the largest divisor
    of ``workers`` not above its square root (a 2 x 2 grid for 4 workers, 1 x P for primes)."""
    best = 1
    for d in range(1, int(workers**0.5) + 1):
        if workers % d == 0:
            best = d
    return best


@dataclass(frozen=True)
class ExchangeOptions:
    """Knobs of the exchanges (only the ones a collective uses matter to it)."""

    density: float = 0.05
    sparse_epochs: int = 2
    ranks_per_host: int | None = None
    frac_bits: int = 20
    retry_step: int = 4
    sparse_ranks_per_host: int | None = None  # hybrid's sparse phase; None: the torus grid


def ring_exchange(name: str, comm: Communicator, size: int, options: ExchangeOptions,
                  aggregator: IntAggregator | None) -> GradientExchange:
    """``fp32-ring``."""
    return RingExchange()


def inswitch_exchange(name: str, comm: Communicator, size: int, options: ExchangeOptions,
                      aggregator: IntAggregator | None) -> GradientExchange:
    """``inswitch`` (through ``aggregator``, the switch, when given) and
    ``inswitch-reference`` (the switch's arithmetic on the hosts)."""
    policy = RescalePolicy(options.frac_bits, options.retry_step, min(-16, options.frac_bits))
    real = aggregator if name == "inswitch" else None
    if name == "inswitch" and real is None and comm.rank == 0:
        log.info("inswitch: no switch aggregator given; using the reference arithmetic")
    label = "inswitch" if real is not None else "inswitch-reference"
    return InSwitchExchange(comm, policy, real, label)


def sparse_exchange(name: str, comm: Communicator, size: int, options: ExchangeOptions,
                    aggregator: IntAggregator | None) -> GradientExchange:
    """``mstopk``: one rank per host unless ``options.ranks_per_host`` says otherwise."""
    per_host = options.ranks_per_host or 1
    return SparseExchange(size, options.density, block_hosts(comm.size, per_host))


def hybrid_exchange(name: str, comm: Communicator, size: int, options: ExchangeOptions,
                    aggregator: IntAggregator | None) -> GradientExchange:
    """``hybrid``: the torus grid from ``options.ranks_per_host`` (default
    :func:`default_ranks_per_host`), the sparse phase's from ``sparse_ranks_per_host``."""
    workers = comm.size
    per_host = options.ranks_per_host or default_ranks_per_host(workers)
    schedule = HybridSchedule(
        options.sparse_epochs, options.density, block_hosts(workers, per_host)
    )
    sparse = (block_hosts(workers, options.sparse_ranks_per_host)
              if options.sparse_ranks_per_host is not None else None)
    return HybridExchange(size, schedule, sparse)


def make_exchange(
    name: str,
    comm: Communicator,
    size: int,
    options: ExchangeOptions = ExchangeOptions(),
    aggregator: IntAggregator | None = None,
) -> GradientExchange:
    """The exchange called ``name`` (one of :data:`COLLECTIVES`, or an algorithm name or
    alias of the registry meaning one) for this rank; ``aggregator`` is the switch's integer
    all-reduce for ``inswitch``. An unknown name raises
    :class:`algorithms.registry.UnknownAlgorithmError` (a ValueError) listing the valid ones."""
    spec = registry.training_exchange(name)
    factory = spec.factory_fn()
    exchange: GradientExchange = factory(spec.name, comm, size, options, aggregator)
    return exchange
