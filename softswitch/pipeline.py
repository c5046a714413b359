"""The public API of the built-in target: a compiled program plus its run-time state.

``Pipeline.from_file("prog.p4")`` compiles once; :meth:`Pipeline.process` runs one frame
through the whole v1model pipeline. Tables, registers, counters, meters and the packet
replication engine are plain objects that the control plane (P4Runtime server, STF
runner, tests) edits directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from softswitch import ir
from softswitch.cengine import c_switch, check_engine, default_engine
from softswitch.engine.codegen import CompiledProgram, compile_program
from softswitch.engine.externs import Counter, Meter, Register
from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.tables import ActionProfile, Table
from softswitch.engine.trace import PacketTrace
from softswitch.frontend import compile_file
from softswitch.traffic_manager import (
    BMV2_QUEUE_DEPTH,
    QueuedSwitchMixin,
    QueuedTracingV1Switch,
    QueuedV1Switch,
    check_tm_options,
)
from softswitch.v1model import V1MODEL, TracingV1Switch, V1Switch

log = logging.getLogger(__name__)
trace_log = logging.getLogger("softswitch.trace")


def _log_trace(trace: PacketTrace) -> None:
    """The default trace sink: one DEBUG record per packet."""
    trace_log.debug("%s", trace)


class Pipeline:
    """One loaded P4 program (v1model) and its state."""

    def __init__(
        self,
        program: ir.Program,
        *,
        log_msgs: bool | None = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        trace: bool | Callable[[PacketTrace], None] = False,
        egress_order: str = "sync",
        queue_depth: int = BMV2_QUEUE_DEPTH,
        egress_seed: int | None = None,
        engine: str | None = None,
    ) -> None:
        check_tm_options(egress_order, queue_depth, egress_seed)
        engine = default_engine() if engine is None else engine
        check_engine(engine)
        if log_msgs is None:
            log_msgs = logging.getLogger("softswitch.p4").isEnabledFor(logging.DEBUG)
        self.program = program
        self.compiled: CompiledProgram = compile_program(
            program, V1MODEL, log_enabled=log_msgs, trace=bool(trace)
        )
        c = self.compiled
        self.tables: dict[str, Table] = c.tables
        self.registers: dict[str, Register] = c.registers
        self.counters: dict[str, Counter] = c.counters
        self.meters: dict[str, Meter] = c.meters
        self.action_profiles: dict[str, ActionProfile] = c.action_profiles
        self.direct_counters: dict[str, Table] = c.direct_counters
        self.direct_meters: dict[str, Table] = c.direct_meters
        self.pre = PacketReplicationEngine()
        self.cpu_port: int | None = None
        self.set_clock(clock_ns)
        # where each packet's trace goes: a callback, or the "softswitch.trace" logger
        self.trace_sink: Callable[[PacketTrace], None] | None = None
        self.egress_order = egress_order
        if egress_order != "sync":
            queued = QueuedTracingV1Switch if trace else QueuedV1Switch
            self._switch: V1Switch = queued(
                c,
                self.pre,
                clock_ns,
                egress_order=egress_order,
                queue_depth=queue_depth,
                seed=egress_seed,
            )
        elif trace:
            self._switch = TracingV1Switch(c, self.pre, clock_ns)
        else:
            self._switch = V1Switch(c, self.pre, clock_ns)
        # the engine that runs packets: "c" only when asked for and the program fits it
        self.engine = "python"
        if engine == "c":
            fast = c_switch(c, self.pre, clock_ns, mode=egress_order, trace=bool(trace))
            if fast is not None:
                self._switch = fast
                self.engine = "c"
        if trace:
            self.trace_sink = trace if callable(trace) else _log_trace

    @classmethod
    def from_file(
        cls,
        path: str,
        include_dirs: Sequence[str] = (),
        *,
        trace: bool | Callable[[PacketTrace], None] = False,
        **tm: Any,
    ) -> Pipeline:
        """Compile the P4 program at ``path`` (raises P4Error on a bad program); ``tm``:
        ``egress_order``, ``queue_depth``, ``egress_seed``, ``engine`` as for the constructor."""
        return cls(compile_file(path, include_dirs=tuple(include_dirs)), trace=trace, **tm)

    @classmethod
    def from_program(
        cls,
        program: ir.Program,
        *,
        trace: bool | Callable[[PacketTrace], None] = False,
        **tm: Any,
    ) -> Pipeline:
        return cls(program, trace=trace, **tm)

    @property
    def tracing(self) -> bool:
        """True when the instrumented code runs (``Pipeline(..., trace=...)``)."""
        return isinstance(self._switch, TracingV1Switch)

    @property
    def last_trace(self) -> PacketTrace | None:
        """The trace of the last processed frame (None unless tracing)."""
        if isinstance(self._switch, TracingV1Switch):
            return self._switch.last_trace
        return None

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Frames to transmit, in order, after ``frame`` arrives on ``port``."""
        if self.trace_sink is None:
            return self._switch.process(port, bytes(frame))
        try:
            return self._switch.process(port, bytes(frame))
        finally:
            trace = self.last_trace
            if trace is not None:
                self.trace_sink(trace)

    # ------------------------------------------------------------ traffic manager
    @property
    def queued(self) -> bool:
        """True when packets wait in egress queues (``egress_order`` fifo or random)."""
        return isinstance(self._switch, QueuedSwitchMixin)

    def _tm(self, what: str) -> QueuedSwitchMixin:
        if not isinstance(self._switch, QueuedSwitchMixin):
            raise ValueError(
                f"{what} needs egress_order 'fifo' or 'random' (this pipeline: 'sync')"
            )
        return self._switch

    def receive(self, port: int, frame: bytes) -> None:
        """Ingress only: the frame's copies wait in their egress queues (queued modes)."""
        self._tm("receive()").receive(port, frame)
        self._emit_trace()

    def transmit(self, max_packets: int | None = None) -> list[tuple[int, bytes]]:
        """Let queued packets leave (all, or at most ``max_packets``): the frames sent.
        Without queues (``sync``) there is never anything waiting: ``[]``."""
        if not isinstance(self._switch, QueuedSwitchMixin):
            return []
        return self._switch.transmit(max_packets)

    @property
    def pending(self) -> int:
        """Packets waiting in the egress queues (always 0 in ``sync`` mode)."""
        sw = self._switch
        return sw.pending if isinstance(sw, QueuedSwitchMixin) else 0

    def queue_lengths(self) -> dict[int, int]:
        """Packets waiting per egress port (non-empty queues only)."""
        sw = self._switch
        return sw.queue_lengths() if isinstance(sw, QueuedSwitchMixin) else {}

    @property
    def queue_drops(self) -> dict[int, int]:
        """Packets tail-dropped per egress port because its queue was full."""
        sw = self._switch
        return dict(sw.queue_drops) if isinstance(sw, QueuedSwitchMixin) else {}

    def set_queue_depth(self, depth: int, port: int | None = None) -> None:
        """Capacity (packets) of one port's egress queue, or of all of them."""
        self._tm("set_queue_depth()").set_queue_depth(depth, port)

    def _emit_trace(self) -> None:
        if self.trace_sink is not None:
            trace = self.last_trace
            if trace is not None:
                self.trace_sink(trace)

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        """Digest messages generated since the last call: ``(name, field values)``."""
        out = list(self._switch.digests)
        self._switch.digests.clear()
        return out

    @property
    def assertion_failures(self) -> int:
        """Packets dropped because an ``assert``/``assume`` failed (each also logged as
        an error; BMv2 would abort the switch instead)."""
        return self._switch.assertion_failures

    def set_clock(self, clock_ns: Callable[[], int]) -> None:
        """Time source (integer ns) for meters, idle timeouts and timestamps."""
        self.compiled.namespace["_now"] = clock_ns
        if hasattr(self, "_switch"):
            self._switch.clock_ns = clock_ns

    def renew(self, clock_ns: Callable[[], int], egress_seed: int | None = None) -> None:
        """Makes a pipeline built earlier (and never run) equal to one built now with
        ``clock_ns`` and ``egress_seed``: construction reads the clock (the origin of the
        ingress timestamps), seeds the ``random()`` generator from the system's entropy and
        the egress order's generator from the seed; nothing else depends on the moment.
        A switch forked from the fork server takes a pipeline loaded before the fork."""
        self.set_clock(clock_ns)
        self.compiled.namespace["_rng"].seed()  # random.Random(): fresh entropy
        switch: Any = self._switch
        if hasattr(switch, "_t0"):
            switch._t0 = clock_ns()  # noqa: SLF001 - the origin its constructor took
        if isinstance(switch, QueuedSwitchMixin):
            switch.rng.seed(egress_seed)

    def seed(self, value: int) -> None:
        """Seed the generator behind ``random()`` and the ``random`` hash algorithm."""
        self.compiled.namespace["_rng"].seed(value)
        seed_c = getattr(self._switch, "seed", None)
        if seed_c is not None:  # the C engine's own generator
            seed_c(value)

    @property
    def source(self) -> str:
        """The generated Python source (for debugging)."""
        return self.compiled.source
