"""One topology across several machines (topo/cluster.py): placement without root, and a
``make run`` across two namespaced machines (tests/machines.py: an sshd each, reached only
over addresses inside namespaces the test creates) with both all-reduces exact and nothing
left on either machine afterwards. Every node, link and process of those runs lives in the
lab's namespaces, so the module runs in the namespace group, beside the Mininet modules."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mininet.examples.cluster import RemoteMixin

import stackdump
from experiment.run import build_topology, cluster_spec, parse_args
from liveview.remote import read_remote_interfaces, remote_switches
from tests.machines import Machines, machines
from topo.cluster import ClusterSpec, _ForkSafePopen, crossing_links, place
from topo.errors import TopologyError
from topo.nodes import BMv2Switch
from topo.topofile import load_spec
from topo.topologies import FileTopo, SpineLeafTopo

PREFIX = "cl"  # node names of this module's networks (tests/test_rootlock.py)


def test_a_leaf_and_its_hosts_share_a_server_and_only_fabric_links_cross() -> None:
    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2)
    placement = place(topo, ["a", "b"])
    assert {placement[n] for n in ("l1", "h1", "h2")} == {"a"}
    assert {placement[n] for n in ("l2", "h3", "h4")} == {"b"}
    assert {placement["sp1"], placement["sp2"]} == {"a", "b"}
    crossing = crossing_links(topo, placement)
    assert sorted((x, y) for x, y, _a, _b in crossing) == [("l1", "sp2"), ("l2", "sp1")]


def test_a_node_placed_by_hand_keeps_its_server_and_draws_its_hosts() -> None:
    topo = SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=1)
    placement = place(topo, ["a", "b", "c"], {"l1": "c"})
    assert placement["l1"] == placement["h1"] == "c"


def test_more_servers_than_leaves_puts_spines_on_the_free_ones() -> None:
    topo = SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=1)
    placement = place(topo, ["a", "b", "c"])
    assert placement["sp1"] == "c"


def test_bad_server_lists_and_placements_are_refused() -> None:
    with pytest.raises(TopologyError, match="names one twice"):
        ClusterSpec.parse("a,a")
    with pytest.raises(TopologyError, match="at least one"):
        ClusterSpec.parse(" , ")
    with pytest.raises(TopologyError, match="not one of"):
        ClusterSpec(("a",), {"l1": "b"})
    with pytest.raises(TopologyError, match="unknown node"):
        place(SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1), ["a"], {"zz": "a"})


def test_ssh_config_becomes_every_ssh_commands_option(tmp_path: Path) -> None:
    spec = ClusterSpec.parse("10.0.0.1, 10.0.0.2", tmp_path / "cfg")
    assert spec.servers == ("10.0.0.1", "10.0.0.2")
    assert spec.ssh_options == ("-F", str(tmp_path / "cfg"))


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return f"{pid}: {fh.read().replace(bytes(1), b' ').decode(errors='replace')}"
    except OSError:
        return f"{pid}: gone"


def _needs_sshd() -> None:
    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        pytest.skip("openssh-server is not installed (make setup installs it)")


@pytest.fixture(scope="module")
def lab() -> Iterator[Machines]:
    """Two namespaced machines and a master namespace, shared by the module's runs."""
    _needs_sshd()
    with machines(2, tag=f"{PREFIX}{os.getpid() % 1000:03d}") as lab:
        yield lab


TARGETS = [
    pytest.param("softswitch", id="softswitch"),
    pytest.param("bmv2", id="bmv2", marks=pytest.mark.skipif(
        not BMv2Switch.available(), reason="BMv2 (simple_switch_grpc, p4c) is not installed")),
]


