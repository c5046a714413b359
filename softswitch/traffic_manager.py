"""A BMv2-like traffic manager between ingress and egress (``egress_order`` fifo/random).

BMv2's simple_switch puts every packet that leaves ingress (and every egress clone) into a
per-egress-port queue (``egress_buffers``: 64 packets per port by default, tail drop: a
packet that finds its queue full is dropped) and runs the egress pipeline from four
egress threads when a packet leaves its queue. Packets to different ports are therefore
reordered relative to each other, the ingress of a later packet can run before the egress
of an earlier one, and a burst larger than a queue loses packets. The default ``sync``
mode of the built-in target hides all of that: it runs each packet's egress right after
its ingress, in one thread (fast, deterministic).

The queued modes make it visible:

``fifo``
    Packets wait in per-port queues; after each received frame every queued packet leaves
    in the order it was enqueued. Outputs equal the ``sync`` mode's, but queue depth and
    timestamps are filled as BMv2 fills them (a multicast's replicas to one port see
    ``enq_qdepth`` 0, 1, 2, ...).
``random``
    Seeded. After each received frame's ingress, a random number of queued packets (0 up
    to all of them) leave, each from a randomly chosen non-empty port queue (FIFO within
    a port, as BMv2). So replicas to different ports run egress in any order, and a
    packet's egress may run after the ingress of packets received later, as with BMv2's
    egress threads. :meth:`QueuedSwitchMixin.transmit` lets the rest leave.

Standard metadata as BMv2 fills it (when the program declares the four queueing fields):
``enq_timestamp`` (µs since start, 32 bits) and ``enq_qdepth`` (packets already in the
queue) at enqueue; ``deq_timedelta`` (µs spent queued) and ``deq_qdepth`` (packets left
behind in the queue) and ``egress_global_timestamp`` at dequeue.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable

from softswitch import ir
from softswitch.engine.codegen import CompiledProgram
from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.runtime import P4AssertionFailed
from softswitch.v1model import MAX_PASSES, TracingV1Switch, V1Switch
from softswitch.v1model.switch import _Job

log = logging.getLogger(__name__)

EGRESS_ORDERS = ("sync", "fifo", "random")
BMV2_QUEUE_DEPTH = 64  # simple_switch's egress_buffers capacity per port (packets)
MAX_QUEUE_DEPTH = (1 << 19) - 1  # enq_qdepth/deq_qdepth are bit<19>
_MASK32 = 0xFFFFFFFF
QUEUE_FIELDS = ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")


def check_tm_options(egress_order: str, queue_depth: int, seed: int | None) -> None:
    """Raise ValueError naming the bad option (the CLI and the Pipeline share the rules)."""
    if egress_order not in EGRESS_ORDERS:
        raise ValueError(f"egress_order {egress_order!r}: choose from {', '.join(EGRESS_ORDERS)}")
    if isinstance(queue_depth, bool) or not isinstance(queue_depth, int):
        raise ValueError(f"queue_depth {queue_depth!r}: must be an integer")
    if not 1 <= queue_depth <= MAX_QUEUE_DEPTH:
        raise ValueError(f"queue_depth {queue_depth}: must be in 1..{MAX_QUEUE_DEPTH}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"seed {seed!r}: must be an integer")


class _Sink:
    """What the architecture code appends egress-bound copies to (``.append``)."""

    __slots__ = ("append",)

    def __init__(self, append: Callable[[_Job], None]) -> None:
        self.append = append


class QueuedSwitchMixin(V1Switch):
    """Per-egress-port queues in front of egress; mixed in before :class:`V1Switch` or
    :class:`TracingV1Switch` (it subclasses V1Switch so that the MRO puts it in front of
    either, and so that the methods it relies on are typed).

    Uses the V1Switch pass methods (``_ingress_pass``, ``_after_ingress``,
    ``_egress_pass``, ``_after_egress``), handing them a sink that enqueues instead of the
    synchronous egress list."""

    def __init__(
        self,
        compiled: CompiledProgram,
        pre: PacketReplicationEngine,
        clock_ns: Callable[[], int],
        *,
        egress_order: str,
        queue_depth: int = BMV2_QUEUE_DEPTH,
        seed: int | None = None,
    ) -> None:
        super().__init__(compiled, pre, clock_ns)  # the V1Switch (or TracingV1Switch)
        self._init_tm(egress_order, queue_depth, seed)

    def _init_tm(self, egress_order: str, queue_depth: int, seed: int | None) -> None:
        check_tm_options(egress_order, queue_depth, seed)
        if egress_order == "sync":
            raise ValueError("egress_order 'sync' has no queues (use V1Switch)")
        self.egress_order = egress_order
        self.queue_depth = queue_depth
        self.queues: dict[int, deque[tuple[int, _Job]]] = {}
        self.capacity: dict[int, int] = {}  # per-port depth overrides
        self.queue_drops: dict[int, int] = {}
        self.rng = random.Random(seed)
        self._seq = 0
        self._pending = 0
        # BMv2 fills the queueing fields when the program declares all four; the base
        # class must not overwrite them in _egress_pass
        fields = {f.name for f in getattr(ir.strip_newtype(self.sm_t), "fields", [])}
        self._queue_meta = set(QUEUE_FIELDS) <= fields
        self._has_queue = False
        self._sink = _Sink(self._enqueue)
        self._ingress_q: deque[_Job] = deque()

    # ------------------------------------------------------------------ queues
    @property
    def pending(self) -> int:
        """Packets waiting in the egress queues."""
        return self._pending

    def queue_lengths(self) -> dict[int, int]:
        """Packets waiting per egress port (ports with an empty queue left out)."""
        return {p: len(q) for p, q in sorted(self.queues.items()) if q}

    def set_queue_depth(self, depth: int, port: int | None = None) -> None:
        """Capacity of one port's queue, or of all (BMv2 ``set_queue_depth``)."""
        check_tm_options(self.egress_order, depth, None)
        if port is None:
            self.queue_depth = depth
            self.capacity.clear()
        else:
            self.capacity[port] = depth

    def _enqueue(self, job: _Job) -> None:
        port = job.port
        q = self.queues.get(port)
        if q is None:
            q = self.queues[port] = deque()
        if len(q) >= self.capacity.get(port, self.queue_depth):
            self.queue_drops[port] = self.queue_drops.get(port, 0) + 1
            self._frame_drop(f"egress queue of port {port} full (tail drop)")
            return
        if self._queue_meta:
            sm = job.sm
            sm.enq_timestamp = self._now_us() & _MASK32
            sm.enq_qdepth = len(q)
        self._seq += 1
        q.append((self._seq, job))
        self._pending += 1

    def _dequeue(self) -> _Job:
        """The next packet to leave, by the egress order."""
        queues = self.queues
        if self.egress_order == "random":
            port = self.rng.choice([p for p, q in queues.items() if q])
        else:
            port = min((q[0][0], p) for p, q in queues.items() if q)[1]
        q = queues[port]
        _seq, job = q.popleft()
        self._pending -= 1
        if self._queue_meta:
            sm = job.sm
            sm.deq_timedelta = (self._now_us() - sm.enq_timestamp) & _MASK32
            sm.deq_qdepth = len(q)
        return job

    def _drop_all(self, why: str) -> None:
        n = self._pending
        for port, q in self.queues.items():
            if q:
                self.queue_drops[port] = self.queue_drops.get(port, 0) + len(q)
                q.clear()
        self._pending = 0
        log.warning("%s; dropped the %d queued packet(s)", why, n)

    # ------------------------------------------------------------------ packets
    def receive(self, port: int, frame: bytes) -> None:
        """Ingress only: parse, ingress, then clone/multicast/enqueue (no egress runs)."""
        self._frame_begin(port, len(frame))
        try:
            self._receive(port, bytes(frame))
        finally:
            self._frame_end()

    def _receive(self, port: int, frame: bytes) -> None:
        n = len(frame)
        job = self._fresh_job(frame, port, n)
        self._ingress_q.append(job)
        self._run_ingress(1)

    def _fresh_job(self, frame: bytes, port: int, n: int) -> _Job:
        job = self._fresh(frame, port, 0, n)
        if self._has_ts:
            job.sm.ingress_global_timestamp = self._now_us()
        return job

    def _run_ingress(self, budget: int) -> int:
        """Ingress passes of everything in the ingress queue (the packet, resubmits,
        recirculations); returns the passes run."""
        iq = self._ingress_q
        passes = 0
        while iq:
            passes += 1
            if passes > MAX_PASSES * budget:
                log.warning("ingress exceeded %d passes (resubmit loop?); dropping", MAX_PASSES)
                iq.clear()
                break
            j = iq.popleft()
            try:
                self._ingress_pass(j)
                self._after_ingress(j, iq, self._sink)
            except P4AssertionFailed as exc:
                self._assertion_failed(exc)
        return passes

    def transmit(self, max_packets: int | None = None) -> list[tuple[int, bytes]]:
        """Let queued packets leave (all, or at most ``max_packets``): egress runs for
        each, and the frames transmitted are returned in order."""
        out: list[tuple[int, bytes]] = []
        limit = self._pending if max_packets is None else min(max_packets, self._pending)
        budget = MAX_PASSES * (limit + 1)
        served = 0
        passes = 0
        while self._pending and (max_packets is None or served < max_packets):
            if max_packets is None and passes > budget:
                self._drop_all(f"egress exceeded {budget} passes (recirculation loop?)")
                break
            job = self._dequeue()
            served += 1
            passes += 1
            try:
                self._egress_pass(job)
                self._after_egress(job, self._ingress_q, self._sink, out)
            except P4AssertionFailed as exc:
                self._assertion_failed(exc)
            if self._ingress_q:
                passes += self._run_ingress(1)
        return out

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Ingress of ``frame``, then the egress the order allows now: all queued packets
        (fifo) or a random number of them (random)."""
        self._frame_begin(port, len(frame))
        try:
            self._receive(port, bytes(frame))
            if self.egress_order == "random":
                return self.transmit(self.rng.randint(0, self._pending))
            return self.transmit()
        finally:
            self._frame_end()


class QueuedV1Switch(QueuedSwitchMixin, V1Switch):
    """The v1model switch with BMv2-like egress queues (``egress_order`` fifo/random)."""


class QueuedTracingV1Switch(QueuedSwitchMixin, TracingV1Switch):
    """:class:`QueuedV1Switch` over the instrumented code: a trace covers the passes that
    ran during one :meth:`process` call (the frame's ingress and whatever left the
    queues then, possibly copies of earlier frames)."""
