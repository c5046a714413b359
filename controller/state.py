"""The controller's record of what it configured: ``<rundir>/controller_state.json``.

The file holds intent (jobs with all their allocations, whether routes are programmed,
injected faults, per-switch allocation counters, the last election id used), never raw
entities: those are derived again from it and the P4Info. Writers take an exclusive
``flock`` on ``controller_state.lock`` and replace the file atomically, so a long-running
controller and one-shot CLI commands can share a run directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import StateError
from controller.jobs import JobPlan, SwitchAlloc

STATE_FILE = "controller_state.json"
LOCK_FILE = "controller_state.lock"
VERSION = 1


@dataclass
class ControllerState:
    election_id: int = 0
    routes: bool = False
    jobs: dict[int, JobPlan] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    allocs: dict[str, SwitchAlloc] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "election_id": self.election_id,
            "routes": self.routes,
            "jobs": {str(k): v.to_dict() for k, v in sorted(self.jobs.items())},
            "faults": self.faults,
            "allocs": {k: v.to_dict() for k, v in sorted(self.allocs.items())},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str) -> ControllerState:
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise StateError(f"{source}: not a version-{VERSION} controller state file")
        try:
            return cls(
                election_id=int(data.get("election_id", 0)),
                routes=bool(data.get("routes", False)),
                jobs={int(k): JobPlan.from_dict(v) for k, v in data.get("jobs", {}).items()},
                faults=list(data.get("faults", [])),
                allocs={k: SwitchAlloc(**v) for k, v in data.get("allocs", {}).items()},
            )
        except (KeyError, TypeError, ValueError) as err:
            raise StateError(f"{source}: malformed controller state ({err})") from None

    def job(self, key: str | int) -> JobPlan:
        """A job by name or id; KeyError with the known names otherwise."""
        for plan in self.jobs.values():
            if plan.name == str(key) or str(plan.job_id) == str(key):
                return plan
        names = ", ".join(p.name for p in self.jobs.values()) or "none"
        raise KeyError(f"unknown job {key!r} (jobs: {names})")


def load_state(rundir: Path) -> ControllerState:
    path = rundir / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ControllerState()
    except OSError as err:
        raise StateError(f"{path}: cannot read: {err.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise StateError(f"{path}: not JSON ({err})") from None
    return ControllerState.from_dict(data, str(path))


def save_state(rundir: Path, state: ControllerState) -> None:
    path = rundir / STATE_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state.to_dict(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(rundir: Path) -> Iterator[None]:
    """Hold the run directory's state lock (blocks until free)."""
    rundir.mkdir(parents=True, exist_ok=True)
    with (rundir / LOCK_FILE).open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def forget(rundir: Path) -> bool:
    """Drops the record of what an earlier network in ``rundir`` was configured with (a new
    network starts with empty switches: its jobs, routes and faults are gone); True when
    there was one. A second run with the same ``--rundir`` failed to create its job,
    "a job named 'allreduce' already exists", from the first run's record."""
    with locked(rundir):
        try:
            (rundir / STATE_FILE).unlink()
        except FileNotFoundError:
            return False
        return True


def next_election_id(rundir: Path) -> int:
    """A fresh election id, higher than any this run directory handed out before: the
    newest controller becomes primary."""
    with locked(rundir):
        state = load_state(rundir)
        state.election_id += 1
        save_state(rundir, state)
        return state.election_id
