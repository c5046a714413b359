"""Calibration: the smallest time-dilation factor (TDF) at which a run stays faithful here.

A switch process spends CPU on every packet it handles, and so does each host agent; at the
real link rate ``bw / TDF`` the busiest switch must stay inside the fidelity guard's budget
(:class:`experiment.fidelity.Budget`) and all of them together must leave the machine
headroom. :func:`measure_costs` measures those costs once (a short in-network all-reduce on a
one-switch rack with the job's fan-in, links unshaped), :func:`choose_tdf` turns them into the
TDF, and the costs are cached per program, target, fan-in and machine
(``$XDG_CACHE_HOME/ina-testbed/calibration.json``), so only the first run of a setting pays
for the measurement. A run whose link delays need delay nodes (``topo.delaynodes``) is
calibrated on a rack with delay nodes: their CPU, counted with the switch's, goes into the
per-packet cost at the switch (each aggregation packet crosses one on its way in and its
result one on the way out, as on every delayed link of a bigger fabric).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol, TypeVar

from experiment.fidelity import Budget
from protocol import netreduce as nr

log = logging.getLogger(__name__)

CACHE_VERSION = 3
#: The checkout (whose sources identify the switch's and the agents' builds).
REPO = Path(__file__).resolve().parent.parent
#: Share of the guard's budgets a calibrated run aims at (headroom for the run's own noise:
#: Python's GC, the live view's reads, the kernel's shaping).
HEADROOM = 0.6
#: TDFs are rounded up to these mantissas (times a power of ten) so that runs compare.
NICE_MANTISSAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
#: float32 per worker in the calibration all-reduce that measures per-packet costs (a few
#: windows; a few seconds on BMv2), and how many one-packet all-reduces measure the fixed cost
#: (their mean: a one-packet collective is nothing but its fixed cost).
CALIBRATION_ELEMENTS = 32768
FIXED_COST_ITERS = 5
#: The switch CPU a calibration all-reduce must use to be measured. The C engine's ~260
#: packets of 32768 float32 at E = 252 cost 3 ms, much of it the switch's per-run work;
#: its cost per packet falls with the run's size (fan-in 2, read to the nanosecond by
#: topo.measure.process_cpu_seconds: 11.5 us at 1M float32 = 0.09 s, 10.5 us at 4M =
#: 0.34 s), and the TDF follows it: 0.25 s keeps the estimate near the cost of a long
#: collective. The all-reduce grows (x2 to x16 a step, at most MAX_CALIBRATION_GROWTH
#: times) until it uses that much.
MIN_SWITCH_CPU_S = 0.25
MAX_CALIBRATION_GROWTH = 256
#: The share of a collective's emulated time that the machine's fixed real-time cost (process
#: wake-ups, the first packets through every Python hop) may take, once divided by the TDF.
OVERHEAD_SHARE = 0.02
#: Round trips in which that cost is paid: the agents' window opens from its smallest to the
#: job's (4 x 64 packets from 32: three doublings) and each round trip carries the hops'
#: latency. The one-packet measurement times this (at TDF 1 the spine-leaf make runs ended
#: 30-80 ms, 3-8 one-packet costs, below their link-bound time).
RAMP_ROUND_TRIPS = 4
#: The calibration rack's link delay when it measures with delay nodes (they sit only on
#: delayed links): short enough not to matter at TDF 1.
CALIBRATION_DELAY = "1us"


class CalibrationError(RuntimeError):
    """The calibration could not measure the costs (the message says why)."""


@dataclass(frozen=True)
class Costs:
    """CPU seconds per aggregation packet: at the switch (its whole pipeline, replication of
    results included) and at a host agent (sending one, receiving its result)."""

    switch_s: float
    agent_s: float
    target: str
    fanin: int
    elems: int
    measured: str = ""  # when (UTC, ISO 8601)
    packets: int = 0  # aggregation packets the measurement saw
    overhead_s: float = 0.0  # real seconds of a one-packet collective through one switch

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Fabric:
    """What :func:`choose_tdf` needs to know of a run's network: the aggregation fan-in of
    every switch (children that send it packets), the number of host agents, the fastest
    emulated link (bits/s) and the machine's cores."""

    fanins: Mapping[str, int]
    agents: int
    max_bw_bps: float
    cores: int


def frame_bits(elems: int) -> int:
    """Bits on the wire of one aggregation packet of ``elems`` values (RoCE headers, RETH and
    tag, payload), the unit the costs are per."""
    return 8 * (4 * elems + nr.ROCE_HEADER_BYTES + nr.RETH_TAG_BYTES)


