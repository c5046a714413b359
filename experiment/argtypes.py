"""argparse value types shared by the command lines that run experiments (``make run``,
``make soak``, ``make train``): a bad number names the value and the bound instead of a
traceback."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    return parse


def seconds_at_least(minimum: float) -> Callable[[str], float]:
    """An argparse ``type`` accepting a finite number of seconds >= ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < minimum:
            raise argparse.ArgumentTypeError(f"{text} must be a number of seconds >= {minimum:g}")
        return value

    return parse


def choice(option: str, choices: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type`` that names the option and the value when the value is not one
    of ``choices``."""

    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(
                f"{option} {text!r}: choose from {', '.join(choices)}")
        return text

    return parse


def tdf_option(text: str) -> str | float:
    """An argparse ``type`` for ``--tdf``: ``auto`` or a time-dilation factor >= 1, or the
    parser's usual error naming the flag and the value (``make run``, ``train compare``)."""
    from experiment.dilation import parse_tdf_option  # calibration's imports: only when used

    try:
        return parse_tdf_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
