"""Virtual time's units and clock (vtime): parsing, printing, and the emulated/real conversion."""

from __future__ import annotations

import pytest

from vtime import (
    REAL_TIME,
    UnitError,
    VirtualClock,
    format_delay,
    format_rate,
    parse_delay,
    parse_rate,
    parse_tdf,
)


@pytest.mark.parametrize(("text", "bps"), [
    ("100G", 100e9), ("25g", 25e9), ("500k", 500e3), ("1.5M", 1.5e6), ("3", 3e6), (3, 3e6),
    (0.5, 0.5e6), ("10Gbit/s", 10e9), ("400Gbps", 400e9), ("1T", 1e12),
])
def test_rate_units(text: str | float, bps: float) -> None:
    """A bare number keeps meaning Mbit/s; k/M/G/T scale from bits per second."""
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("bad", ["", "fast", "10X", "-1G", "0", 0, "1e999G", True])
def test_bad_rate_names_field_and_value(bad: object) -> None:
    """A bad rate is a UnitError naming the field and the value."""
    with pytest.raises(UnitError, match=r"^bw: .*"):
        parse_rate(bad, "bw")  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "seconds"), [
    ("2us", 2e-6), ("800ns", 800e-9), ("1.5ms", 1.5e-3), ("0.1s", 0.1), ("0", 0.0), (0, 0.0),
    ("5 us", 5e-6),
])
def test_delay_units(text: str | float, seconds: float) -> None:
    assert parse_delay(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["2", "1h", "-1ms", "us", "fast"])
def test_bad_delay_names_field_and_value(bad: str) -> None:
    """A delay other than 0 needs its unit: '2' is 2 us to tc and 2 ms to most people."""
    with pytest.raises(UnitError, match=r"^delay: '.*'"):
        parse_delay(bad)


def test_format_round_trips() -> None:
    assert format_rate(100e9) == "100 Gbit/s"
    assert format_rate(2.5e6) == "2.5 Mbit/s"
    assert format_delay(2e-6) == "2 us"
    assert format_delay(0) == "0 s"
    assert parse_rate(format_rate(25e9).replace(" ", "")) == 25e9
    assert parse_delay(format_delay(1.5e-3).replace(" ", "")) == 1.5e-3


def test_clock_dilates_every_conversion() -> None:
    """At TDF 10 an emulated second is ten real ones, a link carries a tenth of its rate."""
    t = [0]
    slept: list[float] = []
    clock = VirtualClock(10, real_ns=lambda: t[0], real_sleep=slept.append)
    t[0] = 5_000_000_000  # 5 real seconds
    assert clock.now() == pytest.approx(0.5)
    assert clock.now_ns() == 500_000_000
    assert clock.real(0.01) == pytest.approx(0.1)
    assert clock.emulated(1.0) == pytest.approx(0.1)
    clock.sleep(0.25)
    assert slept == [pytest.approx(2.5)]
    assert clock.real_rate(100e9) == pytest.approx(10e9)
    assert clock.real_delay(2e-6) == pytest.approx(20e-6)


def test_real_time_is_the_identity() -> None:
    assert REAL_TIME.tdf == 1
    assert REAL_TIME.real(0.3) == 0.3
    assert abs(REAL_TIME.now() - REAL_TIME.now()) < 1.0


@pytest.mark.parametrize("bad", ["0.5", "0", "-3", "nan", "inf", "x"])
def test_bad_tdf(bad: str) -> None:
    with pytest.raises(ValueError, match="tdf: "):
        parse_tdf(bad)
    with pytest.raises(ValueError):
        VirtualClock(float(bad) if bad != "x" else 0.0)
