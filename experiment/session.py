"""The experiment of ``make run``: program the fabric, run all-reduces on the hosts, measure.

:func:`run_experiment` takes a running :class:`topo.network.Network` whose switches were
started with a program (netreduce.p4) and

1. programs them through the controller's Python API (:class:`controller.fabric.Controller`):
   pipeline, IPv4 routes (ECMP over the spines) and one aggregation job over every host;
2. runs the same tensor through an in-network all-reduce and a ring all-reduce, inside the
   Mininet hosts (``host.popen([python, -m, workloads, allreduce, ..., --check])``: ring, one
   process per rank; in-network, one agent per host); each prints one JSON line per rank
   (time, bytes, retransmissions, whether its result equals the exact sum);
3. reads the switches' ``port_rx``/``port_tx`` counters (P4Runtime) and the switch processes'
   CPU time around each all-reduce (the utilisation of every link), and finally offers UDP
   above the link rate from the first to the last host (:func:`topo.measure.measure_path`),
   which says whether the links or a saturated switch process limit the testbed.

Everything lands in ``<rundir>/results/experiment.json``. Starting, programming, launching
host processes, measuring and tearing down are :class:`experiment.lifecycle.ExperimentNetwork`'s;
this module is what ``make run`` does with it. Smaller helpers (:func:`ping_all`,
:func:`tcp_transfer`, :func:`udp_flows`) are used by the integration tests on the same network.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from algorithms import registry
from controller.errors import ControllerError
from controller.jobs import JobRequest
from experiment.fidelity import (
    Budget,
    Monitor,
    RunLoad,
    Verdict,
    judge,
    link_utilization,
    softnet_drops,
)
from experiment.lifecycle import ExperimentNetwork, LinkUsage, Window, collect_rows, kill_all
from experiment.seams import (
    CounterReader,
    FabricController,
    JsonObject,
    JsonValue,
    RunningNetwork,
    StageDisplay,
    json_float,
    json_int,
    json_list,
    json_object,
)
from protocol import netreduce as nr_sizes
from topo.errors import TopoError
from topo.measure import CPU_SATURATED, PathMeasurement, measure_path, process_pids
from topo.model import Topology
from topo.network import Stages
from vtime import format_rate
from workloads.roce import SLOW_START

log = logging.getLogger(__name__)

#: The ring baseline on each transport (``--baseline-transport``; algorithms.registry).
BASELINES = {registry.TCP: "ring", registry.ROCE: "ring-roce"}
ALGORITHMS = ("innetwork", BASELINES[registry.DEFAULT_BASELINE_TRANSPORT])
#: NetReduce's hierarchical mode: each host sums its GPUs' tensors over modelled intra-host
#: links, one network worker per host all-reduces the host sums through the switches.
HIERARCHICAL = "innetwork-hier"
KNOWN_ALGORITHMS = ("innetwork", HIERARCHICAL, *BASELINES.values())
RESULTS_DIR = "results"
RESULT_FILE = "experiment.json"
# In-network timer bounds (lowest, highest) per switch target where the agents' defaults
# (0.05 s, workloads.innetwork.AGG_MAX_RTO) misfire. BMv2 spends ~1.6 ms of its one ingress
# thread per aggregation packet (docs/benchmarks.md, findings), ~20x the built-in target, and
# that thread's FIFO holds the results coming back behind the workers' packets: the first
# window after the barrier (2 workers x 32 packets per leaf) alone delays a result ~0.25 s.
# Spine-leaf make runs with no loss that retransmitted: defaults, 2 of 4 (7 spurious
# timeouts); 0.25-1 s, 1 of 14 without the live view and 2 of 5 with it (its counter reads
# cost BMv2 CPU too); 0.5-1 s, 0 of 7 with it. A larger bound costs only where packets are
# really lost.
TARGET_TIMERS: dict[str, tuple[float, float]] = {"bmv2": (0.5, 1.0)}
# Share of the machine's cores the switch processes together may use before a run counts as
# CPU-bound (the hosts' agents need the rest): the fidelity guard's machine budget.
MACHINE_SATURATED = Budget.machine


class ExperimentError(TopoError):
    """The experiment could not be carried out (controller, hosts, timeouts)."""


@dataclass(frozen=True)
class ExperimentOptions:
    """What to run. The defaults match p4src/netreduce.p4 as it is (E = 32); `experiment.run` passes
    its own, link-bound defaults (65536 float32, E = 64, see docs/topology.md)."""

    elements: int = 8192  # float32 values per worker
    algorithms: tuple[str, ...] = ALGORITHMS
    seed: int = 1
    job_name: str = "allreduce"
    credits: int = 2
    slots: int = 64
    msg_pkts: int | None = None  # packets per message (default: slots // credits)
    elems: int = nr_sizes.PROGRAM_ELEMS  # NR_ELEMS of the program the switches run
    iters: int = 1  # timed all-reduces per run (each rank reports their mean)
    timeout_s: float = 120.0
    ring_port: int = 5400  # rank r listens on ring_port + r (TCP ring)
    hosts: tuple[str, ...] | None = None  # the job's hosts; None: every host with GPUs
    root: str | None = None  # the aggregation tree's root; None: the controller chooses
    measure_seconds: float = 3.0  # UDP load test first host -> last host; 0 to skip
    # in-network agents' retransmission timer, lowest and highest (s); None: the target's
    # (TARGET_TIMERS, chosen by run_allreduce for every caller), else the agent's defaults
    rto: float | None = None
    max_rto: float | None = None
    # the RoCE ring's timer bounds (s); None: its own (workloads.rocecomm), which are what the
    # machine needs at TDF 1: a dilated run sets them in emulated seconds (experiment.dilation)
    roce_rto: float | None = None
    roce_max_rto: float | None = None
    # where the in-network agents' and RoCE ranks' congestion windows start
    # (workloads.roce.CC_STARTS): slow start, or the whole window at once like RoCE NICs
    cc_start: str = SLOW_START
    # time-dilation factor: the hosts' clocks run this many times slower than real time
    # (every duration above is emulated seconds; the network's links were dilated with it)
    tdf: float = 1.0
    # the calibration's fixed real-time cost of a collective (experiment.calibrate; 0:
    # unknown), for the fidelity guard's latency check
    overhead_s: float = 0.0
    # GPUs per host: the baselines run this many ranks on each host (a ring over every GPU),
    # innetwork-hier sums this many tensors per host; flat innetwork runs one worker per host
    gpus_per_host: int = 1


@dataclass(frozen=True)
class RankOutcome:
    """One rank's report (``error`` set when the process failed or said nothing)."""

    rank: int
    host: str
    seconds: float = 0.0
    bytes_sent: int = 0
    exact: bool = False  # the worker compared its result with the exact sum: equal
    retransmissions: int = 0
    error: str | None = None
    timeouts: int = 0  # in-network: retransmission timer expiries ...
    spurious_timeouts: int = 0  # ... of which ACKs later showed nothing was lost
    naks: int = 0  # in-network: NAKs received (a receiver saw a gap)
    lone_timeouts: int = 0  # ... timeouts with one packet in flight: delay or loss, unknowable
    # in-network: every retransmission of the process (barrier and final drain included)
    retransmissions_all: int = 0
    cpu_seconds: float = 0.0  # the process's CPU time (real seconds)
    cpu_utilization: float = 0.0  # ... over its own real run time (cores)
    # RoCE and in-network: the smallest round trip its connections sampled (emulated s;
    # 0.0: none): the path's plus what the machine added, over the TDF
    rtt_min_s: float = 0.0

    @property
    def loss_seen(self) -> int:
        """Losses the transport detected: NAKs and timeouts that were not spurious (a timer
        that fires late on a loaded machine retransmits without any packet lost)."""
        return self.naks + max(0, self.timeouts - self.spurious_timeouts)


