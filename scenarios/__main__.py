"""``python -m scenarios``: run emulation scenarios non-interactively, for CI.

    python -m scenarios run scenarios/examples/rack-loss.yaml --junit results/junit.xml
    python -m scenarios check scenarios/examples/*.yaml

``run`` starts each scenario's network (root), runs its jobs while its faults happen, checks
its assertions, prints one line per step and writes JUnit XML with ``--junit``. Exit status:
0 when every step passed, 1 when an assertion failed or a step could not be done, 2 for a bad
scenario file or option (one line naming the file, line, field and value), 130 on Ctrl-C.
``check`` only reads and checks the files.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import stackdump
from scenarios.model import Scenario, ScenarioError, load_scenario


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0..65535)")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = _Parser(prog="python -m scenarios", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB",
                           parser_class=_Parser)
    run = sub.add_parser("run", help="run scenario files and judge them (root)")
    run.add_argument("files", nargs="+", type=Path, metavar="FILE")
    run.add_argument("--junit", type=Path, help="write JUnit XML here")
    run.add_argument("--rundir", type=Path, help="run directories under this one: "
                     "DIR/<scenario>/<timestamp> (default run/<timestamp>)")
    run.add_argument("--live-port", type=_port, help="serve the live view on this port "
                      "(0: a free one; default: no live view)")
    run.add_argument("--name-prefix", default="", help="put before every node name (tests)")
    run.add_argument("--grpc-port", type=_port, help="first switch's P4Runtime port "
                     "(default: a free range)")
    run.add_argument("-v", "--verbose", action="store_true")
    check = sub.add_parser("check", help="only read and check scenario files")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    return p.parse_args(argv)


def _load(files: Sequence[Path]) -> list[Scenario]:
    return [load_scenario(f) for f in files]


def _mark(case: Any) -> str:
    return "PASS" if case.ok else ("FAIL" if case.failure is not None else "ERROR")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        scenarios = _load(args.files)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.verb == "check":
        for sc in scenarios:
            print(f"{sc.path}: ok ({sc.name}: {len(sc.jobs)} job(s), {len(sc.faults)} "
                  f"fault(s), {len(sc.assertions)} assertion(s))")
        return 0
    from experiment.lifecycle import interrupt_on_sigterm
    from experiment.matrix import MatrixError, free_grpc_base
    from scenarios.junit import write_junit
    from scenarios.runner import RunOptions, run_scenario

    interrupt_on_sigterm()
    reports = []
    try:
        for sc in scenarios:
            try:
                grpc = (args.grpc_port if args.grpc_port is not None
                        else free_grpc_base(len(sc.switches)))
            except MatrixError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            opts = RunOptions(runs_root=args.rundir,
                              name_prefix=args.name_prefix, grpc_base_port=grpc,
                              live_port=args.live_port,
                              announce=lambda text: print(text, flush=True))
            print(f"scenario {sc.name} ({sc.path})", flush=True)
            report = run_scenario(sc, opts)
            reports.append(report)
            for case in report.cases:
                print(f"  {_mark(case):5} {case.group}: {case.name} ({case.seconds:.1f} s)")
                problem = case.failure or case.error
                if problem:
                    print(f"        {problem}")
            print(f"  {'passed' if report.ok else 'FAILED'} in {report.seconds:.1f} s; run "
                  f"directory {report.rundir}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: network stopped", file=sys.stderr)
        return 130
    finally:
        if args.junit is not None and reports:
            print(f"JUnit XML: {write_junit(args.junit, reports)}")
    return 0 if reports and all(r.ok for r in reports) else 1


if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())
