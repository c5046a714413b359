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
from vtime.units import delay_arg, rate_arg


@pytest.mark.parametrize(("text", "bps"), [
    ("100G", 100e9), ("25g", 25e9), ("500k", 500e3), ("1.5M", 1.5e6), ("3", 3e6), (3, 3e6),
    (0.5, 0.5e6), ("10Gbit/s", 10e9), ("400Gbps", 400e9), ("1T", 1e12),
    ("500bit/s", 500.0), ("8000bps", 8e3), ("3000000bit", 3e6), ("10Gb/s", 10e9),
    ("150GB/s", 1.2e12), ("1MBps", 8e6), ("2 kB/s", 16e3),
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


def test_unit_without_prefix_is_not_mbit() -> None:
    """Only a bare number means Mbit/s: a written unit without a prefix is bits (or bytes)."""
    assert parse_rate("3") == 3e6
    assert parse_rate("3bit/s") == 3.0
    assert parse_rate("3B/s") == 24.0


def test_empty_field_name_leaves_the_message_unprefixed() -> None:
    with pytest.raises(UnitError, match=r"^'10X' is not a rate"):
        parse_rate("10X", "")
    with pytest.raises(UnitError, match=r"^'2' needs a unit"):
        parse_delay("2", "")


def test_argparse_types_name_the_option_and_value(capsys: pytest.CaptureFixture[str]) -> None:
    """Bad values end in argparse's usage error (exit 2) naming the option, no traceback."""
    import argparse

    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--bw", type=rate_arg)
    p.add_argument("--delay", type=delay_arg)
    args = p.parse_args(["--bw", "100G", "--delay", "2us"])
    assert (args.bw, args.delay) == (100e9, pytest.approx(2e-6))
    assert p.parse_args(["--bw", "3"]).bw == 3e6
    for argv, needle in ((["--bw", "10X"], "argument --bw: '10X' is not a rate"),
                         (["--delay", "2"], "argument --delay: '2' needs a unit")):
        with pytest.raises(SystemExit) as exc:
            p.parse_args(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err


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
