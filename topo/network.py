"""Start an emulated network and always take it down again.

``with start_network(SpineLeafTopo(), "softswitch", program="p4src/netreduce.p4") as network: ...``
builds Mininet without an OpenFlow controller (the switches are P4Runtime switches; hosts
connect to them directly), starts every switch process and waits until each answers on gRPC,
writes ``topology.json`` and ``pids.json`` into the run directory, and on leaving the block --
also after an exception or Ctrl-C, and when starting fails half-way -- stops the switch
processes by pid, lets Mininet remove its hosts' namespaces and links, and deletes whatever
``<switch>-eth*`` interface is still left.

Link delays are held by netem where the kernel has it, else by the switches (the built-in
target's delay line), else by delay nodes on the delayed links (:mod:`topo.delaynodes`; also
when ``delay_nodes=True`` forces them); the delay nodes' processes are started, recorded
and stopped like the switches'.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from mininet.net import Mininet

from softswitch.timing import SwitchTiming
from topo import cluster as clustering
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.delaynodes import (
    DelayMechanism,
    DelayNode,
    DelayNodePlan,
    delay_mechanism,
    has_delays,
    plan_delay_nodes,
    with_delay_nodes,
)
from topo.errors import NetworkError, TopologyError
from topo.forkserver import ForkServer, ForkServerError
from topo.forkserver import enabled as forkserver_enabled
from topo.links import ShapedLink, check_link_shapes, netem_available, shaping_warning
from topo.model import Topology, describe
from topo.nodes import (
    DEFAULT_START_TIMEOUT_S,
    TARGETS,
    P4Switch,
    ProcessNode,
    ProgramBuild,
    SoftSwitch,
    TestbedHost,
    check_egress_order,
    check_engine,
    choose_target,
    ephemeral_ports,
    port_in_use,
)
from topo.rundir import RunDir
from topo.topologies import TestbedTopo
from vtime import VirtualClock

log = logging.getLogger(__name__)


class Stages:
    """Progress display of the start-up stages: a rich spinner and a tick per stage on a
    terminal, log lines otherwise (``enabled=False``: log lines only)."""

    def __init__(self, enabled: bool = True) -> None:
        self.console: Any = None
        if enabled:
            from rich.console import Console

            self.console = Console(stderr=True)
        self.done: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def stage(self, title: str) -> Iterator[None]:
        """Shows ``title`` while the block runs, then how long it took (or that it failed)."""
        t0 = time.monotonic()
        log.info("%s ...", title)
        status = (
            self.console.status(f"{title} ...")
            if self.console is not None and self.console.is_terminal
            else contextlib.nullcontext()
        )
        try:
            with status:
                yield
        except BaseException:
            if self.console is not None:
                self.console.print(f"[red]✗[/red] {title}")
            raise
        dt = time.monotonic() - t0
        self.done.append((title, dt))
        log.info("%s: done in %.1f s", title, dt)
        if self.console is not None:
            self.console.print(f"[green]✓[/green] {title} [dim]({dt:.1f} s)[/dim]")

    def note(self, message: str) -> None:
        """An informative line."""
        log.info("%s", message)
        if self.console is not None:
            self.console.print(message, highlight=False)

    def warn(self, message: str) -> None:
        """A warning the user must see (on the console when there is one, else the log)."""
        if self.console is None:
            log.warning("%s", message)
            return
        log.info("warning: %s", message)
        self.console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


@dataclass
class Network:
    """A running emulated network (use as a context manager; :meth:`stop` is idempotent)."""

    net: Mininet
    topo: TestbedTopo
    topology: Topology
    rundir: RunDir
    switch_class: type[P4Switch]
    target_description: str
    warnings: list[str] = field(default_factory=list)
    forkserver: ForkServer | None = None  # the switches' (built-in target), if any
    cluster: clustering.ClusterPlan | None = None  # where the nodes run (None: here)
    _stopped: bool = False

    def __enter__(self) -> Network:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def switches(self) -> list[P4Switch]:
        """The switch nodes, in device-id order."""
        return sorted(
            (s for s in self.net.switches if isinstance(s, P4Switch)), key=lambda s: s.device_id
        )

    @property
    def hosts(self) -> list[TestbedHost]:
        """The host nodes, in topology order."""
        order = {h.name: i for i, h in enumerate(self.topology.hosts)}
        return sorted(self.net.hosts, key=lambda h: order.get(h.name, len(order)))

    @property
    def delay_nodes(self) -> list[DelayNode]:
        """The delay nodes (none unless link delays needed them), by name."""
        return sorted((s for s in self.net.switches if isinstance(s, DelayNode)),
                      key=lambda s: s.name)

    def node(self, name: str) -> Any:
        """A Mininet node by name."""
        return self.net.get(name)

    def stop(self) -> None:
        """Stops switches, delay nodes, hosts and links; removes leftover interfaces."""
        if self._stopped:
            return
        self._stopped = True
        teardown(self.net, [s["name"] for s in _switch_infos(self.topo)]
                 + [n.name for n in self.delay_nodes], self.forkserver)


def _switch_infos(topo: TestbedTopo) -> list[dict[str, Any]]:
    return [dict(topo.nodeInfo(n), name=n) for n in topo.switches()]


def teardown(net: Mininet, switch_names: list[str],
             forkserver: ForkServer | None = None) -> None:
    """Best-effort stop of everything ``net`` started; never raises (logs instead).
    ``switch_names``: the root-namespace nodes (switches, delay nodes) whose leftover
    ``<name>-eth*`` interfaces are removed at the end; ``forkserver`` is stopped after the
    switches."""
    nodes = [s for s in net.switches if isinstance(s, ProcessNode)]
    try:
        ProcessNode.stop_processes(nodes)
    except Exception:
        log.exception("stopping switch processes failed")
    clustering.stop_remote_processes(net.hosts)
    if forkserver is not None:
        try:
            forkserver.close()
        except Exception:
            log.exception("stopping the fork server failed")
    try:
        net.stop()
    except Exception:
        log.exception("Mininet stop failed")
    left = remove_interfaces(switch_interfaces(switch_names))
    left += clustering.remove_remote_interfaces(net.switches)
    if left:
        log.info("removed leftover interfaces: %s", ", ".join(left))


def bundle_device_config(build: ProgramBuild, builddir: Path) -> ProgramBuild:
    """For the built-in target, whose device config is P4 source: a self-contained bundle of
    the program and every file it includes (``build/<stem>.device_config.json``), so that a
    controller can push a multi-file program such as netreduce.p4. Other builds unchanged."""
    config = build.device_config
    if config is None or config.suffix != ".p4":
        return build
    from softswitch.device_config import DeviceConfigError, make_device_config

    try:
        data = make_device_config(config)
    except DeviceConfigError as exc:
        raise NetworkError(f"{config}: cannot bundle the device config: {exc}") from None
    out = builddir / f"{config.stem}.device_config.json"
    out.write_bytes(data)
    return replace(build, device_config=out.resolve())


def preflight(topo: TestbedTopo, extra_nodes: Iterable[str] = ()) -> None:
    """Refuses to start over leftovers of an earlier run: interfaces of the switches (and of
    ``extra_nodes``, the delay nodes) that exist already, gRPC ports already taken."""
    if os.geteuid() != 0:
        raise NetworkError(
            "starting a network needs root (Mininet creates network namespaces "
            "and veth pairs); run with sudo"
        )
    infos = _switch_infos(topo)
    existing = switch_interfaces([i["name"] for i in infos] + list(extra_nodes))
    if existing:
        raise NetworkError(
            f"interface(s) {', '.join(existing[:4])} already exist: leftovers of an earlier run "
            "(or another network with the same switch names); `make clean` removes them"
        )
    for info in infos:
        if port_in_use(info["grpc_host"], info["grpc_port"]):
            raise NetworkError(
                f"switch {info['name']}: gRPC address {info['grpc_host']}:{info['grpc_port']} "
                "is already in use (a switch left over from an earlier run? `make clean`)"
            )
    low, high = ephemeral_ports()
    clients = [f"{i['name']} ({i['grpc_port']})" for i in infos
               if low <= i["grpc_port"] <= high]
    if clients:
        log.warning("gRPC port(s) of %s lie in the kernel's client port range %d-%d: a client "
                    "socket may take one before its switch binds it; a base port below %d "
                    "avoids that", ", ".join(clients[:4]), low, high, low)


def _record_shells(net: Mininet, rundir: RunDir) -> None:
    for host in net.hosts:
        if host.shell is not None:
            rundir.record_process(host.name, "host-shell", host.pid)
    for sw in net.switches:
        if sw.shell is not None:
            kind = "wire-shell" if isinstance(sw, DelayNode) else "switch-shell"
            rundir.record_process(sw.name, kind, sw.pid)


def port_delays(topo: TestbedTopo) -> dict[str, tuple[dict[int, float], dict[int, float]]]:
    """Where switches must hold packets for the links' propagation delays (emulated s), when
    no netem does: {switch: (egress {port: delay}, ingress {port: delay})}. A link between two
    switches is delayed once each way by each end's egress; a host's link by its switch's
    egress (towards the host) and ingress (from it), since a host cannot."""
    out: dict[str, tuple[dict[int, float], dict[int, float]]] = {}
    for _a, _b, info in topo.links(sort=True, withInfo=True):
        delay = info.get("delay_s")
        if not delay:
            continue
        ends = ((info["node1"], int(info["port1"]), info["node2"]),
                (info["node2"], int(info["port2"]), info["node1"]))
        for node, port, peer in ends:
            if not topo.isSwitch(node):
                continue
            egress, ingress = out.setdefault(node, ({}, {}))
            egress[port] = float(delay)
            if not topo.isSwitch(peer):
                ingress[port] = float(delay)
    return out


def delay_nodes_needed(target: str | type[P4Switch], delayed: bool,
                       forced: bool = False) -> bool:
    """True when a run on ``target`` (a name, ``auto`` or a switch class) whose links have
    delays (``delayed``) will put delay nodes on them: no netem here and a target without a
    delay line, or ``forced``. The calibration measures with delay nodes when the run will
    have them."""
    if isinstance(target, str):
        cls = choose_target("auto")[0] if target == "auto" else TARGETS.get(target)
        if cls is None:
            return False
    else:
        cls = target
    mechanism = delay_mechanism(delayed, netem_available(), cls.delay_line, forced)
    return mechanism is DelayMechanism.DELAY_NODES


def start_network(
    topo: TestbedTopo,
    target: str | type[P4Switch] = "softswitch",
    rundir: RunDir | str | Path | None = None,
    program: str | Path | None = None,
    *,
    pcap: bool = False,
    preload: bool = False,
    log_level: str = "info",
    start_timeout: float = DEFAULT_START_TIMEOUT_S,
    progress: bool = True,
    egress_order: str = "sync",
    seed: int | None = None,
    tdf: float = 1.0,
    delay_nodes: bool = False,
    engine: str | None = None,
    io: str | None = None,
    forkserver: bool = True,
    cluster: clustering.ClusterSpec | None = None,
) -> Network:
    """Builds and starts ``topo`` on ``target`` and returns the running :class:`Network`.

    ``program`` is compiled for the target into ``<rundir>/build`` (P4Info, device config);
    the switches start empty (``--no-p4``) unless ``preload``, so a controller pushes the
    pipeline. ``egress_order`` (built-in target: sync, fifo, random) and ``seed`` (of random;
    each switch adds its device id) go to every switch process. ``tdf`` dilates time: the
    links carry their emulated rate / tdf and hold their delay * tdf, and the switches'
    clocks run tdf times slower (where the target allows). Link delays are netem's, else the
    switches' (built-in target), else delay nodes' (:mod:`topo.delaynodes`);
    ``delay_nodes`` forces delay nodes. ``engine`` (python or c) and ``io`` (the packet
    loop, c or python) go to every built-in switch (None: the switch's own default); with
    the C engine the program's C data path is compiled once here, before the switches
    start, and they all load that one. Built-in switches are forked from one fork server
    (``forkserver``, unless ``$INA_FORKSERVER`` is off) that loaded the program once for
    all of them (:mod:`topo.forkserver`). ``cluster``: the nodes run on these servers
    (:mod:`topo.cluster`; no fork server then: each switch starts on its server). Raises a
    :class:`~topo.errors.TopoError` (after cleaning up) when anything fails.
    """
    if not isinstance(topo, TestbedTopo):
        raise TopologyError(f"expected a TestbedTopo, got {type(topo).__name__}")
    clock = VirtualClock(tdf)  # the emulated clock the links are shaped for
    check_link_shapes(topo.requested_shapes(), clock)
    stages = Stages(progress)
    switch_cls, description = _resolve_target(target)
    stages.note(f"target: {description}")
    _check_switch_options(stages, switch_cls, egress_order, seed, engine, io)
    netem = netem_available()
    mechanism = delay_mechanism(has_delays(topo), netem, switch_cls.delay_line, delay_nodes)
    delays = port_delays(topo) if mechanism is DelayMechanism.SWITCHES else {}
    plans = plan_delay_nodes(topo) if mechanism is DelayMechanism.DELAY_NODES else []
    placed = _cluster_plan(stages, topo, cluster, plans)
    forkserver = forkserver and placed is None  # each switch starts on its server
    preflight(topo, [p.name for p in plans])
    if not isinstance(rundir, RunDir):
        rundir = RunDir.create(rundir)
    warnings = _shaping_warnings(topo, stages, mechanism, plans, netem, switch_cls,
                                 delayed_elsewhere=bool(delays or plans))
    build = _compile_program(stages, switch_cls, program, rundir)
    fork = None
    if forkserver and issubclass(switch_cls, SoftSwitch) and forkserver_enabled():
        fork = _launch_forkserver(switch_cls, rundir, build, log_level=log_level,
                                  egress_order=egress_order, tdf=tdf, engine=engine)
    if build is not None and engine == "c" and fork is None:  # the fork server's load does it
        _prepare_engine(stages, switch_cls, build, engine)
    extra: dict[str, Any] = {"forkserver": fork} if fork is not None else {}
    host_factory, link_factory, node_cls = _node_factories(cluster, switch_cls, netem, clock)
    switch_factory = functools.partial(
        node_cls,
        **extra,
        rundir=rundir,
        build=build,
        preload=preload,
        pcap=pcap,
        log_level=log_level,
        start_timeout=start_timeout,
        egress_order=egress_order,
        seed=seed,
        tdf=tdf,
        port_delays=delays,
        engine=engine,
        io=io,
    )
    build_topo = topo
    if plans:
        build_topo = with_delay_nodes(topo, plans, functools.partial(
            DelayNode, rundir=rundir, tdf=tdf, log_level=log_level,
            start_timeout=start_timeout))
    net = _create_mininet(build_topo, switch_factory, host_factory, link_factory, fork)
    switch_names = [i["name"] for i in _switch_infos(topo)]
    node_names = switch_names + [p.name for p in plans]
    try:
        with stages.stage(
            f"creating {len(topo.hosts())} hosts, {len(switch_names)} switches, "
            f"{len(topo.links())} links"
        ):
            try:
                net.build()
            finally:
                _record_shells(net, rundir)
        topology = _describe_run(topo, switch_cls, build, rundir, netem=netem, tdf=tdf,
                                 delay_line=bool(delays), delay_nodes=bool(plans))
        _set_static_arp(stages, net, topology)
        if fork is not None:
            _wait_forkserver(stages, fork, start_timeout, switch_cls, build, engine)
        _start_nodes(stages, net, switch_cls, len(switch_names), len(plans))
        rundir.write_topology(topology)
        if placed is not None:
            clustering.write_plan(placed, rundir.path)
    except BaseException:
        teardown(net, node_names, fork)
        raise
    return Network(net, topo, topology, rundir, switch_cls, description, warnings, fork,
                   placed)


def _cluster_plan(stages: Stages, topo: TestbedTopo, cluster: clustering.ClusterSpec | None,
                  plans: list[DelayNodePlan]) -> clustering.ClusterPlan | None:
    """Where each node runs when ``cluster`` names servers (noted in the summary); None
    on one machine."""
    if cluster is None:
        return None
    if plans:
        raise NetworkError("delay nodes cannot run across servers: use netem or the "
                           "built-in target's delay line")
    placed = clustering.plan(topo, cluster)
    for line in placed.summary_lines():
        stages.note(line)
    return placed


def _node_factories(cluster: clustering.ClusterSpec | None, switch_cls: type[P4Switch],
                    netem: bool, clock: VirtualClock) -> tuple[Any, Any, Any]:
    """(host class, link class, switch class) for Mininet: ours, or on a cluster their
    remote variants (:func:`topo.cluster.cluster_classes`)."""
    if cluster is None:
        return TestbedHost, functools.partial(ShapedLink, netem=netem, clock=clock), switch_cls
    parts = clustering.cluster_classes(cluster, switch_cls, netem, clock)
    return parts.host, parts.link, functools.partial(parts.switch,
                                                     ssh_options=cluster.ssh_options)


def _resolve_target(target: str | type[P4Switch]) -> tuple[type[P4Switch], str]:
    """The switch class for ``target`` (a name, ``auto`` or a class) and how to name it."""
    if isinstance(target, str):
        return choose_target(target)
    return target, f"{target.target} (given)"


def _check_switch_options(stages: Stages, switch_cls: type[P4Switch], egress_order: str,
                          seed: int | None, engine: str | None, io: str | None) -> None:
    """Refuses options the target cannot take; notes the engine and egress order chosen."""
    check_egress_order(switch_cls, egress_order, seed)
    check_engine(switch_cls, engine, io)
    if engine is not None and switch_cls.target == "softswitch":
        stages.note(f"engine: {engine}" + (f", packet loop {io}" if io is not None else ""))
    if egress_order != "sync":
        stages.note(
            f"egress order: {egress_order}" + (f", seed {seed}" if seed is not None else "")
        )


def _shaping_warnings(topo: TestbedTopo, stages: Stages, mechanism: DelayMechanism,
                      plans: list[DelayNodePlan], netem: bool, switch_cls: type[P4Switch],
                      *, delayed_elsewhere: bool) -> list[str]:
    """Notes what carries the links' delays (the switches or delay nodes, when
    ``delayed_elsewhere``, so the links themselves carry none), and returns the warning
    about the shaping the links cannot do (shown as it is found), if any."""
    warnings = []
    shapes = topo.requested_shapes()
    if delayed_elsewhere:  # the switches or the delay nodes carry the delays
        shapes = [replace(s, delay_s=None) for s in shapes]
        stages.note(_delay_note(mechanism, plans, netem, switch_cls))
    warning = shaping_warning(shapes, netem)
    if warning:
        stages.warn(warning)
        warnings.append(warning)
    return warnings


def _compile_program(stages: Stages, switch_cls: type[P4Switch], program: str | Path | None,
                     rundir: RunDir) -> ProgramBuild | None:
    """``program`` compiled for the target into the run directory's build, its device
    config bundled; None without a program."""
    if program is None:
        return None
    with stages.stage(f"compiling {program} for {switch_cls.target}"):
        build = switch_cls.compile_program(Path(program), rundir.build)
        build = bundle_device_config(build, rundir.build)
    return build


def _create_mininet(build_topo: Any, switch_factory: Callable[..., P4Switch],
                    host_factory: Any, link_factory: Any, fork: ForkServer | None) -> Mininet:
    """The Mininet network, not yet built; the fork server is closed if that fails."""
    try:
        return Mininet(
            topo=build_topo,
            switch=switch_factory,
            host=host_factory,
            link=link_factory,
            controller=None,
            build=False,
            autoSetMacs=False,
            autoStaticArp=False,
        )
    except BaseException:
        if fork is not None:
            fork.close()
        raise


def _describe_run(topo: TestbedTopo, switch_cls: type[P4Switch], build: ProgramBuild | None,
                  rundir: RunDir, *, netem: bool, tdf: float, delay_line: bool,
                  delay_nodes: bool) -> Topology:
    """The running network's description (what ``topology.json`` records)."""
    return describe(
        topo,
        target=switch_cls.target,
        program=str(build.source) if build else None,
        p4info=str(build.p4info) if build and build.p4info else None,
        device_config=str(build.device_config) if build and build.device_config else None,
        netem=netem,
        tdf=tdf,
        delay_line=delay_line,
        delay_nodes=delay_nodes,
        rundir=str(rundir.path),
        log_dir=str(rundir.logs),
    )


