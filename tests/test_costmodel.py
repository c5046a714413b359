"""Alpha-beta cost models against background section 4 and their known limits."""

from __future__ import annotations

import math

import pytest

from workloads import costmodel as cm

N = 100e6  # bytes
BETA = 1 / 12.5e9  # 100 GbE
ALPHA = 5e-6


@pytest.mark.parametrize("p", [2, 4, 16, 128])
def test_ring_formula(p: int) -> None:
    """Ring all-reduce is 2(P-1)·alpha + 2(P-1)/P·n·beta."""
    expected = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * N * BETA
    assert cm.ring_allreduce(N, p, ALPHA, BETA) == pytest.approx(expected)


def test_innetwork_formula_and_levels() -> None:
    """In-network all-reduce is 2·alpha + n·beta; a second tree level adds only 2·alpha."""
    one = cm.innetwork_allreduce(N, 8, ALPHA, BETA)
    assert one == pytest.approx(2 * ALPHA + N * BETA)
    two = cm.innetwork_allreduce(N, 8, ALPHA, BETA, levels=2)
    assert two - one == pytest.approx(2 * ALPHA)


def test_innetwork_flat_in_p() -> None:
    """In-network time does not depend on the number of workers; the ring's latency grows."""
    assert cm.innetwork_allreduce(N, 4, ALPHA, BETA) == cm.innetwork_allreduce(N, 256, ALPHA, BETA)
    ring_small, ring_big = (
        cm.ring_allreduce(1e3, 4, ALPHA, BETA),
        cm.ring_allreduce(1e3, 256, ALPHA, BETA),
    )
    assert ring_big > 50 * ring_small


@pytest.mark.parametrize("p", [2, 3, 8, 64])
def test_speedup_limit_without_latency(p: int) -> None:
    """With alpha = 0 the ring / in-network time ratio is exactly 2(P-1)/P."""
    ratio = cm.ring_allreduce(N, p, 0.0, BETA) / cm.innetwork_allreduce(N, p, 0.0, BETA)
    assert ratio == pytest.approx(2 * (p - 1) / p)


def test_spine_leaf_levels() -> None:
    """Workers within one leaf need one switch level, more need leaf and spine."""
    assert cm.spine_leaf_levels(8, 8) == 1
    assert cm.spine_leaf_levels(9, 8) == 2


def test_torus_formula() -> None:
    """2D torus = row reduce-scatter + column all-reduce of n/cols + row all-gather."""
    rows, cols, b_row, b_col = 4, 8, 1 / 150e9, 1 / 12.5e9
    expected = (
        2 * ((cols - 1) * ALPHA + (cols - 1) / cols * N * b_row)
        + 2 * (rows - 1) * ALPHA
        + 2 * (rows - 1) / rows * (N / cols) * b_col
    )
    assert cm.torus2d_allreduce(N, rows, cols, ALPHA, b_row, ALPHA, b_col) == pytest.approx(
        expected
    )


def test_torus_with_one_row_is_a_ring() -> None:
    """A 1 x P torus is the flat ring."""
    assert cm.torus2d_allreduce(N, 1, 6, ALPHA, BETA, ALPHA, BETA) == pytest.approx(
        cm.ring_allreduce(N, 6, ALPHA, BETA)
    )


def test_sparse_allgather_bytes() -> None:
    """Sparse all-gather moves (P-1)·rho·n·2 bytes per worker with 4-byte values and indices."""
    p, rho = 16, 0.01
    assert cm.sparse_allgather(N, p, rho, 0.0, BETA) == pytest.approx((p - 1) * rho * N * 2 * BETA)
    assert cm.sparse_allgather(N, p, rho, ALPHA, 0.0) == pytest.approx((p - 1) * ALPHA)


def test_sparse_breakeven_density() -> None:
    """At the break-even density sparse all-gather and dense ring move the same bytes."""
    p = 16
    rho = cm.sparse_breakeven_density(p)
    assert rho == pytest.approx(1 / p)
    assert cm.sparse_allgather(N, p, rho, 0, BETA) == pytest.approx(
        cm.ring_allreduce(N, p, 0, BETA)
    )


def test_hierarchical_innetwork_formula() -> None:
    """Hierarchical NetReduce = intra reduce-scatter + all-gather + in-network of n per NIC."""
    c = cm.Cluster(hosts=16, gpus_per_host=8, bw_intra=150e9, bw_inter=12.5e9)
    expected = 2 * 7 / 8 * N / 150e9 + N / 12.5e9
    assert cm.hierarchical_innetwork(N, c) == pytest.approx(expected)
    assert cm.hierarchical_innetwork(N, c) < cm.flat_innetwork(N, c)


def test_hitopk_formula() -> None:
    """HiTopKComm = intra reduce-scatter + all-gather + sparse all-gather of the host's share."""
    c = cm.Cluster(hosts=16, gpus_per_host=8, bw_intra=150e9, bw_inter=3.125e9)
    rho = 0.001
    expected = 2 * 7 / 8 * N / 150e9 + 15 * rho * N * 2 / 3.125e9
    assert cm.hitopk(N, c, rho) == pytest.approx(expected)


@pytest.mark.parametrize(("hosts", "g"), [(2, 8), (4, 4), (16, 8), (8, 2)])
def test_crossover_matches_closed_form(hosts: int, g: int) -> None:
    """Bisection finds the alpha = 0 closed-form B_intra/B_inter crossover."""
    found = cm.hierarchical_crossover(N, hosts, g, bw_inter=12.5e9)
    assert found == pytest.approx(cm.hierarchical_crossover_alpha0(g, hosts * g), rel=1e-6)


def test_crossover_separates_winner() -> None:
    """Just above the crossover hierarchical beats the flat ring, just below it loses."""
    ratio = cm.hierarchical_crossover(N, 16, 8, bw_inter=12.5e9, alpha_intra=1e-6, alpha_inter=5e-6)
    for factor, hier_wins in ((1.01, True), (0.99, False)):
        c = cm.Cluster(16, 8, ratio * factor * 12.5e9, 12.5e9, 1e-6, 5e-6)
        assert (cm.hierarchical_innetwork(N, c) < cm.flat_ring(N, c)) is hier_wins
    # NVLink 150 GB/s over 100 GbE is a ratio of 12: far above the crossover.
    assert ratio < 12


def test_crossover_edge_cases() -> None:
    """One GPU per host always wins (ratio 0); two workers never strictly win (inf)."""
    assert cm.hierarchical_crossover(N, 8, 1, bw_inter=12.5e9) == 0.0
    assert math.isinf(cm.hierarchical_crossover(N, 1, 2, bw_inter=12.5e9))
    assert math.isinf(cm.hierarchical_crossover_alpha0(1, 2))


def test_rejects_bad_input() -> None:
    """Negative sizes and empty jobs are errors, not nonsense numbers."""
    with pytest.raises(ValueError):
        cm.ring_allreduce(-1, 4, ALPHA, BETA)
    with pytest.raises(ValueError):
        cm.ring_allreduce(N, 0, ALPHA, BETA)
    with pytest.raises(ValueError, match="baseline"):
        cm.hierarchical_crossover(N, 2, 2, 1e9, baseline="tree")