class _Spawner:
    def _popen(self, cmd: list[str], **params: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(cmd, **params)  # type: ignore[call-overload,no-any-return]


class _NodeSpawner(_ForkSafePopen, _Spawner):
    """How a cluster node starts its processes (its ssh clients), without the node."""


def test_a_node_started_under_nohup_can_still_be_stopped_with_sighup() -> None:
    """Mininet stops a remote node by SIGHUP to its ssh client's process group. Under
    ``nohup`` (SIGHUP ignored, and so in every child) ssh never exited: a fresh-clone suite
    started with nohup hung its cluster run in the teardown for 180 s. The node's processes
    start with SIGHUP's default action, in a process group of their own."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        proc = _NodeSpawner()._popen(
            ["sh", "-c", "grep SigIgn /proc/self/status; ps -o pgid= -p $$"],
            preexec_fn=RemoteMixin._ignoreSignal, stdout=subprocess.PIPE)
        out, _ = proc.communicate(timeout=30)
    finally:
        signal.signal(signal.SIGHUP, previous)
    ignored_line, pgid = out.decode().split("\n")[:2]
    ignored = int(ignored_line.split()[1], 16)
    assert not ignored & (1 << (signal.SIGHUP - 1)), ignored_line
    assert int(pgid) == proc.pid  # its own process group, as Mininet's preexec_fn made it


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("target", TARGETS)
def test_make_run_across_two_namespaced_machines_is_exact_and_leaves_nothing(
        lab: Machines, target: str, tmp_path: Path, repo_root: Path) -> None:
    rundir = tmp_path / "run"
    argv = [sys.executable, "-m", "experiment.run", "--topo", "spineleaf", "--target", target,
            "--servers", ",".join(lab.addresses), "--ssh-config", str(lab.ssh_config),
            "--no-cli", "--tdf", "1", "--elements", "4096", "--link-check-seconds", "0",
            "--rundir", str(rundir), "--no-live", "--name-prefix", PREFIX,
            "--grpc-port", "21559", "--thrift-port", "21590"]
    proc = lab.run_in_master(argv, cwd=repo_root, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    out, _ = stackdump.communicate(proc, timeout=180)  # a hung run leaves its stacks
    assert proc.returncode == 0, out
    assert out.count("exact") >= 2 and "NOT exact" not in out, out
    assert "links between machines (ssh tunnels): cll1-clsp2" in out, out
    placed = json.loads((rundir / "cluster.json").read_text())
    assert placed["placement"]["cll1"] == placed["placement"]["clh1"] == lab.addresses[0]
    topology = json.loads((rundir / "topology.json").read_text())
    remote = {s["name"]: s["grpc_addr"] for s in topology["switches"]}
    assert remote["cll2"] == f"{lab.addresses[1]}:21560"
    # nothing of the run is left on either machine: processes, hosts' namespaces, links
    left = lab.wait_idle()
    assert left == [], [_describe(pid) for pid in left]
    assert lab.interfaces() == {ns: [] for ns in lab.names}


def _workers_started(pids: Path) -> bool:
    try:
        data = json.loads(pids.read_text())
    except (OSError, ValueError):
        return False
    return any(p.get("kind") == "in-host" for p in data.get("processes", []))


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_cluster_run_stopped_while_its_workers_run_leaves_nothing(
        lab: Machines, tmp_path: Path, repo_root: Path) -> None:
    """SIGTERM (make run's Ctrl-C path) while the all-reduce's workers run on both machines."""
    rundir = tmp_path / "run"
    argv = [sys.executable, "-m", "experiment.run", "--topo", "spineleaf",
            "--servers", ",".join(lab.addresses), "--ssh-config", str(lab.ssh_config),
            "--no-cli", "--tdf", "1", "--elements", "262144", "--rundir", str(rundir),
            "--no-live", "--name-prefix", PREFIX, "--grpc-port", "21659"]
    proc = lab.run_in_master(argv, cwd=repo_root, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while not _workers_started(rundir / "pids.json"):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, _ = stackdump.communicate(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out
    assert "interrupted: network stopped" in out, out
    left = lab.wait_idle()
    assert left == [], [_describe(pid) for pid in left]
    assert lab.interfaces() == {ns: [] for ns in lab.names}


PLACED_FILE = """
schema: 1
kind: placed
switches:
  - {foreach: {l: "1..2"}, name: "l{l}", role: leaf, server: "{l - 1}"}
  - {name: sp1, role: spine, server: b}
hosts:
  - {foreach: {l: "1..2"}, name: "h{l}", switch: "l{l}"}
links:
  - {foreach: {l: "1..2"}, a: "l{l}", b: sp1}
"""


def test_a_topology_files_server_keys_place_its_nodes(tmp_path: Path) -> None:
    path = tmp_path / "placed.yaml"
    path.write_text(PLACED_FILE)
    spec = load_spec(path)
    wanted = {n.name: n.server for n in spec.switches if n.server is not None}
    wanted |= {h.name: h.server for h in spec.hosts if h.server is not None}
    cluster = ClusterSpec.for_file("a,b", wanted)
    placement = place(FileTopo(spec), cluster.servers, cluster.placement)
    assert placement == {"l1": "a", "h1": "a", "l2": "b", "h2": "b", "sp1": "b"}
    with pytest.raises(TopologyError, match="only 1 servers"):
        ClusterSpec.for_file("a", wanted)
    with pytest.raises(TopologyError, match="'b' is not one of"):
        ClusterSpec.for_file("x,y", {"sp1": "b"})


def test_the_live_view_reads_a_remote_switchs_counters_through_its_ssh_command(
        tmp_path: Path) -> None:
    """One command per server reads every port's counters there (here ``sh -c`` stands for
    the ssh command cluster.json holds, and a directory for that server's sysfs)."""
    files = ("rx_bytes", "tx_bytes")
    stats = tmp_path / "cll2-eth1" / "statistics"
    stats.mkdir(parents=True)
    (stats / "rx_bytes").write_text("1234\n")
    (stats / "tx_bytes").write_text("99\n")
    cluster = {"placement": {"cll1": "here", "cll2": "b"}, "ssh": {"b": ["sh", "-c"]}}
    assert remote_switches(cluster) == {"b": ["cll2"]}
    read = read_remote_interfaces(["sh", "-c"], ["cll2-eth1", "cll2-eth2"], files,
                                  str(tmp_path))
    assert read == {"cll2-eth1": {"rx_bytes": 1234, "tx_bytes": 99}}


def test_make_runs_servers_option_makes_the_cluster_spec(tmp_path: Path) -> None:
    args = parse_args(["--topo", "spineleaf", "--servers", "a,b",
                       "--ssh-config", str(tmp_path / "cfg")])
    spec = cluster_spec(args, build_topology(args))
    assert spec is not None and spec.servers == ("a", "b")
    assert spec.ssh_options == ("-F", str(tmp_path / "cfg"))
    plain = parse_args(["--topo", "spineleaf"])
    assert cluster_spec(plain, build_topology(plain)) is None
    with pytest.raises(SystemExit):
        parse_args(["--ssh-config", "cfg"])  # only with --servers
