"""The records of ``topology.json``: one running (or described) network as frozen dataclasses.

``topo`` writes them (``topo.model.describe``) and everyone reads them: the controller, the
live view, the experiment code and the training launcher. Field names are the JSON keys
(docs/topology.md); rates are emulated bits/s, delays emulated seconds.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from fabricspec.errors import UnknownNodeError
from vtime import format_delay, format_rate

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
    role: str  # "leaf", "aggregation", "spine" or "core"
    index: int  # rank within its role, 1-based
    target: str  # "softswitch" or "bmv2"
    cpu_port: int | None
    ports: tuple[PortRecord, ...] = ()
    log: str | None = None
    subnet: str | None = None  # a leaf's block of host addresses, e.g. "10.0.1.0/24"
    thrift_port: int | None = None  # BMv2's runtime (Thrift) port on grpc_addr's host; bmv2 only

    @property
    def thrift_addr(self) -> tuple[str, int] | None:
        """(host, port) of BMv2's Thrift runtime server, when the file names one."""
        if self.thrift_port is None:
            return None
        return self.grpc_addr.rpartition(":")[0] or "127.0.0.1", self.thrift_port

    def port_to(self, peer: str) -> PortRecord:
        """The (first) port whose link goes to node ``peer``."""
        for rec in self.ports:
            if rec.peer == peer:
                return rec
        raise UnknownNodeError(f"switch {self.name} has no port to {peer!r}")

    def port(self, number: int) -> PortRecord:
        """The port numbered ``number``."""
        for rec in self.ports:
            if rec.port == number:
                return rec
        raise UnknownNodeError(f"switch {self.name} has no port {number}")


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
        raise UnknownNodeError(
            f"unknown switch {name!r} (switches: {', '.join(self.switch_names())})")

    def host(self, name: str) -> HostRecord:
        """The host named ``name`` (or with address ``name``)."""
        for rec in self.hosts:
            if rec.name == name or rec.ip == name:
                return rec
        raise UnknownNodeError(
            f"unknown host {name!r} (hosts: {', '.join(h.name for h in self.hosts)})")

    def switch_names(self) -> list[str]:
        """Switch names in device-id order."""
        return [s.name for s in sorted(self.switches, key=lambda s: s.device_id)]

    def leaves(self) -> list[SwitchRecord]:
        """Leaf switches (those hosts attach to), leaf 1 first."""
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

    def subnet_of(self, switch: str) -> ipaddress.IPv4Network | None:
        """The leaf's block of host addresses: as the file names it, else the smallest
        network holding every host of the leaf and no host of another switch (None when there
        is none). The hosts' own prefix length says nothing here: hosts are on one /16 so that
        all of them are on-link, while each leaf owns a smaller block."""
        named = self.switch(switch).subnet
        if named is not None:
            return ipaddress.IPv4Network(named)  # checked by the parser
        hosts = self.hosts_of(switch)
        if not hosts:
            return None
        addrs = [ipaddress.IPv4Address(h.ip) for h in hosts]
        net = next(
            n
            for plen in range(32, -1, -1)
            if all(
                a in (n := ipaddress.IPv4Network(f"{addrs[0]}/{plen}", strict=False)) for a in addrs
            )
        )
        others = (ipaddress.IPv4Address(h.ip) for h in self.hosts if h.switch != switch)
        return None if any(a in net for a in others) else net

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
