"""``python -m experiment.run``: the end-to-end demo behind ``make run``.

    python -m experiment.run --topo spineleaf --spines 2 --leaves 2 --hosts 2 --target auto --bw 3M
    python -m experiment.run --topo rack --hosts 4 --no-cli
    python -m experiment.run --topo fattree --param k=2 --no-cli      # or --topo path/to/file.yaml

It starts the network, lets the controller program routing and one aggregation job over all
hosts, runs an in-network and a ring all-reduce of the same tensor (``experiment.session``),
prints a summary (exact or not, time of each, link utilisation, switch CPU, whether each
all-reduce was limited by the emulated links or by a switch process's CPU, and the measured
ring / in-network time ratio beside the ideal ``2(P-1)/P``), then opens the Mininet CLI when
a terminal is attached (and ``--no-cli`` is not given).

The defaults (3 Mbit/s links, 64 elements per aggregation packet, 65536 float32 per worker,
2 credits of 32 packets) keep both all-reduces link-bound on a small machine: see "Link
rates" in docs/topology.md for the arithmetic and the measurement.

Exit status: 0 when every switch came up and every all-reduce result was exact (without a
program: when every switch came up), 1 on a testbed error or an inexact result (printed as
``error: ...``, never a traceback), 2 on bad options, 130 on Ctrl-C. The network is always
taken down on the way out, including on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeAlias

import stackdump
from algorithms import registry
from experiment import calibrate
from experiment.argtypes import choice, int_at_least, seconds_at_least, tdf_option
from experiment.calibrate import CalibrationError
from experiment.dilation import (
    AUTO,
    SETTLE_FACTOR,
    SETTLE_SHARE,
    Dilation,
    default_elements,
    dilated_options,
    settled,
    unsettled_why,
)
from experiment.dilation import resolve as resolve_dilation
from experiment.lifecycle import ExperimentNetwork, StartOptions, interrupt_on_sigterm
from experiment.seams import json_int, json_list, json_object
from experiment.session import BASELINES, AllreduceRun, ExperimentOptions, ExperimentResult
from experiment.session import run_experiment as run_allreduce_experiment
from liveview import add_live_options
from protocol import netreduce as nr_sizes
from topo.cluster import ClusterSpec
from topo.errors import TopoError
from topo.model import Topology
from topo.network import Network, Stages
from topo.nodes import (
    DEFAULT_START_TIMEOUT_S,
    EGRESS_ORDERS,
    ENGINES,
    IO_LOOPS,
    LOG_LEVELS,
    port_accepts,
)
from topo.topofile import TopologySpec, builtin_files, load_spec, resolve
from topo.topologies import DEFAULT_HOST_BW, FileTopo
from vtime import delay_arg, format_delay, format_rate, rate_arg
from workloads.roce import CC_STARTS, SLOW_START

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

log = logging.getLogger(__name__)

#: A topology file parameter's value: a flag's parsed value or a ``--param`` one.
ParamValue: TypeAlias = int | float | str | bool | None

DEFAULT_PROGRAM = Path("p4src/netreduce.p4")
PROGRAM_ELEMS = nr_sizes.PROGRAM_ELEMS  # NR_ELEMS of DEFAULT_PROGRAM; others get a wrapper
# Elements per aggregation packet: the program's own, the most whose tag + payload fit RoCE's
# 1024-byte path MTU (252: 1008-byte payloads, 94 % of a host-link frame).
DEFAULT_ELEMS = PROGRAM_ELEMS
DEFAULT_ELEMENTS = 65536  # float32 per worker: ~1 s per all-reduce at 3 Mbit/s
# The job's window (credits x msg_pkts packets) must cover the round trip at the link rate:
# the old 2 x 32 packets of 346 bytes (22 KB) over a ~50 ms round trip on this loaded 2-core
# machine was the in-network path's ~4 Mbit/s ceiling (docs/benchmarks.md, findings).
DEFAULT_CREDITS = 4
DEFAULT_SLOTS = 256  # msg_pkts = 64: 256 packets in flight, 285 KB at E = 252
# A run is link-bound when its busiest link carried at least this share of its shaped rate
# and no switch process was saturated (topo.measure.CPU_SATURATED).
LINK_BOUND_RUN_UTILIZATION = 0.7


@dataclass(frozen=True)
class SwitchStatus:
    """Whether one switch is up."""

    name: str
    device_id: int
    grpc_addr: str
    pid: int | None
    ready: bool
    detail: str


@dataclass(frozen=True)
class Summary:
    """What :func:`run_experiment` found/did; ``ok`` decides the exit status."""

    topology: Topology
    switches: tuple[SwitchStatus, ...]
    notes: tuple[str, ...] = ()
    experiment: ExperimentResult | None = None
    options: ExperimentOptions | None = None
    engine: str | None = None  # the built-in switches' packet engine (None: another target)

    @property
    def ok(self) -> bool:
        """Every switch up and, when an experiment ran, every all-reduce exact."""
        up = bool(self.switches) and all(s.ready for s in self.switches)
        return up and (self.experiment is None or self.experiment.exact)


def check_switches(network: Network) -> tuple[SwitchStatus, ...]:
    """Each switch: process alive and gRPC port accepting connections."""
    out = []
    for sw in network.switches:
        alive = sw.is_running()
        answers = alive and port_accepts(sw.grpc_host, sw.grpc_port)
        detail = "ready" if answers else ("gRPC port closed" if alive else "process exited")
        out.append(SwitchStatus(sw.name, sw.device_id, sw.grpc_addr,
                                sw.proc.pid if sw.proc else None, answers, detail))
    return tuple(out)


def started(network: ExperimentNetwork | Network) -> Network:
    """The Mininet network of a run (the lifecycle's, which ``make run`` starts with
    :func:`topo.network.start_network`), for what only it has: switch processes, warnings,
    the Mininet CLI."""
    net = network.network if isinstance(network, ExperimentNetwork) else network
    if not isinstance(net, Network):
        raise TypeError(f"not a running topo.network.Network: {net!r}")
    return net


def run_experiment(network: ExperimentNetwork | Network, topology: Topology,
                   options: ExperimentOptions | None = None, stages: Stages | None = None,
                   experiment: bool = True) -> Summary:
    """The experiment step of a run: switch readiness, then (when the switches got a program
    and ``experiment``) controller programming and the all-reduces of ``experiment.session``
    (on the lifecycle, or on one around a network started elsewhere). Raises
    :class:`~experiment.session.ExperimentError` when the fabric cannot be programmed."""
    net = started(network)
    switches = check_switches(net)
    notes = tuple(net.warnings)
    if not experiment or topology.p4info is None or not all(s.ready for s in switches):
        return Summary(topology, switches, notes)
    result = run_allreduce_experiment(network, options, stages)
    return Summary(topology, switches, result.notes, result, options)


#: ``make run`` flags that set a topology file's parameter of the same meaning.
FLAG_PARAMS = {"spines": "spines", "leaves": "leaves", "hosts": "hosts", "gpus": "gpus",
               "bw": "bw", "fabric_bw": "fabric_bw", "delay": "delay", "loss": "loss",
               "intra_bw": "intra_bw"}
RATE_FLAGS = ("bw", "fabric_bw", "intra_bw")  # parsed to bits/s
DELAY_FLAGS = ("delay",)  # parsed to seconds


def file_value(flag: str, value: float) -> float | str:
    """A flag's parsed value as the topology file reads it: a rate as a number of Mbit/s
    (what a bare number means there), a delay as microseconds with the unit."""
    if flag in RATE_FLAGS:
        return value / 1e6
    if flag in DELAY_FLAGS:
        return f"{value * 1e6:.12g}us"
    return value


def topology_params(args: argparse.Namespace, spec_params: Sequence[str]
                    ) -> dict[str, ParamValue]:
    """The file's parameters the options set: ``--param NAME=VALUE`` and the named flags
    (``--spines`` sets ``spines``...). A flag the file has no parameter for is an error."""
    params: dict[str, ParamValue] = {}
    for flag, name in FLAG_PARAMS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        if name not in spec_params:
            raise TopoError(f"--{flag.replace('_', '-')}: topology {args.topo} has no parameter "
                            f"{name!r} (its parameters: {', '.join(spec_params) or 'none'})")
        params[name] = file_value(flag, value)
    for item in args.param or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise TopoError(f"--param {item!r}: expected NAME=VALUE")
        params[name.strip()] = _param_value(value.strip())
    return params


def _param_value(text: str) -> ParamValue:
    """``--param`` values: null/none, true/false, integers and floats, else the text."""
    if text.lower() in ("null", "none"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def load_topology_spec(args: argparse.Namespace) -> TopologySpec:
    """The topology file the options name (shipped name or path), parameters applied."""
    path = resolve(args.topo)
    declared = load_spec(path).params  # the defaults: tells which parameters exist
    return load_spec(path, topology_params(args, list(declared)))


def build_topology(args: argparse.Namespace) -> FileTopo:
    """The topology the options ask for."""
    ports: dict[str, int] = {}
    if args.grpc_port is not None:
        ports["grpc_base_port"] = args.grpc_port
    if args.thrift_port is not None:
        ports["thrift_base_port"] = args.thrift_port
    return FileTopo(load_topology_spec(args), name_prefix=args.name_prefix, **ports)


def print_summary(summary: Summary, network: Network, console: Console) -> None:
    """Tables of switches and hosts, then where things are."""
    from rich.table import Table

    topo = summary.topology
    console.print(_switch_table(summary))
    host_table = Table(title="hosts", title_justify="left")
    for col in ("host", "IP", "MAC", "attached", "GPUs"):
        host_table.add_column(col)
    for h in topo.hosts:
        host_table.add_row(h.name, f"{h.ip}/{h.prefix_len}", h.mac,
                           f"{h.switch} port {h.switch_port}", str(h.gpus))
    console.print(host_table)
    console.print(f"links: {links_line(topo)}; netem: {'yes' if topo.netem else 'no'}",
                  highlight=False)
    placed = getattr(network, "cluster", None)  # a run across servers (topo.cluster)
    if placed is not None:
        for line in placed.summary_lines():
            console.print(line, highlight=False)
    if summary.experiment is not None:
        elems = summary.options.elems if summary.options is not None else None
        print_experiment(summary.experiment, console, elems)
    console.print(f"run directory: {network.rundir.path} (topology.json, logs/, pids.json)")
    if topo.p4info:
        console.print(f"P4Info: {topo.p4info}")
    if summary.experiment is not None and summary.experiment.path:
        console.print(f"results: {summary.experiment.path}")
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def _switch_table(summary: Summary) -> Table:
    """The summary's table of switches: role, device id, gRPC address, ports, pid, status."""
    from rich.table import Table

    topo = summary.topology
    title = f"{topo.kind} on {topo.target}"
    if summary.engine is not None:
        title += f" ({summary.engine} engine)"
    sw_table = Table(title=title, title_justify="left")
    for col in ("switch", "role", "device", "gRPC", "ports", "pid", "status"):
        sw_table.add_column(col, no_wrap=col in ("gRPC", "status"))
    for status in summary.switches:
        rec = topo.switch(status.name)
        ports = " ".join(f"{p.port}:{p.peer}" for p in rec.ports)
        mark = "[green]ready[/green]" if status.ready else f"[red]{status.detail}[/red]"
        sw_table.add_row(rec.name, f"{rec.role} {rec.index}", str(rec.device_id), rec.grpc_addr,
                         ports, str(status.pid or "-"), mark)
    return sw_table


