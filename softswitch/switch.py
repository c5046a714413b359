"""The switch process: a drop-in for BMv2's ``simple_switch_grpc``.

``python -m softswitch run [PROG] -i 1@veth1 -i 2@veth2 --grpc-server-addr 127.0.0.1:0``

:class:`SwitchDataPlane` is the data plane: one ``selectors`` loop over all ports that runs each
received frame through the engine ``Pipeline`` and transmits the results. A single lock
(shared with the P4Runtime service) guards the pipeline, so every P4Runtime update is
atomic relative to packets. Frames for the CPU port become PacketIn messages; PacketOut
frames are injected at the CPU port. :func:`main` parses simple_switch_grpc-style flags,
opens the ports, then starts the gRPC server and prints one readiness line::

    softswitch ready: device_id=0 grpc=127.0.0.1:40123 ports=1@veth1,2@veth2 cpu_port=none

It stops cleanly (exit code 0) on SIGTERM/SIGINT.

Time (``--tdf``, ``--port-delay``, ``--port-ingress-delay``; see :mod:`softswitch.timing`):
one :class:`~vtime.VirtualClock` times the pipelines (timestamps, meters), the pcap records
and the delay lines. What stays in real time, on purpose: the stats file's refresh interval
and its ``time``/``uptime_s`` (they serve whoever watches the process, not the emulated
world; the file also gives ``uptime_emulated_s``) and the idle flush of the pcap buffers.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypedDict

from softswitch.cengine.loop import (
    E_HELD,
    E_MAX,
    E_OVF,
    I_HELD,
    I_MAX,
    I_OVF,
    NPC,
    PT_ASSERT,
    PT_CPU,
    PT_DIGEST,
    PT_PASSES,
    SC_MAXHELD,
    SC_NOPORT,
    SC_RELEASED,
    CLoop,
    CLoopError,
    LoopPortCounters,
    parse_digests,
)
from softswitch.cengine.switch import CV1Switch
from softswitch.device_config import load_device_config
from softswitch.p4info import build_p4info
from softswitch.p4runtime.entities import PipelineState
from softswitch.p4runtime.server import P4RuntimeService, default_loader, start_server
from softswitch.pcap import PcapWriter, pcap_paths
from softswitch.pipeline import Pipeline
from softswitch.ports import AfPacketPort, Port, PortCounters, PortError
from softswitch.preload import PipelineKey, Preloaded, preloading_loader
from softswitch.program_cache import compile_p4_file
from softswitch.stats import build_document, default_stats_path, write_atomic
from softswitch.timing import (
    DEFAULT_DELAY_CAPACITY,
    DelayLine,
    PcapClock,
    SwitchTiming,
    describe_delays,
    parse_port_delay,
    pipeline_clock_ns,
)
from softswitch.traffic_manager import EGRESS_ORDERS, MAX_QUEUE_DEPTH
from softswitch.v1model import MAX_PASSES
from vtime import REAL_TIME, VirtualClock, parse_tdf

log = logging.getLogger("softswitch.switch")

RX_BATCH = 64
MIN_FRAME = 14  # an Ethernet header
IDLE_FLUSH_S = 1.0
STATS_INTERVAL_S = 1.0  # how often the stats file is rewritten
MAX_PORT = 510  # 511 is v1model's drop port
IO_LOOPS = ("c", "python")  # --io: the C packet loop where it can run, or always Python
SELECT_FD_LIMIT = 1024  # select(2) takes descriptors below FD_SETSIZE only
LOG_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "off": logging.CRITICAL + 10,
}


@dataclass
class SwitchStats:
    """Switch-wide counters beside the per-port ones."""

    no_such_port: int = 0  # frames the pipeline sent to a port that does not exist
    no_pipeline: int = 0  # frames received before a pipeline was set
    cpu_frames: int = 0  # frames handed to the P4Runtime service (PacketIn)
    packet_outs: int = 0


class ControlLock:
    """The switch's lock (shared with the P4Runtime service): a re-entrant lock that, while
    the C packet loop runs, also pauses the loop's thread for as long as it is held, and on
    the last release reloads what the control plane changed into C before the thread goes
    on. So every update stays atomic relative to packets, on either loop."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self._owner = 0  # thread ident of the holder (0: free)
        self.loop: CLoop | None = None  # the running C loop (set under this lock)
        self._paused: CLoop | None = None

    def held_here(self) -> bool:
        """True when the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        self._owner = threading.get_ident()
        if self._depth == 1 and self.loop is not None:
            self._paused = self.loop
            self._paused.pause()
        return True

    def release(self) -> None:
        if self._depth == 1 and self._paused is not None:
            loop, self._paused = self._paused, None
            try:
                loop.commit()
            finally:
                loop.resume()
        self._depth -= 1
        if self._depth == 0:
            self._owner = 0
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def c_clock_tdf(clock_ns: Callable[[], int]) -> float | None:
    """The factor by which ``clock_ns`` (a pipeline's time source) divides the monotonic
    clock, or None when it is some other clock (a test's fake): the C loop reads
    CLOCK_MONOTONIC itself."""
    if clock_ns is time.monotonic_ns:
        return 1.0
    owner = getattr(clock_ns, "__self__", None)
    if (isinstance(owner, VirtualClock) and owner.real_ns is time.monotonic_ns
            and getattr(clock_ns, "__func__", None) is VirtualClock.now_ns):
        return owner.tdf
    return None


class SwitchDataPlane:
    """The data plane of one switch: ports, the pipeline, the packet loop."""

    def __init__(
        self,
        ports: Sequence[Port],
        pipeline: Any | None = None,
        cpu_port: int | None = None,
        pcap_dir: str | Path | None = None,
        name: str = "softswitch",
        stats_file: str | Path | None = None,
        stats_interval: float = STATS_INTERVAL_S,
        device_id: int = 0,
        clock: VirtualClock = REAL_TIME,
        port_delays: Mapping[int, float] | None = None,
        port_ingress_delays: Mapping[int, float] | None = None,
        delay_capacity: int = DEFAULT_DELAY_CAPACITY,
        io: str = "c",
        tx_rings: bool | None = None,
    ) -> None:
        """``clock``: the emulated clock of pcap records and delay lines (the pipeline
        brings its own, see :func:`pipeline_options`); ``port_delays`` /
        ``port_ingress_delays``: emulated seconds that frames leaving / arriving on a port
        are held (its link's propagation delay, ``delay * TDF`` real seconds); ``io``:
        "c" runs the packet loop in C (its own thread, no GIL) whenever the pipeline is on
        the C engine and the configuration allows it (else Python, logged once with the
        reason), "python" always runs the Python loop. ``tx_rings``: the C loop sends
        through ``PACKET_TX_RING`` (else ``sendmmsg``; None: unless
        ``$SOFTSWITCH_TX_RING`` is "off", to compare the two)."""
        if io not in IO_LOOPS:
            raise ValueError(f"io {io!r}: choose from {', '.join(IO_LOOPS)}")
        self.io = io
        if tx_rings is None:
            tx_rings = os.environ.get("SOFTSWITCH_TX_RING", "").lower() != "off"
        self.tx_rings = tx_rings
        self.name = name
        self.device_id = device_id
        self.stats_file = Path(stats_file) if stats_file is not None else None
        self.stats_interval = stats_interval
        self._stats_requested = threading.Event()
        self._stats_reason = "request"
        self._started = time.time()
        self.ports: dict[int, Port] = {p.number: p for p in ports}
        for option, delays in (("--port-delay", port_delays),
                               ("--port-ingress-delay", port_ingress_delays)):
            for num in sorted(delays or {}):
                if num not in self.ports:
                    raise ValueError(f"{option}: port {num} is not a port of this switch")
        self.clock = clock
        self._pcap_clock = PcapClock(clock)
        # held frames: (frame, capture time at departure) per egress port; frames per
        # ingress port. Ports without a delay never touch them.
        self._egress_line: DelayLine[tuple[bytes, float]] = DelayLine(
            port_delays or {}, clock, delay_capacity)
        self._ingress_line: DelayLine[bytes] = DelayLine(
            port_ingress_delays or {}, clock, delay_capacity)
        self._egress_delayed = frozenset(self._egress_line.delays_s)
        self._ingress_delayed = frozenset(self._ingress_line.delays_s)
        self.released_at_stop = 0  # held frames let go early because the switch stopped
        self._max_held = 0  # most frames both lines held at once
        self.lock = ControlLock()
        self.delay_capacity = delay_capacity
        self._stats_due = float("inf")
        self._generation = 0  # bumped by every install_pipeline: the run loop re-decides
        self._cloop: CLoop | None = None  # the C loop of the current pipeline, if it runs
        self._io_said: set[tuple[int, str]] = set()  # (pipeline, reason) already logged
        self.cpu_port = cpu_port
        self.pipeline: Any | None = None
        self.stats = SwitchStats()
        self.on_cpu_frame: Callable[[bytes], None] | None = None
        self.on_digests: Callable[[list[tuple[str, tuple[int, ...]]]], None] | None = None
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._pcap_in: dict[int, PcapWriter] = {}
        self._pcap_out: dict[int, PcapWriter] = {}
        if pcap_dir is not None:
            Path(pcap_dir).mkdir(parents=True, exist_ok=True)
            for p in ports:
                pin, pout = pcap_paths(pcap_dir, p.name)
                self._pcap_in[p.number] = PcapWriter(pin)
                self._pcap_out[p.number] = PcapWriter(pout)
        self._debug = False
        if pipeline is not None:
            self.install_pipeline(pipeline)

    # ------------------------------------------------------------------ control
    def install_pipeline(self, pipeline: Any | None) -> None:
        """Swap the running pipeline (atomic relative to packets)."""
        with self.lock:
            if pipeline is not None and self.cpu_port is not None and hasattr(pipeline, "cpu_port"):
                pipeline.cpu_port = self.cpu_port
            if pipeline is not None and getattr(pipeline, "tracing", False):
                pipeline.trace_sink = None  # the loop logs each trace in its own record
            loop = self._cloop
            if loop is not None and loop.switch is not getattr(pipeline, "_switch", None):
                # no frame may run on the old pipeline once the new one is in: stop its
                # thread now (frames it had already received still run on the old one)
                self.lock.loop = None
                loop.stop()
            if pipeline is not self.pipeline:
                self.pipeline = pipeline
                self._generation += 1
        self._wake()

    def port_counters(self) -> dict[int, PortCounters]:
        return {n: p.counters for n, p in self.ports.items()}

    @property
    def io_loop(self) -> str:
        """Which packet loop runs now: "c" (the C thread) or "python"."""
        return "c" if self._cloop is not None and self._cloop.running else "python"

    def stop(self) -> None:
        """Ask the loop to return (safe from signal handlers and other threads)."""
        self._stop.set()
        self._wake()

    def request_stats(self, reason: str = "request") -> None:
        """Ask the loop to rewrite the stats file now (SIGUSR1; safe from handlers)."""
        self._stats_reason = reason
        self._stats_requested.set()
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def stats_document(self, reason: str = "request") -> dict[str, Any]:
        """Per-port and switch-wide counters as the stats file holds them."""
        ports = {n: (p.name, p.counters.as_dict()) for n, p in self.ports.items()}
        switch_stats = dataclasses.asdict(self.stats)
        loop = self._cloop
        if loop is not None and not loop.closed:
            switch_stats["no_such_port"] += loop.sw_word(SC_NOPORT)
        return build_document(
            ports,
            switch_stats,
            name=self.name,
            device_id=self.device_id,
            now=time.time(),
            started=self._started,
            reason=reason,
            tdf=self.clock.tdf,
            delay_line=self.delay_line_stats(),
        )

    def delay_line_stats(self) -> dict[str, Any]:
        """The configured link delays and what the delay lines hold now (and at most)."""
        with self.lock:
            e, i = self._egress_line, self._ingress_line
            doc = {
                "held": e.held + i.held,
                "max_held": self._max_held,
                "released_at_stop": self.released_at_stop,
                "egress": e.snapshot(),
                "ingress": i.snapshot(),
            }
            loop = self._cloop
            if loop is not None and not loop.closed:
                self._add_c_delay_stats(loop, doc)
            return doc

    def _add_c_delay_stats(self, loop: CLoop, doc: dict[str, Any]) -> None:
        """The C loop's delay lines added to ``doc`` (the Python lines' snapshot)."""
        doc["max_held"] = max(doc["max_held"], loop.sw_word(SC_MAXHELD))
        doc["released_at_stop"] += loop.sw_word(SC_RELEASED)
        for key, line, (held, most, over) in (("egress", self._egress_line,
                                               (E_HELD, E_MAX, E_OVF)),
                                              ("ingress", self._ingress_line,
                                               (I_HELD, I_MAX, I_OVF))):
            for p in line.delays_s:
                entry = doc[key][str(p)]
                now = loop.port_word(p, held)
                doc["held"] += now
                entry["held"] += now
                entry["max_held"] = max(entry["max_held"], loop.port_word(p, most))
                entry["overflow"] += loop.port_word(p, over)

    def write_stats(self, reason: str = "request") -> None:
        """Rewrite the stats file (no-op without one); a failure is logged, not raised."""
        if self.stats_file is None:
            return
        try:
            write_atomic(self.stats_file, self.stats_document(reason))
        except OSError as exc:
            log.warning("cannot write stats file %s: %s", self.stats_file, exc)

    def close(self) -> None:
        """Let held frames go, close ports and flush/close pcap files."""
        self._stop_c_loop()
        self.flush_delay_lines()
        for p in self.ports.values():
            p.close()
        for w in list(self._pcap_in.values()) + list(self._pcap_out.values()):
            w.close()
        self._wake_r.close()
        self._wake_w.close()

    # ---------------------------------------------------------------- packets
    def inject(self, port: int, frame: bytes) -> None:
        """Process ``frame`` as received on ``port`` (PacketOut uses the CPU port)."""
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None:
                self.stats.no_pipeline += 1
                return
            if port == self.cpu_port:
                self.stats.packet_outs += 1
            loop = self.lock.loop
            if loop is not None and loop.switch is getattr(pipeline, "_switch", None):
                loop.inject(port, frame)  # its outputs take the C loop's path
                return
            outs = pipeline.process(port, frame)
            self._emit(pipeline, outs)
            if self._egress_line.held:
                self._wake()  # the loop's next wait must end at the new frame's deadline
            if self._debug:
                log.debug(
                    "inject port %d len %d -> %s%s",
                    port,
                    len(frame),
                    [(p, len(d)) for p, d in outs],
                    self._trace_text(pipeline, outs),
                )

    def _emit(self, pipeline: Any, outs: list[tuple[int, bytes]]) -> None:
        """Transmit pipeline outputs (lock held)."""
        cpu = self.cpu_port
        delayed = self._egress_delayed
        for eport, data in outs:
            if eport == cpu:
                self.stats.cpu_frames += 1
                if self.on_cpu_frame is not None:
                    self.on_cpu_frame(data)
                continue
            port = self.ports.get(eport)
            if port is None:
                self.stats.no_such_port += 1
                continue
            if eport in delayed:
                self._hold_egress(port, data)
                continue
            c = port.counters
            c.tx_packets += 1  # counted first, so a reader that saw the frame sees the count
            c.tx_bytes += len(data)
            if not port.send(data):
                c.tx_packets -= 1
                c.tx_bytes -= len(data)
                continue
            w = self._pcap_out.get(eport)
            if w is not None:
                w.write(data, self._pcap_clock.now())
        if self.on_digests is not None:
            digests = pipeline.drain_digests()
            if digests:
                self.on_digests(digests)

    # ------------------------------------------------------------ delay lines
    def _hold_egress(self, port: Port, data: bytes) -> None:
        """Put a frame on its port's delay line (lock held); the pcap record will carry
        this moment, when the frame left the switch port."""
        line = self._egress_line
        if not line.hold(port.number, (data, self._pcap_clock.stamp())):
            port.counters.tx_drops += 1  # the line is full: the wire drops it
        held = line.held + self._ingress_line.held
        if held > self._max_held:
            self._max_held = held

    def _send_held(self, num: int, data: bytes, captured: float) -> None:
        """Transmit a frame whose link delay has passed (lock held)."""
        port = self.ports[num]
        c = port.counters
        c.tx_packets += 1
        c.tx_bytes += len(data)
        if not port.send(data):
            c.tx_packets -= 1
            c.tx_bytes -= len(data)
            return
        w = self._pcap_out.get(num)
        if w is not None:
            w.write(data, captured)

    def _hold_ingress(self, port: Port, frames: list[bytes]) -> None:
        """Received frames wait out the link's delay before the switch sees them."""
        with self.lock:
            line = self._ingress_line
            now = self.clock.real_ns()
            for frame in frames:
                line.hold(port.number, frame, now)  # a full line drops (counted there)
            held = line.held + self._egress_line.held
            if held > self._max_held:
                self._max_held = held

    def release_due(self) -> int:
        """Transmit held frames whose link delay has passed and run held received frames
        through the pipeline; returns how many left the delay lines."""
        with self.lock:
            now = self.clock.real_ns()
            out = self._egress_line.pop_due(now)
            for num, (data, captured) in out:
                self._send_held(num, data, captured)
            inp = self._ingress_line.pop_due(now)
            for num, frame in inp:
                self._receive(self.ports[num], frame)
            return len(out) + len(inp)

    def next_release(self) -> int | None:
        """Real ns (of ``clock.real_ns``) when the next held frame is due; None if none."""
        with self.lock:
            e, i = self._egress_line.next_deadline(), self._ingress_line.next_deadline()
        if e is None or i is None:
            return i if e is None else e
        return min(e, i)

    def flush_delay_lines(self) -> int:
        """Let every held frame go now, and hold no more (the switch stops): egress
        frames are sent, received frames run through the pipeline and their outputs leave
        at once. Returns how many frames were let go."""
        with self.lock:
            self._egress_delayed = self._ingress_delayed = frozenset()
            n = self._release_python_lines()
        if n:
            log.info("stopping: let %d frame(s) off the delay lines early", n)
        return n

    def _receive(self, port: Port, frame: bytes) -> None:
        c = port.counters
        c.rx_packets += 1
        c.rx_bytes += len(frame)
        w = self._pcap_in.get(port.number)
        if w is not None:
            w.write(frame, self._pcap_clock.now())
        if len(frame) < MIN_FRAME:
            c.malformed += 1
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None:
                self.stats.no_pipeline += 1
                return
            try:
                outs = pipeline.process(port.number, frame)
            except Exception:  # one bad frame must never stop the loop
                c.rx_errors += 1
                c.dropped += 1
                if self._debug:
                    log.debug(
                        "port %d: frame of %d bytes failed in the pipeline",
                        port.number,
                        len(frame),
                        exc_info=True,
                    )
                return
            if not outs and not getattr(pipeline, "queued", False):
                c.dropped += 1  # (queued modes: the copies may still be waiting)
            self._emit(pipeline, outs)
            if self._debug:
                log.debug(
                    "port %d in %d bytes %s -> %s%s",
                    port.number, len(frame), frame[:34].hex(), [(p, len(d)) for p, d in outs],
                    self._trace_text(pipeline, outs),
                )

    def _trace_text(self, pipeline: Any, outs: list[tuple[int, bytes]]) -> str:
        """The pipeline's trace of the last packet (when tracing) and what the switch did
        with outputs that went nowhere, as the indented rest of one log record."""
        lines = []
        trace = getattr(pipeline, "last_trace", None)
        if trace is not None:
            lines += trace.lines
        for eport, _data in outs:
            if eport != self.cpu_port and eport not in self.ports:
                lines.append(f"  switch: port {eport} does not exist: frame dropped")
            elif eport == self.cpu_port:
                lines.append(f"  switch: port {eport} is the CPU port: PacketIn")
        return "".join("\n" + x for x in lines)

    def _selector(self, timed: bool) -> selectors.BaseSelector:
        """epoll; with delay lines select(2), whose timeout has microsecond resolution
        (epoll's has milliseconds, so frames would wait up to 1 ms longer than their delay)."""
        if not timed:
            return selectors.DefaultSelector()
        fds = [p.fileno() for p in self.ports.values()] + [self._wake_r.fileno()]
        if max(fds) < SELECT_FD_LIMIT:
            return selectors.SelectSelector()
        log.warning("descriptor %d too high for select(2): delay lines release with epoll's "
                    "1 ms resolution", max(fds))
        return selectors.DefaultSelector()

    def run(self) -> None:
        """The packet loop; returns after :meth:`stop`. It runs in C on its own thread
        whenever it can (:meth:`c_loop_reason`), else here in Python; a new pipeline
        (SetForwardingPipelineConfig) decides again."""
        self._debug = self._debug or log.isEnabledFor(logging.DEBUG)
        timed = bool(self._egress_delayed or self._ingress_delayed)
        self._stats_due = (time.monotonic() + self.stats_interval if self.stats_file
                           else float("inf"))
        self.write_stats("start")
        try:
            while not self._stop.is_set():
                loop = self._start_c_loop()
                if loop is not None:
                    self._run_c(loop)
                else:
                    self._run_python(timed)
        finally:
            self._stop_c_loop()
            if timed:
                self.flush_delay_lines()
            self._flush_pcaps()
            self.write_stats("stop")

    def _tick_stats(self) -> None:
        """Rewrite the stats file when asked (SIGUSR1) or when its interval has passed."""
        if self.stats_file is None:
            return
        now = time.monotonic()
        if self._stats_requested.is_set():
            self._stats_requested.clear()
            self.write_stats(self._stats_reason)
        elif now >= self._stats_due:
            self.write_stats("periodic")
            self._stats_due = now + self.stats_interval

    def _drain_wake(self) -> None:
        try:
            self._wake_r.recv(64)
        except OSError:
            pass

    def _port_selector(self, timed: bool) -> selectors.BaseSelector:
        """The selector the Python loop waits on: every port (its data) and the wake
        socket (data None)."""
        sel = self._selector(timed)
        for p in self.ports.values():
            sel.register(p.fileno(), selectors.EVENT_READ, p)
        sel.register(self._wake_r.fileno(), selectors.EVENT_READ, None)
        return sel

    def _run_python(self, timed: bool) -> None:
        """The Python packet loop, until :meth:`stop` or a new pipeline that the C loop
        can take."""
        sel = self._port_selector(timed)
        receive = self._receive
        held_in = self._ingress_delayed
        real_ns = self.clock.real_ns
        generation = self._generation
        try:
            while not self._stop.is_set():
                if self._generation != generation:
                    generation = self._generation
                    if self.c_loop_reason(self.pipeline) is None:
                        return
                self._tick_stats()
                due = None
                if timed:
                    self.release_due()
                    due = self.next_release()
                pending = self._queued_packets()
                timeout = 0 if pending else min(IDLE_FLUSH_S, self.stats_interval)
                if due is not None:
                    timeout = min(timeout, max(0.0, (due - real_ns()) / 1e9))
                events = sel.select(timeout)
                if not events:
                    if pending:
                        self._transmit_queued()
                        continue
                    if due is None:
                        self._flush_pcaps()
                    continue
                self._receive_ready(events, due, receive, held_in, real_ns)
        finally:
            sel.close()

    def _receive_ready(self, events: list[tuple[selectors.SelectorKey, int]], due: int | None,
                       receive: Callable[[Port, bytes], None], held_in: frozenset[int],
                       real_ns: Callable[[], int]) -> None:
        """One pass over the ports ``select`` found readable: a batch from each, held by
        its ingress delay line or received; frames that fall due during a long pass are
        released as it goes, so none waits for the whole pass."""
        for key, _mask in events:
            port = key.data
            if port is None:
                self._drain_wake()
                continue
            try:
                frames = port.recv_batch(RX_BATCH)
            except OSError as exc:
                log.warning("port %d (%s): receive failed: %s", port.number, port.name, exc)
                continue
            if port.number in held_in:
                self._hold_ingress(port, frames)
            else:
                for frame in frames:
                    receive(port, frame)
            if due is not None and real_ns() >= due:  # a long batch: no frame
                self.release_due()                    # waits for all of it
                due = self.next_release()

    # ------------------------------------------------------------ the C loop
    def c_loop_reason(self, pipeline: Any | None) -> str | None:
        """None when the C packet loop can run ``pipeline``; else why not ("" when
        there is nothing to say: Python asked for, no pipeline, or a pipeline on the
        Python engine, whose fallback logged its own reason)."""
        if self.io == "python" or pipeline is None:
            return ""
        cswitch = getattr(pipeline, "_switch", None)
        if not isinstance(cswitch, CV1Switch):
            return ""
        if self._pcap_in:
            return "pcap capture (--pcap) needs the Python loop"
        if self._debug:
            return "debug logging (a log line and trace per packet) needs the Python loop"
        if cswitch._needs_clock and c_clock_tdf(cswitch.clock_ns) is None:
            return "the pipeline's clock is not the monotonic clock"
        if ((self._egress_delayed or self._ingress_delayed)
                and self.clock.real_ns is not time.monotonic_ns):
            return "the delay lines' clock is not the monotonic clock"
        if any(p.fileno() < 0 for p in self.ports.values()):
            return "a port has no socket"
        return None

    def _start_c_loop(self) -> CLoop | None:
        """Start the C loop for the current pipeline (None, logged once with the reason,
        when it cannot run it)."""
        with self.lock:
            pipeline = self.pipeline
            reason = self.c_loop_reason(pipeline)
            if reason is None:
                cswitch = pipeline._switch  # type: ignore[union-attr]
                try:
                    loop = CLoop(
                        cswitch, list(self.ports.values()), cpu_port=self.cpu_port,
                        egress_delay_ns=self._egress_line.delay_ns,
                        ingress_delay_ns=self._ingress_line.delay_ns,
                        capacity=self.delay_capacity,
                        tdf=c_clock_tdf(cswitch.clock_ns) or 1.0, tx_rings=self.tx_rings,
                    )  # fmt: skip
                except CLoopError as exc:
                    reason = str(exc)
                else:
                    self._release_python_lines()
                    loop.commit()
                    for i, port in enumerate(self.ports.values()):
                        if not isinstance(port.counters, LoopPortCounters):
                            port.counters = LoopPortCounters(port.counters)
                        port.counters.attach(loop.port_ctr, i * NPC)
                    cswitch.on_dirty = self._reload_soon
                    try:
                        loop.start()
                    except CLoopError as exc:
                        loop.close()
                        reason = str(exc)
                    else:
                        self._cloop = loop
                        self.lock.loop = loop
                        log.info("packet loop: C thread over %d port(s), %d read through "
                                 "receive rings, %d sent through transmit rings",
                                 len(self.ports), loop.rings, loop.tx_rings)
                        return loop
            key = (id(pipeline), reason)
            if reason and key not in self._io_said:
                self._io_said.add(key)
                log.warning("C packet loop: %s; using the Python loop", reason)
            return None

    def _reload_soon(self) -> None:
        """A control-plane write reached a C pipeline: a holder of the switch's lock
        reloads it on release; anyone else's write is reloaded by the run loop."""
        if not self.lock.held_here():
            self._wake()

    def _run_c(self, loop: CLoop) -> None:
        """While the C thread forwards: punted frames, digests and events, the stats file,
        and reloads of writes made without the switch's lock; until :meth:`stop` or a new
        pipeline."""
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r.fileno(), selectors.EVENT_READ, None)
        sel.register(loop.notify_fd, selectors.EVENT_READ, loop)
        generation = self._generation
        cswitch = loop.switch
        try:
            while not self._stop.is_set() and self._generation == generation:
                self._tick_stats()
                for key, _mask in sel.select(min(IDLE_FLUSH_S, self.stats_interval)):
                    if key.data is None:
                        self._drain_wake()
                self._handle_punts(loop)
                if cswitch.dirty:
                    with self.lock:  # pauses the thread; the release reloads into C
                        pass
        finally:
            sel.close()
            self._stop_c_loop()

    def _handle_punts(self, loop: CLoop) -> None:
        """What the C thread handed to Python: CPU-port frames (PacketIn), digests,
        failed asserts and the pass limit (logged as the Python loop logs them)."""
        records = loop.take()
        if not records:
            return
        cswitch = loop.switch
        with self.lock:
            for kind, port, data in records:
                if kind == PT_CPU:
                    self.stats.cpu_frames += 1
                    if self.on_cpu_frame is not None:
                        self.on_cpu_frame(data)
                elif kind == PT_DIGEST:
                    digests = parse_digests(cswitch, data)
                    if self.on_digests is not None:
                        self.on_digests(digests)
                    else:
                        cswitch.digests.extend(digests)
                elif kind == PT_ASSERT:
                    log.error("assert/assume failed at %s; packet dropped",
                              cswitch.assert_location(port))
                elif kind == PT_PASSES:
                    log.warning("packet from port %d exceeded %d passes; dropping the rest",
                                port, MAX_PASSES)

    def _stop_c_loop(self) -> None:
        """Stop the C thread (if one runs), let what it held go, hand over its last
        punts and fold its switch-wide counts into :attr:`stats`."""
        loop = self._cloop
        if loop is None:
            return
        with self.lock:
            self.lock.loop = None
            released = loop.stop()
            self._cloop = None
            self.stats.no_such_port += loop.sw_word(SC_NOPORT)
            self.released_at_stop += loop.sw_word(SC_RELEASED)
            self._max_held = max(self._max_held, loop.sw_word(SC_MAXHELD))
            loop.switch.on_dirty = None
        self._handle_punts(loop)
        loop.close()
        if released and self._stop.is_set():
            log.info("stopping: let %d frame(s) off the delay lines early", released)

    def _release_python_lines(self) -> int:
        """Every frame on the Python delay lines leaves now (lock held): at stop, and when
        the C loop takes over. Returns how many."""
        out = self._egress_line.drain()
        for num, (data, captured) in out:
            self._send_held(num, data, captured)
        inp = self._ingress_line.drain()
        for num, frame in inp:
            self._receive(self.ports[num], frame)
        self.released_at_stop += len(out) + len(inp)
        return len(out) + len(inp)

    def _queued_packets(self) -> int:
        """Packets waiting in the pipeline's egress queues (queued egress orders)."""
        pipeline = self.pipeline
        return getattr(pipeline, "pending", 0) if pipeline is not None else 0

    def _transmit_queued(self) -> None:
        """The input is idle: let every queued packet leave (their egress runs now)."""
        with self.lock:
            pipeline = self.pipeline
            if pipeline is None or not getattr(pipeline, "pending", 0):
                return
            try:
                outs = pipeline.transmit()
            except Exception:  # one bad packet must never stop the loop
                log.warning("egress of queued packets failed", exc_info=True)
                return
            self._emit(pipeline, outs)

    def _flush_pcaps(self) -> None:
        for w in self._pcap_in.values():
            w.flush()
        for w in self._pcap_out.values():
            w.flush()


# ============================================================================ CLI


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


@dataclass(frozen=True)
class SwitchOptions:
    program: str | None = None
    interfaces: tuple[tuple[int, str], ...] = ()
    device_id: int = 0
    grpc_addr: str = "0.0.0.0:9559"
    cpu_port: int | None = None
    log_file: str | None = None
    log_console: bool = False
    log_level: str = "info"
    pcap_dir: str | None = None
    stats_file: str | None = None
    stats_interval: float = STATS_INTERVAL_S
    no_p4: bool = False
    egress_order: str = "sync"
    seed: int | None = None
    queue_depth: int = 64
    timing: SwitchTiming = field(default_factory=SwitchTiming)
    engine: str = "python"
    io: str = "c"
    notes: tuple[str, ...] = field(default=())


class _PipelineOptions(TypedDict):
    """The keyword options of ``Pipeline`` that the switch's flags set: the traffic
    manager's and the (dilated) clock."""

    egress_order: str
    queue_depth: int
    egress_seed: int | None
    clock_ns: Callable[[], int]
    engine: str


def pipeline_options(opts: SwitchOptions, clock: VirtualClock) -> _PipelineOptions:
    """What every pipeline of this switch is built with, the first one and those that
    SetForwardingPipelineConfig installs later: ``clock`` (the switch's, at its TDF) times
    the timestamps, meters and table hits, and the packet engine."""
    return {"egress_order": opts.egress_order, "queue_depth": opts.queue_depth,
            "egress_seed": opts.seed, "clock_ns": pipeline_clock_ns(clock),
            "engine": opts.engine}


def _parse_interface(text: str) -> tuple[int, str]:
    num, sep, iface = text.partition("@")
    if not sep or not num or not iface:
        raise _UsageError(f"-i {text}: expected PORT@IFACE, e.g. 1@veth1")
    try:
        port = int(num, 0)
    except ValueError:
        raise _UsageError(f"-i {text}: port {num!r} is not a number") from None
    if not 0 <= port <= MAX_PORT:
        raise _UsageError(f"-i {text}: port {port} outside 0..{MAX_PORT}")
    return port, iface


def _parse_grpc_addr(text: str) -> str:
    if text.startswith("unix:"):  # a unix socket (gRPC's syntax), e.g. unix:/tmp/sw.sock
        if len(text) == len("unix:"):
            raise _UsageError(f"--grpc-server-addr {text}: expected unix:PATH")
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise _UsageError(f"--grpc-server-addr {text}: expected HOST:PORT")
    try:
        value = int(port)
    except ValueError:
        raise _UsageError(f"--grpc-server-addr {text}: port {port!r} is not a number") from None
    if not 0 <= value <= 65535:
        raise _UsageError(f"--grpc-server-addr {text}: port {value} outside 0..65535")
    return text


def _switch_parser() -> _Parser:
    """The simple_switch_grpc-style flags of ``softswitch run``, with their help."""
    p = _Parser(prog="softswitch run", add_help=True, description=__doc__.splitlines()[0])
    p.add_argument("program", nargs="?", help="P4 source (.p4) or device config file")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--grpc-server-addr", default="0.0.0.0:9559")
    p.add_argument("--cpu-port", type=int)
    p.add_argument("--log-file")
    p.add_argument("--log-console", action="store_true")
    p.add_argument("-L", "--log-level", default="info")
    p.add_argument("--pcap", nargs="?", const=".", metavar="DIR")
    p.add_argument("--stats-file", metavar="PATH",
                   help="JSON per-port counters, rewritten periodically and on SIGUSR1 "
                   "(default: <log-file>.stats.json beside --log-file)")
    p.add_argument("--stats-interval", type=float, default=STATS_INTERVAL_S, metavar="S")
    p.add_argument("--no-p4", action="store_true")
    p.add_argument("--egress-order", default="sync", metavar="sync|fifo|random",
                   help="sync: egress right after ingress (fast, default); fifo/random: "
                   "BMv2-like per-port egress queues, random interleaves the ports' egress "
                   "(seeded by --seed)")
    p.add_argument("--seed", metavar="N", help="seed of --egress-order random")
    p.add_argument("--queue-depth", default="64", metavar="PKTS",
                   help="egress queue capacity per port in the queued modes (BMv2: 64)")
    p.add_argument("--tdf", default="1", metavar="N",
                   help="time-dilation factor (>= 1): timestamps, meters, pcap records and "
                   "link delays run in emulated time, N times slower than real time")
    p.add_argument("--port-delay", action="append", default=[], metavar="PORT=DELAY",
                   help="hold frames leaving PORT for DELAY (emulated; units ns/us/ms/s), "
                   "the propagation delay of its link; repeatable")
    p.add_argument("--port-ingress-delay", action="append", default=[], metavar="PORT=DELAY",
                   help="hold frames arriving on PORT for DELAY, for a link whose far end "
                   "cannot delay (a host, BMv2); repeatable")
    p.add_argument("--engine", default=os.environ.get("SOFTSWITCH_ENGINE") or "python",
                   metavar="python|c",
                   help="packet engine: the Python reference or the compiled C data path "
                   "(a program or mode it cannot take runs on Python, logged); default "
                   "$SOFTSWITCH_ENGINE or python")
    p.add_argument("--io", default="c", metavar="c|python",
                   help="packet loop: c (default) runs receive, pipeline, delay lines and "
                   "send on a C thread without the GIL when the engine is c and the "
                   "configuration allows (else Python, logged with the reason); python "
                   "always runs the Python loop")
    p.add_argument("--thrift-port", type=int)
    p.add_argument("--device-config", dest="program_alt")
    return p


def _parse_interfaces(args: argparse.Namespace) -> tuple[tuple[int, str], ...]:
    """The ``-i PORT@IFACE`` pairs; a port or an interface given twice is an error."""
    interfaces = tuple(_parse_interface(t) for t in args.interface)
    nums = [n for n, _ in interfaces]
    dup = sorted({n for n in nums if nums.count(n) > 1})
    if dup:
        raise _UsageError(f"-i: port {dup[0]} given twice")
    names = [i for _, i in interfaces]
    dup_names = sorted({i for i in names if names.count(i) > 1})
    if dup_names:
        raise _UsageError(f"-i: interface {dup_names[0]!r} given twice")
    return interfaces


def _check_device(args: argparse.Namespace, nums: Sequence[int]) -> None:
    """The device id, and the CPU port: in range and not one of the ``-i`` ports."""
    if args.device_id < 0:
        raise _UsageError(f"--device-id {args.device_id}: must be >= 0")
    if args.cpu_port is not None:
        if not 0 <= args.cpu_port <= MAX_PORT:
            raise _UsageError(f"--cpu-port {args.cpu_port}: outside 0..{MAX_PORT}")
        if args.cpu_port in nums:
            raise _UsageError(f"--cpu-port {args.cpu_port}: already used by an -i interface")


def _parse_log_level(args: argparse.Namespace) -> str:
    """``-L``, lower-cased, one of :data:`LOG_LEVELS`."""
    level: str = args.log_level.lower()
    if level not in LOG_LEVELS:
        raise _UsageError(f"-L/--log-level {args.log_level}: choose from {', '.join(LOG_LEVELS)}")
    return level


def _parse_program(args: argparse.Namespace) -> str | None:
    """The program (positional or ``--device-config``): an existing file, or None with
    ``--no-p4``; exactly one of the two."""
    program: str | None = args.program or args.program_alt
    if program is None and not args.no_p4:
        raise _UsageError("a P4 program (or device config) or --no-p4 is required")
    if program is not None and args.no_p4:
        raise _UsageError("--no-p4 cannot be combined with a program")
    if program is not None and not Path(program).is_file():
        raise _UsageError(f"program {program!r}: no such file")
    return program


def _parse_queueing(args: argparse.Namespace) -> tuple[int | None, int]:
    """The traffic manager's flags: the egress order, its seed (random order only) and the
    queue depth; returns (seed, depth)."""
    if args.egress_order not in EGRESS_ORDERS:
        raise _UsageError(
            f"--egress-order {args.egress_order}: choose from {', '.join(EGRESS_ORDERS)}"
        )
    seed = None
    if args.seed is not None:
        try:
            seed = int(args.seed, 0)
        except ValueError:
            raise _UsageError(f"--seed {args.seed}: not an integer") from None
        if args.egress_order != "random":
            raise _UsageError(f"--seed {args.seed}: only meaningful with --egress-order random")
    try:
        depth = int(args.queue_depth, 0)
    except ValueError:
        raise _UsageError(f"--queue-depth {args.queue_depth}: not an integer") from None
    if not 1 <= depth <= MAX_QUEUE_DEPTH:
        raise _UsageError(f"--queue-depth {depth}: must be in 1..{MAX_QUEUE_DEPTH}")
    return seed, depth


def _check_loops(args: argparse.Namespace) -> None:
    """The packet engine and the packet loop: one of the known ones each."""
    if args.engine not in ("python", "c"):
        raise _UsageError(f"--engine {args.engine}: choose from python, c")
    if args.io not in IO_LOOPS:
        raise _UsageError(f"--io {args.io}: choose from {', '.join(IO_LOOPS)}")


def _ignored_notes(args: argparse.Namespace) -> tuple[str, ...]:
    """Notes on flags accepted for BMv2's sake but ignored here."""
    if args.thrift_port is None:
        return ()
    return (
        f"--thrift-port {args.thrift_port} ignored: "
        "the built-in switch has no Thrift server",
    )


def parse_args(argv: Sequence[str]) -> SwitchOptions:
    """Options from simple_switch_grpc-style flags; raises _UsageError naming the bad one."""
    args = _switch_parser().parse_args(list(argv))
    interfaces = _parse_interfaces(args)
    nums = [n for n, _ in interfaces]
    _check_device(args, nums)
    level = _parse_log_level(args)
    program = _parse_program(args)
    if not args.stats_interval > 0:
        raise _UsageError(f"--stats-interval {args.stats_interval}: must be > 0")
    seed, depth = _parse_queueing(args)
    timing = _parse_timing(args, set(nums))
    _check_loops(args)
    notes = _ignored_notes(args)
    return SwitchOptions(
        program=program,
        interfaces=interfaces,
        device_id=args.device_id,
        grpc_addr=_parse_grpc_addr(args.grpc_server_addr),
        cpu_port=args.cpu_port,
        log_file=args.log_file,
        log_console=args.log_console,
        log_level=level,
        pcap_dir=args.pcap,
        stats_file=args.stats_file or default_stats_path(args.log_file),
        stats_interval=args.stats_interval,
        no_p4=args.no_p4,
        egress_order=args.egress_order,
        seed=seed,
        queue_depth=depth,
        timing=timing,
        engine=args.engine,
        io=args.io,
        notes=notes,
    )


def _parse_timing(args: argparse.Namespace, ports: set[int]) -> SwitchTiming:
    """``--tdf`` and the per-port delays (each naming a port given with ``-i``)."""
    try:
        tdf = parse_tdf(args.tdf, "--tdf")
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    found: dict[str, tuple[tuple[int, float], ...]] = {}
    for option, texts in (("--port-delay", args.port_delay),
                          ("--port-ingress-delay", args.port_ingress_delay)):
        pairs: dict[int, float] = {}
        for text in texts:
            try:
                port, seconds = parse_port_delay(text, option)
            except ValueError as exc:
                raise _UsageError(str(exc)) from None
            if port in pairs:
                raise _UsageError(f"{option} {text}: port {port} given twice")
            if port not in ports:
                raise _UsageError(f"{option} {text}: port {port} is not an -i port")
            pairs[port] = seconds
        found[option] = tuple(sorted((p, s) for p, s in pairs.items() if s > 0))
    return SwitchTiming(tdf, found["--port-delay"], found["--port-ingress-delay"])


def _configure_logging(opts: SwitchOptions) -> list[logging.Handler]:
    root = logging.getLogger("softswitch")
    root.setLevel(LOG_LEVELS[opts.log_level])
    fmt = logging.Formatter(
        "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%H:%M:%S"
    )
    handlers: list[logging.Handler] = []
    if opts.log_file:
        handlers.append(logging.FileHandler(opts.log_file))
    if opts.log_console:
        handlers.append(logging.StreamHandler(sys.stderr))
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    if not handlers:
        root.addHandler(logging.NullHandler())
    root.propagate = False
    return handlers


def load_program(path: str, trace: bool = False, **tm: Any) -> tuple[Any, Any, bytes]:
    """(pipeline, P4Info, device config bytes) for a .p4 file or a device config file;
    ``trace`` compiles the instrumented pipeline (per-packet traces at debug level);
    ``tm``: the traffic-manager options of :class:`~softswitch.pipeline.Pipeline`."""
    if path.endswith(".p4"):
        program, data = compile_p4_file(path)
    else:
        data = Path(path).read_bytes()
        program = load_device_config(data)
    return Pipeline.from_program(program, trace=trace, **tm), build_p4info(program), data


def _fail(message: str, code: int) -> int:
    print(f"softswitch run: error: {message}", file=sys.stderr, flush=True)
    return code


class _StartError(Exception):
    """A step of the switch's start failed: ``main`` prints the message and exits ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _report_notes(notes: Sequence[str]) -> None:
    """Each note on the flags, in the log and on stderr (the log may be a file nobody reads)."""
    for note in notes:
        log.warning("%s", note)
        print(f"softswitch run: note: {note}", file=sys.stderr, flush=True)


def _pipeline_loader(opts: SwitchOptions, tm: _PipelineOptions, trace: bool,
                     preloaded: Preloaded | None) -> Callable[[bytes], tuple[Any, Any]]:
    """What turns a pushed device config into (pipeline, P4Info); with ``preloaded``, the
    first load that fits takes the fork server's pipeline."""
    loader: Callable[[bytes], tuple[Any, Any]] = functools.partial(
        default_loader, trace=trace, **tm)
    if preloaded is not None:
        loader = preloading_loader(preloaded, PipelineKey.of(tm, opts.timing.tdf, trace),
                                   tm["clock_ns"], opts.seed, loader)
    return loader


def _load_initial(opts: SwitchOptions, loader: Callable[[bytes], tuple[Any, Any]],
                  tm: _PipelineOptions, trace: bool, preloaded: Preloaded | None
                  ) -> PipelineState | None:
    """The pipeline of the program on the command line (None without one); a device
    config goes through ``loader`` when the fork server preloaded one."""
    if opts.program is None:
        return None
    try:
        if preloaded is not None and not opts.program.endswith(".p4"):
            config = Path(opts.program).read_bytes()  # a device config: as pushed
            pipeline, p4info = loader(config)
        else:
            pipeline, p4info, config = load_program(opts.program, trace=trace, **tm)
    except Exception as exc:  # P4Error prints FILE:LINE:COL: error: ...
        raise _StartError(f"{opts.program}: {exc}", 1) from None
    return PipelineState(pipeline, p4info, config, None)


def _open_ports(interfaces: Sequence[tuple[int, str]]) -> list[Port]:
    """One AF_PACKET port per ``-i``; if one cannot open, those opened are closed again."""
    ports: list[Port] = []
    try:
        for num, iface in interfaces:
            ports.append(AfPacketPort(num, iface))
    except PortError as exc:
        for p in ports:
            p.close()
        raise _StartError(f"-i: {exc}", 2) from None
    return ports


def _start_grpc(service: P4RuntimeService, switch: SwitchDataPlane, addr: str
                ) -> tuple[Any, int]:
    """The P4Runtime server on ``addr``: (server, bound port); the switch is closed when
    the address cannot be bound."""
    try:
        return start_server(service, addr)
    except OSError as exc:
        switch.close()
        raise _StartError(f"--grpc-server-addr {addr}: {exc}", 1) from None


def _handle_signals(switch: SwitchDataPlane) -> None:
    """SIGTERM and SIGINT stop the switch; SIGUSR1 asks for its stats file."""

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        switch.stop()

    def on_usr1(_signum: int, _frame: Any) -> None:
        switch.request_stats("SIGUSR1")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_usr1)


