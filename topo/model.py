"""The running network as data: :func:`describe` turns a :class:`~topo.topologies.TestbedTopo`
(plus the run's choices: target, program, P4Info) into the :class:`Topology` that
``topology.json`` holds.

The records, the JSON form and its parser live in :mod:`fabricspec` (below topo and the
controller, which read the same file); they are importable from here as before. Parse errors
come out of :func:`topology_from_dict` as :class:`~topo.errors.TopologyFileError`.
"""

from __future__ import annotations

from typing import Any

import fabricspec
from fabricspec import (
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    HostRecord,
    LinkRecord,
    PortRecord,
    SwitchRecord,
    Topology,
    topology_to_dict,
)
from topo.errors import TopologyFileError
from topo.topologies import TestbedTopo

__all__ = [
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "HostRecord",
    "LinkRecord",
    "PortRecord",
    "SwitchRecord",
    "Topology",
    "describe",
    "topology_from_dict",
    "topology_to_dict",
]


def _intf_name(node: str, port: int) -> str:
    return f"{node}-eth{port}"


def describe(
    topo: TestbedTopo,
    *,
    target: str,
    program: str | None = None,
    p4info: str | None = None,
    device_config: str | None = None,
    netem: bool = False,
    rundir: str | None = None,
    log_dir: str | None = None,
    tdf: float = 1.0,
    delay_line: bool = False,
    delay_nodes: bool = False,
) -> Topology:
    """The :class:`Topology` of ``topo`` as it will run; needs no root and starts nothing."""
    link_infos = [info for _a, _b, info in topo.links(sort=True, withInfo=True)]
    ports: dict[str, list[PortRecord]] = {}
    links: list[LinkRecord] = []
    attach: dict[str, tuple[str, int]] = {}
    for info in link_infos:
        n1, n2, p1, p2 = info["node1"], info["node2"], int(info["port1"]), int(info["port2"])
        for here, hport, there, tport, mac in (
            (n1, p1, n2, p2, info.get("addr1")),
            (n2, p2, n1, p1, info.get("addr2")),
        ):
            if topo.isSwitch(here):
                ports.setdefault(here, []).append(
                    PortRecord(hport, _intf_name(here, hport), str(mac), there, tport,
                               _intf_name(there, tport))
                )
            else:
                attach[here] = (there, tport)
        links.append(
            LinkRecord(n1, p1, n2, p2, str(info.get("kind", "host")), info.get("bw_bps"),
                       info.get("delay_s"), info.get("loss"))
        )
    switches = []
    for name in topo.switches():
        opts = topo.nodeInfo(name)
        switches.append(
            SwitchRecord(
                name=name,
                device_id=int(opts["device_id"]),
                grpc_addr=f"{opts['grpc_host']}:{opts['grpc_port']}",
                role=str(opts["role"]),
                index=int(opts["index"]),
                target=target,
                cpu_port=opts.get("cpu_port"),
                ports=tuple(sorted(ports.get(name, []), key=lambda r: r.port)),
                log=f"{log_dir}/{name}.log" if log_dir else None,
                subnet=opts.get("subnet"),
                thrift_port=opts.get("thrift_port") if target == "bmv2" else None,
            )
        )
    hosts = []
    for name in topo.hosts():
        opts = topo.nodeInfo(name)
        ip, _, plen = str(opts["ip"]).partition("/")
        switch, sport = attach[name]
        hosts.append(
            HostRecord(name, ip, int(plen or 32), str(opts["mac"]), _intf_name(name, 0), switch,
                       sport, int(opts["leaf"]), int(opts["slot"]), int(opts["gpus"]),
                       str(opts.get("role", "worker")), opts.get("intra_bw_bps"))
        )
    hosts.sort(key=lambda h: (h.leaf, h.slot))
    switches.sort(key=lambda s: s.device_id)
    return Topology(
        kind=topo.kind, target=target, switches=tuple(switches), hosts=tuple(hosts),
        links=tuple(links), program=program, p4info=p4info, device_config=device_config,
        netem=netem, rundir=rundir, extra=topo.describe_extra(), tdf=tdf, delay_line=delay_line,
        delay_nodes=delay_nodes,
    )


def topology_from_dict(data: Any, source: str = "topology.json") -> Topology:
    """Parses and checks the JSON form (:func:`fabricspec.topology_from_dict`); raises
    :class:`TopologyFileError` naming the file, the key and the value."""
    try:
        return fabricspec.topology_from_dict(data, source)
    except fabricspec.FabricSpecError as exc:
        raise TopologyFileError(str(exc)) from None
