"""The run directory: everything one run of the testbed leaves behind, in one place.

Layout (default ``./run/<YYYYmmdd-HHMMSS>/``, with ``run/latest`` pointing at the newest)::

    topology.json   the network as started (schema in docs/topology.md)
    pids.json       every process this run started, for `make clean` (topo/cleanup.py)
    logs/<node>.log one log per switch (its own log plus its stdout/stderr)
    pcaps/          per-port captures, when enabled
    build/          the compiled program: P4Info (text format) and the target's device config
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fabricspec
from topo.errors import TopologyFileError
from topo.model import Topology, topology_to_dict

log = logging.getLogger(__name__)

DEFAULT_RUNS_ROOT = Path("run")
TOPOLOGY_FILE = fabricspec.TOPOLOGY_FILE
PIDS_FILE = "pids.json"
LATEST = "latest"
CMDLINE_WAIT_S = 2.0


# Mininet's mnexec runs a command in a host's namespaces by exec-ing it: right after the
# fork, /proc shows mnexec's own argv (``mnexec -da SHELL_PID python ...``), then the
# command's. Options that take an argument: -a PID, -g GROUP, -r PRIO.
MNEXEC = "mnexec"
MNEXEC_ARG_OPTIONS = frozenset("agr")


def exec_target(cmdline: Sequence[str]) -> tuple[str, ...] | None:
    """The command an ``mnexec ...`` command line becomes once mnexec has exec-ed it; None
    when ``cmdline`` is not mnexec's."""
    if not cmdline or Path(cmdline[0]).name != MNEXEC:
        return None
    i = 1
    while i < len(cmdline) and cmdline[i].startswith("-") and len(cmdline[i]) > 1:
        i += 1 + sum(1 for c in cmdline[i][1:] if c in MNEXEC_ARG_OPTIONS)
    target = tuple(cmdline[i:])
    return target or None


def read_cmdline(pid: int) -> list[str] | None:
    """The argv of a live process from /proc, or None when it is gone (or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


@dataclass(frozen=True)
class ProcessRecord:
    """One started process: ``cmdline`` as /proc showed it, so cleanup can tell it is ours."""

    name: str
    kind: str  # "switch", "host-shell", "switch-shell", ...
    pid: int
    pgid: int | None
    cmdline: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "pid": self.pid, "pgid": self.pgid,
                "cmdline": list(self.cmdline)}


class RunDir:
    """One run's directory; owns ``pids.json`` and ``topology.json`` in it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.logs = self.path / "logs"
        self.pcaps = self.path / "pcaps"
        self.build = self.path / "build"
        self._processes: list[ProcessRecord] = []

    @classmethod
    def create(cls, path: str | Path | None = None, root: str | Path = DEFAULT_RUNS_ROOT,
               link_latest: bool = True) -> RunDir:
        """A new run directory: ``path`` or ``root/<timestamp>``; points ``root/latest`` at
        it (only for directories made under ``root``)."""
        if path is None:
            root = Path(root)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = root / stamp
            n = 1
            while path.exists():
                n += 1
                path = root / f"{stamp}-{n}"
        rundir = cls(path)
        for sub in (rundir.path, rundir.logs, rundir.build):
            sub.mkdir(parents=True, exist_ok=True)
        rundir._write_pids()
        if link_latest and rundir.path.parent == Path(root).resolve():
            latest = rundir.path.parent / LATEST
            tmp = rundir.path.parent / f".{LATEST}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(rundir.path.name)
            os.replace(tmp, latest)
        return rundir

    # ------------------------------------------------------------------ files
    @property
    def topology_path(self) -> Path:
        return self.path / TOPOLOGY_FILE

    @property
    def pids_path(self) -> Path:
        return self.path / PIDS_FILE

    def log_path(self, node: str) -> Path:
        """``logs/<node>.log``."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / f"{node}.log"

    def pcap_dir(self) -> Path:
        """``pcaps/`` (created)."""
        self.pcaps.mkdir(parents=True, exist_ok=True)
        return self.pcaps

    def write_topology(self, topology: Topology) -> Path:
        """Writes ``topology.json`` (atomically)."""
        _write_json_atomic(self.topology_path, topology_to_dict(topology))
        return self.topology_path

    # ------------------------------------------------------------------ processes
    def record_process(self, name: str, kind: str, pid: int, pgid: int | None = None) -> None:
        """Adds a started process to ``pids.json``, with its /proc cmdline as proof of
        identity for a later cleanup."""
        # Right after fork+exec the new image's argv may not be visible yet (the parent
        # learns of the exec before the kernel has set it up), and an mnexec wrapper shows
        # its own argv until it execs the command: look again for a moment. A record that
        # keeps mnexec's argv still matches the command (topo.cleanup.is_same_process).
        deadline = time.monotonic() + CMDLINE_WAIT_S
        cmdline = read_cmdline(pid)
        while ((cmdline is None or exec_target(cmdline) is not None)
               and time.monotonic() < deadline and Path(f"/proc/{pid}").exists()):
            time.sleep(0.01)
            cmdline = read_cmdline(pid) or cmdline
        if cmdline is None:
            log.debug("process %s (pid %d) exited before it could be recorded", name, pid)
            return
        self._processes.append(ProcessRecord(name, kind, pid, pgid, tuple(cmdline)))
        self._write_pids()

    def processes(self) -> list[ProcessRecord]:
        """What this object recorded so far."""
        return list(self._processes)

    def _write_pids(self) -> None:
        owner = {"pid": os.getpid(), "cmdline": read_cmdline(os.getpid()) or []}
        _write_json_atomic(self.pids_path, {
            "owner": owner,
            "processes": [p.as_dict() for p in self._processes],
        })


def read_pids(path: str | Path) -> tuple[dict[str, Any], list[ProcessRecord]]:
    """(owner, processes) from a ``pids.json``; raises TopologyFileError when unreadable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TopologyFileError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise TopologyFileError(f"{path}: expected a JSON object")
    found = data.get("owner")
    owner: dict[str, Any] = found if isinstance(found, dict) else {}
    records = []
    for item in data.get("processes", []):
        try:
            records.append(ProcessRecord(
                str(item["name"]), str(item["kind"]), int(item["pid"]),
                None if item.get("pgid") is None else int(item["pgid"]),
                tuple(str(a) for a in item["cmdline"]),
            ))
        except (KeyError, TypeError, ValueError):
            raise TopologyFileError(f"{path}: malformed process record {item!r}") from None
    return owner, records


def load_topology(path: str | Path) -> Topology:
    """The :class:`Topology` in a ``topology.json``, or in a run directory containing one
    (``run/latest`` works). Raises :class:`TopologyFileError` with the reason."""
    try:
        return fabricspec.read_topology(
            path, "is a network running? start one with `make run`")
    except fabricspec.FabricSpecError as exc:
        raise TopologyFileError(str(exc)) from None
