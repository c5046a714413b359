"""The papers' figures as experiments: ``make experiments preset=NAME``.

A preset is one figure of NetReduce's evaluation put under emulation: a topology file, the
values of one axis (tensor size, workers, credits) and the algorithms drawn. Each point runs
the real P4 program, controller and transports at the emulated rate and delay, under the
time-dilation factor that this machine needs for that point (``tdf=auto``: calibrated, one
network per distinct topology and TDF), is judged by the fidelity guard, and is simulated by
ns-3 on the same network (:func:`sim.emulation.fabric_for`). The result is one JSON file, a
plot with the emulation's points, ns-3's curves and the frame-size ideals, and a table.

* :data:`PRESETS` - the figures.
* :func:`run_figure` - runs a preset, returns a :class:`Figure` (``to_dict()``: the JSON).
* :func:`plot_figure`, :func:`table`, :func:`summary_lines` - its plot, table and verdicts.

Adaptive dilation: the calibrated TDF is a first guess. Every point runs again at twice its
TDF and is kept when its times agree within 5 % (an emulation that kept up is invariant under
dilation); else it goes on up (:data:`MAX_RETRIES`). A point that was not faithful (the
guard), not exact or never settled is drawn hollow: the command exits 1 and its comparison
must not be published.
"""

from __future__ import annotations

import functools
import logging
import math
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from algorithms import registry
from experiment import calibrate
from experiment.dilation import (
    AUTO,
    SETTLE_FACTOR,
    SETTLE_SHARE,
    Dilation,
    dilated_options,
    longest_rtt,
    settled,
    switch_hops,
    unsettled_why,
)
from experiment.dilation import fabric_of as dilation_fabric
from experiment.dilation import resolve as resolve_dilation
from experiment.lifecycle import ExperimentNetwork, StartOptions
from experiment.matrix import MatrixSpec, free_grpc_base, program_for
from experiment.replays import (
    HYBRID,
    REPLAY_ITERS,
    ReplayRun,
    ReplaySetting,
    iteration_with,
    ns3_iteration,
    run_replays,
)
from experiment.seams import JsonObject, JsonValue, json_float, json_list, json_object
from experiment.session import HIERARCHICAL, AllreduceRun, ExperimentOptions, ExperimentResult
from experiment.session import run_experiment as run_allreduce_experiment
from protocol import netreduce as nr
from sim.emulation import ALGORITHM_OF, fabric_for, ina_payload_share
from sim.topology import extra_hops
from topo.topofile import TopologySpec, load_spec, resolve
from topo.topologies import FileTopo
from workloads.roce import LINE_RATE, SLOW_START
from workloads.rocecomm import payload_share

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure

log = logging.getLogger(__name__)

#: Emulation and ns-3 agree when within this share of the emulated time (issue 27).
SIM_TOLERANCE = 0.10
#: A credit count is past the knee when its time is within this share of the best one.
KNEE_SHARE = 0.10
#: A replay is compute-bound when its iteration is within this share of its compute alone.
COMPUTE_BOUND_SHARE = 0.10
#: Adaptive dilation: every point runs again at twice its TDF until its times settle
#: (experiment.dilation.settled), at most MAX_RETRIES times; a point that never converged
#: is not fit to publish.
RETRY_FACTOR = SETTLE_FACTOR
MAX_RETRIES = 4
CONVERGED = SETTLE_SHARE
#: The baseline every figure draws in-network against: the papers' is NCCL's ring on RoCE.
BASELINE = "ring-roce"
INNETWORK = "innetwork"
#: A topology file parameter's value (``bw: 100G``, ``hosts: 4``).
Param: TypeAlias = int | float | str | bool | None
#: The network :func:`sim.emulation.fabric_for` is given (rates, delays, sizes).
SimSpec: TypeAlias = dict[str, float]
#: A callback that simulates one point: (algorithm, its network, bytes per worker) -> seconds.
Simulate: TypeAlias = Callable[[str, SimSpec, int], float]


class FigureError(ValueError):
    """A preset or an option that cannot be run (the message names the field and value)."""


@dataclass(frozen=True)
class Point:
    """One value of a figure's axis: the topology parameters, the tensor and the job."""

    x: float  # the axis value, in the axis's unit
    params: Mapping[str, Param]  # topology file parameters
    elements: int  # float32 per worker
    credits: int = 4
    msg_pkts: int = 64
    # a model replay's point (the models preset): the model, shrunk ``scale`` times on links
    # as much slower, in fusion buckets of ``bucket_mb`` MB of the shrunk model
    model: str = ""
    scale: float = 1.0
    bucket_mb: float = 25.0

    @property
    def replay(self) -> ReplaySetting | None:
        """The replay this point runs; None for an all-reduce point."""
        return ReplaySetting(self.model, self.scale, self.bucket_mb) if self.model else None

    @property
    def label(self) -> str:
        """The point on the axis as the plot and the table name it."""
        return self.model or f"{self.x:g}"

    @property
    def slots(self) -> int:
        """The job's slots: one window (``credits x msg_pkts`` packets)."""
        return self.credits * self.msg_pkts


@dataclass(frozen=True)
class Preset:
    """One figure: a topology file, the points of its axis, what it draws and what the paper
    reports for it."""

    name: str
    title: str
    topo: str  # a shipped topology file's name
    axis: str  # x-axis label
    points: tuple[Point, ...]
    paper: str  # the paper's claim that this figure checks
    algorithms: tuple[str, ...] = (INNETWORK, BASELINE)
    log_x: bool = True
    knee: bool = False  # report the credit knee (the credits preset)
    crossover: bool = False  # report where the baseline overtakes in-network (hierarchy)
    # where the transports' congestion windows start (workloads.roce.CC_STARTS): whole,
    # as RoCE NICs (DCQCN) and ns-3 start at line rate; slow start from 32 packets made
    # 10 us links' all-reduces 24 % slower than ns-3's (docs/reproduction.md)
    cc_start: str = LINE_RATE


