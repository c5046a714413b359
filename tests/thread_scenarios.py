"""Drivers of thread code paths that have no command line of their own, run under
:mod:`tests.thread_imports`' recorder (``python -m tests.thread_imports --report FILE -m
tests.thread_scenarios NAME ARGS...``). Each imports what the real program imports at its
start, then runs the real code that starts the threads.

``campaign-teardown RUNS_ROOT``: the reliability campaign with ``--parallel``, as
``python -m reliability`` runs it (its progress bar, its teardown thread), with the
teardown cell only; each ``make run`` the cell starts is replaced by a process that exits at
once, since the runs' own work happens in other processes and needs root and a network. What
the thread does around them (ports, leak scans, the progress bar) is the real thing.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import replace
from pathlib import Path

import reliability.__main__ as entry
from reliability import teardown
from reliability.campaign import QUICK, run_campaign


def _instant_run(prefix: str, grpc_port: int, rundir: Path, experiment: bool,
                 tdf: str = "auto") -> list[str]:
    """A stand-in for ``python -m experiment.run``: a process that ends at once."""
    return [sys.executable, "-c", "pass"]


def campaign_teardown(runs_root: Path) -> int:
    # as reliability's main does: a suite started as a background job (SIGINT ignored, and
    # inherited) must not make the cell refuse to run
    signal.signal(signal.SIGINT, signal.default_int_handler)
    teardown.run_argv = _instant_run
    plan = replace(QUICK, cells=("teardown",),
                   teardown=replace(QUICK.teardown, runs=2, prefix="rqy"))
    console = entry.Console(stderr=True)
    with entry.progress_ticks(console, plan.steps()) as tick:
        result = run_campaign(plan, runs_root, "test", "quick", 1, tick, parallel=True)
    if result.teardown is None or not result.teardown.next_run_ok:
        print(f"the teardown cell did not run: {result.notes}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "campaign-teardown":
        return campaign_teardown(Path(argv[1]))
    print("usage: python -m tests.thread_scenarios campaign-teardown RUNS_ROOT",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
