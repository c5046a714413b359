"""One experiment's life on an emulated network: start, program, launch, measure, tear down.

:class:`ExperimentNetwork` is the one place that does this, for ``make run``
(:mod:`experiment.run`, :mod:`experiment.session`), ``make experiments`` and ``python -m sim
emulate`` (:mod:`experiment.matrix`, :mod:`experiment.emulation`) and ``make train``
(:mod:`train.testbed`)::

    with ExperimentNetwork(topo, "softswitch", rundir, program) as lab:   # started, programmed
        plan = lab.controller.create_job(...)
        before = lab.snapshot()
        rows = lab.run_processes({"h1": ("h1", argv), ...}, timeout_s=60.0)
        window = Window(before, lab.snapshot())   # bytes per link, switch and machine CPU

1. **start**: :func:`topo.network.start_network` builds the topology on the target, compiles
   the program into the run directory and waits for every switch (and the live view when a
   port is given);
2. **program**: a controller of the run directory pushes the pipeline and the IPv4 routes
   (at start, or later with :meth:`ExperimentNetwork.program`);
3. **launch**: :meth:`~ExperimentNetwork.popen` starts a command inside a host's namespace;
   every process is recorded in the run's ``pids.json`` (a later cleanup finds it even when
   this process is killed) and tracked here;
4. **measure**: :meth:`~ExperimentNetwork.snapshot` reads the switches' port counters, the
   switch processes' CPU time and the machine's CPU ticks; a :class:`Window` of two
   snapshots gives the bytes and rate of every link, switch CPU and machine load;
5. **tear down**: leaving the block -- normally, on an exception, on Ctrl-C -- or a failure
   half-way through starting kills every tracked process, stops the serving controller,
   closes the controller, stops the live view, the switches and Mininet, and removes the
   switches' interfaces.

The fault campaigns (:mod:`reliability.testbed`, :mod:`scenarios.runner`) add a second
controller that ``serve``-s in a thread and restores restarted switches
(:meth:`~ExperimentNetwork.start_serving`, :class:`experiment.serving.ServingController`) and
read counters through :class:`experiment.serving.TolerantReads`. The benchmarks that need
no Mininet (one switch process between namespaces) use :class:`experiment.netns.NamespaceRig`,
which keeps the same start/stop contract.

:meth:`ExperimentNetwork.around` wraps a network someone else started and stops (tests, the
reliability campaign's bad-input cell): it then owns only the processes it launched and the
controller it opened.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Protocol, TypeAlias, TypedDict, Unpack

import stackdump
from controller.fabric import Controller, ControllerOptions
from controller.state import forget as forget_controller_state
from experiment.netns import stop_process
from experiment.seams import (
    CounterReader,
    FabricController,
    JsonObject,
    LiveView,
    RunningNetwork,
    StageDisplay,
    json_int,
    json_object,
)
from experiment.serving import (
    SERVE_JOIN_S,
    EventLog,
    OpenServer,
    ServingController,
    reconnecting_controller,
)
from liveview import start_live_view
from topo.cluster import ClusterSpec
from topo.measure import network_cpu_seconds
from topo.model import Topology
from topo.network import start_network
from topo.rundir import RunDir
from topo.topologies import TestbedTopo

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent

#: One process of a run: its key -> (host, argv).
Commands = Mapping[str, tuple[str, Sequence[str]]]
#: What a process printed: its JSON lines, or an error message when it printed none.
Rows = list[JsonObject] | str
Counters = dict[tuple[str, int], tuple[int, int]]


class StartKeywords(TypedDict, total=False):
    """The keywords of :func:`topo.network.start_network` that :class:`StartOptions` sets."""

    pcap: bool
    preload: bool
    log_level: str
    start_timeout: float
    progress: bool
    egress_order: str
    seed: int | None
    tdf: float
    delay_nodes: bool
    engine: str | None
    io: str | None
    cluster: ClusterSpec


@dataclass(frozen=True)
class StartOptions:
    """How the switches start (the keywords of :func:`topo.network.start_network`);
    ``start_timeout`` None: topo's default."""

    pcap: bool = False
    preload: bool = False
    log_level: str = "info"
    start_timeout: float | None = None
    egress_order: str = "sync"
    seed: int | None = None
    progress: bool = False
    tdf: float = 1.0  # time dilation: links at bw / tdf, switch clocks tdf times slower
    delay_nodes: bool = False  # link delays by delay nodes even where netem/switches could
    engine: str | None = None  # built-in target's packet engine, python or c (None: default)
    io: str | None = None  # built-in target's packet loop, c or python (None: default)
    cluster: ClusterSpec | None = None  # the servers the nodes run on (None: this machine)

    def keywords(self) -> StartKeywords:
        out: StartKeywords = {"pcap": self.pcap, "preload": self.preload,
                              "log_level": self.log_level, "progress": self.progress,
                              "egress_order": self.egress_order, "seed": self.seed}
        if self.tdf != 1:
            out["tdf"] = self.tdf
        if self.delay_nodes:
            out["delay_nodes"] = True
        if self.engine is not None:  # compiled once there before the switches start
            out["engine"] = self.engine
        if self.io is not None:
            out["io"] = self.io
        if self.start_timeout is not None:
            out["start_timeout"] = self.start_timeout
        if self.cluster is not None:
            out["cluster"] = self.cluster
        return out


