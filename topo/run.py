"""``python -m topo.run``: start a topology, check it, show what is up, then the Mininet CLI.

    python -m topo.run --topo spineleaf --spines 2 --leaves 2 --hosts 2 --target auto --bw 10
    python -m topo.run --topo rack --hosts 4 --no-cli

Exit status: 0 when every switch came up (and the CLI, if any, was left), 1 on a testbed error
(printed as ``error: ...``, never a traceback), 2 on bad options, 130 on Ctrl-C. The network is
always taken down on the way out, including on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from topo.errors import TopoError
from topo.model import Topology
from topo.network import Network, start_network
from topo.nodes import DEFAULT_START_TIMEOUT_S, LOG_LEVELS, port_accepts
from topo.topologies import DEFAULT_HOST_BW_MBIT, RackTopo, SpineLeafTopo, TestbedTopo

log = logging.getLogger(__name__)

DEFAULT_PROGRAM = Path("p4src/netreduce.p4")


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

    @property
    def ok(self) -> bool:
        return all(s.ready for s in self.switches)


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


def run_experiment(network: Network, topology: Topology) -> Summary:
    """The experiment step of a run. For now it only checks switch readiness; the controller
    (pipeline push, table entries) and the all-reduce workloads are added here later."""
    return Summary(topology, check_switches(network), tuple(network.warnings))


def build_topology(args: argparse.Namespace) -> TestbedTopo:
    """The topology the options ask for."""
    common: dict[str, Any] = {
        "host_bw": args.bw, "gpus_per_host": args.gpus, "delay": args.delay, "loss": args.loss,
    }
    if args.topo == "rack":
        return RackTopo(hosts=args.hosts if args.hosts is not None else 4, **common)
    return SpineLeafTopo(
        spines=args.spines, leaves=args.leaves,
        hosts_per_leaf=args.hosts if args.hosts is not None else 2,
        fabric_bw=args.fabric_bw, **common,
    )


def print_summary(summary: Summary, network: Network, console: Any) -> None:
    """Tables of switches and hosts, then where things are."""
    from rich.table import Table

    topo = summary.topology
    sw_table = Table(title=f"{topo.kind} on {topo.target}", title_justify="left")
    for col in ("switch", "role", "device", "gRPC", "ports", "pid", "status"):
        sw_table.add_column(col, no_wrap=col in ("gRPC", "status"))
    for status in summary.switches:
        rec = topo.switch(status.name)
        ports = " ".join(f"{p.port}:{p.peer}" for p in rec.ports)
        mark = "[green]ready[/green]" if status.ready else f"[red]{status.detail}[/red]"
        sw_table.add_row(rec.name, f"{rec.role} {rec.index}", str(rec.device_id), rec.grpc_addr,
                         ports, str(status.pid or "-"), mark)
    console.print(sw_table)
    host_table = Table(title="hosts", title_justify="left")
    for col in ("host", "IP", "MAC", "attached", "GPUs"):
        host_table.add_column(col)
    for h in topo.hosts:
        host_table.add_row(h.name, f"{h.ip}/{h.prefix_len}", h.mac, f"{h.switch} port {h.switch_port}",
                           str(h.gpus))
    console.print(host_table)
    bws = sorted({f"{ln.kind} {ln.bw_mbit:g} Mbit/s" if ln.bw_mbit else f"{ln.kind} unshaped"
                  for ln in topo.links})
    console.print(f"links: {', '.join(bws)}; netem: {'yes' if topo.netem else 'no'}")
    console.print(f"run directory: {network.rundir.path} (topology.json, logs/, pids.json)")
    if topo.p4info:
        console.print(f"P4Info: {topo.p4info}")
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    p = _Parser(prog="python -m topo.run", description=__doc__.splitlines()[0])
    p.add_argument("--topo", choices=("spineleaf", "rack"), default="spineleaf")
    p.add_argument("--spines", type=int, default=2, help="spine switches (spineleaf)")
    p.add_argument("--leaves", type=int, default=2, help="leaf switches (spineleaf)")
    p.add_argument("--hosts", type=int, help="hosts per leaf (spineleaf, default 2) or in the rack "
                   "(default 4)")
    p.add_argument("--gpus", type=int, default=1, help="GPUs (workers) per host")
    p.add_argument("--target", choices=("auto", "softswitch", "bmv2"), default="auto")
    p.add_argument("--bw", type=float, default=DEFAULT_HOST_BW_MBIT, help="host link Mbit/s")
    p.add_argument("--fabric-bw", type=float, help="leaf-spine link Mbit/s (default: --bw)")
    p.add_argument("--delay", help="link delay, e.g. 1ms (needs netem)")
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
    p.add_argument("--start-timeout", type=float, default=DEFAULT_START_TIMEOUT_S)
    p.add_argument("--no-cli", action="store_true", help="do not open the Mininet CLI")
    return p.parse_args(argv)


def _program(args: argparse.Namespace) -> Path | None:
    if args.no_program:
        return None
    if args.program is not None:
        if not args.program.is_file():
            raise TopoError(f"program {args.program}: no such file")
        return args.program
    return DEFAULT_PROGRAM if DEFAULT_PROGRAM.is_file() else None


def _raise_interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit status."""
    from rich.console import Console

    args = parse_args(argv)
    console = Console()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        topo = build_topology(args)
        program = _program(args)
        if program is None:
            console.print("note: no P4 program: switches start empty (--no-p4)")
        with start_network(topo, args.target, args.rundir, program, pcap=args.pcap,
                           preload=args.preload, log_level=args.log_level,
                           start_timeout=args.start_timeout) as network:
            summary = run_experiment(network, network.topology)
            print_summary(summary, network, console)
            if not summary.ok:
                console.print("[red]error:[/red] not every switch is up")
                return 1
            if not args.no_cli and sys.stdin.isatty():
                from mininet.cli import CLI

                CLI(network.net)
        return 0
    except TopoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: network stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
