"""Training on the emulated spine-leaf network: start it, program it, run jobs, take it down.

:class:`TrainingTestbed` is what ``python -m train compare --topo spineleaf`` (and
``make train``) uses, and what the Mininet tests share as one module-scoped network:

1. :func:`topo.network.start_network` brings up a spine-leaf of P4 switches running
   ``p4src/netreduce.p4`` (built-in target by default) with the optional data-server host
   (``SpineLeafTopo(data_server=True)``: host ``data`` on the last leaf, ``gpus = 0``);
2. the controller (:class:`controller.fabric.Controller`) pushes the pipeline and the IPv4
   routes (ECMP over the spines);
3. every training run starts the data server on the data host and one rank per worker host
   inside the hosts' namespaces (:mod:`train.launch`), so gradients and shards cross the
   emulated links; an ``inswitch`` run first gets a fresh NetReduce job over the worker
   hosts from the controller (a job's message numbers cannot be reused by a new process),
   and its plan goes to the ranks as JSON;
4. around every run the switches' port counters and their processes' CPU time are read,
   giving the bytes each link carried (the data host's link alone is the shard traffic)
   and how busy each switch was;
5. :meth:`TrainingTestbed.interference` times a gradient-sized ring all-reduce on the worker
   hosts with and without shards streaming from the data host over the same links.

Starting, programming, tracking the processes, measuring and tearing down are the experiment
lifecycle's (:class:`experiment.lifecycle.ExperimentNetwork`); this module adds what training
needs. Leaving the ``with`` block stops every process and switch and removes the interfaces.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from algorithms import registry
from experiment.fidelity import Monitor, RunLoad, Verdict, judge, link_utilization, softnet_drops
from experiment.lifecycle import ExperimentNetwork, Snapshot, StartOptions, Window
from topo.errors import TopoError
from topo.measure import process_pids
from train.errors import TrainError
from train.launch import (
    LaunchError,
    LaunchPlan,
    execute,
    execute_raw,
    interference_plan,
    plan_from_rundir,
)
from train.report import write_json
from train.trainer import Experiment, RankResult, TrainConfig, combine

if TYPE_CHECKING:
    from topo.topologies import SpineLeafTopo

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
PROGRAM = REPO_ROOT / "p4src" / "netreduce.p4"
JOB_PREFIX = "train"


class TestbedError(TrainError, RuntimeError):
    """The emulated network could not be started or programmed."""


@dataclass(frozen=True)
class TestbedOptions:
    """The spine-leaf to train on; the defaults are ``make train``'s network."""

    __test__ = False  # not a pytest test class

    spines: int = 2
    leaves: int = 2
    hosts_per_leaf: int = 2
    bw_mbit: float = 10.0
    delay_s: float | None = None  # every link's propagation delay (None: none)
    target: str = "softswitch"
    # the built-in target's packet engine (python, c); None: make run's (the C data path
    # unless $SOFTSWITCH_ENGINE says otherwise), so training runs on what make run measures
    engine: str | None = None
    program: Path = PROGRAM
    rundir: Path | None = None
    name_prefix: str = ""
    grpc_base_port: int | None = None  # None: topo's default (9559)
    credits: int = 2
    slots: int = 64
    timeout_s: float = 600.0  # per training run (emulated seconds)
    # time-dilation factor: every process started gets it (--tdf), and the network's links
    # carry bw/tdf (its switches' clocks run tdf times slower too)
    tdf: float = 1.0
    # the calibrated fixed real-time cost of one collective on the job's path (s; 0:
    # unknown): the guard's latency check, as make run's (experiment.calibrate.fixed_cost)
    overhead_s: float = 0.0

    def topology(self) -> SpineLeafTopo:
        """The spine-leaf these options describe (not started); TopoError when they are
        not a valid one."""
        from topo.topologies import GRPC_BASE_PORT, SpineLeafTopo

        delay = f"{self.delay_s * 1e6:.12g}us" if self.delay_s else None
        return SpineLeafTopo(spines=self.spines, leaves=self.leaves,
                             hosts_per_leaf=self.hosts_per_leaf, host_bw=self.bw_mbit,
                             delay=delay, data_server=True, name_prefix=self.name_prefix,
                             grpc_base_port=(GRPC_BASE_PORT if self.grpc_base_port is None
                                             else self.grpc_base_port))

    def switch_engine(self) -> str | None:
        """The packet engine the switches run (make run's default when none is given)."""
        from experiment.run import run_engine

        return run_engine(self.engine, self.target)


