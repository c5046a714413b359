"""``python -m reliability`` (``make soak``): run the campaign, write docs/reliability.md.

    sudo make soak                                   # the issue's campaign (~1.5 h here)
    sudo .venv/bin/python -m reliability --quick     # a few minutes (the test suite's)
    sudo .venv/bin/python -m reliability --only loss,restart --restarts 5 --no-write

Exit status: 0 when every target was met, 1 when one was not (the report says which),
2 for bad options or without root.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import stackdump
from experiment.argtypes import int_at_least
from reliability.campaign import CELLS, FULL, QUICK, Plan, run_campaign
from reliability.report import plot, render, verdicts
from reliability.results import CampaignResult

DEFAULT_OUT = Path("docs/reliability.md")
FIGURE = "img/reliability.png"


def _cells(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in CELLS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"--only {text!r}: cells are {', '.join(CELLS)}")
    return names


_count = int_at_least(1)


def _rates(text: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--losses {text!r}: rates like 0.01,0.05") from None
    if not rates or not all(0 < r < 1 for r in rates):
        raise argparse.ArgumentTypeError(f"--losses {text!r}: every rate in (0, 1)")
    return rates


def _timers(text: str) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timers {text!r}: LOW,HIGH in seconds") from None
    if not 0 < low <= high:
        raise argparse.ArgumentTypeError(f"--timers {text!r}: need 0 < LOW <= HIGH")
    return low, high


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m reliability", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the few-minute campaign")
    p.add_argument(
        "--only", type=_cells, help=f"cells to run (comma-separated: {', '.join(CELLS)})"
    )
    p.add_argument("--loss-runs", type=_count, help="all-reduces per loss rate")
    p.add_argument("--restarts", type=_count, help="switch restarts")
    p.add_argument("--controller-restarts", type=_count, help="controller restarts")
    p.add_argument("--frames", type=_count, help="malformed frames")
    p.add_argument("--teardown-runs", type=_count, help="interrupted make runs")
    p.add_argument("--losses", type=_rates, help="loss rates of the loss cells (e.g. 0.01,0.1)")
    p.add_argument("--reorder", type=float, help="the reordering cell's share (0: no such cell)")
    p.add_argument("--bmv2", action=argparse.BooleanOptionalAction, default=None,
                   help="the loss cells on BMv2 too (default: where it is installed)")
    p.add_argument("--bmv2-timers", type=_timers, metavar="LOW,HIGH",
                   help="the BMv2 loss cells' retransmission timer bounds (s)")
    p.add_argument("--loss-elements", type=_count, help="float32 per worker under loss")
    p.add_argument("--bw", type=float, help="link rate of the spine-leaf (Mbit/s)")
    p.add_argument("--timers", type=_timers, metavar="LOW,HIGH",
                   help="the loss cells' retransmission timer bounds (s)")
    p.add_argument("--slots", type=_count, help="slots of each job (messages of slots/2 packets)")
    p.add_argument(
        "--prefix",
        default="rk",
        help="name prefix of the campaign's network (the teardown runs use it with 'x' appended)",
    )
    p.add_argument("--seed", type=int, default=20)
    p.add_argument(
        "--parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the teardown cell beside the network cells (faster, more load; default: "
        "yes for the full campaign, no for --quick)",
    )
    p.add_argument("--runs-root", type=Path, help="run directories (default run/soak-<time>)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the report (Markdown)")
    p.add_argument("--json", type=Path, help="also write the raw figures as JSON")
    p.add_argument("--no-write", action="store_true", help="print the report, write nothing")
    p.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="run nothing: write the report from an earlier run's --json file",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if not args.prefix.isalnum() or len(args.prefix) > 4:
        p.error(f"--prefix {args.prefix!r}: up to 4 letters or digits")
    return args


def build_plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else FULL
    changes: dict[str, object] = {}
    if args.only:
        changes["cells"] = args.only
    for opt, name in (
        ("loss_runs", "loss_runs"),
        ("restarts", "restarts"),
        ("controller_restarts", "controller_restarts"),
        ("frames", "frames"),
        ("loss_elements", "loss_elements"),
    ):
        if getattr(args, opt) is not None:
            changes[name] = getattr(args, opt)
    teardown = replace(plan.teardown, prefix=args.prefix + "x")
    for opt, name in (("timers", "loss_timers"), ("bmv2_timers", "bmv2_timers"),
                      ("losses", "losses"), ("reorder", "reorder"), ("bmv2", "bmv2")):
        if getattr(args, opt) is not None:
            changes[name] = getattr(args, opt)
    if args.teardown_runs is not None:
        teardown = replace(teardown, runs=args.teardown_runs)
    changes["teardown"] = teardown
    testbed = replace(plan.testbed, prefix=args.prefix)
    if args.bw is not None:
        testbed = replace(testbed, bw_mbit=args.bw)
    if args.slots is not None:
        testbed = replace(testbed, slots=args.slots)
    changes["testbed"] = testbed
    return replace(plan, **changes)  # type: ignore[arg-type]


@contextlib.contextmanager
def progress_ticks(console: Console, total: int) -> Iterator[Callable[[str], None]]:
    """The campaign's progress bar; yields ``tick(text)``, which advances it one step (also
    logged when the console is not a terminal). The teardown thread ticks too."""
    with Progress(
        TextColumn("[bold]soak[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("starting", total=total)

        def tick(text: str) -> None:
            progress.update(task, advance=1, description=text)
            if not console.is_terminal:
                logging.getLogger("reliability").warning("%s", text)

        yield tick


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Ctrl-C must work, and the teardown runs must inherit SIGINT's default action (a shell
    # starts background jobs with SIGINT ignored, and children keep an ignored signal)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    console = Console(stderr=True)
    if args.render is not None:
        try:
            result = CampaignResult.from_dict(json.loads(args.render.read_text()))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            console.print(f"error: --render {args.render}: not a campaign's JSON: {exc}")
            return 2
        return _report(args, result, console)
    if os.geteuid() != 0:
        console.print(
            "error: the campaign starts Mininet networks: run it as root (sudo make soak)"
        )
        return 2
    plan = build_plan(args)
    runs_root = (args.runs_root or Path("run") / f"soak-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    command = (
        "sudo make soak"
        if argv is None and not sys.argv[1:]
        else "python -m reliability " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    )
    parallel = plan.parallel if args.parallel is None else args.parallel
    mode = ("quick campaign" if args.quick else "full campaign") + (
        ", teardown runs beside the network cells" if parallel else ""
    )
    with progress_ticks(console, plan.steps()) as tick:
        result = run_campaign(plan, runs_root, command, mode, args.seed, tick, parallel)
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n")
    return _report(args, result, console)


def _report(args: argparse.Namespace, result: CampaignResult, console: Any) -> int:
    """Writes (or prints) the report and the figure; the exit status from the verdicts."""
    out: Path = args.out
    figure = None
    if not args.no_write:
        png = out.parent / FIGURE
        if plot(result, png):
            figure = FIGURE
    text = render(result, figure)
    if args.no_write:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        console.print(f"wrote {out}" + (f" and {out.parent / FIGURE}" if figure else ""))
    checks = verdicts(result)
    for target, met, what in checks:
        console.print(
            f"{'[green]met[/green]' if met else '[red]NOT met[/red]'}  {target}: {what}",
            highlight=False,
        )
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    return 0 if checks and all(m for _, m, _ in checks) and not result.notes else 1


if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())
