"""Suite-wide pytest hooks and fixtures.

Markers (registered in pyproject.toml): ``slow`` for tests that take more than a few seconds,
``root`` for tests that need root (network namespaces, veths, Mininet); the latter are skipped
with a reason when the suite runs as another user.

Under pytest-xdist (``make test`` runs three workers on a machine with 2 cores) every test of
a module with a ``root`` test is in one xdist group, so they run one after another on one
worker: they build Mininet networks and namespaces, share the root namespace's interface
names and module-scoped networks, and are sensitive to CPU; the other tests spread over the
workers beside them (see :func:`_group` for why the group is set by hand). Each such module
also holds a machine-wide lock while it runs (tests/rootlock.py), so a second suite on the
same machine (CI testing a landing while a developer runs ``make test``) waits its turn.

A module whose ``root`` tests are all also marked ``netns`` (namespaces and veths of names
unique to the run, no Mininet, no fixed port, no rate or frame spacing to keep up; or
networks built only on namespaced machines of its own, tests/machines.py) is in a
second group, :data:`NETNS_GROUP`, with a lock of its own: the two groups are the two
largest units of work, so xdist starts them on different workers and the namespace tests
run beside the Mininet networks instead of after them.

The root group is the suite's critical path (its tests run one after another while the
other worker has time to spare), and its networks need the CPU: a worker running a test
outside the group does so at a lower priority (:data:`OTHER_TESTS_NICE`), so that it takes
the CPU the networks leave instead of slowing them down (see :func:`_priority`). The
namespace group keeps the session's priority too: its harnesses wait a fixed idle time for
a switch's last frame, which a niced switch beside busy networks can miss.

A suite started with SIGINT ignored (as a background job of a non-interactive shell: ``make
test &`` in a script) would pass that on to everything it starts, since Python keeps an
inherited SIG_IGN: the tests that interrupt a run or a cleanup with SIGINT would fail.
:func:`pytest_configure` gives SIGINT its usual handler first.
"""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rootlock import lock_path, machine_lock

REPO_ROOT = Path(__file__).resolve().parent.parent


#: The xdist group of every ``root`` test (``--dist loadgroup`` runs a group on one worker).
ROOT_GROUP = "root-network"

#: The xdist group of the modules whose ``root`` tests are all ``netns`` (namespace-only).
NETNS_GROUP = "root-netns"

#: The files of the modules with a ``root`` test and the group of each, kept on the config
#: at collection.
NETWORKED = pytest.StashKey[dict[Path, str]]()

#: How much nicer than the root group a worker runs the other tests (and what they start).
OTHER_TESTS_NICE = 5

#: The worker's own priority at the start of the session (the root group's).
BASE_NICE = pytest.StashKey[int]()


class SuiteTime:
    """Seconds spent in each root group's tests (each on one worker, one after another) and
    in the others (set-up, call and teardown of each), summed where the reports arrive (the
    controller under xdist) and printed at the end: where to cut when ``make test`` runs
    over its time."""

    def __init__(self) -> None:
        self.seconds = {"root group": 0.0, "netns group": 0.0, "other": 0.0}
        self.tests: dict[str, set[str]] = {kind: set() for kind in self.seconds}
        self.cpu: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        kind = _kind(report)
        self.seconds[kind] += report.duration
        self.tests[kind].add(report.nodeid)
        for name, value in report.user_properties:
            if name == CPU_PROPERTY and isinstance(value, (int, float)):
                self.cpu[report.nodeid] = self.cpu.get(report.nodeid, 0.0) + value

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        parts = [f"{kind} {self.seconds[kind]:.0f} s in {len(self.tests[kind])} tests"
                 for kind in self.seconds if self.tests[kind]]
        if parts:  # (nothing ran: -k that selects nothing, --collect-only)
            terminalreporter.write_line("test time: " + "; ".join(parts) + " (each group runs"
                                        " on one worker, one test after another)")
        if self.cpu and os.environ.get("CI") == "true":
            # on 2 cores the suite is bound by CPU, not by any one worker: what to cut first
            total = sum(self.cpu.values())
            terminalreporter.write_line(f"CPU time of the tests and what they started: "
                                        f"{total:.0f} s; the most:")
            for nodeid, cpu in sorted(self.cpu.items(), key=lambda kv: -kv[1])[:CPU_LISTED]:
                terminalreporter.write_line(f"  {cpu:7.1f} s  {nodeid}")


#: The name of a test report's CPU seconds (:class:`CpuRecorder`) in its user properties.
CPU_PROPERTY = "cpu_seconds"

#: How many of the tests that used the most CPU the CI summary lists.
CPU_LISTED = 30


