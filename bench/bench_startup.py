"""How long a switch process takes to get its program, with and without the program cache.

Every switch of a network compiles the same program when the controller pushes it, and the
topology code compiles it once more for the P4Info; the program cache
(:mod:`softswitch.program_cache`) keeps the checked program and lark's parser tables on disk.
Each measurement is a fresh Python process that loads ``p4src/netreduce.p4`` as a switch does
(:func:`softswitch.switch.load_program`: front end, code generation, P4Info), so interpreter
start-up and imports are included, as a user sees them. The two variants alternate round by
round in the same run (the machine is shared and noisy); each figure is the median.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "netreduce.p4"
ROUNDS = 5
_LOAD = "from softswitch.switch import load_program; import sys; load_program(sys.argv[1])"


def _load_seconds(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _LOAD, str(PROGRAM)], cwd=ROOT, env=env, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    return time.perf_counter() - start


def run() -> list[dict[str, Any]]:
    """Median seconds to load netreduce.p4 in a new process: cache off vs warm cache."""
    if not PROGRAM.exists():
        raise BenchSkipped(f"{PROGRAM} does not exist")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        off = dict(os.environ, SOFTSWITCH_PROGRAM_CACHE="off")
        warm = dict(os.environ, SOFTSWITCH_PROGRAM_CACHE="on", SOFTSWITCH_CACHE_DIR=tmp)
        _load_seconds(warm)  # fills the cache
        times: dict[str, list[float]] = {"off": [], "warm": []}
        for _ in range(ROUNDS):
            times["off"].append(_load_seconds(off))
            times["warm"].append(_load_seconds(warm))
    load = os.getloadavg()[0]
    notes = (f"new process loading netreduce.p4 as a switch does (imports, front end, code "
             f"generation, P4Info); median of {ROUNDS} alternating rounds; load average "
             f"{load:.1f} on a shared 2-core machine")
    off_s = statistics.median(times["off"])
    warm_s = statistics.median(times["warm"])
    return [
        {"name": "switch program load, cache off", "metric": "time", "value": off_s * 1000,
         "unit": "ms", "notes": notes},
        {"name": "switch program load, cache warm", "metric": "time", "value": warm_s * 1000,
         "unit": "ms", "notes": notes},
        {"name": "switch program load, cache off / warm", "metric": "speed-up",
         "value": off_s / warm_s if warm_s else 0.0, "unit": "x", "notes": notes},
    ]
