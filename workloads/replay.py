"""Gradient-traffic replay: a model profile's buckets, all-reduced as training would.

Each iteration spends the profile's forward time, then walks the backward pass in layer
order (:meth:`~workloads.profiles.ModelProfile.buckets`): when a fusion bucket's last layer
is done, the bucket is handed to a communication thread that all-reduces it while the
backward pass goes on (compute/communication overlap, as Horovod and DDP do). The iteration
ends when the backward pass and every bucket's all-reduce are done. Compute is *modelled*
(slept: the hosts have no GPUs); communication is real traffic through the emulated network.

Any algorithm can be replayed through a :data:`Reducer`; :func:`make_reducer` builds one for
ring, 2D torus and hierarchical ring (each over TCP or RoCE), HiTopKComm (``topk``), the
hybrid schedule and in-network (flat or hierarchical). The result is a
:class:`~workloads.results.RunRecord` with the CPU load of the process and its "not
network-bound" flag.

Time dilation: the replay's clock (the same :class:`vtime.VirtualClock` as its reducer's
communicator or agent) spends the modelled compute, ``TDF`` times as long in real time as
the profile says, so compute keeps its ratio to the dilated network; the iteration and
communication times it records are emulated seconds, and ``config.timeout`` is too.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.random import default_rng

from algorithms import registry
from vtime import REAL_TIME, VirtualClock
from workloads.collectives import hierarchical_ring_allreduce, ring_allreduce, torus2d_allreduce
from workloads.comm import Communicator, PointToPoint
from workloads.innetwork import (
    AggregationChannel,
    IntraHost,
    hierarchical_allreduce,
    innetwork_allreduce,
)
from workloads.profiles import DEFAULT_FLOPS_PER_S, ModelProfile
from workloads.results import CpuMeter, RunRecord, cpu_saturated
from workloads.schedule import make_schedule
from workloads.sparse import block_hosts, hitopk_allreduce

log = logging.getLogger(__name__)

#: ``reducer(tensor, iteration, bucket_index) -> (result, stats)``; stats has ``bytes_sent``,
#: ``payload_sent`` and optionally ``retransmissions``.
Reducer = Callable[[np.ndarray, int, int], tuple[np.ndarray, Any]]

ALGORITHMS = registry.names()


@dataclass(frozen=True)
class ReplayConfig:
    """How to replay: iterations measured, warm-up iterations not recorded, fusion bucket
    size (bytes, of the scaled profile), accelerator speed for modelled compute."""

    iterations: int = 5
    warmup: int = 1
    bucket_bytes: int = 4 << 20
    flops_per_s: float = DEFAULT_FLOPS_PER_S
    seed: int = 0
    timeout: float = 600.0

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.warmup < 0:
            raise ValueError("iterations must be >= 1 and warmup >= 0")
        if self.bucket_bytes < 4:
            raise ValueError("bucket_bytes must be at least one float")


@dataclass(frozen=True)
class ReducerInputs:
    """What a reducer factory may use: a point-to-point communicator, TCP or RoCE (ranks
    numbered host by host, ``gpus_per_host`` per host), or an aggregation channel, and the
    algorithms' options. The sparse algorithms need the TCP :class:`Communicator`."""

    comm: PointToPoint | None = None
    channel: AggregationChannel | None = None
    gpus_per_host: int = 1
    density: float = 0.01
    sparse_epochs: int = 1
    iters_per_epoch: int = 1
    intra: IntraHost | None = None

    def need_comm(self, algorithm: str) -> PointToPoint:
        if self.comm is None:
            raise ValueError(f"{algorithm} needs a point-to-point communicator (peers)")
        return self.comm

    def need_tcp(self, algorithm: str) -> Communicator:
        if not isinstance(self.comm, Communicator):
            raise ValueError(f"{algorithm} needs a TCP communicator (peers)")
        return self.comm

    def need_channel(self, algorithm: str) -> AggregationChannel:
        if self.channel is None:
            raise ValueError(f"{algorithm} needs an aggregation channel (a job plan)")
        return self.channel


def _residuals() -> Callable[[int, np.ndarray], np.ndarray]:
    """Error-feedback residuals, one per fusion bucket (sparse algorithms)."""
    residuals: dict[int, np.ndarray] = {}

    def residual(b: int, x: np.ndarray) -> np.ndarray:
        if b not in residuals:
            residuals[b] = np.zeros_like(x)
        return residuals[b]

    return residual


