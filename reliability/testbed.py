"""One running spine-leaf for the campaign's network cells, programmed like ``make run``.

Built on the experiment lifecycle (:class:`experiment.lifecycle.ExperimentNetwork`: start,
program, tear down, and its serving controller) and :func:`experiment.session.run_allreduce`.
The serving controller ``serve``-s in a thread (as ``ina-controller serve`` does) so that a
switch that restarts gets its pipeline, routes and job back; the cells stop it when they
need the serving controller to be a separate process instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import JobError
from controller.jobs import JobRequest
from controller.state import load_state
from experiment.lifecycle import ExperimentNetwork, StartOptions, open_controller
from experiment.matrix import program_for
from experiment.serving import EventLog, TolerantReads
from experiment.session import ExperimentOptions, run_allreduce
from reliability.results import JobTally
from topo.nodes import free_port_base
from topo.rundir import RunDir
from topo.topologies import SpineLeafTopo
from workloads.innetwork import AGG_MAX_RTO

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 60.0  # a pipeline push makes the built-in switch compile the program
JOB = "soak"
# What a worker needs before its first packet: Python and numpy imports, the plan, the
# barrier (a one-element all-reduce). Measured 2-6 s on the loaded 2-core machine; the hang
# bound allows 5 times the worst.
START_ALLOWANCE_S = 30.0
# A run may need this many times the ideal link time before it counts as a hang.
LINK_TIME_FACTOR = 40.0
# Under loss the time goes to retransmission timeouts, not to the link: a worker's packet and
# its result cross up to LOSSY_HOPS lossy link directions, so a packet needs (1 - p)^-6 - 1
# retransmissions on average, each after up to AGG_MAX_RTO. The bound allows LOSS_FACTOR
# times that sum of timeouts (measured on 8192 float32: median 0.3-0.4 of it at 1-10 %).
# Scaling the link time by (1 + 100 p) instead was too tight for small tensors, where the
# start allowance hid it: 2048 float32 at 10 % took 41.5 s (641 drops) against a 39.1 s bound.
LOSSY_HOPS = 6
LOSS_FACTOR = 3.0


@dataclass(frozen=True)
class TestbedConfig:
    """Which network and which tensors."""

    __test__ = False

    prefix: str = "rk"
    grpc_port: int | None = None  # None: a free block
    spines: int = 2
    leaves: int = 2
    hosts_per_leaf: int = 2
    bw_mbit: float = 10.0
    elements: int = 8192  # float32 per worker and all-reduce
    credits: int = 2
    slots: int = 64
    target: str = "softswitch"  # the switches' target (softswitch or bmv2)
    # elements per aggregation packet: small packets, so an all-reduce of a few KiB is still
    # many packets and messages (the campaign's timers and run times were measured at 32)
    elems: int = 32


def free_port_block(count: int, start: int = 27000) -> int:
    """The first port of ``count`` consecutive free loopback TCP ports for the campaign's
    switches (:func:`topo.nodes.free_port_base`)."""
    return free_port_base(count, start)


def ideal_seconds(elements: int, elems: int, bw_mbit: float) -> float:
    """The time one worker's tensor takes over its host link at the shaped rate, up and back
    (aggregation packets of ``elems`` int32 with Ethernet, IPv4, UDP, BTH, tag and ICRC)."""
    packets = -(-elements // elems)
    frame = 14 + 20 + 8 + 12 + 16 + 4 * elems + 4
    return 2 * packets * frame * 8 / (bw_mbit * 1e6)


def expected_timeouts(elements: int, elems: int, loss: float) -> float:
    """Retransmission timeouts one worker's tensor costs on average with ``loss`` on every
    link direction (each packet's round crosses LOSSY_HOPS of them)."""
    packets = -(-elements // elems)
    return packets * ((1.0 - loss) ** -LOSSY_HOPS - 1.0)


def hang_bound(elements: int, elems: int, bw_mbit: float, loss: float = 0.0) -> float:
    """A run not done within this is a hang: the start allowance, LINK_TIME_FACTOR times
    the ideal link time, and under ``loss`` on every link LOSS_FACTOR times the expected
    retransmission timeouts at their upper bound."""
    return (START_ALLOWANCE_S + LINK_TIME_FACTOR * ideal_seconds(elements, elems, bw_mbit)
            + LOSS_FACTOR * expected_timeouts(elements, elems, loss) * AGG_MAX_RTO)


class Testbed:
    """The network, the programming controller, the job and the serving controller."""

    def __init__(self, config: TestbedConfig, runs_root: Path) -> None:
        self.config = config
        self.runs_root = runs_root
        self.lab: ExperimentNetwork | None = None
        self.network: Any = None
        self.controller: Any = None
        self.plan: dict[str, Any] = {}  # the job of the current (or last) all-reduce
        self.plan_path = Path()
        self.results = Path()
        self.jobs_created = 0
        self.pipeline_pushes = 0  # forced, to get job ids back (see new_job)
        self.events = EventLog()
        self.elems = 0

    # ------------------------------------------------------------------ life cycle
    def start(self) -> Testbed:
        """Starts and programs the network and the serving controller; a failure stops
        everything started and is raised."""
        cfg = self.config
        nswitches = cfg.spines + cfg.leaves
        base = cfg.grpc_port or free_port_block(nswitches)
        topo = SpineLeafTopo(spines=cfg.spines, leaves=cfg.leaves,
                             hosts_per_leaf=cfg.hosts_per_leaf, host_bw=cfg.bw_mbit,
                             fabric_bw=cfg.bw_mbit, name_prefix=cfg.prefix, grpc_base_port=base)
        rundir = RunDir.create(root=self.runs_root)
        self.elems = cfg.elems
        program = program_for(cfg.elems, Path(rundir.path) / "build")
        lab = self.lab = ExperimentNetwork(topo, cfg.target, rundir, program,
                                           start=StartOptions(progress=False),
                                           rpc_timeout_s=RPC_TIMEOUT_S)
        self.events = lab.events
        try:
            lab.start()  # the network, then the pipeline and the routes
            self.network, self.controller = lab.network, lab.controller
            self.results = lab.rundir / "results"
            self.results.mkdir(parents=True, exist_ok=True)
            self.start_serving()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def rundir(self) -> Path:
        return Path(self.network.rundir.path)

    def _running(self) -> ExperimentNetwork:
        if self.lab is None:
            raise RuntimeError("the testbed is not running")
        return self.lab

    def popen(self, host: str, argv: list[str]) -> subprocess.Popen[bytes]:
        """Starts ``argv`` in ``host``'s namespace (killed, at the latest, when the testbed
        stops; :meth:`experiment.lifecycle.ExperimentNetwork.popen`)."""
        return self._running().popen(host, argv)

    @property
    def server(self) -> Any:
        """The controller serving in this process; None while it does not."""
        serving = self.lab.serving if self.lab is not None else None
        return serving.controller if serving is not None else None

    def start_serving(self) -> None:
        """A controller that ``serve``-s in this process (primary: the newest election id)."""
        if self.lab is not None:
            self.lab.start_serving(thread_name="soak-serve")

    def stop_serving(self) -> None:
        if self.lab is not None:
            self.lab.stop_serving()

    def stop(self) -> None:
        """Everything down; idempotent, never raises."""
        lab, self.lab = self.lab, None
        self.network = self.controller = None
        if lab is not None:
            lab.stop()

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ jobs
    @contextlib.contextmanager
    def _primary(self) -> Iterator[Any]:
        """A primary controller for a change: the serving one, else a new one (a fresh,
        highest election id, as each `ina-controller` command is)."""
        if self.server is not None:
            yield self.server
            return
        ctl = open_controller(self.network, RPC_TIMEOUT_S)
        try:
            yield ctl
        finally:
            ctl.close()

    def new_job(self) -> dict[str, Any]:
        """A fresh job over every host for the next all-reduce; the previous one is deleted.

        A job serves one run of its workers: message numbers start at 0 in each run, and
        the switches' registers still hold the previous run's messages, so a second run of
        the same job would be dropped as stale. Job ids are not reused while the switches'
        registers hold their state; when all are used, the pipeline is pushed again (which
        zeroes the registers), as the controller's error says to."""
        hosts = tuple(h.name for h in self.network.topology.hosts)
        cfg = self.config
        self.jobs_created += 1
        name = f"{JOB}{self.jobs_created}"
        with self._primary() as ctl:
            previous, self.plan = self.plan, {}
            if previous:
                try:
                    ctl.delete_job(previous["name"])
                except JobError:
                    # already gone: an earlier call deleted it and then failed to create
                    # the next (its controller was killed); every later call failed here
                    log.info("job %s was already deleted", previous["name"])
            request = JobRequest(name, hosts, credits=cfg.credits, slots=cfg.slots,
                                 workers_per_host=1)
            try:
                plan = ctl.create_job(request)
            except JobError as exc:
                if "no free job id" not in str(exc):
                    raise
                log.info("job ids used up: pushing the pipeline again")
                ctl.push_pipeline(force=True)
                self.pipeline_pushes += 1
                plan = ctl.create_job(request)
        # the reading controller's record must know the job (counters by job name)
        self.controller.state = load_state(self.rundir)
        self.plan = plan.to_dict()
        self.plan_path = self.results / f"job-{name}.json"
        self.plan_path.write_text(json.dumps(self.plan, indent=1, sort_keys=True) + "\n")
        return self.plan

    def options(self, timeout_s: float, elements: int | None = None) -> Any:
        return ExperimentOptions(elements=elements or self.config.elements,
                                 algorithms=("innetwork",), job_name=JOB,
                                 credits=self.config.credits, slots=self.config.slots,
                                 elems=self.elems, timeout_s=timeout_s, measure_seconds=0.0)

    def bound(self, elements: int | None = None, loss: float = 0.0) -> float:
        return hang_bound(elements or self.config.elements, self.elems, self.config.bw_mbit,
                          loss)

    def allreduce(self, tally: JobTally, elements: int | None = None,
                  timeout_s: float | None = None, fresh_job: bool = True) -> tuple[str, Any]:
        """One in-network all-reduce over every host (a new job), checked against the exact
        sum and counted in ``tally``; the workers give up at the hang bound (or
        ``timeout_s``)."""
        timeout = timeout_s if timeout_s is not None else tally.bound_s
        if fresh_job or not self.plan:
            self.new_job()
        run = run_allreduce(self._running(), TolerantReads(self.controller), self.plan,
                            "innetwork", self.options(timeout, elements), self.plan_path)
        return tally.add(run), run

    # ------------------------------------------------------------------ counters
    def switch_counters(self, name: str) -> dict[str, Any]:
        return TolerantReads(self.controller).switch_counters(name)

    def fault_drops(self) -> int:
        total = 0
        for name in self.controller.switches:
            drops = self.switch_counters(name)["drops"]
            total += sum(n for k, n in drops.items() if k.endswith(":fault"))
        return total

    def job_switches(self) -> list[tuple[str, str]]:
        """(switch, role) of every switch in a job's tree (every job gets the same tree)."""
        plan = self.plan or self.new_job()
        return [(name, part.get("role", "?")) for name, part in plan["parts"].items()]

    def wait_recovered(self, name: str, seen: int, timeout_s: float) -> bool:
        """True once the serving controller reported ``name`` recovered after event ``seen``."""
        return self.events.wait_for(f"{name}: recovered", seen, timeout_s) is not None
