"""The fidelity guard: did the machine keep up with the network it emulated?

An emulation result is worth something only when the emulated links, not the machine, set the
pace (Mininet-HiFi, CoNEXT 2012). The guard checks what Mininet-HiFi checks, per all-reduce:

- **CPU**: no switch process (nor delay node, ``topo.delaynodes``) and no host agent used
  more than its budget of a core, and the switches, delay nodes and agents together left the
  machine headroom (a starved process delays packets
  by scheduling, which no emulated link would do). The :class:`Monitor` samples the switch
  processes while the collective runs, so a saturated burst shows even when the mean is low.
- **links**: no link carried more than its configured rate (the shaper held), and the busy
  ones are named with their utilisation.
- **machine drops**: packets the kernel dropped for lack of CPU (the per-CPU backlog of
  ``/proc/net/softnet_stat``); a configured queue that overflows is emulated behaviour, not
  a fidelity fault, and is only reported.

A run outside its budget is reported unfaithful, in the summary and in ``experiment.json``;
its comparison must not be published. The budgets are also what :mod:`experiment.calibrate`
sizes the time-dilation factor for, so a calibrated run stays inside them with headroom.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from topo.measure import process_cpu_seconds

#: The monitor's sampling period (s); /proc counts CPU in 10 ms ticks, so shorter windows
#: than ~0.5 s say little.
SAMPLE_PERIOD_S = 0.1
#: The shortest window over which the monitor judges a process's CPU share.
SAMPLE_WINDOW_S = 0.5
SOFTNET_STAT = Path("/proc/net/softnet_stat")


@dataclass(frozen=True)
class Budget:
    """Shares of the machine a faithful run may use (cores are fractions of one core)."""

    switch_core: float = 0.85  # one switch process, averaged over the collective
    switch_peak: float = 0.95  # one switch process over any monitor window
    agent_core: float = 0.85  # one host agent process
    # switches and agents together, share of all cores (above it the machine's CPU, not the
    # links, set the pace: BMv2 spine-leaf at 1.76 of 2 cores ran at 0.4 of its ideal)
    machine: float = 0.8
    over_rate: float = 1.1  # a link above this share of its configured rate: shaping failed
    fixed_cost: float = 0.05  # the machine's fixed real-time cost / TDF, share of the run


@dataclass(frozen=True)
class Check:
    """One fidelity check: its name, whether it held, and what was measured."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Verdict:
    """All checks of one run; ``faithful`` when every one held."""

    checks: tuple[Check, ...]
    tdf: float = 1.0

    @property
    def faithful(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.ok]

    def line(self) -> str:
        """One line for the summary."""
        if self.faithful:
            return "faithful (" + "; ".join(c.detail for c in self.checks) + ")"
        return "NOT faithful: " + "; ".join(self.failures)

    def to_dict(self) -> dict[str, object]:
        return {"faithful": self.faithful, "tdf": self.tdf,
                "checks": [asdict(c) for c in self.checks]}


@dataclass(frozen=True)
class RunLoad:
    """What the guard needs of one collective (taken from ``experiment.session``'s run)."""

    # mean cores of each switch process over the run (and of each delay node, wire:<name>)
    switch_cores: Mapping[str, float]
    switch_peaks: Mapping[str, float]  # highest cores of each over a monitor window
    agent_cores: Mapping[str, float]  # mean cores of each host process (agent, ring rank)
    machine_cores: int
    link_utilization: Mapping[str, float]  # "switch:port" -> busier direction / configured
    machine_drops: int = 0  # kernel backlog drops during the run
    queue_drops: int = 0  # configured queues that overflowed (reported only)
    # the calibrated fixed real-time cost of a collective, over the TDF, as a share of this
    # one's emulated time (None: not calibrated)
    fixed_cost_share: float | None = None