def links_line(topology: Topology) -> str:
    """``host 100 Gbit/s delay 2 us, fabric 25 Gbit/s``: each class of links with its
    emulated rate, delay and loss."""
    parts = []
    for c in sorted(topology.link_classes(), key=lambda c: (c["kind"], c["bw_bps"] or 0)):
        text = f"{c['kind']} {c['bw']}"
        if c["delay"]:
            text += f" delay {c['delay']}"
        if c["loss"]:
            text += f" loss {c['loss']:g}%"
        parts.append(text)
    return ", ".join(parts) or "none"


def bottleneck(run: AllreduceRun) -> tuple[bool, str]:
    """(link-bound?, verdict) for one all-reduce: "link-bound" when its busiest link ran at
    >= LINK_BOUND_RUN_UTILIZATION of the shaped rate and no switch process was saturated;
    else "CPU-bound" (naming the saturated switches) or "not link-bound" (latency, host CPU
    or the transport's window limited it); "CPU-bound" too when the switches together kept the
    machine's cores busy."""
    if run.saturated_switches:
        return False, f"CPU-bound ({', '.join(run.saturated_switches)})"
    if run.switches_fill_machine:
        return False, (f"CPU-bound (switches {run.switches_cores:.1f} of "
                       f"{run.machine_cores} cores)")
    busy = run.busiest
    util = busy.utilization if busy is not None else None
    if util is None:
        return False, "not link-bound (links unshaped)"
    if util >= LINK_BOUND_RUN_UTILIZATION:
        return True, "link-bound"
    return False, f"not link-bound (busiest link {util:.0%})"


