"""Test furniture for the fork server: a server and the switches it forked, all ended on
leaving the ``with`` block (also when the test failed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from topo.forkserver import ForkedProcess, ForkServer
from topo.nodes import free_port_base, port_accepts

READY_TIMEOUT_S = 60.0


@dataclass
class Forked:
    """One forked switch: its command line, process, log file and gRPC address."""

    name: str
    argv: list[str]
    proc: ForkedProcess
    log: Path
    address: str


class Forks:
    """A fork server in ``directory`` that preloaded ``config`` with the switch ``flags``."""

    def __init__(self, directory: Path, config: Path | None, flags: list[str]) -> None:
        self.directory = directory
        self.config = config
        self.flags = flags
        self.switches: list[Forked] = []
        self.server = ForkServer.launch(sys.executable, directory / "forkserver.log", config,
                                        flags)

    def __enter__(self) -> Forks:
        try:
            self.server.wait_ready(READY_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def switch(self, name: str, *flags: str, wait: bool = True) -> Forked:
        """Forks ``softswitch run --no-p4 FLAGS`` on a free loopback port; ``wait``: until
        its gRPC port accepts (raises if it exits first)."""
        port = free_port_base(1, 26000)
        log = self.directory / f"{name}.log"
        argv = [sys.executable, "-m", "softswitch", "run", "--no-p4", *flags,
                "--grpc-server-addr", f"127.0.0.1:{port}", "--log-file", str(log)]
        sw = Forked(name, argv, self.server.spawn(argv), log, f"127.0.0.1:{port}")
        self.switches.append(sw)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while wait and not port_accepts("127.0.0.1", port):
            code = sw.proc.poll()
            if code is not None or time.monotonic() > deadline:
                text = log.read_text() if log.exists() else ""
                raise AssertionError(f"{name} not ready (status {code}):\n{text}")
            try:
                sw.proc.wait(0.05)
            except subprocess.TimeoutExpired:
                pass
        return sw

    def close(self) -> None:
        """Ends every forked switch (SIGTERM, then SIGKILL) and the server."""
        for sw in self.switches:
            if sw.proc.poll() is None:
                _kill_group(sw.proc.pid, signal.SIGTERM)
                try:
                    sw.proc.wait(10)
                except subprocess.TimeoutExpired:
                    _kill_group(sw.proc.pid, signal.SIGKILL)
                    sw.proc.wait(10)
        self.server.close()


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
