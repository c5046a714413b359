"""A tiny throughput benchmark of the per-packet path (``make bench`` wires it in)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from softswitch.pipeline import Pipeline


def bench_pipeline(
    pipeline: Pipeline, frames: Sequence[tuple[int, bytes]], seconds: float = 1.0
) -> float:
    """Packets per second that ``pipeline.process`` sustains cycling through ``frames``
    (``(ingress_port, frame)`` pairs) for about ``seconds`` of wall time."""
    if not frames:
        raise ValueError("bench_pipeline needs at least one frame")
    process = pipeline.process
    count = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while True:
        for port, frame in frames:
            process(port, frame)
        count += len(frames)
        if time.perf_counter() >= deadline:
            break
    return count / (time.perf_counter() - start)
