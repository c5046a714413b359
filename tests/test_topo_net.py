"""Starting and stopping real Mininet networks on the built-in target (needs root).

Every test uses switch names with the prefix ``tq`` and gRPC ports found free at run time, so
it cannot collide with a network someone else started; each one checks that no interface,
namespace shell or switch process outlives it. At the end, the two checks of tests/test_topo.py
that need root: tc's ACK-first commands in a private namespace, and the preflight's port
warning (it reads which ports are taken, so it runs under the network tests' lock).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment.run import run_experiment
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.errors import NetworkError, SwitchStartError
from topo.links import ACK_CLASS, DATA_CLASS, ack_first_htb_cmds, netem_available
from topo.network import Network, start_network
from topo.nodes import SoftSwitch, SwitchLaunch, free_port_base
from topo.rundir import load_topology, read_cmdline, read_pids
from topo.topologies import RackTopo

pytestmark = [
    pytest.mark.root,
]

PREFIX = "tq"


def _free_port_base(count: int) -> int:
    """A base port with ``count`` free ports after it (checked by binding)."""
    return free_port_base(count, 22000)


def _leftovers(names: list[str], pids: list[int]) -> tuple[list[str], list[int]]:
    alive = [pid for pid in pids if read_cmdline(pid) is not None]
    return switch_interfaces(names), alive


@pytest.fixture
def rack() -> Iterator[RackTopo]:
    """A 1-switch rack with 2 hosts; removes any tq* interface left behind, even on failure."""
    topo = RackTopo(hosts=2, name_prefix=PREFIX, grpc_base_port=_free_port_base(1))
    yield topo
    remove_interfaces(switch_interfaces(topo.switches()))


def _recorded_pids(network: Network) -> list[int]:
    _owner, records = read_pids(network.rundir.pids_path)
    return [r.pid for r in records]


def test_rack_starts_ready_and_stops_cleanly(rack: RackTopo, tmp_path: Path) -> None:
    """A rack on the built-in target comes up ready and leaves nothing behind."""
    with start_network(rack, "softswitch", tmp_path / "run", progress=False,
                       start_timeout=60) as network:
        summary = run_experiment(network, network.topology)
        assert summary.ok, summary.switches
        pids = _recorded_pids(network)
        kinds = sorted(r.kind for r in read_pids(network.rundir.pids_path)[1])
        # the switch is forked by the network's fork server, recorded (and stopped) too
        assert kinds == ["forkserver", "host-shell", "host-shell", "switch", "switch-shell"]
        assert load_topology(tmp_path / "run") == network.topology
        assert switch_interfaces(["tqs1"]) == ["tqs1-eth1", "tqs1-eth2"]
    assert _leftovers(["tqs1"], pids) == ([], [])


def test_teardown_after_exception(rack: RackTopo, tmp_path: Path) -> None:
    """An exception inside the with-block still stops every process and removes links."""
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"):
        with start_network(rack, "softswitch", tmp_path / "run", progress=False) as network:
            pids = _recorded_pids(network)
            raise RuntimeError("boom")
    assert len(pids) == 5  # 2 host shells, the switch, its shell, the fork server
    assert _leftovers(["tqs1"], pids) == ([], [])


def test_hosts_have_static_arp_and_offloads_off(rack: RackTopo, tmp_path: Path) -> None:
    """Hosts know each other's MAC permanently, have checksum offload off and TCP Reno."""
    with start_network(rack, "softswitch", tmp_path / "run", progress=False) as network:
        h1 = network.node("tqh1")
        neigh = h1.cmd("ip neigh show dev tqh1-eth0")
        assert "10.0.1.2 lladdr 00:00:0a:00:01:02 PERMANENT" in neigh
        features = h1.cmd("ethtool -k tqh1-eth0")
        assert "tx-checksumming: off" in features and "rx-checksumming: off" in features
        assert "10.0.1.1/16" in h1.cmd("ip -br addr show dev tqh1-eth0")
        # round-trip-clocked TCP in the hosts, whatever the machine's default (BBR here)
        assert h1.cmd("sysctl -n net.ipv4.tcp_congestion_control").strip() == "reno"


