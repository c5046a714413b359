"""Link rates and delays with units, as users write them (``100G``, ``2us``).

A rate is bits per second; a bare number keeps its historical meaning of Mbit/s
(``bw=3`` is 3 Mbit/s). A delay is seconds and needs a unit (``ns``, ``us``, ``ms``, ``s``),
except 0: a bare ``2`` would be read as 2 us by tc and 2 ms by most people.
"""

from __future__ import annotations

import math
import re

RATE_UNITS = {"": 1e6, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
DELAY_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}

_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_RATE_RE = re.compile(_NUMBER + r"\s*(?P<unit>[kKmMgGtT]?)(?:bit/s|bps|bit)?$")
_DELAY_RE = re.compile(_NUMBER + r"\s*(?P<unit>ns|us|µs|ms|s)?$")


class UnitError(ValueError):
    """A rate or delay that cannot be read; the message names the value and the accepted form."""


def parse_rate(value: str | float | int, what: str = "rate") -> float:
    """Bits per second from ``100G``, ``25g``, ``500k``, ``1.5M`` or a bare Mbit/s number."""
    if isinstance(value, bool):
        raise UnitError(f"{what}: {value!r} is not a rate")
    if isinstance(value, (int, float)):
        bps = float(value) * RATE_UNITS[""]
    else:
        m = _RATE_RE.match(value.strip())
        if not m:
            raise UnitError(f"{what}: {value!r} is not a rate (a number with k, M, G or T, "
                            "e.g. 100G or 500k; a bare number is Mbit/s)")
        bps = float(m["num"]) * RATE_UNITS[m["unit"].lower()]
    if not math.isfinite(bps) or bps <= 0:
        raise UnitError(f"{what}: {value!r} must be a positive rate")
    return bps


def parse_delay(value: str | float | int, what: str = "delay") -> float:
    """Seconds from ``2us``, ``1.5ms``, ``800ns``, ``0.1s`` (a bare number only when 0)."""
    if isinstance(value, bool):
        raise UnitError(f"{what}: {value!r} is not a delay")
    text = str(value).strip()
    m = _DELAY_RE.match(text)
    if not m:
        raise UnitError(f"{what}: {value!r} is not a delay (a number with ns, us, ms or s, "
                        "e.g. 2us)")
    seconds = float(m["num"])
    if m["unit"] is None:
        if seconds != 0:
            raise UnitError(f"{what}: {value!r} needs a unit (ns, us, ms or s), e.g. {text}us")
        return 0.0
    seconds *= DELAY_UNITS[m["unit"]]
    if not math.isfinite(seconds):
        raise UnitError(f"{what}: {value!r} is not a finite delay")
    return seconds


def format_rate(bps: float) -> str:
    """``100 Gbit/s``, ``2.5 Mbit/s``: the largest unit that keeps the number at least 1."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.4g} {prefix}bit/s"
    return f"{bps:.4g} bit/s"


def format_delay(seconds: float) -> str:
    """``2 us``, ``1.5 ms``, ``0 s``: the largest unit that keeps the number at least 1."""
    if seconds == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"
