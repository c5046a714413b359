"""The emulated clock: real time divided by the time-dilation factor (TDF).

Every component that keeps a timer or reads a time for the experiment takes a
:class:`VirtualClock` and works in emulated seconds: deadlines from :meth:`VirtualClock.now`,
waits through :meth:`VirtualClock.sleep` or :meth:`VirtualClock.real` (for ``select``,
``Event.wait``, socket timeouts), measured intervals from ``now()`` differences. With
``tdf=1`` it is the machine's monotonic clock, so undilated runs are unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def parse_tdf(value: str | float | int, what: str = "tdf") -> float:
    """A time-dilation factor: a finite number >= 1 (1 is real time)."""
    try:
        tdf = float(value)
    except (TypeError, ValueError):
        msg = f"{what}: {value!r} is not a number (a time-dilation factor >= 1)"
        raise ValueError(msg) from None
    if not math.isfinite(tdf) or tdf < 1:
        raise ValueError(f"{what}: {value!r} must be a finite number >= 1 (1 is real time)")
    return tdf


@dataclass(frozen=True)
class VirtualClock:
    """Emulated time, ``tdf`` times slower than the real monotonic clock it reads."""

    tdf: float = 1.0
    real_ns: Callable[[], int] = field(default=time.monotonic_ns, repr=False, compare=False)
    real_sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        parse_tdf(self.tdf)

    def now(self) -> float:
        """Emulated seconds since an arbitrary epoch (differences only)."""
        return self.real_ns() / (1e9 * self.tdf)

    def now_ns(self) -> int:
        """Emulated nanoseconds since an arbitrary epoch."""
        ns = self.real_ns()
        return ns if self.tdf == 1 else int(ns / self.tdf)

    def real(self, emulated_s: float) -> float:
        """Real seconds that an emulated interval takes (for waits the OS times)."""
        return emulated_s * self.tdf

    def emulated(self, real_s: float) -> float:
        """Emulated seconds that a real interval stands for."""
        return real_s / self.tdf

    def sleep(self, emulated_s: float) -> None:
        """Sleep for an emulated interval."""
        if emulated_s > 0:
            self.real_sleep(emulated_s * self.tdf)

    def real_rate(self, emulated_bps: float) -> float:
        """The real link rate that carries an emulated rate: ``bw / TDF``."""
        return emulated_bps / self.tdf

    def real_delay(self, emulated_s: float) -> float:
        """The real propagation delay that stands for an emulated one: ``delay * TDF``."""
        return emulated_s * self.tdf


REAL_TIME = VirtualClock()
"""The undilated clock (TDF 1), the default of every component."""
