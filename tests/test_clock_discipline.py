"""Every timer and measured time of the host side goes through one ``vtime.VirtualClock``.

Time dilation (docs/workloads.md, "Time dilation") only holds if no code of ``workloads/`` or
``train/`` reads or waits on the machine's clock behind the clock's back: one
``time.monotonic()`` in a timer, one ``sock.settimeout(5)``, and that timer runs TDF times
too fast in emulated time. This test reads the source (an AST scan, nothing is imported or
run) and names every such place:

* reading real time: ``time.time / time_ns / monotonic / monotonic_ns / perf_counter /
  perf_counter_ns``, ``datetime.now / utcnow / today``, ``from time import ...`` of those;
* waiting on it: ``time.sleep``, ``signal.alarm / setitimer``, and the timeout argument of
  ``settimeout``, ``setdefaulttimeout``, ``create_connection``, ``select.select``,
  ``poll``, ``wait`` / ``wait_for`` (Event, Condition, Popen), thread ``join``,
  queue ``get`` / ``put``, lock ``acquire``, future ``result``, ``communicate``,
  ``threading.Timer``: a timeout passes only when it is converted from emulated seconds at
  the call (it contains a ``<clock>.real(...)`` call) or is ``None`` / ``0``.

CPU-time clocks (``os.times``, ``time.thread_time``, ``time.process_time``) are not flagged:
they measure this machine's work, which is what the CPU figures report. The allowlist below
is short and says why each entry must stay on the machine's clock.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("workloads", "train")

READ_TIME = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
             "perf_counter_ns", "sleep"}
READ_DATETIME = {"now", "utcnow", "today"}
READ_SIGNAL = {"alarm", "setitimer"}
#: method or function name -> position of its timeout argument (None: keyword only)
WAITS: dict[str, int | None] = {
    "settimeout": 0, "setdefaulttimeout": 0, "create_connection": 1, "select": 3, "poll": 0,
    "wait": 0, "wait_for": 1, "join": 0, "get": None, "put": None, "acquire": 1,
    "result": 0, "communicate": None, "Timer": 0,
}

#: (file, enclosing function, what) -> why it reads the machine's clock on purpose
ALLOWED = {
    ("workloads/__main__.py", "cmd_replay", "time.time"):
        "the results file's stamp of when it was written, not a measured interval",
    ("workloads/comm.py", "close", "join"):
        "the reader threads only have to notice the shutdown: a real-time bound",
    ("workloads/roce.py", "close", "join"):
        "the I/O thread only has to notice the close: a real-time bound",
    ("workloads/roce.py", "_loop", "poll"):
        "waits until the next retransmission deadline (clock.real of it) or POLL_CAP real "
        "seconds, the loop's real-time look at its own state",
    ("train/launch.py", "_stop", "wait"):
        "the grace between SIGTERM and SIGKILL: how long a process takes to exit is the "
        "machine's business, not the emulated world's",
}


@dataclass(frozen=True)
class Finding:
    """One read of, or wait on, the machine's clock."""

    path: str
    line: int
    col: int
    function: str
    what: str

    def __str__(self) -> str:
        return (f"{self.path}:{self.line}:{self.col}: {self.what} in {self.function or '<module>'} "
                "uses the machine's clock; go through the VirtualClock (now, sleep, real)")


