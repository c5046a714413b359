"""BMv2's own runtime interface, for what ``simple_switch_grpc``'s P4Runtime server lacks.

PI, the P4Runtime library inside ``simple_switch_grpc``, answers register reads and writes
with UNIMPLEMENTED. BMv2 serves the same operations on its Thrift runtime port (``--thrift-port``,
recorded per switch in ``topology.json``), the interface its ``simple_switch_CLI`` drives. The
controller does not import BMv2's Thrift bindings (they live in the system Python BMv2 was
built for, not in the project's venv); it runs ``simple_switch_CLI --thrift-port N`` as a
subprocess with a list argv, writes one command per line on its stdin and parses the replies.
The CLI is a ``#!/usr/bin/env python3`` script that needs the ``thrift`` module; when the
``python3`` first on PATH is a pyenv or venv without it, the system Python that has it runs
the script instead (:func:`cli_interpreter`).

The CLI prints its prompt ``RuntimeCmd: `` before reading each command, so the output split at
the prompts gives one chunk per command (chunk 0 is the banner). Register names are the
P4Info's fully qualified names, which p4c also writes into the BMv2 JSON.
"""

from __future__ import annotations

import functools
import logging
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from controller.errors import Bmv2RuntimeError

log = logging.getLogger(__name__)

CLI_PROGRAM = "simple_switch_CLI"
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
PROMPT = "RuntimeCmd: "
DEFAULT_TIMEOUT_S = 30.0
# Lines the CLI prints instead of a result (runtime_CLI's handle_bad_input and friends).
_ERROR_PREFIXES = ("Error:", "Invalid ", "Exception")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\[\]$]*$")


@dataclass(frozen=True)
class Bmv2Runtime:
    """BMv2's Thrift runtime server of one switch, driven through ``simple_switch_CLI``."""

    switch: str
    host: str
    port: int
    program: str = CLI_PROGRAM
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def where(self) -> str:
        return f"switch {self.switch}: BMv2 runtime (Thrift) at {self.host}:{self.port}"

    def argv(self) -> list[str]:
        """The CLI's command line (a list, never a shell string)."""
        path = shutil.which(self.program)
        if path is None:
            raise Bmv2RuntimeError(
                f"{self.where}: {self.program} not found on PATH (it is installed with BMv2; "
                "without it the controller cannot reach registers on BMv2)")
        return [*cli_interpreter(path), path, "--thrift-ip", self.host,
                "--thrift-port", str(self.port)]

    def run(self, commands: Sequence[str]) -> list[str]:
        """Runs ``commands`` in one CLI session; returns each command's output (stripped)."""
        for command in commands:
            if "\n" in command or "\r" in command:
                raise Bmv2RuntimeError(f"{self.where}: command {command!r} spans lines")
        argv = self.argv()
        script = "".join(f"{c}\n" for c in commands)
        try:
            proc = subprocess.run(argv, input=script, capture_output=True, text=True,
                                  timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise Bmv2RuntimeError(f"{self.where}: no answer within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise Bmv2RuntimeError(f"{self.where}: cannot run {argv[0]}: {exc.strerror}") from None
        if proc.returncode != 0 or PROMPT not in proc.stdout:
            text = " ".join((proc.stdout + " " + proc.stderr).split())
            if "No module named 'thrift'" in text:
                raise Bmv2RuntimeError(
                    f"{self.where}: {self.program} cannot import Python's thrift module (BMv2's "
                    "CLI runs on the system Python: install python3-thrift)")
            if "Could not connect" in text:
                raise Bmv2RuntimeError(f"{self.where}: unreachable (is the switch running with "
                                       f"--thrift-port {self.port}?)")
            raise Bmv2RuntimeError(f"{self.where}: {self.program} exited with status "
                                   f"{proc.returncode}: {text[-300:] or 'no output'}")
        chunks = proc.stdout.split(PROMPT)[1:]
        if len(chunks) < len(commands):
            raise Bmv2RuntimeError(f"{self.where}: {self.program} answered {len(chunks)} of "
                                   f"{len(commands)} commands")
        outputs = [c.strip() for c in chunks[:len(commands)]]
        for command, out in zip(commands, outputs, strict=True):
            log.debug("%s: %s -> %s", self.switch, command, out)
        return outputs

    # ------------------------------------------------------------------ registers
    def read_register(self, name: str, index: int | None = None) -> dict[int, int]:
        """{index: value} of one cell, or of every cell when ``index`` is None."""
        _check_name(name)
        command = f"register_read {name}" + (f" {index}" if index is not None else "")
        out = self.run([command])[0]
        _raise_on_error(self.where, command, out)
        if index is not None:
            match = re.search(rf"^{re.escape(name)}\[{index}\]=\s*(-?\d+)\s*$", out, re.M)
            if match is None:
                raise Bmv2RuntimeError(f"{self.where}: unexpected answer to {command!r}: {out!r}")
            return {index: int(match.group(1))}
        match = re.search(rf"^{re.escape(name)}=\s*(.*)$", out, re.M)
        if match is None:
            raise Bmv2RuntimeError(f"{self.where}: unexpected answer to {command!r}: {out!r}")
        cells = [c.strip() for c in match.group(1).split(",") if c.strip()]
        try:
            return {i: int(c) for i, c in enumerate(cells)}
        except ValueError:
            raise Bmv2RuntimeError(
                f"{self.where}: unexpected answer to {command!r}: {out[:200]!r}") from None

    def write_registers(self, name: str, cells: dict[int, int]) -> None:
        """Writes ``{index: value}`` into register ``name`` in one CLI session."""
        _check_name(name)
        commands = [f"register_write {name} {i} {v}" for i, v in sorted(cells.items())]
        if not commands:
            return
        for command, out in zip(commands, self.run(commands), strict=True):
            _raise_on_error(self.where, command, out)
            if out:
                raise Bmv2RuntimeError(f"{self.where}: unexpected answer to {command!r}: {out!r}")


def cli_interpreter(path: str) -> list[str]:
    """How to start BMv2's CLI script: ``[]`` (run it directly) unless it starts with
    ``#!/usr/bin/env python3`` and the ``python3`` first on PATH (a pyenv or a venv) lacks the
    ``thrift`` module while a system Python has it; then ``[that python]``."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return []
    if not (first.startswith(b"#!") and b"env" in first and b"python" in first):
        return []
    candidates = [p for p in dict.fromkeys((shutil.which("python3"), *SYSTEM_PYTHONS)) if p]
    for python in candidates:
        if _imports_thrift(python):
            return [] if python == candidates[0] else [python]
    return []


@functools.cache
def _imports_thrift(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import thrift"], capture_output=True,
                              timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise Bmv2RuntimeError(f"register: {name!r} is not a P4 name")


def _raise_on_error(where: str, command: str, out: str) -> None:
    for line in out.splitlines():
        if line.startswith(_ERROR_PREFIXES):
            raise Bmv2RuntimeError(f"{where}: {command!r} failed: {line.strip()}")
