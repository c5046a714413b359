"""MSTopK versus exact top-k, and the sparse-update operator."""

from __future__ import annotations

import numpy as np
import pytest

from workloads.mstopk import (
    k_for_density,
    mstopk,
    recall,
    scatter_add,
    scatter_add_bincount,
    scatter_add_loop,
    topk_exact,
)

N = 200_003


def _gradient(kind: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    if kind == "normal":
        return rng.standard_normal(N).astype(np.float32)
    # Heavy-tailed: Student-t with 1.5 degrees of freedom, like real gradient spikes.
    return rng.standard_t(1.5, N).astype(np.float32)


@pytest.mark.parametrize("kind", ["normal", "heavy"])
@pytest.mark.parametrize("density", [0.001, 0.01])
def test_recall_against_exact(kind: str, density: float) -> None:
    """MSTopK selects exactly k elements with recall >= 0.9 against exact top-k."""
    g = _gradient(kind)
    k = k_for_density(g.size, density)
    approx, exact = mstopk(g, k), topk_exact(g, k)
    assert approx.indices.size == k
    assert np.unique(approx.indices).size == k
    assert recall(approx.indices, exact.indices) >= 0.9
    np.testing.assert_array_equal(approx.values, g[approx.indices])


@pytest.mark.parametrize("kind", ["normal", "heavy"])
def test_sampled_search_keeps_k_and_recall(kind: str) -> None:
    """With a 1% sample the selection is still exactly k with recall >= 0.9."""
    g = _gradient(kind)
    k = k_for_density(g.size, 0.01)
    approx = mstopk(g, k, sample=N // 100, rng=np.random.default_rng(3))
    assert approx.indices.size == k
    assert recall(approx.indices, topk_exact(g, k).indices) >= 0.9


@pytest.mark.parametrize("kind", ["normal", "heavy"])
def test_sampled_path_matches_plain_search(kind: str) -> None:
    """The default (sampled candidates, then the search on them) and the plain whole-tensor
    search (sample=0) both keep exactly k, ascending, with recall >= 0.99."""
    g = np.random.default_rng(11).standard_t(1.5 if kind == "heavy" else 1e9, 2_000_000)
    g = g.astype(np.float32)
    k = k_for_density(g.size, 0.01)
    exact = topk_exact(g, k).indices
    for sel in (mstopk(g, k), mstopk(g, k, sample=0)):
        assert sel.indices.size == k and np.all(np.diff(sel.indices) > 0)
        assert recall(sel.indices, exact) >= 0.99


def test_sampled_path_falls_back_without_enough_candidates() -> None:
    """Large constant input (no threshold separates anything) still selects exactly k."""
    g = np.full(1_000_000, 0.5, dtype=np.float32)
    assert mstopk(g, 1000).indices.tolist() == list(range(1000))


def test_rejects_nan_and_bad_sample() -> None:
    """NaN in the gradient and a negative sample size are refused with the reason."""
    g = np.ones(10, dtype=np.float32)
    g[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        mstopk(g, 2)
    with pytest.raises(ValueError, match="sample"):
        mstopk(np.ones(10, dtype=np.float32), 2, sample=-1)


def test_ties_fill_from_band_in_index_order() -> None:
    """With many equal magnitudes the band is filled in index order, keeping exactly k."""
    g = np.array([5, 1, 1, 1, 1, 1, 0, 0], dtype=np.float32)
    sel = mstopk(g, 3)
    assert sel.indices.tolist() == [0, 1, 2]


def test_mostly_zero_gradient() -> None:
    """A gradient with fewer non-zeros than k keeps all non-zeros and pads with zeros."""
    g = np.zeros(100, dtype=np.float32)
    g[[10, 50]] = [2.0, -3.0]
    sel = mstopk(g, 5)
    assert sel.indices.size == 5 and {10, 50} <= set(sel.indices.tolist())


def test_constant_gradient_and_edge_k() -> None:
    """Constant input, k = 0 and k >= n all select sensibly."""
    g = np.ones(10, dtype=np.float32)
    assert mstopk(g, 4).indices.tolist() == [0, 1, 2, 3]
    assert mstopk(g, 0).indices.size == 0
    assert mstopk(g, 50).indices.tolist() == list(range(10))


def test_sparse_update_matches_loop_with_repeats() -> None:
    """np.add.at scatter-add equals the plain loop bit for bit, repeated indices included."""
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 1000, 5000)
    vals = rng.standard_normal(5000).astype(np.float32)
    base = rng.standard_normal(1000).astype(np.float32)
    fast = scatter_add(base.copy(), idx, vals)
    slow = scatter_add_loop(base.copy(), idx, vals)
    np.testing.assert_array_equal(fast, slow)


def test_sparse_update_unique_and_bincount() -> None:
    """Fancy-index and bincount forms give exact results on unique and integer-valued input."""
    rng = np.random.default_rng(6)
    idx = rng.permutation(1000)[:300]
    vals = rng.integers(-100, 100, 300).astype(np.float32)
    base = np.zeros((10, 100), dtype=np.float32)
    expected = scatter_add_loop(base.copy(), idx, vals)
    np.testing.assert_array_equal(scatter_add(base.copy(), idx, vals, unique=True), expected)
    np.testing.assert_array_equal(
        scatter_add_bincount(base.copy(), np.tile(idx, 2), np.tile(vals, 2)), 2 * expected
    )


def test_sparse_update_rejects_bad_index() -> None:
    """An index outside the tensor is an IndexError, not silent corruption."""
    with pytest.raises(IndexError):
        scatter_add(np.zeros(4, dtype=np.float32), np.array([4]), np.array([1.0]))
