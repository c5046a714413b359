"""Plots of the sweeps (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from algorithms import REGISTRY  # noqa: E402

#: Plot colour of each algorithm, by the simulator's names (from the algorithm registry).
_STYLE = {a.sim_name: a.color for a in REGISTRY if a.sim_name is not None}


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def plot_scaling(result: dict[str, Any], path: Path) -> Path:
    """All-reduce time against P, simulated (markers) and modelled (dashed)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for algorithm in ("ring", "torus2d", "ina"):
        rows = [r for r in result["rows"] if r["algorithm"] == algorithm]
        p = [r["workers"] for r in rows]
        color = _STYLE[algorithm]
        ax.plot(p, [r["sim_s"] * 1e3 for r in rows], "o-", color=color, label=f"{algorithm} (ns-3)")
        ax.plot(p, [r["model_s"] * 1e3 for r in rows], "--", color=color, alpha=0.6,
                label=f"{algorithm} (model)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers P")
    ax.set_ylabel("all-reduce time (ms)")
    ax.set_title(f"{result['bytes'] / 2**20:g} MiB per worker, 100 GbE spine-leaf")
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_crossover(result: dict[str, Any], path: Path) -> Path:
    """Ring and hierarchical in-network time against B_intra/B_inter, with the crossovers."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for algorithm in ("ring", "ina-hier"):
        rows = [r for r in result["rows"] if r["algorithm"] == algorithm]
        x = [r["ratio"] for r in rows]
        color = _STYLE[algorithm]
        ax.plot(x, [r["sim_s"] * 1e3 for r in rows], "o-", color=color, label=f"{algorithm} (ns-3)")
        ax.plot(x, [r["model_s"] * 1e3 for r in rows], "--", color=color, alpha=0.6,
                label=f"{algorithm} (model)")
    for key, style, label in (("sim_crossover", ":", "ns-3"), ("model_crossover", "-.", "model")):
        value = result[key]
        if 0 < value < float("inf"):
            ax.axvline(value, color="gray", linestyle=style, label=f"crossover {label} {value:.2f}")
    ax.set_xscale("log")
    ax.set_xlabel("B_intra / B_inter")
    ax.set_ylabel("all-reduce time (ms)")
    ax.set_title(f"{result['hosts']} hosts x {result['gpus_per_host']} GPUs, "
                 f"{result['bytes'] / 2**20:g} MiB")
    ax.legend(fontsize=7)
    return _save(fig, path)


#: The papers' reported training speedups over ring all-reduce (docs/scale.md).
PAPER_SPEEDUPS = {"resnet50": 1.7, "transformer-base": 1.5}


def plot_speedup(result: dict[str, Any], path: Path) -> Path:
    """Left: iteration-time speedup over ring per model and algorithm at 100 GbE. Right
    (when the result has ``by_rate``): hierarchical in-network's iteration and
    communication speedups against the inter-machine rate, beside the papers' numbers."""
    by_rate = result.get("by_rate") or []
    fig, axes = plt.subplots(1, 2 if by_rate else 1, figsize=(10 if by_rate else 5.5, 3.6),
                             squeeze=False)
    ax = axes[0][0]
    models = list(dict.fromkeys(r["model"] for r in result["rows"]))
    algorithms = list(dict.fromkeys(r["algorithm"] for r in result["rows"]))
    width = 0.8 / len(algorithms)
    for i, algorithm in enumerate(algorithms):
        values = [next(r["sim_speedup"] for r in result["rows"]
                       if r["model"] == m and r["algorithm"] == algorithm) for m in models]
        xs = [j + (i - (len(algorithms) - 1) / 2) * width for j in range(len(models))]
        ax.bar(xs, values, width, color=_STYLE[algorithm], label=algorithm)
    ax.set_xticks(range(len(models)), models)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("iteration speedup over ring (ns-3)")
    ax.legend(fontsize=7)
    if by_rate:
        ax = axes[0][1]
        for j, model in enumerate(dict.fromkeys(r["model"] for r in by_rate)):
            rows = [r for r in by_rate if r["model"] == model]
            color = f"C{j}"
            gbit = [r["gbit"] for r in rows]
            ax.plot(gbit, [r["sim_speedup"] for r in rows], "o-", color=color,
                    label=f"{model}: iteration")
            ax.plot(gbit, [r["sim_comm_speedup"] for r in rows], "s:", color=color,
                    label=f"{model}: communication")
            if model in PAPER_SPEEDUPS:
                ax.axhline(PAPER_SPEEDUPS[model], color=color, linestyle="--", linewidth=0.8,
                           label=f"{model}: paper {PAPER_SPEEDUPS[model]}x")
        ax.set_xscale("log")
        ax.set_xticks(sorted({r["gbit"] for r in by_rate}),
                      [f"{g:g}" for g in sorted({r["gbit"] for r in by_rate})])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("inter-machine link rate (Gbit/s)")
        ax.set_ylabel("hierarchical in-network speedup over ring")
        ax.legend(fontsize=6)
    return _save(fig, path)


def plot_emulated(result: dict[str, Any], path: Path) -> Path:
    """Model error relative to the simulator at the emulated scale."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    labels = [f"{r['algorithm']}\n{r['bw_mbit']:g}M {r['bytes'] >> 10}K" for r in result["rows"]]
    ax.bar(range(len(labels)), [100 * r["error"] for r in result["rows"]], color="tab:gray")
    ax.axhline(15, color="red", linestyle="--")
    ax.axhline(-15, color="red", linestyle="--")
    ax.set_xticks(range(len(labels)), labels, fontsize=6, rotation=90)
    ax.set_ylabel("model vs ns-3 (%)")
    return _save(fig, path)


PLOTTERS = {"scaling": plot_scaling, "crossover": plot_crossover, "speedup": plot_speedup,
            "emulated": plot_emulated}
