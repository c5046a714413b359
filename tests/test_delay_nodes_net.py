"""Delay nodes in a running network (root): a rack whose two host links each get a delay
node (forced on the built-in target, so no BMv2 is needed), the same rack on BMv2 (which
gets them by itself where there is no netem; a hand-written forwarding JSON, so no p4c is
needed), and make run on BMv2 with a link delay (where BMv2 and p4c are installed).

The delay is chosen to dominate the machine's noise: 4 ms emulated at TDF 5 is 20 ms of real
time per link and direction, so a ping between the rack's two hosts (two links, both ways)
must take at least 80 ms, and with the delay counted once (not per half, not TDF squared)
well under twice that. Names carry the prefix ``tw``, gRPC ports are found free at run time,
and every test checks that no interface or process outlives it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from experiment.lifecycle import ExperimentNetwork, open_controller
from experiment.seams import json_float, json_list, json_object
from experiment.session import collect
from tests.bmv2 import free_port_block, missing_binaries, run_topo, skip_reason
from tests.bmv2_json import port_pair_json
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.links import netem_available
from topo.model import describe
from topo.network import Network, start_network
from topo.nodes import BMv2Switch, free_port_base
from topo.rundir import load_topology, read_cmdline, read_pids
from topo.topologies import RackTopo, load_topology_file

pytestmark = [pytest.mark.root]

PREFIX = "tw"
NODES = [f"{PREFIX}s1", f"{PREFIX}dl1", f"{PREFIX}dl2"]
PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"
DELAY_S, TDF = 4e-3, 5.0
PINGS = 10


@pytest.fixture
def rack() -> Iterator[RackTopo]:
    """Two hosts on one switch, 4 ms on both links; removes any tw* interface left behind."""
    topo = RackTopo(hosts=2, delay="4ms", name_prefix=PREFIX,
                    grpc_base_port=free_port_base(1, 27000))
    yield topo
    remove_interfaces(switch_interfaces(NODES))


def _ping_rtts(network: Network) -> list[float]:
    """Round trips (ms) of PINGS pings from the rack's first host to its second; every one
    must come back."""
    proc = ExperimentNetwork.around(network).popen(f"{PREFIX}h1", [
        sys.executable, "-m", "topo.hostcmd", "ping", "--dst",
        network.topology.host(f"{PREFIX}h2").ip, "--count", str(PINGS), "--timeout", "2"])
    result = collect({"ping": proc}, 120.0)["ping"]
    assert "error" not in result, result
    (row,) = map(json_object, json_list(result["results"]))
    assert row["received"] == PINGS, row
    return [json_float(rtt) for rtt in json_list(row["rtt_ms"])]


def _check_delayed(rtts: list[float]) -> None:
    """Request and reply each cross two links held DELAY_S x TDF: at least 80 ms, and with
    the delay counted once (not per half of a link, not TDF squared) under twice that."""
    expected_ms = 4 * DELAY_S * TDF * 1e3
    assert expected_ms <= min(rtts) < 2 * expected_ms, rtts


def test_forced_delay_nodes_delay_a_ping_and_leave_nothing(rack: RackTopo, tmp_path: Path) -> None:
    """With a delay node on each host link the ping's round trip takes 4 x delay x TDF at
    least (request and reply each cross two links) and not twice that; the switch's ports,
    topology.json and its links are as without delay nodes; the wires are recorded in
    pids.json, and nothing is left after the network stops."""
    with start_network(rack, "softswitch", tmp_path / "run", PROGRAM, progress=False,
                       tdf=TDF, delay_nodes=True) as network:
        _owner, records = read_pids(network.rundir.pids_path)
        wires = {r.name: r for r in records if r.kind == "wire"}
        assert sorted(wires) == [f"{PREFIX}dl1", f"{PREFIX}dl2"]
        assert {r.name for r in records if r.kind == "wire-shell"} == set(wires)
        assert sorted(n.name for n in network.delay_nodes) == sorted(wires)
        assert switch_interfaces(NODES) == [f"{PREFIX}dl1-eth1", f"{PREFIX}dl1-eth2",
                                            f"{PREFIX}dl2-eth1", f"{PREFIX}dl2-eth2",
                                            f"{PREFIX}s1-eth1", f"{PREFIX}s1-eth2"]
        topology = load_topology(network.rundir.path)
        assert topology.delay_nodes and not topology.delay_line
        plain = describe(rack, target="softswitch", netem=topology.netem, tdf=TDF)
        assert (topology.switches[0].ports, topology.hosts, topology.links) == \
            (plain.switches[0].ports, plain.hosts, plain.links)
        # the wire holds the delay, the switch does not: no --port-delay on its command line
        switch = next(r for r in records if r.kind == "switch")
        assert "--port-delay" not in switch.cmdline and "--tdf" in switch.cmdline
        with open_controller(network) as controller:
            controller.push_pipeline()
            controller.program_routes()
        rtts = _ping_rtts(network)
        pids = [r.pid for r in records]
    _check_delayed(rtts)
    # SIGTERM stopped each wire cleanly (status 0, its counters logged), not SIGKILL
    for node in network.delay_nodes:
        assert node.proc is not None and node.proc.returncode == 0, node.name
        log = node.log_file.read_text()
        assert "signal 15: stopping" in log and "wire stats: {'ports': {1: {'rx_packets'" in log
    assert switch_interfaces(NODES) == []
    assert [p for p in pids if read_cmdline(p) is not None] == []


def test_delay_node_failure_is_reported_and_cleaned_up(rack: RackTopo, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A wire that cannot start names itself and its reason; nothing is left behind."""
    from topo.delaynodes import DelayNode
    from topo.errors import SwitchStartError

    monkeypatch.setattr(DelayNode, "python", "/nonexistent/python")
    with pytest.raises(SwitchStartError, match=rf"delay node {PREFIX}dl\d did not start: "
                                               r"cannot run /nonexistent/python"):
        start_network(rack, "softswitch", tmp_path / "run", progress=False, tdf=TDF,
                      delay_nodes=True)
    _owner, records = read_pids(tmp_path / "run" / "pids.json")
    assert switch_interfaces(NODES) == []
    assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []


CRASHING_RUN = """
import sys, time
from topo.network import start_network
from topo.topologies import SpineLeafTopo
topo = SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, delay="1ms", name_prefix="tw",
                     grpc_base_port=int(sys.argv[2]))
network = start_network(topo, "softswitch", sys.argv[1], progress=False, delay_nodes=True)
print("up", flush=True)
time.sleep(120)
"""


def test_cleanup_after_killed_run_stops_wires_and_removes_their_links(tmp_path: Path,
                                                                      repo_root: Path) -> None:
    """After the starting process is SIGKILLed, topo.cleanup stops the recorded wires with
    the switches and removes the delay nodes' surviving interfaces."""
    import signal
    import subprocess

    from topo.cleanup import clean_all

    names = [f"{PREFIX}l1", f"{PREFIX}sp1", f"{PREFIX}dl1", f"{PREFIX}dl2"]
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(runs / "r1"),
                             str(free_port_base(2, 27200))],
                            cwd=repo_root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        _owner, records = read_pids(runs / "r1" / "pids.json")
        wires = [r for r in records if r.kind == "wire"]
        assert len(wires) == 2 and all(read_cmdline(r.pid) for r in wires)
        assert f"{PREFIX}dl2-eth1" in switch_interfaces(names)  # leaf--W--spine survived
        report = clean_all(runs)
        assert {f"{r.name} (pid {r.pid})" for r in wires} <= set(report.killed)
        assert f"{PREFIX}dl2-eth1" in report.interfaces
        assert switch_interfaces(names) == []
        assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pids_file = runs / "r1" / "pids.json"
        for rec in read_pids(pids_file)[1] if pids_file.exists() else []:
            if rec.kind in ("switch", "wire") and read_cmdline(rec.pid) == list(rec.cmdline):
                os.kill(rec.pid, signal.SIGKILL)
        remove_interfaces(switch_interfaces(names))


