"""``python -m sim``: sweeps that reproduce the papers' claims, and validation of rows.

    python -m sim sweep [emulated|scaling|crossover|speedup|all] [--small] [--out results/sim]
    python -m sim validate measured.json [more.json ...] [--no-sim] [--out validation.json]
    python -m sim run --algorithm ring --spines 2 --leaves 2 --hosts 2 --bw 10 --bytes 1048576
    python -m sim run --algorithm ina --topo spineleaf --param leaves=32 --param hosts=16

The emulation these models are checked against is an experiment: ``python -m experiment
emulate`` (root) runs it and validates its rows with :mod:`sim.validate`.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from pathlib import Path
from typing import Any

from rich.progress import Progress

from sim import sweeps
from sim.fabric import emulated
from sim.model import predict
from sim.schedules import ALGORITHMS
from sim.validate import as_dicts, load_rows, report, validate

log = logging.getLogger("sim")


def _ns3() -> sweeps.Simulate:
    from sim.ns3sim import simulate

    return lambda a, f, n, d: simulate(a, f, n, d).seconds


def _sweep(args: argparse.Namespace) -> int:
    names = list(sweeps.SWEEPS) if args.name == "all" else [args.name]
    simulate = _ns3()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from sim.plots import PLOTTERS

    with Progress() as progress:
        for name in names:
            task = progress.add_task(name, total=sweeps.plan_size(name, args.small))
            result = sweeps.run(name, simulate, args.small,
                                tick=functools.partial(progress.advance, task))
            path = out / f"{name}.json"
            path.write_text(json.dumps(result, indent=1))
            progress.console.print(f"wrote {path}")
            if not args.no_plots:
                plot = PLOTTERS[name](result, out / f"{name}.png")
                progress.console.print(f"wrote {plot}")
    return 0


def _check_rows(rows: list[dict[str, Any]], no_sim: bool, out: str) -> int:
    simulate = None if no_sim else _ns3()
    results = validate(rows, simulate)
    print(report(results))
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(as_dicts(results), indent=1))
    return 1 if any(r.flagged for r in results) else 0


def _validate(args: argparse.Namespace) -> int:
    rows = [row for path in args.rows for row in load_rows(Path(path))]
    return _check_rows(rows, args.no_sim, args.out)


def _run(args: argparse.Namespace) -> int:
    shape = {"spines": args.spines, "leaves": args.leaves, "hosts": args.hosts,
             "gpus": args.gpus, "bw": args.bw, "delay_ms": args.delay_ms}
    if args.topo:
        given = [name for name, value in shape.items() if value is not None]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')}: with --topo the file's "
                             "parameters decide the network (use --param NAME=VALUE)")
        from sim.topology import fabric_from_file

        f, notes = fabric_from_file(args.topo, _params(args.param),
                                    switch_delay_s=args.switch_delay_us * 1e-6)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    else:
        f = emulated(args.bw or 10.0, spines=args.spines or 2, leaves=args.leaves or 2,
                     hosts_per_leaf=args.hosts or 2, gpus_per_host=args.gpus or 1,
                     switch_delay_s=args.switch_delay_us * 1e-6,
                     link_delay_s=(args.delay_ms or 0.0) * 1e-3)
    from sim.ns3sim import simulate

    r = simulate(args.algorithm, f, args.bytes, args.density)
    model = predict(args.algorithm, f, args.bytes, args.density)
    print(json.dumps({"algorithm": args.algorithm, "workers": f.workers, "bytes": args.bytes,
                      "sim_s": r.seconds, "model_s": model, "packets": r.packets,
                      "wall_s": round(r.wall_s, 3)}))
    return 0


def _params(items: list[str] | None) -> dict[str, object]:
    """``--param NAME=VALUE`` items: numbers as numbers, null/none as None, else text."""
    out: dict[str, object] = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--param {item!r}: expected NAME=VALUE")
        value: object = None if text.lower() in ("null", "none") else text
        for kind in (int, float):
            try:
                value = kind(text)
                break
            except ValueError:
                continue
        out[name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    sw = sub.add_parser("sweep", help="run a sweep, write JSON and a plot")
    sw.add_argument("name", choices=[*sweeps.SWEEPS, "all"])
    sw.add_argument("--small", action="store_true", help="CI-sized sweep")
    sw.add_argument("--out", default="results/sim")
    sw.add_argument("--no-plots", action="store_true")
    va = sub.add_parser("validate", help="compare measured rows with simulator and model")
    va.add_argument("rows", nargs="+",
                    help="JSON list or JSON-lines file of measured rows, a matrix result, "
                         "or a make run directory (e.g. run/latest)")
    va.add_argument("--no-sim", action="store_true", help="cost model only")
    va.add_argument("--out", default="")
    ru = sub.add_parser("run", help="simulate one collective on a spine-leaf fabric")
    ru.add_argument("--algorithm", choices=ALGORITHMS, default="ring")
    ru.add_argument("--topo", help="a topology file or shipped name (docs/topology.md) instead "
                    "of the flags below")
    ru.add_argument("--param", action="append", metavar="NAME=VALUE",
                    help="a parameter of the --topo file (repeatable)")
    ru.add_argument("--spines", type=int, help="default 2")
    ru.add_argument("--leaves", type=int, help="default 2")
    ru.add_argument("--hosts", type=int, help="hosts per leaf (default 2)")
    ru.add_argument("--gpus", type=int, help="GPUs per host (default 1)")
    ru.add_argument("--bw", type=float, help="link rate, Mbit/s (default 10)")
    ru.add_argument("--delay-ms", type=float, help="default 0")
    ru.add_argument("--switch-delay-us", type=float, default=100.0)
    ru.add_argument("--bytes", type=int, default=1 << 20)
    ru.add_argument("--density", type=float, default=0.01)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    handlers = {"sweep": _sweep, "validate": _validate, "run": _run}
    try:
        return handlers[args.command](args)
    except (ValueError, OSError, RuntimeError) as exc:
        # ValidationInputError, SimulatorUnavailable, SimulationError and bad parameters
        print(f"python -m sim: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