#: What ``signal.signal`` returns for SIGTERM: a handler, SIG_DFL / SIG_IGN, or None.
SigtermHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None


def interrupt_on_sigterm() -> SigtermHandler:
    """SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does: a command that
    holds a network (make run, a figure, a scenario, training) leaves its ``with`` blocks,
    takes the network down and exits 130, instead of dying with everything still up.
    Returns the handler it replaced (a command run in-process puts it back)."""
    return signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


# ----------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class LinkUsage:
    """Traffic on one switch port (both directions) during one measured window."""

    switch: str
    port: int
    peer: str
    kind: str  # "host" | "fabric"
    tx_bytes: int
    rx_bytes: int
    bw_bps: float | None  # the link's shaped rate (bits/s); None: unshaped
    seconds: float

    @property
    def bps(self) -> float:
        """The busier direction's mean rate (bits/s of frames)."""
        if self.seconds <= 0:
            return 0.0
        return max(self.tx_bytes, self.rx_bytes) * 8 / self.seconds

    @property
    def mbit_per_s(self) -> float:
        """:attr:`bps` in Mbit/s."""
        return self.bps / 1e6

    @property
    def utilization(self) -> float | None:
        """Mean rate / shaped rate of the busier direction."""
        return self.bps / self.bw_bps if self.bw_bps else None


def port_counters(controller: CounterReader) -> Counters:
    """{(switch, port): (rx_bytes, tx_bytes)} from the program's port counters."""
    out = {}
    cells = getattr(controller, "port_bytes", None)  # the fabric's few-cell read
    for name in controller.switches:
        if cells is not None:
            for port, (rx, tx) in cells(name).items():
                out[(name, int(port))] = (int(rx), int(tx))
            continue
        ports = json_object(controller.switch_counters(name)["ports"])
        for port, row in ports.items():
            cell = json_object(row)
            out[(name, int(port))] = (json_int(cell["rx_bytes"]), json_int(cell["tx_bytes"]))
    return out


def switch_cpu_seconds(network: RunningNetwork) -> dict[str, float]:
    """CPU seconds used so far by each switch process, and by each delay node's wire
    (``wire:<name>``): they carry the packets too."""
    return network_cpu_seconds(network)


def machine_ticks() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return values[3] + values[4], sum(values)


def link_usage(topology: Topology, before: Counters, after: Counters,
               seconds: float) -> list[LinkUsage]:
    """Per switch port: bytes each way between two counter reads, with the link's rate."""
    rates: dict[tuple[str, int], tuple[str, float | None]] = {}
    for ln in topology.links:
        rates[(ln.node1, ln.port1)] = rates[(ln.node2, ln.port2)] = (ln.kind, ln.bw_bps)
    out = []
    for sw in topology.switches:
        for p in sw.ports:
            kind, bw = rates.get((sw.name, p.port), ("host", None))
            rx0, tx0 = before.get((sw.name, p.port), (0, 0))
            rx1, tx1 = after.get((sw.name, p.port), (0, 0))
            out.append(LinkUsage(sw.name, p.port, p.peer, kind, tx1 - tx0, rx1 - rx0, bw,
                                 seconds))
    return out


