"""fabricspec: topology.json's one parser (schemas 1 and 2), its defaults for hand-written
files, and errors that name the file, the field and the value."""

from __future__ import annotations

import copy
import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fabricspec
from fabricspec import (
    FabricSpecError,
    LinkRecord,
    Topology,
    UnknownNodeError,
    read_topology,
    topology_from_dict,
    topology_to_dict,
)


def _schema2() -> dict[str, Any]:
    """A rack (one leaf s1, hosts h1 and h2) as topo writes it."""
    return {
        "schema": 2, "kind": "rack", "target": "bmv2",
        "switches": [{
            "name": "s1", "device_id": 1, "grpc_addr": "127.0.0.1:50051", "role": "leaf",
            "index": 1, "target": "bmv2", "cpu_port": 255, "log": "/r/logs/s1.log",
            "subnet": "10.0.1.0/24", "thrift_port": 9091,
            "ports": [{"port": 2, "intf": "s1-eth2", "mac": "00:0b:00:00:00:02", "peer": "h2",
                       "peer_port": 0, "peer_intf": "h2-eth0"},
                      {"port": 1, "intf": "s1-eth1", "mac": "00:0b:00:00:00:01", "peer": "h1",
                       "peer_port": 0, "peer_intf": "h1-eth0"}]}],
        "hosts": [{"name": f"h{i}", "ip": f"10.0.1.{i}", "prefix_len": 16,
                   "mac": f"00:00:0a:00:01:0{i}", "intf": f"h{i}-eth0", "switch": "s1",
                   "switch_port": i, "leaf": 1, "slot": i, "gpus": 2, "role": "worker",
                   "intra_bw_bps": 1.2e12} for i in (1, 2)],
        "links": [{"node1": f"h{i}", "port1": 0, "node2": "s1", "port2": i, "kind": "host",
                   "bw_bps": 10e6, "delay_s": 2e-6, "loss": 0.5} for i in (1, 2)],
        "program": "/p/netreduce.p4", "p4info": "/b/netreduce.p4info.txtpb",
        "device_config": "/b/netreduce.json", "netem": True, "tdf": 4.0, "delay_line": False,
        "delay_nodes": False, "rundir": "/r", "extra": {"params": {"hosts": 2}},
    }


def _schema1() -> dict[str, Any]:
    """The same rack as a run directory written before rates had units."""
    data = _schema2()
    data["schema"] = 1
    for ln in data["links"]:
        ln["bw_mbit"] = ln.pop("bw_bps") / 1e6
        ln["delay"] = "2us"
        del ln["delay_s"]
    for h in data["hosts"]:
        del h["intra_bw_bps"]
    return data


def test_schema_2_gives_every_record() -> None:
    topo = topology_from_dict(_schema2(), "t.json")
    s1 = topo.switch("s1")
    assert [p.port for p in s1.ports] == [1, 2]  # sorted by port number
    assert s1.port_to("h2").intf == "s1-eth2" and s1.port(1).peer == "h1"
    assert s1.thrift_addr == ("127.0.0.1", 9091)
    assert topo.subnet_of("s1") == ipaddress.IPv4Network("10.0.1.0/24")
    assert topo.host("10.0.1.2").name == "h2"  # by address too
    assert topo.links[0] == LinkRecord("h1", 0, "s1", 1, "host", 10e6, 2e-6, 0.5)
    assert (topo.kind, topo.target, topo.tdf, topo.netem) == ("rack", "bmv2", 4.0, True)
    assert topo.total_gpus() == 4 and topo.hosts[0].intra_bw_bps == 1.2e12
    assert topology_from_dict(topology_to_dict(topo)) == topo


def test_schema_1_reads_into_the_same_records() -> None:
    new = topology_from_dict(_schema2())
    old = topology_from_dict(_schema1())
    assert old.links == new.links
    assert old.switches == new.switches
    assert [h.intra_bw_bps for h in old.hosts] == [None, None]
    assert topology_to_dict(old)["schema"] == 2  # written back in the current schema


