"""How much data-loading traffic slows the gradient all-reduce when both share links.

Every rank of a job calls :func:`measure_data_interference` together. It times ``repeats``
all-reduces of an ``elements``-long float32 tensor twice: once on a quiet network, and once
while a background thread on each loading rank reads shards from the data server as fast as
it can, bypassing every cache (the first epoch, or a job without local caching). The ratio
of the two medians is the slowdown a cold cache costs the collective; with warm caches the
loaded case does not happen at all (the cache's ``bytes_saved`` is the traffic avoided).

On loopback the numbers only show that the mechanism works (the "links" are memory); on
Mininet, with the data server on a host whose link the gradients also cross, they measure
the real contention. Times are emulated seconds of the communicator's clock.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.random import default_rng

from vtime import VirtualClock
from workloads.collectives import ring_allreduce
from workloads.comm import Communicator

Allreduce = Callable[[Communicator, np.ndarray], object]


@dataclass(frozen=True)
class InterferenceResult:
    """One rank's view of the measurement."""

    rank: int
    elements: int
    repeats: int
    quiet_s: float  # median all-reduce time without data traffic
    loaded_s: float  # median all-reduce time while shards stream from the data server
    data_bytes: int  # shard bytes this rank read during the loaded phase
    data_seconds: float
    tdf: float = 1.0  # time-dilation factor: every time above is emulated (real / tdf)

    @property
    def slowdown(self) -> float:
        """``loaded_s / quiet_s``."""
        return self.loaded_s / self.quiet_s if self.quiet_s > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, with the slowdown and the data rate."""
        out = asdict(self)
        out["slowdown"] = self.slowdown
        out["data_rate_bps"] = 8.0 * self.data_bytes / self.data_seconds if self.data_seconds else 0
        return out


class _Streamer:
    """Reads shards round-robin in a background thread until stopped."""

    def __init__(self, fetch: Callable[[str], bytes], names: Sequence[str],
                 clock: VirtualClock) -> None:
        if not names:
            raise ValueError("need at least one shard name to stream")
        self._fetch = fetch
        self._clock = clock
        self._names = list(names)
        self._stop = threading.Event()
        self.bytes = 0
        self.seconds = 0.0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="data-streamer")

    def _run(self) -> None:
        start = self._clock.now()
        i = 0
        try:
            while not self._stop.is_set():
                self.bytes += len(self._fetch(self._names[i % len(self._names)]))
                i += 1
        except Exception as exc:  # reported by stop(), never lost
            self.error = exc
        self.seconds = self._clock.now() - start

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop streaming; ``timeout``: emulated seconds the last fetch may take."""
        self._stop.set()
        self._thread.join(timeout=self._clock.real(timeout))
        if self._thread.is_alive():
            raise TimeoutError("the data streamer did not stop (a fetch is hanging)")
        if self.error is not None:
            raise RuntimeError(f"data streaming failed: {self.error}") from self.error


def _timed(comm: Communicator, allreduce: Allreduce, x: np.ndarray, repeats: int) -> float:
    times = []
    clock = comm.clock
    for _ in range(repeats):
        start = clock.now()
        allreduce(comm, x)
        times.append(clock.now() - start)
    return statistics.median(times)


def measure_data_interference(
    comm: Communicator,
    fetch: Callable[[str], bytes],
    shard_names: Sequence[str],
    elements: int = 1 << 18,
    repeats: int = 5,
    loading_ranks: Sequence[int] | None = None,
    allreduce: Allreduce = ring_allreduce,
    stop_timeout: float = 30.0,
) -> InterferenceResult:
    """All-reduce time on a quiet network and under concurrent data loading (see module doc).

    ``fetch(name)`` must read from the remote level (e.g. a dedicated
    :class:`~train.dataserver.ShardClient`'s ``get``); ``loading_ranks`` (default: all) are
    the ranks that stream data during the loaded phase.
    """
    if elements < 1 or repeats < 1:
        raise ValueError("elements and repeats must be >= 1")
    loaders = set(range(comm.size) if loading_ranks is None else loading_ranks)
    x = default_rng(comm.rank).standard_normal(elements).astype(np.float32)
    allreduce(comm, x)  # warm-up: connections and buffers
    comm.barrier()
    quiet = _timed(comm, allreduce, x, repeats)
    streamer = _Streamer(fetch, shard_names, comm.clock) if comm.rank in loaders else None
    if streamer is not None:
        streamer.start()
    try:
        comm.barrier()
        loaded = _timed(comm, allreduce, x, repeats)
        comm.barrier()
    finally:
        if streamer is not None:
            streamer.stop(stop_timeout)
    return InterferenceResult(
        comm.rank, elements, repeats, quiet, loaded,
        streamer.bytes if streamer else 0, streamer.seconds if streamer else 0.0,
        comm.clock.tdf,
    )
