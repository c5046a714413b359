"""Waiting on a child process's output: the readiness check of the tests that interrupt a
run at a known stage (no fixed sleeps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO


def read_until(stream: IO[str], ready: Callable[[str], bool], timeout_s: float) -> list[str]:
    """The lines read from ``stream`` up to and including the first one ``ready`` accepts,
    or every line until the stream ends or ``timeout_s`` passes (the caller asserts that
    the last line is the one it waited for: the lines say what happened instead)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if ready(line):
            break
    return seen
