"""The exception root of ``train/``: every error of the training runs is a
:class:`TrainError`. Each subclass stays in the module that raises it and keeps its
``RuntimeError`` base."""

from __future__ import annotations


class TrainError(Exception):
    """A training run could not start or failed (one line for people)."""
