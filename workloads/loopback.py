"""Run a P-rank job as threads of one process on loopback (tests, quick benchmarks).

:func:`run_ranks`: each rank gets its own :class:`~workloads.comm.Communicator` over real TCP
sockets on 127.0.0.1; listeners are bound to port 0 first, so parallel jobs never race for
ports. :func:`run_roce_ranks`: the same over RoCE v2
(:class:`~workloads.rocecomm.RoceCommunicator`), one endpoint per rank.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from vtime import REAL_TIME, VirtualClock
from workloads.comm import CommError, Communicator, listen
from workloads.errors import WorkloadError
from workloads.rocecomm import RoceCommunicator, RoceHost, run_local

T = TypeVar("T")


class RankFailed(WorkloadError, RuntimeError):
    """One or more ranks raised; the first error is chained."""


def run_ranks(
    size: int,
    work: Callable[[Communicator], T],
    timeout: float = 20.0,
    host: str = "127.0.0.1",
    clock: VirtualClock = REAL_TIME,
) -> list[T]:
    """Call ``work(comm)`` on ``size`` ranks in threads; returns each rank's result, in rank order.

    Every communicator uses ``timeout`` for its operations, and the whole job must finish
    within ``2 * timeout`` seconds (emulated seconds of ``clock``, which every communicator
    shares). All sockets are closed whatever happens.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    listeners = [listen((host, 0), backlog=size) for _ in range(size)]
    addresses = [sock.getsockname()[:2] for sock in listeners]
    results: list[T | None] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def one(rank: int) -> None:
        try:
            with Communicator(
                rank, addresses, listener=listeners[rank], timeout=timeout,
                connect_timeout=timeout, clock=clock,
            ) as comm:
                results[rank] = work(comm)
        except BaseException as err:  # handed to the caller below
            errors[rank] = err

    threads = [
        threading.Thread(target=one, args=(r,), name=f"rank{r}", daemon=True) for r in range(size)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=clock.real(2 * timeout))
    for sock in listeners:
        sock.close()  # no-op for listeners a communicator already closed
    stuck = [r for r, t in enumerate(threads) if t.is_alive()]
    if stuck:
        raise CommError(f"ranks {stuck} did not finish within {2 * timeout:g} s")
    failed = [(r, e) for r, e in enumerate(errors) if e is not None]
    if failed:
        rank, first = failed[0]
        raise RankFailed(f"rank {rank} failed: {first!r} ({len(failed)} ranks failed)") from first
    return [r for r in results]  # type: ignore[misc]


def run_roce_ranks(
    size: int,
    work: Callable[[RoceCommunicator], T],
    timeout: float = 20.0,
    clock: VirtualClock = REAL_TIME,
    hosts: Callable[[int], str] = lambda rank: f"127.0.0.{2 + rank}",
) -> list[T]:
    """Call ``work(comm)`` on ``size`` RoCE ranks in threads, each with its own endpoint
    (its own "NIC") on its own loopback address ``hosts(rank)`` (127.0.0.2, 127.0.0.3, ...:
    all of 127/8 reaches the loopback interface), bound to a free port; returns each rank's
    result, in rank order. Every endpoint is drained and closed whatever happens."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    nics: list[RoceHost] = []
    try:
        for rank in range(size):
            nics.append(RoceHost((hosts(rank), 0), clock=clock))
        addresses = [nic.address for nic in nics]
        comms = [nic.communicator(r, addresses, timeout=timeout)
                 for r, nic in enumerate(nics)]
        return run_local(comms, work, 2 * timeout)
    finally:
        for nic in nics:
            nic.close(drain_timeout=timeout)