def nice_tdf(value: float) -> float:
    """``value`` rounded up to 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten
    (at least 1)."""
    if value <= 1:
        return 1.0
    exp = math.floor(math.log10(value))
    for m in NICE_MANTISSAS:
        candidate = m * 10 ** exp
        if candidate >= value * (1 - 1e-9):
            return float(f"{candidate:.6g}")
    return float(10 ** (exp + 1))


def max_real_rate(costs: Costs, fabric: Fabric, elems: int, switch_budget: float,
                  machine_budget: float) -> float:
    """The highest real link rate (bits/s) at which every switch stays under
    ``switch_budget`` of a core and switches plus agents under ``machine_budget`` of all cores,
    when every host link sends aggregation packets at its rate (in-network's worst case: the
    ring's forwarded TCP segments cost a switch less per byte)."""
    if costs.switch_s <= 0 or not fabric.fanins:
        return math.inf
    bits = frame_bits(elems)
    busiest = max(fabric.fanins.values())
    # per switch: fanin * (r / bits) packets/s * switch_s <= switch_budget
    r_switch = switch_budget * bits / (busiest * costs.switch_s)
    total_pkts_per_bit = (sum(fabric.fanins.values()) * costs.switch_s
                          + fabric.agents * max(costs.agent_s, 0.0)) / bits
    r_machine = machine_budget * fabric.cores / total_pkts_per_bit
    return min(r_switch, r_machine)


def fixed_cost(costs: Costs, hops: int) -> float:
    """A collective's fixed real-time cost on a path of ``hops`` switches: the calibrated
    one-switch, one-packet cost, per hop, over the window's ramp (``RAMP_ROUND_TRIPS``)."""
    return costs.overhead_s * max(1, hops) * RAMP_ROUND_TRIPS


def choose_tdf(costs: Costs, fabric: Fabric, elems: int,
               switch_budget: float = Budget.switch_core,
               machine_budget: float = Budget.machine, headroom: float = HEADROOM,
               transfer_s: float = 0.0, hops: int = 1) -> tuple[float, str]:
    """(TDF, why): the smallest nice TDF at which (1) the fastest emulated link runs, divided
    by the TDF, no faster than :func:`max_real_rate` allows with ``headroom``, and (2) the
    collective's fixed real-time cost (:func:`fixed_cost` on ``hops``, the switches on the
    job's longest path), divided by the TDF, is at most ``OVERHEAD_SHARE`` of ``transfer_s``
    (the least emulated time the job's collective can take: its transfer at the emulated
    rate and a round trip, ``experiment.dilation.shortest_collective_seconds``; 0: not
    checked)."""
    fixed = fixed_cost(costs, hops)
    real = max_real_rate(costs, fabric, elems, switch_budget * headroom,
                         machine_budget * headroom)
    if math.isinf(real):
        return 1.0, "no per-packet cost measured"
    cpu_tdf = fabric.max_bw_bps / real
    latency_tdf = (fixed / (OVERHEAD_SHARE * transfer_s)
                   if transfer_s > 0 and fixed > 0 else 1.0)
    tdf = nice_tdf(max(cpu_tdf, latency_tdf))
    why = (f"{costs.target}: {costs.switch_s * 1e6:.0f} us CPU per aggregation packet at the "
           f"switch, {costs.agent_s * 1e6:.0f} us at a host agent, busiest fan-in "
           f"{max(fabric.fanins.values())}: CPU-faithful up to {real / 1e6:.3g} Mbit/s real")
    if fixed > 0 and transfer_s > 0:
        why += (f"; fixed cost {fixed * 1e3:.0f} ms real per collective ({max(1, hops)} "
                f"switch hops), "
                f"<= {OVERHEAD_SHARE:.0%} of its emulated time from TDF {latency_tdf:.3g}")
    return tdf, why


# ----------------------------------------------------------------------------- the cache


def machine_id() -> str:
    """This machine's kind: processor model and core count (costs move with both)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}; {os.cpu_count() or 1} cores"


def target_build(target: str) -> str:
    """What identifies the target's build: BMv2's binary (path and time), or the built-in
    target's engine sources (a change to the engine can change its cost)."""
    if target == "bmv2":
        path = shutil.which("simple_switch_grpc")
        if path is None:
            return "bmv2 (not installed)"
        st = Path(path).resolve().stat()
        return f"{Path(path).resolve()} {int(st.st_mtime)}"
    return "softswitch " + sources_digest(REPO / "softswitch")


def agent_build() -> str:
    """What identifies the host agents' build: their sources (the calibration measures an
    agent's CPU per packet too, and a change to the transport changes it)."""
    return "agents " + sources_digest(REPO / "workloads", REPO / "protocol")


