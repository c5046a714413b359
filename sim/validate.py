"""Validation: relative error of the simulator and the cost model against measurements.

A measured row (JSON object, one per emulation run) looks like::

    {"algorithm": "ring", "workers": 4, "bytes": 1048576, "seconds": 1.41,
     "topology": {"spines": 2, "leaves": 2, "hosts_per_leaf": 2, "gpus_per_host": 1,
                  "bw_mbit": 10, "delay_ms": 0, "switch_delay_us": 100},
     "density": 0.01}

``topology`` may also hold any :class:`~sim.fabric.Fabric` field by name. Each row is
simulated and modelled on the same fabric; errors above :data:`THRESHOLD` are flagged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sim.errors import SimError
from sim.fabric import Fabric, emulated
from sim.model import predict

#: Relative error above which a row is flagged.
THRESHOLD = 0.15

_ALIASES = {"bw_mbit": ("host_bps", 1e6), "fabric_bw_mbit": ("fabric_bps", 1e6),
            "delay_ms": ("link_delay_s", 1e-3), "switch_delay_us": ("switch_delay_s", 1e-6)}


class ValidationInputError(SimError, ValueError):
    """A measured row is malformed; the message names the row and the key."""


@dataclass(frozen=True)
class ValidationRow:
    """One measured row with the simulated and modelled seconds and their relative errors."""

    algorithm: str
    workers: int
    nbytes: int
    measured_s: float
    simulated_s: float | None
    model_s: float
    sim_error: float | None
    model_error: float
    flagged: bool


def fabric_of(topology: Mapping[str, Any]) -> Fabric:
    """The fabric a row's ``topology`` describes (defaults: the emulated 2x2x2 network)."""
    changes: dict[str, Any] = {}
    for key, value in topology.items():
        if key in _ALIASES:
            name, scale = _ALIASES[key]
            changes[name] = float(value) * scale
        else:
            changes[key] = value
    try:
        return emulated().replace(**changes)
    except TypeError as exc:
        raise ValidationInputError(f"bad topology parameter: {exc}") from None


def _row(raw: Mapping[str, Any], index: int) -> tuple[str, Fabric, int, float, float]:
    where = f"row {index}"
    try:
        algorithm = str(raw["algorithm"])
        nbytes = int(raw["bytes"])
        seconds = float(raw["seconds"])
        workers = int(raw["workers"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationInputError(f"{where}: missing or bad field {exc}") from None
    fabric = fabric_of(raw.get("topology", {}))
    if fabric.workers != workers:
        raise ValidationInputError(
            f"{where}: workers={workers} but the topology has {fabric.workers}")
    if seconds <= 0:
        raise ValidationInputError(f"{where}: measured seconds must be > 0, got {seconds}")
    return algorithm, fabric, nbytes, seconds, float(raw.get("density", 0.01))


def validate(rows: Iterable[Mapping[str, Any]],
             simulate: Callable[[str, Fabric, int, float], float] | None = None,
             threshold: float = THRESHOLD) -> list[ValidationRow]:
    """Simulates and models every row; ``simulate`` is ``(algorithm, fabric, bytes, density)
    -> seconds`` (None: skip the simulator, model only)."""
    out = []
    for index, raw in enumerate(rows):
        algorithm, fabric, nbytes, measured, density = _row(raw, index)
        model = predict(algorithm, fabric, nbytes, density)
        sim = simulate(algorithm, fabric, nbytes, density) if simulate else None
        model_err = (model - measured) / measured
        sim_err = None if sim is None else (sim - measured) / measured
        flagged = abs(model_err) > threshold or (sim_err is not None and abs(sim_err) > threshold)
        out.append(ValidationRow(algorithm, fabric.workers, nbytes, measured, sim, model,
                                 sim_err, model_err, flagged))
    return out


def ns3_simulate(algorithm: str, fabric: Fabric, nbytes: int, density: float) -> float:
    """The ``simulate`` callback backed by ns-3."""
    from sim.ns3sim import simulate

    return simulate(algorithm, fabric, nbytes, density).seconds


def load_rows(path: Path) -> list[dict[str, Any]]:
    """Rows from a JSON file (a list), a JSON-lines file, a ``python -m experiment matrix``
    result (its all-reduce cells) or a ``make run`` run directory (its all-reduces), the
    last two on the fabric :mod:`sim.emulation` derives."""
    if path.is_dir():
        from sim.emulation import rows_from_run

        try:
            return rows_from_run(path)
        except ValueError as exc:
            raise ValidationInputError(str(exc)) from None
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ValidationInputError(f"{path}: not JSON or JSON lines ({exc})") from None
    if isinstance(data, dict) and "spec" in data and "cells" in data:
        from sim.emulation import rows_from_matrix  # a experiment.matrix result

        return rows_from_matrix(data)
    if isinstance(data, dict):
        data = data.get("rows", [data])
    if not isinstance(data, list):
        raise ValidationInputError(f"{path}: expected a list of rows")
    return data


def report(results: list[ValidationRow]) -> str:
    """A plain-text table of the results (the CLI prints it)."""
    lines = [f"{'algorithm':<9} {'P':>5} {'bytes':>10} {'measured':>10} {'sim':>10} "
             f"{'err':>7} {'model':>10} {'err':>7}"]
    for r in results:
        sim = "-" if r.simulated_s is None else f"{r.simulated_s:.4g}"
        serr = "-" if r.sim_error is None else f"{r.sim_error:+.1%}"
        lines.append(f"{r.algorithm:<9} {r.workers:>5} {r.nbytes:>10} {r.measured_s:>10.4g} "
                     f"{sim:>10} {serr:>7} {r.model_s:>10.4g} {r.model_error:>+7.1%}"
                     + ("  FLAGGED" if r.flagged else ""))
    return "\n".join(lines)


def as_dicts(results: list[ValidationRow]) -> list[dict[str, Any]]:
    """JSON-ready rows."""
    return [asdict(r) for r in results]
