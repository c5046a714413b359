"""The numpy MLP, its optimiser and the dataset shards used by the training experiments."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np
import pytest

from train.data import (
    decode_shard,
    encode_shard,
    load_digits_split,
    make_shards,
    shard_name,
    shards_of_rank,
    steps_per_epoch,
)
from train.model import MLP, SGD, MLPShape


def test_parameter_count() -> None:
    """The flat parameter vector holds both layers' weights and biases."""
    model = MLP(MLPShape(64, 32, 10), seed=0)
    assert model.params.size == 64 * 32 + 32 + 32 * 10 + 10
    assert model.params.dtype == np.float32


def test_gradient_matches_finite_differences() -> None:
    """Analytic gradients agree with central differences of the loss."""
    rng = np.random.default_rng(1)
    model = MLP(MLPShape(6, 5, 3), seed=2)
    x = rng.random((7, 6)).astype(np.float32)
    y = rng.integers(0, 3, 7)
    _, grad = model.loss_and_grad(x, y)
    eps = 1e-2
    for i in range(model.params.size):
        saved = model.params[i]
        model.params[i] = saved + eps
        up, _ = model.loss_and_grad(x, y)
        model.params[i] = saved - eps
        down, _ = model.loss_and_grad(x, y)
        model.params[i] = saved
        assert abs((up - down) / (2 * eps) - grad[i]) < 2e-3, i


def test_same_seed_same_model() -> None:
    """Ranks that use the same seed start from bitwise identical parameters."""
    a, b = MLP(MLPShape(), seed=5), MLP(MLPShape(), seed=5)
    np.testing.assert_array_equal(a.params, b.params)


def test_sgd_momentum_step() -> None:
    """One momentum step moves the parameters by lr * (m * v + g)."""
    p = np.ones(3, dtype=np.float32)
    opt = SGD(lr=0.5, momentum=0.5)
    opt.step(p, np.array([1, 2, 3], dtype=np.float32))
    opt.step(p, np.array([1, 0, 0], dtype=np.float32))
    np.testing.assert_allclose(p, [1 - 0.5 - 0.75, 1 - 1.0 - 0.5, 1 - 1.5 - 0.75])


def test_split_is_fixed_and_shardable() -> None:
    """The digits split is deterministic and the training set divides into equal shards."""
    a, b = load_digits_split(32), load_digits_split(32)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    assert len(a.y_train) % 32 == 0
    assert len(a.y_train) + len(a.y_test) == 1797
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0


def test_shard_round_trip() -> None:
    """A shard's bytes decode to exactly the arrays that were encoded."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.array([1, 2, 3])
    x2, y2 = decode_shard(encode_shard(x, y))
    np.testing.assert_array_equal(x2, x)
    np.testing.assert_array_equal(y2, y)


def test_garbage_is_not_a_shard() -> None:
    """Bytes that are not a shard raise ValueError, not a traceback from numpy internals."""
    with pytest.raises(ValueError, match="not a dataset shard"):
        decode_shard(b"hello")
    blob = encode_shard(np.zeros((3, 4), np.float32), np.zeros(3))
    for cut in (blob[:-1], blob + b"\0"):
        with pytest.raises(ValueError, match=r"malformed shard: .*\(3 rows x 4 columns\)"):
            decode_shard(cut)
    with pytest.raises(ValueError, match="a shard is x"):
        encode_shard(np.zeros((3, 4)), np.zeros(2))


def test_decoding_a_shard_parses_no_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks decode shards on threads at once (loopback training); CPython 3.11 before
    3.11.8 shares ``ast.parse``'s AST constructor between threads (gh-106905), and ``.npy``
    headers are parsed with it: a fresh-clone suite run failed with "AST constructor
    recursion depth mismatch". Decoding must not parse."""
    blob = encode_shard(np.ones((2, 3), np.float32), np.array([4, 5]))

    parsed: list[object] = []
    parse = ast.parse

    def recording(source: str, *args: Any, **kwargs: Any) -> ast.AST:
        parsed.append(source)
        tree: ast.AST = parse(source, *args, **kwargs)
        return tree

    monkeypatch.setattr(ast, "parse", recording)
    x, y = decode_shard(blob)
    monkeypatch.undo()
    assert parsed == []
    assert x.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_array_equal(y, [4, 5])


def test_ranks_partition_the_shards() -> None:
    """Every training shard belongs to exactly one rank; the test set is a shard too."""
    shards = make_shards(load_digits_split(8), 8)
    owned = [n for r in range(3) for n in shards_of_rank(r, 3, 8)]
    assert sorted(owned) == [shard_name(i) for i in range(8)]
    assert "test" in shards
    assert steps_per_epoch(3, 8, 45, 4) == 2 * 45 // 4
