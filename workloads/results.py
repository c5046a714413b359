"""Experiment records: CPU accounting, JSON files and plots.

An emulated measurement only says something about the network when the links, not the
Python processes, were the bottleneck (background.md section 5). Every record therefore
carries the CPU use of the process that produced it, and :func:`cpu_saturated` marks a run
whose process was busy for (nearly) all of its wall time as *not network-bound*. Python runs
one thread at a time, so one busy core is saturation for our processes.

Time dilation: the times of a :class:`RunRecord` (``iteration_s``, ``comm_s``, ``compute_s``)
are emulated seconds; ``tdf`` says how much slower than real time the run went, and
:meth:`RunRecord.to_dict` adds the real seconds beside them (``real_*``). CPU load is a fact
about this machine, so :class:`CpuMeter` measures CPU and wall time in real seconds (read
through the run's clock).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vtime import REAL_TIME, VirtualClock

log = logging.getLogger(__name__)

#: Fraction of one core above which a process counts as CPU-saturated.
CPU_SATURATION = 0.9
SCHEMA = "workloads-results/1"


@dataclass(frozen=True)
class CpuLoad:
    """CPU time of this process (all threads) over a wall-clock interval, both in real
    seconds (the machine's)."""

    cpu_seconds: float
    wall_seconds: float

    @property
    def utilization(self) -> float:
        """Busy cores on average (1.0 = one core all the time)."""
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


def cpu_saturated(load: CpuLoad, threshold: float = CPU_SATURATION) -> bool:
    """True when the process was busy for at least ``threshold`` of one core."""
    return load.utilization >= threshold


class CpuMeter:
    """Measures this process's CPU use between construction and :meth:`stop` (real
    seconds: ``clock`` only supplies the machine's time, so tests can replace it)."""

    def __init__(self, clock: VirtualClock = REAL_TIME) -> None:
        self._clock = clock
        t = os.times()
        self._cpu0 = t.user + t.system
        self._wall0 = clock.real_ns()

    def stop(self) -> CpuLoad:
        t = os.times()
        wall = (self._clock.real_ns() - self._wall0) / 1e9
        return CpuLoad(t.user + t.system - self._cpu0, wall)


@dataclass
class RunRecord:
    """One rank's (or one host agent's) measurement of one experiment; times are emulated
    seconds (real seconds / ``tdf``)."""

    algorithm: str
    model: str
    workers: int
    rank: int
    iterations: int
    bytes_per_iteration: float  # bytes sent by this rank per iteration (with headers)
    payload_per_iteration: float  # gradient bytes sent per iteration
    iteration_s: list[float]
    comm_s: list[float]  # time inside all-reduce calls, per iteration
    compute_s: float  # modelled compute per iteration (forward + backward)
    retransmissions: int = 0
    cpu_utilization: float = 0.0
    cpu_saturated: bool = False
    scale: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)
    tdf: float = 1.0  # time-dilation factor of the run (files without it: 1)

    @property
    def network_bound(self) -> bool:
        """False when the process itself was the bottleneck (the result is not a network
        measurement)."""
        return not self.cpu_saturated

    @property
    def mean_iteration_s(self) -> float:
        return sum(self.iteration_s) / len(self.iteration_s) if self.iteration_s else 0.0

    @property
    def mean_comm_s(self) -> float:
        return sum(self.comm_s) / len(self.comm_s) if self.comm_s else 0.0

    @property
    def exposed_comm_s(self) -> float:
        """Iteration time not hidden behind compute."""
        return max(0.0, self.mean_iteration_s - self.compute_s)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(network_bound=self.network_bound, mean_iteration_s=self.mean_iteration_s,
                 mean_comm_s=self.mean_comm_s, exposed_comm_s=self.exposed_comm_s,
                 real_iteration_s=[s * self.tdf for s in self.iteration_s],
                 real_comm_s=[s * self.tdf for s in self.comm_s],
                 real_compute_s=self.compute_s * self.tdf)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRecord:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in names})


def write_json(path: str | Path, records: Sequence[RunRecord],
               meta: dict[str, Any] | None = None) -> Path:
    """Write ``records`` (and free-form ``meta``) as one JSON document."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schema": SCHEMA, "meta": meta or {}, "runs": [r.to_dict() for r in records]}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    saturated = [r for r in records if r.cpu_saturated]
    if saturated:
        log.warning("%d of %d runs were CPU-saturated (not network-bound): %s", len(saturated),
                    len(records), ", ".join(f"{r.algorithm} rank {r.rank}" for r in saturated))
    return out


def read_json(paths: Iterable[str | Path]) -> list[RunRecord]:
    """Records from one or more files written by :func:`write_json`."""
    records: list[RunRecord] = []
    for p in paths:
        try:
            doc = json.loads(Path(p).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read results file {p}: {err}") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"{p} is not a workloads results file (schema {SCHEMA})")
        records.extend(RunRecord.from_dict(r) for r in doc["runs"])
    return records


def summarize(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """One row per (algorithm, model, workers): means over ranks, worst CPU flag."""
    groups: dict[tuple[str, str, int], list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.algorithm, r.model, r.workers), []).append(r)
    rows = []
    for (algo, model, workers), rs in sorted(groups.items()):
        n = len(rs)
        rows.append({
            "algorithm": algo, "model": model, "workers": workers,
            "iteration_s": max(r.mean_iteration_s for r in rs),  # the slowest rank sets the pace
            "comm_s": sum(r.mean_comm_s for r in rs) / n,
            "compute_s": sum(r.compute_s for r in rs) / n,
            "bytes_per_iteration": sum(r.bytes_per_iteration for r in rs) / n,
            "retransmissions": sum(r.retransmissions for r in rs),
            "cpu_utilization": max(r.cpu_utilization for r in rs),
            "network_bound": all(r.network_bound for r in rs),
        })
    return rows


def plot(records: Sequence[RunRecord], path: str | Path, title: str = "") -> Path:
    """Bar chart of iteration time per run group, split into compute and exposed
    communication; CPU-saturated groups are hatched and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summarize(records)
    if not rows:
        raise ValueError("nothing to plot: no runs")
    labels = [f"{r['algorithm']}\n{r['model']} P={r['workers']}" for r in rows]
    compute = [min(r["compute_s"], r["iteration_s"]) * 1e3 for r in rows]
    exposed = [max(0.0, r["iteration_s"] - r["compute_s"]) * 1e3 for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(rows)), 4.0))
    xs = range(len(rows))
    ax.bar(xs, compute, label="compute (modelled)", color="#9ecae1")
    bars = ax.bar(xs, exposed, bottom=compute, label="exposed communication", color="#de2d26")
    for bar, row in zip(bars, rows, strict=True):
        if not row["network_bound"]:
            bar.set_hatch("//")
            ax.annotate("CPU-bound", (bar.get_x() + bar.get_width() / 2,
                                      bar.get_y() + bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("iteration time (ms)")
    ax.set_title(title or "gradient replay")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
