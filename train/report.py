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


def plot_comparison(exps: Sequence[Experiment], path: Path) -> Path:
    """Test accuracy against wall time (left) and epoch (right) for every experiment."""
    plt = _pyplot()
    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(11, 4.5))
    for exp in exps:
        acc = [100.0 * r.test_accuracy for r in exp.history]
        ax_t.plot([r.wall_s for r in exp.history], acc, "o-", label=exp.implementation)
        ax_e.plot([r.epoch for r in exp.history], acc, "o-", label=exp.implementation)
    ax_t.set_xlabel("training wall time (s)")
    ax_e.set_xlabel("epoch")
    for ax in (ax_t, ax_e):
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


def comparison_document(exps: Sequence[Experiment]) -> dict[str, Any]:
    """The summary of a comparison: one row per run and the fixed-point accuracy gap."""
    fixed = next((e.config.collective for e in exps
                  if e.config.collective.startswith("inswitch")), None)
    return {
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


def write_comparison(exps: Sequence[Experiment], outdir: Path) -> tuple[Path, Path]:
    """``compare.json`` and ``compare.png`` in ``outdir``."""
    return (write_json(outdir / "compare.json", comparison_document(exps)),
            plot_comparison(exps, outdir / "compare.png"))
