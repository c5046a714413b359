"""Training-iteration time: compute of a model profile overlapped with bucketed all-reduces.

Wait-free back-propagation, as Horovod and PyTorch DDP do it: a fusion bucket is all-reduced
as soon as the backward pass has produced all its gradients; buckets go out one at a time in
the order they become ready. The iteration ends when both the backward pass and the last
all-reduce are done. The all-reduce time of a bucket comes from a callback (the simulator or
the cost model), evaluated once per distinct bucket size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workloads.profiles import DEFAULT_FLOPS_PER_S, ModelProfile


@dataclass(frozen=True)
class IterationTime:
    """Seconds of one iteration and of its parts."""

    compute_s: float
    comm_s: float
    iteration_s: float

    @property
    def exposed_comm_s(self) -> float:
        """Communication not hidden behind the backward pass."""
        return self.iteration_s - self.compute_s


def iteration_time(profile: ModelProfile, allreduce_s: Callable[[int], float],
                   bucket_bytes: int = 25 << 20,
                   flops_per_s: float = DEFAULT_FLOPS_PER_S) -> IterationTime:
    """One iteration of ``profile`` with ``allreduce_s(nbytes)`` seconds per bucket."""
    times = {name: (fwd, bwd) for name, fwd, bwd in profile.compute_times(flops_per_s)}
    forward = sum(f for f, _ in times.values())
    backward_done = forward
    ready: dict[str, float] = {}
    for layer in profile.backward_order():
        backward_done += times[layer.name][1]
        ready[layer.name] = backward_done
    cache: dict[int, float] = {}
    net_free = 0.0
    comm = 0.0
    for bucket in profile.buckets(bucket_bytes):
        if bucket.nbytes not in cache:
            cache[bucket.nbytes] = allreduce_s(bucket.nbytes)
        start = max(net_free, ready[bucket.layers[-1]])
        net_free = start + cache[bucket.nbytes]
        comm += cache[bucket.nbytes]
    return IterationTime(backward_done, comm, max(backward_done, net_free))
