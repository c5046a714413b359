"""The namespace-only rig: one switch process between hosts in network namespaces, no Mininet.

The benchmarks that measure a single switch process (``bench/process_rig.py``,
``bench/bench_targets.py``) need neither a topology nor a controller, only veth pairs,
namespaces and a few processes; Mininet would add its own processes and start-up time to
what they measure. :class:`NamespaceRig` keeps :class:`~experiment.lifecycle.ExperimentNetwork`'s
contract: a context manager; :meth:`~NamespaceRig.start` builds the layout and, on any
failure (KeyboardInterrupt included), removes what it built and raises;
:meth:`~NamespaceRig.stop` is idempotent, never raises, and stops every process the rig
launched, then deletes every interface and namespace it created. Two layouts:

* :class:`HostsAroundSwitch` (``bench/process_rig.py``): hosts ``<tag>h1``, ``<tag>h2``, ...
  each a namespace with ``eth0``, linked to ``<tag>s1``, ``<tag>s2``, ... in this
  namespace, where the switch runs;
* :class:`SwitchNamespace` (``bench/bench_targets.py``): one namespace holding veth pairs
  ``s1``/``h1``, ``s2``/``h2``, ...: the switch takes the ``s`` ends, the traffic the ``h``
  ends, and everything runs inside it.

Nothing gets an address or a route: the traffic is raw frames on the veths.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol, Self

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
COMMAND_TIMEOUT_S = 30.0
KILL_WAIT_S = 5.0


class RigError(RuntimeError):
    """A command that builds the rig failed (its message names the command and ip's error)."""


class CommandRunner(Protocol):
    """Runs one command of the rig's set-up (``check``: a failure raises :class:`RigError`;
    otherwise it is ignored: removals of what may be gone, optional sysctls)."""

    def __call__(self, argv: Sequence[str], check: bool) -> None: ...


def run_command(argv: Sequence[str], check: bool) -> None:
    """:class:`CommandRunner` with :mod:`subprocess` (output captured, 30 s at most)."""
    proc = subprocess.run(list(argv), capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise RigError(f"{' '.join(argv)}: {(proc.stderr or proc.stdout).strip()[-400:]}")


class NamespaceRig:
    """Namespaces, veth pairs and the processes run in them (see the module's docstring);
    subclasses lay out the links in :meth:`build` with :meth:`add_namespace`,
    :meth:`add_veth` and :meth:`run`."""

    def __init__(self, runner: CommandRunner = run_command) -> None:
        self._runner = runner
        self.namespaces: list[str] = []  # created here, deleted by stop (with what is in them)
        self.root_links: list[str] = []  # veth ends created in this namespace
        self._procs: list[tuple[subprocess.Popen[str], float]] = []  # (process, grace s)
        self.running = False

    # ------------------------------------------------------------------ building blocks
    def run(self, *argv: str, check: bool = True) -> None:
        """One set-up command (:class:`CommandRunner`)."""
        self._runner(argv, check)

    def add_namespace(self, name: str) -> str:
        """Creates network namespace ``name``; deleted by :meth:`stop`."""
        self.run("ip", "netns", "add", name)
        self.namespaces.append(name)
        return name

    def add_veth(self, end: str, peer: str, namespace: str | None = None) -> None:
        """Creates veth pair ``end``/``peer`` in ``namespace`` (None: this one, where
        :meth:`stop` deletes it; a namespace's veths go with the namespace)."""
        where = ["-n", namespace] if namespace is not None else []
        self.run("ip", *where, "link", "add", end, "type", "veth", "peer", "name", peer)
        if namespace is None:
            self.root_links.append(end)

    @staticmethod
    def exec_argv(namespace: str | None) -> list[str]:
        """The prefix that runs a command in ``namespace`` (None: here)."""
        return ["ip", "netns", "exec", namespace] if namespace is not None else []

    def build(self) -> None:
        """Lays out the rig (subclasses)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ start and stop
    def start(self) -> Self:
        """Builds the layout; a failure removes what was built and is raised."""
        if self.running:
            raise RuntimeError("the rig is running already")
        try:
            self.build()
        except BaseException:
            self.stop()
            raise
        self.running = True
        return self

    def stop(self) -> None:
        """Stops every process launched here (SIGTERM, up to its grace, then SIGKILL),
        deletes the veth ends created in this namespace, then the namespaces; idempotent,
        logs failures instead of raising."""
        procs, self._procs = self._procs, []
        for proc, grace_s in procs:
            stop_process(proc, grace_s)
        links, self.root_links = self.root_links, []
        namespaces, self.namespaces = self.namespaces, []
        for argv in ([["ip", "link", "del", end] for end in links]
                     + [["ip", "netns", "del", ns] for ns in namespaces]):
            try:
                self._runner(argv, False)
            except Exception:
                log.warning("%s failed", " ".join(argv), exc_info=True)
        self.running = False

    def __enter__(self) -> Self:
        return self.start() if not self.running else self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------------ processes
    def popen(self, namespace: str | None, argv: Sequence[str], *, grace_s: float = 0.0,
              stdout: int | IO[str] | None = subprocess.PIPE,
              stderr: int | IO[str] | None = subprocess.PIPE,
              env: Mapping[str, str] | None = None,
              cwd: Path | None = REPO_ROOT) -> subprocess.Popen[str]:
        """Starts ``argv`` in ``namespace`` (None: here), text mode; tracked: :meth:`stop`
        ends it, after SIGTERM and up to ``grace_s`` (0: SIGKILL straight away)."""
        proc = subprocess.Popen([*self.exec_argv(namespace), *argv], stdout=stdout,
                                stderr=stderr, text=True, env=env, cwd=cwd)
        self._procs.append((proc, grace_s))
        return proc

    def python(self, namespace: str | None, code: str, *args: str) -> subprocess.Popen[str]:
        """``python -c code args`` in ``namespace``, output piped (tracked, as :meth:`popen`)."""
        return self.popen(namespace, [sys.executable, "-c", code, *args])


def stop_process(proc: subprocess.Popen[str] | subprocess.Popen[bytes],
                 grace_s: float = 0.0) -> None:
    """SIGTERM and up to ``grace_s`` to exit (0: none), then SIGKILL; reaps it; never raises."""
    try:
        if proc.poll() is not None:
            return
        if grace_s > 0:
            proc.terminate()
            try:
                proc.wait(grace_s)
                return
            except subprocess.TimeoutExpired:
                log.warning("process %s did not stop within %g s: killed", proc.pid, grace_s)
        proc.kill()
        proc.wait(KILL_WAIT_S)
    except Exception:  # gone already, or unkillable: nothing more to do here
        log.warning("could not stop process %s", proc.pid, exc_info=True)


# ----------------------------------------------------------------------------- layouts


class HostsAroundSwitch(NamespaceRig):
    """Hosts ``<tag>h<i>`` (namespaces, each with ``eth0``) linked to ``<tag>s<i>`` here,
    where the switch runs; IPv6 off on both ends (no router solicitations or MLD reports
    reach the switch)."""

    def __init__(self, hosts: int = 2, tag: str | None = None,
                 runner: CommandRunner = run_command) -> None:
        super().__init__(runner)
        if hosts < 1:
            raise ValueError(f"hosts must be at least 1, got {hosts}")
        self.hosts = hosts
        self.tag = tag if tag is not None else f"b{uuid.uuid4().hex[:6]}"
        self.host_namespaces: list[str] = []  # h1, h2, ... in order
        self.switch_ports: list[str] = []  # s1, s2, ...: the switch's ports 1, 2, ...

    def build(self) -> None:
        for i in range(1, self.hosts + 1):
            ns = self.add_namespace(f"{self.tag}h{i}")
            self.host_namespaces.append(ns)
            sw_end, tmp = f"{self.tag}s{i}", f"{self.tag}p{i}"
            self.add_veth(sw_end, tmp)
            self.switch_ports.append(sw_end)
            self.run("ip", "link", "set", tmp, "netns", ns)
            self.run("ip", "-n", ns, "link", "set", tmp, "name", "eth0")
            self.run("sysctl", "-qw", f"net.ipv6.conf.{sw_end}.disable_ipv6=1", check=False)
            self.run(*self.exec_argv(ns), "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1",
                     check=False)
            self.run("ip", "link", "set", sw_end, "up")
            self.run("ip", "-n", ns, "link", "set", "eth0", "up")
            self.run("ip", "-n", ns, "link", "set", "lo", "up")


class SwitchNamespace(NamespaceRig):
    """One namespace (``bt<hex>``) with veth pairs ``s<p>``/``h<p>`` for ports 1..``ports``,
    all up, its loopback up and IPv6 off; every process runs in it (:meth:`popen` with
    :attr:`name`)."""

    def __init__(self, ports: int = 2, name: str | None = None,
                 runner: CommandRunner = run_command) -> None:
        super().__init__(runner)
        if ports < 1:
            raise ValueError(f"ports must be at least 1, got {ports}")
        self.ports = ports
        self.name = name if name is not None else f"bt{uuid.uuid4().hex[:8]}"

    def build(self) -> None:
        ns = self.add_namespace(self.name)
        for key in ("all", "default"):
            self.run(*self.exec_argv(ns), "sysctl", "-qw",
                     f"net.ipv6.conf.{key}.disable_ipv6=1", check=False)
        self.run("ip", "-n", ns, "link", "set", "lo", "up")
        for p in range(1, self.ports + 1):
            self.add_veth(f"s{p}", f"h{p}", namespace=ns)
            for end in (f"s{p}", f"h{p}"):
                self.run("ip", "-n", ns, "link", "set", end, "up")
