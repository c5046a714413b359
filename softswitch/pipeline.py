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

from softswitch import ir
from softswitch.engine.codegen import CompiledProgram, compile_program
from softswitch.engine.externs import Counter, Meter, Register
from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.tables import ActionProfile, Table
from softswitch.engine.trace import PacketTrace
from softswitch.v1model import TracingV1Switch, V1Switch

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
    ) -> None:
        if log_msgs is None:
            log_msgs = logging.getLogger("softswitch.p4").isEnabledFor(logging.DEBUG)
        self.program = program
        self.compiled: CompiledProgram = compile_program(
            program, log_enabled=log_msgs, trace=bool(trace)
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
        if trace:
            self._switch: V1Switch = TracingV1Switch(c, self.pre, clock_ns)
            self.trace_sink = trace if callable(trace) else _log_trace
        else:
            self._switch = V1Switch(c, self.pre, clock_ns)

    @classmethod
    def from_file(
        cls,
        path: str,
        include_dirs: Sequence[str] = (),
        *,
        trace: bool | Callable[[PacketTrace], None] = False,
    ) -> Pipeline:
        """Compile the P4 program at ``path`` (raises P4Error on a bad program)."""
        from softswitch.frontend import compile_file

        return cls(compile_file(path, include_dirs=tuple(include_dirs)), trace=trace)

    @classmethod
    def from_program(
        cls, program: ir.Program, *, trace: bool | Callable[[PacketTrace], None] = False
    ) -> Pipeline:
        return cls(program, trace=trace)

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

    def seed(self, value: int) -> None:
        """Seed the generator behind ``random()`` and the ``random`` hash algorithm."""
        self.compiled.namespace["_rng"].seed(value)

    @property
    def source(self) -> str:
        """The generated Python source (for debugging)."""
        return self.compiled.source
