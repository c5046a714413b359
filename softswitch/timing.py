"""The switch and time: one dilated clock, and link propagation delay without netem.

With a time-dilation factor (``softswitch run --tdf N``) the emulated world runs N times
slower than the machine. Every time the switch shows the emulated world reads one
:class:`~vtime.VirtualClock`: the v1model timestamps (``ingress_global_timestamp``,
``egress_global_timestamp``, ``enq_timestamp``, ``deq_timedelta``), meters (rates per
emulated second), table hit time stamps and the pcap records (:func:`pipeline_clock_ns`,
:class:`PcapClock`).

The kernel here has no ``sch_netem``, so the switch delays packets itself: a
:class:`DelayLine` holds each frame until its link's propagation delay has passed, ``delay *
TDF`` real seconds. Egress delays (``--port-delay PORT=DELAY``) hold frames leaving a port;
ingress delays (``--port-ingress-delay PORT=DELAY``) hold frames arriving on a port whose far
end cannot delay (a host, a BMv2 switch). A link between two built-in switches takes the
egress delay on both ends; a link to a host or BMv2 takes both delays on the built-in switch's
port; each direction is delayed once. :class:`SwitchTiming` is that configuration, with the
command-line pieces (:meth:`SwitchTiming.argv`) for whoever starts the switch.

This module imports only the standard library and :mod:`vtime`, so a topology can build the
switch's command line without importing the switch.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from vtime import VirtualClock, format_delay, parse_delay, parse_tdf

MAX_PORT = 510  # 511 is v1model's drop port
#: Frames one port's delay line holds before it drops (tail drop): the real bandwidth-delay
#: product of any link the emulation can run stays far below it; the cap only bounds memory.
DEFAULT_DELAY_CAPACITY = 1 << 16

T = TypeVar("T")


# ============================================================================ options


def parse_port_delay(text: str, option: str = "--port-delay") -> tuple[int, float]:
    """``PORT=DELAY`` (``1=2us``) as ``(port, emulated seconds)``; a ValueError names the
    option and the value."""
    num, sep, value = text.partition("=")
    if not sep or not num.strip() or not value.strip():
        raise ValueError(f"{option} {text}: expected PORT=DELAY, e.g. 1=2us")
    try:
        port = int(num.strip(), 0)
    except ValueError:
        raise ValueError(f"{option} {text}: port {num!r} is not a number") from None
    if not 0 <= port <= MAX_PORT:
        raise ValueError(f"{option} {text}: port {port} outside 0..{MAX_PORT}")
    return port, parse_delay(value.strip(), f"{option} {text}")


def _check_delays(option: str, delays: tuple[tuple[int, float], ...]) -> None:
    seen: set[int] = set()
    for port, seconds in delays:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
            raise ValueError(f"{option}: port {port!r} outside 0..{MAX_PORT}")
        if port in seen:
            raise ValueError(f"{option}: port {port} given twice")
        seen.add(port)
        if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"{option} {port}={seconds!r}: a delay is a finite number of "
                             "seconds >= 0")


def _seconds_arg(seconds: float) -> str:
    """A delay as ``parse_delay`` reads it back exactly (``2e-06s``)."""
    return f"{float(seconds)!r}s"


@dataclass(frozen=True)
class SwitchTiming:
    """A built-in switch's time options: its TDF and its ports' propagation delays in
    emulated seconds (egress: frames leaving the port; ingress: frames arriving on it)."""

    tdf: float = 1.0
    port_delays: tuple[tuple[int, float], ...] = ()
    port_ingress_delays: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        parse_tdf(self.tdf, "tdf")
        _check_delays("--port-delay", self.port_delays)
        _check_delays("--port-ingress-delay", self.port_ingress_delays)

    @classmethod
    def of(
        cls,
        tdf: float = 1.0,
        port_delays: Mapping[int, float] | None = None,
        port_ingress_delays: Mapping[int, float] | None = None,
    ) -> SwitchTiming:
        """From per-port mappings (ports in order; zero delays left out)."""

        def norm(m: Mapping[int, float] | None) -> tuple[tuple[int, float], ...]:
            return tuple(sorted((p, float(s)) for p, s in (m or {}).items() if s != 0))

        return cls(float(tdf), norm(port_delays), norm(port_ingress_delays))

    @property
    def egress(self) -> dict[int, float]:
        return dict(self.port_delays)

    @property
    def ingress(self) -> dict[int, float]:
        return dict(self.port_ingress_delays)

    def argv(self) -> list[str]:
        """The ``softswitch run`` options that give this timing (empty for the default)."""
        out: list[str] = []
        if self.tdf != 1:
            out += ["--tdf", repr(float(self.tdf))]
        for port, seconds in self.port_delays:
            if seconds > 0:
                out += ["--port-delay", f"{port}={_seconds_arg(seconds)}"]
        for port, seconds in self.port_ingress_delays:
            if seconds > 0:
                out += ["--port-ingress-delay", f"{port}={_seconds_arg(seconds)}"]
        return out


# ============================================================================ clocks


def pipeline_clock_ns(clock: VirtualClock) -> Callable[[], int]:
    """The integer-ns time source of a pipeline (timestamps, meters, table hits) in
    emulated time. At TDF 1 it is the real clock itself, so undilated runs call exactly
    what they called before."""
    return clock.real_ns if clock.tdf == 1 else clock.now_ns


class PcapClock:
    """Capture times of the switch's pcap records.

    At TDF 1 the wall clock, as before. Dilated, the wall-clock time of boot plus the
    emulated time since boot (``CLOCK_MONOTONIC / TDF``, what :meth:`VirtualClock.now`
    reads in every process of the machine): intervals in the capture are emulated, so a
    capture's rates and gaps are the emulated network's, and captures of different switches
    and hosts at the same TDF line up. The dates fall between boot and now."""

    def __init__(self, clock: VirtualClock, wall: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.wall = wall
        self.dilated = clock.tdf != 1
        self._boot_wall = wall() - clock.real_ns() / 1e9

    def now(self) -> float | None:
        """The record time to write now (None: the writer takes the wall clock itself)."""
        if not self.dilated:
            return None
        return self._boot_wall + self.clock.now()

    def stamp(self) -> float:
        """A capture time to keep for a later record (never None)."""
        t = self.now()
        return self.wall() if t is None else t


# ============================================================================ delay line


class DelayLine(Generic[T]):
    """Items held per port until the port's link delay has passed (a real-time deadline).

    Each port is a FIFO: its delay is constant and the clock monotonic, so deadlines grow
    along a queue and its head always leaves first (order per port is kept); ports never
    wait for one another. Not thread-safe: the switch calls it under its lock.
    """

    def __init__(
        self,
        delays_s: Mapping[int, float],
        clock: VirtualClock,
        capacity: int = DEFAULT_DELAY_CAPACITY,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"delay line capacity {capacity}: must be >= 1")
        self.clock = clock
        self.capacity = capacity
        self.delays_s = {p: float(s) for p, s in sorted(delays_s.items()) if s > 0}
        self.delay_ns = {p: round(clock.real_delay(s) * 1e9) for p, s in self.delays_s.items()}
        self._queues: dict[int, deque[tuple[int, T]]] = {p: deque() for p in self.delays_s}
        self.held = 0
        self.max_held = 0
        self.port_max = dict.fromkeys(self.delays_s, 0)
        self.overflow = dict.fromkeys(self.delays_s, 0)

    def __contains__(self, port: object) -> bool:
        return port in self._queues

    def __bool__(self) -> bool:
        """True when some port has a delay."""
        return bool(self._queues)

    def hold(self, port: int, item: T, now_ns: int | None = None) -> bool:
        """Hold ``item`` for ``port``'s delay from now; False (counted) when the port's
        line is full."""
        q = self._queues[port]
        if len(q) >= self.capacity:
            self.overflow[port] += 1
            return False
        now = self.clock.real_ns() if now_ns is None else now_ns
        q.append((now + self.delay_ns[port], item))
        if len(q) > self.port_max[port]:
            self.port_max[port] = len(q)
        self.held += 1
        if self.held > self.max_held:
            self.max_held = self.held
        return True

    def next_deadline(self) -> int | None:
        """Real ns at which the next item is due (None when nothing is held)."""
        if not self.held:
            return None
        return min(q[0][0] for q in self._queues.values() if q)

    def pop_due(self, now_ns: int | None = None) -> list[tuple[int, T]]:
        """Every item whose deadline has passed, as ``(port, item)`` in deadline order."""
        if not self.held:
            return []
        now = self.clock.real_ns() if now_ns is None else now_ns
        due: list[tuple[int, int, T]] = []
        for port, q in self._queues.items():
            while q and q[0][0] <= now:
                deadline, item = q.popleft()
                due.append((deadline, port, item))
        return self._taken(due)

    def drain(self) -> list[tuple[int, T]]:
        """Everything held, due or not, in deadline order (the line is then empty)."""
        due = [(d, port, item) for port, q in self._queues.items() for d, item in q]
        for q in self._queues.values():
            q.clear()
        return self._taken(due)

    def _taken(self, due: list[tuple[int, int, T]]) -> list[tuple[int, T]]:
        self.held -= len(due)
        due.sort(key=lambda x: x[0])  # stable: a port's items keep their order
        return [(port, item) for _d, port, item in due]

    def port_held(self, port: int) -> int:
        return len(self._queues[port])

    def snapshot(self) -> dict[str, Any]:
        """Configured delays and occupancy per port, for the stats file."""
        return {
            str(p): {
                "delay_s": s,
                "held": len(self._queues[p]),
                "max_held": self.port_max[p],
                "overflow": self.overflow[p],
            }
            for p, s in self.delays_s.items()
        }


def describe_delays(pairs: Iterable[tuple[int, float]]) -> str:
    """``1=100 us, 2=1 ms`` for a log line."""
    return ", ".join(f"{p}={format_delay(s)}" for p, s in pairs) or "none"
