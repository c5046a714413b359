"""What an experiment uses of the things it is handed, as types: the running network, its run
directory and hosts, the controller (or a campaign's wrapper of its reads), the start-up
display and the live view; and the JSON records that cross process boundaries.

The Protocols name only what experiment/ calls, so :class:`topo.network.Network`,
:class:`topo.rundir.RunDir`, :class:`controller.fabric.Controller`,
:class:`topo.network.Stages` and :class:`liveview.server.LiveServer` fit them, and so do the
tests' fakes and the fault campaigns' read wrappers, without inheriting from anything.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, TypeAlias

from controller.jobs import JobRequest
from topo.model import Topology

# ----------------------------------------------------------------------------- records

#: A JSON value as :func:`json.loads` returns it.
JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
#: A JSON object decoded from another process or passed on as such: a line a host process
#: printed, a job plan (``job show --json``), a switch's counters. Its keys depend on who
#: wrote it, so its values are narrowed where they are read (the ``json_*`` functions).
JsonObject: TypeAlias = dict[str, JsonValue]


def json_object(value: JsonValue) -> JsonObject:
    """``value``, a JSON object (null reads as an empty one); ValueError naming it otherwise."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise ValueError(f"expected a JSON object, not {value!r}")


def json_list(value: JsonValue) -> list[JsonValue]:
    """``value``, a JSON array (null reads as an empty one); ValueError naming it otherwise."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise ValueError(f"expected a JSON array, not {value!r}")


def json_int(value: JsonValue) -> int:
    """``int(value)`` of a JSON number (or a numeric string); ValueError naming it otherwise."""
    if isinstance(value, bool | int | float | str):
        return int(value)
    raise ValueError(f"expected a number, not {value!r}")


def json_float(value: JsonValue) -> float:
    """``float(value)`` of a JSON number (or a numeric string); ValueError naming it otherwise."""
    if isinstance(value, bool | int | float | str):
        return float(value)
    raise ValueError(f"expected a number, not {value!r}")


# ----------------------------------------------------------------------------- the network


class RunDirectory(Protocol):
    """The run directory (:class:`topo.rundir.RunDir`)."""

    @property
    def path(self) -> str | Path: ...

    def record_process(self, name: str, kind: str, pid: int) -> None:
        """Notes a process in ``pids.json``, so that a later cleanup stops it."""


class HostNode(Protocol):
    """A host of the network: where commands run (a Mininet host)."""

    def popen(self, argv: list[str], /, *, cwd: str) -> subprocess.Popen[bytes]: ...


class RunningNetwork(Protocol):
    """A started network (:class:`topo.network.Network`)."""

    @property
    def topology(self) -> Topology: ...

    @property
    def rundir(self) -> RunDirectory: ...

    def node(self, name: str) -> HostNode: ...

    def stop(self) -> None: ...


# ----------------------------------------------------------------------------- the controller


class CounterReader(Protocol):
    """The port counters' reads: the controller, or a wrapper that retries them while a
    switch restarts (the reliability and scenario campaigns)."""

    @property
    def switches(self) -> Iterable[str]: ...

    def switch_counters(self, switch: str) -> JsonObject: ...


class JobPlan(Protocol):
    """A created job (:class:`controller.jobs.JobPlan`)."""

    def to_dict(self) -> JsonObject: ...


class FabricController(CounterReader, Protocol):
    """What an experiment asks of the controller (:class:`controller.fabric.Controller`)."""

    def push_pipeline(self) -> object: ...

    def program_routes(self) -> None: ...

    def create_job(self, request: JobRequest) -> JobPlan: ...

    def delete_job(self, key: str) -> object: ...

    def close(self) -> None: ...


# ----------------------------------------------------------------------------- displays


class StageDisplay(Protocol):
    """Shows the steps of a start-up (:class:`topo.network.Stages`)."""

    def stage(self, title: str) -> AbstractContextManager[None]: ...


class LiveView(Protocol):
    """A running live view (:class:`liveview.server.LiveServer`)."""

    def stop(self) -> None: ...
