"""Model profiles: parameter totals, FLOPs, ordering, fusion buckets, scaling."""

from __future__ import annotations

import pytest

from workloads.profiles import PROFILES, get_profile


@pytest.mark.parametrize(
    ("name", "params"),
    [("resnet50", 25_557_032), ("vgg16", 138_357_544), ("bert-base", 109_482_240)],
)
def test_exact_parameter_totals(name: str, params: int) -> None:
    """Per-layer counts add up to the published totals exactly."""
    assert get_profile(name).params == params


def test_transformer_base_total() -> None:
    """Transformer-base (shared 37k embedding) is about 63M, within 4% of the paper's ~65M."""
    params = get_profile("transformer-base").params
    assert params == 63_082_496
    assert abs(params - 65e6) / 65e6 < 0.04


@pytest.mark.parametrize(
    ("name", "gmacs"), [("resnet50", 4.1), ("vgg16", 15.5), ("bert-base", 11.2)]
)
def test_forward_flops(name: str, gmacs: float) -> None:
    """Forward FLOPs derived from layer shapes match the well-known multiply-accumulate counts."""
    assert get_profile(name).fwd_flops / 2e9 == pytest.approx(gmacs, rel=0.03)


def test_layer_names_unique_and_backward_reversed() -> None:
    """Layer names are unique and gradients become ready last layer first."""
    for name in PROFILES:
        p = get_profile(name)
        names = [layer.name for layer in p.layers]
        assert len(set(names)) == len(names)
        assert p.backward_order()[0] == p.layers[-1]
    assert get_profile("resnet50").backward_order()[0].name == "fc"


def test_buckets_cover_all_and_respect_size() -> None:
    """Buckets hold every layer once, in backward order, none above the cap unless alone."""
    p = get_profile("vgg16")
    cap = 25 * 2**20
    buckets = p.buckets(cap)
    flat = [n for b in buckets for n in b.layers]
    assert flat == [layer.name for layer in p.backward_order()]
    assert sum(b.nbytes for b in buckets) == 4 * p.params
    assert all(b.nbytes <= cap or len(b.layers) == 1 for b in buckets)
    assert buckets[-1].layers[-1] == "features.0"


def test_compute_times_positive_and_consistent() -> None:
    """Backward takes twice the forward time; ResNet-50 at batch 64 takes tens of milliseconds."""
    p = get_profile("resnet50")
    times = p.compute_times()
    assert all(b == pytest.approx(2 * f) for _, f, b in times)
    assert 0.02 < p.iteration_compute_s() < 0.2


def test_scaling_shrinks_sizes_and_time() -> None:
    """A scale of 1000 shrinks parameters and compute about 1000 times."""
    p, s = get_profile("bert-base"), get_profile("bert-base", scale=1000)
    assert len(s.layers) == len(p.layers)
    assert p.params / s.params == pytest.approx(1000, rel=0.01)
    assert p.iteration_compute_s() / s.iteration_compute_s() == pytest.approx(1000)


def test_unknown_profile() -> None:
    """An unknown name lists the known ones."""
    with pytest.raises(ValueError, match="resnet50"):
        get_profile("alexnet")