def _size_points(params: Mapping[str, Param], sizes: Sequence[int]) -> tuple[Point, ...]:
    return tuple(Point(4 * s / 2**20, params, s) for s in sizes)


#: The models preset's shrink factor: the models and the 25 GbE links 100 times smaller
#: (250 Mbit/s), DDP's 25 MB fusion buckets with them.
MODEL_SCALE = 100.0


def _model_points(models: Sequence[str], params: Mapping[str, Param]) -> tuple[Point, ...]:
    from workloads.profiles import get_profile

    return tuple(Point(i + 1, params, get_profile(m, MODEL_SCALE).params, model=m,
                       scale=MODEL_SCALE, bucket_mb=25.0 / MODEL_SCALE)
                 for i, m in enumerate(models))


#: 100 GbE with 2 us links: the papers' network.
PAPER_LINKS = {"bw": "100G", "delay": "2us"}

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("size", "All-reduce time against tensor size (P = 4, one switch, 100 GbE, 2 us)",
           "rack", "tensor per worker (MiB)",
           _size_points({"hosts": 4, **PAPER_LINKS}, (65536, 262144, 1048576, 4194304)),
           "in-network sends each byte once, the ring 2(P-1)/P times: ring / in-network "
           "-> 1.5 for P = 4 once the tensor is large against the bandwidth-delay product"),
    Preset("scaling", "Scaling with P (one switch, 100 GbE, 2 us, 4 MiB per worker)",
           "rack", "workers P",
           tuple(Point(p, {"hosts": p, **PAPER_LINKS}, 1048576) for p in (2, 4, 8)),
           "NetReduce's time does not depend on P; the ring's grows with 2(P-1)/P "
           "(1.0, 1.5, 1.75 times the tensor's transfer for P = 2, 4, 8)", log_x=False),
    # a connection binds at most Limit.BIND messages (credits <= 4): messages of 32 packets
    # put the bandwidth-delay product (~90 packets at 100 GbE, 2 us links) near 3 credits
    Preset("credits", "The credit window (P = 4, one switch, 100 GbE, 2 us, 4 MiB)",
           "rack", "credits (messages of 32 packets in flight)",
           tuple(Point(c, {"hosts": 4, **PAPER_LINKS}, 1048576, credits=c, msg_pkts=32)
                 for c in range(1, nr.Limit.BIND + 1)),
           "credits sized to the bandwidth-delay product make in-network link-bound; fewer "
           "make it window-bound (the knee near BDP / message size)",
           algorithms=(INNETWORK,), log_x=False, knee=True),
    # the other presets' window (4 credits of 64 packets, 281 KB) covers the bandwidth-
    # delay product up to 100 GbE with 2 us links; at 400 GbE (~640 KB with the message's
    # own transfer) it is window-bound. Messages of 256 packets there (1.1 MB) did not
    # settle up to TDF 80,000: the RoCE ring, given the same window, resent 617-4,857
    # packets after NAKs (docs/reproduction.md, the link rate)
    Preset("rates", "All-reduce time against the link rate (P = 4, one switch, 2 us, 4 MiB)",
           "rack", "link rate (Gbit/s)",
           tuple(Point(g, {"hosts": 4, "bw": f"{g}G", "delay": "2us"}, 1048576)
                 for g in (10, 25, 100, 400)),
           "in-network's advantage is the bytes each link carries, so ring / in-network stays "
           "near 2(P-1)/P = 1.5 at every rate where the credits cover the bandwidth-delay "
           "product"),
    # from 5 us the window grows to 4 credits of 256 packets (1.1 MB), which covers the
    # bandwidth-delay product of 10 us links (a 40 us round trip at 100 GbE, 500 KB, and
    # the message's own transfer)
    Preset("delays", "All-reduce time against the link delay (P = 4, one switch, 100 GbE, "
           "4 MiB)", "rack", "link delay (us)",
           tuple(Point(d, {"hosts": 4, "bw": "100G", "delay": f"{d}us"}, 1048576,
                       msg_pkts=64 if d <= 2 else 256)
                 for d in (1, 2, 5, 10)),
           "longer links add round trips; with credits that cover the bandwidth-delay "
           "product both stay link-bound and ring / in-network near 2(P-1)/P = 1.5"),
    # 16 workers on a k = 4 fat-tree (20 switches, three levels); ns-3 draws its two-level
    # equivalent (8 leaves of 2 hosts under one spine: sim_spec counts leaves and spines)
    Preset("fattree16", "Scaling to P = 16 on a k = 4 fat-tree (100 GbE, 2 us, 4 MiB)",
           "fattree", "workers P",
           (Point(16, {"k": 4, "hosts": 2, **PAPER_LINKS}, 1048576),),
           "NetReduce's time does not depend on P; the ring's grows with 2(P-1)/P "
           "(1.875 times the tensor's transfer for P = 16)", log_x=False),
    # NetReduce's hierarchical mode (each host sums its 2 GPUs' tensors over modelled
    # intra-host links, one network worker per host) against the flat ring over all 8 GPUs,
    # as the intra-host rate goes from the network's to NVLink's 12 times (150 GB/s)
    Preset("hierarchy", "Hierarchical in-network against the flat ring (4 hosts x 2 GPUs, "
           "100 GbE, 2 us, 4 MiB)", "rack", "B_intra / B_inter",
           tuple(Point(r, {"hosts": 4, "gpus": 2, "intra_bw": f"{r * 100:g}G", **PAPER_LINKS},
                       1048576) for r in (1, 1.5, 2, 3, 4, 12)),
           "hierarchical NetReduce beats the flat ring once the intra-host links are fast "
           "enough: the crossover in B_intra / B_inter (the paper: 2.3; NVLink 150 GB/s over "
           "100 GbE is 12)", algorithms=(HIERARCHICAL, BASELINE), crossover=True),
    # training iterations of the model replays (compute overlapped with bucketed
    # all-reduces) at the 25 GbE of Shi et al.'s cluster, where communication shows: each
    # model and its links shrunk MODEL_SCALE times, so every byte takes the full model's time
    Preset("models", "Training-iteration speedup over the ring (P = 4, one switch, 25 GbE, "
           "2 us; models and links shrunk 100x)", "rack", "model",
           _model_points(("resnet50", "vgg16", "bert-base"),
                         {"hosts": 4, "bw": f"{25e3 / MODEL_SCALE:g}M", "delay": "2us"}),
           "up to 1.7x faster training than the ring for CNNs and 1.5x for Transformers "
           "(NetReduce); MSTopK / HiTopKComm and the hybrid (Shi et al.) on the same axes",
           algorithms=(BASELINE, INNETWORK, "topk", HYBRID), log_x=False),
    # the small one `make test` runs: two workers, 10 Mbit/s, two sizes
    Preset("size-small", "All-reduce time against tensor size (P = 2, 10 Mbit/s, 100 us)",
           "rack", "tensor per worker (MiB)",
           _size_points({"hosts": 2, "bw": "10M", "delay": "100us"}, (16384, 65536)),
           "ring / in-network -> 2(P-1)/P = 1 for P = 2 (the smoke test of the presets)"),
)}


