"""``python -m experiment``: the command lines that start a network and run an experiment.

    python -m experiment matrix [--algos ring,innetwork] [--sizes 65536] [--models ''] ...
    python -m experiment emulate [--bw 3] [--sizes 65536,262144] [--out results/sim]
    python -m experiment figure PRESET [--tdf auto] [--list]

``matrix`` is ``make experiments``: algorithms x tensor sizes x model replays on a spine-leaf
(:mod:`experiment.matrix`). ``emulate`` runs a small 2x2x2 matrix and checks it against the
simulator and the cost model (:mod:`experiment.emulation`, :mod:`sim.validate`). ``figure``
runs one of the papers' figures at the papers' rates under time dilation, beside ns-3
(:mod:`experiment.figures`; ``make experiments preset=NAME``). All need root (Mininet).
They live here, above ``workloads`` and ``sim``, so that neither of those imports this
package (the layering of docs/architecture.md). Exit status: 0 success, 1 a failed cell, a
flagged row or a point not fit to publish, 2 bad usage or a run that could not start.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from experiment.emulation import run_emulation
from experiment.lifecycle import interrupt_on_sigterm
from experiment.matrix import MatrixError, MatrixSpec, run_matrix, spec_from_args
from protocol.netreduce import MAX_ELEMS, MTU_ELEMS
from sim.emulation import rows_from_matrix
from sim.validate import as_dicts, ns3_simulate, report, validate
from vtime import rate_arg
from workloads.roce import CC_STARTS, SLOW_START

log = logging.getLogger("experiment")


class UsageError(ValueError):
    """Bad command-line input (reported without a traceback)."""


def cmd_matrix(args: argparse.Namespace) -> int:
    """Starts a network (root), runs the experiment matrix, writes JSON and plots."""
    try:
        spec = spec_from_args(args)
        path, cells = run_matrix(spec, args.out, args.rundir, show_progress=not args.quiet)
    except MatrixError as err:
        raise UsageError(str(err)) from None
    for c in cells:
        what = c.size if c.kind == "allreduce" else c.model
        util = f" busiest link {c.busiest_util:.0%}" if c.busiest_util is not None else ""
        status = "ok" if c.ok else "FAILED: " + "; ".join(c.errors)
        print(f"{c.kind:9} {c.algo:14} {what!s:>9}: {c.seconds * 1000:9.1f} ms{util} "
              f"machine CPU {c.machine_busy:.0%} {status}")
    print(f"results: {path}")
    return 0 if all(c.ok for c in cells) else 1


def cmd_emulate(args: argparse.Namespace) -> int:
    """Runs a small matrix on a fresh network (root) and validates its rows against the
    simulator (ns-3) and the cost model; 1 when a row is flagged."""
    if os.geteuid() != 0:
        raise UsageError("emulation needs root (Mininet)")
    try:
        spec = MatrixSpec(gpus=1, bw_mbit=args.bw, algos=tuple(args.algos.split(",")),
                          sizes=tuple(int(s) for s in args.sizes.split(",") if s),
                          credits=args.credits, msg_pkts=args.msg_pkts, elems=64,
                          name_prefix="vs")
        doc = run_emulation(spec)
    except MatrixError as err:
        raise UsageError(str(err)) from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"emulation-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")
    results = validate(rows_from_matrix(doc), ns3_simulate)
    print(report(results))
    path.with_suffix(".validation.json").write_text(json.dumps(as_dicts(results), indent=1))
    return 1 if any(r.flagged for r in results) else 0


def _retries(text: str) -> int:
    """``--retries``: an integer >= 0 (the option and the value named otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--retries {text!r}: expected an integer >= 0")
    return value


def _replot(path: Path, plot: Path | None) -> int:
    """A figure's plot, table and verdicts from its results file."""
    from experiment import figures

    try:
        doc = json.loads(path.read_text())
        result = figures.figure_from_dict(doc if isinstance(doc, dict) else {})
    except (OSError, ValueError) as err:  # FigureError and JSONDecodeError are ValueErrors
        raise UsageError(f"figure --replot {path}: {err}") from None
    out = figures.plot_figure(result, plot or path.with_suffix(".png"))
    print(figures.table(result))
    for line in figures.summary_lines(result):
        print(line)
    print(f"plot: {out}")
    return 0 if result.faithful and result.exact and result.converged else 1


def cmd_figure(args: argparse.Namespace) -> int:
    """Runs a preset figure (root), writes its JSON, plot and table; 1 when a point was not
    exact, not faithful or never settled (experiment.figures)."""
    from experiment import figures
    from experiment.dilation import parse_tdf_option

    if args.list:
        for fig in figures.PRESETS.values():
            print(f"{fig.name:11} {fig.title}")
        return 0
    if args.replot is not None:
        return _replot(args.replot, args.plot)
    if args.preset is None:
        raise UsageError("figure: name a preset (--list shows them)")
    try:
        fig = figures.preset(args.preset)
        tdf = parse_tdf_option(args.tdf)
        if args.cc_start is not None:
            fig = replace(fig, cc_start=args.cc_start)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if os.geteuid() != 0:
        raise UsageError("figure: the emulation needs root (Mininet)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out)
    opts = figures.Options(tdf=tdf, engine=args.engine, rundir=args.rundir,
                           refresh=args.recalibrate, name_prefix=args.name_prefix,
                           grpc_base_port=args.grpc_port,
                           retries=(figures.MAX_RETRIES if args.retries is None
                                    else args.retries),
                           simulate=None if args.no_sim else figures.ns3,
                           announce=lambda text: print(text, flush=True))
    command = "python -m experiment figure " + " ".join(args.argv)
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C: every network is taken down
    interrupt_on_sigterm()
    try:
        result = figures.run_figure(fig, opts, command=command)
    except KeyboardInterrupt:
        print("interrupted: network stopped", file=sys.stderr)
        return 130
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{fig.name}-{stamp}.json"
    path.write_text(json.dumps(result.to_dict(), indent=1) + "\n")
    plot = figures.plot_figure(result, args.plot or path.with_suffix(".png"))
    print(figures.table(result))
    for line in figures.summary_lines(result):
        print(line)
    print(f"results: {path}\nplot: {plot}")
    return 0 if result.faithful and result.exact and result.converged else 1


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m experiment`` parser (tests read its defaults)."""
    parser = argparse.ArgumentParser(prog="python -m experiment", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("matrix", help="start a network and run algorithms x sizes x models "
                       "(root; what `make experiments` runs)")
    m.add_argument("--topo", choices=("spineleaf",), default="spineleaf")
    m.add_argument("--spines", type=int, default=2)
    m.add_argument("--leaves", type=int, default=2)
    m.add_argument("--hosts", type=int, default=2, help="hosts per leaf")
    m.add_argument("--gpus", type=int, default=2, help="GPUs (workers) per host")
    m.add_argument("--bw", type=rate_arg, default=3e6, metavar="RATE",
                   help="link rate: 10M, 500k (a bare number is Mbit/s; default 3M)")
    m.add_argument("--intra-bw", type=rate_arg, default=None, metavar="RATE",
                   help="innetwork-hier: rate between a host's GPUs, e.g. 150GB/s (recorded in "
                   "topology.json; default: the workload's)")
    m.add_argument("--algos", default="ring,torus,topk,hybrid,innetwork,innetwork-hier")
    m.add_argument("--sizes", default="65536,262144", help="float32 per worker, comma-separated")
    m.add_argument("--models", default="resnet50,bert-base", help="replayed models ('' for none)")
    m.add_argument("--scale", type=float, default=1000.0, help="replay: shrink models this much")
    m.add_argument("--iters", type=int, default=1, help="timed all-reduces per cell")
    m.add_argument("--replay-iters", type=int, default=3)
    m.add_argument("--elems", type=int, default=MTU_ELEMS,
                   help=f"NR_ELEMS the program is built with: a multiple of 4 up to {MAX_ELEMS} "
                   f"(default {MTU_ELEMS}, the full RoCE path MTU with the tag)")
    m.add_argument("--credits", type=int, default=4)
    m.add_argument("--slots", type=int, default=256)
    m.add_argument("--msg-pkts", type=int, default=64)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--cc-start", choices=CC_STARTS, default=SLOW_START,
                   help="where the RoCE and in-network congestion windows start: slow (slow "
                   "start, the default) or line (the whole window at once, as RoCE NICs)")
    m.add_argument("--out", type=Path, default=Path("results"), help="results directory")
    m.add_argument("--rundir", type=Path, default=None, help="network run directory")
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    m.set_defaults(func=cmd_matrix)
    em = sub.add_parser("emulate", help="run a small 2x2x2 emulation (root) and validate it "
                        "against the simulator")
    em.add_argument("--bw", type=float, default=3.0, help="link rate, Mbit/s")
    em.add_argument("--algos", default="ring,innetwork")
    em.add_argument("--sizes", default="65536,262144", help="float32 per worker")
    em.add_argument("--credits", type=int, default=4)
    em.add_argument("--msg-pkts", type=int, default=16)
    em.add_argument("--out", default="results/sim")
    em.set_defaults(func=cmd_emulate)
    fg = sub.add_parser("figure", help="run one of the papers' figures under emulation beside "
                        "ns-3 (root; what `make experiments preset=NAME` runs)")
    fg.add_argument("preset", nargs="?", help="the figure (--list shows the presets)")
    fg.add_argument("--list", action="store_true", help="list the presets and exit")
    fg.add_argument("--replot", type=Path, default=None, metavar="JSON",
                    help="draw and tabulate a results file again (no run, no root)")
    fg.add_argument("--tdf", default="auto", metavar="auto|N",
                    help="time dilation: auto (calibrated per point, the default) or a factor")
    fg.add_argument("--recalibrate", action="store_true", help="measure the costs again")
    fg.add_argument("--retries", type=_retries, default=None, metavar="N",
                    help="how many times a point may run again at twice its TDF to settle "
                    "(default 4; 0: no check, no point settles)")
    fg.add_argument("--engine", choices=("c", "python"), default=None,
                    help="the built-in switches' packet engine (default: theirs)")
    fg.add_argument("--cc-start", choices=CC_STARTS, default=None,
                    help="where the transports' congestion windows start (default: the "
                    "preset's, line; slow: slow start, as the figures before 2026-12-07 ran)")
    fg.add_argument("--no-sim", action="store_true", help="skip the ns-3 simulation")
    fg.add_argument("--out", default="results/figures", help="results directory")
    fg.add_argument("--plot", type=Path, default=None, help="the plot's path (default: "
                    "beside the JSON)")
    fg.add_argument("--rundir", type=Path, default=None, help="the networks' run directory")
    fg.add_argument("--name-prefix", default="", help="prefix of switch and host names "
                    "(several networks on one machine)")
    fg.add_argument("--grpc-port", type=int, default=None,
                    help="first P4Runtime port (default: a free block)")
    fg.set_defaults(func=cmd_figure)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)[1:]
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except (ValueError, OSError, RuntimeError) as err:
        # UsageError and MatrixError (bad options, a switch that would not start), and the
        # simulator's SimulatorUnavailable / SimulationError (RuntimeErrors)
        print(f"python -m experiment {args.cmd}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
