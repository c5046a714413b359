"""Gradient exchanges of the trainer: switch arithmetic, fixed point, sparse and hybrid."""

from __future__ import annotations

import numpy as np
import pytest

from train.exchange import (
    ExchangeOptions,
    channel_aggregator,
    default_ranks_per_host,
    make_exchange,
    saturating_sum,
    switch_reference_aggregator,
)
from workloads.comm import Communicator
from workloads.fixedpoint import FixedPoint
from workloads.loopback import run_ranks
from workloads.mstopk import scatter_add, scatter_add_loop

P = 4
N = 1001


def _grads(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(N) * 0.01).astype(np.float32) for _ in range(P)]


def test_saturating_sum_matches_switch() -> None:
    """Int32 sums saturate at the limits and flag exactly the saturated elements."""
    a = np.array([2**31 - 10, -(2**31) + 5, 7], dtype=np.int32)
    b = np.array([100, -100, 8], dtype=np.int32)
    total, over = saturating_sum([a, b])
    np.testing.assert_array_equal(total, [2**31 - 1, -(2**31), 15])
    np.testing.assert_array_equal(over, [True, True, False])


def test_reference_aggregator_sums_int32() -> None:
    """Rank 0 playing the switch returns the exact int32 sum to every rank."""
    msgs = [np.arange(10, dtype=np.int32) * (r + 1) for r in range(P)]

    def work(comm: Communicator) -> np.ndarray:
        return switch_reference_aggregator(comm)(msgs[comm.rank])

    for out in run_ranks(P, work, timeout=10):
        np.testing.assert_array_equal(out, sum(msgs))


def test_inswitch_reference_is_exact_fixed_point() -> None:
    """The fixed-point exchange returns decode(sum of encodings), identical on all ranks."""
    grads = _grads(1)
    fmt = FixedPoint(20, P)
    expected = fmt.decode(np.sum([fmt.encode(g)[0].astype(np.int64) for g in grads], axis=0))

    def work(comm: Communicator) -> np.ndarray:
        ex = make_exchange("inswitch-reference", comm, N, ExchangeOptions(frac_bits=20))
        out, stats = ex(comm, grads[comm.rank], 0)
        assert stats.detail == {"frac_bits": 20, "attempts": 1}
        return out

    for out in run_ranks(P, work, timeout=10):
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_allclose(out, sum(grads), atol=P * 2.0**-21)


def test_inswitch_rescales_on_overflow() -> None:
    """A gradient too large for the first scale makes every rank retry with fewer bits."""
    grads = _grads(2)
    grads[3][5] = 5000.0  # 5000 * 2**20 exceeds the per-worker limit (2**31 - 1) // 4

    def work(comm: Communicator) -> tuple[np.ndarray, dict[str, object]]:
        ex = make_exchange("inswitch", comm, N, ExchangeOptions(frac_bits=20, retry_step=4))
        out, stats = ex(comm, grads[comm.rank], 0)
        return out, stats.detail

    for out, detail in run_ranks(P, work, timeout=10):
        assert detail == {"frac_bits": 16, "attempts": 2}
        np.testing.assert_allclose(out, sum(grads), atol=P * 2.0**-17)


def test_fp32_ring_exchange() -> None:
    """The fp32 ring exchange sums the gradients and counts its traffic."""
    grads = _grads(3)

    def work(comm: Communicator) -> tuple[np.ndarray, int]:
        out, stats = make_exchange("fp32-ring", comm, N)(comm, grads[comm.rank], 0)
        return out, stats.payload_sent

    results = run_ranks(P, work, timeout=10)
    for out, _ in results:
        np.testing.assert_allclose(out, sum(grads), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out, results[0][0])
    # Every element crosses P - 1 links in each of the two phases, 4 bytes each time.
    assert sum(payload for _, payload in results) == 2 * (P - 1) * N * 4


def test_mstopk_error_feedback_keeps_the_mass() -> None:
    """What MSTopK does not send stays in the residual: sent + residuals = dense sum."""
    grads = _grads(4)

    def work(comm: Communicator) -> tuple[np.ndarray, np.ndarray]:
        ex = make_exchange("mstopk", comm, N, ExchangeOptions(density=0.05))
        out, _ = ex(comm, grads[comm.rank], 0)
        return out, ex.residual.copy()  # type: ignore[attr-defined]

    results = run_ranks(P, work, timeout=10)
    sent = results[0][0]
    assert np.count_nonzero(sent) <= P * round(0.05 * N)
    np.testing.assert_allclose(sent + sum(r for _, r in results), sum(grads), atol=1e-6)


def test_hybrid_switches_to_dense_torus() -> None:
    """The hybrid is sparse before sparse_epochs and a dense 2 x 2 torus after."""
    grads = _grads(5)

    def work(comm: Communicator) -> list[str]:
        ex = make_exchange("hybrid", comm, N, ExchangeOptions(density=0.05, sparse_epochs=1))
        sparse, s1 = ex(comm, grads[comm.rank], 0)
        dense, s2 = ex(comm, grads[comm.rank], 1)
        # The first dense step carries the residual: nothing sent twice, nothing lost.
        np.testing.assert_allclose(sparse + dense, 2 * sum(grads), atol=1e-5)
        return [s1.algorithm, s2.algorithm]

    assert run_ranks(P, work, timeout=10) == [["hybrid:sparse", "hybrid:dense"]] * P
    assert default_ranks_per_host(4) == 2 and default_ranks_per_host(7) == 1