def _announce_ready(opts: SwitchOptions, bound: int) -> None:
    """Logs the ready line and the configuration worth knowing, then prints the ready line
    on stdout, which the network waits for."""
    timing = opts.timing
    host = opts.grpc_addr.rpartition(":")[0]
    where = opts.grpc_addr if opts.grpc_addr.startswith("unix:") else f"{host}:{bound}"
    port_list = ",".join(f"{n}@{i}" for n, i in opts.interfaces) or "none"
    ready = (
        f"softswitch ready: device_id={opts.device_id} grpc={where} ports={port_list} "
        f"cpu_port={opts.cpu_port if opts.cpu_port is not None else 'none'}"
    )
    log.info("%s", ready)
    if opts.egress_order != "sync":
        log.info("egress order %s (seed %s), egress queues of %d packets",
                 opts.egress_order, opts.seed, opts.queue_depth)
    if timing != SwitchTiming():
        log.info("time dilation factor %g; link delays (emulated) leaving ports: %s; "
                 "arriving on ports: %s", timing.tdf, describe_delays(timing.port_delays),
                 describe_delays(timing.port_ingress_delays))
    if opts.stats_file:
        log.info("port counters in %s (refresh: kill -USR1 %d)", opts.stats_file, os.getpid())
    print(ready, flush=True)


