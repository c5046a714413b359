"""``python -m controller --rundir DIR <verb>``: the testbed's P4Runtime controller CLI.

Each verb is one method of :class:`Commands`; the same methods serve one-shot commands and
the interactive shell (``shell``: a ``cmd.Cmd`` with one ``do_<verb>`` per command whose
docstring is its help). Output is a table for people (rich) or JSON with ``--json``. Every
bad request ends in one line ``error: <field>: <why>`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import cmd
import json
import logging
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table

from controller.errors import ControllerError, JobError, UsageError
from controller.fabric import Controller, ControllerOptions
from controller.jobs import JobPlan, JobRequest
from controller.state import load_state
from controller.trees import Tree, describe_tree
from fabricspec import FabricSpecError

log = logging.getLogger(__name__)
# Errors shown as one line (exit status 2): the controller's, and a topology.json whose records
# contradict each other (a port to a node it does not list), found by a lookup.
USER_ERRORS = (ControllerError, FabricSpecError)
DEFAULT_RUNDIR = Path("run/latest")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _hosts(text: str) -> tuple[str, ...]:
    return tuple(h for h in (x.strip() for x in text.split(",")) if h)


def build_parser() -> _Parser:
    p = _Parser(prog="controller", description="P4Runtime controller of a testbed run directory.")
    p.add_argument("--rundir", type=Path, default=DEFAULT_RUNDIR,
                   help="run directory with topology.json (default run/latest)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--election-id", type=int, help="election id (default: newer than any before)")
    p.add_argument("--p4info", type=Path, help="P4Info to use instead of topology.json's")
    p.add_argument("--device-config", type=Path, help="device config to push with it")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for a switch")
    p.add_argument("--log-requests", action="store_true",
                   help="append every P4Runtime write to <rundir>/p4rt-<switch>.log")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    add_verbs(sub)
    return p


def add_verbs(sub: Any) -> None:
    sub.add_parser("status", help="reachability, arbitration and pipeline of every switch")
    sub.add_parser("reconcile", help="make every switch match the recorded state")
    sub.add_parser("routes", help="program IPv4 routes (LPM per host/subnet, ECMP over spines)")
    sub.add_parser("slots", help="aggregation slot ranges per switch")
    sub.add_parser("serve", help="stay connected; restore switches that restart")
    sub.add_parser("shell", help="interactive shell")

    pipe = sub.add_parser("pipeline", help="pipeline push").add_subparsers(
        dest="action", required=True
    )
    push = pipe.add_parser("push", help="install the program (where missing, or --force)")
    push.add_argument("--force", action="store_true")
    push.add_argument("--switch", action="append", help="only this switch (repeatable)")

    job = sub.add_parser("job", help="job create|delete|list|show").add_subparsers(
        dest="action", required=True
    )
    create = job.add_parser("create", help="place an aggregation job")
    create.add_argument("name")
    create.add_argument("--hosts", type=_hosts, required=True, help="comma-separated host names")
    create.add_argument("--credits", type=int, default=2, help="messages in flight per worker")
    create.add_argument("--slots", type=int, default=64, help="slots per switch")
    create.add_argument("--msg-pkts", type=int, help="packets per message (default slots/credits)")
    create.add_argument("--workers-per-host", type=int, help="default: the host's GPUs")
    create.add_argument("--root", help="the aggregation tree's root switch (default: the switch "
                        "closest to all the job's leaves)")
    delete = job.add_parser("delete", help="remove a job from its switches")
    delete.add_argument("job")
    job.add_parser("list", help="jobs recorded in the run directory")
    show = job.add_parser("show", help="a job's tree, slots and worker connections")
    show.add_argument("job")

    credits = sub.add_parser("credits", help="credits set JOB N").add_subparsers(
        dest="action", required=True
    )
    cset = credits.add_parser("set", help="change a job's credits")
    cset.add_argument("job")
    cset.add_argument("credits", type=int)

    ctr = sub.add_parser("counters", help="aggregation counters per job, or port counters")
    ctr.add_argument("--job", help="one job (default: all jobs)")
    ctr.add_argument("--switch", help="port and drop counters of one switch")
    ctr.add_argument("--watch", type=float, nargs="?", const=1.0, metavar="SECONDS",
                     help="repeat every SECONDS until Ctrl-C")
    ctr.add_argument("--count", type=int, help="with --watch: stop after this many rounds")

    tables = sub.add_parser("tables", help="table occupancy, or one table's entries")
    tables.add_argument("--switch", help="one switch (default: all)")
    tables.add_argument("--table", help="list this table's entries (full name or suffix)")

    regs = sub.add_parser("registers", help="read (or --set) a register (P4Runtime; BMv2: "
                          "its Thrift runtime)")
    regs.add_argument("--switch", required=True)
    regs.add_argument("register")
    regs.add_argument("--index", type=int)
    regs.add_argument("--set", type=int, dest="value", metavar="VALUE",
                      help="write VALUE into cell --index, then read it back")

    fault = sub.add_parser(
        "fault", help="fault set|clear: data-plane loss/reordering per port"
    ).add_subparsers(dest="action", required=True)
    fset = fault.add_parser("set", help="drop packets on a switch port with a probability")
    fset.add_argument("switch")
    fset.add_argument("port", type=int)
    fset.add_argument("loss", type=float, help="probability 0..1")
    fset.add_argument("--direction", choices=("in", "out", "both"), default="both")
    fset.add_argument("--reorder", type=float, default=0.0,
                      help="also hold back this fraction (0..1) of aggregation packets")
    fset.add_argument("--max-hold", type=int, default=8,
                      help="a held packet leaves after at most this many later ones")
    fclear = fault.add_parser("clear", help="remove injected loss")
    fclear.add_argument("switch", nargs="?")
    fclear.add_argument("port", type=int, nargs="?")


class Commands:
    """The verbs, over one lazily created Controller."""

    def __init__(self, args: argparse.Namespace, console: Console | None = None) -> None:
        self.args = args
        self.console = console or Console()
        self._controller: Controller | None = None

    @property
    def controller(self) -> Controller:
        if self._controller is None:
            a = self.args
            self._controller = Controller(ControllerOptions(
                rundir=a.rundir, election_id=a.election_id, p4info=a.p4info,
                device_config=a.device_config, connect_timeout_s=a.timeout,
                reconnect=a.verb in ("serve", "shell"), request_log=a.log_requests,
            ))
        return self._controller

    def close(self) -> None:
        if self._controller is not None:
            self._controller.close()

    # ------------------------------------------------------------ output
    def emit(self, data: Any, title: str, columns: Sequence[str] | None = None) -> None:
        if self.args.json:
            print(json.dumps(data, indent=1, sort_keys=True, default=str))
            return
        rows = data if isinstance(data, list) else [data]
        if not rows:
            self.console.print(f"{title}: none")
            return
        cols = list(columns) if columns else list(rows[0])
        table = Table(title=title)
        for c in cols:
            table.add_column(c)
        for r in rows:
            table.add_row(*[_cell(r.get(c)) for c in cols])
        self.console.print(table)

    def message(self, text: str, data: Any) -> None:
        if self.args.json:
            print(json.dumps(data, indent=1, sort_keys=True, default=str))
        else:
            self.console.print(text)

    # -------------------------------------------------------------- verbs
    def run(self, args: argparse.Namespace) -> int:
        self.args = args
        verb = args.verb + (f"_{args.action}" if getattr(args, "action", None) else "")
        handler = getattr(self, f"cmd_{verb}")
        return int(handler(args) or 0)

    def cmd_status(self, args: argparse.Namespace) -> int:
        rows = self.controller.status()
        self.emit(rows, "switches", ["switch", "address", "device_id", "reachable", "primary",
                                     "pipeline", "jobs", "entries", "expected_entries", "error"])
        return 0 if all(r.get("reachable") for r in rows) else 2

    def cmd_reconcile(self, args: argparse.Namespace) -> int:
        reports = self.controller.reconcile()
        self.emit([{"switch": n, "pipeline_pushed": r.pipeline_pushed, "inserted": r.inserted,
                    "modified": r.modified, "deleted": r.deleted, "unchanged": r.unchanged}
                   for n, r in reports.items()], "reconcile")
        return 0

    def cmd_pipeline_push(self, args: argparse.Namespace) -> int:
        pushed = self.controller.push_pipeline(args.switch, force=args.force)
        self.emit([{"switch": n, "pushed": p} for n, p in pushed.items()], "pipeline")
        return 0

    def cmd_routes(self, args: argparse.Namespace) -> int:
        self.controller.program_routes()
        self.message("routes programmed on " + ", ".join(self.controller.switches),
                     {"routes": True, "switches": list(self.controller.switches)})
        return 0

    def cmd_job_create(self, args: argparse.Namespace) -> int:
        plan = self.controller.create_job(JobRequest(
            name=args.name, hosts=args.hosts, credits=args.credits, slots=args.slots,
            msg_pkts=args.msg_pkts, workers_per_host=args.workers_per_host, root=args.root))
        if args.json:
            print(json.dumps(plan.to_dict(), indent=1, sort_keys=True))
        else:
            self.console.print(f"job {plan.name} created: id {plan.job_id}, "
                               f"{len(plan.workers)} workers, switches {', '.join(plan.parts)}")
        return 0

    def cmd_job_delete(self, args: argparse.Namespace) -> int:
        plan = self.controller.delete_job(args.job)
        self.message(f"job {plan.name} (id {plan.job_id}) deleted",
                     {"deleted": plan.name, "job_id": plan.job_id})
        return 0

    def _state(self) -> Any:
        return (
            self._controller.state if self._controller is not None else load_state(self.args.rundir)
        )

    def cmd_job_list(self, args: argparse.Namespace) -> int:
        rows = [_job_row(p) for p in sorted(self._state().jobs.values(), key=lambda p: p.job_id)]
        self.emit(rows, "jobs", ["name", "id", "workers", "hosts", "switches", "root", "credits",
                                 "slots", "msg_pkts"])
        return 0

    def cmd_job_show(self, args: argparse.Namespace) -> int:
        try:
            plan = self._state().job(args.job)
        except KeyError as err:
            raise JobError("job", str(err.args[0])) from None
        if args.json:
            print(json.dumps(plan.to_dict(), indent=1, sort_keys=True))
            return 0
        self.emit([_job_row(plan)], f"job {plan.name}")
        self.console.print("tree (root first; slots and credits per switch):", highlight=False)
        for line in job_tree_lines(plan):
            self.console.print("  " + line, highlight=False, markup=False)
        self.emit([{"switch": n, "level": p.level, "role": p.role, "slot_base": p.slot_base,
                    "slot_count": p.slot_count,
                    "members": f"{p.members:#x}", "expected": p.expected, "mcast_grp": p.mcast_grp,
                    "upstream_port": p.upstream_port, "parent": p.parent}
                   for n, p in plan.parts.items()], "switches")
        self.emit([{"rank": w.rank, "host": w.host, "gpu": w.gpu, "ip": w.ip, "switch": w.switch,
                    "position": w.position, "peer": w.peer, "send_qpn": f"{w.send_qpn:#x}",
                    "recv_qpn": f"{w.recv_qpn:#x}", "sport": w.sport} for w in plan.workers],
                    "workers")
        return 0

    def cmd_credits_set(self, args: argparse.Namespace) -> int:
        plan = self.controller.set_credits(args.job, args.credits)
        self.message(f"job {plan.name}: credits {plan.credits}",
                     {"job": plan.name, "credits": plan.credits})
        return 0

    def cmd_slots(self, args: argparse.Namespace) -> int:
        rows = self.controller.slot_usage()
        if args.json:
            print(json.dumps(rows, indent=1))
            return 0
        self.emit(
            [
                {
                    "switch": r["switch"],
                    "used": f"{r['used']}/{r['total']}",
                    "ranges": ", ".join(
                        f"{x['job']}:{x['base']}+{x['count']}" for x in r["ranges"]
                    ),
                }
                for r in rows
            ],
            "slots",
        )
        return 0

    def cmd_counters(self, args: argparse.Namespace) -> int:
        rounds = 0
        while True:
            if args.switch:
                data: Any = self.controller.switch_counters(args.switch)
                if args.json:
                    print(json.dumps(data, indent=1, sort_keys=True))
                else:
                    self.emit([{"port": p, **v} for p, v in data["ports"].items()],
                              f"{args.switch} ports")
                    self.emit([{"counter": k, "packets": v} for k, v in data["drops"].items()],
                              f"{args.switch} drops")
            else:
                rows = self.controller.job_counters(args.job)
                self.emit(rows, "job counters", ["job", "switch", "contributions", "duplicates",
                                                 "completions", "results_sent", "partials_sent",
                                                 "pulls_sent", "drops"])
            rounds += 1
            if args.watch is None or (args.count is not None and rounds >= args.count):
                return 0
            try:
                time.sleep(args.watch)
            except KeyboardInterrupt:
                return 0

    def cmd_tables(self, args: argparse.Namespace) -> int:
        names = [args.switch] if args.switch else list(self.controller.switches)
        if args.table:
            rows = [
                {"switch": n, **e} for n in names for e in self.controller.read_table(n, args.table)
            ]
            self.emit(rows, f"table {args.table}",
                      ["switch", "match", "priority", "action", "params", "packets"])
            return 0
        rows = [r for n in names for r in self.controller.table_sizes(n)]
        self.emit(rows, "tables", ["switch", "table", "entries", "size"])
        return 0

    def cmd_registers(self, args: argparse.Namespace) -> int:
        if args.value is not None:
            if args.index is None:
                raise ControllerError("index: --set needs --index (the cell to write)")
            self.controller.write_register(args.switch, args.register, args.index, args.value)
        values = self.controller.read_register(args.switch, args.register, args.index)
        self.emit([{"index": i, "value": v} for i,
                   v in sorted(values.items()) if v or args.index is not None],
                  f"{args.switch} {args.register} (non-zero cells)", ["index", "value"])
        return 0

    def cmd_fault_set(self, args: argparse.Namespace) -> int:
        self.controller.set_fault(args.switch, args.port, args.loss, args.direction,
                                  reorder=args.reorder, max_hold=args.max_hold)
        self.message(f"{args.switch} port {args.port}: loss {args.loss:g}, reorder "
                     f"{args.reorder:g} ({args.direction})",
                     {"switch": args.switch, "port": args.port, "loss": args.loss,
                      "reorder": args.reorder})
        return 0

    def cmd_fault_clear(self, args: argparse.Namespace) -> int:
        n = self.controller.clear_faults(args.switch, args.port)
        self.message(f"{n} fault(s) cleared", {"cleared": n})
        return 0

    def cmd_serve(self, args: argparse.Namespace) -> int:
        stop = threading.Event()
        self.console.print(f"serving {self.args.rundir} as election id "
                           f"{self.controller.election_id}; "
                           "Ctrl-C stops")
        try:
            self.controller.serve(stop, on_event=lambda e: self.console.print(e))
        except KeyboardInterrupt:
            stop.set()
        return 0

    def cmd_shell(self, args: argparse.Namespace) -> int:
        Shell(self).cmdloop()
        return 0


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def job_tree_lines(plan: JobPlan) -> list[str]:
    """The job's aggregation tree as indented lines, root first: per switch its level,
    slot range, credits, members and, at a leaf, the hosts of its workers."""
    root = next((n for n, p in plan.parts.items() if p.parent is None), None)
    if root is None:
        return []
    tree = Tree(root=root, parent={n: p.parent for n, p in plan.parts.items()},
                children={n: list(p.children) for n, p in plan.parts.items()},
                level={n: p.level for n, p in plan.parts.items()})

    def label(name: str) -> str:
        part = plan.parts[name]
        hosts = list(dict.fromkeys(w.host for w in plan.workers if w.switch == name))
        text = (f"{name}: level {part.level}, slots {part.slot_base}.."
                f"{part.slot_base + part.slot_count - 1}, credits {plan.credits}, "
                f"{part.expected} member{'s' if part.expected != 1 else ''}")
        if hosts:
            text += f" (workers on {', '.join(hosts)})"
        return text

    return describe_tree(tree, label)


def _job_row(plan: JobPlan) -> dict[str, Any]:
    return {"name": plan.name, "id": plan.job_id, "workers": len(plan.workers),
            "hosts": ",".join(plan.hosts()), "switches": ",".join(plan.parts),
            "spine": plan.spine or "", "root": plan.root or "", "credits": plan.credits,
            "slots": plan.slots,
            "msg_pkts": plan.msg_pkts}


class Shell(cmd.Cmd):
    """Interactive controller: one connection kept across commands."""

    intro = "controller shell; 'help' lists commands, 'quit' leaves"
    prompt = "controller> "

    def __init__(self, commands: Commands) -> None:
        super().__init__()
        self.commands = commands
        self.parser = build_parser()

    def _run(self, verb: str, line: str) -> None:
        base = self.commands.args
        try:
            ns = self.parser.parse_args(["--rundir", str(base.rundir), verb, *shlex.split(line)])
            ns.json = base.json
            self.commands.run(ns)
        except UsageError as err:
            print(f"error: {err}")
        except USER_ERRORS as err:
            print(f"error: {err}")
        finally:
            self.commands.args = base

    def do_status(self, line: str) -> None:
        """status: reachability, arbitration and pipeline of every switch"""
        self._run("status", line)

    def do_job(self, line: str) -> None:
        """job create NAME --hosts h1,h2 [--credits C --slots N] | job delete JOB | job list |
        job show JOB"""
        self._run("job", line)

    def do_credits(self, line: str) -> None:
        """credits set JOB N: change a job's credits"""
        self._run("credits", line)

    def do_slots(self, line: str) -> None:
        """slots: aggregation slot ranges per switch"""
        self._run("slots", line)

    def do_counters(self, line: str) -> None:
        """counters [--job J] [--switch S]: aggregation or port counters"""
        self._run("counters", line)

    def do_tables(self, line: str) -> None:
        """tables [--switch S] [--table T]: occupancy, or one table's entries"""
        self._run("tables", line)

    def do_registers(self, line: str) -> None:
        """registers --switch S NAME [--index I [--set V]]: read (or write) a register"""
        self._run("registers", line)

    def do_fault(self, line: str) -> None:
        """fault set SWITCH PORT LOSS [--reorder F --max-hold N] [--direction in|out|both] |
        fault clear [SWITCH [PORT]]"""
        self._run("fault", line)

    def do_pipeline(self, line: str) -> None:
        """pipeline push [--force] [--switch S]: install the program"""
        self._run("pipeline", line)

    def do_routes(self, line: str) -> None:
        """routes: program IPv4 routing"""
        self._run("routes", line)

    def do_reconcile(self, line: str) -> None:
        """reconcile: make every switch match the recorded state"""
        self._run("reconcile", line)

    def do_quit(self, line: str) -> bool:
        """quit: leave the shell"""
        return True

    do_EOF = do_quit

    def emptyline(self) -> bool:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m controller`` (console script ``ina-controller``)."""
    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    commands = Commands(args)
    try:
        return commands.run(args)
    except USER_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {err.filename or args.rundir}: {err.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        commands.close()
