"""The dataset (scikit-learn's ``load_digits``), its train/test split and its shards.

The training set is cut into equal shards, the unit the data server serves and the caches
keep (like the files of a dataset on NFS). A shard travels as a 16-byte header (magic,
rows, columns) and the raw little-endian arrays ``x`` (float32, pixels scaled to [0, 1]) and
``y`` (int64 labels). Decoding reads numbers only, so a shard from the network cannot run
code; and it parses no Python: ``.npy`` headers are read with ``ast.literal_eval``, whose
AST constructor CPython 3.11 before 3.11.8 shares between threads (gh-106905: two ranks
decoding on threads at once failed with "AST constructor recursion depth mismatch").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from numpy.random import default_rng

DEFAULT_SHARDS = 32
SPLIT_SEED = 1234
TEST_SHARD = "test"
SHARD_MAGIC = b"NRSHARD1"
_SHARD_HEADER = struct.Struct("<8sII")  # magic, rows, columns
_X_DTYPE = np.dtype("<f4")
_Y_DTYPE = np.dtype("<i8")


@dataclass(frozen=True)
class Split:
    """Features and labels of the training and test sets."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(num_shards: int = DEFAULT_SHARDS, test_fraction: float = 0.2) -> Split:
    """The 8x8 digits (1,797 images), shuffled with a fixed seed, split into train and test.

    The training set is trimmed to a multiple of ``num_shards`` (the rest joins the test set)
    so that every shard holds the same number of samples.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # a clear message instead of a traceback for users
        raise RuntimeError(
            "scikit-learn is needed for the digits dataset: .venv/bin/pip install scikit-learn"
        ) from exc
    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = default_rng(SPLIT_SEED).permutation(len(y))
    x, y = x[order], y[order]
    n_train = int(len(y) * (1.0 - test_fraction))
    n_train -= n_train % num_shards
    if n_train == 0:
        raise ValueError(f"{num_shards} shards leave no training samples")
    return Split(x[:n_train], y[:n_train], x[n_train:], y[n_train:])


def shard_name(index: int) -> str:
    """Name of training shard ``index`` (what the server and the caches key on)."""
    return f"train-{index:04d}"


def encode_shard(x: np.ndarray, y: np.ndarray) -> bytes:
    """The wire/disk form of one shard (``x`` is rows x columns, ``y`` one label per row)."""
    xa = np.ascontiguousarray(x, dtype=_X_DTYPE)
    ya = np.ascontiguousarray(y, dtype=_Y_DTYPE)
    if xa.ndim != 2 or ya.shape != (xa.shape[0],):
        raise ValueError(f"a shard is x (rows, columns) and y (rows,), got x {xa.shape}, "
                         f"y {ya.shape}")
    return _SHARD_HEADER.pack(SHARD_MAGIC, *xa.shape) + xa.tobytes() + ya.tobytes()


def decode_shard(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of a shard's bytes; ValueError if they are not a shard."""
    if len(blob) < _SHARD_HEADER.size or not blob.startswith(SHARD_MAGIC):
        raise ValueError(f"not a dataset shard ({len(blob)} bytes): no {SHARD_MAGIC!r} header")
    _, rows, cols = _SHARD_HEADER.unpack_from(blob)
    x_bytes = rows * cols * _X_DTYPE.itemsize
    expected = _SHARD_HEADER.size + x_bytes + rows * _Y_DTYPE.itemsize
    if len(blob) != expected:
        raise ValueError(f"malformed shard: {len(blob)} bytes, its header ({rows} rows x "
                         f"{cols} columns) says {expected}")
    x = np.frombuffer(blob, _X_DTYPE, rows * cols, _SHARD_HEADER.size).reshape(rows, cols)
    y = np.frombuffer(blob, _Y_DTYPE, rows, _SHARD_HEADER.size + x_bytes)
    # copies: arrays over the bytes would be read-only and keep the whole blob alive
    return x.astype(np.float32), y.astype(np.int64)


def make_shards(split: Split, num_shards: int) -> dict[str, bytes]:
    """Every training shard plus the test set (as shard ``test``), encoded."""
    if len(split.y_train) % num_shards:
        raise ValueError(f"{len(split.y_train)} training samples do not split into {num_shards}")
    xs = np.split(split.x_train, num_shards)
    ys = np.split(split.y_train, num_shards)
    shards = {shard_name(i): encode_shard(xs[i], ys[i]) for i in range(num_shards)}
    shards[TEST_SHARD] = encode_shard(split.x_test, split.y_test)
    return shards


def shards_of_rank(rank: int, workers: int, num_shards: int) -> list[str]:
    """The shards ``rank`` trains on every epoch: ``rank, rank + P, ...`` (fixed, so that a
    worker's caches hold exactly what it reads again next epoch)."""
    if not 0 <= rank < workers:
        raise ValueError(f"rank {rank} out of range for {workers} workers")
    if workers > num_shards:
        raise ValueError(f"{workers} workers need at least as many shards, got {num_shards}")
    return [shard_name(i) for i in range(rank, num_shards, workers)]


def steps_per_epoch(workers: int, num_shards: int, shard_samples: int, local_batch: int) -> int:
    """Steps every rank takes per epoch: set by the rank with the fewest shards."""
    fewest = num_shards // workers
    steps = fewest * shard_samples // local_batch
    if steps < 1:
        raise ValueError(
            f"a batch of {local_batch} per worker is larger than a worker's "
            f"{fewest * shard_samples} samples"
        )
    return steps