def preset(name: str) -> Preset:
    """The preset called ``name``; FigureError naming the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise FigureError(f"preset {name!r}: choose from {', '.join(PRESETS)}") from None


# ----------------------------------------------------------------------------- the network


def point_spec(fig: Preset, point: Point) -> TopologySpec:
    """The point's network: the preset's topology file with the point's parameters."""
    return load_spec(resolve(fig.topo), point.params)


def workers_of(spec: TopologySpec) -> int:
    return sum(h.gpus for h in spec.hosts if h.gpus > 0)


def host_rate(spec: TopologySpec) -> float:
    """The worker host links' emulated rate, bits/s (the figures shape every link alike)."""
    rates = {h.link.bw_bps for h in spec.hosts if h.gpus > 0}
    rate = rates.pop() if len(rates) == 1 else None
    if rate is None:
        raise FigureError(f"{spec.source}: a figure needs one shaped rate on every worker "
                          f"link, got {sorted(map(str, rates | {rate}))}")
    return float(rate)


def link_delay(spec: TopologySpec) -> float:
    """The worker host links' emulated one-way delay, seconds."""
    return max((h.link.delay_s or 0.0) for h in spec.hosts if h.gpus > 0)


def gpus_per_host(spec: TopologySpec) -> int:
    """The GPUs of each worker host (the hierarchy preset's 2; FigureError when they
    differ: the collectives number ranks host by host, the same count on each)."""
    counts = {h.gpus for h in spec.hosts if h.gpus > 0}
    if len(counts) != 1:
        raise FigureError(f"{spec.source}: worker hosts with {sorted(counts)} GPUs; a figure "
                          "needs the same number on each")
    return counts.pop()


def sim_spec(spec: TopologySpec, point: Point, elems: int, switch_delay_s: float
             ) -> SimSpec:
    """The spec dict of :func:`sim.emulation.fabric_for` for the point's network: a rack is
    one leaf (and a spine the job never uses)."""
    roles = [sw.role for sw in spec.switches]
    leaves = max(1, roles.count("leaf"))
    gpus = gpus_per_host(spec)
    out: SimSpec = {"spines": max(1, roles.count("spine")), "leaves": leaves,
                    "hosts_per_leaf": workers_of(spec) // gpus // leaves, "gpus": gpus,
                    "bw_mbit": host_rate(spec) / 1e6, "delay_s": link_delay(spec),
                    "switch_delay_s": switch_delay_s, "elems": elems, "credits": point.credits,
                    "msg_pkts": point.msg_pkts,
                    # a deeper tree (the fat-tree): its longer paths in the fabric links
                    "fabric_extra_hops": extra_hops(spec) if leaves > 1 else 0,
                    # the RoCE ring's window: the agents' (experiment.session passes it)
                    "roce_window": point.slots}
    intra = {h.intra_bw_bps for h in spec.hosts if h.gpus > 0}
    if len(intra) == 1 and (bps := intra.pop()) is not None:
        out["intra_bw_mbit"] = bps / 1e6
    return out


def ideal_seconds(algo: str, workers: int, elements: int, bps: float, elems: int,
                  point: Point, spine: bool = False) -> tuple[float, float]:
    """(payload-only, frame-size) ideal time of one all-reduce: the bytes the busiest host
    link must carry at its rate. In-network sends the tensor once; a ring 2(P-1)/P times.
    The frame-size ideal adds each transport's headers and ACK share (``sim.emulation``)."""
    payload_bits = 32 * elements
    if registry.get(algo).innetwork:
        share = ina_payload_share(elems, point.msg_pkts, point.slots, spine)
        return payload_bits / bps, payload_bits / bps / share
    ring = 2 * (workers - 1) / workers * payload_bits / bps
    return ring, ring / payload_share()


def ns3(algo: str, spec: SimSpec, nbytes: int) -> float:
    """The ns-3 simulation of one point (the default :data:`Simulate`)."""
    from sim.ns3sim import simulate

    return simulate(ALGORITHM_OF[algo], fabric_for(algo, spec), nbytes).seconds


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Outcome:
    """One algorithm at one point: the emulated all-reduce, its ideals and ns-3's time."""

    algorithm: str
    seconds: float  # emulated
    real_seconds: float
    exact: bool
    faithful: bool
    fidelity: tuple[str, ...]  # the guard's failed checks
    link_bound: bool
    bottleneck: str
    busiest_util: float | None
    retransmissions: int
    errors: tuple[str, ...]
    ideal_s: float  # payload bytes at the link rate
    frames_ideal_s: float  # the same with every transport's headers and ACK share
    ns3_seconds: float | None = None

    @property
    def good(self) -> bool:
        """Exact and faithful: fit to publish."""
        return self.exact and self.faithful

    @property
    def sim_error(self) -> float | None:
        """(ns-3 - emulated) / emulated; None without both."""
        if self.ns3_seconds is None or self.seconds <= 0:
            return None
        return (self.ns3_seconds - self.seconds) / self.seconds

    def to_dict(self) -> JsonObject:
        return {**_plain(self), "sim_error": self.sim_error}


