"""``python -m bench``: run the registered benchmarks and rewrite docs/benchmarks.md.

A full run replaces every row; ``--only NAME`` re-measures those modules and keeps the other
modules' rows from earlier runs (kept in docs/benchmarks.json beside the report).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import shlex
import sys
from pathlib import Path

from bench.harness import (
    BenchResult,
    discover,
    load_store,
    machine_info,
    render_markdown,
    run_module,
    stored_results,
    update_store,
)

log = logging.getLogger("bench")

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO_ROOT / "docs" / "benchmarks.md"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Run the benchmarks in bench/ and write a report."
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this module (repeatable), e.g. engine or bench_engine",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="measurement time per benchmark (for modules whose run() takes seconds=)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="report to write")
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    parser.add_argument("--list", action="store_true", help="list the benchmark modules and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


def _selected(names: list[str], only: list[str] | None) -> list[str]:
    if not only:
        return names
    wanted = {n if n.startswith("bench_") else f"bench_{n}" for n in only}
    unknown = sorted(wanted - set(names))
    if unknown:
        raise SystemExit(
            f"error: no benchmark module {', '.join(unknown)}; have: {', '.join(names)}"
        )
    return [n for n in names if n in wanted]


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmarks; exit status 1 when one of them raised an error (skips are fine)."""
    args = _parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(name)s: %(message)s"
    )
    names = discover()
    if args.list:
        for name in names:
            print(name)
        return 0
    results: list[BenchResult] = []
    for name in _selected(names, args.only):
        log.info("running %s", name)
        result = run_module(name, seconds=args.seconds)
        if result.skipped is not None:
            log.info("%s: skipped: %s", name, result.skipped)
        elif result.error is not None:
            log.error("%s: error: %s", name, result.error)
        results.append(result)
    command = shlex.join(["python", "-m", "bench", *(argv if argv is not None else sys.argv[1:])])
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    store_path = args.output.with_suffix(".json")
    store = load_store(store_path) if args.only else {}
    update_store(store, results, command, date)
    runs = {name: f"{e['date']}, `{e['command']}`" for name, e in store.items()}
    findings_path = REPO_ROOT / "bench" / "findings.md"
    findings = findings_path.read_text() if findings_path.is_file() else None
    report = render_markdown(stored_results(store), machine_info(), command, date, runs,
                             findings)
    if args.no_write:
        print(report, end="")
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
        store_path.write_text(json.dumps(store, indent=1, sort_keys=True) + "\n")
        print(report, end="")
        log.info("wrote %s", args.output)
    return 1 if any(r.error is not None for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
