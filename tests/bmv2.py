"""BMv2 (``simple_switch_grpc``) and p4c for tests: availability, versions, switch processes.

:class:`Bmv2Process` starts one ``simple_switch_grpc --no-p4`` with the same command line the
Mininet node uses (``topo.nodes.BMv2Switch.build_argv``), waits until its gRPC and Thrift
ports accept connections while the process is alive (no fixed sleep), and stops it by the
recorded pid (its process group: SIGTERM, then SIGKILL). Use it as a context manager or call
:meth:`stop` in a ``finally``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import stackdump
from tests.p4runtime_server_fake import free_tcp_port
from topo.nodes import BMv2Switch, SwitchLaunch, free_port_base, log_tail, port_accepts

HOST = "127.0.0.1"
BINARIES = ("simple_switch_grpc", "p4c")


def missing_binaries() -> list[str]:
    """The toolchain programs not on PATH (empty: BMv2 tests can run)."""
    return [b for b in (*BINARIES, "simple_switch_CLI") if shutil.which(b) is None]


def skip_reason() -> str:
    """Why BMv2 tests are skipped here (only meaningful when something is missing)."""
    return f"BMv2 toolchain not installed on this machine ({', '.join(missing_binaries())} " \
           "not on PATH); see docs/setup.md"


class Bmv2StartError(RuntimeError):
    """simple_switch_grpc exited or did not open its ports in time."""


@dataclass
class Bmv2Process:
    """One ``simple_switch_grpc`` without data-plane ports (unless ``ports`` are given)."""

    name: str
    device_id: int
    log_path: Path
    grpc_port: int = field(default_factory=free_tcp_port)
    thrift_port: int = field(default_factory=free_tcp_port)
    ports: tuple[tuple[int, str], ...] = ()
    start_timeout_s: float = 60.0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.grpc_port}"

    def argv(self) -> list[str]:
        return BMv2Switch.build_argv(SwitchLaunch(
            name=self.name, device_id=self.device_id, grpc_addr=self.address, ports=self.ports,
            log_file=self.log_path, thrift_port=self.thrift_port, log_level="warn"))

    def start(self) -> Bmv2Process:
        """Starts the process and waits until both ports answer; raises Bmv2StartError."""
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while not (port_accepts(HOST, self.grpc_port) and port_accepts(HOST, self.thrift_port)):
            code = self.proc.poll()
            if code is not None or time.monotonic() > deadline:
                self.stop()
                why = (
                    f"exited with status {code}"
                    if code is not None
                    else f"ports {self.grpc_port}/{self.thrift_port} not open after "
                    f"{self.start_timeout_s:g} s"
                )
                raise Bmv2StartError(f"simple_switch_grpc {self.name} {why}: "
                                     + " | ".join(log_tail(self.log_path)))
            try:
                self.proc.wait(0.05)  # returns at once if the process exits
            except subprocess.TimeoutExpired:
                pass
        return self

    def stop(self) -> None:
        """SIGTERM the process group of the recorded pid, SIGKILL after 10 s; idempotent."""
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.proc.poll() is None:
            _killpg(pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                _killpg(pid, signal.SIGKILL)
                self.proc.wait(10)
        _killpg(pid, signal.SIGKILL)  # anything left in the group
        self.proc = None

    def __enter__(self) -> Bmv2Process:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port_block(count: int, start: int = 24000) -> int:
    """A base for a BMv2 topology's gRPC and Thrift ports (:func:`topo.nodes.free_port_base`)."""
    return free_port_base(count, start)


def run_topo(argv: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``python -m experiment.run ARGV`` as a child; on timeout it is asked for its threads'
    stacks (they end its stderr), then SIGTERM (experiment.run then takes its network down),
    then SIGKILL its process group, and the result says so."""
    # wide enough that rich wraps no table cell (a wrapped name breaks the row lookups)
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "experiment.run", *argv], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stackdump.request_dump(proc.pid)
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        err += f"\n(test: experiment.run did not finish within {timeout_s:g} s; stopped)"
        return subprocess.CompletedProcess(proc.args, -1, out, err)
    finally:
        if proc.poll() is None:
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
