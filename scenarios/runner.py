"""Runs a :class:`~scenarios.model.Scenario` on an emulated network and judges it.

Built on the experiment lifecycle (:class:`experiment.lifecycle.ExperimentNetwork`: the
network, the live view, the fabric programmed through the controller, teardown) and
``experiment.session``: each job's all-reduces run with
:func:`experiment.session.run_allreduce` (hosts' processes, results checked against the
exact sum, link counters, switch CPU). What this module adds:

* the lifecycle's serving controller (``reconnect``): it is primary, applies the faults and
  restores a restarted switch's pipeline, routes and jobs, as ``ina-controller serve`` does;
* a timeline thread that applies each fault at its time (seconds after the first job starts);
* drop counters by reason summed over switch restarts (a restart zeroes them);
* the assertions, each a test case; :class:`ScenarioReport` feeds :mod:`scenarios.junit`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import ControllerError
from controller.jobs import JobRequest
from experiment.lifecycle import ExperimentNetwork, StartOptions
from experiment.matrix import program_for
from experiment.serving import EventLog, TolerantReads
from experiment.session import ExperimentOptions, run_allreduce
from scenarios.model import AssertionSpec, FaultSpec, JobSpec, Scenario, build_topo
from topo.errors import TopoError
from topo.rundir import RunDir
from vtime import VirtualClock, format_rate

log = logging.getLogger(__name__)

RECOVERY_TIMEOUT_S = 60.0
RPC_TIMEOUT_S = 60.0
READ_RETRIES = 5
READ_PAUSE_S = 0.2


@dataclass
class Case:
    """One test case of the report (a JUnit ``testcase``)."""

    group: str  # "setup" | "jobs" | "faults" | "assertions"
    name: str
    seconds: float = 0.0
    failure: str | None = None  # an assertion that did not hold
    error: str | None = None  # something that could not be done
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None and self.error is None


@dataclass
class ScenarioReport:
    scenario: Scenario
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0
    rundir: str | None = None
    started: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(c.ok for c in self.cases)


@dataclass(frozen=True)
class RunOptions:
    """How to run (not what): run directory, names and ports that must not collide."""

    runs_root: Path | None = None  # run directories under ROOT/<scenario>/ (default run/)
    name_prefix: str = ""
    grpc_base_port: int | None = None
    live_port: int | None = None  # None: no live view
    progress: bool = False
    announce: Callable[[str], None] | None = None


class DropTally:
    """Drop counters by reason, per switch and per (job, switch), kept across restarts:
    before a switch restarts its counts are carried, since the new process starts at 0."""

    def __init__(self) -> None:
        self.carried_switch: dict[tuple[str, str], int] = {}
        self.carried_job: dict[tuple[str, str, str], int] = {}

    @staticmethod
    def read(controller: Any, only: str | None = None
             ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        """({(switch, reason): n}, {(job, switch, reason): n}) as the switches hold them."""
        switch: dict[tuple[str, str], int] = {}
        for name in controller.switches:
            if only is not None and name != only:
                continue
            for key, n in controller.switch_counters(name)["drops"].items():
                reason = key.split(":", 1)[1]
                switch[(name, reason)] = switch.get((name, reason), 0) + n
        jobs: dict[tuple[str, str, str], int] = {}
        for row in controller.job_counters():
            if only is not None and row["switch"] != only:
                continue
            for reason, n in row["drops"].items():
                jobs[(row["job"], row["switch"], reason)] = n
        return switch, jobs

    def carry(self, controller: Any, name: str) -> None:
        switch, jobs = self.read(controller, only=name)
        for key, n in switch.items():
            self.carried_switch[key] = self.carried_switch.get(key, 0) + n
        for jkey, n in jobs.items():
            self.carried_job[jkey] = self.carried_job.get(jkey, 0) + n

    def totals(self, controller: Any
               ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        switch, jobs = self.read(controller)
        for key, n in self.carried_switch.items():
            switch[key] = switch.get(key, 0) + n
        for jkey, n in self.carried_job.items():
            jobs[jkey] = jobs.get(jkey, 0) + n
        return switch, jobs


class _Timeline:
    """Applies the faults at their times in a thread; each fault becomes a case."""

    def __init__(self, scenario: Scenario, opts: RunOptions, network: Any, controller: Any,
                 events: EventLog, gate: threading.Lock, tally: DropTally) -> None:
        self.scenario, self.opts, self.network = scenario, opts, network
        self.controller, self.events, self.gate, self.tally = controller, events, gate, tally
        self.cases: list[Case] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="scenario-faults", daemon=True)
        self.clock = VirtualClock(scenario.tdf)  # fault times are emulated seconds
        self.t0 = 0.0

    def start(self) -> None:
        self.t0 = self.clock.now()
        self.thread.start()

    def join(self) -> None:
        self.thread.join()

    def _run(self) -> None:
        for fault in self.scenario.faults:
            if self.stop.wait(max(0.0, self.clock.real(self.t0 + fault.at - self.clock.now()))):
                self.cases.append(Case("faults", fault.describe(),
                                       error="not applied: the scenario ended first"))
                continue
            t = self.clock.now()
            case = Case("faults", fault.describe())
            try:
                case.output = self._apply(fault)
            except Exception as exc:  # reported in the case, the scenario goes on
                log.debug("fault failed", exc_info=True)
                case.error = f"{type(exc).__name__}: {exc}"
            case.seconds = self.clock.now() - t
            self.cases.append(case)

    def _apply(self, fault: FaultSpec) -> str:
        name = self.opts.name_prefix + fault.switch if fault.switch else None
        late = self.clock.now() - self.t0 - fault.at
        when = f"applied at t={fault.at + late:.2f} s"
        if fault.action == "loss":
            assert name is not None and fault.port is not None
            self.controller.set_fault(name, fault.port, fault.rate, fault.direction)
            return f"{when}: {name} port {fault.port} drops {fault.rate:g} ({fault.direction})"
        if fault.action == "clear":
            n = self.controller.clear_faults(name, fault.port)
            return f"{when}: {n} loss rule(s) removed"
        assert name is not None
        sw = self.network.node(name)
        with self.gate:
            self.tally.carry(self.controller, name)
            seen = len(self.events)
            sw.stop_process()
            sw.start()
            sw.wait_ready()
            # the restart and the controller's recovery run in real time (processes, RPCs)
            started = time.monotonic()
            recovered = self.events.wait_for(f"{name}: recovered", seen, RECOVERY_TIMEOUT_S)
            if recovered is None:
                raise RuntimeError(f"switch {name} restarted (pid {sw.proc.pid}) but the "
                                   f"controller did not restore it within "
                                   f"{RECOVERY_TIMEOUT_S:g} s")
        return (f"{when}: {name} restarted as pid {sw.proc.pid}; "
                f"{recovered} {time.monotonic() - started:.2f} s after it was ready")


def _program(scenario: Scenario, rundir: Path | None) -> Path:
    return program_for(scenario.elems, (rundir or Path("build")) / "program")


def _job_options(scenario: Scenario, job: JobSpec, index: int) -> Any:
    return ExperimentOptions(elements=job.elements, algorithms=job.algorithms, job_name=job.name,
                             credits=job.credits, slots=job.slots, elems=scenario.elems,
                             iters=job.iters, timeout_s=min(120.0, scenario.timeout_s),
                             ring_port=5400 + 64 * index, measure_seconds=0.0,
                             tdf=scenario.tdf)


def _run_case(job: JobSpec, algo: str, run: Any) -> Case:
    name = f"{job.name} {algo} all-reduce ({job.elements} float32, {len(run.ranks)} workers)"
    case = Case("jobs", name, run.wall_seconds)
    lines = [f"time {run.seconds:.3f} s (slowest rank), exact {run.exact}"]
    lines += [f"rank {r.rank} on {r.host}: {r.seconds:.3f} s, {r.bytes_sent} bytes sent, "
              f"{r.retransmissions} retransmissions, exact {r.exact}"
              + (f", error: {r.error}" if r.error else "") for r in run.ranks]
    busy = run.busiest
    if busy is not None:
        lines.append(f"busiest link {busy.switch}:{busy.port} {format_rate(busy.bps)}")
    case.output = "\n".join(lines)
    broken = [e for e in run.errors if "differs from the exact sum" not in e]
    if broken:
        case.error = "; ".join(broken)
    return case


def run_scenario(scenario: Scenario, opts: RunOptions | None = None) -> ScenarioReport:
    """Starts the network, runs the jobs while the faults happen, evaluates the assertions;
    always takes the network down. Failures are in the report, never raised."""
    opts = opts or RunOptions()
    report = ScenarioReport(scenario)
    t_start = time.monotonic()
    setup = Case("setup", "start the network and program the fabric")
    report.cases.append(setup)
    try:
        topo = build_topo(scenario.topology, opts.name_prefix, opts.grpc_base_port)
        # a new directory each run: controller state from an earlier run must not leak in
        rundir = RunDir.create(root=opts.runs_root / scenario.name) if opts.runs_root else None
        program = _program(scenario, rundir.path if rundir else None)
        # started, then programmed: pipeline and routes, with generous RPC timeouts (a
        # pipeline push makes the built-in switch compile the program, which takes long on
        # a loaded CI machine)
        with ExperimentNetwork(topo, scenario.target, rundir, program,
                               start=StartOptions(progress=opts.progress, tdf=scenario.tdf),
                               live_port=opts.live_port, announce=opts.announce,
                               rpc_timeout_s=RPC_TIMEOUT_S) as lab:
            report.rundir = str(lab.rundir)
            _run_on(lab, scenario, opts, report, setup, t_start)
    except TopoError as exc:
        setup.error = str(exc)
    except ControllerError as exc:
        setup.error = f"controller: {exc}"
    except Exception as exc:  # a bug or an unexpected failure: reported, the network is down
        log.debug("scenario failed", exc_info=True)
        setup.error = f"unexpected {type(exc).__name__}: {exc}"
    if setup.error is not None:
        setup.seconds = setup.seconds or time.monotonic() - t_start
        for spec in scenario.assertions:
            report.cases.append(Case("assertions", f"{spec.source}: {spec.describe()}",
                                     error="not evaluated: the scenario did not run"))
    report.seconds = time.monotonic() - t_start
    return report


def _run_on(lab: ExperimentNetwork, scenario: Scenario, opts: RunOptions,
            report: ScenarioReport, setup: Case, t_start: float) -> None:
    prefix = opts.name_prefix
    rundir = lab.rundir
    results = rundir / "results"
    results.mkdir(parents=True, exist_ok=True)
    hosts = [h.name for h in lab.topology.hosts]
    controller = lab.controller
    plans: dict[str, tuple[dict[str, Any], Path]] = {}
    for job in scenario.jobs:
        members = tuple(prefix + h for h in job.hosts) if job.hosts else tuple(hosts)
        plan = controller.create_job(JobRequest(job.name, members, credits=job.credits,
                                                slots=job.slots, workers_per_host=1))
        path = results / f"job-{job.name}.json"
        path.write_text(json.dumps(plan.to_dict(), indent=1, sort_keys=True) + "\n")
        plans[job.name] = (plan.to_dict(), path)
    gate = threading.Lock()
    tally = DropTally()
    # opened after the jobs were created: the serving controller restores them
    server = lab.start_serving(thread_name="scenario-serve", join_timeout_s=5.0).controller
    timeline = _Timeline(scenario, opts, lab.network, server, lab.events, gate, tally)
    try:
        setup.seconds = time.monotonic() - t_start
        setup.output = (f"run directory {rundir}; jobs "
                        + ", ".join(f"{n} ({len(p['workers'])} workers)"
                                    for n, (p, _) in plans.items()))
        runs: dict[str, Any] = {}
        timeline.start()
        reads = TolerantReads(controller, gate, READ_RETRIES, READ_PAUSE_S)
        clock = timeline.clock
        deadline = timeline.t0 + scenario.timeout_s
        for index, job in enumerate(scenario.jobs):
            clock.sleep(timeline.t0 + job.start - clock.now())
            job_plan, path = plans[job.name]
            for algo in job.algorithms:
                if clock.now() > deadline:
                    report.cases.append(Case("jobs", f"{job.name} {algo} all-reduce",
                                             error=f"not run: the scenario's timeout "
                                             f"({scenario.timeout_s:g} s) passed"))
                    continue
                run = run_allreduce(lab, reads, job_plan, algo,
                                    _job_options(scenario, job, index), path)
                runs[f"{job.name}.{algo}"] = run
                report.cases.append(_run_case(job, algo, run))
        last = max((f.at for f in scenario.faults), default=0.0)
        if clock.now() - timeline.t0 < last:
            log.info("waiting for the faults up to t=%g s", last)
        timeline.join()
        report.cases.extend(timeline.cases)
        with gate:
            switch_drops, job_drops = tally.totals(server)
    finally:
        timeline.stop.set()
        lab.stop_serving()
    for spec in scenario.assertions:
        report.cases.append(evaluate(spec, runs, switch_drops, job_drops, prefix))


def evaluate(spec: AssertionSpec, runs: dict[str, Any],
             switch_drops: dict[tuple[str, str], int],
             job_drops: dict[tuple[str, str, str], int], prefix: str = "") -> Case:
    """One assertion against the runs (``JOB.ALGO`` -> AllreduceRun) and drop counts."""
    case = Case("assertions", f"{spec.source}: {spec.describe()}")
    if spec.kind == "exact":
        bad = []
        for key, run in sorted(runs.items()):
            if key.split(".")[0] in spec.jobs and not run.exact:
                bad.append(f"{key}: " + ("; ".join(run.errors) or "not exact"))
        missing = [j for j in spec.jobs if not any(k.split(".")[0] == j for k in runs)]
        bad += [f"{j}: did not run" for j in missing]
        if bad:
            case.failure = "results not exact: " + " | ".join(bad)
        else:
            case.output = "every rank's result equals the exact sum"
        return case
    if spec.kind in ("time_ratio", "max_seconds"):
        # the scenario parser requires these references for these kinds ("JOB.ALGO")
        refs = ([spec.numerator, spec.denominator] if spec.kind == "time_ratio"
                else [spec.run])
        keys = [k for k in refs if k is not None]
        missing = [k for k in keys if k not in runs or not runs[k].exact]
        if missing:
            case.failure = ("cannot measure: " + ", ".join(
                f"{k} {'did not run' if k not in runs else 'was not exact'}" for k in missing))
            return case
        if spec.kind == "time_ratio":
            num_key, den_key = keys
            num, den = runs[num_key].seconds, runs[den_key].seconds
            value = num / den if den > 0 else float("inf")
            shown = (f"{num_key} took {num:.3f} s, {den_key} {den:.3f} s: "
                     f"ratio {value:.3f}")
        else:
            (run_key,) = keys
            value = runs[run_key].seconds
            shown = f"{run_key} took {value:.3f} s"
        return _bounded(case, value, spec, shown)
    # drops
    if spec.job is not None:
        found = {(sw, r): n for (job, sw, r), n in job_drops.items() if job == spec.job}
    else:
        found = dict(switch_drops)
    hits = {sw: n for (sw, reason), n in found.items()
            if reason == spec.reason and (spec.switch is None or sw == prefix + spec.switch)}
    total = sum(hits.values())
    detail = ", ".join(f"{sw} {n}" for sw, n in sorted(hits.items()) if n) or "none"
    return _bounded(case, total, spec, f"{total} {spec.reason} drops ({detail})")


def _bounded(case: Case, value: float, spec: AssertionSpec, shown: str) -> Case:
    lo, hi = spec.minimum, spec.maximum
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        want = ("none" if spec.kind == "drops" and hi == 0 and lo is None
                else ("within " if lo is not None and hi is not None else "")
                + (f"[{lo:g}, {hi:g}]" if lo is not None and hi is not None
                   else f">= {lo:g}" if lo is not None else f"<= {hi:g}"))
        case.failure = f"expected {want}, got {value:.4g}: {shown}"
    else:
        case.output = shown
    return case