def ring_reducer(inp: ReducerInputs) -> Reducer:
    """Flat ring over all ranks (TCP or RoCE: the communicator's)."""
    comm = inp.need_comm("ring")
    return lambda x, it, b: ring_allreduce(comm, x)


def torus_reducer(inp: ReducerInputs) -> Reducer:
    """2D torus: hosts as rows, each host's GPUs as columns (TCP or RoCE)."""
    comm = inp.need_comm("torus")
    rows, cols = comm.size // inp.gpus_per_host, inp.gpus_per_host
    return lambda x, it, b: torus2d_allreduce(comm, x, rows, cols)


def topk_reducer(inp: ReducerInputs) -> Reducer:
    """HiTopK sparse all-gather with error feedback (TCP)."""
    comm = inp.need_tcp("topk")
    hosts, residual, density = block_hosts(comm.size, inp.gpus_per_host), _residuals(), inp.density
    return lambda x, it, b: hitopk_allreduce(comm, x, hosts, density, residual=residual(b, x))


def hybrid_reducer(inp: ReducerInputs) -> Reducer:
    """Sparse for the first ``sparse_epochs`` epochs, then the dense torus (TCP)."""
    comm = inp.need_tcp("hybrid")
    hosts, residual = block_hosts(comm.size, inp.gpus_per_host), _residuals()
    schedule = make_schedule(inp.sparse_epochs, inp.density, hosts)
    per_epoch = max(1, inp.iters_per_epoch)
    return lambda x, it, b: schedule.allreduce(comm, x, it // per_epoch, residual(b, x))


def hier_reducer(inp: ReducerInputs) -> Reducer:
    """Hierarchical ring: each host's GPUs reduce to one leader, the leaders' ring, then
    back to the GPUs (TCP or RoCE)."""
    comm, g = inp.need_comm("hier"), inp.gpus_per_host
    return lambda x, it, b: hierarchical_ring_allreduce(comm, x, g)


def innetwork_reducer(inp: ReducerInputs) -> Reducer:
    """In-network aggregation through the switches (one worker per rank)."""
    channel = inp.need_channel("innetwork")
    return lambda x, it, b: innetwork_allreduce(channel, x)


def innetwork_hier_reducer(inp: ReducerInputs) -> Reducer:
    """The host's GPUs reduced first, then in-network aggregation (one worker per host)."""
    channel = inp.need_channel("innetwork-hier")
    if inp.intra is None:
        raise ValueError("innetwork-hier needs the intra-host link model (intra=...)")
    intra, g = inp.intra, inp.gpus_per_host
    return lambda x, it, b: hierarchical_allreduce(channel, [x] * g, intra)


def make_reducer(algorithm: str, *, comm: PointToPoint | None = None,
                 channel: AggregationChannel | None = None, gpus_per_host: int = 1,
                 density: float = 0.01, sparse_epochs: int = 1, iters_per_epoch: int = 1,
                 intra: IntraHost | None = None) -> Reducer:
    """A reducer for ``algorithm`` (a name or alias in the :mod:`algorithms` registry).

    TCP and RoCE algorithms need ``comm`` (ranks numbered host by host, ``gpus_per_host`` per
    host; the sparse ones a TCP :class:`Communicator`);
    in-network ones need ``channel``; ``innetwork-hier`` also ``intra`` and ``gpus_per_host``
    (the host's GPUs, whose tensors are reduced before the network).
    """
    alg = registry.get(algorithm)
    factory = alg.run_factory()
    reducer: Reducer = factory(ReducerInputs(comm, channel, gpus_per_host, density,
                                             sparse_epochs, iters_per_epoch, intra))
    return reducer


def _bucket_plan(
    profile: ModelProfile, config: ReplayConfig
) -> tuple[float, list[tuple[int, float]]]:
    """Forward seconds, and per bucket (parameters, backward seconds) in backward order."""
    times = {name: (f, b) for name, f, b in profile.compute_times(config.flops_per_s)}
    forward = sum(f for f, _ in times.values())
    plan = [(bucket.params, sum(times[name][1] for name in bucket.layers))
            for bucket in profile.buckets(config.bucket_bytes)]
    return forward, plan


def _wait_buckets(done: queue.Queue[tuple[float, Any] | BaseException], buckets: int,
                  clock: VirtualClock, timeout: float, rank: int,
                  it: int) -> tuple[float, int, int, int]:
    """Wait for an iteration's ``buckets`` all-reduces (within ``timeout`` emulated
    seconds; a failure of the communication thread is raised here): their seconds, bytes
    and payload bytes sent, and retransmissions, summed."""
    spent, nbytes, npayload, retrans = 0.0, 0, 0, 0
    deadline = clock.now() + timeout
    for _ in range(buckets):
        try:
            got = done.get(timeout=clock.real(max(0.0, deadline - clock.now())))
        except queue.Empty:
            raise TimeoutError(f"rank {rank}: iteration {it} did not finish within "
                               f"{timeout:g} s") from None
        if isinstance(got, BaseException):
            raise got
        seconds, stats = got
        spent += seconds
        nbytes += stats.bytes_sent
        npayload += stats.payload_sent
        retrans += getattr(stats, "retransmissions", 0)
    return spent, nbytes, npayload, retrans


def replay(profile: ModelProfile, reducer: Reducer, config: ReplayConfig = ReplayConfig(), *,
           algorithm: str = "", rank: int = 0, workers: int = 1,
           barrier: Callable[[], object] | None = None, scale: float = 1.0,
           clock: VirtualClock = REAL_TIME) -> RunRecord:
    """Replay ``config.warmup + config.iterations`` training iterations of ``profile``.

    ``reducer`` is called from one communication thread only (a communicator or channel is
    single-threaded). ``barrier`` (all ranks) runs once before the first iteration. ``clock``
    spends the modelled compute and times the iterations (emulated seconds); it must be the
    reducer's clock.
    """
    forward_s, plan = _bucket_plan(profile, config)
    compute_s = forward_s + sum(b for _, b in plan)
    rng = default_rng(config.seed + 7919 * rank)
    grads = [(rng.standard_normal(params) * 1e-2).astype(np.float32) for params, _ in plan]
    work: queue.Queue[tuple[int, int] | None] = queue.Queue()
    done: queue.Queue[tuple[float, Any] | BaseException] = queue.Queue()

    def communicate() -> None:
        while True:
            item = work.get()
            if item is None:
                return
            it, b = item
            try:
                t0 = clock.now()
                _, stats = reducer(grads[b], it, b)
                done.put((clock.now() - t0, stats))
            except BaseException as err:  # handed to the compute thread
                done.put(err)
                return

    if barrier is not None:
        barrier()
    comm_thread = threading.Thread(target=communicate, name=f"replay-comm-{rank}", daemon=True)
    comm_thread.start()
    meter = CpuMeter(clock)
    iteration_s: list[float] = []
    comm_s: list[float] = []
    sent: list[float] = []
    payload: list[float] = []
    retrans = 0
    try:
        for it in range(config.warmup + config.iterations):
            t0 = clock.now()
            clock.sleep(forward_s)  # modelled compute: TDF times as long in real time
            for b, (_, backward) in enumerate(plan):
                clock.sleep(backward)
                work.put((it, b))
            spent, nbytes, npayload, nretrans = _wait_buckets(done, len(plan), clock,
                                                              config.timeout, rank, it)
            if it >= config.warmup:
                retrans += nretrans
                iteration_s.append(clock.now() - t0)
                comm_s.append(spent)
                sent.append(nbytes)
                payload.append(npayload)
    finally:
        work.put(None)
        comm_thread.join(timeout=clock.real(5.0))
    load = meter.stop()
    n = len(iteration_s)
    return RunRecord(
        algorithm=algorithm, model=profile.name, workers=workers, rank=rank,
        iterations=n, bytes_per_iteration=sum(sent) / n, payload_per_iteration=sum(payload) / n,
        iteration_s=iteration_s, comm_s=comm_s, compute_s=compute_s, retransmissions=retrans,
        cpu_utilization=load.utilization, cpu_saturated=cpu_saturated(load), scale=scale,
        extra={"buckets": len(plan), "gradient_bytes": profile.gradient_bytes(),
               "bucket_bytes": config.bucket_bytes},
        tdf=clock.tdf,
    )