# Built with scapy, sent through a raw IP socket: the kernel takes the hosts' static ARP
# entries (scapy's own send() asked for the address with ARP first, which the switch, with
# no program, never answered: 2 s of waiting for each packet).
ACK_PROBE = """
import socket, sys
from scapy.all import IP, TCP, UDP, Raw
dst = sys.argv[1]
stamps = [("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]
out = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for pkt in (IP(dst=dst) / TCP(dport=5001, flags="A", options=stamps),   # pure ACK, 52 bytes
            IP(dst=dst) / TCP(dport=5001, flags="PA") / Raw(bytes(100)),  # data
            IP(dst=dst) / UDP(dport=4791) / Raw(bytes([0x11]) + bytes(15)),  # RoCE ACK
            IP(dst=dst) / UDP(dport=4791) / Raw(bytes([0x0A]) + bytes(300))):  # RoCE WRITE
    out.sendto(bytes(pkt), (dst, 0))
"""


def _class_packets(node: Any, dev: str) -> dict[str, int]:
    """{htb class id: packets sent} on one interface (``node``: a Mininet node)."""
    counts: dict[str, int] = {}
    current = None
    for line in node.cmd(f"tc -s class show dev {dev}").splitlines():
        words = line.split()
        if words[:2] == ["class", "htb"]:
            current = words[2]
        elif words[:1] == ["Sent"] and current is not None:
            counts[current] = int(words[3])
    return counts


def test_links_serve_acks_from_their_own_class(rack: RackTopo, tmp_path: Path) -> None:
    """On a host link, TCP pure ACKs and RoCE ACKs go to the ACK class, data to the other."""
    import sys

    with start_network(rack, "softswitch", tmp_path / "run", progress=False) as network:
        h1 = network.node("tqh1")
        before = _class_packets(h1, "tqh1-eth0")
        script = tmp_path / "ack_probe.py"
        script.write_text(ACK_PROBE)
        out = h1.cmd(f"{sys.executable} {script} 10.0.1.2; echo rc=$?")
        assert "rc=0" in out, out
        after = _class_packets(h1, "tqh1-eth0")
    sent = {cls: after[cls] - before.get(cls, 0) for cls in after}
    assert sent[ACK_CLASS] == 2, sent
    assert sent[DATA_CLASS] >= 2, sent
    assert sent["5:1"] == sent[ACK_CLASS] + sent[DATA_CLASS]


def test_real_link_is_shaped_to_the_emulated_rate(tmp_path: Path) -> None:
    """A rate written with units reaches htb converted (2500k: 2500 Kbit/s on both ends) and
    topology.json in bits/s and seconds."""
    topo = RackTopo(hosts=1, host_bw="2500k", delay="2us", name_prefix=PREFIX,
                    grpc_base_port=_free_port_base(1))
    try:
        with start_network(topo, "softswitch", tmp_path / "run", progress=False) as network:
            h1 = network.node(f"{PREFIX}h1")
            rates = [h1.cmd(f"tc class show dev {PREFIX}h1-eth0"),
                     network.node(f"{PREFIX}s1").cmd(f"tc class show dev {PREFIX}s1-eth1")]
            link = load_topology(network.rundir.path).links[0]
    finally:
        remove_interfaces(switch_interfaces(topo.switches()))
    for text in rates:
        assert "class htb 5:1 root rate 2500Kbit ceil 2500Kbit" in text, text
    assert link.bw_bps == 2.5e6 and link.delay_s == pytest.approx(2e-6)


class _BrokenSwitch(SoftSwitch):
    """A built-in switch started with an interface that does not exist."""

    @classmethod
    def build_argv(cls, launch: SwitchLaunch) -> list[str]:
        bad = SwitchLaunch(**{**launch.__dict__, "ports": launch.ports + ((9, "tq-nosuch"),)})
        return super().build_argv(bad)


def test_switch_that_dies_reports_reason_and_cleans_up(rack: RackTopo, tmp_path: Path) -> None:
    """A switch that exits at start raises 'switch X did not start: <reason>' and nothing
    is left behind."""
    with pytest.raises(SwitchStartError) as info:
        start_network(rack, _BrokenSwitch, tmp_path / "run", progress=False)
    text = str(info.value)
    assert text.startswith("switch tqs1 did not start: ")
    assert "tq-nosuch" in text.splitlines()[0]
    _owner, records = read_pids(tmp_path / "run" / "pids.json")
    assert _leftovers(["tqs1"], [r.pid for r in records]) == ([], [])


