"""A delay node: a transparent two-port wire that holds each frame for its link's delay.

``python -m softswitch wire -i 1@dl1-eth1 -i 2@dl1-eth2 --delay 2us --tdf 250``

Where the kernel has no ``sch_netem`` and a P4 target cannot hold packets itself (BMv2), the
testbed splits each delayed link A--B into A--W--B and runs one of these in W (see
``topo.delaynodes``). A frame received on one port leaves the other after ``delay * TDF``
real seconds; each direction is one FIFO (the delay is constant and the clock monotonic), and
the directions never wait for each other. There is no pipeline: frames go out byte for byte
as they came in, VLAN tags included. The I/O is the built-in switch's (AF_PACKET ports,
batched receive) and so is the delay line (:class:`softswitch.timing.DelayLine`).

It prints one readiness line once both ports are open::

    softswitch wire ready: name=dl1 ports=1@dl1-eth1,2@dl1-eth2 delay=2 us tdf=250

and stops cleanly (exit code 0) on SIGTERM/SIGINT, letting what it holds go first (as the
switch does). Bad flags: one line on stderr naming the option and the value, exit code 2.
"""

from __future__ import annotations

import logging
import selectors
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from softswitch.ports import AfPacketPort, Port, PortError
from softswitch.switch import (
    LOG_LEVELS,
    RX_BATCH,
    SELECT_FD_LIMIT,
    SwitchOptions,
    _configure_logging,
    _parse_interface,
    _Parser,
    _UsageError,
)
from softswitch.timing import DEFAULT_DELAY_CAPACITY, DelayLine
from vtime import REAL_TIME, VirtualClock, format_delay, parse_delay, parse_tdf

log = logging.getLogger("softswitch.wire")

#: Longest the loop sleeps with nothing held (it wakes at once on a frame or a stop).
IDLE_S = 1.0
READY_PREFIX = "softswitch wire ready:"


