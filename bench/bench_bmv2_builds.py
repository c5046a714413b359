"""BMv2's default build against its performance build: CPU per aggregation packet.

The same measurement ``make run tdf=auto`` calibrates with (``experiment.calibrate``): a
one-switch rack of 4 hosts on BMv2 running netreduce.p4 at E = 252 (make run's program),
one in-network all-reduce of 32 Ki float32 per worker (the switch's CPU seconds over the
aggregation packets it received) and five one-packet all-reduces (the fixed cost). The
builds alternate, ``ROUNDS`` times, so machine noise hits both alike; each build is the
``simple_switch_grpc`` first on ``PATH``: the default build where ``make toolchain`` put it
(``/usr/local/bin``) and the performance build where ``make toolchain
BMV2_FAST_PREFIX=DIR`` put it (``INA_BMV2_FAST_PREFIX``, default ``/usr/local/bmv2-fast``).
Rows: per-packet switch CPU, one-packet fixed cost, and the TDF ``make run`` would choose
from them for its defaults and for ``bw=100G delay=2us`` (spine-leaf). Needs root.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

ROUNDS = 3
FANIN = 4
FAST_PREFIX = Path(os.environ.get("INA_BMV2_FAST_PREFIX", "/usr/local/bmv2-fast"))


def _builds() -> dict[str, str]:
    """Build name -> the PATH that puts its simple_switch_grpc first."""
    path = os.environ.get("PATH", "")
    default = shutil.which("simple_switch_grpc")
    if default is None or shutil.which("p4c") is None:
        raise BenchSkipped("BMv2 toolchain not installed (simple_switch_grpc, p4c)")
    fast_bin = FAST_PREFIX / "bin"
    if not (fast_bin / "simple_switch_grpc").is_file():
        raise BenchSkipped(f"no BMv2 performance build in {FAST_PREFIX} "
                           "(make toolchain BMV2_FAST_PREFIX=...)")
    return {"default build": path, "performance build": f"{fast_bin}:{path}"}


def _tdfs(costs: Any) -> tuple[float, float]:
    """The TDF make run would choose from ``costs``: spine-leaf defaults, and 100G/2us."""
    from experiment import calibrate, dilation
    from topo.topofile import load_spec, resolve

    out = []
    for params in ({}, {"bw": "100G", "delay": "2us"}):
        spec = load_spec(resolve("spineleaf"), params)
        elements = dilation.default_elements(spec, 65536)
        tdf, _ = calibrate.choose_tdf(costs, dilation.fabric_of(spec), costs.elems,
                                      transfer_s=dilation.transfer_seconds(spec, elements),
                                      hops=dilation.switch_hops(spec))
        out.append(tdf)
    return out[0], out[1]


def run() -> list[dict[str, Any]]:
    """All rows (see the module docstring)."""
    if os.geteuid() != 0:
        raise BenchSkipped("needs root (Mininet)")
    builds = _builds()
    from experiment import calibrate
    from experiment.matrix import program_for
    from experiment.run import DEFAULT_ELEMS

    saved = os.environ.get("PATH", "")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-bmv2-builds-") as tmp:
            program = program_for(DEFAULT_ELEMS, Path(tmp) / "build")
            for rnd in range(ROUNDS):
                for name, path in builds.items():
                    os.environ["PATH"] = path
                    rundir = Path(tmp) / f"{name.split()[0]}-{rnd}"
                    costs = calibrate.measure_costs("bmv2", program, DEFAULT_ELEMS,
                                                    FANIN, rundir)
                    tdf_defaults, tdf_100g = _tdfs(costs)
                    results[name].append({"switch_us": costs.switch_s * 1e6,
                                          "fixed_ms": costs.overhead_s * 1e3,
                                          "tdf_defaults": tdf_defaults,
                                          "tdf_100g": tdf_100g})
    finally:
        os.environ["PATH"] = saved
    metrics = (("switch_us", "switch CPU per aggregation packet", "us", "{:.0f}"),
               ("fixed_ms", "one-packet all-reduce (fixed cost)", "ms", "{:.1f}"),
               ("tdf_defaults", "make run's TDF, spine-leaf defaults", "x", "{:g}"),
               ("tdf_100g", "make run's TDF, spine-leaf bw=100G delay=2us", "x", "{:g}"))
    rows = []
    for name, runs in results.items():
        for key, metric, unit, fmt in metrics:
            values = [r[key] for r in runs]
            rows.append({"name": f"BMv2 {name}, netreduce E={DEFAULT_ELEMS}, fan-in {FANIN}",
                         "metric": metric, "value": statistics.median(values), "unit": unit,
                         "notes": f"median of {len(values)}: "
                                  f"{', '.join(fmt.format(v) for v in values)}"})
    base = statistics.median(r["switch_us"] for r in results["default build"])
    fast = statistics.median(r["switch_us"] for r in results["performance build"])
    rows.append({"name": "BMv2 performance build vs default build", "metric":
                 "per-packet CPU, default / performance", "value": base / fast, "unit": "x",
                 "notes": "medians of the alternating rounds above"})
    return rows
