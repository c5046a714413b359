"""A machine clock that tests move by hand, for :class:`vtime.VirtualClock`'s ``real_ns`` and
``real_sleep`` (test furniture: deterministic time-dilation tests, no wall-clock asserts)."""

from __future__ import annotations

import threading
import time

from vtime import VirtualClock


class FakeRealTime:
    """Real time that stands still until the test moves it; sleeping moves it at once.

    Every sleep is recorded (real seconds), so a test can check what a component slept.
    Thread-safe: the I/O threads of endpoints and communicators read it too.
    """

    def __init__(self, start_s: float = 1000.0) -> None:
        self._ns = int(start_s * 1e9)
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def now_ns(self) -> int:
        with self._lock:
            return self._ns

    def set(self, seconds: float) -> None:
        """Move the clock to ``seconds`` (never backwards)."""
        with self._lock:
            self._ns = max(self._ns, int(round(seconds * 1e9)))

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._ns += int(round(seconds * 1e9))

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self._ns += int(round(seconds * 1e9))

    @property
    def seconds(self) -> float:
        return self.now_ns() / 1e9

    def clock(self, tdf: float) -> VirtualClock:
        """A dilated clock reading this machine clock."""
        return VirtualClock(tdf, real_ns=self.now_ns, real_sleep=self.sleep)


class ShiftedRealTime:
    """The machine's monotonic clock plus an offset the test moves: :meth:`jump` makes real
    time leap forward at a chosen moment, and sleeping leaps instead of waiting (recorded)."""

    def __init__(self) -> None:
        self._offset_ns = 0
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def now_ns(self) -> int:
        return time.monotonic_ns() + self._offset_ns

    def jump(self, seconds: float) -> None:
        with self._lock:
            self._offset_ns += int(round(seconds * 1e9))

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self._offset_ns += int(round(seconds * 1e9))

    def clock(self, tdf: float) -> VirtualClock:
        """A dilated clock reading this machine clock."""
        return VirtualClock(tdf, real_ns=self.now_ns, real_sleep=self.sleep)