class Wire:
    """Two ports; what one receives the other transmits, ``delay`` (emulated) later.

    The delay line is keyed by the port a frame leaves from, so each direction is its own
    FIFO. Not thread-safe except :meth:`stop`: one loop drives it."""

    def __init__(
        self,
        ports: Sequence[Port],
        delay_s: float,
        clock: VirtualClock = REAL_TIME,
        capacity: int = DEFAULT_DELAY_CAPACITY,
        name: str = "wire",
    ) -> None:
        if len(ports) != 2 or ports[0].number == ports[1].number:
            raise ValueError("a wire has exactly two ports with different numbers")
        a, b = ports
        self.name = name
        self.ports: dict[int, Port] = {a.number: a, b.number: b}
        self._peer: dict[int, Port] = {a.number: b, b.number: a}
        self.clock = clock
        self.delay_s = float(delay_s)
        self._line: DelayLine[bytes] = DelayLine(
            {a.number: self.delay_s, b.number: self.delay_s}, clock, capacity)
        self._delayed = bool(self._line)
        self.released_at_stop = 0
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)

    # ---------------------------------------------------------------- frames
    def receive(self, port: Port, frames: list[bytes], now_ns: int | None = None) -> None:
        """Frames that arrived on ``port`` start their way to the other port."""
        c = port.counters
        c.rx_packets += len(frames)
        c.rx_bytes += sum(map(len, frames))
        out = self._peer[port.number]
        if not self._delayed:
            for frame in frames:
                self._send(out, frame)
            return
        line = self._line
        num = out.number
        now = self.clock.real_ns() if now_ns is None else now_ns
        for frame in frames:
            if not line.hold(num, frame, now):
                out.counters.tx_drops += 1  # the line is full: the wire drops it

    @staticmethod
    def _send(port: Port, frame: bytes) -> None:
        if port.send(frame):  # a refused frame is counted as a drop by the port
            c = port.counters
            c.tx_packets += 1
            c.tx_bytes += len(frame)

    def release_due(self, now_ns: int | None = None) -> int:
        """Transmit every frame whose delay has passed; how many."""
        due = self._line.pop_due(now_ns)
        ports = self.ports
        for num, frame in due:
            self._send(ports[num], frame)
        return len(due)

    def next_release(self) -> int | None:
        """Real ns (of ``clock.real_ns``) when the next held frame is due; None if none."""
        return self._line.next_deadline()

    def flush(self) -> int:
        """Let every held frame go now, in order (the wire stops); how many."""
        out = self._line.drain()
        for num, frame in out:
            self._send(self.ports[num], frame)
        self.released_at_stop += len(out)
        self._delayed = False
        if out:
            log.info("stopping: let %d frame(s) off the delay line early", len(out))
        return len(out)

    def stats(self) -> dict[str, Any]:
        """Port counters and the delay line's occupancy (for the log at exit)."""
        return {
            "ports": {n: p.counters.as_dict() for n, p in sorted(self.ports.items())},
            "held": self._line.held,
            "max_held": self._line.max_held,
            "released_at_stop": self.released_at_stop,
            "delay_line": self._line.snapshot(),
        }

    # ---------------------------------------------------------------- the loop
    def stop(self) -> None:
        """Ask the loop to return (safe from signal handlers and other threads)."""
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _selector(self) -> selectors.BaseSelector:
        """select(2): its timeout has microsecond resolution (epoll's has milliseconds)."""
        fds = [p.fileno() for p in self.ports.values()] + [self._wake_r.fileno()]
        if max(fds) < SELECT_FD_LIMIT:
            return selectors.SelectSelector()
        return selectors.DefaultSelector()

    def run(self) -> None:
        """Forward until :meth:`stop`; held frames are let go on the way out."""
        sel = self._selector()
        for p in self.ports.values():
            sel.register(p.fileno(), selectors.EVENT_READ, p)
        sel.register(self._wake_r.fileno(), selectors.EVENT_READ, None)
        real_ns = self.clock.real_ns
        line = self._line
        try:
            while not self._stop.is_set():
                timeout = IDLE_S
                if line.held:
                    self.release_due()
                    due = line.next_deadline()
                    if due is not None:
                        timeout = min(timeout, max(0.0, (due - real_ns()) / 1e9))
                for key, _mask in sel.select(timeout):
                    port = key.data
                    if port is None:
                        try:
                            self._wake_r.recv(64)
                        except OSError:
                            pass
                        continue
                    try:
                        frames = port.recv_batch(RX_BATCH)
                    except OSError as exc:
                        log.warning("port %d (%s): receive failed: %s", port.number, port.name,
                                    exc)
                        continue
                    if frames:
                        self.receive(port, frames)
        finally:
            sel.close()
            self.flush()

    def close(self) -> None:
        """Let held frames go and close the ports."""
        self.flush()
        for p in self.ports.values():
            p.close()
        self._wake_r.close()
        self._wake_w.close()


# ============================================================================ CLI


@dataclass(frozen=True)
class WireOptions:
    """``softswitch wire``'s options."""

    interfaces: tuple[tuple[int, str], ...]
    delay_s: float
    tdf: float = 1.0
    name: str = "wire"
    capacity: int = DEFAULT_DELAY_CAPACITY
    log_file: str | None = None
    log_console: bool = False
    log_level: str = "info"


def wire_argv(interfaces: Sequence[tuple[int, str]], delay_s: float, tdf: float = 1.0,
              name: str | None = None, log_file: str | None = None,
              log_level: str = "info") -> list[str]:
    """The ``softswitch wire`` options that :func:`parse_args` reads back as the same wire
    (after ``python -m softswitch wire``)."""
    argv: list[str] = []
    for port, intf in interfaces:
        argv += ["-i", f"{port}@{intf}"]
    argv += ["--delay", f"{float(delay_s)!r}s"]
    if tdf != 1:
        argv += ["--tdf", repr(float(tdf))]
    if name is not None:
        argv += ["--name", name]
    if log_file is not None:
        argv += ["--log-file", log_file]
    if log_level != "info":
        argv += ["-L", log_level]
    return argv


