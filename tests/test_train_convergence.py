"""Short data-parallel training runs over loopback TCP, one per collective."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.trainer import Experiment, TrainConfig, run_loopback

EPOCHS = 5
WORKERS = 4
MIN_ACCURACY = 0.90  # the digits MLP reaches ~95 % in 5 epochs; fp32 ring and fixed point alike
SEED = 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Experiment]:
    """One run per collective, shared by the tests below (about 1 s each)."""
    out = {}
    for name in ("fp32-ring", "inswitch-reference", "mstopk", "hybrid"):
        config = TrainConfig(collective=name, epochs=EPOCHS, workers=WORKERS, seed=SEED)
        out[name] = run_loopback(config, tmp_path_factory.mktemp(name), timeout=30)
    return out


@pytest.mark.parametrize("name", ["fp32-ring", "inswitch-reference", "mstopk", "hybrid"])
def test_training_converges(runs: dict[str, Experiment], name: str) -> None:
    """Loss falls and test accuracy ends above the stated threshold."""
    hist = runs[name].history
    assert len(hist) == EPOCHS + 1
    assert hist[-1].test_loss < 0.5 * hist[0].test_loss
    assert hist[-1].train_loss is not None and hist[1].train_loss is not None
    assert hist[-1].train_loss < 0.5 * hist[1].train_loss
    assert hist[-1].test_accuracy >= MIN_ACCURACY
    assert all(b.wall_s > a.wall_s for a, b in zip(hist, hist[1:], strict=False))


@pytest.mark.parametrize("name", ["fp32-ring", "inswitch-reference", "mstopk", "hybrid"])
def test_models_identical_on_all_ranks(runs: dict[str, Experiment], name: str) -> None:
    """Every rank ends with bitwise the same parameters."""
    assert runs[name].consistent


def test_fixed_point_matches_fp32_accuracy(runs: dict[str, Experiment]) -> None:
    """Fixed-point in-switch aggregation ends within 0.5 pp of the fp32 ring's accuracy."""
    gap = runs["inswitch-reference"].final_accuracy - runs["fp32-ring"].final_accuracy
    assert abs(gap) * 100.0 <= 0.5
    assert runs["inswitch-reference"].retries == 0


def test_hybrid_runs_sparse_then_dense(runs: dict[str, Experiment]) -> None:
    """The hybrid's first epochs are sparse and send less than its dense epochs."""
    hist = runs["hybrid"].history[1:]
    assert [r.algorithm for r in hist] == ["hybrid:sparse"] * 2 + ["hybrid:dense"] * 3
    assert hist[0].payload_sent < hist[-1].payload_sent


def test_sparse_sends_less_than_dense(runs: dict[str, Experiment]) -> None:
    """MSTopK at 5 % density sends far fewer payload bytes than the fp32 ring."""
    assert sum(runs["mstopk"].payload_sent_per_rank) < 0.5 * sum(
        runs["fp32-ring"].payload_sent_per_rank)


def test_cache_hit_rate_from_second_epoch(runs: dict[str, Experiment]) -> None:
    """From the second epoch on, >= 90 % of shard reads stay local and no bytes cross."""
    caches = runs["fp32-ring"].cache_per_epoch
    assert caches[0].hit_rate("remote") == 1.0
    for epoch in caches[1:]:
        assert epoch.local_hit_rate >= 0.9
        assert epoch.network_bytes == 0
        assert epoch.bytes_saved == caches[0].network_bytes


def test_disk_level_serves_without_memory(tmp_path: Path) -> None:
    """With the memory level disabled, later epochs are served by the local disk."""
    config = TrainConfig(epochs=2, workers=2, memory_cache_bytes=0)
    exp = run_loopback(config, tmp_path, timeout=30)
    second = exp.cache_per_epoch[1]
    assert second.hit_rate("disk") == 1.0 and second.network_bytes == 0
    assert exp.history[-1].cache["hit_rate"]["disk"] == 1.0  # rank 0's record agrees