@dataclass(frozen=True)
class AllreduceRun:
    """One all-reduce over all hosts."""

    algorithm: str
    elements: int
    ranks: tuple[RankOutcome, ...]
    links: tuple[LinkUsage, ...] = ()
    switch_cpu: dict[str, float] = field(default_factory=dict)  # cores, over wall_seconds
    wall_seconds: float = 0.0  # from starting the workers to their exit
    # in-network: the job's counters at each switch during the run (aggregation_counters)
    switch_counters: dict[str, JsonObject] = field(default_factory=dict)
    # Cores all switch processes used together while the collective ran (their CPU seconds
    # in the window over the collective's own time), and the machine's cores: on a small
    # machine several switches can fill it while none alone fills a core (BMv2 spine-leaf).
    switches_cores: float = 0.0
    machine_cores: int = 0
    # in-network: the agents' retransmission timer bounds (lowest, highest) in s; None:
    # the agent's own default
    timers: tuple[float | None, float | None] = (None, None)
    # The emulated clock's time-dilation factor (seconds above are emulated except
    # wall_seconds; CPU shares are of real time), the switches' highest CPU share over any
    # monitor window, and the kernel's backlog drops while it ran (experiment.fidelity).
    tdf: float = 1.0
    switch_peaks: dict[str, float] = field(default_factory=dict)
    machine_drops: int = 0
    busy_real_seconds: float = 0.0  # the collective's own time, every iteration, real s
    overhead_s: float = 0.0  # the calibrated fixed real cost of a collective (0: unknown)

    @property
    def exact(self) -> bool:
        """Every rank finished and holds exactly the expected sum."""
        return bool(self.ranks) and all(r.error is None and r.exact for r in self.ranks)

    @property
    def seconds(self) -> float:
        """The collective's time: the slowest rank's."""
        return max((r.seconds for r in self.ranks), default=0.0)

    @property
    def errors(self) -> list[str]:
        return [f"rank {r.rank} ({r.host}): {r.error}" for r in self.ranks if r.error]

    @property
    def smallest_rtt(self) -> float:
        """The smallest round trip any rank's connections sampled (emulated s; 0.0: none,
        e.g. TCP): compared with the path's round trip it shows what the machine added."""
        return min((r.rtt_min_s for r in self.ranks if r.rtt_min_s > 0), default=0.0)

    @property
    def busiest(self) -> LinkUsage | None:
        """The link with the highest utilisation (or rate, when unshaped)."""
        return max(self.links, key=lambda u: (u.utilization or 0.0, u.mbit_per_s), default=None)

    @property
    def saturated_switches(self) -> list[str]:
        """Switch processes that used (nearly) a whole core during the run."""
        return sorted(n for n, c in self.switch_cpu.items() if c >= CPU_SATURATED)

    @property
    def agent_cores(self) -> dict[str, float]:
        """Cores each host process used over its own run (agents, ring ranks)."""
        return {f"{r.host}#{r.rank}": r.cpu_utilization for r in self.ranks}

    @property
    def fidelity(self) -> Verdict:
        """The fidelity guard's verdict on this run (experiment.fidelity)."""
        # each switch's CPU over the collective's own (real) time, not the whole window of
        # process start and exit: a short collective's load is not diluted
        busy = self.busy_real_seconds or self.wall_seconds
        cores = {n: c * self.wall_seconds / busy for n, c in self.switch_cpu.items()
                 } if busy > 0 else dict(self.switch_cpu)
        share = (self.overhead_s / self.tdf / self.seconds
                 if self.overhead_s > 0 and self.seconds > 0 else None)
        load = RunLoad(cores, self.switch_peaks, self.agent_cores,
                       self.machine_cores or (os.cpu_count() or 1),
                       link_utilization(self.links), self.machine_drops,
                       fixed_cost_share=share)
        return judge(load, self.tdf)

    @property
    def switches_fill_machine(self) -> bool:
        """The switch processes together kept (nearly) every core busy: the machine's CPU,
        not a link, set the pace."""
        return self.machine_cores > 0 and (
            self.switches_cores >= MACHINE_SATURATED * self.machine_cores)


