"""Remove what earlier runs left behind (``make clean`` calls ``python -m topo.cleanup``).

Only what a run recorded is touched: a process is killed only when its pid is in some
``run/*/pids.json`` *and* ``/proc/PID/cmdline`` still equals the recorded command line (so a
reused pid is never hit), and only runs whose owner (the process that started the network)
is gone are cleaned. Mininet's host namespaces are anonymous and die with their recorded
shells; the root-namespace ends of switch links (``<switch>-eth<N>``) of the recorded switch
names are deleted explicitly, and so are the delay nodes'. Nothing is killed by name.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topo.errors import TopoError
from topo.rundir import (
    DEFAULT_RUNS_ROOT,
    PIDS_FILE,
    ProcessRecord,
    exec_target,
    read_cmdline,
    read_pids,
)
from topo.rundir import load_topology as _load_topology

log = logging.getLogger(__name__)

SYS_CLASS_NET = Path("/sys/class/net")
#: pids.json kinds of root-namespace nodes, whose ``<name>-eth<N>`` interfaces are removed:
#: switches and delay nodes (``topo.delaynodes``), their processes and Mininet shells.
ROOT_NODE_KINDS = ("switch", "switch-shell", "wire", "wire-shell")
KILL_WAIT_S = 3.0


@dataclass
class CleanupReport:
    """What a cleanup did."""

    killed: list[str] = field(default_factory=list)  # "name (pid N)"
    interfaces: list[str] = field(default_factory=list)
    skipped_runs: list[str] = field(default_factory=list)  # owner still alive
    errors: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Human-readable summary."""
        out = []
        if self.killed:
            out.append(f"stopped {len(self.killed)} process(es): {', '.join(self.killed)}")
        if self.interfaces:
            out.append(f"removed {len(self.interfaces)} interface(s): {', '.join(self.interfaces)}")
        for run in self.skipped_runs:
            out.append(f"left {run} alone: the process that started it is still running")
        out.extend(f"error: {e}" for e in self.errors)
        return out or ["nothing to clean"]


def switch_interfaces(switch_names: Iterable[str]) -> list[str]:
    """Root-namespace interfaces named ``<switch>-eth<N>`` for the given switches."""
    names = set(switch_names)
    if not names:
        return []
    pattern = re.compile(r"^(?P<node>.+)-eth\d+$")
    try:
        present = sorted(os.listdir(SYS_CLASS_NET))
    except OSError:
        return []
    return [i for i in present if (m := pattern.match(i)) and m.group("node") in names]


def remove_interfaces(intfs: Iterable[str]) -> list[str]:
    """Deletes the given links (a veth's peer goes with it); returns those removed."""
    removed = []
    for intf in intfs:
        if not (SYS_CLASS_NET / intf).exists():
            continue  # went away with its peer
        res = subprocess.run(["ip", "link", "del", "dev", intf], capture_output=True, text=True,
                             check=False)
        if res.returncode == 0:
            removed.append(intf)
        elif (SYS_CLASS_NET / intf).exists():
            log.warning("cannot delete interface %s: %s", intf, res.stderr.strip())
    return removed


def is_same_process(record: ProcessRecord) -> bool:
    """True when the recorded pid is alive and still runs the recorded command line, or the
    command a recorded ``mnexec`` line became (recorded before mnexec exec-ed it: a worker
    in a host left running after its run was killed was never stopped)."""
    current = read_cmdline(record.pid)
    if current is None:
        return False
    return tuple(current) in (tuple(record.cmdline), exec_target(record.cmdline))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return Path(f"/proc/{pid}").exists() and read_cmdline(pid) is not None


