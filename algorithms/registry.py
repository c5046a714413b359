"""One registry of the collective algorithms.

Each :class:`Algorithm` names, in one place, what the rest of the testbed needs to know about
one all-reduce: its canonical name (the CLI and matrix name), its aliases (the simulator's
names such as ``ina``/``torus2d``/``hitopk`` and the training names such as ``inswitch``/
``mstopk``/``fp32-ring``), its transport, the functions that run it on hosts, predict its
time (cost model) and build its simulator schedule, its plot label and colour, and the
gradient exchanges ``make train`` runs it with (:class:`TrainingExchange`).

The functions are given as ``"module:function"`` strings and imported only when asked for,
so this module imports nothing of the project and every layer may depend on it without
crossing the layering (docs/architecture.md). Adding a collective is one module with those
functions plus one entry in :data:`REGISTRY` (docs/workloads.md shows a worked example).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TCP = "tcp"
ROCE = "roce"
INNETWORK = "innetwork"
#: The transports a host-to-host baseline (ring, torus, hier) runs over.
BASELINE_TRANSPORTS = (TCP, ROCE)
#: The baselines' transport in comparisons unless asked otherwise (docs/workloads.md,
#: "Which transport the baselines use").
DEFAULT_BASELINE_TRANSPORT = TCP


class UnknownAlgorithmError(ValueError):
    """A name that is no algorithm's name or alias (the message lists the known ones)."""


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    fn = getattr(importlib.import_module(module), attr)
    if not callable(fn):
        raise TypeError(f"{ref} is not callable")
    return fn  # type: ignore[no-any-return]


@dataclass(frozen=True)
class TrainingExchange:
    """One way ``make train`` sums gradients with an algorithm.

    ``name``: what a training config and its result files call it (``fp32-ring``,
    ``inswitch``...); ``factory``: ``"module:function"`` of the exchange factory
    ``(name, comm, size, ExchangeOptions, aggregator) -> GradientExchange``
    (train.exchange); ``switch``: it goes through the switches' aggregation, so a training
    run on the network first gets a NetReduce job from the controller.
    """

    name: str
    factory: str
    switch: bool = False

    def factory_fn(self) -> Callable[..., Any]:
        """The exchange factory (imported now)."""
        return _resolve(self.factory)


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm.

    ``runner``: ``"module:function"`` of a reducer factory ``(ReducerInputs) -> reducer``
    (workloads.replay); ``cost_model``: ``(Fabric, nbytes, density) -> seconds`` (sim.model);
    ``schedule``: ``(Fabric, nbytes, density) -> Schedule`` (sim.schedules). ``sim_name`` is
    the name the simulator and its result files use; None where the algorithm has no
    simulator model. ``training``: the gradient exchanges ``make train`` offers for it
    (none: training does not run it). ``family``: the algorithm whatever its transport
    (``ring`` for ``ring`` on TCP and ``ring-roce``; default: ``name``), so that
    :func:`on_transport` finds one algorithm's version for another transport.
    """

    name: str
    aliases: tuple[str, ...]
    transport: str
    runner: str
    label: str
    color: str
    sim_name: str | None = None
    cost_model: str | None = None
    schedule: str | None = None
    training: tuple[TrainingExchange, ...] = ()
    family: str = ""

    @property
    def kind(self) -> str:
        """The algorithm whatever its transport (``family``, else the name)."""
        return self.family or self.name

    @property
    def innetwork(self) -> bool:
        """Runs through the switches' aggregation (needs a controller job plan)."""
        return self.transport == INNETWORK

    def run_factory(self) -> Callable[..., Any]:
        """The reducer factory (imported now)."""
        return _resolve(self.runner)

    def cost_model_fn(self) -> Callable[..., float]:
        """The cost model; ValueError when the algorithm has none."""
        if self.cost_model is None:
            raise ValueError(f"algorithm {self.name!r} has no cost model")
        return _resolve(self.cost_model)

    def schedule_fn(self) -> Callable[..., Any]:
        """The simulator schedule builder; ValueError when the algorithm has none."""
        if self.schedule is None:
            raise ValueError(f"algorithm {self.name!r} has no simulator schedule")
        return _resolve(self.schedule)


