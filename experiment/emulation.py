"""``python -m experiment emulate``: a small matrix on a fresh Mininet network, for validation.

The simulator (sim/) only models; running the emulation it is compared with is an
experiment, so it lives here (and its command line in ``experiment.__main__``, above sim).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from experiment.matrix import MatrixSpec, run_cells, running_network


def run_emulation(spec: MatrixSpec, rundir: Path | None = None) -> dict[str, object]:
    """Runs ``spec`` on a fresh Mininet network (root) and returns the matrix document
    (``spec`` and ``cells``) that :func:`sim.emulation.rows_from_matrix` reads."""
    with running_network(spec, rundir) as launcher:
        cells = run_cells(launcher, spec)
    return {"spec": asdict(spec), "cells": [asdict(c) for c in cells]}
