"""Runs a :class:`~sim.schedules.Schedule` on ns-3 (PyPI package ``ns3``, bindings via cppyy).

ns-3 is loaded lazily, once per process, and only the modules the executor includes (the
wheel's own ``from ns import ns`` JIT-parses the headers of all ~45 modules: 15-20 s of CPU
against 2-3 s for these three), and our executor (``collective_engine.cc``) is JIT-compiled
into it the first time. Each :func:`simulate` call builds a fresh network, runs it to
completion and destroys it, so runs are independent; nothing but the loaded libraries
outlives a call.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import SimError
from sim.fabric import Fabric
from sim.schedules import Schedule, build

log = logging.getLogger(__name__)

_ENGINE_SOURCE = Path(__file__).with_name("collective_engine.cc")
_MODULE_INCLUDE = re.compile(r'^#include "ns3/([\w-]+)-module\.h"', re.M)


def ns3_modules() -> tuple[str, ...]:
    """The ns-3 modules the executor includes (read from its source, so the list cannot
    drift from it); their libraries pull in what they link."""
    return tuple(_MODULE_INCLUDE.findall(_ENGINE_SOURCE.read_text()))


class SimulatorUnavailable(SimError, RuntimeError):
    """ns-3 (the ``ns3`` wheel and its ``cppyy``) cannot be loaded here."""


class SimulationError(SimError, RuntimeError):
    """The simulated collective did not complete (a schedule or engine bug)."""


@dataclass(frozen=True)
class SimResult:
    """One simulated collective: its time and what it cost to simulate."""

    algorithm: str
    workers: int
    nbytes: int
    seconds: float
    packets: int
    wire_bytes: int
    ops: int
    wall_s: float


@functools.lru_cache(maxsize=1)
def _namespace() -> Any:
    """Loads ns-3 and compiles the executor; cached for the life of the process."""
    started = time.perf_counter()
    try:
        import cppyy

        _load_ns3(cppyy)
    except ImportError as exc:  # the wheel is missing or cppyy cannot build
        raise SimulatorUnavailable(
            f"ns-3 is not available ({exc}); install it with `.venv/bin/pip install "
            "ns3==3.44.post0`"
        ) from exc
    if not hasattr(cppyy.gbl, "inasim"):
        cppyy.cppdef(_ENGINE_SOURCE.read_text())
    log.info("ns-3 loaded and executor compiled in %.1f s", time.perf_counter() - started)
    return cppyy.gbl.inasim


def _load_ns3(cppyy: Any) -> None:
    """The libraries of :func:`ns3_modules` from the ``ns3`` wheel, then their headers (in
    that order: a header's static objects need their library's symbols)."""
    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the ns3 package is not installed")
    prefix = Path(next(iter(spec.submodule_search_locations)))
    libdirs = [d for d in (prefix / "lib64", prefix / "lib") if d.is_dir()]
    modules = ns3_modules()
    for module in modules:
        found = sorted(p for d in libdirs for p in d.glob(f"libns3*-{module}.so"))
        if not found:
            raise ImportError(f"no ns-3 {module} library under {prefix}")
        cppyy.load_library(str(found[-1]))
    cppyy.add_include_path(str(prefix / "include"))
    for module in modules:
        cppyy.include(f"ns3/{module}-module.h")


def available() -> bool:
    """Whether ns-3 can be imported (imports it: slow the first time)."""
    try:
        _namespace()
    except SimulatorUnavailable:
        return False
    return True


def _params(f: Fabric) -> Any:
    ns = _namespace()
    p = ns.Params()
    p.spines = f.spines
    p.leaves = f.leaves
    p.hostsPerLeaf = f.hosts_per_leaf
    p.gpusPerHost = f.gpus_per_host
    p.hostBps = float(f.host_bps)
    p.fabricBps = float(f.fabric_rate)
    p.intraBps = float(f.intra_bps)
    p.linkDelay = float(f.link_delay_s)
    p.fabricDelay = float(f.fabric_link_delay)
    p.intraDelay = float(f.intra_delay_s)
    p.switchDelay = float(f.switch_delay_s)
    p.segment = int(f.segment_bytes)
    p.header = int(f.header_bytes)
    p.window = int(f.credit_window())
    p.message = int(f.message_packets)
    p.inaSpines = int(f.ina_spines)
    p.sendWindow = int(f.send_window)
    p.sendAckEvery = int(f.send_ack_every)
    p.switchHeader = int(f.switch_header_bytes)
    return p


def run_schedule(f: Fabric, schedule: Schedule, algorithm: str = "custom",
                 nbytes: int = 0) -> SimResult:
    """Simulates ``schedule`` on ``f``; raises :class:`SimulationError` if it cannot finish."""
    ns = _namespace()
    started = time.perf_counter()
    engine = ns.Engine(_params(f))
    if schedule.ops:
        engine.AddOps(schedule.ops, schedule.kind, schedule.src, schedule.dst, schedule.nbytes,
                      schedule.job)
    if schedule.dep_op.size:
        engine.AddDeps(int(schedule.dep_op.size), schedule.dep_op, schedule.dep_on)
    seconds = float(engine.Run())
    if seconds < 0:
        raise SimulationError(
            f"{algorithm}: {engine.Incomplete()} of {schedule.ops} operations never completed"
        )
    result = SimResult(algorithm, f.workers, nbytes, seconds, int(engine.PacketsSent()),
                       int(engine.WireBytes()), schedule.ops, time.perf_counter() - started)
    log.debug("simulated %s", result)
    return result


def simulate(algorithm: str, f: Fabric, nbytes: int, density: float = 0.01) -> SimResult:
    """Simulated seconds of one ``algorithm`` all-reduce of ``nbytes`` per worker on ``f``."""
    schedule = build(algorithm, f, int(nbytes), density)
    return run_schedule(f, schedule, algorithm, int(nbytes))
