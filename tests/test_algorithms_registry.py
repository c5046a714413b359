"""The algorithm registry is the one place a collective is named: every consumer's list is
derived from it, aliases resolve everywhere, and every registered function exists."""

from __future__ import annotations

import pytest

import algorithms
from algorithms import registry
from experiment import matrix
from sim import model, schedules
from sim.emulation import ALGORITHM_OF
from sim.fabric import emulated
from workloads import replay


def test_names_and_aliases_are_unique_and_resolve() -> None:
    seen: set[str] = set()
    for alg in algorithms.REGISTRY:
        keys = {alg.name, *alg.aliases, *([alg.sim_name] if alg.sim_name else [])}
        assert not keys & seen, keys & seen
        seen |= keys
        for key in keys:
            assert algorithms.get(key) is alg
    assert seen == registry.REGISTRY_NAMES
    # the three naming schemes of the old tree are one algorithm each
    assert {algorithms.canonical(n) for n in ("innetwork", "ina", "inswitch")} == {"innetwork"}
    assert {algorithms.canonical(n) for n in ("topk", "hitopk", "mstopk")} == {"topk"}


def test_every_registered_function_exists() -> None:
    for alg in algorithms.REGISTRY:
        assert callable(alg.run_factory()), alg.name
        if alg.sim_name is not None:
            assert callable(alg.cost_model_fn()) and callable(alg.schedule_fn()), alg.name
        else:
            with pytest.raises(ValueError, match="has no cost model"):
                alg.cost_model_fn()


def test_consumers_derive_their_lists_from_the_registry() -> None:
    assert schedules.ALGORITHMS == registry.sim_names()
    assert replay.ALGORITHMS == algorithms.names()
    assert set(matrix.ALGOS) == set(algorithms.names())
    own = {a.name: a.sim_name for a in algorithms.REGISTRY if a.sim_name}
    # another transport's version of a simulated algorithm is simulated as its family
    family = {a.name: algorithms.get(a.kind).sim_name for a in algorithms.REGISTRY
              if not a.sim_name and algorithms.get(a.kind).sim_name}
    assert ALGORITHM_OF == own | family
    assert ALGORITHM_OF["ring-roce"] == "ring"


def test_aliases_work_in_the_simulator_and_the_matrix() -> None:
    f = emulated(3.0)
    assert model.predict("innetwork", f, 1 << 20) == model.predict("ina", f, 1 << 20)
    a, b = schedules.build("torus", f, 4096), schedules.build("torus2d", f, 4096)
    assert (a.kind == b.kind).all() and (a.nbytes == b.nbytes).all()
    spec = matrix.MatrixSpec(algos=("ina", "hitopk", "fp32-ring"))
    assert spec.algos == ("innetwork", "topk", "ring")


def test_unknown_names_are_clear_errors() -> None:
    with pytest.raises(algorithms.UnknownAlgorithmError, match="unknown algorithm 'butterfly'"):
        algorithms.get("butterfly")
    with pytest.raises(matrix.MatrixError, match="unknown algorithm"):
        matrix.MatrixSpec(algos=("butterfly",))
    with pytest.raises(ValueError, match="no cost model"):
        model.predict("hybrid", emulated(3.0), 1024)


def test_training_exchanges_come_from_the_registry() -> None:
    """make train's collectives, their aliases and their factories are the registry's: every
    factory exists, an algorithm name or alias means its first exchange, and only the
    exchange through the switches asks for a controller job."""
    from train.cli import _collectives
    from train.exchange import COLLECTIVES

    assert COLLECTIVES == registry.training_names() == (
        "fp32-ring", "inswitch", "inswitch-reference", "mstopk", "hybrid")
    for name in COLLECTIVES:
        assert callable(registry.training_exchange(name).factory_fn()), name
    assert {n: registry.training_exchange(n).name for n in ("ring", "ina", "innetwork",
                                                            "hitopk", "topk")} == {
        "ring": "fp32-ring", "ina": "inswitch", "innetwork": "inswitch", "hitopk": "mstopk",
        "topk": "mstopk"}
    assert registry.training_algorithm("inswitch-reference").name == "innetwork"
    assert [n for n in COLLECTIVES if registry.training_exchange(n).switch] == ["inswitch"]
    assert _collectives("ring, hybrid,ina") == ["fp32-ring", "hybrid", "inswitch"]


def test_unknown_training_collective_names_the_value_and_the_valid_names() -> None:
    with pytest.raises(algorithms.UnknownAlgorithmError) as info:
        registry.training_exchange("allgather")
    text = str(info.value)
    assert "'allgather'" in text and "fp32-ring, inswitch, inswitch-reference, mstopk, " \
        "hybrid" in text
    with pytest.raises(algorithms.UnknownAlgorithmError, match="'torus' has no training"):
        registry.training_exchange("torus")
