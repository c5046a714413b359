"""In-network all-reduce through ``p4src/netreduce.p4`` over the RoCE transport.

Each worker owns one RC connection of the job (its *send* QP, to its ring peer) and the
receiving end of its predecessor's connection (its *recv* QP). A tensor is cut into messages
of at most ``msg_pkts`` packets of ``elems`` int32 words; message ``m`` is an RDMA WRITE whose
first packet carries the aggregation tag of docs/protocol.md (job, ``m mod 2^16``, slot
``(m mod C)·M``, VERSION ``⌊m/C⌋ mod 2``). The switch sums the packets of all workers and
delivers the total on every connection, so each worker reads its result from the messages
arriving on its recv QP, in order. Credits (section 4.4): message ``m`` is posted only after
the result of ``m - C`` has arrived *and* our own message ``m - C`` is acknowledged (the
second condition keeps a go-back-N retransmission from ever meeting a reused binding).

* :class:`AggregationChannel` - one worker's view: ``allreduce_int32`` (exact, saturating like
  the switch, overflow flag) and ``allreduce_float`` (fixed point with rescale-and-retry from
  :mod:`workloads.fixedpoint`).
* :func:`innetwork_allreduce` - flat: every worker sends its whole tensor.
* :func:`hierarchical_allreduce` - NetReduce's hierarchical variant: the GPUs of one host are
  reduced first over a *modelled* intra-host link (``IntraHost``), the host's sum goes
  through the network once, and the result is broadcast back inside the host.

The job layout (QP numbers, peers, credits) comes from the controller's job plan
(``python -m controller job show --json``), read by :meth:`JobConfig.from_plan`.

Time: a channel reads its endpoint's :class:`vtime.VirtualClock`; timeouts are emulated
seconds and ``seconds`` in the statistics (and the modelled intra-host phases, slept through
the same clock) are emulated too, real seconds divided by the time-dilation factor.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocol.netreduce import (
    FLAG_OVERFLOW,
    FLAG_RESULT,
    FLAG_VERSION,
    NR_MAGIC,
    PROGRAM_ELEMS,
    RESV7_OVERFLOW,
    TAG,
    TAG_BYTES,
    Limit,
    check_elems,
    worker_qpn,
    worker_sport,
)
from vtime import REAL_TIME, VirtualClock
from workloads.fixedpoint import RescalePolicy, RetryReport, aggregate_with_retry
from workloads.roce import (
    SLOW_START,
    QpStats,
    ReceivedMessage,
    RoceEndpoint,
    TransportError,
    write_packets,
)

log = logging.getLogger(__name__)

TAG_LEN = TAG_BYTES
DEFAULT_ELEMS = PROGRAM_ELEMS
MAX_BIND = Limit.BIND  # NR_BIND: messages the switch remembers per connection
ACK_BYTES = 20  # BTH + AETH + ICRC
ACK_EVERY = 16  # a receiver ACKs at least every this many packets (and at message ends)
#: Upper bound of an aggregation connection's retransmission timeout (and of its backoff).
#: A worker's round trip includes waiting at the switch for the slowest worker, whose own
#: loss recovery is in it, so under loss the RFC 6298 estimate feeds on the other workers'
#: timeouts and climbs to any bound it is given; every stall then costs the whole job that
#: bound (5 % port loss on 8 workers: 5-60 s and hung jobs with 4 s, 3-8 s with 0.25 s,
#: docs/protocol.md section 7). A timeout only sends one probe packet, so a short bound is
#: cheap even where it fires spuriously, like RoCE NICs' fixed local ACK timeout.
AGG_MAX_RTO = 0.25
#: The agents' lowest retransmission timer (s): what the switch processes need at TDF 1.
AGG_RTO = 0.05


# ------------------------------------------------------------------- job description


@dataclass(frozen=True)
class WorkerInfo:
    """One worker of a job, as the controller's plan describes it."""

    rank: int
    host: str
    ip: str
    position: int  # bitmap position at its switch (the tag's informational rank)
    peer: int  # rank receiving this worker's connection
    send_qpn: int
    recv_qpn: int
    sport: int = 0
    gpu: int = 0


