"""Network namespaces and veth pairs for tests: the project's own layout
(:class:`experiment.netns.HostsAroundSwitch`: hosts ``<tag>h<i>`` with ``eth0``, linked to
``<tag>s<i>`` in the root namespace) with the look-ups and snippet runners tests use.

Use the :func:`topology` context manager: names are unique to the test run, and everything
it created is deleted on exit, also when the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from experiment.netns import REPO_ROOT, HostsAroundSwitch, run_command


def ip(*args: str) -> None:
    """Run ``ip ARGS``; raises RuntimeError (RigError) with ip's message on failure."""
    run_command(["ip", *args], True)


@dataclass
class Link:
    """A veth pair: ``switch_end`` stays in the root namespace, ``host_end`` in ``netns``."""

    switch_end: str
    host_end: str
    netns: str


class NetnsTopology(HostsAroundSwitch):
    """The hosts-around-a-switch rig, with its links and Python snippets run in a host."""

    @property
    def links(self) -> list[Link]:
        return [Link(sw, "eth0", ns) for sw, ns in zip(self.switch_ports, self.host_namespaces,
                                                       strict=True)]

    def run_in(self, netns: str, code: str, timeout: float = 30.0,
               args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
        """Run a Python snippet inside ``netns`` with this interpreter."""
        return subprocess.run([*self.exec_argv(netns), sys.executable, "-c", code, *args],
                              capture_output=True, text=True, timeout=timeout,
                              cwd=str(REPO_ROOT))

    def popen_in(self, netns: str, code: str, args: Sequence[str] = ()) -> subprocess.Popen[str]:
        """A Python snippet started inside ``netns`` (output piped); stopped with the rig."""
        return self.python(netns, code, *args)


@contextmanager
def topology(hosts: int, tag: str | None = None) -> Iterator[NetnsTopology]:
    """``hosts`` namespaces, each linked by a veth to the root namespace; always removed."""
    with NetnsTopology(hosts, tag=tag if tag is not None else f"t{uuid.uuid4().hex[:6]}") as topo:
        yield topo


def can_use_netns() -> bool:
    return os.geteuid() == 0 and subprocess.run(["which", "ip"],
                                                capture_output=True).returncode == 0