def _log_final_counters(switch: SwitchDataPlane, timing: SwitchTiming) -> None:
    """The ports' counters, the switch's stats and the delay lines' (if any), at exit."""
    for num, c in sorted(switch.port_counters().items()):
        log.info("port %d counters: %s", num, c.as_dict())
    log.info("switch stats: %s", switch.stats)
    if timing.port_delays or timing.port_ingress_delays:
        log.info("delay lines: %s", switch.delay_line_stats())


def main(argv: Sequence[str] | None = None, preloaded: Preloaded | None = None) -> int:
    """Run the switch until SIGTERM/SIGINT; returns the exit code (0 clean, 1 runtime
    failure, 2 bad flags). ``preloaded``: a pipeline the fork server loaded before forking
    this process, taken by the first load that fits it (:mod:`softswitch.preload`)."""
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except _UsageError as exc:
        return _fail(str(exc), 2)
    handlers = _configure_logging(opts)
    _report_notes(opts.notes)

    trace = LOG_LEVELS[opts.log_level] <= logging.DEBUG
    timing = opts.timing
    clock = VirtualClock(timing.tdf)
    tm = pipeline_options(opts, clock)
    loader = _pipeline_loader(opts, tm, trace, preloaded)
    try:
        initial = _load_initial(opts, loader, tm, trace, preloaded)
        ports = _open_ports(opts.interfaces)
        switch = SwitchDataPlane(
            ports,
            initial.pipeline if initial is not None else None,
            cpu_port=opts.cpu_port,
            pcap_dir=opts.pcap_dir,
            stats_file=opts.stats_file,
            stats_interval=opts.stats_interval,
            device_id=opts.device_id,
            clock=clock,
            port_delays=timing.egress,
            port_ingress_delays=timing.ingress,
            io=opts.io,
        )
        service = P4RuntimeService(switch, opts.device_id, loader=loader, initial=initial)
        switch.on_cpu_frame = service.on_cpu_frame
        switch.on_digests = service.on_digests
        server, bound = _start_grpc(service, switch, opts.grpc_addr)
    except _StartError as exc:
        return _fail(str(exc), exc.code)

    _handle_signals(switch)
    _announce_ready(opts, bound)
    try:
        switch.run()
    finally:
        server.stop(grace=0.5).wait(2.0)
        _log_final_counters(switch, timing)
        switch.close()
        for h in handlers:
            h.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
