"""Mininet node classes: P4 switch processes and worker hosts.

``Mininet(topo, switch=SoftSwitch, host=TestbedHost, link=ShapedLink, controller=None)`` and
``switch=BMv2Switch`` are interchangeable: both run one P4Runtime switch process per Mininet
switch in the root namespace, attached to the switch's veth ends with ``-i PORT@INTF``.

Life cycle (Mininet's own hooks): ``start()`` launches the process (never waits);
``batchStartup()`` (called by ``Mininet.start`` after every ``start``) waits until each gRPC
port accepts a connection while its process is alive, against one deadline, and raises
:class:`~topo.errors.SwitchStartError` with the reason and the last lines of the switch log
when a process exits or the deadline passes. ``stop()``/``batchShutdown()`` SIGTERM the
process group of the recorded pid, wait, and SIGKILL what is left. That life cycle is
:class:`ProcessNode`'s, which the delay nodes (``topo.delaynodes.DelayNode``) share.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mininet.node import Host, Switch

from softswitch.timing import SwitchTiming
from topo import p4c_cache
from topo.errors import ProgramBuildError, SwitchStartError, TargetError
from topo.forkserver import ForkServer, ForkServerError, ProcessHandle
from topo.rundir import RunDir
from topo.topologies import GRPC_BASE_PORT, GRPC_HOST

log = logging.getLogger(__name__)

DEFAULT_START_TIMEOUT_S = 60.0
DEFAULT_STOP_TIMEOUT_S = 5.0
POLL_INTERVAL_S = 0.05
LOG_TAIL_LINES = 12
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")
#: The built-in target's egress orders (softswitch.traffic_manager.EGRESS_ORDERS; kept here
#: so that building a topology does not import the switch).
EGRESS_ORDERS = ("sync", "fifo", "random")
#: The built-in target's packet engines and packet loops (softswitch.cengine.ENGINES,
#: softswitch.switch.IO_LOOPS: its --engine and --io).
ENGINES = ("python", "c")
IO_LOOPS = ("c", "python")


@dataclass(frozen=True)
class ProgramBuild:
    """A P4 program prepared for one target: where its P4Info (text format) and the device
    config a controller pushes with SetForwardingPipelineConfig are."""

    source: Path
    p4info: Path | None
    device_config: Path | None


@dataclass(frozen=True)
class SwitchLaunch:
    """Everything a switch command line is made of (see ``P4Switch.build_argv``)."""

    name: str
    device_id: int
    grpc_addr: str
    ports: tuple[tuple[int, str], ...]
    log_file: Path
    cpu_port: int | None = None
    thrift_port: int | None = None
    pcap_dir: Path | None = None
    log_level: str = "info"
    program: Path | None = None  # loaded at start (None: --no-p4)
    egress_order: str = "sync"  # built-in target: sync, fifo or random (--egress-order)
    seed: int | None = None  # of egress_order random (--seed)
    tdf: float = 1.0  # time dilation (built-in target: its clock; BMv2 cannot)
    egress_delays: tuple[tuple[int, float], ...] = ()  # built-in target's delay line (s)
    ingress_delays: tuple[tuple[int, float], ...] = ()
    engine: str | None = None  # built-in target: python or c (--engine; None: its default)
    io: str | None = None  # built-in target: c or python packet loop (--io; None: default)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` non-empty lines of a log file (empty when there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


def failure_reason(tail: Sequence[str], default: str) -> str:
    """The most telling line of a dead switch's log: its last error line, else ``default``."""
    for line in reversed(tail):
        if line.startswith("# "):  # our own header line (the command)
            continue
        low = line.lower()
        if "error" in low or "exception" in low or "fatal" in low:
            return line.strip()
    return default


