"""The teardown cell: ``make run``'s entry point (``python -m experiment.run``) started again and
again, some runs interrupted with SIGINT or SIGKILL at a random moment; after each run the
campaign looks for what it left (:mod:`reliability.leaks`), and every next run must start
without `make clean`. The runs use their own name prefix, gRPC ports and runs root, and
carry the campaign's tag in their environment, so only their own leftovers are counted."""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import stackdump
from reliability.leaks import TAG_VARIABLE, Leaks, find_leaks
from reliability.results import TeardownCell
from reliability.testbed import free_port_block

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 300.0
SETTLE_S = 10.0  # a SIGINTed run stops its network: this long at most before leaks count
REFUSED = ("already exist", "already in use")


@dataclass(frozen=True)
class TeardownPlan:
    runs: int = 50
    experiment_every: int = 5  # every Nth run also programs the fabric and runs all-reduces
    prefix: str = "rx"
    sigint: float = 0.4  # shares of runs interrupted with each signal
    sigkill: float = 0.4
    max_delay_s: float = 8.0  # a signal lands uniformly in [0.3 s, this] (x5 with experiment)
    # make run's --tdf: auto calibrates (a run may be interrupted while it does, as users'
    # are; the first run of a machine or of changed code pays the calibration)
    tdf: str = "auto"
    # >0: start runs until this many were really interrupted (a run that ends before its
    # signal does not count), at most 3x as many runs; 0: ``runs`` runs, whatever happened
    interrupted: int = 0


def run_argv(prefix: str, grpc_port: int, rundir: Path, experiment: bool,
             tdf: str = "auto") -> list[str]:
    """``make run``'s command line for a small rack (two hosts)."""
    argv = [sys.executable, "-m", "experiment.run", "--topo", "rack", "--hosts", "2", "--bw", "10",
            "--target", "softswitch", "--no-cli", "--name-prefix", prefix,
            "--grpc-port", str(grpc_port), "--rundir", str(rundir), "--no-live", "--tdf", tdf]
    if experiment:  # the all-reduces, without make run's link check (3 s that test nothing)
        argv += ["--elements", "1024", "--elems", "32", "--link-check-seconds", "0"]
    else:
        argv += ["--no-experiment"]
    return argv


def _size(path: Path) -> int:
    return path.stat().st_size


def _wait(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None


def _interrupt(proc: subprocess.Popen[bytes], sig: signal.Signals | None, delay: float,
               signals: Counter[str]) -> tuple[int | None, signal.Signals | None]:
    """Send ``sig`` after ``delay`` unless the run ended first; its exit code if it ended,
    and the signal actually sent (None: none), counted in ``signals``."""
    if sig is None:
        signals["none"] += 1
        return None, None
    code = _wait(proc, delay)
    if code is not None:
        signals["none (ended before the signal)"] += 1
        return code, None
    proc.send_signal(sig)
    signals[sig.name] += 1
    return None, sig


def _settled_leaks(prefix: str, runs_root: Path, tag: str, killed: bool) -> Leaks:
    """What a run left, given SETTLE_S to go away (none after SIGKILL: nothing cleans up
    then until the next run)."""
    deadline = time.monotonic() + (0.0 if killed else SETTLE_S)
    leaks = find_leaks(prefix, runs_root, tag)
    while leaks.total and time.monotonic() < deadline:
        time.sleep(0.5)
        leaks = find_leaks(prefix, runs_root, tag)
    return leaks


def _note_outcome(cell: TeardownCell, i: int, code: int, text: str, final: bool) -> None:
    """A run refused because of leftovers, and whether the final run started cleanly."""
    if any(r in text for r in REFUSED):
        cell.refused_starts += 1
        cell.details.append(f"run {i}: refused to start: "
                            + next(line for line in text.splitlines()
                                   if any(r in line for r in REFUSED))[:200])
    if final:
        cell.next_run_ok = code == 0
        if code != 0:
            cell.details.append(f"final run: exit {code}: {text.strip()[-300:]}")


def teardown_cell(plan: TeardownPlan, runs_root: Path, rng: random.Random,
                  tick: Callable[[str], None]) -> TeardownCell:
    """``plan.runs`` runs (or as many as ``plan.interrupted`` interrupted ones take), then
    one more that must start cleanly; leaks after each."""
    cell = TeardownCell()
    runs_root.mkdir(parents=True, exist_ok=True)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # the runs would inherit it, and Python keeps an inherited SIG_IGN: SIGINT would not
        # interrupt them (a campaign started as a shell's background job has it ignored)
        raise RuntimeError("SIGINT is ignored in this process: the runs could not be "
                           "interrupted with it (reliability's main restores it)")
    tag = f"{plan.prefix}{os.getpid()}"
    env = dict(os.environ, **{TAG_VARIABLE: tag})
    signals: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    grpc_port = free_port_block(2)
    limit = 3 * plan.interrupted if plan.interrupted else plan.runs
    for i in range(limit + 1):
        done = signals["SIGINT"] + signals["SIGKILL"]
        final = i == limit or (plan.interrupted > 0 and done >= plan.interrupted)
        experiment = not final and i % plan.experiment_every == plan.experiment_every - 1
        draw = rng.random()
        sig = (None if final or draw >= plan.sigint + plan.sigkill
               else signal.SIGINT if draw < plan.sigint else signal.SIGKILL)
        # a run that only starts the network takes seconds, one with the experiment a minute
        delay = rng.uniform(0.3, plan.max_delay_s * (5 if experiment else 1))
        rundir = runs_root / f"run{i:03d}"
        log_path = runs_root / f"run{i:03d}.out"
        with log_path.open("wb") as out:
            proc = subprocess.Popen(run_argv(plan.prefix, grpc_port, rundir, experiment,
                                             plan.tdf),
                                    cwd=str(REPO_ROOT), env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            code, sig = _interrupt(proc, sig, delay, signals)
            if code is None:
                code = _wait(proc, RUN_TIMEOUT_S)
            if code is None:
                # its threads' stacks into its log, then kill it
                if stackdump.request_dump(proc.pid):
                    stackdump.wait_quiet(functools.partial(_size, log_path))
                proc.kill()
                code = proc.wait()
                cell.details.append(f"run {i}: did not end within {RUN_TIMEOUT_S:g} s (its "
                                    f"threads' stacks are in {log_path.name})")
        codes[str(code)] += 1
        _note_outcome(cell, i, code, log_path.read_text(errors="replace"), final)
        # what this run left: after SIGKILL expected until the next run cleans it
        leaks = _settled_leaks(plan.prefix, runs_root, tag, sig == signal.SIGKILL)
        if leaks.total and sig != signal.SIGKILL:
            cell.leaks_after_each += 1
            cell.details.append(f"run {i} ({sig.name if sig else 'no signal'}, exit {code}): "
                                f"left {leaks.describe()}")
        what = f"{sig.name} after {delay:.1f} s" if sig else "no signal"
        goal = (f"{done + (sig is not None)}/{plan.interrupted} interrupted"
                if plan.interrupted else f"{i + 1}/{plan.runs + 1}")
        tick(f"teardown run {i + 1} ({goal}; {what}): exit {code}")
        if final:
            cell.runs = i
            break
    cell.signals = dict(signals)
    cell.exit_codes = dict(codes)
    cell.leaks_final = find_leaks(plan.prefix, runs_root, tag).as_dict()
    return cell