@dataclass(frozen=True)
class PointOutcome:
    """One point of the figure: its settings and each algorithm's outcome."""

    x: float
    params: Mapping[str, Param]
    elements: int
    workers: int
    credits: int
    msg_pkts: int
    bw_bps: float
    delay_s: float
    rtt_s: float  # the emulated propagation round trip, longest between two workers
    switch_hops: int
    tdf: float
    dilation: str  # why this TDF
    runs: Mapping[str, Outcome]
    # the earlier runs of this point, at lower TDFs, whose transports lost packets in a
    # network configured without loss: (TDF, packets resent)
    retried: tuple[tuple[float, int], ...] = ()
    converged: bool = False  # its times agreed with the run at the TDF before
    model: str = ""  # a model replay's point: its times are training iterations

    @property
    def label(self) -> str:
        return self.model or f"{self.x:g}"

    def speedup(self, algo: str) -> tuple[float | None, float | None]:
        """(emulated, ns-3) baseline time over ``algo``'s (None where either is missing or
        the emulated run failed)."""
        run, base = self.runs.get(algo), self.runs.get(BASELINE)
        if run is None or base is None:
            return None, None
        emulated = (base.seconds / run.seconds if run.exact and base.exact and run.seconds > 0
                    else None)
        sim = (base.ns3_seconds / run.ns3_seconds if base.ns3_seconds and run.ns3_seconds
               else None)
        return emulated, sim

    @property
    def resent(self) -> int:
        """Packets the transports resent at this point, every algorithm."""
        return sum(run.retransmissions for run in self.runs.values())

    @property
    def innetwork(self) -> Outcome | None:
        """The run through the switches (flat or hierarchical in-network)."""
        return next((run for algo, run in self.runs.items() if registry.get(algo).innetwork),
                    None)

    @property
    def ratio(self) -> tuple[float, float] | None:
        """(measured, frame-size ideal) ring / in-network time, where both ran exact."""
        inn, ring = self.innetwork, self.runs.get(BASELINE)
        if inn is None or ring is None or not (inn.exact and ring.exact) or inn.seconds <= 0:
            return None
        return ring.seconds / inn.seconds, ring.frames_ideal_s / inn.frames_ideal_s

    def to_dict(self) -> JsonObject:
        out = _plain(self, skip=("runs",))
        out["runs"] = {algo: run.to_dict() for algo, run in self.runs.items()}
        ratio = self.ratio
        out["ratio"], out["ideal_ratio"] = ratio if ratio else (None, None)
        return out


@dataclass(frozen=True)
class Knee:
    """The fewest credits within :data:`KNEE_SHARE` of the best in-network time, beside the
    bandwidth-delay product in messages."""

    credits: int
    msg_pkts: int
    best_seconds: float
    bdp_messages: float


@dataclass(frozen=True)
class Crossover:
    """Where the baseline's time over in-network's crosses 1 along the axis (interpolated
    between the two points around it, the axis in log scale): from the emulated times and
    from ns-3's; None where they never cross on the points run."""

    emulated: float | None
    ns3: float | None


def crossing(points: Sequence[tuple[float, float]]) -> float | None:
    """The first axis value where ``ratio`` (baseline / in-network, over x) goes from below
    1 to 1 or above, interpolated on log x; None when it never does."""
    pts = sorted(points)
    for (x0, r0), (x1, r1) in zip(pts, pts[1:], strict=False):
        if r0 < 1 <= r1:
            share = (1 - r0) / (r1 - r0)
            return math.exp(math.log(x0) + share * (math.log(x1) - math.log(x0)))
    return None


@dataclass(frozen=True)
class Figure:
    """A preset's run: every point, and where and how it ran."""

    preset: Preset
    points: tuple[PointOutcome, ...]
    elems: int
    engine: str | None = None
    started: str = ""
    command: str = ""
    machine: str = field(default_factory=calibrate.machine_id)
    cc_start: str = ""  # the transports' window start it ran with; "": the preset's

    def __post_init__(self) -> None:
        if not self.cc_start:
            object.__setattr__(self, "cc_start", self.preset.cc_start)

    def outcomes(self) -> Iterator[tuple[PointOutcome, Outcome]]:
        for point in self.points:
            for run in point.runs.values():
                yield point, run

    @property
    def exact(self) -> bool:
        return all(run.exact for _, run in self.outcomes())

    @property
    def faithful(self) -> bool:
        return all(run.faithful for _, run in self.outcomes())

    @property
    def converged(self) -> bool:
        """Every point's times held when the TDF was raised (:data:`CONVERGED`)."""
        return all(point.converged for point in self.points)

    @property
    def sim_outside_tolerance(self) -> list[str]:
        """The points where ns-3 and the emulation differ by more than the tolerance."""
        return [f"{run.algorithm} at {point.label}: ns-3 {err:+.0%}"
                for point, run in self.outcomes()
                if (err := run.sim_error) is not None and abs(err) > SIM_TOLERANCE]

    @property
    def knee(self) -> Knee | None:
        """The credit knee (presets that sweep credits), None without exact points."""
        pts = [(p, p.runs[INNETWORK]) for p in self.points
               if INNETWORK in p.runs and p.runs[INNETWORK].exact]
        if not self.preset.knee or not pts:
            return None
        best = min(run.seconds for _, run in pts)
        point = min((p for p, run in pts if run.seconds <= best * (1 + KNEE_SHARE)),
                    key=lambda p: p.credits)
        bdp = point.rtt_s * point.bw_bps / (point.msg_pkts * calibrate.frame_bits(self.elems))
        return Knee(point.credits, point.msg_pkts, best, bdp)

    @property
    def crossover(self) -> Crossover | None:
        """Where hierarchical in-network overtakes the flat ring (presets that sweep the
        intra-host rate), from the exact points' emulated times and from ns-3's."""
        if not self.preset.crossover:
            return None
        emulated, simulated = [], []
        for point in self.points:
            inn, ring = point.innetwork, point.runs.get(BASELINE)
            if inn is None or ring is None:
                continue
            if inn.exact and ring.exact:
                emulated.append((point.x, ring.seconds / inn.seconds))
            if inn.ns3_seconds and ring.ns3_seconds:  # ns-3's, whatever the emulation did
                simulated.append((point.x, ring.ns3_seconds / inn.ns3_seconds))
        return Crossover(crossing(emulated), crossing(simulated))

    def to_dict(self) -> JsonObject:
        fig = self.preset
        knee = self.knee
        crossover = self.crossover
        return {"preset": fig.name, "title": fig.title, "axis": fig.axis, "paper": fig.paper,
                "topology": fig.topo, "algorithms": list(fig.algorithms), "elems": self.elems,
                "cc_start": self.cc_start,
                "engine": self.engine, "started": self.started, "command": self.command,
                "machine": self.machine, "exact": self.exact, "faithful": self.faithful,
                "converged": self.converged,
                "sim_tolerance": SIM_TOLERANCE,
                "sim_outside_tolerance": list(self.sim_outside_tolerance),
                "knee": _plain(knee) if knee else None,
                "crossover": _plain(crossover) if crossover else None,
                "points": [p.to_dict() for p in self.points]}


