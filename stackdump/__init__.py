"""Every thread's stack from a process that hangs, asked for by the process that waits on it.

A process that hangs (two threads deadlocked on import locks, a wait that never ends) is
understood from its threads' stacks, and the process that gave up waiting on it is the one
that can ask for them, just before it kills it. Both halves live here:

* the child: :func:`enable` (called first thing by every entry point of the testbed:
  ``python -m reliability``, ``experiment.run``, ``softswitch``, ``workloads``,
  ``controller``, ``scenarios``, ``liveview``, ``train``) makes the interpreter write every
  thread's stack to stderr when the process gets :data:`DUMP_SIGNAL` (SIGUSR2: the built-in
  switch uses SIGUSR1 for its stats file), and on a fatal error. It is :mod:`faulthandler`'s
  handler, which runs in C: it answers even when every Python thread is stuck;
* the parent: :func:`communicate` is ``Popen.communicate`` that, when the child is still
  running at the timeout, asks for the stacks, reads until the child's output is quiet,
  kills it and raises :class:`HungProcess` (a ``TimeoutExpired`` whose message holds the
  end of the child's stderr, the stacks); :func:`run` is ``subprocess.run`` with it.
  :func:`request_dump` and :func:`wait_quiet` serve a child whose output goes to a file.

It imports nothing of the project: every package may use it.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DUMP_SIGNAL", "HungProcess", "communicate", "dump_and_kill", "enable",
           "request_dump", "run", "wait_quiet"]

DUMP_SIGNAL = signal.SIGUSR2
TAKE_S = 2.0  # how long a child may take to take the signal
QUIET_S = 0.3  # output that has not grown this long is complete
QUIET_MAX_S = 10.0
KILL_GRACE_S = 5.0  # to read what a killed child left in its pipes
TAIL_CHARS = 20000  # of the child's stderr in HungProcess's message


def enable() -> None:
    """Every thread's stack to stderr on :data:`DUMP_SIGNAL` and on a fatal error (SIGSEGV,
    SIGABRT, ...). Call it once, early, in the process's main."""
    faulthandler.enable(all_threads=True)
    faulthandler.register(DUMP_SIGNAL, all_threads=True, chain=False)


def _pending(pid: int) -> bool | None:
    """Whether a process-directed DUMP_SIGNAL is still pending at ``pid`` (None: the process
    is gone, or its status cannot be read)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                    return None  # ended (the signal's default action, say)
                if line.startswith("ShdPnd:"):
                    return bool(int(line.split()[1], 16) >> (DUMP_SIGNAL - 1) & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def request_dump(pid: int, take_s: float = TAKE_S) -> bool:
    """Sends :data:`DUMP_SIGNAL` to ``pid`` and waits until the process took it (its handler
    runs at once then); False when it is gone or did not take it within ``take_s``. A process
    that did not call :func:`enable` ends (the signal's default action): call it only on a
    process about to be killed."""
    try:
        os.kill(pid, DUMP_SIGNAL)
    except OSError:
        return False
    deadline = time.monotonic() + take_s
    while time.monotonic() < deadline:
        pending = _pending(pid)
        if pending is None:
            return False
        if not pending:
            return True
        time.sleep(0.01)
    return False


def wait_quiet(size: Callable[[], int], quiet_s: float = QUIET_S,
               timeout_s: float = QUIET_MAX_S) -> None:
    """Returns once ``size()`` (of a log file, say) has not grown for ``quiet_s``, or after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last, since = size(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(quiet_s / 3)
        now = size()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return


class HungProcess(subprocess.TimeoutExpired):
    """A child still running at its timeout, killed after its threads' stacks were asked for;
    ``stdout``/``stderr`` hold everything it wrote, the stacks at the end of ``stderr``."""

    def __str__(self) -> str:
        # a child run with stderr=STDOUT has its stacks in stdout (stderr is None)
        merged = self.stderr is None
        data = self.stdout if merged else self.stderr
        text = data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
        stream = "output" if merged else "stderr"
        return (f"{super().__str__()}; killed. The end of its {stream} (every thread's "
                f"stack, when it could dump them):\n{text[-TAIL_CHARS:]}")


def dump_and_kill(proc: subprocess.Popen[Any]) -> tuple[Any, Any]:
    """Asks ``proc`` (a child whose output this process reads through pipes, or none) for
    its stacks, reads until its output is quiet, kills it; returns all of its output as
    ``communicate()`` does (what it had when its pipes stay open after the kill, held by
    a process it started)."""
    out: tuple[Any, Any] = (None, None)
    if request_dump(proc.pid):
        deadline = time.monotonic() + QUIET_MAX_S
        last = -1
        while time.monotonic() < deadline:
            try:
                return proc.communicate(timeout=QUIET_S)  # it ended meanwhile
            except subprocess.TimeoutExpired as exc:
                out = (exc.stdout, exc.stderr)
                size = len(exc.stderr or b"") + len(exc.stdout or b"")
                if size == last:
                    break
                last = size
    proc.kill()
    try:
        return proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired as exc:
        proc.wait()
        return (exc.stdout, exc.stderr) if exc.stdout or exc.stderr else out


def communicate(proc: subprocess.Popen[Any], timeout: float,
                stdin: Any = None) -> tuple[Any, Any]:
    """``proc.communicate(stdin, timeout)``; at the timeout the child's stacks are asked for,
    it is killed and :class:`HungProcess` raised. If the wait is interrupted otherwise (a
    test's own timeout, Ctrl-C), the child's stacks are written to this process's stderr
    before it is killed, and the interruption goes on."""
    try:
        return proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = dump_and_kill(proc)
        raise HungProcess(proc.args, timeout, out, err) from None
    except BaseException:
        if proc.poll() is None:
            out, err = dump_and_kill(proc)
            text = err.decode(errors="replace") if isinstance(err, bytes) else (err or "")
            sys.stderr.write(f"stackdump: {proc.args!r} was still running; killed. The end of "
                             f"its stderr:\n{text[-TAIL_CHARS:]}\n")
        raise


def run(argv: Sequence[str], timeout: float, *, input: Any = None,  # noqa: A002
        **popen: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(argv, timeout=timeout, **popen)`` with :func:`communicate`'s dump
    on a timeout (pass ``capture_output=True`` or ``stderr=PIPE`` to get the stacks in the
    exception)."""
    if popen.pop("capture_output", False):
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with subprocess.Popen(argv, **popen) as proc:
        out, err = communicate(proc, timeout, input)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