@dataclass(frozen=True)
class JobConfig:
    """What every worker of a job must agree on."""

    job_id: int
    credits: int
    msg_pkts: int
    workers: tuple[WorkerInfo, ...]
    elems: int = DEFAULT_ELEMS
    first_psn: int = 0  # initial PSN of every connection (both ends use it)

    def __post_init__(self) -> None:
        if not 1 <= self.credits <= MAX_BIND:
            raise ValueError(f"credits must be in 1..{MAX_BIND}, got {self.credits}")
        if self.msg_pkts < 1:
            raise ValueError(f"msg_pkts must be >= 1, got {self.msg_pkts}")
        check_elems(self.elems)
        if not self.workers:
            raise ValueError("a job needs at least one worker")
        if [w.rank for w in self.workers] != list(range(len(self.workers))):
            raise ValueError("workers must be listed by rank 0..P-1")
        receivers = sorted(w.peer for w in self.workers)
        if receivers != list(range(len(self.workers))):
            raise ValueError("every worker must receive exactly one connection (peers)")

    @property
    def size(self) -> int:
        return len(self.workers)

    def worker(self, rank: int) -> WorkerInfo:
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} outside 0..{self.size - 1}")
        return self.workers[rank]

    def predecessor(self, rank: int) -> WorkerInfo:
        """The worker whose connection ``rank`` receives (its results arrive on it)."""
        return next(w for w in self.workers if w.peer == rank)

    def ranks_on(self, host: str) -> list[int]:
        """Ranks placed on ``host`` (name or IP address)."""
        return [w.rank for w in self.workers if host in (w.host, w.ip)]

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], *, elems: int | None = None,
                  first_psn: int = 0) -> JobConfig:
        """From the controller's job plan (``job show --json``). The plan says how many
        elements the switches' program carries per packet; ``elems``, when given, must
        agree (a plan without it, written by an older controller, takes ``elems``, else
        the program's default)."""
        planned = plan.get("elems")
        if planned is not None and elems is not None and int(planned) != elems:
            raise ValueError(f"elems {elems} given, but the job plan's switches carry "
                             f"{int(planned)} elements per packet (NR_ELEMS)")
        if planned is not None:
            elems = int(planned)
        try:
            workers = tuple(sorted((WorkerInfo(
                rank=int(w["rank"]), host=str(w["host"]), ip=str(w["ip"]),
                position=int(w["position"]), peer=int(w["peer"]),
                send_qpn=int(w["send_qpn"]), recv_qpn=int(w["recv_qpn"]),
                sport=int(w.get("sport", 0)), gpu=int(w.get("gpu", 0)))
                for w in plan["workers"]), key=lambda w: w.rank))
            return cls(job_id=int(plan["job_id"]), credits=int(plan["credits"]),
                       msg_pkts=int(plan["msg_pkts"]), workers=workers,
                       elems=DEFAULT_ELEMS if elems is None else elems, first_psn=first_psn)
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a job plan: missing or bad field {err}") from None


def ring_job(ips: Sequence[str], *, job_id: int = 1, credits: int = 2, msg_pkts: int = 8,
             elems: int = DEFAULT_ELEMS, first_psn: int = 0,
             hosts: Sequence[str] | None = None) -> JobConfig:
    """A one-switch job: rank ``k`` on ``ips[k]`` writes to rank ``k+1 mod P``.

    QP numbers and source ports follow the controller's conventions
    (``protocol.netreduce.worker_qpn`` / ``worker_sport``).
    """
    p = len(ips)
    workers = tuple(WorkerInfo(
        rank=k, host=(hosts[k] if hosts else f"h{k}"), ip=ips[k], position=k, peer=(k + 1) % p,
        send_qpn=worker_qpn(job_id, k, False), recv_qpn=worker_qpn(job_id, k, True),
        sport=worker_sport(job_id, k)) for k in range(p))
    return JobConfig(job_id, credits, msg_pkts, workers, elems, first_psn)