def parse_args(argv: Sequence[str]) -> WireOptions:
    """Options of ``softswitch wire``; raises _UsageError naming the bad one."""
    p = _Parser(prog="softswitch wire", description=__doc__.splitlines()[0])
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                   help="one of the wire's two ends (give it twice)")
    p.add_argument("--delay", required=True, metavar="DELAY",
                   help="one-way delay of the link (emulated; ns/us/ms/s), both directions")
    p.add_argument("--tdf", default="1", metavar="N",
                   help="time-dilation factor (>= 1): frames are held DELAY * N real seconds")
    p.add_argument("--name", default="wire", help="the node's name, for the log")
    p.add_argument("--capacity", default=str(DEFAULT_DELAY_CAPACITY), metavar="FRAMES",
                   help="frames held per direction before the wire drops (memory bound)")
    p.add_argument("--log-file")
    p.add_argument("--log-console", action="store_true")
    p.add_argument("-L", "--log-level", default="info")
    args = p.parse_args(list(argv))
    interfaces = tuple(_parse_interface(t) for t in args.interface)
    if len(interfaces) != 2:
        got = " ".join(f"-i {t}" for t in args.interface) or "none"
        raise _UsageError(f"-i: a wire has exactly two ports, got {len(interfaces)} ({got})")
    (n1, i1), (n2, i2) = interfaces
    if n1 == n2:
        raise _UsageError(f"-i: port {n1} given twice")
    if i1 == i2:
        raise _UsageError(f"-i: interface {i1!r} given twice")
    try:
        delay = parse_delay(args.delay, f"--delay {args.delay}")
        tdf = parse_tdf(args.tdf, "--tdf")
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    try:
        capacity = int(args.capacity, 0)
    except ValueError:
        raise _UsageError(f"--capacity {args.capacity}: not an integer") from None
    if capacity < 1:
        raise _UsageError(f"--capacity {capacity}: must be >= 1")
    level = args.log_level.lower()
    if level not in LOG_LEVELS:
        raise _UsageError(f"-L/--log-level {args.log_level}: choose from {', '.join(LOG_LEVELS)}")
    if not args.name.strip():
        raise _UsageError("--name: must not be empty")
    return WireOptions(interfaces, delay, tdf, args.name, capacity, args.log_file,
                       args.log_console, level)


def _fail(message: str, code: int) -> int:
    print(f"softswitch wire: error: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the wire until SIGTERM/SIGINT; the exit code (0 clean, 1 runtime failure, 2 bad
    flags or ports)."""
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except _UsageError as exc:
        return _fail(str(exc), 2)
    handlers = _configure_logging(SwitchOptions(log_file=opts.log_file,
                                                log_console=opts.log_console,
                                                log_level=opts.log_level))
    ports: list[Port] = []
    try:
        for num, iface in opts.interfaces:
            ports.append(AfPacketPort(num, iface))
    except PortError as exc:
        for p in ports:
            p.close()
        return _fail(f"-i: {exc}", 2)
    clock = VirtualClock(opts.tdf)
    wire = Wire(ports, opts.delay_s, clock, opts.capacity, opts.name)

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        wire.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    port_list = ",".join(f"{n}@{i}" for n, i in opts.interfaces)
    ready = (f"{READY_PREFIX} name={opts.name} ports={port_list} "
             f"delay={format_delay(opts.delay_s)} tdf={opts.tdf:g}")
    log.info("%s (frames held %s real)", ready, format_delay(clock.real_delay(opts.delay_s)))
    print(ready, flush=True)
    try:
        wire.run()
    except Exception as exc:  # a bug or a port gone bad: one line, status 1
        log.exception("the wire failed")
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    finally:
        log.info("wire stats: %s", wire.stats())
        wire.close()
        for h in handlers:
            h.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