def sources_digest(*roots: Path) -> str:
    """SHA-256 (16 hex digits) of every Python source under ``roots``, by path."""
    digest = hashlib.sha256()
    for root in roots:
        for src in sorted(root.rglob("*.py")):
            digest.update(str(src.relative_to(root)).encode())
            digest.update(src.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(target: str, program: Path, elems: int, fanin: int,
              delay_nodes: bool = False, engine: str | None = None,
              io: str | None = None) -> str:
    """The cache key of one setting: target build, agents' build, program text, E, fan-in,
    machine, whether
    delay nodes were measured too, and the built-in switches' packet engine when it is not
    the Python one (the C engine costs a fraction of it per packet), with its packet loop
    when that is not the C engine's own (``io`` python: a Python loop around C calls)."""
    key: list[object] = [target_build(target), agent_build(), program_digest(program),
                         elems, fanin, machine_id()]
    if delay_nodes:
        key.append("delay nodes")
    if engine not in (None, "python"):
        key.append(f"engine {engine}" + (f", io {io}" if io not in (None, "c") else ""))
    return json.dumps(key)


def program_digest(program: Path) -> str:
    """SHA-256 of the program's text and of the files it includes by quoted path (the
    generated NR_ELEMS wrappers include netreduce.p4 so)."""
    digest = hashlib.sha256()
    text = program.read_text()
    digest.update(text.encode())
    for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.MULTILINE):
        included = (program.parent / m.group(1)).resolve()
        if included.is_file():
            digest.update(included.read_bytes())
    return digest.hexdigest()[:16]


#: A calibration cache of its own (a file), leaving every other cache where it is.
CACHE_ENV = "INA_CALIBRATION_CACHE"


def cache_file() -> Path:
    """``$INA_CALIBRATION_CACHE``, else ``$XDG_CACHE_HOME/ina-testbed/calibration.json``
    (default ``~/.cache``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ina-testbed" / "calibration.json"


def load_cached(key: str, path: Path | None = None) -> Costs | None:
    """The cached costs of ``key``; None when absent or unreadable (a bad cache is ignored)."""
    path = path or cache_file()
    try:
        data = json.loads(path.read_text())
        entry = data["entries"][key] if data.get("version") == CACHE_VERSION else None
        return Costs(**entry) if entry else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(key: str, costs: Costs, path: Path | None = None) -> None:
    """Add ``costs`` to the cache (atomically replaced)."""
    path = path or cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text())
        if data.get("version") != CACHE_VERSION:
            data = {}
    except (OSError, ValueError):
        data = {}
    entries = dict(data.get("entries", {}))
    entries[key] = costs.to_dict()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".calibration-")
    with os.fdopen(fd, "w") as f:
        json.dump({"version": CACHE_VERSION, "entries": entries}, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- measuring


class _LinkBytes(Protocol):
    @property
    def rx_bytes(self) -> int: ...


class _RankBytes(Protocol):
    @property
    def bytes_sent(self) -> int: ...


class MeasuredRun(Protocol):
    """What calibration reads of an all-reduce (:class:`experiment.session.AllreduceRun`):
    its links' bytes, its ranks' bytes (and ``cpu_seconds`` where they have it), the
    switch processes' CPU and whether it was exact."""

    @property
    def links(self) -> Sequence[_LinkBytes]: ...

    @property
    def ranks(self) -> Sequence[_RankBytes]: ...

    @property
    def switch_cpu(self) -> Mapping[str, float]: ...

    @property
    def wall_seconds(self) -> float: ...


class GrowableRun(MeasuredRun, Protocol):
    @property
    def exact(self) -> bool: ...


R = TypeVar("R", bound=GrowableRun)


