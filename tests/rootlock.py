"""One machine-wide lock for the suite's root-network modules.

The root namespace's interface names (``twl1-eth3``), Mininet's cleanup and the CPU are
shared by every test run on a machine, not only by one run's xdist workers: a second
``make test`` (a developer's run while CI tests a landing on the same machine) built a
network with the same names beside the first one's and both failed. Each root module holds
this lock while it runs, so two suites take turns module by module instead of colliding.
The namespace-only modules (``netns``: names of their own, no Mininet) run beside the
Mininet modules in one suite, so they take a second lock, not this one: two suites still
take turns at them.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Where the lock lives; $INA_TEST_LOCK overrides it (tests of the lock itself).
DEFAULT_LOCK = Path("/run/lock/ina-testbed-root-tests.lock")
#: The namespace-only modules' lock: the root lock's path with this suffix.
NETNS_SUFFIX = ".netns"


def lock_path(netns: bool = False) -> Path:
    """The lock file: $INA_TEST_LOCK, else /run/lock's (tmpfs, so no stale file survives a
    reboot), else the temporary directory's when /run/lock does not exist; with ``netns``
    the namespace-only modules' lock beside it."""
    if "INA_TEST_LOCK" in os.environ:
        path = Path(os.environ["INA_TEST_LOCK"])
    elif DEFAULT_LOCK.parent.is_dir():
        path = DEFAULT_LOCK
    else:
        import tempfile

        path = Path(tempfile.gettempdir()) / DEFAULT_LOCK.name
    return path.with_name(path.name + NETNS_SUFFIX) if netns else path


@contextmanager
def machine_lock(holder: str, path: Path | None = None) -> Iterator[None]:
    """Hold the machine-wide root-network lock as ``holder`` (written into the file, so a
    waiting run can say whom it waits for). Waiting is announced on stderr, never silent;
    the suite's per-test timeout bounds it."""
    path = path or lock_path()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
            print(f"\n[{holder}] waiting for {path}, held by {other}", file=sys.__stderr__,
                  flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {holder}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