def figure_from_dict(doc: JsonObject) -> Figure:
    """The :class:`Figure` a results file holds (``Figure.to_dict``), to plot and tabulate
    it again without running it; FigureError naming what is missing or malformed."""
    try:
        fig = preset(str(doc["preset"]))
        points = []
        for raw in json_list(doc["points"]):
            p: dict[str, Any] = dict(json_object(raw))
            runs = {}
            for algo, run in json_object(p.pop("runs")).items():
                r: dict[str, Any] = dict(json_object(run))
                r.pop("sim_error", None)
                r["fidelity"], r["errors"] = tuple(json_list(r["fidelity"])), tuple(
                    json_list(r["errors"]))
                runs[algo] = Outcome(**r)
            p.pop("ratio", None)
            p.pop("ideal_ratio", None)
            p["retried"] = tuple(tuple(json_list(t)) for t in json_list(p["retried"]))
            p["params"] = json_object(p["params"])
            points.append(PointOutcome(**p, runs=runs))
        return Figure(fig, tuple(points), int(json_float(doc["elems"])),
                      str(doc["engine"]) if doc.get("engine") else None,
                      str(doc.get("started", "")),
                      str(doc.get("command", "")), str(doc.get("machine", "")),
                      # results from before the option ran with slow start
                      str(doc.get("cc_start", SLOW_START)))
    except (KeyError, TypeError, ValueError) as exc:
        raise FigureError(f"not a figure's results ({type(exc).__name__}: {exc})") from None


def _plain(obj: Outcome | PointOutcome | Knee | Crossover, skip: tuple[str, ...] = ()
           ) -> JsonObject:
    """A result dataclass's fields but ``skip`` as JSON values (tuples as lists, mappings as
    objects)."""
    return {name: _json(getattr(obj, name)) for name in obj.__dataclass_fields__
            if name not in skip}


def _json(value: object) -> JsonValue:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    raise TypeError(f"not a JSON value: {value!r}")


# ----------------------------------------------------------------------------- running


@dataclass
class Options:
    """How a preset runs: the TDF option, the built-in target's engine, where things go."""

    tdf: str | float = AUTO
    engine: str | None = None
    rundir: Path | None = None
    name_prefix: str = ""
    grpc_base_port: int | None = None
    simulate: Simulate | None = ns3
    announce: Callable[[str], None] = field(default=lambda _text: None)
    refresh: bool = False  # recalibrate
    retries: int = MAX_RETRIES  # how many times a point may go up to settle


def outcome(run: AllreduceRun, ideals: tuple[float, float], sim_s: float | None) -> Outcome:
    """What a figure keeps of one all-reduce."""
    from experiment.run import bottleneck

    busy = run.busiest
    link_bound, verdict = bottleneck(run)
    return Outcome(run.algorithm, run.seconds, run.seconds * run.tdf, run.exact,
                   run.fidelity.faithful, tuple(run.fidelity.failures), link_bound, verdict,
                   busy.utilization if busy is not None else None,
                   sum(r.retransmissions for r in run.ranks), tuple(run.errors),
                   ideals[0], ideals[1], sim_s)


@contextmanager
def _network(spec: TopologySpec, program: Path, dilation: Dilation, opts: Options,
             group: int) -> Iterator[ExperimentNetwork]:
    topo = FileTopo(spec, name_prefix=opts.name_prefix,
                    grpc_base_port=(opts.grpc_base_port if opts.grpc_base_port is not None
                                    else free_grpc_base(len(spec.switches))))
    rundir = opts.rundir / f"net{group}" if opts.rundir is not None else None
    start = StartOptions(tdf=dilation.tdf, engine=opts.engine)
    with ExperimentNetwork(topo, "softswitch", rundir, program, start=start,
                           program_fabric=False) as lab:
        yield lab


def _point_runs(lab: ExperimentNetwork, fig: Preset, spec: TopologySpec, point: Point,
                index: int, dilation: Dilation, elems: int) -> ExperimentResult:
    job = f"fig{index}"
    base = ExperimentOptions(elements=point.elements, algorithms=fig.algorithms, elems=elems,
                             credits=point.credits, slots=point.slots, msg_pkts=point.msg_pkts,
                             job_name=job, measure_seconds=0.0,
                             gpus_per_host=gpus_per_host(spec), cc_start=fig.cc_start)
    result = run_allreduce_experiment(lab, dilated_options(base, spec, dilation, "softswitch"))
    lab.controller.delete_job(job)  # the next point's job gets the slots
    return result


