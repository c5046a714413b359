"""Data-parallel SGD on P ranks: every rank reads its shards through its cache, computes the
gradient of its slice of the global batch, and sums gradients with a pluggable exchange.

All ranks start from the same parameters (same seed) and apply the same summed gradient,
so their models stay bitwise identical; :attr:`RankResult.params_sha256` lets a run check it.
Times per epoch: training wall time (reading, compute and exchange; evaluation excluded),
and within it the exchange time, the I/O time and this rank's CPU time.

Time dilation: the times are emulated seconds of the communicator's clock (real / TDF), with
the real epoch time beside them and the factor in :class:`RankResult`; CPU time is the
machine's. The model's compute is real work on this machine, not modelled, so a dilated run
shows it ``TDF`` times faster than it ran (docs/training.md).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.random import default_rng

from train.cache import LEVELS, CacheStats, LevelStats, MultiLevelCache
from train.data import (
    DEFAULT_SHARDS,
    TEST_SHARD,
    decode_shard,
    load_digits_split,
    make_shards,
    shards_of_rank,
    steps_per_epoch,
)
from train.dataserver import DataServer, ShardClient
from train.exchange import ExchangeOptions, IntAggregator, make_exchange
from train.model import MLP, SGD, MLPShape
from vtime import REAL_TIME, VirtualClock
from workloads.collectives import ring_allreduce
from workloads.comm import Communicator
from workloads.loopback import run_ranks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """One training run (the defaults reach ~97 % test accuracy in 8 epochs on 4 workers)."""

    collective: str = "fp32-ring"
    epochs: int = 8
    workers: int = 4
    global_batch: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0
    hidden: int = 64
    num_shards: int = DEFAULT_SHARDS
    exchange: ExchangeOptions = field(default_factory=ExchangeOptions)
    memory_cache_bytes: int = 64 << 20
    disk_cache_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.workers < 1:
            raise ValueError("epochs and workers must be >= 1")
        if self.global_batch < self.workers:
            raise ValueError(
                f"global batch {self.global_batch} is smaller than {self.workers} workers"
            )
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")

    @property
    def local_batch(self) -> int:
        """Samples per rank per step."""
        return self.global_batch // self.workers

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`as_dict`; ValueError names an unknown or malformed field."""
        data = dict(data)
        try:
            data["exchange"] = ExchangeOptions(**data.get("exchange", {}))
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"bad training configuration: {exc}") from exc


@dataclass(frozen=True)
class EpochRecord:
    """Metrics after one epoch (epoch 0: the untrained model)."""

    epoch: int
    train_loss: float | None
    test_loss: float
    test_accuracy: float
    wall_s: float  # cumulative training wall time at the end of this epoch
    epoch_s: float = 0.0  # emulated
    comm_s: float = 0.0
    io_s: float = 0.0
    compute_s: float = 0.0
    cpu_s: float = 0.0  # this machine's CPU seconds
    steps: int = 0
    payload_sent: int = 0
    bytes_sent: int = 0
    algorithm: str = ""
    cache: dict[str, Any] = field(default_factory=dict)
    real_epoch_s: float = 0.0  # epoch_s on the machine's clock (epoch_s x TDF)


