"""Waiting on a child process's output: the readiness check of the tests that interrupt a
run at a known stage (no fixed sleeps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
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


def wait_for_text(path: Path, text: str, timeout_s: float) -> str:
    """``path``'s content once it holds ``text`` (a child's log: a server can accept
    connections before it has logged that it is ready), or what it holds at ``timeout_s``
    (the caller asserts; the content says what happened instead)."""
    deadline = time.monotonic() + timeout_s
    while True:
        content = path.read_text() if path.exists() else ""
        if text in content or time.monotonic() > deadline:
            return content
        time.sleep(0.02)
