"""Runs the campaign's cells in order and collects a :class:`CampaignResult`.

Sizes come from a :class:`Plan`: :data:`FULL` is the issue's campaign (`make soak`),
:data:`QUICK` the few-minute version the test suite runs. A cell that breaks is recorded
as a note and the campaign goes on; the network is always taken down."""

from __future__ import annotations

import logging
import os
import platform
import random
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from reliability import cells as cl
from reliability.results import CampaignResult
from reliability.teardown import TeardownPlan, teardown_cell
from reliability.testbed import Testbed, TestbedConfig

log = logging.getLogger(__name__)

CELLS = ("loss", "restart", "controller", "badinput", "teardown")


@dataclass(frozen=True)
class Plan:
    """How much of each cell."""

    losses: tuple[float, ...] = (0.01, 0.05, 0.10)
    reorder: float = 0.05  # a loss cell's size with this share held back instead (0: none)
    # the loss cells again on BMv2 (simple_switch_grpc), where it is installed
    bmv2: bool = True
    bmv2_timers: tuple[float | None, float | None] = (None, None)
    loss_runs: int = 10  # all-reduces per loss rate
    loss_elements: int | None = None  # float32 per worker under loss (None: the testbed's)
    # the loss cells' retransmission timer bounds (s; None: the target's)
    loss_timers: tuple[float | None, float | None] = (None, None)
    restarts: int = 20
    restart_elements: int = 32768  # a longer job, so a kill lands inside it
    controller_restarts: int = 20
    frames: int = 100_000
    frame_rate: float = 2500.0  # frames/s: below what the switch process takes in
    teardown: TeardownPlan = field(default_factory=TeardownPlan)
    testbed: TestbedConfig = field(default_factory=TestbedConfig)
    cells: tuple[str, ...] = CELLS
    parallel: bool = False  # the teardown runs beside the network cells

    def steps(self) -> int:
        """Progress-bar steps."""
        n = 0
        if "loss" in self.cells:
            cells = len(self.losses) + (1 if self.reorder else 0)
            n += cells * self.loss_runs * (2 if self.on_bmv2() else 1)
        if "restart" in self.cells:
            n += self.restarts
        if "controller" in self.cells:
            n += self.controller_restarts
        if "badinput" in self.cells:
            n += 3
        if "teardown" in self.cells:
            n += (self.teardown.interrupted or self.teardown.runs) + 1
        return n + 1 + int(self.on_bmv2())  # the networks' start

    def on_bmv2(self) -> bool:
        """The loss cells run on BMv2 too: asked for and installed."""
        return self.bmv2 and "loss" in self.cells and shutil.which("simple_switch_grpc") is not None


# The soak's spine-leaf: 50 Mbit/s links (the built-in switch's C engine keeps up with the
# loss cells' traffic; at 10 Mbit/s a window queued behind the host link stretched every
# round trip and with it the timers), jobs of 16 slots: messages of 8 packets, so a loss
# cell's 512 float32 (16 packets of 32) are two messages after the barrier's, and the two
# credits reuse slot copies (VERSION flips) inside every all-reduce.
SOAK_TESTBED = TestbedConfig(bw_mbit=50.0, slots=16)
# Timer bounds of the loss cells (s): on the emulated LAN a round trip through three built-in
# switches is a few ms, and a timeout sends one probe packet, so 10-50 ms (a RoCE NIC's
# local ACK timeout is configured in that range) instead of the jobs' 50-250 ms; BMv2 spends
# ~1.6 ms of its one ingress thread per aggregation packet (a window queued at a leaf: 50 ms,
# which the adaptive timer follows), so 20-150 ms there instead of make run's 0.5-1 s (tuned
# against spurious timeouts with the live view polling the switches, which the soak does not
# run). Measured, 10 % loss on BMv2: 1.77 s per all-reduce with 50-300 ms, 0.96 s with
# 20-150 ms, the same retransmissions per all-reduce (374).
LOSS_TIMERS = (0.01, 0.05)
BMV2_TIMERS = (0.02, 0.15)
# The campaign (`make soak`): 1,000 all-reduces per loss cell on both targets, the
# teardown runs beside the network cells. Estimated 80-100 min on the shared 2-core machine
# (from cells of 30-60 all-reduces each, 2026-12-06).
# The teardown runs until 50 were interrupted (half SIGINT, half SIGKILL; a run that ends
# before its signal is counted, leak-checked and does not count).
FULL = Plan(loss_runs=1000, loss_elements=512, loss_timers=LOSS_TIMERS, bmv2_timers=BMV2_TIMERS,
            testbed=SOAK_TESTBED, parallel=True,
            teardown=replace(TeardownPlan(), sigint=0.5, sigkill=0.5, interrupted=50))
# The test suite's (`--quick`): each kind of cell once, small, the built-in target only:
# of the loss rates the highest (the most retransmissions, timers and hang bounds), one
# controller restart (a second one exercised the same code: `make test` has 12 minutes);
# teardown runs at TDF 1 (the full campaign's calibrate, and may be interrupted doing so).
QUICK = Plan(losses=(0.10,), loss_runs=1, loss_elements=512, loss_timers=LOSS_TIMERS,
             bmv2=False, restarts=2, controller_restarts=1, frames=2000, frame_rate=1500.0,
             restart_elements=16384, testbed=SOAK_TESTBED,
             teardown=replace(TeardownPlan(), runs=3, experiment_every=3, tdf="1"))


