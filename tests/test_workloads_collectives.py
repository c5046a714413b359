"""Ring, 2D-torus, HiTopKComm and the hybrid schedule on P threads over loopback TCP."""

from __future__ import annotations

import numpy as np
import pytest

from workloads.collectives import chunk_bounds, ring_allreduce, torus2d_allreduce
from workloads.comm import Communicator
from workloads.loopback import run_ranks
from workloads.schedule import HybridSchedule
from workloads.sparse import block_hosts, exact_selector, hitopk_allreduce, hitopk_reference

SIZES = (1, 7, 1001, 65_537)  # none a multiple of the ring's chunk count for P = 2..6


def _inputs(p: int, n: int, dtype: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return [rng.integers(-(2**30), 2**30, n).astype(np.int32) for _ in range(p)]
    return [rng.standard_normal(n).astype(np.float32) for _ in range(p)]


def _check_same_everywhere(results: list[np.ndarray]) -> None:
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_chunk_bounds_cover() -> None:
    """Chunks cover the tensor contiguously with sizes differing by at most one."""
    bounds = chunk_bounds(10, 4)
    assert bounds == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert chunk_bounds(2, 4)[-1] == (2, 2)


@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_ring_allreduce_float(p: int) -> None:
    """Float32 ring all-reduce equals the numpy sum and is identical on every rank."""
    for n in SIZES:
        xs = _inputs(p, n, "float32", seed=p * 100 + n)

        def ring(c: Communicator, xs: list[np.ndarray] = xs) -> np.ndarray:
            return ring_allreduce(c, xs[c.rank])[0]

        out = run_ranks(p, ring, timeout=10)
        np.testing.assert_allclose(out[0], np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
        _check_same_everywhere(out)


@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_ring_allreduce_int32_exact_with_wrap(p: int) -> None:
    """Int32 ring all-reduce is exact and wraps like a 32-bit adder."""
    xs = _inputs(p, 1001, "int32", seed=p)
    out = run_ranks(p, lambda c: ring_allreduce(c, xs[c.rank])[0], timeout=10)
    expected = (np.sum(np.stack(xs).astype(np.int64), axis=0) + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(out[0].astype(np.int64), expected)
    _check_same_everywhere(out)


def test_ring_allreduce_keeps_shape_and_counts_bytes() -> None:
    """A 2-D tensor keeps its shape; each rank sends about 2(P-1)/P of its bytes."""
    p, x = 4, np.ones((31, 33), dtype=np.float32)

    def work(c: Communicator):  # type: ignore[no-untyped-def]
        return ring_allreduce(c, x * (c.rank + 1))

    out = run_ranks(p, work, timeout=10)
    result, stats = out[0]
    assert result.shape == x.shape and np.all(result == 10)
    assert stats.messages_sent == 2 * (p - 1)
    assert abs(stats.payload_sent - 2 * (p - 1) / p * x.nbytes) <= 2 * (p - 1) * 4
    assert [name for name, _ in stats.phases] == ["reduce_scatter", "allgather"]


def test_ring_on_subgroup() -> None:
    """A ring over a subset of ranks sums only that subset."""

    def work(c: Communicator) -> float:
        if c.rank in (1, 3):
            return float(ring_allreduce(c, np.array([c.rank], dtype=np.float32), [3, 1])[0][0])
        return -1.0

    assert run_ranks(4, work, timeout=5) == [-1.0, 4.0, -1.0, 4.0]


@pytest.mark.parametrize(("rows", "cols"), [(1, 2), (3, 1), (2, 2), (2, 3), (3, 2)])
def test_torus_allreduce(rows: int, cols: int) -> None:
    """2D-torus all-reduce equals the numpy sum (float) and is exact for int32."""
    p = rows * cols
    for dtype in ("float32", "int32"):
        xs = _inputs(p, 1003, dtype, seed=rows * 10 + cols)

        def torus(c: Communicator, xs: list[np.ndarray] = xs) -> np.ndarray:
            return torus2d_allreduce(c, xs[c.rank], rows, cols)[0]

        out = run_ranks(p, torus, timeout=10)
        if dtype == "int32":
            expected = np.sum(np.stack(xs).astype(np.int64), axis=0)
            expected = (expected + 2**31) % 2**32 - 2**31
            np.testing.assert_array_equal(out[0].astype(np.int64), expected)
        else:
            np.testing.assert_allclose(out[0], np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
        _check_same_everywhere(out)


def test_torus_column_traffic_is_a_shard() -> None:
    """In a 2x3 torus, column messages carry a third of the tensor."""
    x = np.ones(3000, dtype=np.float32)
    stats = run_ranks(6, lambda c: torus2d_allreduce(c, x, 2, 3)[1], timeout=10)[0]
    # Row phases: 2 x 2 steps of 1000 floats; column ring of 2: 2 steps of 500 floats.
    assert stats.payload_sent == (4 * 1000 + 2 * 500) * 4


def test_torus_rejects_wrong_grid() -> None:
    """A grid that does not match the job size is an error on every rank."""
    with pytest.raises(Exception, match="does not match"):
        run_ranks(4, lambda c: torus2d_allreduce(c, np.zeros(3), 3, 2), timeout=5)


def _integer_floats(p: int, n: int, seed: int) -> list[np.ndarray]:
    """Float32 tensors of integers small enough that every sum is exact."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-(2**20), 2**20, n).astype(np.float32) for _ in range(p)]


@pytest.mark.parametrize(("p", "per_host"), [(2, 1), (3, 1), (4, 2), (6, 3), (6, 2)])
def test_hitopk_matches_reference(p: int, per_host: int) -> None:
    """HiTopKComm returns exactly the sum over hosts of each host's top-k, on every rank."""
    hosts = block_hosts(p, per_host)
    xs = _integer_floats(p, 2_003, seed=p + per_host)
    out = run_ranks(p, lambda c: hitopk_allreduce(c, xs[c.rank], hosts, 0.01)[0], timeout=10)
    np.testing.assert_array_equal(out[0], hitopk_reference(xs, hosts, 0.01))
    _check_same_everywhere(out)


def test_hitopk_full_density_is_dense_sum() -> None:
    """At density 1 HiTopKComm is a plain all-reduce."""
    hosts = block_hosts(4, 2)
    xs = _inputs(4, 999, "float32", seed=9)
    out = run_ranks(4, lambda c: hitopk_allreduce(c, xs[c.rank], hosts, 1.0)[0], timeout=10)
    np.testing.assert_allclose(out[0], np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)


def test_hitopk_interleaved_hosts_and_exact_selector() -> None:
    """Host ids need not be contiguous; the exact selector plugs in."""
    hosts = (0, 1, 0, 1)
    xs = _integer_floats(4, 500, seed=11)
    out = run_ranks(
        4,
        lambda c: hitopk_allreduce(c, xs[c.rank], hosts, 0.05, selector=exact_selector)[0],
        timeout=10,
    )
    np.testing.assert_array_equal(out[0], hitopk_reference(xs, hosts, 0.05, exact_selector))


def test_hitopk_sends_less_between_hosts() -> None:
    """At 1% density the inter-host phase moves about 2% of the dense shard's bytes."""
    hosts = block_hosts(4, 2)
    x = np.random.default_rng(2).standard_normal(20_000).astype(np.float32)
    stats = run_ranks(4, lambda c: hitopk_allreduce(c, x, hosts, 0.01)[1], timeout=10)[0]
    dense_intra = 2 * 10_000 * 4  # reduce-scatter + all-gather of half the tensor
    sparse_inter = 2 * 100 * 4  # 100 indices + 100 values of the 10,000-element shard
    assert stats.payload_sent == dense_intra + sparse_inter


def test_hitopk_error_feedback_keeps_mass() -> None:
    """With error feedback, what is not sent stays in the residual: sent + residual = host sum."""
    hosts = block_hosts(2, 2)  # one host of two ranks
    xs = _integer_floats(2, 101, seed=4)

    def work(c: Communicator):  # type: ignore[no-untyped-def]
        residual = np.zeros(101, dtype=np.float32)
        result, _ = hitopk_allreduce(c, xs[c.rank], hosts, 0.1, residual=residual)
        return result, residual

    out = run_ranks(2, work, timeout=10)
    total_residual = out[0][1] + out[1][1]
    np.testing.assert_array_equal(out[0][0] + total_residual, xs[0] + xs[1])
    assert np.count_nonzero(out[0][0]) == 2 * 5  # k = 5 per 50/51-element shard


def test_hybrid_schedule_switches_modes() -> None:
    """Sparse before `sparse_epochs`, dense 2D torus after; the dense result is the exact sum."""
    hosts = block_hosts(4, 2)
    schedule = HybridSchedule(sparse_epochs=2, density=0.01, host_ids=hosts)
    assert [schedule.mode(e) for e in range(4)] == ["sparse", "sparse", "dense", "dense"]
    assert schedule.grid == (2, 2)
    xs = _integer_floats(4, 1_000, seed=8)

    def work(c: Communicator):  # type: ignore[no-untyped-def]
        sparse, s1 = schedule.allreduce(c, xs[c.rank], epoch=0)
        dense, s2 = schedule.allreduce(c, xs[c.rank], epoch=2)
        return sparse, dense, s1.algorithm, s2.algorithm

    sparse, dense, a1, a2 = run_ranks(4, work, timeout=10)[0]
    assert (a1, a2) == ("hitopk", "torus2d")
    np.testing.assert_array_equal(sparse, hitopk_reference(xs, hosts, 0.01))
    np.testing.assert_array_equal(dense, np.sum(xs, axis=0))


def test_hybrid_requires_host_major_numbering() -> None:
    """The dense torus needs ranks numbered host by host."""
    with pytest.raises(ValueError, match="host by host"):
        HybridSchedule(1, 0.01, (0, 1, 0, 1))