def _set_static_arp(stages: Stages, net: Mininet, topology: Topology) -> None:
    """Every host knows every other host's MAC, so no ARP crosses the P4 switches."""
    with stages.stage("configuring hosts (static ARP)"):
        for host in net.hosts:
            host.set_static_arp((h.ip, h.mac) for h in topology.hosts if h.name != host.name)


def _start_nodes(stages: Stages, net: Mininet, switch_cls: type[P4Switch], switches: int,
                 delay_nodes: int) -> None:
    """Starts the switches (and delay nodes), each waited for until it is ready."""
    started = f"starting {switches} {switch_cls.target} switches"
    if delay_nodes:
        started += f" and {delay_nodes} delay nodes"
    with stages.stage(started):
        net.start()


def _prepare_engine(stages: Stages, switch_cls: type[P4Switch], build: ProgramBuild,
                    engine: str) -> None:
    """The C data path compiled once for every switch (see ``prepare_engine``)."""
    with stages.stage("compiling the C data path (shared by every switch)"):
        note = switch_cls.prepare_engine(build, engine)
    if note:
        stages.note(note)


def _wait_forkserver(stages: Stages, fork: ForkServer, timeout: float,
                     switch_cls: type[P4Switch], build: ProgramBuild | None,
                     engine: str | None) -> None:
    """Waits for the fork server's load (it began before Mininet built the network); when
    it fails the switches start as processes of their own, the C data path compiled first
    as without a fork server."""
    title = "fork server: loading the program once for every switch"
    if build is not None and engine == "c":
        title = "fork server: compiling the C data path and loading the program once"
    try:
        with stages.stage(title):
            note = fork.wait_ready(timeout)
    except ForkServerError as exc:
        fork.give_up(str(exc))  # the one line that says so
        if build is not None and engine == "c":
            _prepare_engine(stages, switch_cls, build, engine)
        return
    stages.note(f"fork server: {note}")


