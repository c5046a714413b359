"""The sweeps that reproduce the papers' claims, each returning a JSON-ready dict.

* :func:`scaling` — in-network all-reduce time flat in ``P``, ring growing with ``P``;
* :func:`crossover` — the ``B_intra/B_inter`` above which hierarchical in-network beats the
  flat ring (simulated and modelled);
* :func:`speedup` — iteration-time speedups over ring for model profiles at 100 GbE/NVLink;
* :func:`emulated_scale` — simulator versus cost model on the emulated 2x2x2 network.

``small=True`` selects the CI-sized version of each (seconds, not minutes). Every sweep takes
a ``simulate(algorithm, fabric, nbytes, density) -> seconds`` callback and a ``tick``
callback called once per simulation (progress bars).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.fabric import Fabric, datacenter, emulated
from sim.iteration import iteration_time
from sim.model import predict
from workloads import costmodel as cm
from workloads.profiles import get_profile

Simulate = Callable[[str, Fabric, int, float], float]
Tick = Callable[[], None]

SWEEPS = ("emulated", "scaling", "crossover", "speedup")
#: Inter-machine link rates (Gbit/s) of the speedup sweep's second part: where the papers'
#: iteration speedups need communication-bound iterations, slower networks make them so.
SPEEDUP_RATES_GBIT: tuple[float, ...] = (10.0, 25.0, 40.0, 100.0)
SPEEDUP_RATES_GBIT_SMALL: tuple[float, ...] = (10.0, 100.0)


def _noop() -> None:
    return None


def plan_size(name: str, small: bool) -> int:
    """How many simulations a sweep runs (for the progress bar)."""
    sizes = {
        "emulated": (5 * 2 * 2, 5 * 1 * 1),
        "scaling": (3 * 8, 3 * 3),
        "crossover": (2 * 9, 2 * 5),
        # 4 algorithms at 100 GbE, then ring and in-network at each other rate, per model
        "speedup": (2 * (4 + 2 * (len(SPEEDUP_RATES_GBIT) - 1)),
                    1 * (4 + 2 * (len(SPEEDUP_RATES_GBIT_SMALL) - 1))),
    }
    full, reduced = sizes[name]
    return reduced if small else full


def emulated_scale(simulate: Simulate, small: bool = False, tick: Tick = _noop) -> dict[str, Any]:
    """Simulator vs cost model for every algorithm on the emulated 2x2x2 fabric."""
    rates = (10.0,) if small else (10.0, 20.0)
    sizes = (256 << 10,) if small else (256 << 10, 1 << 20)
    rows: list[dict[str, Any]] = []
    for bw in rates:
        f = emulated(bw)
        for algorithm in ("ring", "torus2d", "ina", "ina-hier", "hitopk"):
            for n in sizes:
                sim = simulate(algorithm, f, n, 0.01)
                model = predict(algorithm, f, n, 0.01)
                rows.append({"algorithm": algorithm, "bw_mbit": bw, "bytes": n,
                             "workers": f.workers, "sim_s": sim, "model_s": model,
                             "error": (model - sim) / sim})
                tick()
    worst = max(abs(r["error"]) for r in rows)
    return {"sweep": "emulated", "fabric": emulated().to_dict(), "rows": rows,
            "max_abs_error": worst}


def scaling(simulate: Simulate, small: bool = False, tick: Tick = _noop) -> dict[str, Any]:
    """All-reduce time against the number of workers (one GPU per host, 100 GbE)."""
    workers: tuple[int, ...]
    if small:
        workers, per_leaf, nbytes = (8, 16, 32), 8, 1 << 20
    else:
        workers, per_leaf, nbytes = (8, 16, 32, 64, 128, 256, 512, 1024), 32, 25 << 20
    rows: list[dict[str, Any]] = []
    for p in workers:
        f = datacenter(p, hosts_per_leaf=per_leaf)
        for algorithm in ("ring", "torus2d", "ina"):
            sim = simulate(algorithm, f, nbytes, 0.01)
            rows.append({"algorithm": algorithm, "workers": p, "leaves": f.leaves,
                         "bytes": nbytes, "sim_s": sim,
                         "model_s": predict(algorithm, f, nbytes)})
            tick()

    def span(algorithm: str) -> float:
        times = [r["sim_s"] for r in rows if r["algorithm"] == algorithm]
        return max(times) / min(times)

    return {"sweep": "scaling", "bytes": nbytes, "fabric": datacenter(workers[0]).to_dict(),
            "rows": rows, "ina_max_over_min": span("ina"), "ring_max_over_min": span("ring")}


def _crossing(ratios: list[float], margin: list[float]) -> float:
    """Where ``margin`` (baseline - hierarchical) first turns positive, interpolated in
    log(ratio); 0 if positive at the first ratio, inf if never."""
    if margin[0] > 0:
        return 0.0
    for i in range(1, len(ratios)):
        if margin[i] > 0:
            x0, x1 = math.log(ratios[i - 1]), math.log(ratios[i])
            t = -margin[i - 1] / (margin[i] - margin[i - 1])
            return math.exp(x0 + t * (x1 - x0))
    return math.inf


def _model_crossover(f: Fabric, nbytes: int) -> float:
    """Bisection on ``B_intra/B_inter`` in [1, 1e4] with the cost models of both schemes."""

    def margin(ratio: float) -> float:
        g = f.replace(intra_bps=ratio * f.host_bps)
        return predict("ring", g, nbytes) - predict("ina-hier", g, nbytes)

    lo, hi = 1.0, 1e4
    if margin(lo) > 0:
        return 0.0
    if margin(hi) <= 0:
        return math.inf
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if margin(mid) > 0 else (mid, hi)
    return hi


def crossover(simulate: Simulate, small: bool = False, tick: Tick = _noop) -> dict[str, Any]:
    """Flat ring vs hierarchical in-network over ``B_intra/B_inter`` (8 GPUs per host)."""
    nbytes = (8 << 20) if small else (25 << 20)
    # 8 KiB packets keep store-and-forward latency small next to the bandwidth terms
    f = datacenter(32, gpus_per_host=8, hosts_per_leaf=2, spines=2, segment_bytes=8192)
    count = 5 if small else 9
    ratios = [float(r) for r in np.geomspace(1.0, 16.0, count)]
    rows: list[dict[str, Any]] = []
    for ratio in ratios:
        g = f.replace(intra_bps=ratio * f.host_bps)
        for algorithm in ("ring", "ina-hier"):
            rows.append({"ratio": ratio, "algorithm": algorithm,
                         "sim_s": simulate(algorithm, g, nbytes, 0.01),
                         "model_s": predict(algorithm, g, nbytes)})
            tick()
    by = {(r["ratio"], r["algorithm"]): r["sim_s"] for r in rows}
    margin = [by[(r, "ring")] - by[(r, "ina-hier")] for r in ratios]
    return {
        "sweep": "crossover", "bytes": nbytes, "fabric": f.to_dict(), "rows": rows,
        "hosts": f.hosts, "gpus_per_host": f.gpus_per_host, "workers": f.workers,
        "sim_crossover": _crossing(ratios, margin),
        "model_crossover": _model_crossover(f, nbytes),
        "closed_form_alpha0": cm.hierarchical_crossover_alpha0(f.gpus_per_host, f.workers),
        "netreduce_paper": 2.3,
    }


def speedup(simulate: Simulate, small: bool = False, tick: Tick = _noop) -> dict[str, Any]:
    """Iteration time and speedup over ring for ResNet-50 and Transformer (16 x 8 GPUs):
    every algorithm at 100 GbE (``rows``), then ring against hierarchical in-network at each
    of :data:`SPEEDUP_RATES_GBIT` (``by_rate``), with the communication-only speedup beside
    the iteration speedup (compute overlaps communication, so the first bounds the second).
    Each (model, rate, algorithm) is simulated once; the 100 GbE pair is shared."""
    models: tuple[str, ...]
    if small:
        f = datacenter(16, gpus_per_host=8, hosts_per_leaf=1, spines=2)
        models, scale, rates = ("resnet50",), 10.0, SPEEDUP_RATES_GBIT_SMALL
    else:
        f = datacenter(128, gpus_per_host=8, hosts_per_leaf=8, spines=2)
        models, scale = ("resnet50", "transformer-base"), 1.0
        rates = SPEEDUP_RATES_GBIT
    done: dict[tuple[str, float, str], tuple[Any, Any]] = {}

    def iterations(name: str, gbit: float, algorithm: str) -> tuple[Any, Any]:
        """(ns-3, model) iteration times, computed once."""
        key = (name, gbit, algorithm)
        if key not in done:
            profile, g = get_profile(name, scale), f.replace(host_bps=gbit * 1e9)
            done[key] = (iteration_time(profile, lambda n: simulate(algorithm, g, n, 0.01)),
                         iteration_time(profile, lambda n: predict(algorithm, g, n)))
            tick()
        return done[key]

    base_gbit = f.host_bps / 1e9
    rows: list[dict[str, Any]] = []
    for name in models:
        ring_sim, ring_model = iterations(name, base_gbit, "ring")
        for algorithm in ("ring", "torus2d", "ina", "ina-hier"):
            sim_it, model_it = iterations(name, base_gbit, algorithm)
            rows.append({"model": name, "algorithm": algorithm,
                         "compute_s": sim_it.compute_s, "sim_comm_s": sim_it.comm_s,
                         "sim_iteration_s": sim_it.iteration_s,
                         "model_iteration_s": model_it.iteration_s,
                         "sim_speedup": ring_sim.iteration_s / sim_it.iteration_s,
                         "model_speedup": ring_model.iteration_s / model_it.iteration_s,
                         "sim_comm_speedup": ring_sim.comm_s / sim_it.comm_s})
    by_rate = []
    for name in models:
        for gbit in rates:
            ring_sim, ring_model = iterations(name, gbit, "ring")
            ina_sim, ina_model = iterations(name, gbit, "ina-hier")
            by_rate.append({
                "model": name, "gbit": gbit, "compute_s": ring_sim.compute_s,
                "ring_comm_s": ring_sim.comm_s, "ina_hier_comm_s": ina_sim.comm_s,
                "ring_iteration_s": ring_sim.iteration_s,
                "ina_hier_iteration_s": ina_sim.iteration_s,
                "sim_speedup": ring_sim.iteration_s / ina_sim.iteration_s,
                "model_speedup": ring_model.iteration_s / ina_model.iteration_s,
                "sim_comm_speedup": ring_sim.comm_s / ina_sim.comm_s,
            })
    return {"sweep": "speedup", "fabric": f.to_dict(), "profile_scale": scale, "rows": rows,
            "by_rate": by_rate}


def run(name: str, simulate: Simulate, small: bool = False, tick: Tick = _noop) -> dict[str, Any]:
    """Runs the sweep called ``name`` (one of :data:`SWEEPS`)."""
    table: dict[str, Callable[..., dict[str, Any]]] = {
        "emulated": emulated_scale, "scaling": scaling, "crossover": crossover,
        "speedup": speedup,
    }
    if name not in table:
        raise ValueError(f"unknown sweep {name!r}; choose from {', '.join(SWEEPS)}")
    result = table[name](simulate, small=small, tick=tick)
    result["small"] = small
    return result
