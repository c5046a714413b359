"""A 2x2x2 spine-leaf on the built-in target, programmed by the controller (needs root).

ONE network per module (started once, several checks on it): the controller pushes
netreduce.p4, IPv4 routes with ECMP over both spines and an aggregation job over all four
hosts; then in-network and ring all-reduces run on the hosts (``experiment.session``). Switch
names carry the prefix ``tf`` and gRPC ports are found free at run time, so the module cannot
collide with another network; the last test stops the network and checks nothing is left.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment.lifecycle import open_controller, port_counters
from experiment.seams import json_float, json_int
from experiment.session import (
    ExperimentOptions,
    ping_all,
    run_experiment,
    tcp_transfer,
    udp_flows,
)
from tests.network_probe import ping_once
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.network import start_network
from topo.nodes import free_port_base
from topo.rundir import read_cmdline, read_pids
from topo.topologies import SpineLeafTopo

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
]

PREFIX = "tf"
SWITCHES = [f"{PREFIX}l1", f"{PREFIX}l2", f"{PREFIX}sp1", f"{PREFIX}sp2"]
H1, H2, H3, H4 = (f"{PREFIX}h{i}" for i in range(1, 5))
BW_MBIT = 10.0
PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"


def _free_port_base(count: int) -> int:
    """A base port with ``count`` free ports after it."""
    return free_port_base(count, 24000)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The running network, a ping tried before any route existed, and the experiment."""
    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, host_bw=BW_MBIT,
                         name_prefix=PREFIX, grpc_base_port=_free_port_base(4))
    rundir = tmp_path_factory.mktemp("fabric") / "run"
    network = start_network(topo, "softswitch", rundir, PROGRAM, progress=False)
    try:
        with open_controller(network) as controller:
            controller.push_pipeline()
        before_routes = ping_once(network, H1, H3)
        result = run_experiment(network, ExperimentOptions(elements=4096, timeout_s=60.0))
        yield {"network": network, "before_routes": before_routes, "result": result}
    finally:
        network.stop()
        remove_interfaces(switch_interfaces(SWITCHES))


def test_hosts_ping_each_other_through_programmed_routes(fabric: dict[str, Any]) -> None:
    """Every host pings every other, and nothing crossed racks before the controller's routes."""
    assert fabric["before_routes"] == 0
    replies = ping_all(fabric["network"], count=2)
    assert len(replies) == 12
    assert {pair: n for pair, n in replies.items() if n != 2} == {}


def test_tcp_between_racks_reaches_shaped_rate(fabric: dict[str, Any]) -> None:
    """A TCP transfer from rack 1 to rack 2 gets at least 80 % of the 10 Mbit/s links."""
    got = tcp_transfer(fabric["network"], H1, H3, seconds=4.0)
    assert json_int(got["bytes"]) > 0
    assert json_float(got["mbit_per_s"]) >= 0.8 * BW_MBIT, got


def test_flows_spread_over_both_spines(fabric: dict[str, Any]) -> None:
    """Sixteen fixed-port UDP flows from rack 1 to rack 2 leave leaf 1 on both uplinks."""
    network = fabric["network"]
    with open_controller(network) as controller:
        before = port_counters(controller)
        sent = udp_flows(network, H2, H4, range(6100, 6116), packets=10)
        after = port_counters(controller)
    assert sent == 160
    leaf, spine1_port, spine2_port = f"{PREFIX}l1", 3, 4
    up1 = after[(leaf, spine1_port)][1] - before[(leaf, spine1_port)][1]
    up2 = after[(leaf, spine2_port)][1] - before[(leaf, spine2_port)][1]
    flow_bytes = 10 * 1000  # one flow's payload, at the least
    assert up1 >= flow_bytes and up2 >= flow_bytes, (up1, up2)
    for spine in (f"{PREFIX}sp1", f"{PREFIX}sp2"):
        assert after[(spine, 1)][0] > before[(spine, 1)][0]  # each spine heard from leaf 1


def test_job_spans_both_leaves_under_one_spine(fabric: dict[str, Any]) -> None:
    """The controller's job has every host as a worker, both leaves as LEAF, one spine as ROOT."""
    job = fabric["result"].job
    assert sorted(w["host"] for w in job["workers"]) == [H1, H2, H3, H4]
    roles = {name: part["role"] for name, part in job["parts"].items()}
    assert roles[f"{PREFIX}l1"] == roles[f"{PREFIX}l2"] == "leaf"
    assert sorted(r for r in roles.values()) == ["leaf", "leaf", "root"]


def test_innetwork_allreduce_is_exact(fabric: dict[str, Any]) -> None:
    """The in-network all-reduce through leaves and spine gives every host the exact sum."""
    run = {r.algorithm: r for r in fabric["result"].runs}["innetwork"]
    assert run.errors == []
    assert run.exact and len(run.ranks) == 4
    spine_bytes = sum(u.tx_bytes + u.rx_bytes for u in run.links if u.switch.startswith(
        f"{PREFIX}sp"))
    assert spine_bytes > 0  # partials went up and results came down through a spine


def test_ring_allreduce_is_exact(fabric: dict[str, Any]) -> None:
    """The ring all-reduce of the same tensors gives every host the exact sum too."""
    ring = {r.algorithm: r for r in fabric["result"].runs}["ring"]
    assert ring.errors == []
    assert ring.exact and len(ring.ranks) == 4


def test_results_file_has_utilization_and_cpu(fabric: dict[str, Any]) -> None:
    """experiment.json says exact, gives link utilisation and switch CPU for each run, and the
    link-vs-switch check of a UDP load across the fabric."""
    data = json.loads(Path(fabric["result"].path).read_text())
    assert data["exact"] is True
    assert [r["algorithm"] for r in data["runs"]] == ["innetwork", "ring"]
    for run in data["runs"]:
        assert set(run["switch_cpu"]) == set(SWITCHES)
        host_links = [u for u in run["links"] if u["kind"] == "host"]
        assert len(host_links) == 4 and all(u["bw_mbit"] == BW_MBIT for u in host_links)
        assert max(u["utilization"] for u in host_links) > 0
    check = data["path_check"]
    assert (check["src"], check["dst"], check["configured_mbit"]) == (H1, H4, BW_MBIT)
    assert set(check["switch_cpu"]) == set(SWITCHES) and check["achieved_mbit"] > 0


def test_teardown_leaves_nothing(fabric: dict[str, Any]) -> None:
    """Stopping the network ends every recorded process and removes every switch interface."""
    network = fabric["network"]
    _owner, records = read_pids(network.rundir.pids_path)
    assert {r.kind for r in records} >= {"switch", "host-shell"}
    network.stop()
    assert switch_interfaces(SWITCHES) == []
    assert [r.pid for r in records if read_cmdline(r.pid) == list(r.cmdline)] == []
