"""Top-k gradient sparsification (MSTopK and exact) and the sparse-update operator.

MSTopK (Shi et al., 2020) avoids sorting: on ``a = |g|`` it binary-searches a ratio ``r`` in
``[0, 1]`` for a threshold ``mean(a) + r * (max(a) - mean(a))``, each round only *counting* the
elements above it. It keeps the tightest threshold with at most ``k`` elements above
(``hi``) and the tightest with more than ``k`` (``lo``), selects everything above ``hi`` and
fills up to exactly ``k`` from the band ``lo < a <= hi``. Counting passes map well to wide
vector hardware; after ~20 rounds the band is so narrow that the selection is nearly that of
exact top-k. :func:`topk_exact` (``np.argpartition``) is the reference.

The sparse-update operator adds ``(index, value)`` pairs into a dense tensor (applying the
gathered sparse gradients); :func:`scatter_add` is the vectorised form and
:func:`scatter_add_loop` the plain loop it is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.random import default_rng

DEFAULT_ROUNDS = 20


@dataclass(frozen=True)
class Selection:
    """``k`` selected positions (int64, ascending) and the gradient's values there."""

    indices: np.ndarray
    values: np.ndarray


def _check_k(k: int, n: int) -> int:
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return min(k, n)


def k_for_density(n: int, density: float) -> int:
    """Number of elements kept at ``density`` (at least one for a non-empty tensor)."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density must be in (0, 1], got {density}")
    if n == 0:
        return 0
    return max(1, min(n, int(round(density * n))))


def topk_exact(g: np.ndarray, k: int) -> Selection:
    """Exact top-k by magnitude via ``np.argpartition`` (ties broken arbitrarily)."""
    flat = np.asarray(g).ravel()
    k = _check_k(k, flat.size)
    if k == 0:
        idx = np.empty(0, dtype=np.int64)
    elif k == flat.size:
        idx = np.arange(flat.size, dtype=np.int64)
    else:
        idx = np.argpartition(np.abs(flat), flat.size - k)[flat.size - k :].astype(np.int64)
        idx.sort()
    return Selection(idx, flat[idx])


def _search_ratio(
    a: np.ndarray, k: int, mean: float, span: float, r_lo: float, r_hi: float, rounds: int
) -> tuple[float, float]:
    """Binary search of the ratio; returns the final ``(r_lo, r_hi)`` bracket.

    Invariant kept: ``count(a > thr(r_hi)) <= k < count(a > thr(r_lo))`` with
    ``thr(r) = mean + r * span``. Each round is one counting pass.
    """
    for _ in range(rounds):
        mid = 0.5 * (r_lo + r_hi)
        count = int(np.count_nonzero(a > mean + mid * span))
        if count > k:
            r_lo = mid
        else:
            r_hi = mid
            if count == k:
                break
    return r_lo, r_hi


def _initial_bracket(a: np.ndarray, k: int, mean: float, span: float) -> tuple[float, float] | None:
    """The paper's ``[0, 1]``, extended down to threshold 0 when the mean keeps <= k elements.

    ``None`` means that no threshold >= 0 keeps more than ``k`` elements (too many zeros).
    """
    if int(np.count_nonzero(a > mean)) > k:
        return 0.0, 1.0
    if int(np.count_nonzero(a > 0.0)) > k:
        return -mean / span, 0.0
    return None


#: Sampled selection: the sample holds about this many of the top k (more: a tighter estimate).
SAMPLE_TOP = 2000
#: ... and at least this many elements; below ``SAMPLE_MIN_FRACTION`` of the tensor sampling
#: is worth it, above it the plain search runs.
SAMPLE_MIN = 65536
SAMPLE_MAX_FRACTION = 0.25
#: Candidates kept beyond the sample's estimate of k, in standard deviations of its count.
SAMPLE_MARGIN_SIGMAS = 6.0


def mstopk(
    g: np.ndarray,
    k: int,
    rounds: int = DEFAULT_ROUNDS,
    sample: int | None = None,
    rng: np.random.Generator | None = None,
) -> Selection:
    """Approximate top-k by magnitude with MSTopK's threshold search; selects exactly ``k``.

    Large tensors take the sampled path (:func:`_sampled_candidates`): the threshold is
    binary-searched on a random sample, one vectorised pass over the whole tensor keeps the
    elements above a safely lower threshold, and the search then runs on those candidates
    only (a few times k elements instead of n). ``sample`` sets the sample size (default:
    about ``SAMPLE_TOP`` of the top k in it; ``0`` forces the plain search over the whole
    tensor, the paper's form). The band is filled in index order, which keeps the operator
    deterministic.
    """
    flat = np.asarray(g).ravel()
    n = flat.size
    k = _check_k(k, n)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if sample is not None and sample < 0:
        raise ValueError(f"sample must be >= 0, got {sample}")
    if k == 0:
        return Selection(np.empty(0, dtype=np.int64), flat[:0].copy())
    if k == n:
        return Selection(np.arange(n, dtype=np.int64), flat.copy())
    a = np.abs(flat) if flat.dtype.kind == "f" else np.abs(flat.astype(np.float64))
    if not np.isfinite(a.max()):  # NaN propagates through max
        raise ValueError("cannot select from a gradient holding NaN or infinite values")
    size = _sample_size(n, k) if sample is None else sample
    if 0 < size <= SAMPLE_MAX_FRACTION * n:
        cand = _sampled_candidates(a, k, size, rounds, rng)
        if cand is not None:
            sub = _select(a[cand], k, rounds)
            idx = cand[sub]
            return Selection(idx, flat[idx])
    idx = _select(a, k, rounds)
    return Selection(idx, flat[idx])


def _sample_size(n: int, k: int) -> int:
    """A sample holding about ``SAMPLE_TOP`` of the top k, at least ``SAMPLE_MIN`` elements."""
    return max(SAMPLE_MIN, -(-SAMPLE_TOP * n // k))


def _select(a: np.ndarray, k: int, rounds: int) -> np.ndarray:
    """MSTopK on magnitudes ``a``: exactly ``k`` indices (int64, ascending)."""
    mean = float(a.mean(dtype=np.float64))
    span = float(a.max()) - mean
    bracket = _initial_bracket(a, k, mean, span) if span > 0 else None
    if bracket is None:
        # Constant magnitudes, or more zeros than n - k: keep the non-zeros, fill from the rest.
        hi_thr, lo_thr = (0.0 if span > 0 else mean), -1.0
    else:
        r_lo, r_hi = _search_ratio(a, k, mean, span, *bracket, rounds)
        hi_thr, lo_thr = mean + r_hi * span, mean + r_lo * span
    above = a > hi_thr
    chosen = np.flatnonzero(above)
    missing = k - chosen.size
    if missing > 0:
        band = np.flatnonzero((a > lo_thr) & ~above)
        chosen = np.sort(np.concatenate([chosen, band[:missing]]))
    return chosen.astype(np.int64)


def _sampled_candidates(a: np.ndarray, k: int, size: int, rounds: int,
                        rng: np.random.Generator | None) -> np.ndarray | None:
    """Positions (ascending) of every element above a threshold estimated on a sample of
    ``size`` elements, when there are at least ``k`` of them; None otherwise.

    The MSTopK search on the sample targets ``k_s + SAMPLE_MARGIN_SIGMAS * sqrt(k_s)`` of its
    elements (``k_s`` = k scaled to the sample), so the full tensor very likely holds more
    than k above the threshold: the candidates then contain the true top k, and the
    selection among them is the plain search's. One counting pass checks; a miss (< k
    candidates) returns None and the caller searches the whole tensor.
    """
    rng = rng if rng is not None else default_rng(0)
    n = a.size
    part = a[rng.integers(0, n, size=size)]
    k_s = k * size / n
    target = int(min(size - 1, k_s + SAMPLE_MARGIN_SIGMAS * np.sqrt(k_s) + 1))
    mean = float(part.mean(dtype=np.float64))
    span = float(part.max()) - mean
    bracket = _initial_bracket(part, target, mean, span) if span > 0 else None
    if bracket is None:
        return None
    r_lo, _ = _search_ratio(part, target, mean, span, *bracket, rounds)
    cand = np.flatnonzero(a > mean + r_lo * span)
    return cand if cand.size >= k else None


def recall(selected: np.ndarray, reference: np.ndarray) -> float:
    """Fraction of the reference indices that the selection also contains."""
    if reference.size == 0:
        return 1.0
    return float(np.intersect1d(selected, reference).size) / float(reference.size)


def scatter_add(
    dense: np.ndarray, indices: np.ndarray, values: np.ndarray, unique: bool = False
) -> np.ndarray:
    """Add ``values`` at flat ``indices`` of ``dense`` in place (repeated indices accumulate).

    ``unique=True`` promises no repeats and uses plain fancy indexing, the fastest form;
    otherwise ``np.add.at`` applies the additions in index-array order, which gives the same
    float result as the plain loop.
    """
    flat = dense.reshape(-1)
    if not np.shares_memory(flat, dense):
        raise ValueError("dense must be contiguous so it can be updated in place")
    idx = np.asarray(indices, dtype=np.int64)
    vals = np.asarray(values, dtype=dense.dtype)
    if idx.shape != vals.shape:
        raise ValueError(f"indices {idx.shape} and values {vals.shape} differ in shape")
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise IndexError(f"index out of range for a tensor of {flat.size} elements")
    if unique:
        flat[idx] += vals
    else:
        np.add.at(flat, idx, vals)
    return dense


def scatter_add_bincount(dense: np.ndarray, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Scatter-add through ``np.bincount`` (sums repeats in float64 first; fastest with repeats)."""
    flat = dense.reshape(-1)
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise IndexError(f"index out of range for a tensor of {flat.size} elements")
    sums = np.bincount(idx, weights=np.asarray(values, dtype=np.float64), minlength=flat.size)
    touched = np.flatnonzero(np.bincount(idx, minlength=flat.size))
    flat[touched] += sums[touched].astype(dense.dtype)
    return dense


def scatter_add_loop(dense: np.ndarray, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The plain Python loop the vectorised operators replace (reference and benchmark)."""
    flat = dense.reshape(-1)
    for i, v in zip(
        np.asarray(indices).tolist(), np.asarray(values, dtype=dense.dtype), strict=True
    ):
        flat[i] += v
    return dense
