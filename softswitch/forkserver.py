"""The fork server: one process per network that forks its built-in switches.

``python -m softswitch forkserver --fd N [--preload CONFIG] [-- SWITCH FLAGS]``

Why: a switch process spends most of its start-up importing (half a second of CPU) and, when
the controller pushes the program, loading it (over a second); twenty switches doing both at
once on two cores kept a fat tree from being ready for half a minute. This process imports
everything a switch needs once, loads the run's program once (``--preload``: a device config,
with the pipeline options the switch flags give; :mod:`softswitch.preload`), then forks one
child per switch on request. Each child becomes an ordinary switch process: its own session
(so a process-group kill reaches it and nothing else), its output in its own log file, its
command line the switch's (``/proc/PID/cmdline``, for cleanups and ``ps``), its gRPC server
started after the fork, and :func:`softswitch.switch.main` with the preloaded pipeline.

Fork safety: the server has one thread whenever it forks (checked before each fork; numpy's
OpenBLAS threads are kept away with ``OPENBLAS_NUM_THREADS=1``, which the launcher sets and
``--unset-env`` removes again from the children's environment) and everything is imported
before the first fork; no gRPC server or channel exists here.

Protocol on the socket ``--fd`` (JSON lines): the server first says
``{"ready": true, "preload": TEXT}``; a request ``{"id": N, "argv": [...], "log": PATH}``
(``argv``: the switch's whole command line, ``python -m softswitch run ...``) is answered
``{"id": N, "pid": PID}`` or ``{"id": N, "error": TEXT}``; when a child ends the server says
``{"exit": PID, "status": CODE}`` (``Popen.returncode``'s convention). The server exits when
the socket closes (the network is gone); its children are not its to stop.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import Any, ClassVar

import stackdump
from softswitch import switch
from softswitch.preload import PipelineKey, Preloaded
from softswitch.timing import pipeline_clock_ns
from vtime import VirtualClock

log = logging.getLogger(__name__)

#: prctl(2): PR_SET_MM, PR_SET_MM_MAP.
PR_SET_MM, PR_SET_MM_MAP = 35, 14
MAX_LINE = 1 << 20


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The server's flags; what follows ``--`` are the switch flags of the preload."""
    argv = list(argv)
    flags: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, flags = argv[:at], argv[at + 1:]
    p = argparse.ArgumentParser(prog="softswitch forkserver", description=__doc__.splitlines()[0])
    p.add_argument("--fd", type=int, required=True, help="the connected control socket")
    p.add_argument("--preload", metavar="CONFIG", help="device config to load before forking")
    p.add_argument("--unset-env", action="append", default=[], metavar="NAME",
                   help="environment variable the launcher set for this process only")
    args = p.parse_args(argv)
    args.switch_flags = flags
    return args


def preload(path: str, flags: Sequence[str]) -> Preloaded:
    """Loads the device config at ``path`` as a switch started with ``flags`` would load it
    when its controller pushes it (same options, same logging level)."""
    opts = switch.parse_args(["--no-p4", *flags])
    logger = logging.getLogger("softswitch")
    level = logger.level
    logger.setLevel(switch.LOG_LEVELS[opts.log_level])  # as the switch's logging will be
    try:
        clock = VirtualClock(opts.timing.tdf)
        tm = switch.pipeline_options(opts, clock)
        trace = switch.LOG_LEVELS[opts.log_level] <= logging.DEBUG
        key = PipelineKey.of(tm, opts.timing.tdf, trace)
        with open(path, "rb") as fh:
            data = fh.read()
        return Preloaded.load(data, key, pipeline_clock_ns(clock))
    finally:
        logger.setLevel(level)


def describe(preloaded: Preloaded) -> str:
    """The start-up display's line on what was preloaded."""
    engine = preloaded.pipeline.engine if preloaded.pipeline is not None else "no"
    if preloaded.key.engine == "c" and engine != "c":
        return "C engine asked for, the pipeline runs on Python (the switch logs say why)"
    return f"program loaded for every switch ({engine} engine)"


class _MmMap(ctypes.Structure):
    """``struct prctl_mm_map`` (linux/prctl.h)."""

    _fields_: ClassVar[Sequence[tuple[str, Any]]] = [
        *((name, ctypes.c_uint64) for name in (
            "start_code", "end_code", "start_data", "end_data", "start_brk", "brk",
            "start_stack", "arg_start", "arg_end", "env_start", "env_end")),
        ("auxv", ctypes.c_void_p), ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


def set_cmdline(argv: Sequence[str]) -> Any:
    """Makes ``/proc/self/cmdline`` read ``argv`` (PR_SET_MM_MAP with the process's own
    memory map but for the arguments); returns the buffer, which must live as long as the
    process, or None when the kernel refused (the server's command line stays)."""
    buf = ctypes.create_string_buffer(b"\0".join(a.encode() for a in argv))  # NUL-ended
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sbrk.restype = ctypes.c_void_p
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
    with open("/proc/self/stat") as fh:  # proc(5): fields from the third on
        fields = fh.read().rsplit(")", 1)[1].split()

    def stat(n: int) -> int:
        return int(fields[n - 3])

    mm = _MmMap(start_code=stat(26), end_code=stat(27), start_data=stat(45),
                end_data=stat(46), start_brk=stat(47), brk=libc.sbrk(0) or 0,
                start_stack=stat(28), arg_start=ctypes.addressof(buf),
                arg_end=ctypes.addressof(buf) + len(buf.raw), env_start=stat(50),
                env_end=stat(51), auxv=None, auxv_size=0, exe_fd=0xFFFFFFFF)
    if libc.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.addressof(mm), ctypes.sizeof(mm), 0) != 0:
        return None
    return buf


