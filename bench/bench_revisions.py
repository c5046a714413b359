"""The same benchmarks on an earlier revision and on this checkout, alternating in one run.

Issue 14 restructured the code (experiment layer, protocol contract, typed syntax tree, code
generator and checker split by concern) and must not slow anything down. A comparison across
days on this shared machine would measure the load, not the code, so this module checks the
earlier revision out into a temporary git worktree and runs the CPU-bound benchmarks there and
here round by round, each in a fresh process (the checkout's directory comes first on
``sys.path``, so each process imports its own revision). ``NR_BENCH_BASE`` names the earlier
revision (default: :data:`BASE`, the last commit before issue 14's changes).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

ROOT = Path(__file__).resolve().parent.parent
BASE = "83fe702"  # main before issue 14's restructuring landed
MODULES = ("bench_engine", "bench_tm")
ROUNDS = int(os.environ.get("NR_BENCH_ROUNDS", "5"))
# The front end's own time: the typed syntax tree and the checker changed in issue 14.
# Both compile the same program (NR_BENCH_PROGRAM, the earlier revision's netreduce.p4): each
# checkout's own has grown since (restart recovery), which measured the program, not the code.
_COMPILE = """
import json, os, time
from softswitch.frontend import compile_file
program = os.environ.get("NR_BENCH_PROGRAM", "p4src/netreduce.p4")
compile_file(program)  # builds the parser tables once
times = []
for _ in range(7):  # min of 7: one compile is ~0.6 s, and this machine is shared
    t = time.process_time()
    compile_file(program)
    times.append(time.process_time() - t)
print(json.dumps([{"name": "front end, netreduce.p4", "metric": "CPU time",
                   "value": min(times) * 1000, "unit": "ms"}]))
"""
# The per-packet pipeline cost with the same driver in both revisions: the benchmark modules
# are each revision's own, and bench_engine gained heavier rows after the base revision (its
# pipeline.process row then measured 0.79x in a process that had built E = 256 programs,
# where this driver measures the pipelines alike).
_PIPELINE = """
import json, time
from bench import bench_engine
p = bench_engine.build_pipeline()
frame, port = bench_engine.routed_frame(), bench_engine.INGRESS_PORT
for _ in range(2000):
    p.process(port, frame)
best = float("inf")
for _ in range(5):
    t = time.process_time()
    for _ in range(20000):
        p.process(port, frame)
    best = min(best, (time.process_time() - t) / 20000)
print(json.dumps([{"name": "pipeline.process, same driver (ipv4_forward.p4, LPM hit)",
                   "metric": "CPU per packet", "value": best * 1e6, "unit": "us"}]))
"""
_MODULE = """
import json, sys
from bench.harness import run_module
result = run_module(sys.argv[1])
if result.error or result.skipped:
    raise SystemExit(f"{sys.argv[1]}: {result.error or result.skipped}")
print(json.dumps(result.rows))
"""


def _rows(checkout: Path, script: str, *args: str,
          program: Path | None = None) -> list[dict[str, Any]]:
    env = dict(os.environ, SOFTSWITCH_PROGRAM_CACHE="off")
    if program is not None:
        env["NR_BENCH_PROGRAM"] = str(program)
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=checkout, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{checkout}: {' '.join(args) or 'front end'} failed: "
                           f"{proc.stderr.strip()[-800:]}")
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def _worktree(base: str, where: Path) -> None:
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force",
                        str(where), base], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise BenchSkipped(f"cannot check out {base} (not a git checkout?): {detail}") from None


def run() -> list[dict[str, Any]]:
    """Median of each figure over alternating rounds, before and after, and their ratio."""
    base = os.environ.get("NR_BENCH_BASE", BASE)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "this checkout"
    jobs: list[tuple[str, tuple[str, ...]]] = [(_COMPILE, ()), (_PIPELINE, ())]
    jobs += [(_MODULE, (name,)) for name in MODULES]
    samples: dict[tuple[str, str, str], list[float]] = {}
    units: dict[tuple[str, str], str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-base-") as tmp:
        before = Path(tmp) / "base"
        _worktree(base, before)
        try:
            for _ in range(ROUNDS):
                for script, args in jobs:
                    for label, checkout in (("before", before), ("after", ROOT)):
                        # both run the earlier revision's netreduce.p4: the program has
                        # changed since (issue 16, restart recovery), the code is compared
                        program = before / "p4src" / "netreduce.p4"
                        for row in _rows(checkout, script, *args, program=program):
                            key = (row["name"], row["metric"])
                            units[key] = row.get("unit", "")
                            samples.setdefault((*key, label), []).append(float(row["value"]))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(before)], capture_output=True)
    load = os.getloadavg()[0]
    out: list[dict[str, Any]] = []
    for (name, metric), unit in units.items():
        b = samples.get((name, metric, "before"))
        a = samples.get((name, metric, "after"))
        if not a or not b:
            continue  # a figure only one revision has
        notes = (f"median of {ROUNDS} alternating rounds, each a fresh process; before = "
                 f"{base}, after = {head}, both running {base}'s netreduce.p4; load average "
                 f"{load:.1f} on a shared 2-core machine")
        mb, ma = statistics.median(b), statistics.median(a)
        out.append({"name": f"{name}, before", "metric": metric, "value": mb, "unit": unit,
                    "notes": notes})
        out.append({"name": f"{name}, after", "metric": metric, "value": ma, "unit": unit,
                    "notes": notes})
        out.append({"name": f"{name}, after / before", "metric": metric,
                    "value": ma / mb if mb else 0.0, "unit": "x", "notes": notes})
    return out
