"""What emulated networks of one name prefix left behind, looked up without touching
anything of other users: root-namespace interfaces named with the prefix, Mininet shells of
the prefix's nodes, processes naming the runs root, every process that carries the
campaign's tag in its environment (:data:`TAG_VARIABLE`, inherited by everything a tagged
run starts: switches, host shells, the workers in the hosts), the network namespaces those
hold, and run-directory state locks still held."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

SYS_CLASS_NET = Path("/sys/class/net")
LOCK_FILES = ("controller_state.lock",)
TAG_VARIABLE = "INA_SOAK_TAG"


@dataclass
class Leaks:
    interfaces: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)  # "pid: argv"
    namespaces: list[str] = field(default_factory=list)  # net:[inode] held by those
    locks: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.interfaces) + len(self.processes) + len(self.namespaces) + len(self.locks)

    def as_dict(self) -> dict[str, list[str]]:
        return {"interfaces": self.interfaces, "processes": self.processes,
                "namespaces": self.namespaces, "locks": self.locks}

    def describe(self) -> str:
        parts = [f"{len(v)} {k} ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})"
                 for k, v in self.as_dict().items() if v]
        return "; ".join(parts) or "nothing"


def _netns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _cmdline(pid: str) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0") if raw else None


def _tagged(pid: str, tag: bytes) -> bool:
    try:
        return tag in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _ancestors() -> set[int]:
    """This process's ancestors (up to init)."""
    out: set[int] = set()
    pid = os.getppid()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _leaked_process(pid: str, prefix: str, root: str, marker: bytes | None) -> str | None:
    """The command line of a process of ours (a Mininet shell of the prefix, one naming a
    run directory under ``root``, or one carrying the tag); None for any other."""
    argv = _cmdline(pid)
    if argv is None:
        return None
    text = " ".join(argv)
    shell = f"mininet:{prefix}" in text
    ours = root in text
    tagged = marker is not None and _tagged(pid, marker)
    return text if shell or ours or tagged else None


def _held_locks(runs_root: Path) -> list[str]:
    """The run-directory lock files some process still holds."""
    held = []
    for lock in sorted(p for name in LOCK_FILES for p in runs_root.glob(f"*/{name}")):
        with lock.open("a") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            except OSError:
                held.append(str(lock))
    return held


def find_leaks(prefix: str, runs_root: Path, tag: str | None = None,
               exclude: set[int] | None = None) -> Leaks:
    """Leftovers of the networks named ``prefix`` whose run directories are under
    ``runs_root`` and whose processes carry ``TAG_VARIABLE=tag`` (processes in ``exclude``,
    this process and its ancestors are not counted)."""
    found = Leaks()
    try:
        found.interfaces = sorted(i for i in os.listdir(SYS_CLASS_NET) if i.startswith(prefix))
    except OSError:
        pass
    root_ns = _netns(os.getpid())  # the namespace the networks were started from
    root = str(runs_root.resolve())
    marker = f"{TAG_VARIABLE}={tag}".encode() if tag else None
    skip = set(exclude or ()) | {os.getpid()} | _ancestors()
    spaces: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        text = _leaked_process(entry, prefix, root, marker)
        if text is not None:
            found.processes.append(f"{entry}: {text[:120]}")
            ns = _netns(entry)
            if ns is not None and ns != root_ns:
                spaces.add(ns)
    found.namespaces = sorted(spaces)
    netns_dir = Path("/run/netns")
    if netns_dir.is_dir():
        found.namespaces += sorted(f"/run/netns/{n}" for n in os.listdir(netns_dir)
                                   if n.startswith(prefix))
    found.locks = _held_locks(runs_root)
    return found