#: Every algorithm, in the order tables and plots list them.
REGISTRY: tuple[Algorithm, ...] = (
    Algorithm("ring", ("fp32-ring",), TCP, "workloads.replay:ring_reducer",
              label="ring (TCP)", color="tab:red", sim_name="ring",
              cost_model="sim.model:ring_cost", schedule="sim.schedules:ring",
              training=(TrainingExchange("fp32-ring", "train.exchange:ring_exchange"),)),
    Algorithm("torus", ("torus2d",), TCP, "workloads.replay:torus_reducer",
              label="2D torus (TCP)", color="tab:orange", sim_name="torus2d",
              cost_model="sim.model:torus2d_cost", schedule="sim.schedules:torus2d"),
    Algorithm("innetwork", ("ina", "inswitch"), INNETWORK,
              "workloads.replay:innetwork_reducer", label="in-network (NetReduce)",
              color="tab:blue", sim_name="ina", cost_model="sim.model:ina_cost",
              schedule="sim.schedules:ina",
              # through the switches; the reference: the switch's arithmetic on the hosts
              training=(TrainingExchange("inswitch", "train.exchange:inswitch_exchange",
                                         switch=True),
                        TrainingExchange("inswitch-reference",
                                         "train.exchange:inswitch_exchange"))),
    Algorithm("innetwork-hier", ("ina-hier",), INNETWORK,
              "workloads.replay:innetwork_hier_reducer",
              label="in-network, hierarchical", color="tab:green", sim_name="ina-hier",
              cost_model="sim.model:ina_hier_cost", schedule="sim.schedules:ina_hier"),
    Algorithm("topk", ("hitopk", "mstopk"), TCP, "workloads.replay:topk_reducer",
              label="HiTopK (sparse, TCP)", color="tab:purple", sim_name="hitopk",
              cost_model="sim.model:hitopk_cost", schedule="sim.schedules:hitopk",
              training=(TrainingExchange("mstopk", "train.exchange:sparse_exchange"),)),
    Algorithm("hybrid", (), TCP, "workloads.replay:hybrid_reducer",
              label="hybrid (sparse, then torus)", color="tab:brown",
              training=(TrainingExchange("hybrid", "train.exchange:hybrid_exchange"),)),
    Algorithm("hier", ("hier-ring",), TCP, "workloads.replay:hier_reducer",
              label="hierarchical ring (TCP)", color="tab:olive"),
    # the dense baselines over the project's RoCE v2 transport (workloads.rocecomm): the
    # papers' baseline is NCCL's ring on RoCE; same algorithm code, another transport
    Algorithm("ring-roce", (), ROCE, "workloads.replay:ring_reducer",
              label="ring (RoCE)", color="tab:pink", family="ring"),
    Algorithm("torus-roce", (), ROCE, "workloads.replay:torus_reducer",
              label="2D torus (RoCE)", color="tab:gray", family="torus"),
    Algorithm("hier-roce", (), ROCE, "workloads.replay:hier_reducer",
              label="hierarchical ring (RoCE)", color="tab:cyan", family="hier"),
)


def _index() -> dict[str, Algorithm]:
    out: dict[str, Algorithm] = {}
    for alg in REGISTRY:
        for key in (alg.name, *alg.aliases, *((alg.sim_name,) if alg.sim_name else ())):
            if out.get(key, alg) is not alg:
                raise RuntimeError(f"algorithm name {key!r} registered twice")
            out[key] = alg
    return out


def _training_index() -> dict[str, tuple[Algorithm, TrainingExchange]]:
    out: dict[str, tuple[Algorithm, TrainingExchange]] = {}
    for alg in REGISTRY:
        for exchange in alg.training:
            if exchange.name in out:
                raise RuntimeError(f"training exchange {exchange.name!r} registered twice")
            out[exchange.name] = (alg, exchange)
    return out


_BY_NAME = _index()
_TRAINING = _training_index()
#: Every name and alias the registry knows.
REGISTRY_NAMES = frozenset(_BY_NAME)


def get(name: str) -> Algorithm:
    """The algorithm called ``name`` (its name or an alias)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownAlgorithmError(
            f"unknown algorithm {name!r}; choose one of {', '.join(names())} "
            f"(aliases: {', '.join(sorted(set(_BY_NAME) - set(names())))})") from None


def canonical(name: str) -> str:
    """The canonical name of ``name``."""
    return get(name).name


def names(*, transport: str | None = None, simulated: bool = False) -> tuple[str, ...]:
    """Canonical names, in registry order; only one transport's, or only the simulated."""
    return tuple(a.name for a in REGISTRY
                 if (transport is None or a.transport == transport)
                 and (not simulated or a.sim_name is not None))


def on_transport(name: str, transport: str) -> Algorithm:
    """The version of algorithm ``name`` (a name or alias) that runs over ``transport``
    (``ring`` and ``roce`` -> ``ring-roce``); ValueError naming the value when the
    transport is unknown or the algorithm has no version on it."""
    if transport not in BASELINE_TRANSPORTS + (INNETWORK,):
        raise ValueError(f"transport {transport!r}: choose from "
                         f"{', '.join(BASELINE_TRANSPORTS)}")
    kind = get(name).kind
    for alg in REGISTRY:
        if alg.kind == kind and alg.transport == transport:
            return alg
    have = sorted(a.transport for a in REGISTRY if a.kind == kind)
    raise ValueError(f"transport {transport!r}: algorithm {kind!r} runs over "
                     f"{', '.join(have)} only")


def sim_names() -> tuple[str, ...]:
    """The simulator's names of the algorithms it models, in registry order."""
    return tuple(a.sim_name for a in REGISTRY if a.sim_name is not None)


def training_names() -> tuple[str, ...]:
    """The names ``make train`` knows its gradient exchanges by, in registry order."""
    return tuple(_TRAINING)


def training_exchange(name: str) -> TrainingExchange:
    """The training exchange called ``name``: a training name (``fp32-ring``, ``inswitch``,
    ``inswitch-reference``...) or an algorithm's name or alias, which means its first
    training exchange (``ring`` and ``fp32-ring`` -> ``fp32-ring``, ``ina`` -> ``inswitch``,
    ``topk``/``hitopk`` -> ``mstopk``). :class:`UnknownAlgorithmError` naming the value and
    the valid names otherwise."""
    hit = _TRAINING.get(name)
    if hit is not None:
        return hit[1]
    alg = _BY_NAME.get(name)
    if alg is not None and alg.training:
        return alg.training[0]
    aliases = sorted(k for k, a in _BY_NAME.items() if a.training and k not in _TRAINING)
    why = (f"algorithm {alg.name!r} has no training exchange; " if alg is not None
           else "")
    raise UnknownAlgorithmError(
        f"unknown training collective {name!r}: {why}choose one of "
        f"{', '.join(training_names())} (or an algorithm name or alias meaning one: "
        f"{', '.join(aliases)})")


def training_algorithm(name: str) -> Algorithm:
    """The algorithm a training exchange runs (``mstopk`` -> ``topk``...)."""
    return _TRAINING[training_exchange(name).name][0]
