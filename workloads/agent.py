"""The host agent: one process per host that plays the host's RDMA NIC for a NetReduce job.

Result packets always arrive at UDP port 4791 (docs/protocol.md), so only one socket per
host can receive them: the agent binds it, and serves every worker (GPU) of the job placed on
its host, one :class:`~workloads.innetwork.AggregationChannel` per worker, demultiplexed by QP
number. Workloads (one all-reduce, a replay) run as one thread per local worker.

The job layout comes from the controller's plan (``python -m controller job show NAME
--json``), read by :func:`load_job`. A job's message numbers and PSNs continue across the
agent's calls; a new agent process needs a new job (the switch keeps the old one's state).
The agent's one :class:`vtime.VirtualClock` times everything (its endpoint, its channels,
its waits); every duration given to it is in emulated seconds.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from vtime import REAL_TIME, VirtualClock
from workloads.errors import WorkloadError
from workloads.innetwork import AGG_MAX_RTO, AGG_RTO, AggregationChannel, JobConfig
from workloads.roce import (
    INITIAL_RTO,
    ROCE_V2_PORT,
    SLOW_START,
    Address,
    RoceEndpoint,
    TransportError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
# Real-time margins of closing (converted with the clock: a dilated run does not stretch them)
DRAIN_REAL_S = 30.0
LINGER_REAL_S = 1.0


class AgentError(WorkloadError, RuntimeError):
    """A host agent could not be set up or one of its workers failed."""


def load_job(path: str | Path, *, elems: int | None = None, first_psn: int = 0) -> JobConfig:
    """A :class:`JobConfig` from a job-plan JSON file (``job show --json`` output); the
    plan gives the packet size, ``elems`` (when given) must agree with it."""
    try:
        plan = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise AgentError(f"cannot read job plan {path}: {err}") from None
    try:
        return JobConfig.from_plan(plan, elems=elems, first_psn=first_psn)
    except ValueError as err:
        raise AgentError(f"{path}: {err}") from None


def local_ranks(job: JobConfig, host: str | None, ranks: Sequence[int] | None) -> list[int]:
    """The ranks an agent serves: ``ranks`` if given, else every rank placed on ``host``."""
    if ranks:
        for r in ranks:
            if not 0 <= r < job.size:
                raise AgentError(f"rank {r} is not in the job (ranks 0..{job.size - 1})")
        chosen = sorted(set(ranks))
    elif host:
        chosen = job.ranks_on(host)
        if not chosen:
            hosts = sorted({w.host for w in job.workers})
            raise AgentError(f"no worker of job {job.job_id} on host {host!r} "
                             f"(hosts: {', '.join(hosts)})")
    else:
        raise AgentError("name the host (--host) or the ranks (--rank) this agent serves")
    ips = {job.worker(r).ip for r in chosen}
    if len(ips) > 1:
        raise AgentError(f"ranks {chosen} are on different hosts ({', '.join(sorted(ips))}); "
                         "run one agent per host")
    return chosen


class HostAgent:
    """A host's RoCE endpoint plus one aggregation channel per local worker."""

    def __init__(self, job: JobConfig, ranks: Sequence[int], *,
                 bind: Address | None = None,
                 resolve: Callable[[str], Address] | None = None, window: int | None = None,
                 rto: float = AGG_RTO, max_rto: float = AGG_MAX_RTO,
                 dead_after: float | None = None,
                 timeout: float = 300.0, clock: VirtualClock = REAL_TIME,
                 initial_rto: float = INITIAL_RTO, start: str = SLOW_START) -> None:
        """``initial_rto``: real seconds before the first RTT sample (see RoceEndpoint);
        ``start``: where the channels' congestion windows start (``roce.CC_STARTS``)."""
        self.job = job
        self.clock = clock
        self.max_rto = max_rto
        self.ranks = list(ranks)
        if not self.ranks:
            raise AgentError("an agent needs at least one local rank")
        if resolve is None:
            for r in self.ranks:
                me, peer = job.worker(r), job.worker(job.worker(r).peer)
                if peer.rank != r and peer.ip == me.ip:
                    raise AgentError(
                        f"rank {r}'s connection goes to rank {peer.rank} on the same host "
                        f"({me.ip}); the kernel would deliver it locally, bypassing the switch. "
                        "Pair workers across hosts (or run one worker per host).")
        address = bind if bind is not None else (job.worker(self.ranks[0]).ip, ROCE_V2_PORT)
        try:
            self.endpoint = RoceEndpoint(address, resolve=resolve, clock=clock,
                                         initial_rto=initial_rto)
        except TransportError as err:
            raise AgentError(str(err)) from None
        try:
            self.channels = {r: AggregationChannel(self.endpoint, job, r, window=window, rto=rto,
                                                   max_rto=max_rto, dead_after=dead_after,
                                                   timeout=timeout, start=start)
                             for r in self.ranks}
        except BaseException:
            self.endpoint.close()
            raise

    def run(self, work: Callable[[int, AggregationChannel], T],
            timeout: float = 3600.0) -> dict[int, T]:
        """``work(rank, channel)`` for every local rank, each in its own thread (``timeout``:
        emulated seconds each thread may take)."""
        results: dict[int, T] = {}
        errors: dict[int, BaseException] = {}
        lock = threading.Lock()

        def one(rank: int) -> None:
            try:
                value = work(rank, self.channels[rank])
                with lock:
                    results[rank] = value
            except BaseException as err:  # reported below
                with lock:
                    errors[rank] = err

        threads = [threading.Thread(target=one, args=(r,), name=f"agent-rank{r}", daemon=True)
                   for r in self.ranks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=self.clock.real(timeout))
        stuck = [r for r, t in zip(self.ranks, threads, strict=True) if t.is_alive()]
        if stuck:
            raise AgentError(f"ranks {stuck} did not finish within {timeout:g} s")
        if errors:
            rank = min(errors)
            raise AgentError(f"rank {rank} failed: {errors[rank]}") from errors[rank]
        return results

    def close(self, drain_timeout: float | None = None, linger: float | None = None) -> None:
        """Wait until peers have acknowledged everything, keep answering their
        retransmissions for up to ``linger`` (emulated) seconds, then release the socket.
        Defaults: the drain waits up to 30 s of real time, the linger 1 s of real time but
        at least four of the longest retransmission timer (the peers' last retries)."""
        if drain_timeout is None:
            drain_timeout = self.clock.emulated(DRAIN_REAL_S)
        if linger is None:
            linger = max(self.clock.emulated(LINGER_REAL_S), 4 * self.max_rto)
        if not self.endpoint.closed:
            if not self.endpoint.drain(drain_timeout):
                log.warning("host agent: some messages were never acknowledged")
            self.endpoint.close(linger=linger)

    def __enter__(self) -> HostAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(linger=0.0 if exc[0] is not None else None)
