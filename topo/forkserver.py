"""The network's side of the fork server (:mod:`softswitch.forkserver`).

Why: twenty built-in switches each importing the switch and loading the same program at
once on two cores kept a fat tree from being ready for half a minute; one process that
imports and loads once and forks the switches brings that down to seconds. A network of
built-in switches launches one :class:`ForkServer` before Mininet builds (so the server's
load overlaps the build) and its switch nodes ask it for their processes. Each answer is a
:class:`ForkedProcess`, which offers the part of ``subprocess.Popen`` the nodes use (``pid``,
``returncode``, ``poll``, ``wait``): the node starts, waits for and stops it as it did a
Popen'd switch. A server that cannot start, or dies, costs speed only: the nodes start
their switches with Popen again (:meth:`ForkServer.give_up` logs why, once).

Exit statuses come from the server (it is the switches' parent); whether a switch still
runs comes from a pidfd, so a switch that ends is noticed even when the server is gone
(then its status is unknown: :data:`STATUS_UNKNOWN`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from topo.errors import TopoError

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
SPAWN_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
STATUS_WAIT_S = 2.0  # from a switch's end to the server's word of its status
#: The returncode of a switch that ended after its server did (nobody could tell).
STATUS_UNKNOWN = 255
#: Set for the server only (numpy's BLAS threads would make forking unsafe).
SERVER_ONLY_ENV = {"OPENBLAS_NUM_THREADS": "1"}
ENV_SWITCH = "INA_FORKSERVER"  # "off": every switch is a process of its own (Popen)


class ForkServerError(TopoError):
    """The fork server could not start a switch (the node starts it itself)."""


class ProcessHandle(Protocol):
    """What a node needs of its process: a ``subprocess.Popen`` or a :class:`ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def enabled(env: dict[str, str] | None = None) -> bool:
    """False when ``$INA_FORKSERVER`` is off."""
    value = (os.environ if env is None else env).get(ENV_SWITCH, "")
    return value.lower() not in ("off", "0", "no", "false")


class ForkServer:
    """One running fork server and the conversation with it (thread-safe)."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket,
                 log_file: Path) -> None:
        self.proc = proc
        self.sock = sock
        self.log_file = log_file
        self.note: str | None = None  # what it preloaded (once ready)
        self.failure: str | None = None  # why the nodes no longer use it
        self._lock = threading.RLock()
        self._buf = b""
        self._eof = False
        self._ready: dict[str, Any] | None = None
        self._replies: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self._ids = itertools.count(1)

    @classmethod
    def launch(cls, python: str, log_file: Path, preload: Path | None = None,
               switch_flags: Sequence[str] = ()) -> ForkServer:
        """Starts ``python -m softswitch forkserver`` in its own session, logging into
        ``log_file``; ``preload``: the device config the switches will be pushed, with the
        switch flags that decide how they load it. Raises ForkServerError."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        argv = [python, "-m", "softswitch", "forkserver", "--fd", str(theirs.fileno())]
        for name, value in SERVER_ONLY_ENV.items():
            if name not in env:
                env[name] = value
                argv += ["--unset-env", name]
        if preload is not None:
            argv += ["--preload", str(preload)]
        argv += ["--", *switch_flags]
        try:
            with log_file.open("ab") as out:
                out.write(f"# {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
                out.flush()
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        pass_fds=(theirs.fileno(),), env=env)
        except OSError as exc:
            ours.close()
            raise ForkServerError(f"cannot run the fork server: {exc}") from None
        finally:
            theirs.close()
        return cls(proc, ours, log_file)

    # ------------------------------------------------------------------ messages
    def pump(self, timeout: float = 0.0) -> bool:
        """Reads what the server said within ``timeout`` s; False once it is gone."""
        with self._lock:
            if self._eof:
                return False
            ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
            if not ready:
                return True
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._eof = True
                return False
            self._buf += data
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                self._dispatch(json.loads(line))
            return True

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "exit" in msg:
            self._exits[int(msg["exit"])] = int(msg["status"])
        elif "ready" in msg:
            self._ready = msg
        elif "id" in msg:
            self._replies[int(msg["id"])] = msg

    def exit_status(self, pid: int) -> int | None:
        """The status the server reported for ``pid`` (None: not yet)."""
        with self._lock:
            return self._exits.get(pid)

    @property
    def gone(self) -> bool:
        """True once the server closed its end."""
        return self._eof

    # ------------------------------------------------------------------ requests
    @property
    def usable(self) -> bool:
        """False after :meth:`give_up`."""
        return self.failure is None

    def give_up(self, why: str) -> None:
        """From now on the nodes start their switches themselves (said once, in the log)."""
        if self.failure is None:
            self.failure = why
            log.warning("fork server: %s; starting the switches as processes of their own",
                        why)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> str:
        """Waits until the server has loaded; returns what it preloaded. Raises
        ForkServerError when it exits or does not answer in time."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._ready is None:
                if not self.pump(min(0.2, max(0.0, deadline - time.monotonic()))):
                    raise ForkServerError(self._gone())
                if self._ready is None and time.monotonic() >= deadline:
                    raise ForkServerError(f"not ready after {timeout:g} s")
            self.note = str(self._ready.get("preload"))
            return self.note

    def _gone(self) -> str:
        """Why the server's socket closed (its exit status, once it has one)."""
        try:
            code: int | None = self.proc.wait(STATUS_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        what = f"it exited (status {code})" if code is not None else "it closed its socket"
        return f"{what}; see {self.log_file}"

    def spawn(self, argv: Sequence[str], timeout: float = SPAWN_TIMEOUT_S) -> ForkedProcess:
        """Forks the switch whose command line is ``argv`` (its output appended to the log
        file named by its ``--log-file``). Raises ForkServerError."""
        log_file = _option(argv, "--log-file")
        if log_file is None:
            raise ForkServerError("the switch command line has no --log-file")
        with self._lock:
            self.wait_ready(READY_TIMEOUT_S)
            rid = next(self._ids)
            request = {"id": rid, "argv": list(argv), "log": log_file}
            try:
                self.sock.sendall(json.dumps(request).encode() + b"\n")
            except OSError as exc:
                raise ForkServerError(f"cannot reach it: {exc}") from None
            deadline = time.monotonic() + timeout
            while rid not in self._replies:
                if not self.pump(min(0.2, max(0.0, deadline - time.monotonic()))):
                    raise ForkServerError(self._gone())
                if rid not in self._replies and time.monotonic() >= deadline:
                    raise ForkServerError(f"no answer after {timeout:g} s")
            reply = self._replies.pop(rid)
        if "error" in reply:
            raise ForkServerError(str(reply["error"]))
        return ForkedProcess(self, int(reply["pid"]), list(argv))

    def close(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Closes the socket (the server exits on it), waits, kills what is left."""
        with self._lock:
            try:
                self.sock.close()
            except OSError:
                pass
            self._eof = True
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("fork server (pid %d) did not exit; killing it", self.proc.pid)
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait()


def _option(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg == name:
            return argv[i + 1]
    return None


class ForkedProcess:
    """A switch the fork server forked, seen as a ``subprocess.Popen``."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:
        self.server = server
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # ended already: the server has said or will say its status
            self._pidfd = None

    def __del__(self) -> None:
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        fd, self._pidfd = getattr(self, "_pidfd", None), None
        if fd is not None:
            os.close(fd)

    def _ended(self) -> bool:
        """True when the process no longer runs (the pidfd says so)."""
        if self._pidfd is None:
            return True
        ready, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(ready)

    def poll(self) -> int | None:
        """The exit status once the process ended, else None."""
        if self.returncode is not None:
            return self.returncode
        self.server.pump(0)
        status = self.server.exit_status(self.pid)
        if status is None and self._ended():
            deadline = time.monotonic() + STATUS_WAIT_S
            while status is None and time.monotonic() < deadline:
                if not self.server.pump(0.05):
                    break
                status = self.server.exit_status(self.pid)
            if status is None:
                log.warning("switch pid %d ended, its status unknown (the fork server is "
                            "gone)", self.pid)
                status = STATUS_UNKNOWN
        if status is not None:
            self.returncode = status
            self._close_pidfd()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Waits for the end (``subprocess.TimeoutExpired`` after ``timeout`` s)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                return code
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            fds = [fd for fd in (self._pidfd,) if fd is not None]
            if not self.server.gone:
                fds.append(self.server.sock.fileno())
            select.select(fds, [], [], left)
