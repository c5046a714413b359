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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypedDict

from softswitch.pcap import PcapWriter, pcap_paths
from softswitch.ports import AfPacketPort, Port, PortCounters, PortError
from softswitch.stats import default_stats_path

log = logging.getLogger("softswitch.switch")

RX_BATCH = 64
MIN_FRAME = 14  # an Ethernet header
IDLE_FLUSH_S = 1.0
STATS_INTERVAL_S = 1.0  # how often the stats file is rewritten
MAX_PORT = 510  # 511 is v1model's drop port
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
    ) -> None:
        self.name = name
        self.device_id = device_id
        self.stats_file = Path(stats_file) if stats_file is not None else None
        self.stats_interval = stats_interval
        self._stats_requested = threading.Event()
        self._stats_reason = "request"
        self._started = time.time()
        self.ports: dict[int, Port] = {p.number: p for p in ports}
        self.lock = threading.RLock()
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
            self.pipeline = pipeline

    def port_counters(self) -> dict[int, PortCounters]:
        return {n: p.counters for n, p in self.ports.items()}

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
        from softswitch.stats import build_document

        ports = {n: (p.name, p.counters.as_dict()) for n, p in self.ports.items()}
        return build_document(
            ports,
            dataclasses.asdict(self.stats),
            name=self.name,
            device_id=self.device_id,
            now=time.time(),
            started=self._started,
            reason=reason,
        )

    def write_stats(self, reason: str = "request") -> None:
        """Rewrite the stats file (no-op without one); a failure is logged, not raised."""
        if self.stats_file is None:
            return
        from softswitch.stats import write_atomic

        try:
            write_atomic(self.stats_file, self.stats_document(reason))
        except OSError as exc:
            log.warning("cannot write stats file %s: %s", self.stats_file, exc)

    def close(self) -> None:
        """Close ports and flush/close pcap files."""
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
            outs = pipeline.process(port, frame)
            self._emit(pipeline, outs)
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
            c = port.counters
            c.tx_packets += 1  # counted first, so a reader that saw the frame sees the count
            c.tx_bytes += len(data)
            if not port.send(data):
                c.tx_packets -= 1
                c.tx_bytes -= len(data)
                continue
            w = self._pcap_out.get(eport)
            if w is not None:
                w.write(data)
        if self.on_digests is not None:
            digests = pipeline.drain_digests()
            if digests:
                self.on_digests(digests)

    def _receive(self, port: Port, frame: bytes) -> None:
        c = port.counters
        c.rx_packets += 1
        c.rx_bytes += len(frame)
        w = self._pcap_in.get(port.number)
        if w is not None:
            w.write(frame)
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

    def run(self) -> None:
        """The packet loop; returns after :meth:`stop`."""
        self._debug = self._debug or log.isEnabledFor(logging.DEBUG)
        sel = selectors.DefaultSelector()
        for p in self.ports.values():
            sel.register(p.fileno(), selectors.EVENT_READ, p)
        sel.register(self._wake_r.fileno(), selectors.EVENT_READ, None)
        receive = self._receive
        stats_due = time.monotonic() + self.stats_interval if self.stats_file else float("inf")
        self.write_stats("start")
        try:
            while not self._stop.is_set():
                if self.stats_file is not None:
                    now = time.monotonic()
                    if self._stats_requested.is_set():
                        self._stats_requested.clear()
                        self.write_stats(self._stats_reason)
                    elif now >= stats_due:
                        self.write_stats("periodic")
                        stats_due = now + self.stats_interval
                pending = self._queued_packets()
                events = sel.select(0 if pending else min(IDLE_FLUSH_S, self.stats_interval))
                if not events:
                    if pending:
                        self._transmit_queued()
                        continue
                    self._flush_pcaps()
                    continue
                for key, _mask in events:
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
                        log.warning("port %d (%s): receive failed: %s", port.number, port.name, exc)
                        continue
                    for frame in frames:
                        receive(port, frame)
        finally:
            sel.close()
            self._flush_pcaps()
            self.write_stats("stop")

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
    engine: str = "python"
    notes: tuple[str, ...] = field(default=())


class _TmOptions(TypedDict):
    """The traffic-manager keyword options of ``Pipeline`` (see SwitchOptions)."""

    egress_order: str
    queue_depth: int
    egress_seed: int | None
    engine: str


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