@dataclass(frozen=True)
class Snapshot:
    """The network's counters at one moment."""

    counters: Counters  # {(switch, port): (rx_bytes, tx_bytes)}
    switch_cpu: dict[str, float]  # CPU seconds of each switch process so far
    machine: tuple[int, int]  # (idle, total) jiffies
    time: float  # time.monotonic()


@dataclass(frozen=True)
class Window:
    """What happened between two snapshots."""

    before: Snapshot
    after: Snapshot

    @property
    def wall(self) -> float:
        return self.after.time - self.before.time

    @property
    def switch_cpu_seconds(self) -> dict[str, float]:
        """CPU seconds each switch process used in the window."""
        a, b = self.before.switch_cpu, self.after.switch_cpu
        return {n: b[n] - a[n] for n in b if n in a}

    @property
    def switch_cpu(self) -> dict[str, float]:
        """Cores each switch process used over the window (/proc counts 10 ms ticks: too
        coarse for windows much shorter than a second)."""
        wall = self.wall
        return {n: s / wall for n, s in self.switch_cpu_seconds.items()} if wall > 0 else {}

    @property
    def machine_busy(self) -> float:
        """Fraction of all cores busy during the window."""
        idle0, total0 = self.before.machine
        idle1, total1 = self.after.machine
        return 1.0 - (idle1 - idle0) / (total1 - total0) if total1 > total0 else 0.0

    def links(self, topology: Topology, seconds: float | None = None) -> list[LinkUsage]:
        """Every switch port's bytes, as rates over ``seconds`` (default: the window)."""
        return link_usage(topology, self.before.counters, self.after.counters,
                          self.wall if seconds is None else seconds)


# ----------------------------------------------------------------------------- processes


