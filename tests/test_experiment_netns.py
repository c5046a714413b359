"""The namespace-only rig of the benchmarks (experiment/netns.py): a failure half-way through
building removes what was built; leaving the block, however it ends, stops every process the
rig launched (SIGTERM and a grace, then SIGKILL) and deletes its interfaces and namespaces.
A recording command runner stands in for ``ip`` in the first tests (real child processes
for the processes); the ``root`` tests build the real layouts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

import pytest

from experiment.netns import HostsAroundSwitch, RigError, SwitchNamespace

pytestmark = pytest.mark.netns

# Ignores SIGTERM (a switch that does not stop when asked); says when it does.
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(120)")
SLEEPER = "import time; print('ready', flush=True); time.sleep(120)"


class Recorder:
    """Runs nothing: records each command; ``fail_on``: the command (its words joined)
    that fails."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.commands: list[str] = []

    def __call__(self, argv: Sequence[str], check: bool) -> None:
        line = " ".join(argv)
        self.commands.append(line)
        if line == self.fail_on and check:
            raise RigError(f"{line}: RTNETLINK answers: File exists")


def test_hosts_around_switch_lays_out_and_removes_its_links() -> None:
    run = Recorder()
    with HostsAroundSwitch(hosts=2, tag="bx", runner=run) as rig:
        assert rig.host_namespaces == ["bxh1", "bxh2"]
        assert rig.switch_ports == ["bxs1", "bxs2"]
        built = list(run.commands)
    assert built[:8] == [
        "ip netns add bxh1", "ip link add bxs1 type veth peer name bxp1",
        "ip link set bxp1 netns bxh1", "ip -n bxh1 link set bxp1 name eth0",
        "sysctl -qw net.ipv6.conf.bxs1.disable_ipv6=1",
        "ip netns exec bxh1 sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1",
        "ip link set bxs1 up", "ip -n bxh1 link set eth0 up"]
    assert run.commands[len(built):] == ["ip link del bxs1", "ip link del bxs2",
                                         "ip netns del bxh1", "ip netns del bxh2"]
    assert not rig.running and rig.namespaces == [] and rig.root_links == []


def test_a_failure_half_way_removes_what_was_built() -> None:
    run = Recorder(fail_on="ip link set bxp2 netns bxh2")
    rig = HostsAroundSwitch(hosts=3, tag="bx", runner=run)
    with pytest.raises(RigError, match="ip link set bxp2 netns bxh2: RTNETLINK"):
        rig.start()
    cleanup = run.commands[run.commands.index("ip link set bxp2 netns bxh2") + 1:]
    assert cleanup == ["ip link del bxs1", "ip link del bxs2", "ip netns del bxh1",
                       "ip netns del bxh2"]
    assert not rig.running
    rig.stop()  # idempotent: nothing left to remove
    assert run.commands[-1] == "ip netns del bxh2"


def test_switch_namespace_keeps_everything_inside_one_namespace() -> None:
    run = Recorder()
    with SwitchNamespace(ports=2, name="btx", runner=run) as rig:
        assert rig.exec_argv(rig.name) == ["ip", "netns", "exec", "btx"]
    assert run.commands == [
        "ip netns add btx",
        "ip netns exec btx sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
        "ip netns exec btx sysctl -qw net.ipv6.conf.default.disable_ipv6=1",
        "ip -n btx link set lo up",
        "ip -n btx link add s1 type veth peer name h1", "ip -n btx link set s1 up",
        "ip -n btx link set h1 up",
        "ip -n btx link add s2 type veth peer name h2", "ip -n btx link set s2 up",
        "ip -n btx link set h2 up",
        "ip netns del btx"]  # its veths go with it


@pytest.mark.parametrize("error", [RuntimeError("the measurement failed"), KeyboardInterrupt()])
def test_processes_are_stopped_whatever_ends_the_block(error: BaseException) -> None:
    run = Recorder()
    procs: list[subprocess.Popen[str]] = []
    try:
        with pytest.raises(type(error)), SwitchNamespace(name="btx", runner=run) as rig:
            polite = rig.popen(None, [sys.executable, "-c", SLEEPER], grace_s=10.0)
            stubborn = rig.popen(None, [sys.executable, "-c", STUBBORN], grace_s=0.5)
            plain = rig.python(None, SLEEPER)
            procs += [polite, stubborn, plain]
            for proc in procs:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            raise error
        assert polite.returncode == -signal.SIGTERM  # asked, and it stopped
        assert stubborn.returncode == -signal.SIGKILL  # asked, ignored it: killed
        assert plain.returncode == -signal.SIGKILL  # no grace: killed at once
        assert run.commands[-1] == "ip netns del btx"  # after the processes
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="hosts must be at least 1, got 0"):
        HostsAroundSwitch(hosts=0)
    with pytest.raises(ValueError, match="ports must be at least 1, got 0"):
        SwitchNamespace(ports=0)


# ----------------------------------------------------------------------------- real layouts


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True,
                         timeout=30).stdout
    return {entry["name"] for entry in json.loads(out or "[]")}


def _links(namespace: str | None = None) -> set[str]:
    where = ["-n", namespace] if namespace else []
    out = subprocess.run(["ip", *where, "-j", "link", "show"], capture_output=True, text=True,
                         timeout=30).stdout
    return {entry["ifname"] for entry in json.loads(out or "[]")}


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_real_hosts_around_switch_is_built_and_removed() -> None:
    with pytest.raises(RuntimeError, match="the body failed"), HostsAroundSwitch(hosts=2) as rig:
        tag = rig.tag
        assert {f"{tag}h1", f"{tag}h2"} <= _namespaces()
        assert {f"{tag}s1", f"{tag}s2"} <= _links()
        assert "eth0" in _links(f"{tag}h1")
        probe = rig.python(f"{tag}h2", "import os; print(sorted(os.listdir('/sys/class/net')))")
        out, _ = probe.communicate(timeout=60)
        assert out.strip() == "['eth0', 'lo']"
        sleeper = rig.python(f"{tag}h1", SLEEPER)
        assert sleeper.stdout is not None and sleeper.stdout.readline().strip() == "ready"
        raise RuntimeError("the body failed")
    assert sleeper.poll() is not None
    assert not {f"{tag}h1", f"{tag}h2"} & _namespaces()
    assert not {f"{tag}s1", f"{tag}s2"} & _links()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_real_switch_namespace_is_built_and_removed() -> None:
    with SwitchNamespace(ports=2) as rig:
        assert rig.name in _namespaces()
        assert {"lo", "s1", "h1", "s2", "h2"} <= _links(rig.name)
    assert rig.name not in _namespaces()
