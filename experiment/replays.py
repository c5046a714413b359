"""Model replays at one point of a figure: every algorithm's training iteration.

The papers' headline numbers are training speed-ups, not all-reduce times: a model's buckets
are all-reduced while its backward pass goes on, so only the communication that compute
does not hide counts. :func:`run_replays` runs ``python -m workloads replay`` of one model for
each algorithm on a running, time-dilated network (through :class:`experiment.matrix.Launcher`)
and judges each run with the fidelity guard; :func:`ns3_iteration` gives the same iteration
with ns-3's all-reduce time for every bucket (:func:`sim.iteration.iteration_time`), so both
are drawn on one plot.

The hybrid schedule (workloads.schedule) is sparse top-k for the first epochs and the dense
2D torus after them: its replay measures one iteration of each (:data:`HYBRID_PHASES`), and
ns-3's iteration is the mean of the same two.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiment.fidelity import RunLoad, Verdict, judge, softnet_drops
from experiment.lifecycle import ExperimentNetwork
from experiment.matrix import (
    ITERS_PER_EPOCH,
    REPLAY_WARMUP,
    SPARSE_EPOCHS,
    Cell,
    Launcher,
    MatrixSpec,
)
from workloads.profiles import ModelProfile, get_profile, scaled_flops_per_s
from workloads.schedule import SPARSE as SPARSE_MODE
from workloads.schedule import HybridSchedule

log = logging.getLogger(__name__)

HYBRID = "hybrid"
#: The hybrid's sparse and dense phases, by the registry's names (workloads.schedule).
SPARSE, DENSE = "topk", "torus"
#: Iterations measured per replay (after REPLAY_WARMUP): with ITERS_PER_EPOCH = 2 and
#: SPARSE_EPOCHS = 1, the hybrid's two are one sparse and one dense.
REPLAY_ITERS = 2
#: A bucket's all-reduce time in seconds for its bytes per worker.
AllreduceTime = Callable[[int], float]


def hybrid_phases(iterations: int = REPLAY_ITERS) -> list[str]:
    """The algorithm the hybrid runs at each measured iteration (the schedule's mode of the
    iteration's epoch, as the replay's hybrid reducer numbers them)."""
    schedule = HybridSchedule(SPARSE_EPOCHS, 1.0, (0,))
    return [SPARSE if schedule.mode(it // ITERS_PER_EPOCH) == SPARSE_MODE else DENSE
            for it in range(REPLAY_WARMUP, REPLAY_WARMUP + iterations)]


@dataclass(frozen=True)
class ReplaySetting:
    """How a model is replayed: shrunk ``scale`` times (parameters and FLOPs, on links as
    much slower: every byte's time is the full model's), fusion buckets of ``bucket_mb``
    MB of the shrunk model."""

    model: str
    scale: float
    bucket_mb: float

    @property
    def profile(self) -> ModelProfile:
        return get_profile(self.model, self.scale)

    @property
    def flops_per_s(self) -> float:
        """The modelled accelerator, as much slower as the model is smaller (the workload's
        default)."""
        return scaled_flops_per_s(self.scale)

    @property
    def bucket_bytes(self) -> int:
        return int(self.bucket_mb * 1e6)

    @property
    def compute_s(self) -> float:
        """One iteration's forward and backward compute: no iteration is shorter."""
        return self.profile.iteration_compute_s(self.flops_per_s)


@dataclass(frozen=True)
class ReplayRun:
    """One algorithm's replay: the slowest rank's mean iteration and communication
    (emulated), and the guard's verdict on the run."""

    algorithm: str
    iteration_s: float
    comm_s: float
    retransmissions: int
    errors: tuple[str, ...]
    verdict: Verdict
    busiest_util: float | None


def iteration_with(setting: ReplaySetting, allreduce_s: AllreduceTime) -> float:
    """The iteration time of ``setting``'s model with ``allreduce_s`` per bucket."""
    from sim.iteration import iteration_time

    return iteration_time(setting.profile, allreduce_s, setting.bucket_bytes,
                          setting.flops_per_s).iteration_s


def ns3_iteration(algorithm: str, setting: ReplaySetting,
                  simulate: Callable[[str, int], float]) -> float | None:
    """ns-3's iteration of ``algorithm`` (``simulate(algorithm, nbytes)`` per bucket); the
    hybrid's is the mean over its measured phases; None for an algorithm ns-3 lacks."""
    from sim.emulation import ALGORITHM_OF

    if algorithm == HYBRID:
        phases = hybrid_phases()
        times = {p: ns3_iteration(p, setting, simulate) for p in set(phases)}
        if any(t is None for t in times.values()):
            return None
        return sum(times[p] or 0.0 for p in phases) / len(phases)
    if algorithm not in ALGORITHM_OF:
        return None
    return iteration_with(setting, lambda nbytes: simulate(algorithm, nbytes))


def verdict_of(cell: Cell, tdf: float, drops: int) -> Verdict:
    """The fidelity guard on a replay: the switches' cores over the run, the busiest host
    process, every process together, the busiest link's share and the kernel's drops."""
    links = {cell.busiest_link: cell.busiest_util} if cell.busiest_util is not None else {}
    load = RunLoad(dict(cell.switch_cpu), {}, {"busiest host process": cell.agent_cpu_max},
                   os.cpu_count() or 1, links, drops)
    return judge(load, tdf)


def run_replays(lab: ExperimentNetwork, algorithms: Sequence[str], setting: ReplaySetting,
                spec: MatrixSpec, workdir: Path) -> list[ReplayRun]:
    """Each algorithm's replay of ``setting`` on ``lab`` (its TDF, timers and job sizing in
    ``spec``), one after another."""
    launcher = Launcher(lab, spec, workdir)
    runs = []
    for algo in algorithms:
        before = softnet_drops()
        cell = launcher.replay(algo, setting.model)
        verdict = verdict_of(cell, spec.tdf, softnet_drops() - before)
        log.info("replay %s %s: %.4g s per iteration (%s)", setting.model, algo,
                 cell.seconds, verdict.line())
        runs.append(ReplayRun(algo, cell.seconds, cell.comm_seconds, cell.retransmissions,
                              cell.errors, verdict, cell.busiest_util))
    return runs