def test_a_hand_written_file_gets_the_documented_defaults() -> None:
    """What a controller-only file may leave out: kind, target, links, a port's names, a
    host's leaf and slot, its gpus; no schema means schema 1."""
    data = {"switches": [{"name": "l1", "device_id": 7, "grpc_addr": "10.9.0.1:9559",
                          "ports": [{"port": 3, "peer": "h1"}]}],
            "hosts": [{"name": "h1", "ip": "10.0.1.1/24", "mac": "00:00:0a:00:01:01",
                       "switch": "l1", "switch_port": 3}]}
    topo = topology_from_dict(data)
    (port,) = topo.switch("l1").ports
    assert (port.intf, port.mac, port.peer_port, port.peer_intf) == ("l1-eth3", "", 0, "h1-eth0")
    h1 = topo.host("h1")
    assert (h1.ip, h1.prefix_len, h1.intf, h1.leaf, h1.slot, h1.gpus, h1.role) == (
        "10.0.1.1", 24, "h1-eth0", 1, 3, 1, "worker")
    assert (topo.schema, topo.kind, topo.target, topo.links) == (2, "unknown", "unknown", ())
    assert topo.switch("l1").role == "leaf" and topo.switch("l1").index == 1
    assert topo.subnet_of("l1") == ipaddress.IPv4Network("10.0.1.1/32")


def _set(path: str, value: Any) -> Any:
    """A mutation of the schema-2 document: ``path`` like ``hosts.0.gpus``."""
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: int | str = int(last) if isinstance(node, list) else last
        if value is _DELETE:
            del node[key]
        else:
            node[key] = value
    return mutate


_DELETE = object()


@pytest.mark.parametrize("mutate, message", [
    (_set("hosts.0.gpus", "two"), "t.json: hosts[0].gpus: expected int, got 'two'"),
    (_set("switches.0.device_id", True), "t.json: switches[0].device_id: expected int, got True"),
    (_set("links.1.bw_bps", "fast"), "t.json: links[1].bw_bps: expected number, got 'fast'"),
    (_set("switches.0.ports.1.port", _DELETE), "t.json: switches[0].ports[1]: missing key 'port'"),
    (_set("hosts", _DELETE), "t.json: missing key 'hosts'"),
    (_set("kind", 3), "t.json: kind: expected str, got 3"),
    (_set("schema", 9), "t.json: schema 9 is not supported (expected one of 1, 2)"),
    (_set("tdf", 0.5), "t.json: tdf: expected a number >= 1, got 0.5"),
    (_set("extra", []), "t.json: extra: expected an object, got []"),
    (_set("hosts.1", "h2"), "t.json: hosts[1]: expected an object, got 'h2'"),
    (_set("switches.0.subnet", "10.0.1.0/33"),
     "t.json: switches[0].subnet: '10.0.1.0/33' is not an IPv4 network"),
    (_set("hosts.0.ip", "10.0.1.300"), "t.json: hosts[0].ip: '10.0.1.300' is not an IPv4 address"),
    (_set("hosts.1.switch", "s9"), "t.json: host h2 is attached to unknown switch 's9'"),
    (_set("hosts.1.name", "s1"), "t.json: node name 's1' appears twice"),
])
def test_bad_field_names_file_field_and_value(mutate: Callable[[dict[str, Any]], None],
                                                message: str) -> None:
    data = _schema2()
    mutate(data)
    with pytest.raises(FabricSpecError) as info:
        topology_from_dict(data, "t.json")
    assert str(info.value) == message


def test_bad_schema_1_delay_names_the_link() -> None:
    data = _schema1()
    data["links"][1]["delay"] = "2"
    with pytest.raises(FabricSpecError, match=r"^t\.json: links\[1\]\.delay: '2' needs a unit"):
        topology_from_dict(data, "t.json")


def test_not_an_object_at_the_top() -> None:
    with pytest.raises(FabricSpecError, match="t.json: expected a JSON object at the top level"):
        topology_from_dict([], "t.json")