def machine() -> str:
    """The machine line of the report: what it is and how busy it was at the start."""
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    busy = (": as many runnable tasks as cores or more, times are noisy" if load >= cores
            else "")
    return (f"{platform.node()}, {cores} cores, Linux {platform.release()}, "
            f"load average {load:.1f} at the start{busy}")


def run_campaign(plan: Plan, runs_root: Path, command: str, mode: str, seed: int,
                 tick: Callable[[str], None], parallel: bool = False) -> CampaignResult:
    """Every cell of ``plan`` in order (network cells on one spine-leaf, then teardown;
    with ``parallel`` the teardown runs beside the network cells, which saves time and
    loads the machine more)."""
    rng = random.Random(seed)
    result = CampaignResult(command=command, mode=mode,
                            started=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            machine=machine())
    t0 = time.monotonic()
    runs_root.mkdir(parents=True, exist_ok=True)
    network_cells = [c for c in plan.cells if c != "teardown"]
    teardown_thread = None
    if "teardown" in plan.cells and parallel:
        # its own prefix, ports and runs root: it may run beside the network cells
        teardown_thread = threading.Thread(target=_teardown, name="soak-teardown",
                                           args=(plan, runs_root, random.Random(seed + 1),
                                                 tick, result))
        teardown_thread.start()
    if network_cells:
        _network_cells(plan, network_cells, runs_root, rng, seed, tick, result)
    if plan.on_bmv2():
        _bmv2_loss_cells(plan, runs_root, tick, result)
    if teardown_thread is not None:
        teardown_thread.join()
    elif "teardown" in plan.cells:
        _teardown(plan, runs_root, rng, tick, result)
    result.seconds = time.monotonic() - t0
    return result


def _network_cells(plan: Plan, names: list[str], runs_root: Path, rng: random.Random, seed: int,
                   tick: Callable[[str], None], result: CampaignResult) -> None:
    """The network cells in order on one spine-leaf; a cell that breaks off, or a testbed
    that cannot start, is a note in the report and the campaign goes on."""
    tick("starting the spine-leaf and programming it")
    try:
        with Testbed(plan.testbed, runs_root / "testbed") as bed:
            for name in names:
                try:
                    _network_cell(name, bed, plan, rng, seed, tick, result)
                except Exception as exc:  # the campaign goes on; the report says so
                    log.exception("cell %s failed", name)
                    result.notes.append(f"cell {name} broke off: {type(exc).__name__}: {exc}")
    except Exception as exc:
        log.exception("the testbed failed")
        result.notes.append(f"the network cells could not run: {type(exc).__name__}: {exc}")


def _bmv2_loss_cells(plan: Plan, runs_root: Path, tick: Callable[[str], None],
                     result: CampaignResult) -> None:
    """The loss cells once more on a spine-leaf of BMv2 switches (its own prefix)."""
    tick("starting the BMv2 spine-leaf and programming it")
    config = replace(plan.testbed, target="bmv2", prefix=plan.testbed.prefix[:3] + "b")
    try:
        with Testbed(config, runs_root / "testbed-bmv2") as bed:
            _loss_cells(bed, replace(plan, loss_timers=plan.bmv2_timers), tick, result)
    except Exception as exc:
        log.exception("the BMv2 loss cells failed")
        result.notes.append(f"the BMv2 loss cells broke off: {type(exc).__name__}: {exc}")


def _loss_cells(bed: Testbed, plan: Plan, tick: Callable[[str], None],
                result: CampaignResult) -> None:
    """Every loss rate of ``plan``, then its reordering cell."""
    for loss in plan.losses:
        result.loss.append(cl.loss_cell(bed, loss, plan.loss_runs, tick,
                                        plan.loss_elements, timers=plan.loss_timers))
    if plan.reorder:
        result.loss.append(cl.loss_cell(bed, 0.0, plan.loss_runs, tick, plan.loss_elements,
                                        reorder=plan.reorder, timers=plan.loss_timers))


def _network_cell(name: str, bed: Testbed, plan: Plan, rng: random.Random, seed: int,
                  tick: Callable[[str], None], result: CampaignResult) -> None:
    if name == "loss":
        _loss_cells(bed, plan, tick, result)
    elif name == "restart":
        result.restart = cl.restart_cell(bed, plan.restarts, rng, tick, plan.restart_elements)
    elif name == "controller":
        result.controller = cl.controller_cell(bed, plan.controller_restarts, rng, tick)
    elif name == "badinput":
        result.bad_input = cl.bad_input_cell(bed, plan.frames, plan.frame_rate, seed, tick)


def _teardown(plan: Plan, runs_root: Path, rng: random.Random, tick: Callable[[str], None],
              result: CampaignResult) -> None:
    try:
        result.teardown = teardown_cell(plan.teardown, runs_root / "teardown", rng, tick)
    except Exception as exc:
        log.exception("teardown cell failed")
        result.notes.append(f"cell teardown broke off: {type(exc).__name__}: {exc}")