def costs_from_run(run: MeasuredRun, target: str, fanin: int, elems: int) -> Costs:
    """Per-packet costs from one calibration all-reduce (``experiment.session.AllreduceRun``
    on a one-switch rack): the switch's CPU seconds over the aggregation packets it received
    (its ports' received bytes over the frame size: ACKs count as bytes, so the cost per
    packet comes out a little high, which is the safe side), and the agents' CPU seconds over
    the packets they sent. The switch's CPU includes the delay nodes' (``wire:<name>``
    entries of ``run.switch_cpu``) when the rack had them."""
    bits = frame_bits(elems)
    rx_bytes = sum(u.rx_bytes for u in run.links)
    packets = int(rx_bytes * 8 // bits)
    switch_cpu = switch_cpu_seconds(run)
    if packets <= 0 or switch_cpu <= 0:
        raise CalibrationError(f"the calibration all-reduce moved {packets} packets and used "
                               f"{switch_cpu:.2f} CPU s at the switch: nothing to measure")
    sent = sum(r.bytes_sent for r in run.ranks)
    agent_cpu = sum(getattr(r, "cpu_seconds", 0.0) for r in run.ranks)
    agent_packets = max(1, int(sent * 8 // bits))
    return Costs(switch_cpu / packets, agent_cpu / agent_packets, target, fanin, elems,
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), packets)


def switch_cpu_seconds(run: MeasuredRun) -> float:
    """The CPU seconds the switch processes of ``run`` (an ``AllreduceRun``) used."""
    return float(sum(run.switch_cpu.values()) * run.wall_seconds)


def measurable_run(run: Callable[[int, int], R]) -> R:
    """``run(elements, attempt)`` from CALIBRATION_ELEMENTS up, grown until the switch CPU it
    used can be read (:data:`MIN_SWITCH_CPU_S`) or it is MAX_CALIBRATION_GROWTH times as
    large; the last run (``costs_from_run`` refuses one that used nothing)."""
    elements, attempt = CALIBRATION_ELEMENTS, 0
    result = run(elements, attempt)
    while True:
        used = switch_cpu_seconds(result)
        limit = CALIBRATION_ELEMENTS * MAX_CALIBRATION_GROWTH
        if used >= MIN_SWITCH_CPU_S or elements >= limit or not result.exact:
            return result
        wanted = 16.0 if used <= 0 else 1.5 * MIN_SWITCH_CPU_S / used
        growth = 2 ** min(4, max(1, math.ceil(math.log2(wanted))))
        elements, attempt = min(limit, elements * growth), attempt + 1
        log.info("calibration: %.3f CPU s at the switch is below %.2f s; again with %d float32",
                 used, MIN_SWITCH_CPU_S, elements)
        result = run(elements, attempt)


def calibrate(target: str, program: Path, elems: int, fanin: int,
              measure: Callable[[], Costs], *, refresh: bool = False,
              path: Path | None = None, delay_nodes: bool = False,
              engine: str | None = None, io: str | None = None) -> tuple[Costs, bool]:
    """(costs, cached?) of one setting: the cache's, else ``measure()``'s, stored."""
    key = cache_key(target, program, elems, fanin, delay_nodes, engine, io)
    if not refresh:
        hit = load_cached(key, path)
        if hit is not None:
            return hit, True
    costs = measure()
    store(key, costs, path)
    return costs, False


def measure_costs(target: str, program: Path, elems: int, fanin: int,
                  rundir: Path | None = None, announce: Callable[[str], None] | None = None,
                  *, delay_nodes: bool = False, engine: str | None = None,
                  io: str | None = None) -> Costs:
    """Start a one-switch rack of ``fanin`` hosts on ``target`` running ``program`` (links
    unshaped, real time; with ``delay_nodes`` a delay node on each host link), run one
    in-network all-reduce and return its per-packet costs. Needs root; the network is
    stopped on the way out."""
    from experiment.lifecycle import ExperimentNetwork, StartOptions
    from experiment.session import AllreduceRun, ExperimentOptions, create_job, run_allreduce
    from topo.network import Stages
    from topo.topofile import load_spec, resolve
    from topo.topologies import FileTopo

    if announce is not None:
        announce(f"calibrating {target} for {program.name} at E = {elems}, fan-in {fanin} "
                 "(once per setting and machine; cached)")
    params: dict[str, object] = {"hosts": max(2, fanin), "bw": None}
    if delay_nodes:
        params["delay"] = CALIBRATION_DELAY
    spec = load_spec(resolve("rack"), params)
    topo = FileTopo(spec, name_prefix="cal")
    large_opts = ExperimentOptions(elements=CALIBRATION_ELEMENTS, elems=elems,
                                   algorithms=("innetwork",), credits=4, slots=256,
                                   measure_seconds=0.0, job_name="calibration")
    tiny_opts = replace(large_opts, elements=elems, iters=FIXED_COST_ITERS,
                        job_name="calibrationtiny")
    start = StartOptions(delay_nodes=delay_nodes, engine=engine, io=io)
    with ExperimentNetwork(topo, target, rundir, program, start=start) as lab:

        # a job each: a job's PSNs start once
        def run_job(run_opts: ExperimentOptions) -> AllreduceRun:
            plan = create_job(lab.controller, lab.topology, run_opts, Stages(enabled=False))
            plan_path = lab.rundir / f"{run_opts.job_name}.json"
            plan_path.write_text(json.dumps(plan))
            return run_allreduce(lab, None, plan, "innetwork", run_opts, plan_path)

        tiny = run_job(tiny_opts)
        large = measurable_run(lambda n, k: run_job(replace(large_opts, elements=n,
                                                            job_name=f"calibration{k}")))
    for run in (tiny, large):
        if not run.exact:
            raise CalibrationError(f"the calibration all-reduce on {target} was not exact: "
                                   f"{'; '.join(run.errors) or 'wrong sum'}")
    costs = costs_from_run(large, target, max(2, fanin), elems)
    # the ranks report the mean of their timed one-packet calls: the fixed cost
    return replace(costs, overhead_s=tiny.seconds)