def test_preflight_refuses_taken_grpc_port(tmp_path: Path) -> None:
    """A gRPC port already in use is reported before anything is created."""
    import socket

    base = _free_port_base(1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", base))
        sock.listen()
        topo = RackTopo(hosts=1, name_prefix=PREFIX, grpc_base_port=base)
        with pytest.raises(NetworkError, match=f"127.0.0.1:{base} is already in use"):
            start_network(topo, "softswitch", tmp_path / "run", progress=False)
    assert switch_interfaces(["tqs1"]) == []


def test_netem_detection_matches_this_kernel() -> None:
    """netem_available() answers with a bool, probing only once per process."""
    netem_available.cache_clear()
    first = netem_available()
    assert isinstance(first, bool)
    assert netem_available() is first
    assert netem_available.cache_info().hits >= 1
    assert Path("/proc/self/ns/net").exists()


CRASHING_RUN = """
import sys, time
from topo.network import start_network
from topo.topologies import SpineLeafTopo
topo = SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, name_prefix="tq",
                     grpc_base_port=int(sys.argv[2]))
network = start_network(topo, "softswitch", sys.argv[1], progress=False)
print("up", flush=True)
time.sleep(120)
"""


def test_cleanup_after_killed_run(tmp_path: Path, repo_root: Path) -> None:
    """After the starting process is SIGKILLed, topo.cleanup stops its switches and removes
    the leftover fabric links, touching only what pids.json recorded."""
    import signal
    import subprocess
    import sys

    from topo.cleanup import clean_all

    names = ["tql1", "tqsp1"]
    runs = tmp_path / "runs"
    base = _free_port_base(2)
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(runs / "r1"), str(base)],
                            cwd=repo_root, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        _owner, records = read_pids(runs / "r1" / "pids.json")
        switch_pids = [r.pid for r in records if r.kind == "switch"]
        assert len(switch_pids) == 2 and all(read_cmdline(p) for p in switch_pids)
        assert "tql1-eth2" in switch_interfaces(names)  # the leaf-spine link survived
        report = clean_all(runs)
        assert {f"{r.name} (pid {r.pid})" for r in records if r.kind == "switch"} <= set(
            report.killed)
        assert "tql1-eth2" in report.interfaces
        assert _leftovers(names, switch_pids) == ([], [])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pids_file = runs / "r1" / "pids.json"
        records = read_pids(pids_file)[1] if pids_file.exists() else []
        for rec in records:
            if rec.kind == "switch" and read_cmdline(rec.pid) == list(rec.cmdline):
                os.kill(rec.pid, signal.SIGKILL)
        remove_interfaces(switch_interfaces(names))


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)")
def test_slow_ack_first_htb_is_accepted_without_warnings() -> None:
    """The commands for a 0.333 Mbit/s link, run by tc in a private namespace: no warning."""
    ns = f"qt{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "qa", "type", "veth", "peer", "name",
                        "qb"], check=True, timeout=30)
        for cmd in ack_first_htb_cmds(0.333):
            argv = (cmd % ("tc", "qa")).split()
            res = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True,
                                 text=True, timeout=30)
            assert res.returncode == 0 and "Warning" not in res.stdout + res.stderr, \
                (argv, res.stdout, res.stderr)
    finally:
        subprocess.run(["ip", "netns", "del", ns], timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="preflight needs root")
def test_preflight_warns_of_grpc_ports_in_the_client_port_range(
    caplog: pytest.LogCaptureFixture
) -> None:
    from topo.network import preflight
    from topo.nodes import ephemeral_ports

    low, _high = ephemeral_ports()
    topo = RackTopo(hosts=1, name_prefix="pw", grpc_base_port=low + 17)
    with caplog.at_level("WARNING", logger="topo.network"):
        preflight(topo)
    assert f"gRPC port(s) of pws1 ({low + 17}) lie in the kernel's client port range" \
        in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="topo.network"):
        preflight(RackTopo(hosts=1, name_prefix="pw"))
    assert "client port range" not in caplog.text