def ideal_ratio(workers: int, elems: int | None = None, spine: bool = False,
                msg_pkts: int = DEFAULT_SLOTS // DEFAULT_CREDITS,
                window: int = DEFAULT_SLOTS, roce: bool = False) -> tuple[float, float | None]:
    """The ideal ring / in-network time ratio ``2(P-1)/P`` for ``workers`` = P (ring sends
    2(P-1)/P of the tensor per worker, in-network all of it once), and, with ``elems`` (E),
    the same corrected for frame sizes (``sim.emulation``'s packet formats): the ring's TCP
    segments (``roce``: its RoCE packets) against the aggregation packets on in-network's
    busiest link, the leaf-spine link when the job has a ``spine`` level, else the host
    link."""
    from sim.emulation import ina_payload_share, tcp_payload_share
    from workloads.rocecomm import payload_share

    ideal = 2 * (workers - 1) / workers if workers > 0 else 0.0
    if elems is None:
        return ideal, None
    agg = ina_payload_share(elems, msg_pkts, window, spine)
    return ideal, ideal * agg / (payload_share() if roce else tcp_payload_share())


def ratio_line(result: ExperimentResult, elems: int | None = None) -> str | None:
    """"ring / in-network: measured X (ideal 2(P-1)/P = Y, Z with frame sizes)" when both
    ran and were exact (the ring on whichever transport ran); None otherwise."""
    by_algo = {run.algorithm: run for run in result.runs}
    name = next((b for b in BASELINES.values() if b in by_algo), BASELINES[registry.TCP])
    ring, inn = by_algo.get(name), by_algo.get("innetwork")
    if ring is None or inn is None or not (ring.exact and inn.exact) or inn.seconds <= 0:
        return None
    workers = len(inn.ranks)
    job = result.job
    spine = any(json_object(part).get("role") == "leaf"
                for part in json_object(job.get("parts")).values())
    msg_pkts = json_int(job.get("msg_pkts", DEFAULT_SLOTS // DEFAULT_CREDITS))
    window = json_int(job.get("credits", DEFAULT_CREDITS)) * msg_pkts
    roce = name == BASELINES[registry.ROCE]
    ideal, framed = ideal_ratio(workers, elems, spine, msg_pkts, window, roce=roce)
    text = (f"{name} / in-network time: {ring.seconds / inn.seconds:.2f} measured, ideal "
            f"2(P-1)/P = {ideal:.2f} for P = {workers}")
    if framed is not None:
        where = "leaf-spine" if spine else "host-link"
        text += f" ({framed:.2f} counting frame sizes at E = {elems}, {where} packets)"
    return text


def rtt_line(result: ExperimentResult) -> str | None:
    """"smallest round trips (emulated): innetwork X, ring-roce Y" for the runs whose
    transport samples them (RoCE, in-network); None when none did. Far above the path's
    own round trip, the machine's latency shows in emulated time: a larger TDF shrinks it."""
    parts = [f"{run.algorithm} {format_delay(run.smallest_rtt)}" for run in result.runs
             if run.smallest_rtt > 0]
    if not parts:
        return None
    return "smallest round trips sampled (emulated): " + ", ".join(parts)


def time_cell(run: AllreduceRun) -> str:
    """The collective's emulated time, with the real time beside it when dilated."""
    text = format_delay(run.seconds)
    if run.tdf != 1:
        text += f" ({run.seconds * run.tdf:.3g} s real)"
    return text


def retransmissions_cell(run: AllreduceRun) -> str:
    """RoCE retransmissions (in-network, RoCE ring), and how many losses the transport saw
    behind them (NAKs and timeouts that were not spurious); "-" for the TCP ring (the
    kernel's are not counted)."""
    if run.algorithm == BASELINES[registry.TCP]:
        return "-"
    retx = sum(r.retransmissions for r in run.ranks)
    lost = sum(r.loss_seen for r in run.ranks)
    if not retx:
        return "0"
    return f"{retx} ({lost} losses)" if lost else f"{retx} (spurious)"


def print_experiment(result: ExperimentResult, console: Console, elems: int | None = None) -> None:
    """One row per all-reduce: exact, time, busiest link, busiest switch process, and what
    limited it; then the measured ring / in-network ratio beside the ideal, the link check
    and the fabric links' rates. ``elems`` (E of the program) adds the frame-size-corrected
    ideal."""
    from rich.table import Table

    job = result.job
    parts = ", ".join(f"{name} ({json_object(part)['role']})"
                      for name, part in json_object(job.get("parts")).items())
    elements = result.runs[0].elements if result.runs else 0
    console.print(f"aggregation job {job.get('name')} (id {job.get('job_id')}): "
                  f"{len(json_list(job.get('workers')))} workers, {elements} "
                  f"float32 each; switches {parts}", highlight=False)
    table = Table(title="all-reduce", title_justify="left")
    for col in ("algorithm", "result", "time", "retx", "busiest link", "switch CPU", "bottleneck",
                "faithful"):
        # the algorithm's name whole: tests and readers look rows up by it
        table.add_column(col, no_wrap=col == "algorithm", min_width=9 if col == "algorithm"
                         else None)
    flagged = []
    unfaithful = []
    for run in result.runs:
        link_bound, verdict = bottleneck(run)
        if not link_bound:
            flagged.append(f"{run.algorithm} was {verdict}")
        if not run.fidelity.faithful:
            unfaithful.append(f"{run.algorithm}: {run.fidelity.line()}")
        table.add_row(*_run_row(run, link_bound, verdict))
    console.print(table)
    _print_notes(result, console, elems, flagged, unfaithful)
    for run in result.runs:
        _print_fabric_and_errors(run, console)


def _print_notes(result: ExperimentResult, console: Console, elems: int | None, flagged: list[str],
                 unfaithful: list[str]) -> None:
    """Under the table: emulated time, unfaithful runs, the ratio line, runs the links
    did not limit, the link check."""
    tdf = result.runs[0].tdf if result.runs else 1.0
    if tdf != 1:
        console.print(f"times are emulated: the emulated clock ran {tdf:g} times slower than "
                      "real time (time dilation; real time in parentheses)", highlight=False)
    for line in unfaithful:
        console.print(f"[red]unfaithful:[/red] {line}: the machine did not keep up with the "
                      "emulated network; do not publish this comparison", highlight=False)
    ratio = ratio_line(result, elems)
    if ratio is not None:
        console.print(ratio, highlight=False)
    rtts = rtt_line(result)
    if rtts is not None:
        console.print(rtts, highlight=False)
    for flag in flagged:
        console.print(f"[yellow]flag:[/yellow] {flag}: the emulated links did not limit it, so "
                      "its time says little about the algorithm", highlight=False)
    if result.path_check is not None:
        console.print(f"link check: {result.path_check.describe()}", highlight=False)


def _run_row(run: AllreduceRun, link_bound: bool, verdict: str) -> list[str]:
    """One all-reduce's cells: result, time, retransmissions, busiest link, busiest switch
    process, what limited it, faithful."""
    mark = "[green]exact[/green]" if run.exact else "[red]NOT exact[/red]"
    busy = run.busiest
    busiest = "-"
    if busy is not None:
        util = f" {busy.utilization:.0%}" if busy.utilization is not None else ""
        busiest = f"{busy.switch}:{busy.port} {format_rate(busy.bps)}{util}"
    cpu = max(run.switch_cpu.items(), key=lambda kv: kv[1], default=None)
    cpu_text = f"{cpu[0]} {cpu[1]:.0%}" if cpu else "-"
    if run.saturated_switches:
        cpu_text = f"[red]{cpu_text} (saturated)[/red]"
    verdict = f"[green]{verdict}[/green]" if link_bound else f"[red]{verdict}[/red]"
    return [run.algorithm, mark, time_cell(run), retransmissions_cell(run), busiest, cpu_text,
            verdict, "[green]yes[/green]" if run.fidelity.faithful else "[red]NO[/red]"]


def _print_fabric_and_errors(run: AllreduceRun, console: Console) -> None:
    """The fabric links' rates (busier direction) of one all-reduce, and its errors."""
    fabric = [f"{u.switch}:{u.port} {format_rate(u.bps)}" for u in run.links
              if u.kind == "fabric" and (u.tx_bytes or u.rx_bytes)]
    if any(u.kind == "fabric" for u in run.links):
        console.print(f"{run.algorithm}: fabric links (busier direction): "
                      f"{', '.join(fabric) or 'unused'}", highlight=False)
    for err in run.errors:
        console.print(f"[red]{run.algorithm}:[/red] {err}", highlight=False)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    p = _Parser(prog="python -m experiment.run", description=__doc__.splitlines()[0])
    p.add_argument("--topo", default="spineleaf",
                   help=f"a shipped topology ({', '.join(builtin_files())}) or a topology file "
                   "(YAML/JSON, docs/topology.md)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="set a parameter of the topology file (repeatable), e.g. k=2")
    p.add_argument("--spines", type=int, help="spine switches (spineleaf: default 2)")
    p.add_argument("--leaves", type=int, help="leaf switches (spineleaf: default 2)")
    p.add_argument("--hosts", type=int, help="hosts per leaf (spineleaf, default 2) or in the rack "
                   "(default 4)")
    p.add_argument("--gpus", type=int, help="GPUs (workers) per host (default 1)")
    p.add_argument("--target", choices=("auto", "softswitch", "bmv2"),
                   help="switch target (default: the topology file's, else softswitch, the "
                   "built-in target; auto picks BMv2 where installed)")
    p.add_argument("--bw", type=rate_arg, metavar="RATE",
                   help=f"host link rate: 100G, 25G, 500k (k/M/G/T bit/s; a bare number is "
                   f"Mbit/s; default {DEFAULT_HOST_BW})")
    p.add_argument("--fabric-bw", type=rate_arg, metavar="RATE",
                   help="switch-switch link rate (default: --bw)")
    p.add_argument("--delay", type=delay_arg, metavar="DELAY",
                   help="link delay: 2us, 1.5ms (ns/us/ms/s; held by netem, else the switches or "
                        "delay nodes)")
    p.add_argument("--intra-bw", type=rate_arg, metavar="RATE",
                   help="hierarchical jobs' rate between a host's GPUs, e.g. 150GB/s (recorded "
                   "per host in topology.json; default: the workload's)")
    p.add_argument("--loss", type=float, help="link loss in percent (needs netem)")
    prog = p.add_mutually_exclusive_group()
    prog.add_argument("--program", type=Path, help=f"P4 program (default {DEFAULT_PROGRAM} if "
                      "it exists)")
    prog.add_argument("--no-program", action="store_true", help="start the switches empty")
    p.add_argument("--preload", action="store_true",
                   help="start switches with the program loaded instead of --no-p4")
    p.add_argument("--rundir", type=Path, help="run directory (default run/<timestamp>)")
    p.add_argument("--pcap", action="store_true", help="capture every switch port")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    p.add_argument("--egress-order", choices=EGRESS_ORDERS, default="sync",
                   help="built-in target's egress order: sync (default), fifo, or random "
                   "(BMv2-like: ports' egress interleaved, later ingress before earlier egress)")
    p.add_argument("--seed", type=_seed,
                   help="seed of --egress-order random (each switch adds its device id)")
    p.add_argument("--engine", type=choice("--engine", ENGINES), metavar="python|c",
                   help="built-in target's packet engine: the Python reference or the "
                   "compiled C data path, compiled once before the switches start (a program "
                   "it cannot take runs on Python, logged); default $SOFTSWITCH_ENGINE, else "
                   "c")
    p.add_argument("--io", type=choice("--io", IO_LOOPS), metavar="c|python",
                   help="built-in target's packet loop with the C engine: c (the switches' "
                   "default) runs it on a C thread, python in the Python loop")
    p.add_argument("--start-timeout", type=float, default=DEFAULT_START_TIMEOUT_S)
    p.add_argument("--no-cli", action="store_true", help="do not open the Mininet CLI")
    p.add_argument("--link-check-seconds", type=seconds_at_least(0.0),
                   default=ExperimentOptions.measure_seconds,
                   help="after the all-reduces, send UDP above the link rate from the first to "
                   "the last host this long, to tell a link-bound run from a switch-bound one "
                   f"(default {ExperimentOptions.measure_seconds:g}; 0 skips the check)")
    p.add_argument("--elements", type=_positive, default=None,
                   help=f"float32 values per worker in the all-reduces (default "
                   f"{DEFAULT_ELEMENTS}, more where the network's bandwidth-delay product "
                   "needs it: the transfer lasts 20 round trips)")
    p.add_argument("--elems", type=_elems, default=DEFAULT_ELEMS,
                   help=f"elements per aggregation packet, NR_ELEMS: a multiple of 4 up to "
                   f"{nr_sizes.MAX_ELEMS} (default {DEFAULT_ELEMS}, the most that fit RoCE's "
                   f"{nr_sizes.PATH_MTU}-byte path MTU with the tag); "
                   "the default program is built with it, a --program must match it")
    p.add_argument("--baseline-transport", type=choice("--baseline-transport",
                                                        registry.BASELINE_TRANSPORTS),
                   default=registry.DEFAULT_BASELINE_TRANSPORT, metavar="tcp|roce",
                   help="transport of the ring all-reduce compared with in-network: tcp "
                   "(kernel TCP, one process per rank) or roce (the project's RoCE v2, as the "
                   "in-network agents; the papers' baseline is NCCL's ring on RoCE); default "
                   f"{registry.DEFAULT_BASELINE_TRANSPORT} (docs/workloads.md says why)")
    p.add_argument("--cc-start", type=choice("--cc-start", CC_STARTS), default=SLOW_START,
                   metavar="|".join(CC_STARTS),
                   help="where the in-network agents' and the RoCE ring's congestion windows "
                   "start: slow (slow start from two ACK intervals, the default) or line "
                   "(the whole window at once, as RoCE NICs start at line rate with DCQCN: "
                   "the papers' setting and ns-3's)")
    p.add_argument("--credits", type=_positive,
                   help=f"the aggregation job's credits (default: the file's job, else "
                   f"{DEFAULT_CREDITS})")
    p.add_argument("--slots", type=_positive,
                   help=f"the aggregation job's slots (default: the file's job, else "
                   f"{DEFAULT_SLOTS}); packets per message = slots // credits")
    p.add_argument("--root", help="the aggregation tree's root switch (default: the file's job, "
                   "else chosen by the controller)")
    p.add_argument("--no-experiment", action="store_true",
                   help="only start the network (no controller, no all-reduce)")
    p.add_argument("--name-prefix", default="", help="put before every node name (tests)")
    p.add_argument("--grpc-port", type=_positive, help="first switch's P4Runtime port "
                   "(default 9559)")
    p.add_argument("--thrift-port", type=_positive, help="first BMv2 switch's Thrift runtime "
                   "port (default 9090)")
    p.add_argument("--tdf", type=tdf_option, default=AUTO, metavar="auto|N",
                   help="time-dilation factor: the emulated clock runs N times slower than real "
                        "time, links carry bw/N (default auto: the smallest N at which this "
                        "machine keeps up, calibrated once per program, target and machine)")
    p.add_argument("--recalibrate", action="store_true",
                   help="with --tdf auto: measure the per-packet costs again (ignore the cache)")
    p.add_argument("--settle", type=_seed, default=0, metavar="N",
                   help="run the all-reduces again at twice the TDF, at most N times, until "
                   "every algorithm's time agrees within 5 %% with the last run that resent "
                   "nothing (what the figure presets do; the calibrated TDF can be too small "
                   "for results that the guard passes); exit 1 if they never do. Default 0: "
                   "no check")
    # delay nodes on the delayed links even where netem or the switches could hold the
    # delays (topo.delaynodes): to test them and compare them with the switches' delay line
    p.add_argument("--delay-nodes", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--servers", metavar="A,B[,...]",
                   help="run the topology across these machines (names or addresses; "
                        "localhost is this one) with Mininet's cluster edition: see "
                        "docs/scale.md")
    p.add_argument("--ssh-config", type=Path, metavar="FILE",
                   help="with --servers: the ssh client config every ssh is given (ssh -F)")
    add_live_options(p)
    args = p.parse_args(argv)
    if args.ssh_config is not None and not args.servers:
        p.error("--ssh-config: only with --servers")
    if args.seed is not None and args.egress_order != "random":
        p.error(f"--seed {args.seed}: only --egress-order random takes a seed")
    env_engine = os.environ.get(ENGINE_ENV)
    if args.engine is None and env_engine and env_engine not in ENGINES:
        p.error(f"{ENGINE_ENV}={env_engine}: choose from {', '.join(ENGINES)}")
    return args


ENGINE_ENV = "SOFTSWITCH_ENGINE"  # the switches' own default engine (softswitch.cengine)
#: make run's engine when neither --engine nor $SOFTSWITCH_ENGINE names one: the compiled
#: data path (a program it cannot take runs on Python, logged; issue 28). The switches'
#: own default (softswitch run, Pipeline) stays the Python reference.
RUN_ENGINE = "c"


def switch_engine(args: argparse.Namespace, target: str) -> str | None:
    """The packet engine the built-in switches run: ``--engine``, else
    ``$SOFTSWITCH_ENGINE``, else :data:`RUN_ENGINE`; None for another target (it has its
    own), unless ``--engine`` asked for one (then the start refuses it, naming the target)."""
    return run_engine(args.engine, target)


def run_engine(requested: str | None, target: str = "softswitch") -> str | None:
    """:func:`switch_engine` of an engine option's value (None: not given), for the other
    commands that start networks as ``make run`` does (``python -m experiment figure``): the
    calibration and the switches must measure and run the same engine."""
    if requested is not None:
        return str(requested)
    if target != "softswitch":
        return None
    return os.environ.get(ENGINE_ENV) or RUN_ENGINE


_seed = int_at_least(0)
_positive = int_at_least(1)


def _elems(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    why = nr_sizes.elems_error(value)
    if why is not None:
        raise argparse.ArgumentTypeError(why)
    return value


def _use_file_program(args: argparse.Namespace, spec: TopologySpec) -> None:
    """The topology file's program when the command line names none (a relative path is
    relative to the file)."""
    if args.program is None and not args.no_program and spec.program is not None:
        args.program = (Path(spec.source).parent / spec.program).resolve()


def _program(args: argparse.Namespace) -> Path | None:
    """The program the switches run: ``--program`` as given, else netreduce.p4 built with
    ``NR_ELEMS = --elems`` (a two-line wrapper in build/ when that is not the source's own)."""
    if args.no_program:
        return None
    if args.program is not None:
        program: Path = args.program
        if not program.is_file():
            raise TopoError(f"program {program}: no such file")
        return program
    if not DEFAULT_PROGRAM.is_file():
        return None
    if args.elems == PROGRAM_ELEMS:
        return DEFAULT_PROGRAM
    from experiment.matrix import program_for

    try:
        return program_for(args.elems, Path("build"))
    except OSError as exc:
        raise TopoError(f"cannot write the NR_ELEMS={args.elems} program wrapper: {exc}") from None


def experiment_options(args: argparse.Namespace, topo: FileTopo | None = None,
                       dilation: Dilation | None = None,
                       target: str | None = None) -> ExperimentOptions:
    """The all-reduce experiment the options ask for: the topology file's first job (hosts,
    root, credits, slots) where the options leave them open; with a ``dilation``, its TDF and
    the in-network timer bounds of the emulated network (``experiment.dilation``)."""
    job = topo.spec.jobs[0] if topo is not None and topo.spec.jobs else None
    prefix = topo.name_prefix if topo is not None else ""
    hosts = None
    if job is not None and job.hosts is not None:
        hosts = tuple(prefix + h for h in job.hosts)
    root = args.root or (prefix + job.root if job is not None and job.root else None)
    credits = args.credits or (job.credits if job is not None else None) or DEFAULT_CREDITS
    slots = args.slots or (job.slots if job is not None else None) or DEFAULT_SLOTS
    msg_pkts = job.msg_pkts if job is not None else None
    elements = args.elements
    if elements is None:
        elements = default_elements(topo.spec, DEFAULT_ELEMENTS) if topo else DEFAULT_ELEMENTS
    transport = getattr(args, "baseline_transport", registry.DEFAULT_BASELINE_TRANSPORT)
    baseline = BASELINES[transport]
    opts = ExperimentOptions(elements=elements, elems=args.elems, credits=credits,
                             slots=slots, msg_pkts=msg_pkts, hosts=hosts, root=root,
                             algorithms=("innetwork", baseline),
                             job_name=job.name if job is not None else "allreduce",
                             measure_seconds=args.link_check_seconds,
                             cc_start=getattr(args, "cc_start", SLOW_START))
    if dilation is None or topo is None:
        return opts
    return dilated_options(opts, topo.spec, dilation, target or "softswitch")


def record_dilation(path: Path, dilation: Dilation, engine: str | None = None,
                    io: str | None = None) -> None:
    """Add the run's TDF, why it was chosen and the calibration behind it to its
    experiment.json (``dilation``), and the switches' packet engine and loop (``engine``,
    ``io``; null: not the built-in target, or the switches' default loop)."""
    data = json.loads(path.read_text())
    data["dilation"] = dilation.to_dict()
    data["engine"] = engine
    data["io"] = io
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def clean_stale_runs(rundir: Path | None, console: Console) -> None:
    """What runs killed before they could stop their network (SIGKILL, a crash) left in the
    runs root: their recorded processes and interfaces (``topo.cleanup``; runs whose
    starting process is alive are left alone), so the next run starts without `make clean`."""
    from topo.cleanup import clean_all
    from topo.rundir import DEFAULT_RUNS_ROOT

    report = clean_all(rundir.parent if rundir is not None else DEFAULT_RUNS_ROOT)
    if report.killed or report.interfaces:
        console.print(f"note: cleaned up after an earlier run that was killed: "
                      f"{'; '.join(report.lines())}", highlight=False)


def calibration_rundir(rundir: Path | None) -> Path | None:
    """Where a calibration this run needs starts its own network: beside the run's directory
    (None: the default runs root, the run's too), so that when the run is SIGKILLed while it
    calibrates, the next run's :func:`clean_stale_runs` finds that network's leftovers (the
    reliability campaign found a calibration switch left in the default runs root, holding
    the default gRPC port, after a run with ``--rundir`` elsewhere was killed)."""
    return None if rundir is None else rundir.with_name(rundir.name + "-calibration")


def cluster_spec(args: argparse.Namespace, topo: FileTopo) -> ClusterSpec | None:
    """The servers of ``--servers`` (None: this machine alone), with the topology file's
    ``server`` keys."""
    if not args.servers:
        return None
    spec = topo.spec
    wanted: dict[str, int | str] = {}
    for name, server in [*((s.name, s.server) for s in spec.switches),
                         *((h.name, h.server) for h in spec.hosts)]:
        if server is not None:
            wanted[f"{args.name_prefix}{name}"] = server
    return ClusterSpec.for_file(args.servers, wanted, args.ssh_config)


def target_name(requested: str | None, spec: TopologySpec) -> str:
    """The target a run uses: the command line's, else the topology file's, else the built-in
    one, so that installing BMv2 never silently changes what ``make run`` measures."""
    return requested or spec.target or "softswitch"


def _run_once(args: argparse.Namespace, topo: FileTopo, target: str, program: Path | None,
              engine: str | None, dilation: Dilation, console: Console,
              reference: dict[str, float] | None, tried: int
              ) -> tuple[Summary, bool, tuple[Dilation, dict[str, float] | None] | None]:
    """One network at ``dilation``'s TDF and its all-reduces: (summary, whether it may
    stand, the next run's dilation and reference when ``--settle`` goes on up; None: this
    was the last). The Mininet CLI opens after the last run only."""
    start = StartOptions(pcap=args.pcap, preload=args.preload, log_level=args.log_level,
                         start_timeout=args.start_timeout, egress_order=args.egress_order,
                         seed=args.seed, progress=True, tdf=dilation.tdf,
                         delay_nodes=args.delay_nodes, engine=engine, io=args.io,
                         cluster=cluster_spec(args, topo))
    # the switches are checked before the controller programs them (run_experiment)
    with ExperimentNetwork(topo, target, args.rundir, program,
                           start=start, program_fabric=False, live_port=args.live_port,
                           announce=console.print) as lab:
        summary = run_experiment(lab, lab.topology,
                                 experiment_options(args, topo, dilation, target),
                                 Stages(enabled=True), experiment=not args.no_experiment)
        summary = replace(summary, engine=engine)
        if summary.experiment is not None and summary.experiment.path:
            record_dilation(Path(summary.experiment.path), dilation, engine, args.io)
        print_summary(summary, started(lab), console)
        if not all(s.ready for s in summary.switches):
            console.print("[red]error:[/red] not every switch is up")
        elif not summary.ok:
            console.print("[red]error:[/red] an all-reduce result was not exact")
        kept, again = _settle(args.settle, summary, dilation, console, reference, tried)
        if again is None and not args.no_cli and sys.stdin.isatty():
            from mininet.cli import CLI

            CLI(started(lab).net)
    return summary, kept, again


def _settle(limit: int, summary: Summary, dilation: Dilation, console: Console,
            reference: dict[str, float] | None, tried: int
            ) -> tuple[bool, tuple[Dilation, dict[str, float] | None] | None]:
    """``--settle``: (whether this run may stand, the next run's dilation and reference
    when it goes on up). Without the option, or without exact all-reduces to compare, the
    run stands as it is."""
    result = summary.experiment
    if limit <= 0 or result is None or not summary.ok:
        return True, None
    times = {run.algorithm: run.seconds for run in result.runs}
    resent = sum(r.retransmissions for run in result.runs for r in run.ranks)
    if settled(times, resent, reference):
        console.print(f"settled: every time within {SETTLE_SHARE:.0%} of the run at the TDF "
                      f"before ({tried} check(s))", highlight=False)
        return True, None
    why = unsettled_why(dilation.tdf, resent, reference)
    if tried >= limit:
        console.print(f"[red]not settled[/red] after {tried} run(s) at higher TDFs ({why}): "
                      "do not publish this comparison", highlight=False)
        return False, None
    tdf = calibrate.nice_tdf(dilation.tdf * SETTLE_FACTOR)
    console.print(f"settling: again at TDF {tdf:g} ({why})", highlight=False)
    # a run that resent packets is no reference (experiment.dilation.settled)
    return True, (replace(dilation, tdf=tdf, why=f"{dilation.why}; {why}"),
                  times if resent == 0 else reference)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit status."""
    from rich.console import Console

    args = parse_args(argv)
    console = Console()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    interrupt_on_sigterm()
    try:
        topo = build_topology(args)
        spec = topo.spec
        _use_file_program(args, spec)
        program = _program(args)
        clean_stale_runs(args.rundir, console)
        if program is None:
            console.print("note: no P4 program: switches start empty (--no-p4)")
        target = target_name(args.target, spec)
        if args.elements is None:
            args.elements = default_elements(spec, DEFAULT_ELEMENTS)
        engine = switch_engine(args, target)
        dilation = resolve_dilation(args.tdf, target, program, spec, args.elems,
                                    elements=args.elements, refresh=args.recalibrate,
                                    rundir=calibration_rundir(args.rundir),
                                    announce=console.print, delay_nodes=args.delay_nodes,
                                    engine=engine, io=args.io)
        reference: dict[str, float] | None = None  # the last loss-free run's times
        tried = 0
        while True:
            console.print(f"time dilation: TDF {dilation.tdf:g} ({dilation.why})",
                          highlight=False)
            summary, kept, again = _run_once(args, topo, target, program, engine, dilation,
                                             console, reference, tried)
            if again is None:
                break
            dilation, reference = again
            tried += 1
        return 0 if summary.ok and kept else 1
    except (TopoError, CalibrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: network stopped", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: the network is down already; say what, not how
        log.debug("unexpected failure", exc_info=True)
        print(f"error: unexpected {type(exc).__name__}: {exc} (the network was stopped)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())