@dataclass(frozen=True)
class ExperimentResult:
    """Everything :func:`run_experiment` did; ``exact`` decides ``make run``'s status."""

    job: JsonObject
    runs: tuple[AllreduceRun, ...]
    notes: tuple[str, ...] = ()
    path: str | None = None
    path_check: PathMeasurement | None = None  # is the link or a switch the bottleneck?
    elems: int | None = None  # NR_ELEMS of the program (sim.emulation derives frame sizes)
    link_classes: tuple[JsonObject, ...] = ()  # Topology.link_classes(): emulated shapes

    @property
    def exact(self) -> bool:
        return bool(self.runs) and all(r.exact for r in self.runs)

    def to_dict(self) -> JsonObject:
        """JSON-ready, with the derived values (exact, seconds, utilisation) spelled out."""
        runs: list[JsonValue] = []
        for run in self.runs:
            d = asdict(run)
            d.update(exact=run.exact, seconds=run.seconds, errors=run.errors,
                     saturated_switches=run.saturated_switches,
                     switches_fill_machine=run.switches_fill_machine,
                     real_seconds=run.seconds * run.tdf, fidelity=run.fidelity.to_dict())
            for link, usage in zip(d["links"], run.links, strict=True):
                link.update(mbit_per_s=usage.mbit_per_s, utilization=usage.utilization,
                            rate=format_rate(usage.bps) if usage.bps else "0",
                            bw_mbit=usage.bw_bps / 1e6 if usage.bw_bps else None,
                            bw=format_rate(usage.bw_bps) if usage.bw_bps else "unshaped")
            runs.append(d)
        check = None
        if self.path_check is not None:
            check = asdict(self.path_check)
            check.update(configured=self.path_check.configured_text,
                         utilization=self.path_check.utilization,
                         link_bound=self.path_check.link_bound,
                         saturated_switches=self.path_check.saturated_switches)
        return {"exact": self.exact, "job": self.job, "runs": runs, "notes": list(self.notes),
                "path_check": check, "elems": self.elems, "links": list(self.link_classes)}