class Server:
    """The request loop (one thread, see the module docstring)."""

    def __init__(self, sock: socket.socket, preloaded: Preloaded | None,
                 unset_env: Sequence[str]) -> None:
        self.sock = sock
        self.preloaded = preloaded
        self.unset_env = list(unset_env)
        self.children: set[int] = set()
        self._buf = b""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self.selector = selectors.DefaultSelector()

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:  # the network is gone: the loop ends on the next read
            log.debug("cannot send %s: %s", message, exc)

    def serve(self) -> None:
        """Answers requests until the socket closes."""
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        sel = self.selector
        sel.register(self.sock, selectors.EVENT_READ, "sock")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while True:
                for key, _ in sel.select():
                    if key.data == "wake":
                        os.read(self._wake_r, 512)
                        self.reap()
                    elif not self.read_requests():
                        return
        finally:
            sel.close()
            self.reap()

    def reap(self) -> None:
        """Reports every child that ended."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.send({"exit": pid, "status": os.waitstatus_to_exitcode(status)})

    def read_requests(self) -> bool:
        """Handles the complete requests read; False at the end of the stream."""
        try:
            data = self.sock.recv(65536)
        except InterruptedError:
            return True
        if not data:
            return False
        self._buf += data
        if len(self._buf) > MAX_LINE:
            log.error("request longer than %d bytes: closing", MAX_LINE)
            return False
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            try:
                request = json.loads(line)
            except ValueError:
                log.error("not a request: %r", line[:200])
                return False
            self.handle(request)
        return True

    def handle(self, request: dict[str, Any]) -> None:
        rid = request.get("id")
        try:
            pid = self.fork(list(request["argv"]), str(request["log"]))
        except Exception as exc:  # answered: the node starts this switch itself
            log.exception("cannot fork a switch")
            self.send({"id": rid, "error": f"{type(exc).__name__}: {exc}"})
            return
        self.children.add(pid)
        self.send({"id": rid, "pid": pid})

    def fork(self, argv: list[str], log_path: str) -> int:
        """Forks the switch ``argv`` (a ``python -m softswitch run`` command line) and
        returns its pid once it runs in its own session."""
        if argv[1:4] != ["-m", "softswitch", "run"]:
            raise ValueError(f"not a built-in switch command line: {argv[:4]}")
        tasks = len(os.listdir("/proc/self/task"))
        if threading.active_count() != 1 or tasks != 1:
            raise RuntimeError(f"{tasks} threads here: forking now is not safe")
        sys.stdout.flush()
        sys.stderr.flush()
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; it never returns
            os.close(ready_r)
            self.child(argv, log_path, ready_w)
        os.close(ready_w)
        try:
            os.read(ready_r, 1)  # EOF once the child has its session (or died)
        finally:
            os.close(ready_r)
        return pid

    def child(self, argv: list[str], log_path: str, ready_w: int) -> None:
        """The switch process: never returns."""
        code = 1
        try:
            os.setsid()
            title = set_cmdline(argv)  # before the node records it in pids.json
            os.close(ready_w)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            self.selector.close()
            self.sock.close()
            out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.close(out)
            os.close(null)
            for name in self.unset_env:
                os.environ.pop(name, None)
            _fresh_logging()
            stackdump.enable()
            if title is None:  # before the switch's logging: to its log through stderr
                log.warning("the kernel refused PR_SET_MM_MAP: /proc/%d/cmdline stays the "
                            "fork server's", os.getpid())
            code = switch.main(argv[4:], preloaded=self.preloaded)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
                logging.shutdown()
            finally:
                os._exit(code)


def _fresh_logging() -> None:
    """Logging as a new interpreter has it (the switch configures its own)."""
    for name in (None, "softswitch"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
    logging.getLogger().setLevel(logging.WARNING)
    sw = logging.getLogger("softswitch")
    sw.setLevel(logging.NOTSET)
    sw.propagate = True


def main(argv: Sequence[str] | None = None) -> int:
    """Serves until the control socket closes; 2 on bad flags."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in args.unset_env:  # numpy has its BLAS (one thread) by now
        os.environ.pop(name, None)
    sock = socket.socket(fileno=args.fd)
    preloaded = None
    note = "nothing preloaded"
    if args.preload:
        try:
            preloaded = preload(args.preload, args.switch_flags)
            note = describe(preloaded)
        except Exception as exc:  # each switch loads it itself and reports what fails
            log.warning("preload of %s failed: %s", args.preload, exc)
            note = f"nothing preloaded ({exc})"
    log.info("fork server ready (pid %d): %s", os.getpid(), note)
    server = Server(sock, preloaded, args.unset_env)
    server.send({"ready": True, "preload": note})
    server.serve()
    log.info("control socket closed: %d switch(es) still running, not mine to stop",
             len(server.children))
    return 0
