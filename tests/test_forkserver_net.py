"""Built-in switches forked from the network's fork server, in a Mininet network (needs root).

ONE network per module: a spine-leaf of one spine and two leaves with two hosts each, on the
C engine, netreduce.p4 pushed and routes programmed by the controller CLI. Names carry the
prefix ``fk`` and gRPC ports are found free; the module's network is stopped (and checked to
leave no recorded process) also when a test fails.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main as controller_main
from tests.network_probe import ping_once
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.errors import SwitchStartError
from topo.forkserver import ForkedProcess, ForkServer
from topo.network import Network, start_network
from topo.nodes import SoftSwitch, SwitchLaunch, free_port_base
from topo.rundir import read_cmdline, read_pids
from topo.topologies import RackTopo, SpineLeafTopo

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
]

PREFIX = "fk"
LEAF1, LEAF2, SPINE = f"{PREFIX}l1", f"{PREFIX}l2", f"{PREFIX}sp1"
H1, H2, H3 = f"{PREFIX}h1", f"{PREFIX}h2", f"{PREFIX}h3"  # h1, h2 on leaf 1; h3 on leaf 2
PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"


def _ctl(rundir: Path, *args: str) -> None:
    """One controller CLI command; fails the test when it fails."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = controller_main(["--rundir", str(rundir), *args])
    assert code == 0, err.getvalue()


def _alive(rundir: Path) -> list[str]:
    """Recorded processes still running their recorded command line."""
    _owner, records = read_pids(rundir / "pids.json")
    return [f"{r.name} ({r.pid})" for r in records if read_cmdline(r.pid) == list(r.cmdline)]


def _restart(network: Network, name: str) -> SoftSwitch:
    """SIGKILL a switch's group and start it again (as the reliability campaign does)."""
    sw = network.node(name)
    assert isinstance(sw, SoftSwitch) and sw.proc is not None
    os.killpg(sw.proc.pid, signal.SIGKILL)
    sw.proc.wait(10)
    sw.start()
    sw.wait_ready()
    return sw


class _BrokenSwitch(SoftSwitch):
    """A built-in switch started with an interface that does not exist."""

    @classmethod
    def build_argv(cls, launch: SwitchLaunch) -> list[str]:
        bad = SwitchLaunch(**{**launch.__dict__, "ports": launch.ports + ((9, "fk-nosuch"),)})
        return super().build_argv(bad)


def test_switch_exiting_at_start_is_reported_and_nothing_is_left(tmp_path: Path) -> None:
    """A forked switch that exits at start: 'did not start: <reason>' with its log's last
    lines; the network is taken down, the fork server with it."""
    topo = RackTopo(hosts=1, name_prefix=f"{PREFIX}b", grpc_base_port=free_port_base(1, 27000))
    try:
        with pytest.raises(SwitchStartError) as info:
            start_network(topo, _BrokenSwitch, tmp_path / "run", PROGRAM, progress=False)
    finally:
        remove_interfaces(switch_interfaces(topo.switches()))
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"switch {PREFIX}bs1 did not start: ") and "fk-nosuch" in lines[0]
    assert any(line.startswith("--- last lines of") for line in lines), lines
    _owner, records = read_pids(tmp_path / "run" / "pids.json")
    assert "forkserver" in {r.kind for r in records}
    assert _alive(tmp_path / "run") == []


def test_fork_server_that_cannot_start_leaves_switches_of_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A fork server that exits at once: one warning, and the switch is a process of its
    own that serves; stopping the network leaves nothing."""
    launch = ForkServer.launch

    def broken(python: str, *args: Any, **kwargs: Any) -> ForkServer:
        return launch("/bin/false", *args, **kwargs)

    monkeypatch.setattr(ForkServer, "launch", broken)
    topo = RackTopo(hosts=1, name_prefix=f"{PREFIX}c", grpc_base_port=free_port_base(1, 27000))
    try:
        with caplog.at_level(logging.WARNING, logger="topo.forkserver"):
            with start_network(topo, "softswitch", tmp_path / "run", PROGRAM,
                               progress=False) as network:
                sw = network.switches[0]
                assert isinstance(sw.proc, subprocess.Popen) and sw.is_ready()
    finally:
        remove_interfaces(switch_interfaces(topo.switches()))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("fork server: it exited"), warnings
    assert _alive(tmp_path / "run") == []


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    """The running network, pipeline and routes programmed."""
    topo = SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=2, host_bw=None,
                         name_prefix=PREFIX, grpc_base_port=free_port_base(3, 27000))
    rundir = tmp_path_factory.mktemp("fknet") / "run"
    network = start_network(topo, "softswitch", rundir, PROGRAM, progress=False, engine="c")
    try:
        _ctl(rundir, "pipeline", "push")
        _ctl(rundir, "routes")
        yield network
    finally:
        network.stop()
        remove_interfaces(switch_interfaces([LEAF1, LEAF2, SPINE]))
    assert _alive(rundir) == []


def test_switches_are_forked_recorded_and_took_the_preload(net: Network) -> None:
    """Every switch is a forked process in its own group, recorded in pids.json with its
    own command line; each took the fork server's pipeline."""
    assert net.forkserver is not None
    _owner, records = read_pids(net.rundir.pids_path)
    by_name = {(r.name, r.kind): r for r in records}
    assert by_name[("forkserver", "forkserver")].pid == net.forkserver.proc.pid
    for sw in net.switches:
        assert isinstance(sw.proc, ForkedProcess)
        rec = by_name[(sw.name, "switch")]
        assert rec.pid == rec.pgid == sw.proc.pid == os.getpgid(sw.proc.pid)
        assert list(rec.cmdline) == sw.argv()
        assert "the fork server's preloaded one" in sw.log_file.read_text(), sw.name
    assert ping_once(net, H1, H3, 2.0) == 1


def test_killing_one_switch_leaves_the_others_forwarding(net: Network) -> None:
    """The spine SIGKILLed: the leaves still forward (h1 -> h2); started again it is forked
    anew, takes the preload again, and the controller brings h1 -> h3 back."""
    spine = net.node(SPINE)
    old = spine.proc.pid
    os.killpg(old, signal.SIGKILL)
    assert spine.proc.wait(10) == -signal.SIGKILL
    assert ping_once(net, H1, H2, 2.0) == 1
    spine.start()
    spine.wait_ready()
    assert isinstance(spine.proc, ForkedProcess) and spine.proc.pid != old
    _ctl(Path(net.rundir.path), "pipeline", "push")
    assert ping_once(net, H1, H3, 2.0) == 1
    assert spine.log_file.read_text().count("the fork server's preloaded one") == 2


def test_dead_fork_server_means_switches_of_their_own(net: Network,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The fork server SIGKILLed: running switches go on; one restarted is a process of its
    own (one warning says why) and serves again."""
    assert net.forkserver is not None
    os.killpg(net.forkserver.proc.pid, signal.SIGKILL)
    net.forkserver.proc.wait(10)
    with caplog.at_level(logging.WARNING, logger="topo.forkserver"):
        leaf = _restart(net, LEAF2)
        _restart(net, LEAF2)
    assert isinstance(leaf.proc, subprocess.Popen)
    assert [r.getMessage() for r in caplog.records].count(
        f"fork server: {net.forkserver.failure}; starting the switches as processes of "
        "their own") == 1
    _ctl(Path(net.rundir.path), "pipeline", "push")
    assert ping_once(net, H1, H3, 2.0) == 1