# ----------------------------------------------------------------------------- processes


def _python() -> list[str]:
    return [sys.executable, "-m"]


def lifecycle(network: ExperimentNetwork | RunningNetwork,
              controller: FabricController | None = None) -> ExperimentNetwork:
    """``network`` itself when it is an :class:`ExperimentNetwork`, else one around it (a
    :class:`topo.network.Network` started elsewhere)."""
    if isinstance(network, ExperimentNetwork):
        return network
    return ExperimentNetwork.around(network, controller)


def collect(procs: dict[str, subprocess.Popen[bytes]], timeout_s: float
            ) -> dict[str, JsonObject]:
    """Like :func:`experiment.lifecycle.collect_rows`, one result per process: {key: its
    last JSON line, or ``{"error": ...}``}."""
    return {key: (rows[-1] if isinstance(rows, list) else {"error": rows})
            for key, rows in collect_rows(procs, timeout_s).items()}


# ----------------------------------------------------------------------------- checks


def ping_all(network: ExperimentNetwork | RunningNetwork, count: int = 2,
             timeout_s: float = 2.0) -> dict[tuple[str, str], int]:
    """Every host pings every other (one process per source host); returns
    {(src, dst): replies received}."""
    lab = lifecycle(network)
    topo = lab.topology
    procs = {}
    for src in topo.hosts:
        dsts = ",".join(h.ip for h in topo.hosts if h.name != src.name)
        if dsts:
            procs[src.name] = lab.popen(src.name, _python() + [
                "topo.hostcmd", "ping", "--dst", dsts, "--count", str(count),
                "--timeout", str(timeout_s)])
    by_ip = {h.ip: h.name for h in topo.hosts}
    replies: dict[tuple[str, str], int] = {}
    for name, res in collect(procs, 30.0 + count * timeout_s * len(topo.hosts)).items():
        if "error" in res:
            raise ExperimentError(f"ping from {name} failed: {res['error']}")
        for item in map(json_object, json_list(res["results"])):
            replies[(name, by_ip[str(item["dst"])])] = json_int(item["received"])
    return replies


def tcp_transfer(network: ExperimentNetwork | RunningNetwork, src: str, dst: str,
                 seconds: float = 4.0, port: int = 5301) -> JsonObject:
    """A bulk TCP transfer from ``src`` to ``dst``; the receiver's byte count and rate."""
    lab = lifecycle(network)
    receiver = lab.popen(dst, _python() + [
        "topo.hostcmd", "tcp-recv", "--port", str(port), "--seconds", str(seconds + 10.0)])
    try:
        assert receiver.stdout is not None
        line = receiver.stdout.readline().decode().strip()
        if line != "ready":
            raise ExperimentError(f"TCP receiver on {dst} did not start: {line!r}")
        sender = lab.popen(src, _python() + [
            "topo.hostcmd", "tcp-send", "--dst", lab.topology.host(dst).ip, "--port", str(port),
            "--seconds", str(seconds)])
        res = collect({"send": sender, "recv": receiver}, seconds + 30.0)
    finally:
        kill_all([receiver])
    for key in ("send", "recv"):
        if "error" in res[key]:
            raise ExperimentError(f"TCP {key} failed: {res[key]['error']}")
    return res["recv"]


def udp_flows(network: ExperimentNetwork | RunningNetwork, src: str, dst: str, sports: range,
              packets: int = 20) -> int:
    """Sends ``packets`` datagrams on each flow (one per source port, fixed destination
    port); returns the number sent."""
    lab = lifecycle(network)
    proc = lab.popen(src, _python() + [
        "topo.hostcmd", "udp-flows", "--dst", lab.topology.host(dst).ip,
        "--sports", f"{sports.start}-{sports.stop - 1}", "--packets", str(packets)])
    res = collect({"udp": proc}, 60.0)["udp"]
    if "error" in res:
        raise ExperimentError(f"UDP flows from {src} failed: {res['error']}")
    return json_int(res["packets"])


# ----------------------------------------------------------------------------- all-reduce


