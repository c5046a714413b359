"""Delay nodes in topo/ (no root): where they go, and that nobody above Mininet sees them.

A delayed link A--B is built as A--W--B: A's and B's ports, their MACs, the nodes' options
and every ``topology.json`` record must stay exactly what they are without W; W sits only on
links with a delay, and only when neither netem nor the switches hold the delays (or when
forced). The CPU of W's process counts with the switches' (``wire:<name>``), in the fidelity
guard and in the calibration's cache key.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiment import calibrate, dilation
from experiment.lifecycle import StartOptions, switch_cpu_seconds
from topo.delaynodes import (
    DelayMechanism,
    DelayNode,
    delay_mechanism,
    has_delays,
    plan_delay_nodes,
    with_delay_nodes,
)
from topo.errors import TopologyError
from topo.links import netem_available
from topo.measure import process_pids
from topo.model import describe, topology_from_dict, topology_to_dict
from topo.network import delay_nodes_needed
from topo.nodes import BMv2Switch, SoftSwitch
from topo.topofile import TopologySpec, load_spec, resolve
from topo.topologies import FileTopo, RackTopo, SpineLeafTopo

MIXED = """\
schema: 1
kind: mixed
switches:
  - {name: l1, role: leaf}
  - {name: l2, role: leaf}
  - {name: dl1, role: spine}
hosts:
  - {name: h1, switch: l1}
  - {name: h2, switch: l2, link: {bw: 10, delay: 1ms}}
links:
  - {a: l1, b: dl1, bw: 6M, delay: 2us, loss: 0.1, queue: 100}
  - {a: l2, b: dl1, bw: 6M}
