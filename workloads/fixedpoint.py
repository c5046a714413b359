"""Float32 <-> int32 fixed-point conversion for aggregation in the switch.

A P4 switch adds integers, not floats, so workers send gradients as ``round(x * 2**f)`` in
int32 and divide the sum by ``2**f``. Two things can go wrong and both are handled here:

* **Encoding saturation.** A value too large for the chosen scale. Every worker clamps its
  values to a *per-worker limit* ``(2**31 - 1) // workers`` so that the sum of ``workers``
  contributions can never wrap a 32-bit register, whatever the switch's adder does.
* **Agreement.** Only the worker that clamped knows it did, yet all workers must use the same
  scale. Each message therefore carries one extra int32 word, the worker's count of clamped
  values, which the switch sums like any other word. A non-zero sum tells *every* worker that
  the result is unusable, and all of them retry with ``f - step`` fraction bits (the
  rescale-and-retry policy, :func:`aggregate_with_retry`). No side channel, no switch change.

Choosing ``f`` from a known bound on ``|x|`` (:func:`frac_bits_for`) makes retries rare; the
policy exists for the gradient spikes that such a bound misses.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from workloads.errors import WorkloadError

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


class FixedPointOverflow(WorkloadError, ArithmeticError):
    """The values could not be aggregated even at the smallest allowed scale."""


@dataclass(frozen=True)
class FixedPoint:
    """A fixed-point format: ``frac_bits`` fraction bits, summed over ``workers`` addends."""

    frac_bits: int
    workers: int = 1

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if not -64 <= self.frac_bits <= 62:
            raise ValueError(f"frac_bits must be in [-64, 62], got {self.frac_bits}")

    @property
    def scale(self) -> float:
        """Multiplier from float to integer (``2**frac_bits``)."""
        return float(2.0**self.frac_bits)

    @property
    def limit(self) -> int:
        """Largest magnitude one worker may send so that the sum of all workers fits int32."""
        return INT32_MAX // self.workers

    def encode(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """Quantise ``x`` (round half to even) to int32; returns values and number clamped."""
        arr = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("cannot encode NaN or infinite values as fixed point")
        scaled = np.rint(arr * self.scale)
        over = np.abs(scaled) > self.limit
        clamped = int(np.count_nonzero(over))
        if clamped:
            np.clip(scaled, -self.limit, self.limit, out=scaled)
        return scaled.astype(np.int32), clamped

    def decode(self, q: np.ndarray) -> np.ndarray:
        """Float32 values of the int32 words ``q`` (a single worker's or a sum)."""
        return (np.asarray(q, dtype=np.float64) / self.scale).astype(np.float32)

    def resolution(self) -> float:
        """Worst-case rounding error of one encoded value (half a unit in the last place)."""
        return 0.5 / self.scale

    def with_frac_bits(self, frac_bits: int) -> FixedPoint:
        """The same format with a different scale."""
        return dataclasses.replace(self, frac_bits=frac_bits)


def frac_bits_for(max_abs: float, workers: int, max_frac_bits: int = 30) -> int:
    """Largest fraction-bit count at which ``workers`` values of size ``max_abs`` never clamp."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not np.isfinite(max_abs) or max_abs < 0:
        raise ValueError(f"max_abs must be a finite non-negative number, got {max_abs}")
    if max_abs == 0:
        return max_frac_bits
    limit = INT32_MAX // workers
    bits = int(np.floor(np.log2(limit / max_abs)))
    # log2 is inexact at the boundary; step down until round(max_abs * 2**bits) fits.
    while bits > -64 and np.rint(max_abs * 2.0**bits) > limit:
        bits -= 1
    return min(bits, max_frac_bits)


@dataclass(frozen=True)
class RescalePolicy:
    """Rescale-and-retry: start at ``start_bits``; on overflow drop ``step`` bits, down to
    ``min_bits``."""

    start_bits: int = 16
    step: int = 4
    min_bits: int = -16

    def __post_init__(self) -> None:
        if self.step < 1:
            raise ValueError(f"step must be >= 1, got {self.step}")
        if self.min_bits > self.start_bits:
            raise ValueError("min_bits must not exceed start_bits")


@dataclass(frozen=True)
class RetryReport:
    """How an aggregation went: the scale finally used and the clamp counts seen per attempt."""

    frac_bits: int
    attempts: int
    clamped_per_attempt: tuple[int, ...]


def aggregate_with_retry(
    x: np.ndarray,
    aggregate: Callable[[np.ndarray], np.ndarray],
    workers: int,
    policy: RescalePolicy = RescalePolicy(),
) -> tuple[np.ndarray, RetryReport]:
    """Sum ``x`` over all workers through an integer ``aggregate`` with the retry policy.

    ``aggregate`` takes this worker's int32 message (the encoded values followed by one word
    holding the worker's clamp count) and returns the element-wise int32 sum over all workers.
    Every worker must call this function in lockstep with the same ``policy``; because the
    clamp counts are summed too, all workers see the same verdict and retry together.
    """
    flat = np.asarray(x, dtype=np.float32).ravel()
    fmt = FixedPoint(policy.start_bits, workers)
    seen: list[int] = []
    while True:
        q, clamped = fmt.encode(flat)
        message = np.empty(flat.size + 1, dtype=np.int32)
        message[:-1] = q
        message[-1] = clamped
        total = np.asarray(aggregate(message), dtype=np.int32)
        if total.shape != message.shape:
            raise ValueError(f"aggregate returned shape {total.shape}, expected {message.shape}")
        total_clamped = int(total[-1])
        seen.append(total_clamped)
        if total_clamped == 0:
            result = fmt.decode(total[:-1]).reshape(np.shape(x))
            return result, RetryReport(fmt.frac_bits, len(seen), tuple(seen))
        next_bits = fmt.frac_bits - policy.step
        if next_bits < policy.min_bits:
            raise FixedPointOverflow(
                f"{total_clamped} values still clamp at {fmt.frac_bits} fraction bits; "
                f"the policy allows no fewer than {policy.min_bits}"
            )
        log.info(
            "fixed point: %d values clamped at %d fraction bits, retrying with %d",
            total_clamped,
            fmt.frac_bits,
            next_bits,
        )
        fmt = fmt.with_frac_bits(next_bits)