def _launch_forkserver(switch_cls: type[SoftSwitch], rundir: RunDir, build: ProgramBuild | None,
                       *, log_level: str, egress_order: str, tdf: float,
                       engine: str | None) -> ForkServer | None:
    """The network's fork server (:mod:`topo.forkserver`), loading the program its
    controller will push with the switches' options, or None (logged) when it cannot run."""
    flags = ["-L", log_level, *SwitchTiming(tdf).argv()]
    if egress_order != "sync":
        flags += ["--egress-order", egress_order]
    if engine is not None:
        flags += ["--engine", engine]
    config = build.device_config if build is not None else None
    try:
        fork = ForkServer.launch(switch_cls.python, rundir.log_path("forkserver"), config, flags)
    except ForkServerError as exc:
        log.warning("fork server: %s; starting the switches as processes of their own", exc)
        return None
    rundir.record_process("forkserver", "forkserver", fork.proc.pid, fork.proc.pid)
    return fork


def _delay_note(mechanism: DelayMechanism, plans: list[DelayNodePlan], netem: bool,
                switch_cls: type[P4Switch]) -> str:
    """The start-up line that says what holds the link delays."""
    if mechanism is DelayMechanism.SWITCHES:
        return "link delays: held by the switches (no netem in this kernel)"
    if netem or switch_cls.delay_line:
        why = "forced"
    else:
        why = f"no netem in this kernel, and {switch_cls.target} switches cannot hold packets"
    return f"link delays: held by {len(plans)} delay nodes ({why})"
