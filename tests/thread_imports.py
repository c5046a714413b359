"""Finds modules imported for the first time on a thread other than the main thread.

Why: Python takes one lock per module while it imports it. Two threads that import
overlapping module graphs for the first time at once can each hold one module's lock and
wait for the other's: the process hangs for ever (issue 29: the reliability campaign's
teardown thread imported ``topo.nodes`` -> Mininet -> ``pkg_resources`` -> ``heapq`` while
the main thread imported ``controller.fabric`` -> ``concurrent.futures`` -> ``heapq``). The
deadlock needs an unlucky interleaving, so waiting for it proves nothing; a first import on a
thread is the cause, and it is seen every time the code path runs. The project's rule: a
thread imports nothing new, everything it uses is imported before it starts.

:class:`ThreadImportRecorder` is a finder placed first on ``sys.meta_path``. The import
system asks the finders only about modules that are not in ``sys.modules`` yet (and every
``import`` statement, ``importlib.import_module`` and ``__import__`` goes that way), so each
question from a thread that is not the main thread is a first import on a thread; it is
recorded with the thread's name and the frames that asked, and the finder answers "not
mine" so the import goes on as usual.

It also records every ``ast.parse`` on a thread other than the main one (module
``"<ast.parse>"``; seen through the interpreter's ``compile`` audit event): CPython 3.11
before 3.11.8 keeps the AST constructor's recursion counter in the interpreter, not the
thread (gh-106905), so two threads parsing at once fail with "AST constructor recursion
depth mismatch". numpy reads ``.npy`` headers with ``ast.literal_eval``: two training ranks
decoding ``.npz`` shards on threads failed that way in a fresh-clone suite run.

Run a program under it (as ``python -m`` would run the module)::

    python -m tests.thread_imports --report FILE -m MODULE [ARGS...]

Each finding is appended to FILE at once, as one JSON line, so a process that is killed
(a switch stopped with SIGKILL) keeps what it found. :func:`read_report` reads them back.
"""

from __future__ import annotations

import ast
import json
import os
import runpy
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import FrameType, ModuleType

REPO_ROOT = Path(__file__).resolve().parent.parent
#: frames of the import machinery itself are left out of a finding's stack
_MACHINERY = ("<frozen importlib", "thread_imports.py")
STACK_FRAMES = 80
AST_PARSE = "<ast.parse>"  # the module name of a finding that is a parse, not an import
MAX_LINES = 30  # of a summary


_AST_PARSE_CODE = ast.parse.__code__


@dataclass(frozen=True)
class Finding:
    """One first import on a thread: the module, the thread's name and who asked
    (innermost frame first, ``file:line function``)."""

    module: str
    thread: str
    stack: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.module!r} on thread {self.thread!r}, from " + " <- ".join(self.stack[:6])


def _stack(frame: FrameType | None) -> tuple[str, ...]:
    out: list[str] = []
    while frame is not None and len(out) < STACK_FRAMES:
        name = frame.f_code.co_filename
        if not name.startswith(_MACHINERY[0]) and not name.endswith(_MACHINERY[1]):
            out.append(f"{name}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return tuple(out)


class ThreadImportRecorder:
    """A meta path finder that records first imports on threads other than the main one
    (appending each to ``report`` as a JSON line when given) and finds nothing itself."""

    def __init__(self, report: Path | None = None) -> None:
        self.findings: list[Finding] = []
        self._main = threading.main_thread().ident
        self._fd = (os.open(report, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    if report is not None else None)
        self._installed = self._hooked = False

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if threading.get_ident() == self._main or not self._exists(name, path, target):
            return None
        # no imports here: this runs inside an import, on a thread
        self._record(Finding(name, threading.current_thread().name, _stack(sys._getframe(1))))
        return None

    def _exists(self, name: str, path: Sequence[str] | None,
                target: ModuleType | None) -> bool:
        """Whether a later finder finds ``name``. An import that fails (a library probing for
        an optional module, as ply does for its table modules) runs no module code and waits
        for no other module's lock, so it cannot take part in the deadlock."""
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            if finder.find_spec(name, path, target) is not None:
                return True
        return False

    def _record(self, finding: Finding) -> None:
        self.findings.append(finding)
        if self._fd is not None:
            line = json.dumps({"module": finding.module, "thread": finding.thread,
                               "stack": list(finding.stack), "pid": os.getpid()})
            os.write(self._fd, (line + "\n").encode())

    def _audit(self, event: str, args: tuple[object, ...]) -> None:
        """An ``ast.parse`` (a ``compile`` event raised from ``ast.parse``'s frame) on a
        thread other than the main one."""
        if (event != "compile" or not self._installed
                or threading.get_ident() == self._main):
            return
        caller = sys._getframe(1)
        if caller.f_code is _AST_PARSE_CODE:
            self._record(Finding(AST_PARSE, threading.current_thread().name, _stack(caller)))

    def install(self) -> ThreadImportRecorder:
        """Put the finder first on ``sys.meta_path`` and add the audit hook (which stays for
        the process's life: audit hooks cannot be removed)."""
        sys.meta_path.insert(0, self)
        if not self._hooked:
            sys.addaudithook(self._audit)
            self._hooked = True
        self._installed = True
        return self

    def uninstall(self) -> None:
        self._installed = False
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def read_report(path: Path) -> list[Finding]:
    """The findings appended to ``path`` (none when it does not exist)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Finding(d["module"], d["thread"], tuple(d["stack"])))
    return out


def _trigger(finding: Finding, root: str) -> str:
    """The innermost frame of this project (not of a library) that led to the import."""
    for frame in finding.stack:
        if frame.startswith(root + "/") and not frame.startswith(root + "/.venv/"):
            return frame[len(root) + 1:]
    return finding.stack[0] if finding.stack else "?"


def _what(mods: list[str]) -> str:
    imports = [m for m in mods if m != AST_PARSE]
    parts = ["called ast.parse"] if AST_PARSE in mods else []
    if imports:
        parts.append(f"imported {', '.join(imports[:5])}"
                     + (f" and {len(imports) - 5} more" if len(imports) > 5 else ""))
    return "; ".join(parts)


def summary(findings: Sequence[Finding], root: Path = REPO_ROOT) -> str:
    """One line per (thread, line of this project that imported): the modules it imported
    first there (the first few), for a failure message."""
    groups: dict[tuple[str, str], list[str]] = {}
    for f in findings:
        mods = groups.setdefault((f.thread, _trigger(f, str(root))), [])
        if f.module not in mods:
            mods.append(f.module)
    lines = [f"thread {thread!r} at {where}: " + _what(mods) for (thread, where), mods
             in groups.items()]
    if len(lines) > MAX_LINES:
        lines[MAX_LINES:] = [f"... and {len(lines) - MAX_LINES} more places"]
    return "\n".join(lines)


def wrap_argv(report: Path, module: str, args: Sequence[str]) -> list[str]:
    """The command line that runs ``python -m module args`` under the recorder (run it with
    the repository as the working directory)."""
    return [sys.executable, "-m", "tests.thread_imports", "--report", str(report), "-m",
            module, *args]


def main(argv: Sequence[str] | None = None) -> None:
    """``--report FILE -m MODULE [ARGS...]`` (in this order: everything after MODULE is the
    module's own)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--report" or args[2] != "-m":
        sys.exit("usage: python -m tests.thread_imports --report FILE -m MODULE [ARGS...]")
    ThreadImportRecorder(Path(args[1])).install()
    sys.argv = [args[3], *args[4:]]
    runpy.run_module(args[3], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