def plan(fig: Preset, program: Path, elems: int, opts: Options
         ) -> list[tuple[int, TopologySpec, Dilation]]:
    """Each point's network and TDF (``opts.tdf``: auto calibrates once per fan-in and
    caches; each point gets the TDF its own tensor needs)."""
    out = []
    measured: set[int] = set()  # fan-ins recalibrated in this run (--recalibrate)
    for index, point in enumerate(fig.points):
        spec = point_spec(fig, point)
        host_rate(spec)
        fanins = dilation_fabric(spec).fanins
        fanin = max(fanins.values()) if fanins else 0
        refresh = opts.refresh and fanin not in measured
        measured.add(fanin)
        dilation = resolve_dilation(opts.tdf, "softswitch", program, spec, elems,
                                    elements=point.elements, refresh=refresh,
                                    # one directory per calibration: a second one in
                                    # the first's found its controller's job still there
                                    rundir=(opts.rundir / f"calibration{index}"
                                            if opts.rundir is not None else None),
                                    announce=opts.announce, engine=opts.engine)
        out.append((index, spec, dilation))
    return out


def run_figure(fig: Preset, opts: Options, command: str = "") -> Figure:
    """Runs every point of ``fig`` (points waiting with the same network and TDF share one
    network), each again at a higher TDF until its times settle (:class:`Attempt`), and
    returns the figure. The switches' engine is ``make run``'s where ``opts`` names none,
    for the calibration and the networks alike."""
    from experiment.run import run_engine

    opts = replace(opts, engine=run_engine(opts.engine))
    elems = nr.PROGRAM_ELEMS
    program = program_for(elems, (opts.rundir or Path("build")) / "figure-program")
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    pending = [Attempt(index, spec, dilation, retries=opts.retries)
               for index, spec, dilation
               in plan(fig, program, elems, opts)]
    done: dict[int, PointOutcome] = {}
    networks = 0
    while pending:
        first = pending[0]
        group = [a for a in pending if a.spec == first.spec
                 and a.dilation.tdf == first.dilation.tdf]
        pending = [a for a in pending if a not in group]
        opts.announce(f"network: {len(first.spec.hosts)} hosts, TDF {first.dilation.tdf:g} "
                      f"({first.dilation.why})")
        with _network(first.spec, program, first.dilation, opts, networks) as lab:
            for attempt in group:
                point = fig.points[attempt.index]
                opts.announce(f"point {attempt.index + 1}/{len(fig.points)}: "
                              f"{fig.axis} = {point.label}")
                if point.replay is not None:
                    outcome = replay_point_outcome(lab, fig, attempt.spec, point,
                                                   attempt.dilation, elems, opts,
                                                   attempt.retried)
                else:
                    result = _point_runs(lab, fig, attempt.spec, point, attempt.index,
                                         attempt.dilation, elems)
                    outcome = point_outcome(point, attempt.spec, attempt.dilation, result,
                                            elems, opts.simulate, attempt.retried)
                outcome = replace(outcome, converged=attempt.converged(outcome))
                again = attempt.again(outcome, point)
                if again is None:
                    done[attempt.index] = outcome
                else:
                    opts.announce(f"point {attempt.index + 1}: again at TDF "
                                  f"{again.dilation.tdf:g} "
                                  f"({again.dilation.why.rsplit('; ', 1)[-1]})")
                    pending.append(again)
        networks += 1
    return Figure(fig, tuple(done[i] for i in sorted(done)), elems, opts.engine, started,
                  command)


@dataclass(frozen=True)
class Attempt:
    """One run of a point: its network, its TDF, the earlier runs (TDF, packets resent) and
    the times of the last loss-free one (the reference this run must agree with)."""

    index: int
    spec: TopologySpec
    dilation: Dilation
    retried: tuple[tuple[float, int], ...] = ()
    reference: Mapping[str, float] | None = None
    retries: int = MAX_RETRIES  # how many times a point may go up

    def converged(self, outcome: PointOutcome) -> bool:
        """Nothing resent, and every algorithm's time within :data:`CONVERGED` of the
        reference run's."""
        return settled({a: r.seconds for a, r in outcome.runs.items()}, outcome.resent,
                       self.reference)

    def again(self, outcome: PointOutcome, point: Point) -> Attempt | None:
        """The next attempt at a higher TDF, or None to keep this one (converged, or no
        retries left)."""
        if self.converged(outcome) or len(self.retried) >= self.retries:
            return None
        tdf = calibrate.nice_tdf(self.dilation.tdf * RETRY_FACTOR)
        why = unsettled_why(self.dilation.tdf, outcome.resent, self.reference)
        # a run that resent packets is no reference: its transports' timers, in emulated
        # time, cost the same at any TDF, so two lossy runs can agree and both be slow
        times = ({a: r.seconds for a, r in outcome.runs.items()} if outcome.resent == 0
                 else self.reference)
        return Attempt(self.index, self.spec,
                       replace(self.dilation, tdf=tdf, why=f"{self.dilation.why}; {why}"),
                       (*self.retried, (self.dilation.tdf, outcome.resent)), times,
                       self.retries)


def point_outcome(point: Point, spec: TopologySpec, dilation: Dilation,
                  result: ExperimentResult, elems: int, simulate: Simulate | None,
                  retried: tuple[tuple[float, int], ...] = ()) -> PointOutcome:
    """One point: the settings, and per algorithm the emulated run, the ideals and ns-3's
    time on the same network."""
    workers = workers_of(spec)
    bps = host_rate(spec)
    sspec = sim_spec(spec, point, elems, _switch_delay(dilation))
    runs: dict[str, Outcome] = {}
    for run in result.runs:
        ideals = ideal_seconds(run.algorithm, workers, point.elements, bps, elems, point)
        sim_s = None
        if simulate is not None and run.algorithm in ALGORITHM_OF:
            sim_s = simulate(run.algorithm, sspec, 4 * point.elements)
        runs[run.algorithm] = outcome(run, ideals, sim_s)
    return _point_outcome(point, spec, dilation, runs, retried)