def allreduce_argv(algo: str, opts: ExperimentOptions, *, rank: int | str | None = None,
                   peers: str | None = None, host: str | None = None,
                   plan_path: Path | None = None, intra_bw_bps: float | None = None
                   ) -> list[str]:
    """``python -m workloads allreduce ...`` for one TCP ring rank (``rank``, ``peers``), one
    host's RoCE ring ranks (``rank`` may list several: ``"0,1"``) or one host's in-network
    agent (``host``, ``plan_path``); ``--check`` makes each worker compare its result with
    the exact sum of every rank's deterministic input. The RoCE ring keeps its own timer
    bounds (``workloads.rocecomm``; under dilation ``opts.roce_rto``, ``roce_max_rto``): the
    agents' are set for connections whose results restart their timers
    (``Requester.note_arrived``), and below a full window's queueing delay on a slow link
    they fired spuriously (2 of 3 timeouts per rank in a 3 Mbit/s spine-leaf run)."""
    # the workload runs the hierarchical mode as innetwork with --hierarchical
    name = "innetwork" if algo == HIERARCHICAL else algo
    argv = _python() + ["workloads", "allreduce", "--algo", name, "--size", str(opts.elements),
                        "--seed", str(opts.seed), "--timeout", str(opts.timeout_s), "--check",
                        "--iters", str(opts.iters)]
    if opts.tdf != 1:
        argv += ["--tdf", f"{opts.tdf:g}"]
    if algo in BASELINES.values():
        if rank is None or peers is None:
            raise ExperimentError("a ring rank needs its rank and the peers")
        argv += ["--rank", str(rank), "--peers", peers]
        if algo == BASELINES[registry.ROCE]:
            # the agents' window (credits x packets per message): like for like
            argv += ["--window", str(opts.credits * (opts.msg_pkts or opts.slots // opts.credits))]
            if opts.roce_rto is not None:
                argv += ["--rto", str(opts.roce_rto)]
            if opts.roce_max_rto is not None:
                argv += ["--max-rto", str(opts.roce_max_rto)]
            argv += cc_start_argv(opts.cc_start)
        return argv
    if host is None or plan_path is None:
        raise ExperimentError("an in-network agent needs its host and the job plan")
    return argv + _agent_argv(algo, opts, host, plan_path, intra_bw_bps)


def _agent_argv(algo: str, opts: ExperimentOptions, host: str, plan_path: Path,
                intra_bw_bps: float | None) -> list[str]:
    """An in-network agent's own flags: its job and host; innetwork-hier's GPUs and their
    rate (none: the workload's NVLink default); the timer bounds when set."""
    argv = ["--job", str(plan_path), "--host", host, "--elems", str(opts.elems), "--barrier"]
    if algo == HIERARCHICAL:
        argv += ["--hierarchical", "--gpus", str(opts.gpus_per_host),
                 *intra_bw_argv(algo, intra_bw_bps)]
    if opts.rto is not None:
        argv += ["--rto", str(opts.rto)]
    if opts.max_rto is not None:
        argv += ["--max-rto", str(opts.max_rto)]
    return argv + cc_start_argv(opts.cc_start)


def cc_start_argv(start: str) -> list[str]:
    """``--cc-start`` where it is not the workload's default (older command lines stay)."""
    return [] if start == SLOW_START else ["--cc-start", start]


def intra_bw_argv(algo: str, bps: float | None) -> list[str]:
    """``--intra-bw`` of a hierarchical run: the host's rate between its GPUs as topology.json
    records it, in bits/s with the unit (none recorded: the workload's default)."""
    if algo != HIERARCHICAL or bps is None:
        return []
    return ["--intra-bw", f"{bps:.17g}bit/s"]


def _commands(lab: ExperimentNetwork, algo: str, opts: ExperimentOptions,
              workers: Sequence[JsonObject], plan_path: Path
              ) -> dict[str, tuple[str, list[str]]]:
    """{key: (host, argv)} of one all-reduce: TCP ring, one process per rank; RoCE ring, one
    process per host (its ranks share port 4791); in-network, one agent per host."""
    commands: dict[str, tuple[str, list[str]]] = {}
    if algo == BASELINES[registry.TCP]:
        peers = ",".join(f"{w['ip']}:{opts.ring_port + json_int(w['rank'])}" for w in workers)
        for w in workers:
            commands[f"{w['host']}#{w['rank']}"] = (
                str(w["host"]), allreduce_argv(algo, opts, rank=json_int(w["rank"]), peers=peers))
    elif algo == BASELINES[registry.ROCE]:
        peers = ",".join(f"{w['ip']}:{nr_sizes.ROCE_V2_PORT}" for w in workers)
        for host in dict.fromkeys(str(w["host"]) for w in workers):
            mine = ",".join(str(w["rank"]) for w in workers if w["host"] == host)
            commands[host] = (host, allreduce_argv(algo, opts, rank=mine, peers=peers))
    else:
        for host in dict.fromkeys(str(w["host"]) for w in workers):
            commands[host] = (host, allreduce_argv(
                algo, opts, host=host, plan_path=plan_path,
                intra_bw_bps=lab.topology.host(host).intra_bw_bps))
    return commands


def baseline_ranks(workers: Sequence[JsonObject], gpus_per_host: int) -> list[JsonObject]:
    """The ranks of a host-to-host baseline: ``gpus_per_host`` per job worker (host), host
    by host, numbered 0.. in that order (a ring over every GPU, as the papers' flat ring)."""
    return [{**w, "rank": json_int(w["rank"]) * gpus_per_host + g}
            for w in workers for g in range(gpus_per_host)]


def with_target_timers(opts: ExperimentOptions, target: str | None) -> ExperimentOptions:
    """``opts`` with the in-network timer bounds of ``target`` (TARGET_TIMERS) where it
    leaves them open."""
    low, high = TARGET_TIMERS.get(target or "", (None, None))
    return replace(opts, rto=opts.rto if opts.rto is not None else low,
                   max_rto=opts.max_rto if opts.max_rto is not None else high)


def _outcome(w: JsonObject, row: JsonObject | None, error: str | None) -> RankOutcome:
    rank, host = json_int(w["rank"]), str(w["host"])
    if row is None:
        return RankOutcome(rank, host, error=error or "no result")
    timed = row.get("seconds", 0.0)
    if isinstance(timed, list):  # one per timed call: their mean
        seconds = sum(map(json_float, timed)) / len(timed) if timed else 0.0
    else:
        seconds = json_float(timed)
    check = row.get("check")
    if check is True:
        error = None
    elif check is False:
        error = "result differs from the exact sum"
    else:
        error = "the worker did not check its result"
    resent = json_int(row.get("retransmissions", 0))

    def count(key: str, default: int = 0) -> int:
        return json_int(row.get(key, default))

    return RankOutcome(rank, host, seconds, count("bytes_sent"), check is True, resent, error,
                       count("timeouts"), count("spurious_timeouts"), count("naks"),
                       count("lone_timeouts"), count("retransmissions_all", resent),
                       json_float(row.get("cpu_seconds", 0.0)),
                       json_float(row.get("cpu_utilization", 0.0)),
                       json_float(row.get("rtt_min_us", 0.0)) * 1e-6)


def aggregation_counters(controller: CounterReader, plan: JsonObject,
                         before: dict[str, JsonObject] | None = None
                         ) -> dict[str, JsonObject]:
    """{switch: the job's counters there} (contributions, duplicates, completions, results
    and partials sent, drops by reason), minus ``before`` when given: what the switches saw
    of an in-network all-reduce. With nothing lost every retransmission of a worker arrives
    at its switch as a duplicate, and every slot gets each member's contribution once.
    Empty where the controller offers no job counters (the fault campaigns' read wrappers)."""
    read = getattr(controller, "job_counters", None)
    if read is None:
        return {}
    out: dict[str, JsonObject] = {}
    for row in read(str(plan["name"])):
        switch = str(row["switch"])
        old = (before or {}).get(switch, {})
        counts: JsonObject = {k: json_int(v) - json_int(old.get(k, 0)) for k, v in row.items()
                              if k not in ("job", "switch", "drops")}
        old_drops = json_object(old.get("drops"))
        drops = {k: json_int(n) - json_int(old_drops.get(k, 0))
                 for k, n in json_object(row["drops"]).items()}
        counts["drops"] = {k: n for k, n in drops.items() if n}
        out[switch] = counts
    return out


def run_allreduce(network: ExperimentNetwork | RunningNetwork,
                  controller: CounterReader | None, plan: JsonObject, algo: str,
                  opts: ExperimentOptions, plan_path: Path) -> AllreduceRun:
    """One all-reduce of every worker's tensor, ranks and hosts as in the job plan: TCP ring,
    one process per rank; RoCE ring, one process per host (its ranks share port 4791);
    in-network, one agent per host serving that host's workers.
    ``network``: an :class:`ExperimentNetwork` or a running network; ``controller`` (None:
    the lifecycle's) reads the port counters."""
    lab = lifecycle(network)  # ``controller`` is passed to each read below
    opts = with_target_timers(opts, lab.topology.target)
    workers = sorted(map(json_object, json_list(plan["workers"])),
                     key=lambda w: json_int(w["rank"]))
    if algo == "innetwork" and opts.gpus_per_host > 1:
        raise ExperimentError(f"innetwork runs one worker per host here, not "
                              f"{opts.gpus_per_host}: with several GPUs per host run "
                              f"{HIERARCHICAL}")
    if algo in BASELINES.values():
        workers = baseline_ranks(workers, opts.gpus_per_host)
    commands = _commands(lab, algo, opts, workers, plan_path)
    through_switches = registry.get(algo).innetwork
    reader = controller if controller is not None else lab.controller
    agg0 = aggregation_counters(reader, plan) if through_switches else {}
    before = lab.snapshot(controller)
    drops0 = softnet_drops()
    # the switches and the delay nodes (wire:<name>), whose CPU the guard counts alike
    monitor = Monitor(process_pids(lab.network)).start()
    try:
        # the collective's timeout is emulated seconds: real ones are TDF times longer
        results = lab.run_processes(commands, opts.timeout_s * opts.tdf + 30.0)
    finally:
        peaks = monitor.stop()
    window = Window(before, lab.snapshot(controller))
    drops = softnet_drops() - drops0
    agg = aggregation_counters(reader, plan, agg0) if through_switches else {}
    rows: dict[int, JsonObject] = {}
    errors: dict[str, str] = {}
    for key, got in results.items():
        if isinstance(got, str):
            errors[key.split("#")[0]] = got
            continue
        for row in got:
            rows[json_int(row["rank"])] = row
    outcomes = tuple(_outcome(w, rows.get(json_int(w["rank"])), errors.get(str(w["host"])))
                     for w in workers)
    seconds = max((o.seconds for o in outcomes), default=0.0) or window.wall
    # CPU over the whole window (process start to end): /proc counts in 10 ms ticks, too
    # coarse for the collective's own (often sub-second) time.
    busy = seconds * max(1, opts.iters)  # the collective's own time, every iteration
    links = window.links(lab.topology, busy)  # emulated seconds: emulated rates
    busy_real = busy * opts.tdf
    together = sum(window.switch_cpu_seconds.values()) / busy_real if busy_real > 0 else 0.0
    return AllreduceRun(algo, opts.elements, outcomes, tuple(links), window.switch_cpu,
                        window.wall, agg, together, os.cpu_count() or 1,
                        (opts.rto, opts.max_rto) if through_switches else (None, None),
                        opts.tdf, peaks, drops, busy_real, opts.overhead_s)


# ----------------------------------------------------------------------------- experiment


def create_job(controller: FabricController, topology: Topology, opts: ExperimentOptions,
               stages: StageDisplay) -> JsonObject:
    """One job over ``opts.hosts`` (default every host with GPUs; one worker per host) rooted
    at ``opts.root``; returns the job plan as ``job show --json`` prints it."""
    hosts = opts.hosts or tuple(h.name for h in topology.hosts if h.gpus > 0)
    with stages.stage(f"controller: aggregation job over {len(hosts)} hosts"):
        plan = controller.create_job(JobRequest(opts.job_name, hosts, credits=opts.credits,
                                                slots=opts.slots, msg_pkts=opts.msg_pkts,
                                                workers_per_host=1, root=opts.root))
    return dict(plan.to_dict())


def undilated_clock_notes(tdf: float, target: str, algorithms: Sequence[str]) -> list[str]:
    """What a dilated run could not dilate, for its summary (docs/virtual-time.md)."""
    if tdf == 1:
        return []
    notes = []
    if "ring" in algorithms:
        notes.append(f"ring: kernel TCP's own timers (200 ms lowest retransmission timer, "
                     f"delayed ACKs, 1 s first timer) run in real time, {tdf:g} times shorter "
                     "in emulated time; they fire only on loss, so a loss-free ring is "
                     "unaffected, a lossy one looks better than it would be")
    if target == "bmv2":
        notes.append("BMv2 keeps real time: its timestamps (ingress/egress_global_timestamp, "
                     "queue times) and meters are real, and its per-packet latency shrinks by "
                     f"{tdf:g} in emulated time; netreduce.p4 reads a timestamp only to resend "
                     "a lost partial at most every NR_RESEND_US, which matters under loss only "
                     "(resends come TDF times more often in emulated time)")
    return notes


def check_algorithms(algorithms: Sequence[str]) -> None:
    """Refuses a run naming an algorithm the registry does not know, before anything starts."""
    unknown = [a for a in algorithms if a not in KNOWN_ALGORITHMS]
    if unknown:
        raise ExperimentError(f"unknown algorithm(s) {', '.join(unknown)}; choose from "
                              f"{', '.join(KNOWN_ALGORITHMS)}")


def run_job(lab: ExperimentNetwork, network: ExperimentNetwork | RunningNetwork,
            topology: Topology, opts: ExperimentOptions, stages: StageDisplay, results: Path
            ) -> tuple[JsonObject, list[AllreduceRun]]:
    """Programs the fabric (unless done), plans the job and runs each all-reduce; the
    controller's errors become :class:`ExperimentError`, and a lifecycle made around a
    running ``network`` is stopped whatever happens. Returns the plan and the runs."""
    runs: list[AllreduceRun] = []
    try:
        if not lab.programmed:
            lab.program(stages)
        plan = create_job(lab.controller, topology, opts, stages)
        plan_path = results / f"job-{opts.job_name}.json"
        plan_path.write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
        for algo in opts.algorithms:
            with stages.stage(f"{algo} all-reduce of {opts.elements} float32 on "
                              f"{len(json_list(plan['workers']))} hosts"):
                runs.append(run_allreduce(lab, None, plan, algo, opts, plan_path))
    except ControllerError as exc:
        raise ExperimentError(f"controller: {exc}") from None
    finally:
        if lab is not network:
            lab.stop()  # the controller it opened, its processes; not the network
    return plan, runs


def check_links(net: RunningNetwork | None, topology: Topology, opts: ExperimentOptions,
                stages: StageDisplay, notes: list[str]) -> PathMeasurement | None:
    """The UDP check from the first to the last host (when asked for and there are two
    hosts); a failed or not link-bound check adds a note, as results then need care."""
    if not (opts.measure_seconds > 0 and len(topology.hosts) > 1):
        return None
    check = None
    src, dst = topology.hosts[0].name, topology.hosts[-1].name
    with stages.stage(f"link check: UDP {src} -> {dst} above the link rate"):
        try:
            check = measure_path(net, src, dst, seconds=opts.measure_seconds)
        except TopoError as exc:
            notes.append(f"link check failed: {exc}")
    if check is not None and not check.link_bound:
        notes.append("the link check was NOT link-bound: a switch process or the host, not "
                     "the emulated links, limited the rate; compare results with care")
    return check


def cpu_notes(runs: Sequence[AllreduceRun]) -> list[str]:
    """One note per run the switches' CPU (one process, or the machine) may have limited."""
    notes = []
    for run in runs:
        if run.saturated_switches:
            notes.append(f"{run.algorithm}: switch process(es) {', '.join(run.saturated_switches)}"
                         f" used >= {CPU_SATURATED:.0%} of a core: the switch, not the link, may "
                         "have limited this run")
        elif run.switches_fill_machine:
            notes.append(f"{run.algorithm}: the switch processes together used "
                         f"{run.switches_cores:.1f} of the machine's {run.machine_cores} cores "
                         "while it ran: the machine's CPU, not the links, limited this run")
    return notes


def run_experiment(network: ExperimentNetwork | RunningNetwork,
                   options: ExperimentOptions | None = None,
                   stages: StageDisplay | None = None) -> ExperimentResult:
    """Programs the fabric and runs the all-reduces (see the module docstring) on
    ``network`` (an :class:`ExperimentNetwork`, or a running network: then a lifecycle
    around it opens and closes the controller and kills the processes). Raises
    :class:`ExperimentError` when the controller or the hosts cannot be used; an all-reduce
    that finishes wrong (or a rank that fails) is reported in the result."""
    opts = options or ExperimentOptions()
    stages = stages if stages is not None else Stages(enabled=False)
    check_algorithms(opts.algorithms)
    lab = lifecycle(network)
    topology = lab.topology
    if topology.p4info is None:
        raise ExperimentError("the switches were started without a program: nothing to program")
    results = lab.rundir / RESULTS_DIR
    results.mkdir(parents=True, exist_ok=True)
    net = lab.network  # the Mininet network (measure_path's)
    notes = list(getattr(net, "warnings", []))
    plan, runs = run_job(lab, network, topology, opts, stages, results)
    check = check_links(net, topology, opts, stages, notes)
    notes += undilated_clock_notes(opts.tdf, topology.target, opts.algorithms)
    notes += cpu_notes(runs)
    path = results / RESULT_FILE
    result = ExperimentResult(plan, tuple(runs), tuple(notes), str(path), check, opts.elems,
                              tuple(topology.link_classes()))
    path.write_text(json.dumps(result.to_dict(), indent=1, sort_keys=True, default=str) + "\n")
    return result
