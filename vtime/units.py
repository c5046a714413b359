"""Link rates and delays with units, as users write them (``100G``, ``2us``).

A rate is bits per second; a bare number keeps its historical meaning of Mbit/s
(``bw=3`` is 3 Mbit/s), a unit without a prefix is what it says (``500bit/s``), and ``B/s``
counts bytes (``150GB/s``, the way GPU interconnects are quoted, is 1.2 Tbit/s). A delay is
seconds and needs a unit (``ns``, ``us``, ``ms``, ``s``), except 0: a bare ``2`` would be read
as 2 us by tc and 2 ms by most people.
"""

from __future__ import annotations

import argparse
import math
import re

RATE_UNITS = {"": 1e6, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
DELAY_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}

_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_RATE_RE = re.compile(_NUMBER + r"\s*(?P<unit>[kKmMgGtT]?)(?P<per>bit/s|bps|bit|b/s|B/s|Bps)?$")
_BYTE_SUFFIXES = ("B/s", "Bps")
_DELAY_RE = re.compile(_NUMBER + r"\s*(?P<unit>ns|us|µs|ms|s)?$")


class UnitError(ValueError):
    """A rate or delay that cannot be read; the message names the value and the accepted form."""


def _named(what: str) -> str:
    return f"{what}: " if what else ""


def parse_rate(value: str | float | int, what: str = "rate") -> float:
    """Bits per second from ``100G``, ``25g``, ``500k``, ``1.5M`` or a bare Mbit/s number."""
    if isinstance(value, bool):
        raise UnitError(f"{_named(what)}{value!r} is not a rate")
    if isinstance(value, (int, float)):
        bps = float(value) * RATE_UNITS[""]
    else:
        m = _RATE_RE.match(value.strip())
        if not m:
            raise UnitError(f"{_named(what)}{value!r} is not a rate (a number with k, M, G or T, "
                            "e.g. 100G, 500k, 150GB/s; a bare number is Mbit/s)")
        prefix, per = m["unit"].lower(), m["per"]
        # a bare number is Mbit/s; with a unit and no prefix ("500bit/s") it is what it says
        scale = RATE_UNITS[prefix] if prefix or per is None else 1.0
        bps = float(m["num"]) * scale * (8 if per in _BYTE_SUFFIXES else 1)
    if not math.isfinite(bps) or bps <= 0:
        raise UnitError(f"{_named(what)}{value!r} must be a positive rate")
    return bps


def parse_delay(value: str | float | int, what: str = "delay") -> float:
    """Seconds from ``2us``, ``1.5ms``, ``800ns``, ``0.1s`` (a bare number only when 0)."""
    if isinstance(value, bool):
        raise UnitError(f"{_named(what)}{value!r} is not a delay")
    text = str(value).strip()
    m = _DELAY_RE.match(text)
    if not m:
        raise UnitError(f"{_named(what)}{value!r} is not a delay (a number with ns, us, ms or s, "
                        "e.g. 2us)")
    seconds = float(m["num"])
    if m["unit"] is None:
        if seconds != 0:
            raise UnitError(f"{_named(what)}{value!r} needs a unit (ns, us, ms or s), e.g. "
                            f"{text}us")
        return 0.0
    seconds *= DELAY_UNITS[m["unit"]]
    if not math.isfinite(seconds):
        raise UnitError(f"{_named(what)}{value!r} is not a finite delay")
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


def rate_arg(text: str) -> float:
    """An argparse ``type``: bits per second, or the parser's usual error naming the option
    (``argument --bw: '10X' is not a rate ...``), never a traceback."""
    try:
        return parse_rate(text, "")
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def delay_arg(text: str) -> float:
    """An argparse ``type``: seconds (see :func:`rate_arg`)."""
    try:
        return parse_delay(text, "")
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