# ================================================================ BMv2 without netem


class _PortPairBMv2(BMv2Switch):
    """BMv2 started with a forwarding JSON written by the test (port 1 <-> port 2)."""

    # no p4c: the JSON is not compiled (BMv2Switch's own binaries are typed as its two)
    binaries = ("simple_switch_grpc",)  # type: ignore[assignment]
    isSetup = False
    json_path: ClassVar[Path] = Path()

    def preload_path(self) -> Path | None:
        return self.json_path


@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None,
                    reason="BMv2 (simple_switch_grpc) not installed; see docs/setup.md")
def test_bmv2_rack_gets_delay_nodes_and_delays_a_ping(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """BMv2 cannot hold frames: without netem its delayed links get delay nodes by
    themselves (with netem they are forced here), frames pass BMv2 and both wires, and the
    ping takes the links' delays; nothing is left behind."""
    json_path = tmp_path / "port_pair.json"
    json_path.write_bytes(port_pair_json())
    monkeypatch.setattr(_PortPairBMv2, "json_path", json_path)
    base = free_port_base(2, 27100)
    topo = load_topology_file("rack", {"hosts": 2, "delay": "4ms"}, name_prefix=PREFIX,
                              grpc_base_port=base, thrift_base_port=base + 1)
    try:
        with start_network(topo, _PortPairBMv2, tmp_path / "run", progress=False, tdf=TDF,
                           delay_nodes=netem_available()) as network:
            assert network.topology.delay_nodes and network.topology.target == "bmv2"
            assert [n.name for n in network.delay_nodes] == NODES[1:]
            rtts = _ping_rtts(network)
            _owner, records = read_pids(network.rundir.pids_path)
        _check_delayed(rtts)
        assert switch_interfaces(NODES) == []
        assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
    finally:
        remove_interfaces(switch_interfaces(NODES))


@pytest.mark.slow
@pytest.mark.skipif(bool(missing_binaries()), reason=skip_reason())
def test_make_run_on_bmv2_with_delay_is_exact(tmp_path: Path, repo_root: Path) -> None:
    """``make run target=bmv2 delay=...`` without netem: delay nodes on every link, both
    all-reduces exact, the same summary as without them, nothing left behind."""
    from topo.links import netem_available

    prefix = f"bw{os.getpid() % 100}"
    names = [prefix + n for n in ("s1", "dl1", "dl2", "dl3", "dl4")]
    rundir = tmp_path / "run"
    base = free_port_block(2)
    try:
        proc = run_topo(["--topo", "rack", "--target", "bmv2", "--no-cli", "--delay", "50us",
                         "--tdf", "1", "--link-check-seconds", "0", "--elements", "16384",
                         "--name-prefix", prefix, "--grpc-port", str(base),
                         "--thrift-port", str(base + 1), "--rundir", str(rundir)],
                        repo_root, timeout_s=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        text = " ".join(proc.stdout.split())
        assert "NOT exact" not in text
        data = json.loads((rundir / "results" / "experiment.json").read_text())
        assert data["exact"] is True
        topology = load_topology(rundir)
        assert topology.target == "bmv2"
        assert all(ln.delay_s == pytest.approx(50e-6) for ln in topology.links)
        _owner, records = read_pids(rundir / "pids.json")
        wires = sorted(r.name for r in records if r.kind == "wire")
        if netem_available():
            assert wires == [] and not topology.delay_nodes
        else:
            assert wires == names[1:] and topology.delay_nodes
        assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
        assert switch_interfaces(names) == []
    finally:
        remove_interfaces(switch_interfaces(names))
