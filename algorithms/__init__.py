"""The collective-algorithm registry: every all-reduce the testbed runs, emulates, models,
simulates or plots, under one canonical name with its aliases (:mod:`.registry`)."""

from algorithms.registry import (
    REGISTRY,
    Algorithm,
    UnknownAlgorithmError,
    canonical,
    get,
    names,
)

__all__ = ["REGISTRY", "Algorithm", "UnknownAlgorithmError", "canonical", "get", "names"]
