"""The running network as data: what ``topology.json`` holds and the controller CLI reads.

:func:`describe` turns a :class:`~topo.topologies.TestbedTopo` (plus the run's choices: target,
program, P4Info) into a :class:`Topology`; :func:`topology_to_dict` / :func:`topology_from_dict`
convert to and from the JSON form documented in docs/topology.md (``schema`` 2: link rates
in bits/s and delays in seconds; files of schema 1, with ``bw_mbit`` and tc delay strings,
are still read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from topo.errors import TopologyFileError
from topo.topologies import TestbedTopo
from vtime import UnitError, format_delay, format_rate, parse_delay

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)  # 1: links' "bw_mbit" (Mbit/s) and "delay" (a tc string)


@dataclass(frozen=True)
class PortRecord:
    """One switch port and what is at the other end of its link."""

    port: int
    intf: str
    mac: str
    peer: str
    peer_port: int
    peer_intf: str


@dataclass(frozen=True)
class SwitchRecord:
    """One P4 switch: identity, where its P4Runtime server listens, and its ports."""

    name: str
    device_id: int
    grpc_addr: str  # "HOST:PORT"
    role: str  # "leaf" or "spine"
    index: int  # leaf or spine number, 1-based
    target: str  # "softswitch" or "bmv2"
    cpu_port: int | None
    ports: tuple[PortRecord, ...] = ()
    log: str | None = None
    subnet: str | None = None  # a leaf's block of host addresses, e.g. "10.0.1.0/24"
    thrift_port: int | None = None  # BMv2's runtime (Thrift) port on grpc_addr's host; bmv2 only

    def port_to(self, peer: str) -> PortRecord:
        """The (first) port whose link goes to node ``peer``."""
        for rec in self.ports:
            if rec.peer == peer:
                return rec
        raise KeyError(f"switch {self.name} has no port to {peer!r}")


@dataclass(frozen=True)
class HostRecord:
    """One emulated machine (with ``gpus`` workers) and where it is attached."""

    name: str
    ip: str  # without prefix length
    prefix_len: int
    mac: str
    intf: str
    switch: str
    switch_port: int
    leaf: int
    slot: int
    gpus: int
    role: str = "worker"  # "worker" or "data" (a data server: no workers)
    intra_bw_bps: float | None = None  # bits/s between its GPUs; None: the workload default


@dataclass(frozen=True)
class LinkRecord:
    """One emulated link and its shaping in emulated units (``bw_bps`` None = unshaped)."""

    node1: str
    port1: int
    node2: str
    port2: int
    kind: str  # "host" or "fabric"
    bw_bps: float | None  # bits/s
    delay_s: float | None = None  # seconds, one way
    loss: float | None = None  # percent


@dataclass(frozen=True)
class Topology:
    """Everything a controller needs to know about a running (or described) network."""

    kind: str
    target: str
    switches: tuple[SwitchRecord, ...]
    hosts: tuple[HostRecord, ...]
    links: tuple[LinkRecord, ...]
    program: str | None = None
    p4info: str | None = None
    device_config: str | None = None
    netem: bool = False
    rundir: str | None = None
    schema: int = SCHEMA_VERSION
    # time dilation: links carry bw/tdf, and the emulated clocks run tdf times slower
    tdf: float = 1.0
    delay_line: bool = False  # link delays are held by the switches (no netem)
    # link delays are held by delay nodes on the links (topo.delaynodes), which appear in no
    # record: switches, hosts, ports and links are what they would be without them
    delay_nodes: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def switch(self, name: str) -> SwitchRecord:
        """The switch named ``name``."""
        for rec in self.switches:
            if rec.name == name:
                return rec
        raise KeyError(f"no switch named {name!r}; switches: {', '.join(self.switch_names())}")

    def host(self, name: str) -> HostRecord:
        """The host named ``name``."""
        for rec in self.hosts:
            if rec.name == name:
                return rec
        raise KeyError(f"no host named {name!r}")

    def switch_names(self) -> list[str]:
        """Switch names in device-id order."""
        return [s.name for s in sorted(self.switches, key=lambda s: s.device_id)]

    def leaves(self) -> list[SwitchRecord]:
        """Leaf switches, leaf 1 first."""
        return sorted((s for s in self.switches if s.role == "leaf"), key=lambda s: s.index)

    def spines(self) -> list[SwitchRecord]:
        """Spine switches, spine 1 first."""
        return sorted((s for s in self.switches if s.role == "spine"), key=lambda s: s.index)

    def hosts_of(self, switch: str) -> list[HostRecord]:
        """Hosts attached to ``switch``, in port order."""
        return sorted((h for h in self.hosts if h.switch == switch), key=lambda h: h.switch_port)

    def total_gpus(self) -> int:
        """Number of workers (GPUs) over all hosts."""
        return sum(h.gpus for h in self.hosts)

    def link_classes(self) -> list[dict[str, Any]]:
        """Each distinct (kind, rate, delay, loss) of the links and how many links have it,
        with the rate and delay also as text with units (summaries, experiment.json)."""
        counts: dict[tuple[str, float | None, float | None, float | None], int] = {}
        for ln in self.links:
            key = (ln.kind, ln.bw_bps, ln.delay_s, ln.loss)
            counts[key] = counts.get(key, 0) + 1
        return [{"kind": kind, "links": n, "bw_bps": bw, "delay_s": delay, "loss": loss,
                 "bw": format_rate(bw) if bw else "unshaped",
                 "delay": format_delay(delay) if delay else None}
                for (kind, bw, delay, loss), n in counts.items()]


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


def _tdf(data: dict[str, Any], source: str) -> float:
    value = data.get("tdf", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
        raise TopologyFileError(f"{source}: tdf: expected a number >= 1, got {value!r}")
    return float(value)


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    """The JSON-ready form (``switches[].ports`` is a list of port objects)."""
    data: dict[str, Any] = json.loads(json.dumps(asdict(topology)))  # tuples -> lists
    data["schema"] = SCHEMA_VERSION
    return data


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
         optional: bool = False) -> Any:
    if key not in obj:
        if optional:
            return None
        raise TopologyFileError(f"{where}missing key {key!r}")
    value = obj[key]
    if value is None and optional:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TopologyFileError(f"{where}{key}: expected {names}, got {type(value).__name__}")
    return value


def _number(obj: Mapping[str, Any], key: str, where: str) -> float | None:
    value = _get(obj, key, (int, float), where, optional=True)
    return None if value is None else float(value)


def _link_rate(ln: Mapping[str, Any], where: str, schema: int) -> float | None:
    """A link's bits/s: ``bw_bps``, or schema 1's ``bw_mbit``."""
    if schema == 1:
        mbit = _number(ln, "bw_mbit", where)
        return None if mbit is None else mbit * 1e6
    return _number(ln, "bw_bps", where)


def _link_delay(ln: Mapping[str, Any], where: str, schema: int) -> float | None:
    """A link's delay in seconds: ``delay_s``, or schema 1's tc string ``delay``."""
    if schema != 1:
        return _number(ln, "delay_s", where)
    text = _get(ln, "delay", str, where, optional=True)
    if text is None:
        return None
    try:
        return parse_delay(text, f"{where}delay")
    except UnitError as exc:
        raise TopologyFileError(str(exc)) from None


def topology_from_dict(data: Any, source: str = "topology.json") -> Topology:
    """Parses and checks the JSON form (schema 2, or 1 of older runs); raises
    :class:`TopologyFileError` naming the bad key."""
    top = f"{source}: "
    if not isinstance(data, dict):
        raise TopologyFileError(f"{source}: expected a JSON object at the top level")
    schema = _get(data, "schema", int, top)
    if schema not in READABLE_SCHEMAS:
        raise TopologyFileError(f"{source}: schema {schema} is not supported (expected one of "
                                f"{', '.join(map(str, READABLE_SCHEMAS))})")
    switches = []
    for i, sw in enumerate(_get(data, "switches", list, top)):
        where = f"{source}: switches[{i}]."
        if not isinstance(sw, dict):
            raise TopologyFileError(f"{where[:-1]}: expected an object")
        ports = []
        for j, p in enumerate(_get(sw, "ports", list, where)):
            pw = f"{where}ports[{j}]."
            if not isinstance(p, dict):
                raise TopologyFileError(f"{pw[:-1]}: expected an object")
            ports.append(PortRecord(
                _get(p, "port", int, pw), _get(p, "intf", str, pw), _get(p, "mac", str, pw),
                _get(p, "peer", str, pw), _get(p, "peer_port", int, pw),
                _get(p, "peer_intf", str, pw),
            ))
        switches.append(SwitchRecord(
            name=_get(sw, "name", str, where), device_id=_get(sw, "device_id", int, where),
            grpc_addr=_get(sw, "grpc_addr", str, where), role=_get(sw, "role", str, where),
            index=_get(sw, "index", int, where), target=_get(sw, "target", str, where),
            cpu_port=_get(sw, "cpu_port", int, where, optional=True), ports=tuple(ports),
            log=_get(sw, "log", str, where, optional=True),
            subnet=_get(sw, "subnet", str, where, optional=True),
            thrift_port=_get(sw, "thrift_port", int, where, optional=True),
        ))
    hosts = []
    for i, h in enumerate(_get(data, "hosts", list, top)):
        where = f"{source}: hosts[{i}]."
        if not isinstance(h, dict):
            raise TopologyFileError(f"{where[:-1]}: expected an object")
        hosts.append(HostRecord(
            _get(h, "name", str, where), _get(h, "ip", str, where),
            _get(h, "prefix_len", int, where), _get(h, "mac", str, where),
            _get(h, "intf", str, where), _get(h, "switch", str, where),
            _get(h, "switch_port", int, where), _get(h, "leaf", int, where),
            _get(h, "slot", int, where), _get(h, "gpus", int, where),
            _get(h, "role", str, where, optional=True) or "worker",
            _number(h, "intra_bw_bps", where),
        ))
    links = []
    for i, ln in enumerate(_get(data, "links", list, top)):
        where = f"{source}: links[{i}]."
        if not isinstance(ln, dict):
            raise TopologyFileError(f"{where[:-1]}: expected an object")
        links.append(LinkRecord(
            _get(ln, "node1", str, where), _get(ln, "port1", int, where),
            _get(ln, "node2", str, where), _get(ln, "port2", int, where),
            _get(ln, "kind", str, where), _link_rate(ln, where, schema),
            _link_delay(ln, where, schema), _number(ln, "loss", where),
        ))
    names = [s.name for s in switches] + [h.name for h in hosts]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TopologyFileError(f"{source}: node name {dup[0]!r} appears twice")
    known = set(names)
    for h in hosts:
        if h.switch not in known:
            raise TopologyFileError(f"{source}: host {h.name} is attached to unknown switch "
                                    f"{h.switch!r}")
    extra = data.get("extra", {})
    if not isinstance(extra, dict):
        raise TopologyFileError(f"{source}: extra: expected an object")
    return Topology(
        kind=_get(data, "kind", str, top), target=_get(data, "target", str, top),
        switches=tuple(switches), hosts=tuple(hosts), links=tuple(links),
        program=_get(data, "program", str, top, optional=True),
        p4info=_get(data, "p4info", str, top, optional=True),
        device_config=_get(data, "device_config", str, top, optional=True),
        netem=bool(_get(data, "netem", bool, top, optional=True)),
        tdf=_tdf(data, source),
        delay_line=bool(_get(data, "delay_line", bool, top, optional=True)),
        delay_nodes=bool(_get(data, "delay_nodes", bool, top, optional=True)),
        rundir=_get(data, "rundir", str, top, optional=True),
        extra=extra,
    )
