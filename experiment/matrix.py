"""Experiment matrix on an emulated network: algorithms x tensor sizes x model replays.

It runs on the *controller* side (the root namespace): an
:class:`~experiment.lifecycle.ExperimentNetwork` starts a Mininet network of built-in switches,
programs it and launches ``python -m workloads`` inside the hosts; this module decides what
to run and turns the measurements into cells.

* :class:`MatrixSpec` - what to run (topology, algorithms, sizes, models, job sizing).
* :class:`Launcher` - on a running, programmed network: one all-reduce or one replay of
  one algorithm over every worker, measured (per-rank time, exactness, per-link bytes from
  the P4 port counters, switch and machine CPU). In-network runs get a fresh job each.
* :func:`running_network` - the spec's network (an ``ExperimentNetwork``) as a Launcher.
* :func:`run_matrix` - starts the network, runs every cell with a progress bar, writes
  ``<out>/matrix-<time>.json`` and two plots; used by ``python -m experiment matrix``
  (``make experiments``) and by ``bench/bench_workloads.py``.

Workers are numbered host by host; a host with ``g`` GPUs runs ``g`` TCP ranks (ring, torus,
hier, top-k, hybrid), or one process for its ``g`` RoCE ranks (ring-roce, torus-roce,
hier-roce: they share the host's port 4791), or serves ``g`` in-network workers from one
agent (``innetwork``: each GPU sends its whole tensor through the host's NIC), or one
network worker for the host's sum (``innetwork-hier``: NetReduce's hierarchical mode,
intra-host links modelled).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from algorithms import registry
from experiment.lifecycle import ExperimentNetwork, Rows, StartOptions, Window
from experiment.seams import (
    FabricController,
    JsonObject,
    JsonValue,
    RunningNetwork,
    json_float,
    json_int,
)
from experiment.session import cc_start_argv, intra_bw_argv
from protocol.netreduce import MTU_ELEMS, PROGRAM_ELEMS, ROCE_V2_PORT, elems_error
from vtime import format_rate
from workloads.roce import CC_STARTS, SLOW_START

if TYPE_CHECKING:
    from topo.topologies import SpineLeafTopo

log = logging.getLogger(__name__)

TCP_ALGOS = registry.names(transport=registry.TCP)
ROCE_ALGOS = registry.names(transport=registry.ROCE)
INNETWORK_ALGOS = registry.names(transport=registry.INNETWORK)
ALGOS = TCP_ALGOS + ROCE_ALGOS + INNETWORK_ALGOS
DEFAULT_MODELS = ("resnet50", "bert-base")
RING_PORT_BASE = 5600
#: A replay cell's iterations before the measured ones, and the hybrid schedule it runs:
#: sparse for SPARSE_EPOCHS epochs of ITERS_PER_EPOCH iterations, then dense (so the
#: default two measured iterations are one sparse and one dense).
REPLAY_WARMUP = 1
SPARSE_EPOCHS = 1
ITERS_PER_EPOCH = 2
REPO_ROOT = Path(__file__).resolve().parent.parent


class MatrixError(RuntimeError):
    """The matrix could not be run (bad spec, network or controller failure)."""


@dataclass(frozen=True)
class MatrixSpec:
    """What to run. Defaults: the 8-worker spine-leaf of docs/workloads.md (2 spines, 2
    leaves, 2 hosts per leaf, 2 GPUs per host) on 3 Mbit/s links, NR_ELEMS = 252 (full MTU)."""

    spines: int = 2
    leaves: int = 2
    hosts_per_leaf: int = 2
    gpus: int = 2
    bw_mbit: float = 3.0
    intra_bw_bps: float | None = None  # innetwork-hier's rate between GPUs; None: the workload's
    algos: tuple[str, ...] = ("ring", "innetwork-hier")
    sizes: tuple[int, ...] = (262144,)  # float32 elements per worker (all-reduce cells)
    models: tuple[str, ...] = ()  # replay cells
    scale: float = 1000.0  # replay: models shrunk this much
    iters: int = 1  # timed all-reduces per cell
    replay_iters: int = 3
    elems: int = MTU_ELEMS  # NR_ELEMS: the program is built with it (full path MTU)
    credits: int = 4
    slots: int = 256
    msg_pkts: int = 64
    density: float = 0.01
    dtype: str = "float32"  # all-reduce cells: float32 (fixed point in-network) or int32
    seed: int = 1
    timeout_s: float = 300.0
    name_prefix: str = ""
    grpc_base_port: int | None = None
    egress_order: str = "sync"  # the switches' (built-in target); random is seeded by seed
    tdf: float = 1.0  # the network's time-dilation factor (the hosts' clocks run as slow)
    # (lowest, highest) retransmission timeouts, emulated s: in-network agents', the RoCE
    # baselines'; None: the workload's defaults
    timers: tuple[float, float] | None = None
    roce_timers: tuple[float, float] | None = None
    bucket_mb: float | None = None  # replay: fusion bucket (MB of the shrunk model)
    cc_start: str = SLOW_START  # where RoCE and in-network congestion windows start

    def __post_init__(self) -> None:
        unknown = [a for a in self.algos if a not in registry.REGISTRY_NAMES]
        if unknown:
            raise MatrixError(f"unknown algorithm(s) {', '.join(unknown)}; choose from "
                              f"{', '.join(ALGOS)}")
        if self.cc_start not in CC_STARTS:
            raise MatrixError(f"cc_start {self.cc_start!r}: choose from {', '.join(CC_STARTS)}")
        # aliases (ina, inswitch, hitopk, ...) name the same cells as their canonical names
        object.__setattr__(self, "algos", tuple(registry.canonical(a) for a in self.algos))
        why = elems_error(self.elems)
        if why is not None:
            raise MatrixError(why)
        if any(s < 1 for s in self.sizes):
            raise MatrixError("sizes must be >= 1")
        from workloads.profiles import PROFILES

        bad = [m for m in self.models if m not in PROFILES]
        if bad:
            raise MatrixError(f"unknown model(s) {', '.join(bad)}; choose from "
                              f"{', '.join(sorted(PROFILES))}")

    @property
    def workers(self) -> int:
        return self.leaves * self.hosts_per_leaf * self.gpus


@dataclass(frozen=True)
class Cell:
    """One measured run: an all-reduce of ``size`` elements or a replay of ``model``."""

    kind: str  # "allreduce" | "replay"
    algo: str
    workers: int
    size: int = 0
    model: str = ""
    seconds: float = 0.0  # all-reduce: slowest rank's mean time; replay: mean iteration
    comm_seconds: float = 0.0  # replay: mean time inside all-reduce calls
    exact: bool | None = None  # all-reduce: every rank holds the exact result
    busiest_util: float | None = None  # busiest link's rate / shaped rate
    busiest_link: str = ""
    host_link_util: float | None = None  # mean over host links (busier direction)
    switch_cpu: dict[str, float] = field(default_factory=dict)  # cores, over the run
    agent_cpu: float = 0.0  # mean CPU cores of the host processes over the timed part
    agent_cpu_max: float = 0.0  # the busiest host process's CPU cores over the timed part
    machine_busy: float = 0.0  # fraction of all cores busy during the run
    retransmissions: int = 0
    timeouts: int = 0  # transport timeouts over all ranks (in-network)
    naks: int = 0  # NAKs received over all ranks (in-network: results out of order, loss)
    bytes_sent: int = 0  # per rank, mean
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors and self.exact is not False


# ----------------------------------------------------------------------------- helpers


#: p4src/netreduce.p4 of this checkout.
NETREDUCE_SOURCE = REPO_ROOT / "p4src" / "netreduce.p4"


def netreduce_wrapper(elems: int, dest: Path, source: Path = NETREDUCE_SOURCE) -> Path:
    """A two-line program in ``dest`` that defines ``NR_ELEMS = elems`` and includes
    ``source`` (any build of netreduce.p4: an older revision's keeps working the same way)."""
    dest.mkdir(parents=True, exist_ok=True)
    wrapper = dest / f"netreduce_e{elems}.p4"
    wrapper.write_text(f"/* netreduce.p4 with {elems} elements per packet (generated) */\n"
                       f"#define NR_ELEMS {elems}\n#include \"{source.resolve()}\"\n")
    return wrapper


def program_for(elems: int, dest: Path) -> Path:
    """The netreduce program built with ``NR_ELEMS = elems``: p4src/netreduce.p4 itself for
    its own NR_ELEMS, else a wrapper in ``dest`` (:func:`netreduce_wrapper`)."""
    if elems == PROGRAM_ELEMS:
        return NETREDUCE_SOURCE
    return netreduce_wrapper(elems, dest)


def free_grpc_base(count: int, start: int = 26000) -> int:
    """A first P4Runtime port with ``count`` free ports after it (so a matrix or a test
    network never collides with ``make run``'s default ports). Start below the kernel's
    ephemeral ports (32768 and up by default): a client socket never takes those, so a
    switch's port cannot be taken between this choice and the switch's bind."""
    from topo.errors import SwitchStartError
    from topo.nodes import free_port_base

    try:
        return free_port_base(count, start)
    except SwitchStartError as exc:
        raise MatrixError(str(exc)) from None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _mean_of(seconds: JsonValue) -> float:
    """A worker's time: one number, or the mean of one per timed call."""
    if isinstance(seconds, list):
        return _mean([json_float(s) for s in seconds])
    return json_float(seconds)


# ----------------------------------------------------------------------------- launcher


class Launcher:
    """Runs single cells on a running network whose routes are programmed."""

    def __init__(self, lab: ExperimentNetwork, spec: MatrixSpec, workdir: Path) -> None:
        self.lab = lab
        self.spec = spec
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        topo = lab.topology
        self.hosts = [h.name for h in topo.hosts]
        self.gpus = {h.name: h.gpus for h in topo.hosts}
        self.ips = {h.name: h.ip for h in topo.hosts}
        self.intra_bw = {h.name: h.intra_bw_bps for h in topo.hosts}
        self._runs = 0

    @property
    def network(self) -> RunningNetwork | None:
        """The running Mininet network (:class:`topo.network.Network`)."""
        return self.lab.network

    @property
    def controller(self) -> FabricController:
        return self.lab.controller

    @property
    def ranks(self) -> list[str]:
        """The host of every TCP rank, host by host."""
        return [h for h in self.hosts for _ in range(self.gpus[h])]

    # -- argv ---------------------------------------------------------------------------

    def _common(self, algo: str) -> list[str]:
        g = self.gpus[self.hosts[0]]
        argv = ["--seed", str(self.spec.seed), "--timeout", str(self.spec.timeout_s),
                "--density", str(self.spec.density), "--tdf", f"{self.spec.tdf:g}"]
        if algo in TCP_ALGOS:
            return ["--algo", algo, "--gpus-per-host", str(g)] + argv
        if algo in ROCE_ALGOS:
            return (["--algo", algo, "--gpus-per-host", str(g)] + argv
                    + _timer_argv(self.spec.roce_timers) + cc_start_argv(self.spec.cc_start))
        argv = (["--algo", "innetwork", "--elems", str(self.spec.elems)] + argv
                + _timer_argv(self.spec.timers) + cc_start_argv(self.spec.cc_start))
        if algo == "innetwork-hier":
            argv += ["--hierarchical", "--gpus", str(g)]
        return argv

    def _processes(self, algo: str, verb: list[str], tag: str
                   ) -> tuple[dict[str, tuple[str, list[str]]], str | None]:
        """{key: (host, argv)} for one run, and the job created for it (in-network)."""
        import sys

        py = [sys.executable, "-m", "workloads"]
        self._runs += 1
        out: dict[str, tuple[str, list[str]]] = {}
        if algo in TCP_ALGOS:
            base = RING_PORT_BASE + (self._runs % 64) * 32
            ranks = self.ranks
            peers = ",".join(f"{self.ips[h]}:{base + r}" for r, h in enumerate(ranks))
            for r, h in enumerate(ranks):
                out[f"{h}#{r}"] = (h, py + verb + self._common(algo) + [
                    "--rank", str(r), "--peers", peers] + self._extra(verb, tag, f"r{r}"))
            return out, None
        if algo in ROCE_ALGOS:
            # one process per host: its ranks share the host's RoCE port (4791)
            ranks = self.ranks
            peers = ",".join(f"{self.ips[h]}:{ROCE_V2_PORT}" for h in ranks)
            for h in dict.fromkeys(ranks):
                mine = ",".join(str(r) for r, owner in enumerate(ranks) if owner == h)
                out[h] = (h, py + verb + self._common(algo) + [
                    "--rank", mine, "--peers", peers] + self._extra(verb, tag, h))
            return out, None
        from controller.jobs import JobRequest

        name = f"m{self._runs}"
        per_host = 1 if algo == "innetwork-hier" else None
        plan = self.controller.create_job(JobRequest(
            name, tuple(self.hosts), credits=self.spec.credits, slots=self.spec.slots,
            msg_pkts=self.spec.msg_pkts, workers_per_host=per_host)).to_dict()
        path = self.workdir / f"job-{name}.json"
        path.write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
        for h in self.hosts:
            out[h] = (h, py + verb + self._common(algo) + ["--job", str(path), "--host", h]
                      + intra_bw_argv(algo, self.intra_bw.get(h)) + self._extra(verb, tag, h))
        return out, name

    def _extra(self, verb: list[str], tag: str, who: str) -> list[str]:
        if verb[0] == "replay":
            return ["--out", str(self.workdir / f"{tag}-{who}.json")]
        return []

    # -- one run ------------------------------------------------------------------------

    def _run(self, algo: str, verb: list[str], tag: str) -> tuple[dict[str, Rows], Window]:
        """Starts every process of one run, waits, measures; returns ({key: rows or error},
        the measured window)."""
        procs_argv, job = self._processes(algo, verb, tag)
        before = self.lab.snapshot()
        try:
            # the processes' --timeout is emulated: TDF times as long in real time
            results = self.lab.run_processes(procs_argv,
                                             self.spec.timeout_s * self.spec.tdf + 60.0)
            window = Window(before, self.lab.snapshot())
        finally:
            if job is not None:
                try:
                    self.controller.delete_job(job)
                except Exception as exc:  # report, keep going with the next cell
                    log.warning("could not delete job %s: %s", job, exc)
        return results, window

    def _links(self, window: Window, seconds: float
               ) -> tuple[float | None, str, float | None]:
        usage = window.links(self.lab.topology, seconds)
        shaped = [u for u in usage if u.utilization is not None]
        if not shaped:
            return None, "", None
        top = max(shaped, key=lambda u: u.utilization or 0.0)
        hosts = [u.utilization or 0.0 for u in shaped if u.kind == "host"]
        return (round(top.utilization or 0.0, 3), f"{top.switch}:{top.port}",
                round(_mean(hosts), 3) if hosts else None)

    @staticmethod
    def _split(results: dict[str, Rows]) -> tuple[list[JsonObject], list[str]]:
        rows: list[JsonObject] = []
        errors: list[str] = []
        for key, got in results.items():
            if isinstance(got, str):
                errors.append(f"{key}: {got}")
            else:
                rows.extend(got)
        return rows, errors

    def allreduce(self, algo: str, size: int) -> Cell:
        """One all-reduce cell: ``iters`` timed calls of ``size`` float32 per worker, each
        worker checking its result against the exact one."""
        verb = ["allreduce", "--size", str(size), "--iters", str(self.spec.iters), "--check",
                "--dtype", self.spec.dtype]
        if algo in INNETWORK_ALGOS:
            verb.append("--barrier")
        results, meas = self._run(algo, verb, f"ar-{algo}-{size}")
        rows, errors = self._split(results)
        if not rows and not errors:
            errors.append("no worker reported")
        times = [_mean_of(r["seconds"]) for r in rows]
        seconds = max(times, default=0.0)
        if any(r.get("check") is False for r in rows):
            errors.append("a worker's result differs from the exact sum")
        busiest, link, host_util = self._links(meas, seconds * self.spec.iters) \
            if seconds > 0 else (None, "", None)
        return Cell("allreduce", algo, self.spec.workers, size=size, seconds=round(seconds, 6),
                    exact=bool(rows) and all(r.get("check") is True for r in rows) and not errors,
                    busiest_util=busiest, busiest_link=link, host_link_util=host_util,
                    switch_cpu=_cores(meas),
                    agent_cpu=round(_mean([json_float(r.get("cpu_utilization", 0.0))
                                           for r in rows]), 3),
                    agent_cpu_max=round(max((json_float(r.get("cpu_utilization", 0.0))
                                             for r in rows), default=0.0), 3),
                    machine_busy=round(meas.machine_busy, 3),
                    retransmissions=sum(json_int(r.get("retransmissions", 0)) for r in rows),
                    timeouts=sum(json_int(r.get("timeouts", 0)) for r in rows),
                    naks=sum(json_int(r.get("naks", 0)) for r in rows),
                    bytes_sent=int(_mean([json_float(r.get("bytes_sent", 0)) for r in rows])),
                    errors=tuple(errors))

    def replay(self, algo: str, model: str) -> Cell:
        """One replay cell: ``replay_iters`` iterations of ``model`` shrunk ``scale`` times
        (after :data:`REPLAY_WARMUP`; the hybrid's epochs are :data:`SPARSE_EPOCHS` x
        :data:`ITERS_PER_EPOCH`). Times are the slowest rank's, emulated; the link shares
        are over the whole run (process start included: a lower bound of the busiest)."""
        verb = ["replay", "--model", model, "--scale", f"{self.spec.scale:g}",
                "--iters", str(self.spec.replay_iters), "--warmup", str(REPLAY_WARMUP),
                "--sparse-epochs", str(SPARSE_EPOCHS), "--iters-per-epoch",
                str(ITERS_PER_EPOCH)]
        if self.spec.bucket_mb is not None:
            verb += ["--bucket-mb", f"{self.spec.bucket_mb:g}"]
        results, meas = self._run(algo, verb, f"rp-{algo}-{model}")
        rows, errors = self._split(results)
        if not rows and not errors:
            errors.append("no worker reported")
        it = max((json_float(r["iteration_s"]) for r in rows), default=0.0)
        comm = max((json_float(r["comm_s"]) for r in rows), default=0.0)
        cpu = [json_float(r.get("cpu_utilization", 0.0)) for r in rows]
        # rates over the run's emulated time (the window's real time over the TDF)
        busiest, link, host_util = self._links(meas, meas.wall / self.spec.tdf)
        return Cell("replay", algo, self.spec.workers, model=model, seconds=round(it, 6),
                    comm_seconds=round(comm, 6), busiest_util=busiest, busiest_link=link,
                    host_link_util=host_util, switch_cpu=_cores(meas),
                    agent_cpu=round(_mean(cpu), 3), agent_cpu_max=round(max(cpu, default=0.0), 3),
                    machine_busy=round(meas.machine_busy, 3),
                    retransmissions=sum(json_int(r.get("retransmissions", 0)) for r in rows),
                    errors=tuple(errors))


def _timer_argv(timers: tuple[float, float] | None) -> list[str]:
    """``--rto`` and ``--max-rto`` for ``(lowest, highest)``; nothing for the defaults."""
    return [] if timers is None else ["--rto", f"{timers[0]:g}", "--max-rto", f"{timers[1]:g}"]


def _cores(window: Window) -> dict[str, float]:
    return {name: round(cores, 3) for name, cores in window.switch_cpu.items()}


# ----------------------------------------------------------------------------- network


def build_topology(spec: MatrixSpec) -> SpineLeafTopo:
    """The spine-leaf the spec describes."""
    from topo.topologies import SpineLeafTopo

    return SpineLeafTopo(
        spines=spec.spines, leaves=spec.leaves, hosts_per_leaf=spec.hosts_per_leaf,
        host_bw=spec.bw_mbit,
        intra_bw=spec.intra_bw_bps / 1e6 if spec.intra_bw_bps is not None else None,
        gpus_per_host=spec.gpus, name_prefix=spec.name_prefix,
        grpc_base_port=(spec.grpc_base_port if spec.grpc_base_port is not None
                        else free_grpc_base(spec.spines + spec.leaves)))


@contextmanager
def running_network(spec: MatrixSpec, rundir: Path | None = None,
                    progress: bool = False) -> Iterator[Launcher]:
    """Starts the spec's network with netreduce.p4 (``NR_ELEMS = spec.elems``), pushes the
    pipeline and routes, yields a :class:`Launcher`; always takes the network down."""
    from liveview import port_or_announce

    topo = build_topology(spec)
    build = Path(rundir) / "program" if rundir else REPO_ROOT / "build" / "matrix"
    program = program_for(spec.elems, build)
    seed = spec.seed if spec.egress_order == "random" else None
    start = StartOptions(progress=progress, egress_order=spec.egress_order, seed=seed)
    with ExperimentNetwork(topo, "softswitch", rundir, program, start=start,
                           live_port=port_or_announce(default=None)) as lab:
        yield Launcher(lab, spec, lab.rundir / "results" / "matrix")


def cells_of(spec: MatrixSpec) -> list[tuple[str, str, int | str]]:
    """The cells in run order: (kind, algorithm, size or model)."""
    out: list[tuple[str, str, int | str]] = []
    out += [("allreduce", a, s) for s in spec.sizes for a in spec.algos]
    out += [("replay", a, m) for m in spec.models for a in spec.algos]
    return out


def run_cells(launcher: Launcher, spec: MatrixSpec,
              on_cell: Callable[[str, str, int | str], None] | None = None) -> list[Cell]:
    """Every cell of the spec on ``launcher``'s network; ``on_cell(kind, algo, what)`` is
    called before each (progress)."""
    cells = []
    for kind, algo, what in cells_of(spec):
        if on_cell is not None:
            on_cell(kind, algo, what)
        cells.append(launcher.allreduce(algo, int(what)) if kind == "allreduce"
                     else launcher.replay(algo, str(what)))
    return cells


def run_matrix(spec: MatrixSpec, out_dir: Path, rundir: Path | None = None,
               show_progress: bool = True) -> tuple[Path, list[Cell]]:
    """Starts the network, runs every cell with a progress bar, writes
    ``out_dir/matrix-<time>.json`` and its plots; returns the JSON path and the cells."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    todo = cells_of(spec)
    if not todo:
        raise MatrixError("nothing to run: give sizes and/or models")
    started = time.strftime("%Y%m%d-%H%M%S")
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TimeElapsedColumn(), disable=not show_progress) as bar:
        task = bar.add_task("starting the network", total=len(todo))
        done = [0]

        def on_cell(kind: str, algo: str, what: int | str) -> None:
            bar.update(task, completed=done[0], description=f"{kind} {algo} {what}")
            done[0] += 1

        with running_network(spec, rundir) as launcher:
            cells = run_cells(launcher, spec, on_cell)
        bar.update(task, completed=len(todo), description="done")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"matrix-{started}.json"
    doc = {"spec": asdict(spec), "ideal_ratio": ideal_ratio(spec.workers),
           "cells": [asdict(c) | {"ok": c.ok} for c in cells]}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    plot_matrix(cells, path.with_suffix(""), spec)
    return path, cells


def ideal_ratio(workers: int) -> float:
    """Ring time / in-network time when links are the bottleneck and headers are free:
    ring sends ``2(P-1)/P`` of the tensor per worker, in-network sends it once."""
    return 2 * (workers - 1) / workers


def plot_matrix(cells: Sequence[Cell], stem: Path, spec: MatrixSpec) -> list[Path]:
    """``<stem>-allreduce.png`` (time per size and algorithm) and ``<stem>-replay.png``
    (iteration time per model and algorithm); only those with cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for kind, key, label in (("allreduce", "size", "float32 per worker"),
                             ("replay", "model", "model")):
        mine = [c for c in cells if c.kind == kind]
        if not mine:
            continue
        groups = list(dict.fromkeys(getattr(c, key) for c in mine))
        algos = list(dict.fromkeys(c.algo for c in mine))
        fig, ax = plt.subplots(figsize=(1.5 + 1.2 * len(groups) * max(1, len(algos)) / 2, 4))
        width = 0.8 / max(1, len(algos))
        for i, algo in enumerate(algos):
            xs, ys = [], []
            for j, g in enumerate(groups):
                hit = [c for c in mine if c.algo == algo and getattr(c, key) == g]
                if hit:
                    xs.append(j + i * width)
                    ys.append(hit[0].seconds if hit[0].ok else 0.0)
            ax.bar(xs, ys, width, label=algo)
        ax.set_xticks([j + width * (len(algos) - 1) / 2 for j in range(len(groups))])
        ax.set_xticklabels([str(g) for g in groups])
        ax.set_xlabel(label)
        ax.set_ylabel("seconds" if kind == "allreduce" else "seconds per iteration")
        ax.set_title(f"{kind}: {spec.workers} workers, {format_rate(spec.bw_mbit * 1e6)} links")
        ax.legend(fontsize="small")
        fig.tight_layout()
        out = Path(f"{stem}-{kind}.png")
        fig.savefig(out, dpi=100)
        plt.close(fig)
        written.append(out)
    return written


def spec_from_args(args: argparse.Namespace) -> MatrixSpec:
    """A :class:`MatrixSpec` from ``python -m experiment matrix`` options."""
    if args.topo != "spineleaf":
        raise MatrixError("only --topo spineleaf is supported by the matrix")
    spec = MatrixSpec()
    return replace(
        spec, spines=args.spines, leaves=args.leaves, hosts_per_leaf=args.hosts, gpus=args.gpus,
        bw_mbit=args.bw / 1e6, intra_bw_bps=args.intra_bw, algos=tuple(args.algos.split(",")),
        sizes=tuple(int(s) for s in args.sizes.split(",") if s),
        models=tuple(m for m in args.models.split(",") if m), scale=args.scale,
        iters=args.iters, replay_iters=args.replay_iters, elems=args.elems,
        credits=args.credits, slots=args.slots, msg_pkts=args.msg_pkts, seed=args.seed,
        cc_start=args.cc_start)