def _cpu_seconds() -> float:
    """User + system CPU of this process and of its children that were waited for (their
    own waited-for children included): a switch, a Mininet host's shell, a compiler."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuRecorder:
    """Puts each phase's CPU seconds (:func:`_cpu_seconds`) in its report, where the
    workers' reports reach :class:`SuiteTime` (a process that outlives its test, or is
    never waited for, is not counted)."""

    def __init__(self) -> None:
        self.mark = _cpu_seconds()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self) -> None:
        self.mark = _cpu_seconds()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        now = _cpu_seconds()
        report.user_properties.append((CPU_PROPERTY, round(now - self.mark, 3)))
        self.mark = now
        return report


def _kind(report: pytest.TestReport) -> str:
    """The summary's name for the group of ``report``'s test: by the node id's group suffix
    under xdist, by the markers without workers (no suffix then)."""
    for group, kind in ((ROOT_GROUP, "root group"), (NETNS_GROUP, "netns group")):
        if report.nodeid.endswith(f"@{group}"):
            return kind
    if "xdist_group" not in report.keywords:
        return "other"
    return "netns group" if "netns" in report.keywords else "root group"


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT raises KeyboardInterrupt here, and in every process the suite starts (exec
    resets a handled signal to its default; an ignored one it would keep). The test time
    summary (:class:`SuiteTime`) in the process that reports."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(config, "workerinput"):  # xdist's workers report to the controller
        config.pluginmanager.register(SuiteTime(), "suite-time")
    config.pluginmanager.register(CpuRecorder(), "test-cpu")


def _group(item: pytest.Item, config: pytest.Config, group: str) -> None:
    """Put ``item`` in xdist group ``group``. xdist's loadgroup schedules by a ``@group``
    suffix of the node id, which xdist 3.8 adds by setting ``item._nodeid``; pytest 9.2 keeps
    the id in ``item._id`` and never reads that attribute, so the group was silently ignored
    (grouped tests ran on both workers). The suffix is set here, the way pytest keeps it."""
    item.add_marker(pytest.mark.xdist_group(group))
    if getattr(config.option, "loadgroup", False) and not item.nodeid.endswith(f"@{group}"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(f"{item.nodeid}@{group}")


def _module_groups(items: list[pytest.Item]) -> dict[Path, str]:
    """The group of each module with a ``root`` test: :data:`NETNS_GROUP` when every one of
    them is also ``netns``, else :data:`ROOT_GROUP` (whole modules: their unmarked tests may
    share a module's network fixture)."""
    groups: dict[Path, str] = {}
    for item in items:
        if "root" in item.keywords:
            group = NETNS_GROUP if "netns" in item.keywords else ROOT_GROUP
            if groups.get(item.path) != ROOT_GROUP:
                groups[item.path] = group
    return groups


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Puts the modules with ``root``-marked tests in their xdist group (first, so that
    xdist sees it); skips those tests, with a reason, when not running as root."""
    groups = _module_groups(items)
    config.stash[NETWORKED] = groups
    for item in items:
        if item.path in groups:
            _group(item, config, groups[item.path])
    if os.geteuid() == 0:
        return
    skip_root = pytest.mark.skip(reason="needs root (network namespaces / veth / Mininet)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip_root)


#: CAP_SYS_NICE's bit in /proc/<pid>/status's CapEff (linux/capability.h).
CAP_SYS_NICE = 23


def _may_renice() -> bool:
    """Root with CAP_SYS_NICE (a container's root may lack it): only then can a worker that
    ran a test at a lower priority raise it again for the root group's next test."""
    if os.geteuid() != 0:
        return False  # and the root tests are skipped: nobody to give the CPU to
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    caps = [line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")]
    return bool(caps) and bool(int(caps[0], 16) >> CAP_SYS_NICE & 1)


def _priority(item: pytest.Item) -> None:
    """Under xdist, as root: run ``item`` (and every process it starts) at the session's own
    priority when it is in a root group, :data:`OTHER_TESTS_NICE` lower when not. On the
    2-core machine the other worker's CPU-bound tests (C compiles, the engines' fuzzing)
    take a core from the networks on the critical path; at a lower priority they fill the
    CPU the networks leave idle (with the namespace group on the other worker they can be the
    critical path themselves: the summary line says which was)."""
    config = item.config
    if not os.environ.get("PYTEST_XDIST_WORKER") or not _may_renice():
        return  # one process runs everything; or no way back to the group's priority
    base = config.stash.setdefault(BASE_NICE, os.getpriority(os.PRIO_PROCESS, 0))
    networked = item.path in config.stash.get(NETWORKED, {})
    want = base if networked else min(base + OTHER_TESTS_NICE, 19)
    if os.getpriority(os.PRIO_PROCESS, 0) != want:
        os.setpriority(os.PRIO_PROCESS, 0, want)  # root may raise it back for the group


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts at its priority (:func:`_priority`), before its fixtures run."""
    _priority(item)


@pytest.fixture(scope="module", autouse=True)
def _root_network_turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module with ``root`` tests runs holding the machine-wide lock of its group (set up
    before the module's own network fixtures: autouse fixtures of a scope come first)."""
    group = request.config.stash.get(NETWORKED, {}).get(request.path)
    if os.geteuid() != 0 or group is None:
        yield
        return
    path = request.path
    with machine_lock(str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT)
                          else path), lock_path(netns=group == NETNS_GROUP)):
        yield


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root directory (where Makefile and pyproject.toml are)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def p4_dir() -> Path:
    """tests/p4/, where the sample P4 programs and their STF files live."""
    return REPO_ROOT / "tests" / "p4"
