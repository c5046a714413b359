"""A two-layer perceptron in numpy whose parameters live in one flat float32 vector.

Why one flat vector: every collective moves a single tensor, so the gradient of the whole
model is exchanged in one call (one "fusion bucket"), exactly like a framework that fuses all
gradients before the all-reduce. Weight matrices are views into that vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.random import default_rng


@dataclass(frozen=True)
class MLPShape:
    """Layer widths: ``inputs -> hidden (ReLU) -> classes (softmax)``."""

    inputs: int = 64
    hidden: int = 64
    classes: int = 10

    @property
    def size(self) -> int:
        """Number of parameters."""
        return self.inputs * self.hidden + self.hidden + self.hidden * self.classes + self.classes


class MLP:
    """Parameters (flat float32) plus forward/backward passes; no optimiser state."""

    def __init__(self, shape: MLPShape, seed: int) -> None:
        if min(shape.inputs, shape.hidden, shape.classes) < 1:
            raise ValueError(f"every layer needs at least one unit, got {shape}")
        self.shape = shape
        self.params = np.zeros(shape.size, dtype=np.float32)
        rng = default_rng(seed)
        w1, _, w2, _ = self._views(self.params)
        # He initialisation for the ReLU layer, Glorot-like for the output layer.
        w1[...] = rng.normal(0.0, np.sqrt(2.0 / shape.inputs), w1.shape)
        w2[...] = rng.normal(0.0, np.sqrt(1.0 / shape.hidden), w2.shape)

    def _views(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s = self.shape
        a = s.inputs * s.hidden
        b = a + s.hidden
        c = b + s.hidden * s.classes
        return (
            flat[:a].reshape(s.inputs, s.hidden),
            flat[a:b],
            flat[b:c].reshape(s.hidden, s.classes),
            flat[c:],
        )

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Class scores for a batch ``x`` of shape ``(n, inputs)``."""
        w1, b1, w2, b2 = self._views(self.params)
        hidden = np.maximum(x @ w1 + b1, 0.0)
        return hidden @ w2 + b2

    def loss_and_grad(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean cross-entropy over the batch and its gradient (a flat float32 vector).

        Workers that each hold an equal slice of the global batch sum these per-slice mean
        gradients with a collective and divide by the number of workers: the global mean.
        """
        if x.shape[0] == 0:
            raise ValueError("empty batch")
        w1, b1, w2, b2 = self._views(self.params)
        pre = x @ w1 + b1
        hidden = np.maximum(pre, 0.0)
        scores = hidden @ w2 + b2
        scores = scores - scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        probs = exp / exp.sum(axis=1, keepdims=True)
        n = x.shape[0]
        loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())
        d_scores = probs
        d_scores[np.arange(n), y] -= 1.0
        d_scores /= n
        grad = np.empty_like(self.params)
        g_w1, g_b1, g_w2, g_b2 = self._views(grad)
        g_w2[...] = hidden.T @ d_scores
        g_b2[...] = d_scores.sum(axis=0)
        d_hidden = (d_scores @ w2.T) * (pre > 0.0)
        g_w1[...] = x.T @ d_hidden
        g_b1[...] = d_hidden.sum(axis=0)
        return loss, grad

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        """``(mean cross-entropy, accuracy)`` on a labelled set."""
        scores = self.logits(x).astype(np.float64)
        scores -= scores.max(axis=1, keepdims=True)
        log_probs = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
        loss = float(-log_probs[np.arange(len(y)), y].mean())
        accuracy = float((scores.argmax(axis=1) == y).mean())
        return loss, accuracy


@dataclass
class SGD:
    """SGD with momentum (heavy ball) on a flat parameter vector."""

    lr: float
    momentum: float = 0.9
    velocity: np.ndarray | None = None

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        """``v = m·v + g; p -= lr·v`` in place."""
        if self.velocity is None:
            self.velocity = np.zeros_like(params)
        self.velocity *= np.float32(self.momentum)
        self.velocity += grad
        params -= np.float32(self.lr) * self.velocity