def parse_args(argv: Sequence[str]) -> SwitchOptions:
    """Options from simple_switch_grpc-style flags; raises _UsageError naming the bad one."""
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
    p.add_argument("--engine", default=os.environ.get("SOFTSWITCH_ENGINE") or "python",
                   metavar="python|c",
                   help="packet engine: the Python reference or the compiled C data path "
                   "(a program or mode it cannot take runs on Python, logged); default "
                   "$SOFTSWITCH_ENGINE or python")
    p.add_argument("--thrift-port", type=int)
    p.add_argument("--device-config", dest="program_alt")
    args = p.parse_args(list(argv))
    interfaces = tuple(_parse_interface(t) for t in args.interface)
    nums = [n for n, _ in interfaces]
    dup = sorted({n for n in nums if nums.count(n) > 1})
    if dup:
        raise _UsageError(f"-i: port {dup[0]} given twice")
    names = [i for _, i in interfaces]
    dup_names = sorted({i for i in names if names.count(i) > 1})
    if dup_names:
        raise _UsageError(f"-i: interface {dup_names[0]!r} given twice")
    if args.device_id < 0:
        raise _UsageError(f"--device-id {args.device_id}: must be >= 0")
    if args.cpu_port is not None:
        if not 0 <= args.cpu_port <= MAX_PORT:
            raise _UsageError(f"--cpu-port {args.cpu_port}: outside 0..{MAX_PORT}")
        if args.cpu_port in nums:
            raise _UsageError(f"--cpu-port {args.cpu_port}: already used by an -i interface")
    level = args.log_level.lower()
    if level not in LOG_LEVELS:
        raise _UsageError(f"-L/--log-level {args.log_level}: choose from {', '.join(LOG_LEVELS)}")
    program = args.program or args.program_alt
    if program is None and not args.no_p4:
        raise _UsageError("a P4 program (or device config) or --no-p4 is required")
    if program is not None and args.no_p4:
        raise _UsageError("--no-p4 cannot be combined with a program")
    if program is not None and not Path(program).is_file():
        raise _UsageError(f"program {program!r}: no such file")
    if not args.stats_interval > 0:
        raise _UsageError(f"--stats-interval {args.stats_interval}: must be > 0")
    from softswitch.traffic_manager import EGRESS_ORDERS, MAX_QUEUE_DEPTH

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
    if args.engine not in ("python", "c"):
        raise _UsageError(f"--engine {args.engine}: choose from python, c")
    notes: tuple[str, ...] = ()
    if args.thrift_port is not None:
        notes = (
            f"--thrift-port {args.thrift_port} ignored: "
            "the built-in switch has no Thrift server",
        )
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
        engine=args.engine,
        notes=notes,
    )


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
    from softswitch.device_config import load_device_config
    from softswitch.p4info import build_p4info
    from softswitch.pipeline import Pipeline

    if path.endswith(".p4"):
        from softswitch.program_cache import compile_p4_file

        program, data = compile_p4_file(path)
    else:
        data = Path(path).read_bytes()
        program = load_device_config(data)
    return Pipeline.from_program(program, trace=trace, **tm), build_p4info(program), data


def _fail(message: str, code: int) -> int:
    print(f"softswitch run: error: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the switch until SIGTERM/SIGINT; returns the exit code (0 clean, 1 runtime
    failure, 2 bad flags)."""
    from softswitch.p4runtime.entities import PipelineState
    from softswitch.p4runtime.server import P4RuntimeService, default_loader, start_server

    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except _UsageError as exc:
        return _fail(str(exc), 2)
    handlers = _configure_logging(opts)
    for note in opts.notes:
        log.warning("%s", note)
        print(f"softswitch run: note: {note}", file=sys.stderr, flush=True)

    trace = LOG_LEVELS[opts.log_level] <= logging.DEBUG
    tm: _TmOptions = {"egress_order": opts.egress_order, "queue_depth": opts.queue_depth,
                      "egress_seed": opts.seed, "engine": opts.engine}
    initial = None
    pipeline = None
    if opts.program is not None:
        try:
            pipeline, p4info, config = load_program(opts.program, trace=trace, **tm)
        except Exception as exc:  # P4Error prints FILE:LINE:COL: error: ...
            return _fail(f"{opts.program}: {exc}", 1)
        initial = PipelineState(pipeline, p4info, config, None)

    ports: list[Port] = []
    try:
        for num, iface in opts.interfaces:
            ports.append(AfPacketPort(num, iface))
    except PortError as exc:
        for p in ports:
            p.close()
        return _fail(f"-i: {exc}", 2)

    switch = SwitchDataPlane(
        ports,
        pipeline,
        cpu_port=opts.cpu_port,
        pcap_dir=opts.pcap_dir,
        stats_file=opts.stats_file,
        stats_interval=opts.stats_interval,
        device_id=opts.device_id,
    )
    loader = functools.partial(default_loader, trace=trace, **tm)
    service = P4RuntimeService(switch, opts.device_id, loader=loader, initial=initial)
    switch.on_cpu_frame = service.on_cpu_frame
    switch.on_digests = service.on_digests
    try:
        server, bound = start_server(service, opts.grpc_addr)
    except OSError as exc:
        switch.close()
        return _fail(f"--grpc-server-addr {opts.grpc_addr}: {exc}", 1)

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        switch.stop()

    def on_usr1(_signum: int, _frame: Any) -> None:
        switch.request_stats("SIGUSR1")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_usr1)
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
    if opts.stats_file:
        log.info("port counters in %s (refresh: kill -USR1 %d)", opts.stats_file, os.getpid())
    print(ready, flush=True)
    try:
        switch.run()
    finally:
        server.stop(grace=0.5).wait(2.0)
        for num, c in sorted(switch.port_counters().items()):
            log.info("port %d counters: %s", num, c.as_dict())
        log.info("switch stats: %s", switch.stats)
        switch.close()
        for h in handlers:
            h.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
