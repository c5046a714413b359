"""Network namespaces and veth pairs for tests (``ip`` only; always cleaned up).

Use the :func:`topology` context manager (or the pytest fixture built on it): it creates
namespaces and veth pairs with names unique to this test run, and deletes everything it
created on exit, also when the test fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


def ip(*args: str) -> None:
    """Run ``ip ARGS``; raises RuntimeError with ip's message on failure."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def _disable_ipv6(iface: str, netns: str | None = None) -> None:
    """No IPv6 on test links, so no router solicitations or MLD reports reach the switch."""
    cmd = ["sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1"]
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    subprocess.run(cmd, capture_output=True, timeout=30)


@dataclass
class Link:
    """A veth pair: ``switch_end`` stays in the root namespace, ``host_end`` in ``netns``."""

    switch_end: str
    host_end: str
    netns: str


@dataclass
class NetnsTopology:
    tag: str
    namespaces: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def add_host(self, index: int) -> Link:
        """Namespace ``<tag>h<index>`` with ``eth0``, linked to ``<tag>s<index>`` here."""
        ns = f"{self.tag}h{index}"
        sw_end = f"{self.tag}s{index}"
        tmp_end = f"{self.tag}p{index}"
        ip("netns", "add", ns)
        self.namespaces.append(ns)
        ip("link", "add", sw_end, "type", "veth", "peer", "name", tmp_end)
        link = Link(sw_end, "eth0", ns)
        self.links.append(link)
        ip("link", "set", tmp_end, "netns", ns)
        ip("-n", ns, "link", "set", tmp_end, "name", "eth0")
        _disable_ipv6(sw_end)
        _disable_ipv6("eth0", ns)
        ip("link", "set", sw_end, "up")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        return link

    def run_in(self, netns: str, code: str, timeout: float = 30.0,
               args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
        """Run a Python snippet inside ``netns`` with this interpreter."""
        return subprocess.run(
            ["ip", "netns", "exec", netns, sys.executable, "-c", code, *args],
            capture_output=True, text=True, timeout=timeout,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )

    def popen_in(self, netns: str, code: str, args: Sequence[str] = ()) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def cleanup(self) -> None:
        for link in self.links:
            subprocess.run(["ip", "link", "del", link.switch_end], capture_output=True, timeout=30)
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.links.clear()
        self.namespaces.clear()


@contextmanager
def topology(hosts: int) -> Iterator[NetnsTopology]:
    """``hosts`` namespaces, each linked by a veth to the root namespace; always removed."""
    topo = NetnsTopology(tag=f"t{uuid.uuid4().hex[:6]}")
    try:
        for i in range(1, hosts + 1):
            topo.add_host(i)
        yield topo
    finally:
        topo.cleanup()


def can_use_netns() -> bool:
    return (
        os.geteuid() == 0 and subprocess.run(["which", "ip"], capture_output=True).returncode == 0
    )
