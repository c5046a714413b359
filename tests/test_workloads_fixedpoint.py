"""Fixed-point encoding for in-switch aggregation and its rescale-and-retry policy."""

from __future__ import annotations

import numpy as np
import pytest

from workloads.collectives import ring_allreduce
from workloads.fixedpoint import (
    INT32_MAX,
    FixedPoint,
    FixedPointOverflow,
    RescalePolicy,
    aggregate_with_retry,
    frac_bits_for,
)
from workloads.loopback import run_ranks


def test_round_trip_within_resolution() -> None:
    """Encoding then decoding is off by at most half a unit in the last place."""
    fmt = FixedPoint(16)
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    q, clamped = fmt.encode(x)
    assert q.dtype == np.int32 and clamped == 0
    assert np.max(np.abs(fmt.decode(q) - x)) <= fmt.resolution() + 1e-7


def test_known_values_are_exact() -> None:
    """Values that are multiples of 2**-f encode to exact integers."""
    fmt = FixedPoint(8)
    q, _ = fmt.encode(np.array([1.0, -0.5, 0.00390625, 3.25], dtype=np.float32))
    assert q.tolist() == [256, -128, 1, 832]


def test_clamps_to_per_worker_limit() -> None:
    """Too-large values clamp to INT32_MAX // workers and are counted."""
    fmt = FixedPoint(16, workers=4)
    q, clamped = fmt.encode(np.array([1e6, -1e6, 1.0], dtype=np.float32))
    assert clamped == 2
    assert q.tolist() == [INT32_MAX // 4, -(INT32_MAX // 4), 65536]


def test_sum_of_clamped_values_never_wraps() -> None:
    """The sum of `workers` clamped values still fits in int32."""
    fmt = FixedPoint(20, workers=8)
    q, _ = fmt.encode(np.full(3, 1e9, dtype=np.float32))
    total = np.sum(np.stack([q] * 8).astype(np.int64), axis=0)
    assert np.all(total <= INT32_MAX)


def test_rejects_non_finite() -> None:
    """NaN cannot be encoded and says so."""
    with pytest.raises(ValueError, match="NaN"):
        FixedPoint(8).encode(np.array([np.nan], dtype=np.float32))


def test_frac_bits_for_fits_the_bound() -> None:
    """The chosen scale keeps the bound unclamped and one more bit would clamp it."""
    bits = frac_bits_for(3.7, workers=6)
    assert FixedPoint(bits, 6).encode(np.array([3.7, -3.7]))[1] == 0
    assert FixedPoint(bits + 1, 6).encode(np.array([3.7]))[1] == 1


def test_retry_lowers_scale_until_no_clamp() -> None:
    """One worker's spike makes every worker retry with fewer fraction bits; the sum is right."""
    xs = [np.full(5, 0.25, dtype=np.float32) for _ in range(3)]
    xs[1][2] = 70000.0
    policy = RescalePolicy(start_bits=16, step=4, min_bits=-8)

    def work(comm):  # type: ignore[no-untyped-def]
        return aggregate_with_retry(
            xs[comm.rank], lambda m: ring_allreduce(comm, m)[0], workers=3, policy=policy
        )

    out = run_ranks(3, work, timeout=10)
    expected = np.sum(xs, axis=0)
    for result, report in out:
        assert report.frac_bits == 12 and report.attempts == 2
        assert report.clamped_per_attempt[0] == 1 and report.clamped_per_attempt[-1] == 0
        np.testing.assert_allclose(result, expected, atol=3 * 0.5 / 2**12)


def test_retry_gives_up_below_min_bits() -> None:
    """A value no allowed scale can hold raises FixedPointOverflow."""
    policy = RescalePolicy(start_bits=4, step=4, min_bits=0)
    with pytest.raises(FixedPointOverflow):
        aggregate_with_retry(np.array([1e12], dtype=np.float32), lambda m: m, 1, policy)