def judge(load: RunLoad, tdf: float = 1.0, budget: Budget | None = None) -> Verdict:
    """The verdict on one run's load against ``budget``."""
    b = budget or Budget()
    checks = []
    busiest_sw = max(load.switch_cores.items(), key=lambda kv: kv[1], default=None)
    over = sorted(f"{n} {c:.0%}" for n, c in load.switch_cores.items() if c > b.switch_core)
    text = f"busiest switch {busiest_sw[0]} {busiest_sw[1]:.0%}" if busiest_sw else "no switch"
    checks.append(Check("switch CPU", not over,
                        f"{', '.join(over)} above {b.switch_core:.0%} of a core" if over else text))
    peaks = sorted(f"{n} {c:.0%}" for n, c in load.switch_peaks.items() if c > b.switch_peak)
    if load.switch_peaks:
        top = max(load.switch_peaks.values())
        checks.append(Check("switch CPU peaks", not peaks,
                            f"{', '.join(peaks)} over {SAMPLE_WINDOW_S:g} s" if peaks
                            else f"highest {top:.0%} over {SAMPLE_WINDOW_S:g} s"))
    starved = sorted(f"{n} {c:.0%}" for n, c in load.agent_cores.items() if c > b.agent_core)
    top_agent = max(load.agent_cores.values(), default=0.0)
    checks.append(Check("host CPU", not starved,
                        f"{', '.join(starved)} above {b.agent_core:.0%} of a core" if starved
                        else f"busiest host process {top_agent:.0%}"))
    together = sum(load.switch_cores.values()) + sum(load.agent_cores.values())
    cap = b.machine * load.machine_cores
    checks.append(Check("machine CPU", together <= cap,
                        f"switches and hosts {together:.2f} of {load.machine_cores} cores"
                        + ("" if together <= cap else f" (budget {cap:.2f})")))
    fast = sorted(f"{k} {u:.0%}" for k, u in load.link_utilization.items() if u > b.over_rate)
    top_link = max(load.link_utilization.items(), key=lambda kv: kv[1], default=None)
    checks.append(Check("links at rate", not fast,
                        f"{', '.join(fast)} of the configured rate" if fast else
                        (f"busiest {top_link[0]} {top_link[1]:.0%}" if top_link else "unshaped")))
    if load.fixed_cost_share is not None:
        share = load.fixed_cost_share
        checks.append(Check("machine latency", share <= b.fixed_cost,
                            f"the machine's fixed cost per collective is {share:.1%} of it"
                            + ("" if share <= b.fixed_cost else
                               f" (budget {b.fixed_cost:.0%}: raise the TDF)")))
    checks.append(Check("machine drops", load.machine_drops == 0,
                        f"{load.machine_drops} kernel backlog drops"
                        + (f", {load.queue_drops} configured-queue drops"
                           if load.queue_drops else "")))
    return Verdict(tuple(checks), tdf)


def softnet_drops(path: Path = SOFTNET_STAT) -> int:
    """Packets the kernel dropped for a full per-CPU backlog so far (all CPUs; the counter is
    machine-wide, namespaces included)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    return sum(int(line.split()[1], 16) for line in lines if len(line.split()) > 1)


@dataclass
class Monitor:
    """Samples the CPU time of some processes every ``period`` seconds on a thread, and keeps
    each one's highest share of a core over any ``window``. Start it before the collective and
    stop it after; ``peaks()`` then holds the result. Imports nothing once started."""

    pids: Mapping[str, int]
    period: float = SAMPLE_PERIOD_S
    window: float = SAMPLE_WINDOW_S
    cpu_seconds: Callable[[int], float | None] = process_cpu_seconds
    clock: Callable[[], float] = time.monotonic
    _samples: dict[str, list[tuple[float, float]]] = field(default_factory=dict, init=False)
    _peaks: dict[str, float] = field(default_factory=dict, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def sample(self) -> None:
        """Take one sample of every process and update the peaks."""
        now = self.clock()
        for name, pid in self.pids.items():
            cpu = self.cpu_seconds(pid)
            if cpu is None:
                continue
            series = self._samples.setdefault(name, [])
            series.append((now, cpu))
            # the newest window of at least `window` seconds that ends now
            start = None
            for t, c in reversed(series):
                if now - t >= self.window:
                    start = (t, c)
                    break
            if start is not None:
                share = (cpu - start[1]) / (now - start[0])
                self._peaks[name] = max(self._peaks.get(name, 0.0), share)
            while len(series) > 2 and now - series[1][0] >= self.window:
                series.pop(0)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def start(self) -> Monitor:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="fidelity-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """Stop sampling (one last sample first); the peaks."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        return self.peaks()

    def peaks(self) -> dict[str, float]:
        return dict(self._peaks)


class LinkLoad(Protocol):
    """One link's traffic in a window (:class:`experiment.lifecycle.LinkUsage`)."""

    @property
    def switch(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def utilization(self) -> float | None: ...

    @property
    def tx_bytes(self) -> int: ...

    @property
    def rx_bytes(self) -> int: ...


def link_utilization(links: Iterable[LinkLoad]) -> dict[str, float]:
    """``switch:port`` -> utilisation of every shaped link that carried traffic (links are
    ``experiment.lifecycle.LinkUsage``)."""
    out = {}
    for u in links:
        util = u.utilization
        if util is not None and (u.tx_bytes or u.rx_bytes):
            out[f"{u.switch}:{u.port}"] = util
    return out