def collect_rows(procs: Mapping[str, subprocess.Popen[bytes]],
                 timeout_s: float) -> dict[str, Rows]:
    """Waits for every process against one deadline; returns {key: the JSON lines it
    printed, or an error message when it printed none}. Processes still running at the
    deadline are asked for their threads' stacks (logged) and killed."""
    deadline = time.monotonic() + timeout_s
    out: dict[str, Rows] = {}
    for key, proc in procs.items():
        try:
            stdout, stderr = stackdump.communicate(proc, max(0.1, deadline - time.monotonic()))
        except stackdump.HungProcess as hung:
            log.warning("%s: %s", key, hung)
            out[key] = f"no result within {timeout_s:g} s (killed)"
            continue
        rows = []
        for line in (stdout or b"").decode(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
        if rows:
            out[key] = rows
        else:
            err = (stderr or b"").decode(errors="replace").strip().splitlines()
            out[key] = err[-1] if err else f"exit status {proc.returncode}, no output"
    return out


def kill_all(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """Kills (and reaps) every process still running; never raises."""
    for proc in procs:
        stop_process(proc)


def open_controller(network: RunningNetwork, rpc_timeout_s: float | None = None) -> Controller:
    """A controller of the network's run directory (its P4Info and device config);
    ``rpc_timeout_s`` None: the controller's default."""
    options = ControllerOptions(rundir=Path(network.rundir.path))
    if rpc_timeout_s is not None:
        options = replace(options, rpc_timeout_s=rpc_timeout_s)
    return Controller(options)


class NetworkStarter(Protocol):
    """Starts a network (:func:`topo.network.start_network`; tests pass fakes)."""

    def __call__(self, topo: TestbedTopo | None, target: str,
                 rundir: RunDir | str | Path | None, program: Path | None,
                 **keywords: Unpack[StartKeywords]) -> RunningNetwork: ...


#: Opens the controller of a running network.
Connect = Callable[[RunningNetwork], FabricController]


def _start_network(topo: TestbedTopo | None, target: str, rundir: RunDir | str | Path | None,
                   program: Path | None, **keywords: Unpack[StartKeywords]) -> RunningNetwork:
    if topo is None:
        raise ValueError("no topology to start")
    return start_network(topo, target, rundir, program, **keywords)


# ----------------------------------------------------------------------------- lifecycle


class ExperimentNetwork:
    """A running, programmed emulated network and the host processes of one experiment (a
    context manager; :meth:`stop` is idempotent and never raises).

    ``program_fabric``: push the pipeline and routes while starting (when there is a
    program); ``live_port``: start the live view there (None: none). ``start_network`` and
    ``connect`` (network -> controller) are the functions that start the network and open
    its controller (the defaults: :func:`topo.network.start_network` and the controller of
    the run directory; tests pass fakes). ``rpc_timeout_s``: the RPC timeout of the
    controllers it opens (None: the controller's default; a pipeline push makes the built-in
    switch compile the program, which takes long on a loaded machine)."""

    def __init__(self, topo: TestbedTopo | None, target: str = "softswitch",
                 rundir: RunDir | str | Path | None = None,
                 program: Path | None = None, *, start: StartOptions | None = None,
                 program_fabric: bool = True, live_port: int | None = None,
                 announce: Callable[[str], None] | None = None,
                 stages: StageDisplay | None = None,
                 start_network: NetworkStarter = _start_network,
                 connect: Connect | None = None,
                 rpc_timeout_s: float | None = None) -> None:
        self.topo = topo
        self.target = target
        self.rundir_arg = rundir
        self.program_path = program
        self.start_options = start or StartOptions()
        self.program_fabric = program_fabric
        self.live_port = live_port
        self.announce = announce
        self.stages = stages
        self._start_network = start_network
        self.rpc_timeout_s = rpc_timeout_s
        self._connect: Connect = (connect if connect is not None
                                  else partial(open_controller, rpc_timeout_s=rpc_timeout_s))
        self.network: RunningNetwork | None = None
        self.live: LiveView | None = None
        self.programmed = False
        self._controller: FabricController | None = None
        self._owns_network = True
        self._owns_controller = True
        self._procs: list[subprocess.Popen[bytes]] = []
        self.serving: ServingController | None = None
        #: What the serving controller reported, over all its starts ("s1: recovered ...").
        self.events = EventLog()

    @classmethod
    def around(cls, network: RunningNetwork, controller: FabricController | None = None, *,
               connect: Connect = open_controller) -> ExperimentNetwork:
        """The lifecycle of a network started (and stopped) elsewhere: it launches, measures
        and kills its own processes; ``controller`` (else one it opens and closes) programs
        and reads the switches."""
        topo: TestbedTopo | None = getattr(network, "topo", None)
        lab = cls(topo, connect=connect)
        lab.network = network
        lab._owns_network = False
        if controller is not None:
            lab._controller = controller
            lab._owns_controller = False
        return lab

    # ------------------------------------------------------------------ start and stop
    def __enter__(self) -> ExperimentNetwork:
        if self.network is None:
            self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> ExperimentNetwork:
        """Starts the network (needs root), the live view and, with ``program_fabric``,
        programs the fabric; on any failure (KeyboardInterrupt included) everything started
        is stopped again and the error raised (a :class:`topo.errors.TopoError` for the
        network, the controller's errors for programming)."""
        if self.network is not None:
            raise RuntimeError("the network is running already")
        try:
            self.network = self._start_network(self.topo, self.target, self.rundir_arg,
                                               self.program_path,
                                               **self.start_options.keywords())
            # the switches are new: what the directory's earlier network had configured is not
            if forget_controller_state(Path(self.network.rundir.path)):
                log.info("%s: dropped the controller state of an earlier network",
                         self.network.rundir.path)
            if self.live_port is not None:
                self.live = start_live_view(self.network.rundir.path, self.live_port,
                                            self.announce)
            if self.program_fabric and self.program_path is not None:
                self.program()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kills every process this lifecycle launched, closes its controller, stops the
        live view and (when it started it) the network, whose interfaces are removed.
        Idempotent; logs failures instead of raising, so that it never hides the error
        that made the experiment end."""
        kill_all(self._procs)
        self._procs.clear()
        self.stop_serving()
        if self._controller is not None:
            ctl, self._controller = self._controller, None
            if self._owns_controller:
                try:
                    ctl.close()
                except Exception:
                    log.warning("closing the controller failed", exc_info=True)
        if self.live is not None:
            live, self.live = self.live, None
            try:
                live.stop()
            except Exception:
                log.warning("stopping the live view failed", exc_info=True)
        if self.network is not None:
            network, self.network = self.network, None
            if self._owns_network:
                try:
                    network.stop()
                except Exception:
                    log.exception("stopping the network failed")

    # ------------------------------------------------------------------ the network
    def _running(self) -> RunningNetwork:
        if self.network is None:
            raise RuntimeError("the network is not running")
        return self.network

    @property
    def topology(self) -> Topology:
        """The running network's description (hosts, switches, links, P4Info)."""
        return self._running().topology

    @property
    def rundir(self) -> Path:
        return Path(self._running().rundir.path)

    @property
    def controller(self) -> FabricController:
        """The controller of the run directory (opened on first use)."""
        if self._controller is None:
            self._controller = self._connect(self._running())
            self._owns_controller = True
        return self._controller

    def program(self, stages: StageDisplay | None = None) -> FabricController:
        """Pushes the pipeline and programs the IPv4 routes (ECMP over the spines); returns
        the controller. ``stages`` (a :class:`topo.network.Stages`) shows the steps."""
        stages = stages if stages is not None else self.stages
        ctl = self.controller
        with _stage(stages, "controller: pushing the pipeline"):
            ctl.push_pipeline()
        with _stage(stages, "controller: programming IPv4 routes"):
            ctl.program_routes()
        self.programmed = True
        return ctl

    # ------------------------------------------------------------------ serving
    def start_serving(self, open_server: OpenServer | None = None, *, thread_name: str = "serve",
                      join_timeout_s: float = SERVE_JOIN_S) -> ServingController:
        """Starts a second controller that ``serve``-s in a thread (as ``ina-controller
        serve``): opened now, it is the newest, so primary, and knows the jobs created so
        far; it restores a switch that restarts and reports to :attr:`events`. Nothing
        happens when it serves already; :meth:`stop_serving` or :meth:`stop` ends it.
        ``open_server``: opens it on the run directory (default: a controller with
        ``reconnect`` and this lifecycle's RPC timeout)."""
        if self.serving is None or not self.serving.serving:
            opener = (open_server if open_server is not None
                      else reconnecting_controller(self.rpc_timeout_s))
            self.serving = ServingController(self.rundir, opener, thread_name=thread_name,
                                             join_timeout_s=join_timeout_s, events=self.events)
        return self.serving.start()

    def stop_serving(self) -> None:
        """Ends the serving controller's thread and closes it (if it serves); never raises."""
        if self.serving is not None:
            serving, self.serving = self.serving, None
            try:
                serving.stop()
            except Exception:
                log.exception("stopping the serving controller failed")

    # ------------------------------------------------------------------ host processes
    def popen(self, host: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Starts ``argv`` inside ``host``'s namespace, from the repository root, with its
        output piped; tracked (killed by :meth:`stop`) and recorded in the run's
        ``pids.json``, so that a cleanup after a killed run stops it too (its host's shell,
        and with it the way to find it, dies with the run)."""
        proc: subprocess.Popen[bytes] = self._running().node(host).popen(
            list(argv), cwd=str(REPO_ROOT))
        return self.track(proc, host)

    def track(self, proc: subprocess.Popen[bytes], name: str) -> subprocess.Popen[bytes]:
        """Tracks a process started elsewhere (train.launch's ``nsenter`` processes): it is
        recorded in ``pids.json`` and killed by :meth:`stop`."""
        self._procs[:] = [p for p in self._procs if p.poll() is None]
        self._procs.append(proc)
        rundir = getattr(self.network, "rundir", None)
        if rundir is not None:
            rundir.record_process(name, "in-host", proc.pid)
        return proc

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The tracked processes still running."""
        return [p for p in self._procs if p.poll() is None]

    def run_processes(self, commands: Commands, timeout_s: float) -> dict[str, Rows]:
        """Starts every command (key -> (host, argv)), waits for all against one deadline and
        returns what each printed (:func:`collect_rows`); whatever still runs afterwards --
        also after an error or Ctrl-C while waiting -- is killed."""
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for key, (host, argv) in commands.items():
                procs[key] = self.popen(host, argv)
            return collect_rows(procs, timeout_s)
        finally:
            kill_all(procs.values())

    # ------------------------------------------------------------------ measuring
    def snapshot(self, counters_from: CounterReader | None = None) -> Snapshot:
        """Port counters (read through ``counters_from``, default the controller), switch CPU
        seconds and the machine's CPU ticks, now."""
        source = counters_from if counters_from is not None else self.controller
        return Snapshot(port_counters(source), switch_cpu_seconds(self._running()),
                        machine_ticks(), time.monotonic())


def _stage(stages: StageDisplay | None, title: str) -> AbstractContextManager[None]:
    if stages is None:
        return nullcontext()
    return stages.stage(title)