def test_lookups_of_unknown_nodes_are_key_errors_for_people() -> None:
    topo = topology_from_dict(_schema2())
    with pytest.raises(KeyError) as info:
        topo.switch("s9")
    assert isinstance(info.value, UnknownNodeError) and isinstance(info.value, FabricSpecError)
    assert str(info.value) == "unknown switch 's9' (switches: s1)"
    with pytest.raises(UnknownNodeError, match="switch s1 has no port 7"):
        topo.switch("s1").port(7)
    with pytest.raises(UnknownNodeError, match="unknown host 'h9' .hosts: h1, h2."):
        topo.host("h9")


def test_read_topology_from_a_run_directory(tmp_path: Path) -> None:
    """The file or its directory; relative program paths are the file's directory's."""
    data = _schema2()
    data["p4info"] = "build/x.p4info.txtpb"
    (tmp_path / "topology.json").write_text(json.dumps(data), encoding="utf-8")
    topo = read_topology(tmp_path)
    assert isinstance(topo, Topology) and topo == read_topology(tmp_path / "topology.json")
    assert topo.p4info == str(tmp_path / "build/x.p4info.txtpb")
    assert topo.program == "/p/netreduce.p4"  # absolute: as written


def test_read_topology_errors(tmp_path: Path) -> None:
    with pytest.raises(FabricSpecError, match=r"/topology.json: no such file \(run make\)$"):
        read_topology(tmp_path, "run make")
    (tmp_path / "topology.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(FabricSpecError, match="topology.json: not valid JSON"):
        read_topology(tmp_path)
    broken = copy.deepcopy(_schema2())
    broken["hosts"][0]["gpus"] = -0.5
    (tmp_path / "topology.json").write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(FabricSpecError, match=rf"^{tmp_path}/topology.json: hosts\[0\]\.gpus"):
        read_topology(tmp_path)


def test_topo_and_controller_read_with_this_parser(tmp_path: Path) -> None:
    """Both readers give fabricspec's records, and its errors as their own packages'."""
    from controller.errors import ControllerError
    from controller.topology import FabricTopologyError, load_topology
    from topo.errors import TopoError, TopologyFileError
    from topo.model import Topology as TopoTopology
    from topo.rundir import load_topology as topo_load

    assert TopoTopology is fabricspec.Topology
    (tmp_path / "topology.json").write_text(json.dumps(_schema1()), encoding="utf-8")
    assert load_topology(tmp_path) == topo_load(tmp_path) == topology_from_dict(
        _schema1(), str(tmp_path / "topology.json"))
    (tmp_path / "topology.json").write_text('{"switches": 3}', encoding="utf-8")
    with pytest.raises(FabricTopologyError) as ctl:
        load_topology(tmp_path)
    with pytest.raises(TopologyFileError) as top:
        topo_load(tmp_path)
    assert str(ctl.value) == str(top.value) == (
        f"{tmp_path}/topology.json: switches: expected list, got 3")
    assert isinstance(ctl.value, ControllerError) and isinstance(top.value, TopoError)
    assert isinstance(ctl.value, FabricSpecError) and isinstance(top.value, FabricSpecError)


def test_a_file_without_a_schema_that_has_schema_2_rates_is_refused() -> None:
    """No "schema" means 1; a schema 2 rate in such a file must not be dropped silently."""
    data = _schema2()
    del data["schema"]
    with pytest.raises(FabricSpecError,
                       match=r"^t\.json: links\[0\]\.bw_bps: not a schema 1 key \(got 10000000"):
        topology_from_dict(data, "t.json")


def test_a_schema_2_file_with_schema_1_keys_is_refused() -> None:
    data = _schema2()
    data["links"][1]["delay"] = "2us"
    with pytest.raises(FabricSpecError, match=r"^t\.json: links\[1\]\.delay: not a schema 2 key"):
        topology_from_dict(data, "t.json")