def port_accepts(host: str, port: int, timeout: float = 0.2) -> bool:
    """True when a server accepts a TCP connection to ``host:port``. A port in the kernel's
    ephemeral range with no server can still "accept": the connecting socket may be given
    that very port and connect to itself. That made a switch look ready while its own bind
    failed on the port the probe held (CI, 127.0.0.1:48820), so it does not count."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            return not is_self_connection(sock)
    except OSError:
        return False


def is_self_connection(sock: socket.socket) -> bool:
    """True for a TCP socket connected to itself (same address and port at both ends)."""
    try:
        return bool(sock.getsockname() == sock.getpeername())
    except OSError:
        return False


def port_in_use(host: str, port: int, strict: bool = False) -> bool:
    """True when ``host:port`` cannot be bound (some process already listens there);
    ``strict``: also while any socket holds it (a closed connection's TIME_WAIT included),
    as a port chosen for a server that may bind without SO_REUSEADDR must be."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if not strict:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


#: The kernel gives client sockets ports from 32768 up (ip_local_port_range's default), so a
#: port below it that is free now stays free until a switch binds it; above it a client
#: socket (even the readiness probe's own, see port_accepts) can take it meanwhile.
EPHEMERAL_FLOOR = 32768


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of client ports (net.ipv4.ip_local_port_range), or its default."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return EPHEMERAL_FLOOR, 60999


def free_port_base(count: int, start: int = 20000, stop: int = EPHEMERAL_FLOOR) -> int:
    """A first port ``P`` with ``P .. P+count-1`` all free on 127.0.0.1 (bindable without
    SO_REUSEADDR) in ``start .. stop``: the gRPC and Thrift ports of a test, benchmark or
    campaign network. The search starts at a random block, so two calls before either
    network binds its ports (the campaign's parallel cells), or two processes at once, rarely
    get the same block."""
    step = max(16, count)
    blocks = list(range(start, stop - count + 1, step))
    first = random.Random().randrange(len(blocks)) if blocks else 0
    for base in blocks[first:] + blocks[:first]:
        if not any(port_in_use("127.0.0.1", base + i, strict=True) for i in range(count)):
            return base
    raise SwitchStartError(f"no {count} consecutive free TCP ports on 127.0.0.1 in "
                           f"{start}..{stop - 1}")


def _disable_ipv6(intf: str) -> None:
    """Keeps the kernel from adding link-local addresses (and sending RS/MLD) on a switch
    port; the switch should only see the hosts' traffic."""
    path = Path(f"/proc/sys/net/ipv6/conf/{intf}/disable_ipv6")
    try:
        path.write_text("1\n")
    except OSError as exc:
        log.debug("cannot disable IPv6 on %s: %s", intf, exc)


#: Offloads that make libpcap size its receive-ring frames for 256 KiB packets (see
#: :func:`pcap_ring_offloads_off`); ``ethtool -K`` feature names.
PCAP_RING_OFFLOADS = ("tso", "gso", "gro", "lro")


def pcap_ring_offloads_off(intf: str) -> bool:
    """Turns off the segmentation and receive offloads of a port BMv2 will open; False (and a
    warning) when ``ethtool`` cannot.

    Why: BMv2 reads each port through libpcap in immediate mode, a TPACKET_V2 ring of 2 MB
    whose frames libpcap sizes for the largest packet the interface can hand it: 256 KiB
    while any of these offloads is on (a veth's default), so the ring holds **8 frames**
    (BMv2's process maps 4 MiB per port). Whenever BMv2's single receive thread is held up
    for 8 packets' time (its 1024-packet input buffer full, or just descheduled on a busy
    machine) the kernel drops what arrives (``PACKET_STATISTICS`` ``tp_drops``): a make run
    on BMv2 lost 530-1,040 of its ~5,000 worker packets that way (every drop, the veth's rx
    count minus the program's ``port_rx``, docs/benchmarks.md "What limits BMv2"). With the
    offloads off libpcap sizes frames by the MTU: about 1,300 frames per port. The hosts send
    MTU-sized frames already (their links have checksum offload off, so no TSO)."""
    ethtool = shutil.which("ethtool")
    if ethtool is None:
        log.warning("ethtool not found: %s keeps its offloads, and BMv2's receive ring on it "
                    "holds 8 packets (drops under load)", intf)
        return False
    argv = [ethtool, "-K", intf]
    for feature in PCAP_RING_OFFLOADS:
        argv += [feature, "off"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("%s: ethtool failed (%s): BMv2's receive ring on it holds 8 packets",
                    intf, exc)
        return False
    # whatever ethtool's exit status (some drivers fix some features): what matters is what
    # the interface reports afterwards
    left = offloads_on(intf, ethtool)
    if left:
        log.warning("%s: cannot turn off %s (%s): BMv2's receive ring on it holds 8 packets",
                    intf, ", ".join(left), (res.stderr or res.stdout).strip())
        return False
    return True


#: ``ethtool -k`` names of :data:`PCAP_RING_OFFLOADS`.
_OFFLOAD_NAMES = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                  "generic-receive-offload": "gro", "large-receive-offload": "lro"}


def offloads_on(intf: str, ethtool: str = "ethtool") -> list[str]:
    """Which of :data:`PCAP_RING_OFFLOADS` ``intf`` has on (``ethtool -k``)."""
    try:
        res = subprocess.run([ethtool, "-k", intf], capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return list(PCAP_RING_OFFLOADS)
    on = []
    for line in res.stdout.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in _OFFLOAD_NAMES and value.split()[:1] == ["on"]:
            on.append(_OFFLOAD_NAMES[name.strip()])
    return on if res.returncode == 0 else list(PCAP_RING_OFFLOADS)


def check_engine(switch_cls: type[P4Switch], engine: str | None, io: str | None = None) -> None:
    """TargetError naming the option and value: an engine or packet loop that is not one
    of the built-in target's, or one asked of another target (only its own exists)."""
    for option, value, choices in (("engine", engine, ENGINES), ("io", io, IO_LOOPS)):
        if value is None:
            continue
        if value not in choices:
            raise TargetError(f"{option} {value!r}: choose from {', '.join(choices)}")
        if switch_cls.target != "softswitch" and value != "python" and option == "engine":
            raise TargetError(f"engine {value!r}: only the built-in target (softswitch) has "
                              f"engines; {switch_cls.target} runs its own")


def check_egress_order(switch_cls: type[P4Switch], egress_order: str, seed: int | None) -> None:
    """Raise TargetError naming the bad option: the built-in target's egress orders (BMv2
    has one, its own: queues and egress threads), a seed only for the random order."""
    if egress_order not in EGRESS_ORDERS:
        raise TargetError(f"egress order {egress_order!r}: choose from {', '.join(EGRESS_ORDERS)}")
    if egress_order != "sync" and switch_cls.target != "softswitch":
        raise TargetError(f"egress order {egress_order!r}: only the built-in target (softswitch) "
                          f"has egress orders; {switch_cls.target} has its own")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise TargetError(f"seed {seed!r}: must be a whole number >= 0")
    if seed is not None and egress_order != "random":
        raise TargetError(f"seed {seed}: only egress order 'random' takes a seed "
                          f"(egress order is {egress_order!r})")


class ProcessNode(Switch):
    """A Mininet node in the root namespace that runs one process of ours (a P4 switch, a
    delay node) in its own process group, logging into ``<rundir>/logs/<name>.log``.

    Life cycle: :meth:`launch` starts the process (never waits); ``batchStartup`` waits for
    every node of a class against one deadline (:meth:`check_ready`, :meth:`is_ready`);
    ``stop()``/``batchShutdown()`` SIGTERM the process group, wait, and SIGKILL what is left.
    """

    #: What the node is, in messages ("switch s1 did not start: ...").
    what: ClassVar[str] = "node"
    isSetup: ClassVar[bool] = False  # Mininet runs setup() once per class

    def __init__(self, name: str, rundir: RunDir | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S,
                 stop_timeout: float = DEFAULT_STOP_TIMEOUT_S, **params: Any) -> None:
        params.setdefault("inNamespace", False)
        params.pop("batch", None)
        self.rundir = rundir
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.proc: ProcessHandle | None = None
        super().__init__(name, **params)

    @property
    def log_file(self) -> Path:
        """``<rundir>/logs/<name>.log`` (``./logs/<name>.log`` without a run directory)."""
        if self.rundir is not None:
            return self.rundir.log_path(self.name)
        Path("logs").mkdir(exist_ok=True)
        return Path("logs").resolve() / f"{self.name}.log"

    def port_interfaces(self) -> list[tuple[int, str]]:
        """(port number, interface name) of every data-plane port, by port number (the
        loopback control interface Mininet gives root-namespace switches is left out)."""
        ctl = getattr(self, "controlIntf", None)
        return sorted(
            (port, intf.name) for port, intf in self.intfs.items()
            if intf is not ctl and intf.name != "lo"
        )

    def launch(self, argv: Sequence[str], kind: str) -> None:
        """Starts ``argv`` in a new session, its output appended to the log file after a
        header line with the command, and records it in the run's ``pids.json`` as
        ``kind``."""
        logfile = self.log_file
        log.info("starting %s: %s", self.name, shlex.join(argv))
        with logfile.open("ab") as out:
            out.write(f"# {time.strftime('%H:%M:%S')} {shlex.join(argv)}\n".encode())
            out.flush()
            self.proc = self.start_process(argv, out)
        if self.rundir is not None:
            self.rundir.record_process(self.name, kind, self.proc.pid, self.proc.pid)

    def start_process(self, argv: Sequence[str], out: Any) -> ProcessHandle:
        """Runs ``argv`` in a new session, its output into the open file ``out``."""
        try:
            return subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            raise SwitchStartError(
                f"{self.what} {self.name} did not start: cannot run {argv[0]}: "
                f"{exc.strerror}"
            ) from None

    # ------------------------------------------------------------------ readiness
    def is_ready(self) -> bool:
        """The node's own readiness probe (its process is known to be alive)."""
        raise NotImplementedError

    def not_ready_reason(self, timeout: float) -> str:
        """Why the node is not ready after ``timeout`` seconds."""
        return f"not ready after {timeout:g} s"

    def check_ready(self) -> bool:
        """One readiness probe: raises when the process is gone, True once
        :meth:`is_ready`."""
        if self.proc is None:
            raise SwitchStartError(f"{self.what} {self.name} did not start: it was never "
                                   "launched")
        code = self.proc.poll()
        if code is not None:
            tail = log_tail(self.log_file)
            reason = failure_reason(tail, f"process exited with status {code}")
            raise SwitchStartError(self._start_error(reason, tail))
        return self.is_ready() and self.proc.poll() is None

    def wait_ready(self, timeout: float | None = None) -> None:
        """Polls :meth:`check_ready` until True or the deadline (then raises)."""
        type(self).wait_all_ready([self], timeout)

    def _start_error(self, reason: str, tail: Sequence[str]) -> str:
        text = f"{self.what} {self.name} did not start: {reason}"
        if tail:
            text += f"\n--- last lines of {self.log_file} ---\n" + "\n".join(tail)
        return text

    @classmethod
    def wait_all_ready(cls, nodes: Sequence[ProcessNode], timeout: float | None = None) -> None:
        """Waits for every node against one deadline (the largest ``start_timeout``)."""
        if timeout is None:
            timeout = max((s.start_timeout for s in nodes), default=DEFAULT_START_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        pending = list(nodes)
        while pending:
            pending = [s for s in pending if not s.check_ready()]
            if not pending:
                return
            if time.monotonic() >= deadline:
                node = pending[0]
                raise SwitchStartError(node._start_error(node.not_ready_reason(timeout),
                                                         log_tail(node.log_file)))
            # Sleeping in wait() wakes up at once if the process exits.
            try:
                pending[0].proc.wait(POLL_INTERVAL_S)  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                pass

    @classmethod
    def batchStartup(cls, switches: Sequence[ProcessNode], run: Any = None) -> list[ProcessNode]:
        """Mininet hook run after every ``start()``: waits until all nodes are ready."""
        cls.wait_all_ready(switches)
        return list(switches)

    # ------------------------------------------------------------------ stopping
    def is_running(self) -> bool:
        """True while the node's process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def _signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            log.warning("cannot signal %s %s (pid %d): %s", self.what, self.name,
                        self.proc.pid, exc)

    def stop_process(self, timeout: float | None = None) -> None:
        """SIGTERM the process group, wait, SIGKILL if needed; idempotent."""
        self.stop_processes([self], timeout)

    @classmethod
    def stop_processes(cls, nodes: Iterable[ProcessNode], timeout: float | None = None) -> None:
        """Stops several nodes in parallel: SIGTERM all, wait, SIGKILL stragglers."""
        live = [s for s in nodes if s.proc is not None and s.proc.returncode is None]
        for node in live:
            node._signal_group(signal.SIGTERM)
        if timeout is None:
            timeout = max((s.stop_timeout for s in live), default=DEFAULT_STOP_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        for node in live:
            assert node.proc is not None
            try:
                node.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s %s did not stop on SIGTERM; killing it", node.what, node.name)
                node._signal_group(signal.SIGKILL)
                node.proc.wait()
            # Anything else left in the group (the leader is gone already).
            node._signal_group(signal.SIGKILL)

    @classmethod
    def batchShutdown(cls, switches: Sequence[ProcessNode], run: Any = None
                      ) -> list[ProcessNode]:
        """Mininet hook: stops all the class's processes at once."""
        cls.stop_processes(switches)
        return list(switches)

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stops the process, then (Mininet) deletes the node's interfaces."""
        self.stop_process()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        """Stops the process and the node's shell."""
        self.stop_process()
        super().terminate()


class P4Switch(ProcessNode):
    """A P4Runtime switch process for one Mininet switch (base of the two targets).

    Topology options become constructor arguments (``device_id``, ``grpc_port``, ...);
    run-wide ones (``rundir``, ``build``, ``pcap``) come through ``functools.partial``.
    """

    what = "switch"
    target: ClassVar[str] = "p4"
    # holds each packet for its link's propagation delay itself (where there is no netem)
    delay_line: ClassVar[bool] = False
    binaries: ClassVar[tuple[str, ...]] = ()
    isSetup: ClassVar[bool] = False  # Mininet runs setup() once per class

    def __init__(
        self,
        name: str,
        device_id: int = 0,
        grpc_port: int = GRPC_BASE_PORT,
        grpc_host: str = GRPC_HOST,
        cpu_port: int | None = None,
        thrift_port: int | None = None,
        rundir: RunDir | None = None,
        build: ProgramBuild | None = None,
        preload: bool = False,
        pcap: bool = False,
        log_level: str = "info",
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        role: str | None = None,
        index: int | None = None,
        egress_order: str = "sync",
        seed: int | None = None,
        tdf: float = 1.0,
        port_delays: Mapping[str, tuple[dict[int, float], dict[int, float]]] | None = None,
        engine: str | None = None,
        io: str | None = None,
        **params: Any,
    ) -> None:
        if log_level not in LOG_LEVELS:
            raise TargetError(f"log level {log_level!r}: choose from {', '.join(LOG_LEVELS)}")
        check_egress_order(type(self), egress_order, seed)
        check_engine(type(self), engine, io)
        self.engine = engine
        self.io = io
        self.device_id = device_id
        self.grpc_host = grpc_host
        self.grpc_port = grpc_port
        self.cpu_port = cpu_port
        self.thrift_port = thrift_port
        self.build = build
        self.preload = preload
        self.pcap = pcap
        self.log_level = log_level
        self.role = role
        self.index = index
        self.egress_order = egress_order
        # each switch its own random order: the run's seed plus the device id
        self.seed = None if seed is None else seed + device_id
        self.tdf = tdf
        # this switch's (egress, ingress) link delays per port, from the run's map by name
        self.delays = (port_delays or {}).get(name, ({}, {}))
        super().__init__(name, rundir=rundir, start_timeout=start_timeout,
                         stop_timeout=stop_timeout, **params)

    # ------------------------------------------------------------------ dependencies
    @classmethod
    def setup(cls) -> None:
        """Mininet's dependency check: every binary of the target must be on PATH."""
        missing = [b for b in cls.binaries if shutil.which(b) is None]
        if missing:
            raise TargetError(f"{cls.target} target: {', '.join(missing)} not found on PATH")

    @classmethod
    def available(cls) -> bool:
        """True when the target can run here."""
        return all(shutil.which(b) is not None for b in cls.binaries)

    @classmethod
    def compile_program(cls, program: Path, builddir: Path) -> ProgramBuild:
        """Prepares ``program`` for this target in ``builddir``."""
        raise NotImplementedError

    @classmethod
    def prepare_engine(cls, build: ProgramBuild, engine: str | None) -> str | None:
        """Readies what every switch of a network would otherwise build for itself at
        once (the built-in target: the C data path); returns a line for the start-up
        display, or None when there was nothing to do."""
        return None

    # ------------------------------------------------------------------ paths and argv
    @property
    def grpc_addr(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"

    @property
    def pcap_dir(self) -> Path | None:
        if not self.pcap:
            return None
        if self.rundir is not None:
            return self.rundir.pcap_dir()
        Path("pcaps").mkdir(exist_ok=True)
        return Path("pcaps").resolve()

    def launch_config(self) -> SwitchLaunch:
        """This node's :class:`SwitchLaunch` (ports from its Mininet interfaces)."""
        return SwitchLaunch(
            name=self.name, device_id=self.device_id, grpc_addr=self.grpc_addr,
            ports=tuple(self.port_interfaces()), log_file=self.log_file, cpu_port=self.cpu_port,
            thrift_port=self.thrift_port, pcap_dir=self.pcap_dir, log_level=self.log_level,
            program=self.preload_path(), egress_order=self.egress_order, seed=self.seed,
            tdf=self.tdf, egress_delays=tuple(sorted(self.delays[0].items())),
            ingress_delays=tuple(sorted(self.delays[1].items())),
            engine=self.engine, io=self.io,
        )

    def preload_path(self) -> Path | None:
        """What the switch loads at start when ``preload`` is set (else None: --no-p4)."""
        return None

    def argv(self) -> list[str]:
        """The switch command line, as a list (never a shell string)."""
        return self.build_argv(self.launch_config())

    @classmethod
    def build_argv(cls, launch: SwitchLaunch) -> list[str]:
        """The target's command line for ``launch``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ life cycle
    def start(self, controllers: Sequence[Any] = ()) -> None:
        """Launches the switch process (does not wait for it; see :meth:`batchStartup`)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        for what, port in self.listen_ports():
            if port_in_use(self.grpc_host, port):
                raise SwitchStartError(
                    f"switch {self.name} did not start: {what} address {self.grpc_host}:{port} "
                    "is already in use (a switch left over from an earlier run? `make clean` "
                    "stops those)"
                )
        for _port, intf in self.port_interfaces():
            self.prepare_port(intf)
        self.launch(self.argv(), "switch")

    def prepare_port(self, intf: str) -> None:
        """Readies one port interface before the process opens it."""
        _disable_ipv6(intf)

    def listen_ports(self) -> list[tuple[str, int]]:
        """(what, TCP port) of every server the switch process opens on ``grpc_host``."""
        return [("gRPC", self.grpc_port)]

    def is_ready(self) -> bool:
        """True once every server (gRPC; on BMv2 also Thrift) accepts connections."""
        return all(port_accepts(self.grpc_host, port) for _what, port in self.listen_ports())

    def not_ready_reason(self, timeout: float) -> str:
        ports = " and ".join(f"{what} port {self.grpc_host}:{port}"
                             for what, port in self.listen_ports())
        return f"{ports} not open after {timeout:g} s"


class SoftSwitch(P4Switch):
    """The built-in target: ``python -m softswitch run`` (simple_switch_grpc's flags)."""

    target = "softswitch"
    binaries = ()
    isSetup = False
    python: ClassVar[str] = sys.executable
    delay_line = True

    def __init__(self, name: str, forkserver: ForkServer | None = None, **params: Any) -> None:
        self.forkserver = forkserver
        super().__init__(name, **params)

    def start_process(self, argv: Sequence[str], out: Any) -> ProcessHandle:
        """Forked by the network's fork server when there is one (:mod:`topo.forkserver`),
        else (and when it fails) a process of its own."""
        server = self.forkserver
        if server is not None and server.usable:
            try:
                return server.spawn(argv)
            except ForkServerError as exc:
                server.give_up(str(exc))
        return super().start_process(argv, out)

    def preload_path(self) -> Path | None:
        """The P4 source (the built-in target compiles it at start)."""
        return self.build.source if self.preload and self.build is not None else None

    @classmethod
    def build_argv(cls, launch: SwitchLaunch) -> list[str]:
        """``python -m softswitch run PROG|--no-p4 -i P@IF ... --device-id N ...``."""
        argv = [cls.python, "-m", "softswitch", "run"]
        argv.append(str(launch.program) if launch.program is not None else "--no-p4")
        for port, intf in launch.ports:
            argv += ["-i", f"{port}@{intf}"]
        argv += ["--device-id", str(launch.device_id), "--grpc-server-addr", launch.grpc_addr]
        if launch.cpu_port is not None:
            argv += ["--cpu-port", str(launch.cpu_port)]
        argv += ["--log-file", str(launch.log_file), "-L", launch.log_level]
        if launch.pcap_dir is not None:
            argv += ["--pcap", str(launch.pcap_dir)]
        if launch.egress_order != "sync":
            argv += ["--egress-order", launch.egress_order]
            if launch.seed is not None:
                argv += ["--seed", str(launch.seed)]
        argv += SwitchTiming.of(launch.tdf, dict(launch.egress_delays),
                                dict(launch.ingress_delays)).argv()
        if launch.engine is not None:
            argv += ["--engine", launch.engine]
        if launch.io is not None:
            argv += ["--io", launch.io]
        return argv

    @classmethod
    def prepare_engine(cls, build: ProgramBuild, engine: str | None) -> str | None:
        """With the C engine, compiles the program's C data path into the cache the
        switch processes load it from, so that they share this one compile (twenty
        switches compiling the same program at once on two cores would take minutes)."""
        if engine != "c":
            return None
        from softswitch.cengine import prebuild
        from softswitch.program_cache import compile_p4_file

        try:
            program, _ = compile_p4_file(build.source)  # the cached front-end output
        except Exception as exc:  # reported by compile_program already: the switches say it
            return f"C data path not prepared: {exc}"
        where = prebuild(program)
        if where is None:
            return "C engine: the program needs the Python engine (see the switch logs)"
        return f"C data path: {where.name}"

    @classmethod
    def compile_program(cls, program: Path, builddir: Path) -> ProgramBuild:
        """Compiles in-process with the built-in front end and writes the P4Info and the
        device config, which for this target is the bundle of the program's sources
        (``<stem>.device_config.json``; the compile makes it: bundling again would run the
        preprocessor over the whole program a second time)."""
        try:
            from google.protobuf import text_format

            from softswitch.p4info import build_p4info
            from softswitch.program_cache import cached_p4info_text, compile_p4_file
        except ImportError as exc:
            raise ProgramBuildError(
                f"{program}: the built-in front end is not available ({exc})") from None
        try:
            # every switch process of the network compiles the same sources: the first
            # compile here fills the program cache that their start-up reads
            ir_program, bundle = compile_p4_file(program)
        except Exception as exc:  # P4Error and friends print FILE:LINE:COL: error: ...
            raise ProgramBuildError(str(exc)) from None
        try:
            p4info = cached_p4info_text(
                bundle, lambda: text_format.MessageToString(build_p4info(ir_program)))
        except Exception as exc:
            raise ProgramBuildError(f"{program}: cannot build P4Info: {exc}") from None
        builddir.mkdir(parents=True, exist_ok=True)
        out = builddir / f"{program.stem}.p4info.txtpb"
        out.write_text(p4info)
        config = builddir / f"{program.stem}.device_config.json"
        config.write_bytes(bundle)
        return ProgramBuild(program.resolve(), out.resolve(), config.resolve())


class BMv2Switch(P4Switch):
    """BMv2's ``simple_switch_grpc`` with ``--no-p4`` (the controller pushes the JSON that
    p4c wrote into the run directory); only where it and p4c are on PATH."""

    target = "bmv2"
    binaries = ("simple_switch_grpc", "p4c")
    isSetup = False

    def prepare_port(self, intf: str) -> None:
        """As every target, and offloads off so that BMv2's receive ring holds more than 8
        packets (:func:`pcap_ring_offloads_off`)."""
        super().prepare_port(intf)
        pcap_ring_offloads_off(intf)

    def listen_ports(self) -> list[tuple[str, int]]:
        """gRPC, and the Thrift runtime port the controller uses for registers."""
        ports = super().listen_ports()
        if self.thrift_port is not None:
            ports.append(("Thrift", self.thrift_port))
        return ports

    def preload_path(self) -> Path | None:
        """The JSON p4c wrote."""
        if self.preload and self.build is not None:
            return self.build.device_config
        return None

    @classmethod
    def build_argv(cls, launch: SwitchLaunch) -> list[str]:
        """``simple_switch_grpc ... JSON|--no-p4 -- --grpc-server-addr ... --cpu-port N``;
        the log goes to the console, which the node redirects into the log file."""
        argv = ["simple_switch_grpc", "--device-id", str(launch.device_id)]
        for port, intf in launch.ports:
            argv += ["-i", f"{port}@{intf}"]
        if launch.thrift_port is not None:
            argv += ["--thrift-port", str(launch.thrift_port)]
        argv += ["--log-console", "-L", launch.log_level]
        if launch.pcap_dir is not None:
            argv += ["--pcap", str(launch.pcap_dir)]
        argv.append(str(launch.program) if launch.program is not None else "--no-p4")
        argv += ["--", "--grpc-server-addr", launch.grpc_addr]
        if launch.cpu_port is not None:
            argv += ["--cpu-port", str(launch.cpu_port)]
        return argv

    @classmethod
    def compile_program(cls, program: Path, builddir: Path) -> ProgramBuild:
        """``p4c --target bmv2 --arch v1model`` to ``<stem>.json`` and the P4Info, or both
        from :mod:`topo.p4c_cache` when p4c compiled the same preprocessed program before."""
        builddir.mkdir(parents=True, exist_ok=True)
        p4info = builddir / f"{program.stem}.p4info.txtpb"
        config = builddir / f"{program.stem}.json"
        flags = list(p4c_cache.BMV2_FLAGS)
        outputs = (config.name, p4info.name)
        argv = ["p4c", *flags, "-o", str(builddir), "--p4runtime-files", str(p4info),
                str(program)]

        def run_p4c() -> None:
            try:
                res = subprocess.run(argv, capture_output=True, text=True, check=False)
            except OSError as exc:
                raise ProgramBuildError(f"cannot run p4c: {exc.strerror}") from None
            if res.returncode != 0:
                raise ProgramBuildError((res.stderr or res.stdout).strip() or
                                        f"p4c failed with status {res.returncode}")

        p4c_cache.cached(flags, program, builddir, outputs, run_p4c)
        return ProgramBuild(program.resolve(), p4info.resolve(), config.resolve())


TARGETS: dict[str, type[P4Switch]] = {"softswitch": SoftSwitch, "bmv2": BMv2Switch}


def choose_target(name: str = "auto") -> tuple[type[P4Switch], str]:
    """(switch class, one-line description of the choice). ``auto`` picks BMv2 when both
    simple_switch_grpc and p4c are on PATH, else the built-in target."""
    if name == "auto":
        if BMv2Switch.available():
            return BMv2Switch, (f"bmv2 (auto: simple_switch_grpc at "
                                f"{shutil.which('simple_switch_grpc')}, p4c at "
                                f"{shutil.which('p4c')})")
        missing = [b for b in BMv2Switch.binaries if shutil.which(b) is None]
        return SoftSwitch, f"softswitch (auto: {' and '.join(missing)} not on PATH)"
    cls = TARGETS.get(name)
    if cls is None:
        raise TargetError(f"unknown target {name!r}; choose auto, {', '.join(TARGETS)}")
    if not cls.available():
        missing = [b for b in cls.binaries if shutil.which(b) is None]
        raise TargetError(f"target {name}: {', '.join(missing)} not found on PATH; "
                          "use --target softswitch (the built-in target)")
    return cls, f"{name} (requested)"


class TestbedHost(Host):
    """A worker machine: checksum/segmentation offloads off (the P4 switch must see final
    checksums and real frame sizes), IPv6 off (no RS/MLD noise), static ARP on request, and
    TCP congestion control Reno (:data:`TCP_CONGESTION`)."""

    __test__ = False
    OFFLOADS: ClassVar[tuple[str, ...]] = ("tx", "rx", "sg", "tso", "gso", "gro")
    #: The hosts' TCP congestion control (the ring's and the torus's transport): Reno, whose
    #: every control loop is clocked by round trips (slow start, one segment per round
    #: trip), so it behaves alike at every time-dilation factor. The machine's default may
    #: run on the wall clock: BBR re-probes its minimum RTT every 10 s real and CUBIC grows
    #: its window by real seconds; at TDF 400,000 (BMv2 at 100G/2us, a 6.4 s real round
    #: trip) BBR kept the ring at half the link rate.
    TCP_CONGESTION: ClassVar[str] = "reno"

    def __init__(self, name: str, gpus: int = 1, leaf: int = 1, slot: int = 1,
                 **params: Any) -> None:
        self.gpus = gpus
        self.leaf = leaf
        self.slot = slot
        super().__init__(name, **params)

    def config(self, **params: Any) -> dict[str, Any]:
        """Mininet's config plus the one-time set-up inside the host's namespace."""
        result = super().config(**params)
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            args = ["ethtool", "-K", intf.name]
            for feature in self.OFFLOADS:
                args += [feature, "off"]
            self.cmd(shlex.join(args))
        self.cmd("sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 "
                 "net.ipv6.conf.default.disable_ipv6=1 "
                 f"net.ipv4.tcp_congestion_control={self.TCP_CONGESTION}")
        return result

    def set_static_arp(self, entries: Iterable[tuple[str, str]]) -> None:
        """Permanent neighbour entries ``(ip, mac)`` on the host's interface."""
        intf = self.defaultIntf()
        cmds = [shlex.join(["ip", "neigh", "replace", ip, "lladdr", mac, "dev", intf.name,
                            "nud", "permanent"]) for ip, mac in entries]
        if not cmds:
            return
        out = self.cmd("; ".join(cmds))
        if out.strip():
            log.warning("%s: static ARP: %s", self.name, out.strip())