@dataclass(frozen=True)
class RankResult:
    """One rank's run: its history, final-model hash and per-epoch cache statistics."""

    rank: int
    collective: str
    history: list[EpochRecord]
    params_sha256: str
    cache_per_epoch: list[CacheStats]
    retries: int = 0
    tdf: float = 1.0  # time-dilation factor of the run
    # the rank's process CPU over its training (every thread: the transport's too) and the
    # real seconds that took: how busy the host was, for the fidelity guard
    process_cpu_s: float = 0.0
    train_real_s: float = 0.0

    @property
    def cores(self) -> float:
        """Cores the rank's process used while it trained (0 when unknown)."""
        return self.process_cpu_s / self.train_real_s if self.train_real_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (what a worker process writes for the launcher)."""
        return {
            "rank": self.rank,
            "collective": self.collective,
            "history": [asdict(r) for r in self.history],
            "params_sha256": self.params_sha256,
            "cache_per_epoch": [{n: asdict(c.level(n)) for n in LEVELS}
                                for c in self.cache_per_epoch],
            "retries": self.retries,
            "tdf": self.tdf,
            "process_cpu_s": self.process_cpu_s,
            "train_real_s": self.train_real_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RankResult:
        """Inverse of :meth:`as_dict`; ValueError for a malformed document."""
        try:
            return cls(
                int(data["rank"]), str(data["collective"]),
                [EpochRecord(**r) for r in data["history"]], str(data["params_sha256"]),
                [CacheStats({n: LevelStats(**lv) for n, lv in c.items()})
                 for c in data["cache_per_epoch"]],
                int(data.get("retries", 0)), float(data.get("tdf", 1.0)),
                float(data.get("process_cpu_s", 0.0)), float(data.get("train_real_s", 0.0)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed rank result: {exc}") from exc


def _load_epoch_data(
    cache: MultiLevelCache, names: list[str], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for name in rng.permutation(names):
        x, y = decode_shard(cache.get(str(name)))
        xs.append(x)
        ys.append(y)
    x, y = np.concatenate(xs), np.concatenate(ys)
    order = rng.permutation(len(y))
    return x[order], y[order]


def _mean_over_ranks(comm: Communicator, values: list[float]) -> list[float]:
    total, _ = ring_allreduce(comm, np.asarray(values, dtype=np.float64))
    return [float(v) / comm.size for v in total]


def train_rank(
    comm: Communicator,
    config: TrainConfig,
    cache: MultiLevelCache,
    aggregator: IntAggregator | None = None,
) -> RankResult:
    """Train on this rank; every rank of ``comm`` must call it with the same ``config``
    (``aggregator``: the switch's int32 all-reduce, for the ``inswitch`` collective)."""
    if comm.size != config.workers:
        raise ValueError(f"config says {config.workers} workers, communicator has {comm.size}")
    names = shards_of_rank(comm.rank, comm.size, config.num_shards)
    x_test, y_test = decode_shard(cache.get(TEST_SHARD))
    model = MLP(MLPShape(x_test.shape[1], config.hidden, 10), config.seed)
    opt = SGD(config.lr, config.momentum)
    exchange = make_exchange(config.collective, comm, model.params.size, config.exchange,
                             aggregator)
    test_loss, test_acc = model.evaluate(x_test, y_test)
    history = [EpochRecord(0, None, test_loss, test_acc, 0.0, algorithm=exchange.name)]
    cache_epochs: list[CacheStats] = []
    wall = 0.0
    inv_p = np.float32(1.0 / comm.size)
    clock = comm.clock
    process_cpu0, started = time.process_time(), clock.now()
    for epoch in range(config.epochs):
        rng = default_rng([config.seed, epoch, comm.rank])
        before = cache.snapshot()
        start, cpu_start = clock.now(), time.thread_time()
        x, y = _load_epoch_data(cache, names, rng)
        # Shards are equal, so every rank derives the same step count from its own data.
        steps = steps_per_epoch(comm.size, config.num_shards, len(y) // len(names),
                                config.local_batch)
        comm_s = 0.0
        payload = sent = 0
        losses = []
        algorithm = exchange.name
        for step in range(steps):
            lo = step * config.local_batch
            loss, grad = model.loss_and_grad(x[lo : lo + config.local_batch],
                                             y[lo : lo + config.local_batch])
            summed, stats = exchange(comm, grad, epoch)
            opt.step(model.params, summed.astype(np.float32) * inv_p)
            losses.append(loss)
            comm_s += stats.seconds
            payload += stats.payload_sent
            sent += stats.bytes_sent
            algorithm = stats.algorithm
        epoch_s = clock.now() - start
        cpu_s = time.thread_time() - cpu_start
        wall += epoch_s
        epoch_cache = cache.snapshot() - before
        cache_epochs.append(epoch_cache)
        (train_loss,) = _mean_over_ranks(comm, [float(np.mean(losses))])
        test_loss, test_acc = model.evaluate(x_test, y_test)
        history.append(EpochRecord(
            epoch + 1, train_loss, test_loss, test_acc, wall, epoch_s, comm_s,
            epoch_cache.io_seconds, max(0.0, epoch_s - comm_s - epoch_cache.io_seconds), cpu_s,
            steps, payload, sent, algorithm, epoch_cache.as_dict(), clock.real(epoch_s),
        ))
        log.info("rank %d epoch %d: loss %.4f acc %.4f (%s, %.2fs)", comm.rank, epoch + 1,
                 train_loss, test_acc, algorithm, epoch_s)
    digest = hashlib.sha256(model.params.tobytes()).hexdigest()
    retries = int(getattr(exchange, "retries", 0))
    return RankResult(comm.rank, exchange.name, history, digest, cache_epochs, retries,
                      clock.tdf, time.process_time() - process_cpu0,
                      clock.real(clock.now() - started))


@dataclass(frozen=True)
class Experiment:
    """A finished run: rank 0's history plus what all ranks agree on."""

    config: TrainConfig
    implementation: str
    history: list[EpochRecord]
    consistent: bool
    cache_per_epoch: list[CacheStats]
    retries: int
    transport: str = "loopback"
    payload_sent_per_rank: tuple[int, ...] = ()
    network: dict[str, Any] = field(default_factory=dict)  # Mininet: topology, link bytes
    tdf: float = 1.0  # time-dilation factor: times are emulated (real / tdf)

    @property
    def final_accuracy(self) -> float:
        """Test accuracy after the last epoch."""
        return self.history[-1].test_accuracy

    @property
    def faithful(self) -> bool | None:
        """The fidelity guard's verdict on a run over an emulated network (None: the run had
        none, e.g. on loopback)."""
        verdict = self.network.get("fidelity")
        return bool(verdict["faithful"]) if isinstance(verdict, dict) else None

    def time_to_accuracy(self, target: float) -> float | None:
        """Training time (s) at the end of the first epoch whose test accuracy reached
        ``target`` (None: never)."""
        return next((r.wall_s for r in self.history[1:] if r.test_accuracy >= target), None)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of the run."""
        return {
            "collective": self.config.collective,
            "implementation": self.implementation,
            "transport": self.transport,
            "config": self.config.as_dict(),
            "final_accuracy": self.final_accuracy,
            "final_test_loss": self.history[-1].test_loss,
            "train_wall_s": self.history[-1].wall_s,
            "train_wall_real_s": self.history[-1].wall_s * self.tdf,
            "tdf": self.tdf,
            "models_identical_on_all_ranks": self.consistent,
            "fixed_point_retries": self.retries,
            "payload_sent_per_rank": list(self.payload_sent_per_rank),
            "history": [asdict(r) for r in self.history],
            "cache_all_ranks_per_epoch": [c.as_dict() for c in self.cache_per_epoch],
            **({"network": self.network} if self.network else {}),
        }


def combine(config: TrainConfig, results: list[RankResult], transport: str) -> Experiment:
    """One :class:`Experiment` from every rank's result (cache statistics summed)."""
    caches = [sum(epochs, CacheStats()) for epochs in zip(*(r.cache_per_epoch for r in results),
                                                          strict=True)]
    return Experiment(
        config, results[0].collective, results[0].history,
        len({r.params_sha256 for r in results}) == 1, caches,
        max(r.retries for r in results), transport,
        tuple(sum(e.payload_sent for e in r.history) for r in results),
        tdf=results[0].tdf,
    )


def run_loopback(
    config: TrainConfig,
    workdir: str | Path,
    server_latency_s: float = 0.0,
    timeout: float = 60.0,
    clock: VirtualClock = REAL_TIME,
) -> Experiment:
    """Run ``config`` as ``config.workers`` threads on 127.0.0.1 with an in-process data server;
    per-rank disk caches go to ``workdir/rank<R>``. ``clock`` times every part (emulated
    seconds: ``server_latency_s``, ``timeout`` and the results)."""
    split = load_digits_split(config.num_shards)
    workdir = Path(workdir)
    with DataServer(make_shards(split, config.num_shards), latency_s=server_latency_s,
                    clock=clock) as server:

        def work(comm: Communicator) -> RankResult:
            with ShardClient(server.address, timeout=timeout, clock=clock) as client:
                cache = MultiLevelCache(client.get, workdir / f"rank{comm.rank}",
                                        config.memory_cache_bytes, config.disk_cache_bytes,
                                        clock)
                return train_rank(comm, config, cache)

        results = run_ranks(config.workers, work, timeout=timeout, clock=clock)
    return combine(config, results, "loopback")