def _sum_links(usage: list[Any]) -> dict[str, int]:
    out = {"host": 0, "fabric": 0}
    for u in usage:
        out[u.kind] = out.get(u.kind, 0) + u.tx_bytes + u.rx_bytes
    return out


class TrainingTestbed:
    """A running, programmed spine-leaf with a data-server host (a context manager)."""

    __test__ = False

    def __init__(self, options: TestbedOptions | None = None) -> None:
        self.options = options or TestbedOptions()
        self.lab: ExperimentNetwork | None = None
        self.data_host = ""
        self._jobs = 0
        self._job_key: str | None = None

    # ------------------------------------------------------------------ life cycle
    def __enter__(self) -> TrainingTestbed:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start and program the network (needs root); raises :class:`TestbedError`."""
        from controller.errors import ControllerError
        from liveview import port_or_announce

        o = self.options
        try:
            topo = o.topology()
            self.data_host = topo.data_host or ""
            self.lab = ExperimentNetwork(topo, o.target, o.rundir, o.program,
                                         start=StartOptions(tdf=o.tdf,
                                                            engine=o.switch_engine()),
                                         live_port=port_or_announce(default=None)).start()
        except TopoError as exc:
            raise TestbedError(f"cannot start the network: {exc}") from exc
        except ControllerError as exc:
            raise TestbedError(f"cannot program the network: {exc}") from exc
        log.info("spine-leaf up in %s: workers %s, data server on %s", self.rundir,
                 ", ".join(self.worker_hosts), self.data_host)

    def stop(self) -> None:
        """Stop every process, close the controller, stop the network and remove its
        interfaces (idempotent)."""
        if self.lab is not None:
            lab, self.lab = self.lab, None
            lab.stop()

    # ------------------------------------------------------------------ queries
    def _lab(self) -> ExperimentNetwork:
        if self.lab is None:
            raise TestbedError("the testbed is not running")
        return self.lab

    @property
    def network(self) -> Any:
        """The running Mininet network (:class:`topo.network.Network`)."""
        return self._lab().network

    @property
    def controller(self) -> Any:
        return self._lab().controller

    @property
    def live(self) -> Any:
        """The live view (liveview.LiveServer) when $INA_LIVE_PORT is set."""
        return self._lab().live

    @property
    def rundir(self) -> Path:
        return self._lab().rundir

    @property
    def topology(self) -> Any:
        return self._lab().topology

    @property
    def worker_hosts(self) -> list[str]:
        """Hosts that run ranks (every host but the data server)."""
        return [h.name for h in self.topology.hosts if h.gpus > 0]

    def snapshot(self) -> Snapshot:
        """Port counters and switch CPU now (:meth:`ExperimentNetwork.snapshot`)."""
        return self._lab().snapshot()

    def link_bytes(self, window: Window) -> dict[str, Any]:
        """What the links carried in ``window``: bytes (both directions) on host links, on
        fabric links, and on the data host's link alone (the shard traffic)."""
        usage = window.links(self.topology, 1.0)
        data = next(h for h in self.topology.hosts if h.name == self.data_host)
        data_link = sum(u.tx_bytes + u.rx_bytes for u in usage
                        if (u.switch, u.port) == (data.switch, data.switch_port))
        sums = _sum_links(usage)
        return {"host_links_bytes": sums["host"], "fabric_links_bytes": sums["fabric"],
                "data_link_bytes": data_link,
                "per_port": {f"{u.switch}:{u.port}({u.peer})": u.tx_bytes + u.rx_bytes
                             for u in usage}}

    # ------------------------------------------------------------------ jobs
    def new_job(self, path: Path) -> Path:
        """A fresh NetReduce job over the worker hosts (the previous training job is deleted
        first); its plan (``job show --json``) is written to ``path``."""
        from controller.errors import ControllerError
        from controller.jobs import JobRequest

        try:
            if self._job_key is not None:
                self.controller.delete_job(self._job_key)
                self._job_key = None
            self._jobs += 1
            name = f"{JOB_PREFIX}{self._jobs}"
            plan = self.controller.create_job(JobRequest(
                name, tuple(self.worker_hosts), credits=self.options.credits,
                slots=self.options.slots, workers_per_host=1))
        except ControllerError as exc:
            raise TestbedError(f"controller: cannot create the training job: {exc}") from exc
        self._job_key = name
        write_json(path, plan.to_dict())
        return path

    def _plan(self, workdir: Path, config_path: Path, num_shards: int, timeout: float,
              job_plan: Path | None) -> LaunchPlan:
        return plan_from_rundir(self.rundir, config_path, workdir, num_shards, self.data_host,
                                timeout=timeout, job_plan=job_plan, tdf=self.options.tdf,
                                agg_timers=self.agent_timers())

    def agent_timers(self) -> tuple[float, float] | None:
        """The in-network agents' timer bounds on a dilated or delayed network (``make
        run``'s: the target's real-time bounds shrunk by the TDF, never below the emulated
        round trip); None at real time without delays (the agents' defaults)."""
        from experiment.dilation import longest_rtt, timer_bounds

        o = self.options
        if o.tdf == 1 and not o.delay_s:
            return None
        return timer_bounds(o.target, o.tdf, longest_rtt(o.topology().spec))

    def run(self, config: TrainConfig, workdir: Path, timeout: float | None = None
            ) -> Experiment:
        """Train ``config`` (its ``workers`` is set to the number of worker hosts) with cold
        caches; ``inswitch`` goes through the switches with a fresh job. Unless the config
        says otherwise, every host is one machine with one rank (MSTopK and the hybrid's
        sparse phase exchange top-k between all hosts) and the hybrid's 2D torus has one row
        per rack (leaf). The experiment's ``network`` records what the links carried."""
        timeout = timeout if timeout is not None else self.options.timeout_s
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        for old in workdir.glob("cache-rank*"):
            shutil.rmtree(old)
        config = dataclasses.replace(config, workers=len(self.worker_hosts))
        hybrid = registry.training_algorithm(config.collective).name == "hybrid"
        ex = config.exchange
        if ex.ranks_per_host is None:
            # Every emulated host is a machine with one rank: MSTopK exchanges sparse
            # between all of them; the hybrid's dense 2D torus has one row per rack (leaf).
            per_host = self.options.hosts_per_leaf if hybrid else 1
            ex = dataclasses.replace(ex, ranks_per_host=per_host)
            if hybrid and ex.sparse_ranks_per_host is None:
                ex = dataclasses.replace(ex, sparse_ranks_per_host=1)
            config = dataclasses.replace(config, exchange=ex)
        job_plan = None
        if registry.training_exchange(config.collective).switch:
            job_plan = self.new_job(workdir / "job.json")
        config_path = write_json(workdir / "config.json", config.as_dict())
        plan = self._plan(workdir, config_path, config.num_shards, timeout, job_plan)
        before, drops0 = self.snapshot(), softnet_drops()
        # the switches (and delay nodes), sampled while the ranks run: a burst that
        # saturated one shows even when its mean over the run is low
        monitor = Monitor(process_pids(self.network)).start()
        try:
            results = execute(plan, timeout, workdir / "logs", self._lab().track)
        finally:
            peaks = monitor.stop()
        window = Window(before, self.snapshot())
        verdict = self._fidelity(window, peaks, softnet_drops() - drops0, results)
        exp = combine(config, results, "mininet")
        log.info("%s: %s", config.collective, verdict.line())
        return dataclasses.replace(exp, network={
            "topology": "spineleaf", "rundir": str(self.rundir),
            "worker_hosts": self.worker_hosts, "data_host": self.data_host,
            "link_bw_mbit": self.options.bw_mbit, "delay_s": self.options.delay_s or 0.0,
            "target": self.topology.target, "engine": self.options.switch_engine(),
            "tdf": self.options.tdf,
            "job": json.loads(job_plan.read_text())["name"] if job_plan else None,
            "switch_cpu_s": {n: round(s, 2) for n, s in window.switch_cpu_seconds.items()},
            "fidelity": {**verdict.to_dict(), "summary": verdict.line()},
            **self.link_bytes(window)})

    def _fidelity(self, window: Window, peaks: dict[str, float], drops: int,
                  results: list[RankResult]) -> Verdict:
        """The fidelity guard's verdict on one training run (``make run``'s checks): the
        switches' CPU over the run and at its peaks, every rank's process over its own
        training, the links against their rates and the kernel's backlog drops."""
        wall = window.wall
        hosts = {f"{h}#{r.rank}": r.cores for h, r in zip(self.worker_hosts, results,
                                                           strict=False)}
        emulated = wall / self.options.tdf if wall > 0 else None
        share = fixed_cost_share(self.options.overhead_s, self.options.tdf, results)
        load = RunLoad(window.switch_cpu, peaks, hosts, os.cpu_count() or 1,
                       link_utilization(window.links(self.topology, emulated)), drops,
                       fixed_cost_share=share)
        return judge(load, self.options.tdf)

    def interference(self, workdir: Path, elements: int, repeats: int = 5,
                     num_shards: int = 32, timeout: float = 300.0) -> dict[str, Any]:
        """Ring all-reduce of ``elements`` float32 on the worker hosts, quiet and while every
        rank streams shards from the data host without caches; per-rank results, the medians
        over ranks, the slowdown and what the data host's link carried."""
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        base = self._plan(workdir, workdir / "unused-config.json", num_shards, timeout, None)
        plan = interference_plan(base, workdir, elements, repeats, num_shards, timeout)
        before = self.snapshot()
        ranks = execute_raw(plan, timeout, workdir / "logs", self._lab().track)
        window = Window(before, self.snapshot())
        quiet = statistics.median(_number(r["quiet_s"]) for r in ranks)
        loaded = statistics.median(_number(r["loaded_s"]) for r in ranks)
        links = self.link_bytes(window)
        links.pop("per_port")
        return {
            "collective": "fp32-ring", "elements": elements, "repeats": repeats,
            "worker_hosts": self.worker_hosts, "data_host": self.data_host,
            "link_bw_mbit": self.options.bw_mbit,
            "quiet_allreduce_s": quiet, "loaded_allreduce_s": loaded, "tdf": self.options.tdf,
            "slowdown": loaded / quiet if quiet > 0 else None,
            "data_bytes_streamed": sum(int(_number(r["data_bytes"])) for r in ranks),
            **links, "ranks": ranks,
        }


def fixed_cost_share(overhead_s: float, tdf: float, results: list[RankResult]) -> float | None:
    """The machine's fixed real cost of one exchange, over the TDF, as a share of one
    training step's exchange (rank 0's mean; the guard's latency check); None when it is
    not known (no calibration) or nothing was exchanged."""
    if overhead_s <= 0 or not results:
        return None
    steps = sum(r.steps for r in results[0].history)
    comm = sum(r.comm_s for r in results[0].history)
    return overhead_s / tdf / (comm / steps) if steps and comm > 0 else None


def _number(value: object) -> float:
    """A number from a rank's JSON document (TestbedError when it is none)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TestbedError(f"a rank reported {value!r} where a number belongs")


__all__ = ["LaunchError", "TestbedError", "TestbedOptions", "TrainingTestbed"]
