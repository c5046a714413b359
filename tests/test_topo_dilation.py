"""Time dilation and link delays in topo/: which switch ports hold packets for the links'
delays when there is no netem, what the built-in switch's command line carries, and what
topology.json records. No root: nothing is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from topo.errors import TopologyFileError
from topo.model import describe, topology_from_dict, topology_to_dict
from topo.network import port_delays
from topo.nodes import BMv2Switch, SoftSwitch, SwitchLaunch
from topo.topofile import load_spec, resolve
from topo.topologies import FileTopo


def _spineleaf(**params: object) -> FileTopo:
    return FileTopo(load_spec(resolve("spineleaf"), {"spines": 1, **params}))


def test_port_delays_host_ports_both_ways_fabric_ports_egress() -> None:
    """A host's link is delayed by its switch in both directions; a switch-to-switch link by
    each end's egress, so every direction is delayed exactly once."""
    topo = _spineleaf(delay="2us")
    delays = port_delays(topo)
    l1_egress, l1_ingress = delays["l1"]
    assert l1_egress == {1: 2e-6, 2: 2e-6, 3: 2e-6}  # h1, h2, sp1
    assert l1_ingress == {1: 2e-6, 2: 2e-6}  # only the hosts' ports
    sp_egress, sp_ingress = delays["sp1"]
    assert sp_egress == {1: 2e-6, 2: 2e-6} and sp_ingress == {}


def test_no_delay_no_delay_line() -> None:
    assert port_delays(_spineleaf()) == {}


def test_built_in_switch_argv_carries_tdf_and_delays(tmp_path: Path) -> None:
    launch = SwitchLaunch(name="l1", device_id=1, grpc_addr="127.0.0.1:50051",
                          ports=((1, "l1-eth1"), (3, "l1-eth3")), log_file=tmp_path / "l1.log",
                          tdf=250.0, egress_delays=((1, 2e-6), (3, 2e-6)),
                          ingress_delays=((1, 2e-6),))
    argv = SoftSwitch.build_argv(launch)
    tail = argv[argv.index("--tdf"):]
    assert tail[:2] == ["--tdf", "250.0"]
    assert tail.count("--port-delay") == 2 and tail.count("--port-ingress-delay") == 1
    # real time and no delays: the command line of before
    plain = SoftSwitch.build_argv(SwitchLaunch(name="l1", device_id=1, grpc_addr="x:1",
                                               ports=(), log_file=tmp_path / "l1.log"))
    assert "--tdf" not in plain and "--port-delay" not in plain


def test_only_the_built_in_target_has_a_delay_line() -> None:
    assert SoftSwitch.delay_line and not BMv2Switch.delay_line


def test_topology_json_records_tdf_and_delay_line() -> None:
    topo = describe(_spineleaf(delay="2us"), target="softswitch", tdf=40_000.0,
                    delay_line=True)
    back = topology_from_dict(topology_to_dict(topo))
    assert (back.tdf, back.delay_line) == (40_000.0, True)
    old = topology_to_dict(describe(_spineleaf(), target="softswitch"))
    old.pop("tdf")
    old.pop("delay_line")
    assert topology_from_dict(old).tdf == 1.0  # files from before read as real time


@pytest.mark.parametrize("bad", [0.5, "fast", True])
def test_bad_tdf_in_topology_json(bad: object) -> None:
    data = topology_to_dict(describe(_spineleaf(), target="softswitch"))
    data["tdf"] = bad
    with pytest.raises(TopologyFileError, match="tdf: expected a number >= 1"):
        topology_from_dict(data)