def _switch_delay(dilation: Dilation) -> float:
    """A switch crossing in emulated time: the calibrated one-packet collective through one
    switch, dilated (0 without a calibration)."""
    return dilation.costs.overhead_s / dilation.tdf if dilation.costs else 0.0


def _point_outcome(point: Point, spec: TopologySpec, dilation: Dilation,
                   runs: Mapping[str, Outcome], retried: tuple[tuple[float, int], ...]
                   ) -> PointOutcome:
    """The point's settings around its outcomes."""
    return PointOutcome(point.x, point.params, point.elements, workers_of(spec),
                        point.credits, point.msg_pkts, host_rate(spec), link_delay(spec),
                        longest_rtt(spec), switch_hops(spec), dilation.tdf, dilation.why,
                        runs, retried, model=point.model)


def replay_spec(fig: Preset, spec: TopologySpec, point: Point, dilation: Dilation,
                elems: int) -> MatrixSpec:
    """The replays' job sizing, TDF and timers (those of the point's all-reduces at the
    same TDF, :func:`experiment.dilation.dilated_options`)."""
    setting = point.replay
    assert setting is not None
    job = ExperimentOptions(elements=point.elements, elems=elems, credits=point.credits,
                            slots=point.slots, msg_pkts=point.msg_pkts)
    opts = dilated_options(job, spec, dilation, "softswitch")
    assert opts.rto is not None and opts.max_rto is not None
    assert opts.roce_rto is not None and opts.roce_max_rto is not None
    return MatrixSpec(leaves=1, hosts_per_leaf=workers_of(spec) // gpus_per_host(spec),
                      gpus=gpus_per_host(spec), algos=fig.algorithms, models=(setting.model,),
                      scale=setting.scale, replay_iters=REPLAY_ITERS, elems=elems,
                      credits=point.credits, slots=point.slots, msg_pkts=point.msg_pkts,
                      timeout_s=opts.timeout_s, tdf=dilation.tdf,
                      timers=(opts.rto, opts.max_rto),
                      roce_timers=(opts.roce_rto, opts.roce_max_rto),
                      bucket_mb=setting.bucket_mb, cc_start=fig.cc_start)


def replay_point_outcome(lab: ExperimentNetwork, fig: Preset, spec: TopologySpec,
                         point: Point, dilation: Dilation, elems: int, opts: Options,
                         retried: tuple[tuple[float, int], ...] = ()) -> PointOutcome:
    """A model replay's point: each algorithm's emulated training iteration, judged by the
    guard, beside ns-3's iteration and the frame-size ideal's (every bucket's all-reduce at
    its ideal; compute alone for the sparse ones, whose bytes depend on the gradients)."""
    setting = point.replay
    assert setting is not None
    if not lab.programmed:
        lab.program()
    workdir = (opts.rundir or Path("build")) / "replays" / f"{point.model}-{dilation.tdf:g}"
    runs = run_replays(lab, fig.algorithms, setting,
                       replay_spec(fig, spec, point, dilation, elems), workdir)
    sspec = sim_spec(spec, point, elems, _switch_delay(dilation))
    simulate = opts.simulate

    # each (algorithm, bucket size) once: the hybrid's phases are algorithms drawn beside it
    @functools.cache
    def bucket(algo: str, nbytes: int) -> float:
        assert simulate is not None
        return simulate(algo, sspec, nbytes)

    outcomes = {run.algorithm: replay_outcome(run, setting, spec, point, elems,
                                              ns3_iteration(run.algorithm, setting, bucket)
                                              if simulate is not None else None)
                for run in runs}
    return _point_outcome(point, spec, dilation, outcomes, retried)