"""


@pytest.fixture
def mixed(tmp_path: Path) -> FileTopo:
    """Two delayed links of four, and a switch already named like a delay node."""
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    return FileTopo(load_spec(path))


def _ends(topo: FileTopo) -> dict[tuple[str, int], tuple[str, int, dict[str, Any]]]:
    """{(node, port): (peer, peer port, link options)} of every link end."""
    out: dict[tuple[str, int], tuple[str, int, dict[str, Any]]] = {}
    for _a, _b, info in topo.links(withInfo=True):
        n1, p1, n2, p2 = info["node1"], int(info["port1"]), info["node2"], int(info["port2"])
        out[(n1, p1)] = (n2, p2, info)
        out[(n2, p2)] = (n1, p1, info)
    return out


def test_delay_nodes_only_on_delayed_links_named_apart_from_nodes(mixed: FileTopo) -> None:
    """The host link of h2 and the fabric link l1--dl1 get one each; ``dl1`` is a switch
    already, so the delay nodes are dl2 and dl3."""
    plans = plan_delay_nodes(mixed)
    assert [(p.name, p.link, p.delay_s) for p in plans] == [
        ("dl2", "h2:0--l2:1", 1e-3), ("dl3", "l1:2--dl1:1", 2e-6)]
    assert plans[0].interfaces == ("dl2-eth1", "dl2-eth2")


def test_rewrite_keeps_every_port_mac_and_node(mixed: FileTopo) -> None:
    """Every end of the topology is still there with its port and MAC, and reaches its old
    peer (directly, or through W's port 1 and 2); nodes keep their options; the halves keep
    the rate and queue, lose the delay, and only the first keeps the loss."""
    plans = plan_delay_nodes(mixed)
    built = with_delay_nodes(mixed, plans, DelayNode)
    assert sorted(built.switches()) == sorted([*mixed.switches(), "dl2", "dl3"])
    assert built.hosts() == mixed.hosts()
    for name in mixed.nodes():
        assert built.nodeInfo(name) == mixed.nodeInfo(name), name
    assert built.nodeInfo("dl3")["cls"] is DelayNode
    assert built.nodeInfo("dl3")["delay_s"] == 2e-6
    before, after = _ends(mixed), _ends(built)
    assert len(after) == len(before) + 2 * len(plans)
    for (node, port), (peer, peer_port, info) in before.items():
        got_peer, got_port, half = after[(node, port)]
        mac = info["addr1"] if info["node1"] == node else info["addr2"]
        assert (half["addr1"] if half["node1"] == node else half["addr2"]) == mac
        if not info.get("delay_s"):
            assert (got_peer, got_port, half) == (peer, peer_port, info)
            continue
        assert got_peer.startswith("dl") and got_peer not in mixed.nodes()
        other = 2 if got_port == 1 else 1
        assert after[(got_peer, other)][:2] == (peer, peer_port)
        assert "delay_s" not in half and half["bw_bps"] == info["bw_bps"]
    first = after[("l1", 2)][2]
    second = after[("dl3", 2)][2]
    assert (first["loss"], first["max_queue_size"]) == (0.1, 100)
    assert "loss" not in second and second["max_queue_size"] == 100


def test_spineleaf_gets_one_delay_node_per_link() -> None:
    topo = SpineLeafTopo(delay="2us", name_prefix="tz")
    plans = plan_delay_nodes(topo)
    assert len(plans) == len(topo.links()) == 8
    assert [p.name for p in plans] == [f"tzdl{i}" for i in range(1, 9)]
    assert plan_delay_nodes(SpineLeafTopo()) == [] and not has_delays(SpineLeafTopo())


def test_topology_records_do_not_see_delay_nodes(mixed: FileTopo) -> None:
    """topology.json with delay nodes: the same switches, ports, hosts and links (A--B with
    its rate and delay), only the flag says how the delays are held."""
    plain = describe(mixed, target="bmv2", netem=False)
    with_nodes = describe(mixed, target="bmv2", netem=False, delay_nodes=True)
    assert (with_nodes.switches, with_nodes.hosts, with_nodes.links) == \
        (plain.switches, plain.hosts, plain.links)
    assert with_nodes.delay_nodes and not plain.delay_nodes
    assert not any(p.peer.startswith("dl2") or p.peer.startswith("dl3")
                   for s in with_nodes.switches for p in s.ports)
    back = topology_from_dict(topology_to_dict(with_nodes))
    assert back == with_nodes
    old = topology_to_dict(plain)
    old.pop("delay_nodes")
    assert topology_from_dict(old).delay_nodes is False  # files from before


@pytest.mark.parametrize(("delayed", "netem", "line", "forced", "expected"), [
    (False, False, False, True, DelayMechanism.NONE),
    (True, True, False, False, DelayMechanism.NETEM),
    (True, True, True, False, DelayMechanism.NETEM),
    (True, False, True, False, DelayMechanism.SWITCHES),
    (True, False, False, False, DelayMechanism.DELAY_NODES),
    (True, True, True, True, DelayMechanism.DELAY_NODES),
    (True, False, True, True, DelayMechanism.DELAY_NODES),
])
def test_which_mechanism_holds_the_delays(delayed: bool, netem: bool, line: bool,
                                          forced: bool, expected: DelayMechanism) -> None:
    """netem first, then the switches' delay line, then delay nodes; forced: delay nodes
    whenever there is a delay."""
    assert delay_mechanism(delayed, netem, line, forced) is expected


def test_delay_nodes_needed_per_target() -> None:
    """BMv2 needs them exactly where the kernel has no netem; the built-in target only when
    forced; no delay, none."""
    assert delay_nodes_needed(BMv2Switch, True) is (not netem_available())
    assert delay_nodes_needed("bmv2", True) is (not netem_available())
    assert delay_nodes_needed(SoftSwitch, True) is False
    assert delay_nodes_needed("softswitch", True, forced=True) is True
    assert delay_nodes_needed("bmv2", False, forced=True) is False
    assert delay_nodes_needed("nosuch", True) is False


def test_long_prefix_is_refused_naming_the_interface() -> None:
    """``abcdefghdl1-eth2`` has 16 characters: refused with the name and the fix."""
    topo = RackTopo(hosts=1, delay="1ms", name_prefix="abcdefgh")
    with pytest.raises(TopologyError, match=r"delay node 'abcdefghdl1'.*abcdefghdl1-eth2 "
                                            r"exceeds 15 characters; use a shorter name_prefix"):
        plan_delay_nodes(topo)


def test_rewrite_refuses_a_plan_for_a_link_that_is_not_there(mixed: FileTopo) -> None:
    plans = plan_delay_nodes(RackTopo(hosts=1, delay="1ms"))
    with pytest.raises(TopologyError, match="links the topology does not have: h1:0--s1:1"):
        with_delay_nodes(mixed, plans, DelayNode)


# ================================================================ their CPU counts


def _node(name: str, pid: int | None) -> SimpleNamespace:
    return SimpleNamespace(name=name, proc=None if pid is None else SimpleNamespace(pid=pid))


def test_wires_are_counted_with_the_switches() -> None:
    """The monitor's pids and the switch CPU figures name each wire ``wire:<name>``; a node
    without a process is left out; a network without delay nodes is as before."""
    me = os.getpid()
    network = SimpleNamespace(switches=[_node("s1", me), _node("s2", None)],
                              delay_nodes=[_node("dl1", me), _node("dl2", None)])
    assert process_pids(network) == {"s1": me, "wire:dl1": me}
    cpu = switch_cpu_seconds(network)
    assert set(cpu) == {"s1", "wire:dl1"} and cpu["wire:dl1"] >= 0
    assert process_pids(SimpleNamespace(switches=[_node("s1", me)])) == {"s1": me}
    assert process_pids(None) == {}


def test_start_options_pass_delay_nodes_on() -> None:
    assert StartOptions(delay_nodes=True).keywords()["delay_nodes"] is True
    assert "delay_nodes" not in StartOptions().keywords()


def test_calibration_with_delay_nodes_is_its_own_setting(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that will have delay nodes is calibrated apart (their CPU is in its costs); one
    whose links have no delay shares the plain calibration even when forced."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    program = tmp_path / "p.p4"
    program.write_text("// program\n")
    assert calibrate.cache_key("softswitch", program, 252, 4) != \
        calibrate.cache_key("softswitch", program, 252, 4, delay_nodes=True)
    calls: list[int] = []

    def measure() -> calibrate.Costs:
        calls.append(1)
        return calibrate.Costs(600e-6, 200e-6, "softswitch", 4, 252)

    def spec(**params: object) -> TopologySpec:
        return load_spec(resolve("spineleaf"), {"bw": 3, **params})

    delayed = spec(delay="2us")
    dilation.resolve("auto", "softswitch", program, delayed, 252, measure=measure)
    dilation.resolve("auto", "softswitch", program, delayed, 252, measure=measure)
    assert len(calls) == 1  # the built-in target holds delays itself: the plain setting
    forced = dilation.resolve("auto", "softswitch", program, delayed, 252, measure=measure,
                              delay_nodes=True)
    assert len(calls) == 2 and "cached" not in forced.why
    dilation.resolve("auto", "softswitch", program, spec(), 252, measure=measure,
                     delay_nodes=True)
    assert len(calls) == 2