def test_hybrid_sparse_phase_can_group_ranks_apart_from_the_torus() -> None:
    """With sparse_ranks_per_host=1 the hybrid's sparse phase is exactly MSTopK between all
    ranks (no dense intra-host step), while its dense phase is still the 2 x 2 torus."""
    grads = _grads(6)

    def work(comm: Communicator) -> tuple[np.ndarray, np.ndarray, int, int]:
        opts = ExchangeOptions(density=0.05, sparse_epochs=1, ranks_per_host=2,
                               sparse_ranks_per_host=1)
        ex = make_exchange("hybrid", comm, N, opts)
        ref = make_exchange("mstopk", comm, N, ExchangeOptions(density=0.05))
        sparse, s1 = ex(comm, grads[comm.rank], 0)
        expected, s_ref = ref(comm, grads[comm.rank], 0)
        dense, _ = ex(comm, grads[comm.rank], 1)
        np.testing.assert_allclose(sparse + dense, 2 * sum(grads), atol=1e-5)
        return sparse, expected, s1.payload_sent, s_ref.payload_sent

    for sparse, expected, payload, ref_payload in run_ranks(P, work, timeout=10):
        np.testing.assert_array_equal(sparse, expected)
        assert payload == ref_payload


def test_unknown_collective() -> None:
    """An unknown collective name is a ValueError that lists the choices."""

    def work(comm: Communicator) -> None:
        make_exchange("allgather", comm, N)

    with pytest.raises(Exception, match="fp32-ring"):
        run_ranks(1, work, timeout=5)


def test_sparse_update_operator_exact() -> None:
    """Vectorised scatter-add of top-k values equals the plain loop bit for bit."""
    rng = np.random.default_rng(6)
    dense = rng.standard_normal(10_000).astype(np.float32)
    idx = rng.integers(0, dense.size, 3_000)  # with repeats
    vals = rng.standard_normal(idx.size).astype(np.float32)
    np.testing.assert_array_equal(scatter_add(dense.copy(), idx, vals),
                                  scatter_add_loop(dense.copy(), idx, vals))
    uniq = np.unique(idx)
    np.testing.assert_array_equal(scatter_add(dense.copy(), uniq, vals[: uniq.size], unique=True),
                                  scatter_add_loop(dense.copy(), uniq, vals[: uniq.size]))


class _FakeChannel:
    """Stands in for workloads.innetwork.AggregationChannel: sums are fixed by the test."""

    def __init__(self, total: np.ndarray, overflow: bool) -> None:
        self.total, self.overflow = total, overflow
        self.seen: list[np.ndarray] = []

    def allreduce_int32(self, words: np.ndarray) -> tuple[np.ndarray, bool]:
        self.seen.append(words.copy())
        return self.total, self.overflow


def test_channel_aggregator_turns_overflow_into_retry() -> None:
    """The switch's overflow flag becomes a non-zero clamp word; a clean sum passes as is."""
    total = np.array([5, 6, 0], dtype=np.int32)
    out = channel_aggregator(_FakeChannel(total, overflow=True))(np.zeros(3, dtype=np.int32))
    np.testing.assert_array_equal(out, [5, 6, 1])
    out = channel_aggregator(_FakeChannel(total, overflow=False))(np.zeros(3, dtype=np.int32))
    np.testing.assert_array_equal(out, total)


def test_inswitch_uses_the_given_aggregator() -> None:
    """With an aggregator, `inswitch` sends the fixed-point message through it."""

    def work(comm: Communicator) -> tuple[str, np.ndarray]:
        fake = _FakeChannel(np.array([3 << 20, 0], dtype=np.int32), overflow=False)
        ex = make_exchange("inswitch", comm, 1, ExchangeOptions(frac_bits=20),
                           aggregator=channel_aggregator(fake))
        out, _ = ex(comm, np.array([1.0], dtype=np.float32), 0)
        np.testing.assert_array_equal(fake.seen[0], [1 << 20, 0])
        return ex.name, out

    name, out = run_ranks(1, work, timeout=5)[0]
    assert name == "inswitch"
    np.testing.assert_array_equal(out, [3.0])


def test_inswitch_counts_the_bytes_it_sends_to_the_switch() -> None:
    """RoCE traffic bypasses the communicator, so the exchange counts the message bytes
    (values plus clamp word) handed to the switch as its payload."""

    def work(comm: Communicator) -> int:
        fake = _FakeChannel(np.zeros(4, dtype=np.int32), overflow=False)
        ex = make_exchange("inswitch", comm, 3, ExchangeOptions(frac_bits=20),
                           aggregator=channel_aggregator(fake))
        _, stats = ex(comm, np.ones(3, dtype=np.float32), 0)
        return stats.payload_sent

    assert run_ranks(1, work, timeout=5) == [4 * 4]


def test_registry_aliases_pick_the_same_exchange() -> None:
    """``ring`` builds the fp32 ring exchange, ``topk`` the MSTopK one (registry aliases)."""

    def work(comm: Communicator) -> tuple[str, str]:
        return (make_exchange("ring", comm, N).name, make_exchange("topk", comm, N).name)

    assert run_ranks(1, work, timeout=5) == [("fp32-ring", "mstopk")]