def replay_outcome(run: ReplayRun, setting: ReplaySetting, spec: TopologySpec, point: Point,
                   elems: int, sim_s: float | None) -> Outcome:
    """What a figure keeps of one replay. Exact means every rank finished every iteration
    (a replay does not check its sums: the all-reduce points do)."""
    compute = setting.compute_s
    frames = compute
    if run.algorithm in (BASELINE, INNETWORK):
        workers, bps = workers_of(spec), host_rate(spec)
        frames = iteration_with(setting, lambda nbytes: ideal_seconds(
            run.algorithm, workers, max(1, nbytes // 4), bps, elems, point)[1])
    hidden = run.iteration_s <= compute * (1 + COMPUTE_BOUND_SHARE)
    return Outcome(run.algorithm, run.iteration_s, run.iteration_s * run.verdict.tdf,
                   not run.errors and run.iteration_s > 0, run.verdict.faithful,
                   tuple(run.verdict.failures), False,
                   f"compute (the iteration within {COMPUTE_BOUND_SHARE:.0%} of compute alone)"
                   if hidden else
                   f"communication ({run.comm_s * 1e3:.3g} ms per iteration)",
                   run.busiest_util, run.retransmissions, run.errors, compute, frames, sim_s)


# ----------------------------------------------------------------------------- output


def table(fig: Figure) -> str:
    """A Markdown table: per point and algorithm, emulated and ns-3 time, the frame-size
    ideal, the TDF and the fidelity verdict."""
    lines = [f"| {fig.preset.axis} | algorithm | emulated | ns-3 | ns-3 vs emulated | "
             "frame-size ideal | TDF | resent | converged | faithful, exact |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for point, run in fig.outcomes():
        sim = run.ns3_seconds
        err = run.sim_error
        lines.append(
            f"| {point.label} | {run.algorithm} | {_time(run.seconds)} | "
            f"{_time(sim) if sim is not None else 'n/a'} | "
            f"{f'{err:+.1%}' if err is not None else 'n/a'} | {_time(run.frames_ideal_s)} | "
            f"{point.tdf:g} | {run.retransmissions} | {'yes' if point.converged else 'NO'} | "
            f"{'yes' if run.faithful else 'NO'}, "
            f"{'yes' if run.exact else 'NO'} |")
    return "\n".join(lines)


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def plot_figure(fig: Figure, path: Path) -> Path:
    """The figure: emulated points (hollow where not faithful or not exact), ns-3 as a
    dashed line and the frame-size ideal as a dotted one, per algorithm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(6.4, 4.2))
    if fig.points and all(p.model for p in fig.points):
        _draw_speedups(fig, ax)
        return _save(fig, figure, ax, path)
    for algo in fig.preset.algorithms:
        alg = registry.get(algo)
        pts = [(p.x, p.runs[algo]) for p in fig.points if algo in p.runs]
        xs = [x for x, _ in pts]
        for point in fig.points:
            if algo in point.runs:
                run = point.runs[algo]
                ax.plot([point.x], [run.seconds * 1e3], "o", color=alg.color,
                        markerfacecolor=(alg.color if run.good and point.converged
                                         else "none"))
        ax.plot(xs, [run.seconds * 1e3 for _, run in pts], "-", color=alg.color, lw=1,
                label=f"{alg.label}, emulated")
        sims = [(x, run.ns3_seconds) for x, run in pts if run.ns3_seconds is not None]
        if sims:
            # marked too: a figure of one point (fattree16) has no line to draw
            ax.plot([x for x, _ in sims], [s * 1e3 for _, s in sims], "x--", color=alg.color,
                    lw=1, label=f"{alg.label}, ns-3")
        ax.plot(xs, [run.frames_ideal_s * 1e3 for _, run in pts], "_:", color=alg.color, lw=1,
                markersize=14, label=f"{alg.label}, frame-size ideal")
    if fig.preset.log_x and len(fig.points) > 1:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
    ax.set_xlabel(fig.preset.axis)
    ax.set_ylabel("all-reduce time (ms, emulated)")
    crossover = fig.crossover
    if crossover is not None and crossover.emulated is not None:
        ax.axvline(crossover.emulated, color="grey", lw=0.8,
                   label=f"crossover {crossover.emulated:.2f} (emulated)")
    return _save(fig, figure, ax, path)


def _draw_speedups(fig: Figure, ax: Axes) -> None:
    """A replay figure: per model, each algorithm's training-iteration speedup over the
    baseline, emulated (bars, hollow where not fit to publish) and ns-3's (black marks)."""
    algos = [a for a in fig.preset.algorithms if a != BASELINE]
    width = 0.8 / max(1, len(algos))
    for i, algo in enumerate(algos):
        alg = registry.get(algo)
        for j, point in enumerate(fig.points):
            emulated, sim = point.speedup(algo)
            x = j + (i - (len(algos) - 1) / 2) * width
            run = point.runs.get(algo)
            good = run is not None and run.good and point.converged
            if emulated is not None:
                ax.bar(x, emulated, width * 0.9, color=alg.color if good else "none",
                       edgecolor=alg.color, label=alg.label if j == 0 else None)
                ax.annotate(f"{emulated:.2f}", (x, max(emulated, sim or 0.0)),
                            xytext=(0, 5), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7)
            if sim is not None:
                ax.plot([x], [sim], "kx", label="ns-3" if i == 0 and j == 0 else None)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(fig.points)), [p.label for p in fig.points])
    ax.set_xlabel(fig.preset.axis)
    ax.set_ylabel(f"iteration speedup over {registry.get(BASELINE).label}")


def _save(fig: Figure, figure: MplFigure, ax: Axes, path: Path) -> Path:
    """The title with the verdict, grid, legend; writes ``path``."""
    import matplotlib.pyplot as plt

    verdict = ("" if fig.exact and fig.faithful and fig.converged
               else " (hollow: NOT faithful, exact or converged)")
    ax.set_title(textwrap.fill(fig.preset.title + verdict, 75), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _speedup(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def _crossing(x: float | None) -> str:
    return "none on these points" if x is None else f"{x:.2f}"


#: How a summary names where the transports' windows started.
CC_START_WORDS = {LINE_RATE: "started whole (line rate, as RoCE NICs and ns-3)",
                  SLOW_START: "slow-started from two ACK intervals (ns-3 starts at line rate)"}


def summary_lines(fig: Figure) -> list[str]:
    """Measured ring / in-network against the frame-size ideal per point, the credit knee,
    where ns-3 differs, and whether the comparison may be published."""
    lines = []
    for point in fig.points:
        ratio, inn = point.ratio, point.innetwork
        if point.model:
            lines.append(f"{point.model}: iteration speedup over {BASELINE}: " + ", ".join(
                f"{algo} {_speedup(point.speedup(algo)[0])} (ns-3 "
                f"{_speedup(point.speedup(algo)[1])})"
                for algo in fig.preset.algorithms if algo != BASELINE))
        elif ratio is not None and inn is not None:
            lines.append(f"{fig.preset.axis} = {point.label}: {BASELINE} / {inn.algorithm} "
                         f"{ratio[0]:.2f} (frame-size ideal {ratio[1]:.2f})")
    lines.append(f"congestion windows: {CC_START_WORDS.get(fig.cc_start, fig.cc_start)}")
    knee = fig.knee
    if knee is not None:
        lines.append(f"credit knee: {knee.credits} credits of {knee.msg_pkts} packets (within "
                     f"{KNEE_SHARE:.0%} of the best time); bandwidth-delay product "
                     f"{knee.bdp_messages:.1f} messages")
    crossover = fig.crossover
    if crossover is not None:
        lines.append(f"crossover ({BASELINE} slower than {HIERARCHICAL} from there): "
                     f"{fig.preset.axis} = {_crossing(crossover.emulated)} emulated, "
                     f"{_crossing(crossover.ns3)} in ns-3")
    lines += [f"ns-3 and the emulation differ by more than {SIM_TOLERANCE:.0%}: {line}"
              for line in fig.sim_outside_tolerance]
    lines += [f"{fig.preset.axis} = {p.label}: times did not settle as the TDF rose (last "
              f"TDF {p.tdf:g}, earlier {', '.join(f'{t:g}' for t, _ in p.retried)})"
              for p in fig.points if not p.converged]
    if not (fig.exact and fig.faithful and fig.converged):
        lines.append("NOT faithful, exact or converged (hollow points): do not publish this "
                     "comparison")
    return lines
