"""JSON documents and plots of training experiments (matplotlib, Agg backend: no display).

Per experiment: ``<name>.json`` (:meth:`~train.trainer.Experiment.as_dict`) and ``<name>.png``
(loss and accuracy against epoch and against training wall time). For a comparison:
``compare.json`` (every run, plus the fixed-point vs fp32 accuracy gap) and ``compare.png``
(test accuracy against wall time and against epoch, one line per collective).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from train.trainer import Experiment

log = logging.getLogger(__name__)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_json(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` as indented JSON (parent directories created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def plot_experiment(exp: Experiment, path: Path) -> Path:
    """Loss and accuracy against epoch (top) and against wall time (bottom)."""
    plt = _pyplot()
    hist = exp.history
    epochs = [r.epoch for r in hist]
    walls = [r.wall_s for r in hist]
    acc = [100.0 * r.test_accuracy for r in hist]
    test_loss = [r.test_loss for r in hist]
    train_pts = [(r.epoch, r.wall_s, r.train_loss) for r in hist if r.train_loss is not None]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for row, (xs, xlabel) in enumerate(((epochs, "epoch"), (walls, "training wall time (s)"))):
        ax_loss, ax_acc = axes[row]
        ax_loss.plot(xs, test_loss, "o-", label="test loss")
        ax_loss.plot([p[row] for p in train_pts], [p[2] for p in train_pts], "s--",
                     label="train loss")
        ax_loss.set_xlabel(xlabel)
        ax_loss.set_ylabel("cross-entropy")
        ax_loss.legend()
        ax_acc.plot(xs, acc, "o-", color="tab:green")
        ax_acc.set_xlabel(xlabel)
        ax_acc.set_ylabel("test accuracy (%)")
    fig.suptitle(f"{exp.implementation}: {exp.config.workers} workers, {exp.transport}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def time_axis(longest_s: float) -> tuple[str, float]:
    """(unit, factor) of a time axis whose longest value is ``longest_s`` seconds: emulated
    100 GbE trains in milliseconds, whose tick labels in seconds ran into each other."""
    return next(((u, f) for u, f in (("s", 1.0), ("ms", 1e3), ("us", 1e6))
                 if longest_s * f >= 1.0), ("us", 1e6))


def plot_comparison(exps: Sequence[Experiment], path: Path, title: str | None = None) -> Path:
    """Test accuracy against wall time (left) and epoch (right) for every experiment."""
    plt = _pyplot()
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(11, 4.5))
    if title:
        fig.suptitle(title)
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":")]
    unit, scale = time_axis(max((e.history[-1].wall_s for e in exps), default=0.0))
    trained = []  # accuracies after epoch 1: the interesting range of the y axis
    for i, exp in enumerate(exps):
        acc = [100.0 * r.test_accuracy for r in exp.history]
        trained += acc[1:]
        marker, line = styles[i % len(styles)]
        # the fidelity guard's verdict on the plot: hollow markers where the emulation did
        # not keep up (the run is drawn, but is not a result)
        label = exp.implementation + {None: "", True: " (faithful)",
                                      False: " (NOT faithful)"}[exp.faithful]
        face = {"markerfacecolor": "none"} if exp.faithful is False else {}
        # Distinct markers and line styles keep identical curves (fixed point = fp32) visible.
        for ax, xs in ((ax_t, [r.wall_s * scale for r in exp.history]),
                       (ax_e, [r.epoch for r in exp.history])):
            ax.plot(xs, acc, marker=marker, linestyle=line, label=label,
                    markersize=7 - i, alpha=0.85, **face)
    dilated = {e.tdf for e in exps if e.tdf != 1}
    ax_t.set_xlabel(f"training time ({unit}" + (", emulated" if dilated else "") + ")")
    ax_e.set_xlabel("epoch")
    for ax in (ax_t, ax_e):
        if trained:  # epoch 0 (untrained, ~10 %) lies below; the lines come up from it
            ax.set_ylim(max(0.0, min(trained) - 3.0), min(100.0, max(trained) + 1.5))
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def accuracy_gap_pp(exps: Sequence[Experiment], a: str, b: str) -> float | None:
    """Final accuracy of collective ``a`` minus that of ``b``, in percentage points."""
    by_name = {e.config.collective: e for e in exps}
    if a not in by_name or b not in by_name:
        return None
    return 100.0 * (by_name[a].final_accuracy - by_name[b].final_accuracy)


LINK_KEYS = ("host_links_bytes", "fabric_links_bytes", "data_link_bytes")


def _cache_row(epoch: int, stats: Any) -> dict[str, Any]:
    """One epoch of the multi-level cache, all ranks together."""
    d = stats.as_dict()
    return {"epoch": epoch, "hit_rate": d["hit_rate"], "local_hit_rate": d["local_hit_rate"],
            "io_s": d["io_seconds"], "network_bytes": d["network_bytes"],
            "bytes_saved": d["bytes_saved"]}


def comparison_document(exps: Sequence[Experiment]) -> dict[str, Any]:
    """The summary of a comparison: one row per run, the fixed-point accuracy gap and each
    run's time to the fp32 ring's final accuracy (the papers' time-to-accuracy)."""
    fixed = next((e.config.collective for e in exps
                  if e.config.collective.startswith("inswitch")), None)
    ring = next((e for e in exps if e.config.collective == "fp32-ring"), None)
    target = ring.final_accuracy if ring is not None else None
    return {
        "target_accuracy": target,
        "target_is": "the fp32 ring's final test accuracy" if target is not None else None,
        "runs": [
            {
                "collective": e.config.collective,
                "implementation": e.implementation,
                "final_accuracy": e.final_accuracy,
                "train_wall_s": e.history[-1].wall_s,
                "comm_s": sum(r.comm_s for r in e.history),
                "io_s": sum(r.io_s for r in e.history),
                "payload_sent_per_rank": list(e.payload_sent_per_rank),
                "models_identical_on_all_ranks": e.consistent,
                "time_to_target_s": (e.time_to_accuracy(target) if target is not None
                                     else None),
                "faithful": e.faithful,
                "cache_per_epoch": [_cache_row(i, c) for i, c in
                                    enumerate(e.cache_per_epoch, start=1)],
                **({"link_bytes": {k: e.network[k] for k in LINK_KEYS if k in e.network},
                    "switch_cpu_s": e.network.get("switch_cpu_s", {}),
                    "fidelity": e.network.get("fidelity")}
                   if e.network else {}),
            }
            for e in exps
        ],
        "fixed_point_minus_fp32_pp": (accuracy_gap_pp(exps, fixed, "fp32-ring")
                                      if fixed else None),
    }


def write_experiment(exp: Experiment, outdir: Path) -> tuple[Path, Path]:
    """``<collective>.json`` and ``<collective>.png`` in ``outdir``."""
    stem = exp.config.collective
    return (write_json(outdir / f"{stem}.json", exp.as_dict()),
            plot_experiment(exp, outdir / f"{stem}.png"))


def write_comparison(exps: Sequence[Experiment], outdir: Path,
                     extra: dict[str, Any] | None = None,
                     title: str | None = None) -> tuple[Path, Path]:
    """``compare.json`` (with ``extra`` merged in, e.g. the network and the interference
    measurement) and ``compare.png`` in ``outdir``."""
    return (write_json(outdir / "compare.json", {**comparison_document(exps), **(extra or {})}),
            plot_comparison(exps, outdir / "compare.png", title))