# ------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class InNetworkStats:
    """One worker's cost of one in-network all-reduce (fields shared with CollectiveStats)."""

    algorithm: str
    ranks: int
    elements: int
    bytes_sent: int  # RoCE bytes (BTH ... ICRC) sent: WRITEs and ACKs
    bytes_received: int
    payload_sent: int  # element bytes of first transmissions
    payload_received: int
    messages_sent: int  # WRITE messages (per attempt)
    seconds: float  # emulated (real seconds / TDF)
    phases: tuple[tuple[str, float], ...] = ()
    packets_sent: int = 0
    retransmissions: int = 0
    timeouts: int = 0
    spurious_timeouts: int = 0  # timeouts whose probe showed the window was only delayed
    lone_timeouts: int = 0  # timeouts with one packet in flight (delay or loss: unknowable)
    naks: int = 0
    attempts: int = 1  # fixed-point rounds (rescale and retry)
    frac_bits: int | None = None
    overflow: bool = False


@dataclass
class _Counters:
    req: QpStats = field(default_factory=QpStats)
    resp: QpStats = field(default_factory=QpStats)


# ------------------------------------------------------------------- the channel


class AggregationChannel:
    """One worker's aggregation connection pair on a host's :class:`RoceEndpoint`.

    Message numbers run on across calls (the switch expects one consecutive sequence per
    job), so a channel must be used for the whole life of the job; a second process needs a
    fresh job. One thread drives a channel. Its clock is the endpoint's; ``rto``, ``max_rto``,
    ``dead_after`` and ``timeout`` are emulated seconds (``dead_after`` None: the transport's
    real-time margin, ``roce.DEAD_AFTER``).
    """

    def __init__(self, endpoint: RoceEndpoint, job: JobConfig, rank: int, *,
                 window: int | None = None, rto: float = AGG_RTO, max_rto: float = AGG_MAX_RTO,
                 dead_after: float | None = None,
                 timeout: float = 300.0, start: str = SLOW_START) -> None:
        self.ep = endpoint
        self.clock = endpoint.clock
        self.job = job
        self.rank = rank
        self.me = job.worker(rank)
        peer = job.worker(self.me.peer)
        pred = job.predecessor(rank)
        self.timeout = timeout
        if window is None:
            # The credits already bound what is in flight (credits x msg_pkts packets); a
            # smaller transport window would only add a second, tighter limit.
            window = job.credits * job.msg_pkts
        ack_every = max(1, min(ACK_EVERY, window // 2))
        # Congestion control keeps queues (host links, switch processes) short, so the round
        # trip, and with it the timeout, stays small; two ACK intervals keep ACKs flowing.
        self.req = endpoint.requester(self.me.send_qpn, peer.recv_qpn, peer.ip, job.first_psn,
                                      window=window, rto=rto, max_rto=max_rto,
                                      dead_after=dead_after, min_cwnd=2 * ack_every,
                                      track_results=True, start=start)
        self.resp = endpoint.responder(self.me.recv_qpn, pred.send_qpn, pred.ip, job.first_psn,
                                       ack_every=ack_every)
        # A result packet exists only once every worker's packet at that position arrived,
        # this one's included (results and our packets share PSN positions: every worker
        # starts at first_psn and messages have the same packet counts): it shows the switch
        # is working through our window even when the peer's ACK (at message ends) is far
        # behind a slow switch (BMv2 on a loaded machine).
        self.resp.on_accept = self.req.note_arrived
        # stuck ourselves: the peer may be waiting for an ACK a restarted switch lost
        self.req.on_timeout = self.resp.refresh_ack
        self._next_msg = 0  # global index of the next message to post
        self._results = 0  # results taken so far
        # Messages kept in flight: the job's credits at first, then what the switch
        # advertises in every result (``credits set`` on a running job), never more than
        # the credits the slot layout was planned with.
        self.window = job.credits
        self._words_per_msg = job.msg_pkts * job.elems
        self._msg_bytes = TAG_LEN + 4 * self._words_per_msg

    # -- messages -----------------------------------------------------------------------

    def _post(self, m: int, words: np.ndarray) -> None:
        e = self.job.elems
        npkts = -(-words.size // e)
        padded = np.zeros(npkts * e, dtype=">i4")
        padded[: words.size] = words
        raw = padded.tobytes()
        c = self.job.credits
        flags = FLAG_VERSION if (m // c) % 2 else 0
        # The tag's last field tells the switch the window this message was sent under, so
        # that a limit lowered meanwhile does not refuse it (docs/protocol.md section 4.4).
        tag = TAG.pack(NR_MAGIC, self.job.job_id, m & 0xFFFF, (m % c) * self.job.msg_pkts, npkts,
                       0, self.me.position & 0xFF, flags, self.window)
        chunks = [tag + raw[: 4 * e]] + [raw[4 * e * i: 4 * e * (i + 1)] for i in range(1, npkts)]
        va = 0x10000000 + (m % c) * self._msg_bytes
        dqpn, rkey = self.req.remote_qpn, self.me.send_qpn
        self.req.post(lambda psn: write_packets(dqpn, psn, chunks, va, rkey))

    def _may_send(self, m: int) -> bool:
        back = m - self.window
        return back < 0 or (self._results > back and self.req.messages_acked > back)

    def _parse_result(self, msg: ReceivedMessage, m: int, count: int) -> tuple[np.ndarray, bool]:
        data = msg.data
        if len(data) < TAG_LEN:
            raise TransportError(f"rank {self.rank}: result message {m} is {len(data)} bytes")
        magic, job, mno, _slot, npkts, _idx, _rank, flags, credits = TAG.unpack_from(data, 0)
        expected_pkts = -(-count // self.job.elems)
        if magic != NR_MAGIC or job != self.job.job_id or mno != m & 0xFFFF \
                or not flags & FLAG_RESULT or npkts != expected_pkts:
            raise TransportError(
                f"rank {self.rank}: expected the result of message {m} of job "
                f"{self.job.job_id} ({expected_pkts} packets), got magic {magic:#x} job {job} "
                f"msg {mno} packets {npkts} flags {flags:#x}; was the job reused by another run?")
        if credits >= 1 and min(credits, self.job.credits) != self.window:
            log.info("rank %d: switch credits %d, window %d -> %d", self.rank, credits,
                     self.window, min(credits, self.job.credits))
            self.window = min(credits, self.job.credits)
        values = np.frombuffer(data, dtype=">i4", offset=TAG_LEN, count=count).astype(np.int32)
        overflow = bool(flags & FLAG_OVERFLOW) or bool(msg.resv7_or & RESV7_OVERFLOW)
        return values, overflow

    def _snapshot(self) -> _Counters:
        with self.ep.cv:
            return _Counters(self.req.stats.copy(), self.resp.stats.copy())

    # -- all-reduce ---------------------------------------------------------------------

    def allreduce_int32(self, words: np.ndarray) -> tuple[np.ndarray, bool]:
        """Element-wise sum over all workers of the int32 vector ``words`` (saturating at
        ±2^31 like the switch); returns the sum and whether any element saturated."""
        flat = np.ascontiguousarray(np.asarray(words).reshape(-1), dtype=np.int32)
        if flat.size == 0:
            return flat.copy(), False
        bounds = [(lo, min(lo + self._words_per_msg, flat.size))
                  for lo in range(0, flat.size, self._words_per_msg)]
        base = self._next_msg
        n = len(bounds)
        out = np.empty(flat.size, dtype=np.int32)
        overflow = False
        sent = got = 0
        deadline = self.clock.now() + self.timeout
        try:
            while got < n:
                while sent < n and self._may_send(base + sent):
                    lo, hi = bounds[sent]
                    self._post(base + sent, flat[lo:hi])
                    sent += 1
                self.ep.wait(lambda: self.resp.has_message  # noqa: B023
                             or (sent < n and self._may_send(base + sent)),  # noqa: B023
                             deadline, f"results of job {self.job.job_id} on rank {self.rank}")
                while True:
                    with self.ep.cv:
                        msg = self.resp.take()
                    if msg is None:
                        break
                    if got >= sent:
                        raise TransportError(
                            f"rank {self.rank}: a result arrived for message {base + got} "
                            "before it was sent; is another run using this job?")
                    lo, hi = bounds[got]
                    values, flagged = self._parse_result(msg, base + got, hi - lo)
                    out[lo:hi] = values
                    overflow |= flagged
                    got += 1
                    self._results += 1
        finally:
            self._next_msg = base + sent
        return out, overflow

    def allreduce_float(self, x: np.ndarray, policy: RescalePolicy | None = None
                        ) -> tuple[np.ndarray, RetryReport]:
        """Sum of float tensor ``x`` over all workers in fixed point, rescaling and retrying
        (all workers together) when any worker clamped or the switch saturated."""
        def aggregate(message: np.ndarray) -> np.ndarray:
            total, overflow = self.allreduce_int32(message)
            if overflow and total[-1] == 0:
                total[-1] = 1  # every worker sees the same flag: retry together
            return total

        return aggregate_with_retry(np.asarray(x, dtype=np.float32), aggregate, self.job.size,
                                    policy if policy is not None else DEFAULT_POLICY)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until our own messages are acknowledged (the peer has every result)."""
        self.ep.wait(lambda: self.req.idle, self.clock.now() + timeout,
                     f"acknowledgements on rank {self.rank}")


#: Fixed point with 20 fraction bits first (resolution 1e-6; |sum| < 2048 fits), then 4 fewer
#: per retry.
DEFAULT_POLICY = RescalePolicy(start_bits=20, step=4, min_bits=-16)


def _stats(channel: AggregationChannel, algorithm: str, elements: int, before: _Counters,
           seconds: float, phases: tuple[tuple[str, float], ...] = (),
           report: RetryReport | None = None, overflow: bool = False,
           ranks: int | None = None) -> InNetworkStats:
    after = channel._snapshot()
    rq, rs = after.req, after.resp
    bq, bs = before.req, before.resp
    first_pkts = (rq.packets_sent - bq.packets_sent) - (rq.retransmitted - bq.retransmitted)
    return InNetworkStats(
        algorithm=algorithm,
        ranks=channel.job.size if ranks is None else ranks,
        elements=elements,
        bytes_sent=(rq.bytes_sent - bq.bytes_sent)
        + ACK_BYTES * ((rs.acks_sent - bs.acks_sent) + (rs.naks_sent - bs.naks_sent)),
        bytes_received=rs.bytes_received - bs.bytes_received,
        payload_sent=first_pkts * 4 * channel.job.elems,
        payload_received=(rs.packets_received - bs.packets_received) * 4 * channel.job.elems,
        messages_sent=rq.messages_sent - bq.messages_sent,
        seconds=seconds,
        phases=phases,
        packets_sent=rq.packets_sent - bq.packets_sent,
        retransmissions=rq.retransmitted - bq.retransmitted,
        timeouts=rq.timeouts - bq.timeouts,
        spurious_timeouts=rq.spurious_timeouts - bq.spurious_timeouts,
        lone_timeouts=rq.lone_timeouts - bq.lone_timeouts,
        naks=rq.naks_received - bq.naks_received,
        attempts=report.attempts if report else 1,
        frac_bits=report.frac_bits if report else None,
        overflow=overflow,
    )


def innetwork_allreduce(channel: AggregationChannel, x: np.ndarray,
                        policy: RescalePolicy | None = None) -> tuple[np.ndarray, InNetworkStats]:
    """Flat in-network all-reduce of ``x`` (every worker sends its whole tensor).

    int32 tensors are summed exactly (saturating; ``stats.overflow`` tells); float tensors go
    through fixed point with rescale-and-retry. The result has ``x``'s shape and dtype.
    """
    arr = np.asarray(x)
    clock = channel.clock
    before = channel._snapshot()
    start = clock.now()
    report: RetryReport | None = None
    overflow = False
    if arr.dtype == np.int32:
        flat, overflow = channel.allreduce_int32(arr)
        result = flat.reshape(arr.shape)
    elif arr.dtype.kind == "f":
        res, report = channel.allreduce_float(arr, policy)
        result = res.astype(arr.dtype, copy=False).reshape(arr.shape)
    else:
        raise TypeError(f"in-network all-reduce takes int32 or float tensors, not {arr.dtype}")
    seconds = clock.now() - start
    return result, _stats(channel, "innetwork", arr.size, before, seconds,
                          (("network", seconds),), report, overflow)


# ------------------------------------------------------------------- hierarchical


@dataclass(frozen=True)
class IntraHost:
    """The modelled links between the GPUs of one host (NVLink-like, per GPU).

    ``bandwidth`` in bytes per (emulated) second, ``latency`` emulated seconds per step. With
    ``emulate`` the modelled time is spent (slept through the run's clock: ``TDF`` times as
    many real seconds) so that it shows in the measured times.
    """

    bandwidth: float
    latency: float = 0.0
    emulate: bool = True

    def __post_init__(self) -> None:
        if self.bandwidth <= 0 or self.latency < 0:
            raise ValueError("intra-host bandwidth must be > 0 and latency >= 0")

    def ring_phase_seconds(self, nbytes: int, gpus: int) -> float:
        """One ring reduce-scatter (or all-gather) of ``nbytes`` among ``gpus`` GPUs."""
        if gpus <= 1:
            return 0.0
        return (gpus - 1) * self.latency + (gpus - 1) / gpus * nbytes / self.bandwidth

    def spend(self, seconds: float, clock: VirtualClock = REAL_TIME) -> None:
        """Spend ``seconds`` of modelled (emulated) time when ``emulate``."""
        if self.emulate and seconds > 0:
            clock.sleep(seconds)


def hierarchical_allreduce(channel: AggregationChannel, local: Sequence[np.ndarray],
                           intra: IntraHost, policy: RescalePolicy | None = None
                           ) -> tuple[np.ndarray, InNetworkStats]:
    """Hierarchical NetReduce for one host: sum the host's GPU tensors ``local`` (modelled
    reduce-scatter over ``intra``), all-reduce the host's sum through the network on
    ``channel`` (one network worker per host), broadcast inside the host (modelled
    all-gather). Returns the result every local GPU gets and the host's statistics."""
    if not local:
        raise ValueError("a host needs at least one local tensor")
    arrays = [np.asarray(a) for a in local]
    shape, dtype = arrays[0].shape, arrays[0].dtype
    if any(a.shape != shape or a.dtype != dtype for a in arrays):
        raise ValueError("all local tensors must have the same shape and dtype")
    g = len(arrays)
    clock = channel.clock
    before = channel._snapshot()
    start = clock.now()
    host_sum = arrays[0].copy()
    for a in arrays[1:]:
        host_sum += a  # integer sums wrap like the GPUs' adders; floats in a fixed order
    t_rs = intra.ring_phase_seconds(host_sum.nbytes, g)
    intra.spend(t_rs, clock)
    t_net0 = clock.now()
    report: RetryReport | None = None
    overflow = False
    if dtype == np.int32:
        flat, overflow = channel.allreduce_int32(host_sum)
        result = flat.reshape(shape)
    elif dtype.kind == "f":
        res, report = channel.allreduce_float(host_sum, policy)
        result = res.astype(dtype, copy=False).reshape(shape)
    else:
        raise TypeError(f"in-network all-reduce takes int32 or float tensors, not {dtype}")
    t_net = clock.now() - t_net0
    t_ag = intra.ring_phase_seconds(host_sum.nbytes, g)
    intra.spend(t_ag, clock)
    seconds = clock.now() - start
    if not intra.emulate:
        seconds += t_rs + t_ag
    phases = (("intra_reduce_scatter", t_rs), ("network", t_net), ("intra_allgather", t_ag))
    return result, _stats(channel, "innetwork-hier", host_sum.size, before, seconds, phases,
                          report, overflow, ranks=channel.job.size * g)