def _converted(expr: ast.expr) -> bool:
    """A timeout that is None, 0, or converted from emulated seconds (``x.real(...)``)."""
    if isinstance(expr, ast.Constant) and expr.value in (None, 0):
        return True
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "real" for n in ast.walk(expr))


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.time_names = {"time"}  # names bound to the time module
        self.found: list[Finding] = []

    def _add(self, node: ast.AST, what: str) -> None:
        fn = next((s for s in reversed(self.scope)), "")
        self.found.append(Finding(self.path, getattr(node, "lineno", 0),
                                  getattr(node, "col_offset", 0), fn, what))

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = _scoped
    visit_AsyncFunctionDef = _scoped
    visit_ClassDef = _scoped

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "time" and alias.asname:
                self.time_names.add(alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "time":
            for alias in node.names:
                if alias.name in READ_TIME:
                    self._add(node, f"from time import {alias.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value
        if isinstance(base, ast.Name):
            if base.id in self.time_names and node.attr in READ_TIME:
                self._add(node, f"time.{node.attr}")
            elif base.id == "signal" and node.attr in READ_SIGNAL:
                self._add(node, f"signal.{node.attr}")
        if node.attr in READ_DATETIME and (
                (isinstance(base, ast.Name) and base.id in ("datetime", "date"))
                or (isinstance(base, ast.Attribute) and base.attr in ("datetime", "date"))):
            self._add(node, f"datetime.{node.attr}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else None
        if name in WAITS:
            timeout = self._timeout(node, name, func)
            if timeout is not None and not _converted(timeout):
                self._add(node, name)
        self.generic_visit(node)

    @staticmethod
    def _timeout(node: ast.Call, name: str, func: ast.expr) -> ast.expr | None:
        for kw in node.keywords:
            if kw.arg == "timeout":
                return kw.value
        pos = WAITS[name]
        if pos is None or len(node.args) <= pos:
            return None
        if name == "wait" and len(node.args) != 1:
            return None  # RoceEndpoint.wait(ready, deadline, what): an emulated deadline
        if name == "join":
            if len(node.args) != 1 or not isinstance(func, ast.Attribute) \
                    or isinstance(func.value, ast.Constant) \
                    or isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)):
                return None  # "sep".join(parts), os.path.join(a, b)
        if name == "get":
            return None  # dict.get(key): only get(timeout=...) waits
        return node.args[pos]


def scan(path: Path, rel: str) -> list[Finding]:
    """Every read of, or wait on, the machine's clock in one source file."""
    scanner = _Scanner(rel)
    scanner.visit(ast.parse(path.read_text(), filename=rel))
    return scanner.found


def scan_tree(root: Path = ROOT) -> list[Finding]:
    found: list[Finding] = []
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            found += scan(path, path.relative_to(root).as_posix())
    return found


def test_host_side_reads_time_only_through_the_virtual_clock() -> None:
    """No module of workloads/ or train/ reads or waits on real time outside the allowlist."""
    found = [f for f in scan_tree() if (f.path, f.function, f.what) not in ALLOWED]
    assert not found, "\n".join(map(str, found))


def test_allowlist_has_no_stale_entries() -> None:
    """Every allowlist entry still matches code (a fixed place leaves the list)."""
    keys = {(f.path, f.function, f.what) for f in scan_tree()}
    assert set(ALLOWED) <= keys, sorted(set(ALLOWED) - keys)


@pytest.mark.parametrize("source", [
    "import time\nt = time.monotonic()",
    "import time\nt = time.perf_counter()",
    "import time\ntime.sleep(1)",
    "import time as t\nx = t.time()",
    "from time import monotonic",
    "import datetime\nx = datetime.datetime.now()",
    "def f(s):\n    s.settimeout(5.0)",
    "def f(cv, r):\n    cv.wait(min(r, 0.5))",
    "def f(ev):\n    ev.wait(timeout=2)",
    "def f(q):\n    q.get(timeout=1.0)",
    "def f(t):\n    t.join(5.0)",
    "def f(t):\n    t.join(timeout=5.0)",
    "import select\ndef f(r):\n    select.select(r, [], [], 0.5)",
    "def f(p):\n    p.poll(200)",
    "import socket\ndef f(a):\n    socket.create_connection(a, 5)",
    "import socket\ndef f(a, r):\n    socket.create_connection(a, timeout=min(r, 5.0))",
])
def test_scanner_finds_real_time(source: str) -> None:
    """The scan flags each way of reading or waiting on the machine's clock."""
    tree = ast.parse(source)
    scanner = _Scanner("x.py")
    scanner.visit(tree)
    assert scanner.found, source


@pytest.mark.parametrize("source", [
    "def f(clock):\n    t = clock.now()\n    clock.sleep(1)",
    "def f(s, clock):\n    s.settimeout(clock.real(5.0))",
    "def f(s):\n    s.settimeout(None)",
    "def f(cv, clock, r):\n    cv.wait(clock.real(min(r, 0.5)))",
    "def f(ep, d):\n    ep.wait(lambda: True, d, 'what')",
    "def f(q, clock):\n    q.get(timeout=clock.real(1.0))",
    "def f(d):\n    return d.get('k', 0)",
    "def f(xs):\n    return ', '.join(xs)",
    "def f(t, clock):\n    t.join(timeout=clock.real(5.0))",
    "def f(p):\n    return p.poll()",
    "import time\ndef f():\n    return time.thread_time()",
])
def test_scanner_passes_the_virtual_clock(source: str) -> None:
    """Reads and waits through the clock, and calls that only look alike, pass."""
    scanner = _Scanner("x.py")
    scanner.visit(ast.parse(source))
    assert not scanner.found, [str(f) for f in scanner.found]