def stop_recorded(records: Sequence[ProcessRecord], wait_s: float = KILL_WAIT_S) -> list[str]:
    """SIGTERM (then SIGKILL) every recorded process that is still ours; returns names."""
    ours = [r for r in records if is_same_process(r)]
    for rec in ours:
        _signal(rec, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while any(_alive(r.pid) for r in ours) and time.monotonic() < deadline:
        time.sleep(0.05)
    for rec in ours:
        if _alive(rec.pid) and is_same_process(rec):
            _signal(rec, signal.SIGKILL)
    return [f"{r.name} (pid {r.pid})" for r in ours]


def _signal(rec: ProcessRecord, sig: int) -> None:
    try:
        if rec.pgid is not None and rec.pgid == rec.pid and os.getpgid(rec.pid) == rec.pgid:
            os.killpg(rec.pgid, sig)
        else:
            os.kill(rec.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        log.warning("cannot signal %s (pid %d): %s", rec.name, rec.pid, exc)


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def namespace_members(records: Sequence[ProcessRecord]) -> list[ProcessRecord]:
    """Processes inside the network namespaces of the recorded host shells that are still
    ours (workers a run started in its hosts): they would keep a namespace alive after its
    shell is gone. Never the root namespace's (nor this process's) members."""
    shared = {_netns(1), _netns(os.getpid()), None}
    spaces = {ns for r in records if r.kind == "host-shell" and is_same_process(r)
              if (ns := _netns(r.pid)) not in shared}
    if not spaces:
        return []
    recorded = {r.pid for r in records}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in recorded:
            continue
        pid = int(entry)
        if _netns(pid) in spaces and (cmdline := read_cmdline(pid)) is not None:
            found.append(ProcessRecord(cmdline[0].rsplit("/", 1)[-1], "in-host", pid, None,
                                       tuple(cmdline)))
    return found


def _switch_names(run: Path, records: Sequence[ProcessRecord]) -> set[str]:
    names = {r.name for r in records if r.kind in ROOT_NODE_KINDS}
    try:
        names.update(s.name for s in _load_topology(run).switches)
    except TopoError:
        pass
    return names


def _owner_alive(owner: dict[str, object]) -> bool:
    owner_pid, owner_cmd = owner.get("pid"), owner.get("cmdline")
    return (isinstance(owner_pid, int) and owner_pid != os.getpid() and bool(owner_cmd)
            and isinstance(owner_cmd, list) and read_cmdline(owner_pid) == owner_cmd)


def clean_run(run: Path, force: bool = False, protect: Iterable[str] = ()) -> CleanupReport:
    """Cleans one run directory's leftovers (unless its owner still runs, or ``force``);
    interfaces of the switches named in ``protect`` (a live run's) are left alone."""
    report = CleanupReport()
    try:
        owner, records = read_pids(run / PIDS_FILE)
    except TopoError as exc:
        report.errors.append(str(exc))
        return report
    if not force and _owner_alive(owner):
        report.skipped_runs.append(str(run))
        return report
    # what runs inside the hosts first: it keeps their namespaces alive otherwise
    report.killed += stop_recorded(namespace_members(records))
    report.killed += stop_recorded(records)
    names = _switch_names(run, records) - set(protect)
    report.interfaces += remove_interfaces(switch_interfaces(names))
    return report


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """SIGINT held back (on the main thread) until the block ends, then delivered.

    A cleanup cut short by Ctrl-C left a dead run's processes SIGTERMed but never waited for
    nor SIGKILLed, or not signalled at all, while the interrupted run itself ended: the
    reliability campaign found a switch of the dead run still there 10 s after the
    interrupted run's end. The cleanup takes seconds at most; the interrupt comes after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A handler that notes the signal, not a blocked mask: a process-directed SIGINT goes to
    # any thread that does not block it (gRPC's, the live view's), and Python then runs the
    # handler on the main thread at once, mask or not.
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


def clean_all(root: str | Path = DEFAULT_RUNS_ROOT, force: bool = False) -> CleanupReport:
    """Cleans every run under ``root`` (``run/*/pids.json``); a SIGINT meanwhile is
    delivered when the cleanup is done."""
    with _sigint_deferred():
        return _clean_all(Path(root), force)


def _clean_all(root: Path, force: bool) -> CleanupReport:
    total = CleanupReport()
    if not root.is_dir():
        return total
    runs = [p.parent for p in sorted(root.glob(f"*/{PIDS_FILE}")) if not p.parent.is_symlink()]
    # switch names of runs still going: an older run with the same names must not take
    # their interfaces
    live: set[str] = set()
    if not force:
        for run in runs:
            try:
                owner, records = read_pids(run / PIDS_FILE)
            except TopoError:
                continue
            if _owner_alive(owner):
                live |= _switch_names(run, records)
    for run in runs:
        one = clean_run(run, force, live)
        total.killed += one.killed
        total.interfaces += one.interfaces
        total.skipped_runs += one.skipped_runs
        total.errors += one.errors
    return total


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m topo.cleanup [--runs DIR] [--force]``."""
    parser = argparse.ArgumentParser(prog="python -m topo.cleanup",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=str(DEFAULT_RUNS_ROOT), help="runs root (default run/)")
    parser.add_argument("--force", action="store_true",
                        help="also clean runs whose starting process is still alive")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("topo.cleanup: not root: only processes of this user can be stopped, and no "
              "interfaces removed", file=sys.stderr)
    report = clean_all(args.runs, args.force)
    for line in report.lines():
        print(f"topo.cleanup: {line}")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
