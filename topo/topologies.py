"""Topology descriptions: Mininet ``Topo`` subclasses that only describe, never start.

Everything a later stage needs is decided here, deterministically, so that the same arguments
always give the same network (and the controller can compute the same numbers):

* names: rack switch ``s1``; spine-leaf leaves ``l1..lL`` and spines ``sp1..spS``; hosts
  ``h1..hN`` numbered leaf by leaf (leaf ``L``, slot ``j`` is ``h{(L-1)*H + j}``). An optional
  ``name_prefix`` is put in front of every node name (tests use it to stay apart).
* ports: a leaf's ports ``1..H`` go to its hosts (slot order), ``H+1..H+S`` to spines
  ``1..S``; spine port ``i`` goes to leaf ``i``; a host's only port is ``0`` (``hN-eth0``).
* addresses: leaf ``L`` owns ``10.0.L.0/24``; host slot ``j`` on it is ``10.0.L.j`` with MAC
  ``00:00:0a:00:LL:jj`` (hex). Hosts configure the address with prefix length 16, so every
  host is on-link for every other (no gateway, static ARP with the real MACs), while switches
  can route on the leaf /24s with LPM. Switch port ``P`` of device ``D`` has MAC
  ``00:0b:DD:DD:PP:PP``.
* data server (optional, ``SpineLeafTopo(data_server=True)``): one more host, ``data``, on
  the last leaf after its hosts and spines (leaf port ``H+S+1``, slot ``H+1``, address
  ``10.0.L.(H+1)``) with ``gpus = 0``: it runs no workers, it serves the training data over
  the same links the gradients use. Every other name, port and address is unchanged.
* device ids: rack ``s1`` is 0; leaves are ``0..L-1``, spines ``L..L+S-1``. The gRPC server of
  device ``D`` listens on ``127.0.0.1:(grpc_base_port + D)`` (default base 50051); BMv2's
  Thrift runtime port is ``thrift_base_port + D`` (default base 9090).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from mininet.topo import Topo

from topo.errors import TopologyError

GRPC_BASE_PORT = 50051
THRIFT_BASE_PORT = 9090
GRPC_HOST = "127.0.0.1"
DEFAULT_CPU_PORT = 255
# Host links of 3 Mbit/s keep the built-in switch (about 90 us per packet and hop under load,
# all ports of one switch on one core, two cores for the whole testbed) below saturation in an
# in-network all-reduce with 64-element packets (~1,200 packets/s per link), so the emulated
# links, not the switch processes, are the bottleneck; see "Link rates" in docs/topology.md
# for the arithmetic and the measurement. Fabric links default to the host-link rate.
DEFAULT_HOST_BW_MBIT = 3.0
HOST_PREFIX_LEN = 16
LEAF_PREFIX_LEN = 24
NET_BASE = "10.0.0.0"
MAX_IFNAME = 15  # Linux IFNAMSIZ - 1
MAX_LEAVES = 254
MAX_HOSTS_PER_LEAF = 253  # .1-.253; .0, .254 (reserved) and .255 are never hosts
MAX_PORT = 510  # 511 is v1model's drop port
MAX_BW_MBIT = 1000.0  # TCIntf refuses more
DATA_HOST = "data"  # the optional data-server host (before the name prefix)


def host_ip(leaf: int, slot: int) -> str:
    """The address of host ``slot`` (1-based) on leaf ``leaf`` (1-based): ``10.0.leaf.slot``."""
    base = int(ipaddress.IPv4Address(NET_BASE))
    return str(ipaddress.IPv4Address(base + (leaf << 8) + slot))


def leaf_subnet(leaf: int) -> str:
    """The /24 that leaf ``leaf`` owns, e.g. ``10.0.1.0/24``."""
    return f"{host_ip(leaf, 0)}/{LEAF_PREFIX_LEN}"


def host_mac(leaf: int, slot: int) -> str:
    """``00:00:0a:00:LL:SS``: the MAC spells the host's address in hex."""
    return f"00:00:0a:00:{leaf:02x}:{slot:02x}"


def switch_port_mac(device_id: int, port: int) -> str:
    """``00:0b:DD:DD:PP:PP``: the MAC of port ``port`` of device ``device_id``."""
    return (
        f"00:0b:{device_id >> 8 & 0xFF:02x}:{device_id & 0xFF:02x}:"
        f"{port >> 8 & 0xFF:02x}:{port & 0xFF:02x}"
    )


def grpc_port(device_id: int, base: int = GRPC_BASE_PORT) -> int:
    """The gRPC (P4Runtime) TCP port of a device."""
    return base + device_id


@dataclass(frozen=True)
class LinkShape:
    """What one class of links should emulate; ``delay``/``loss`` need netem."""

    bw_mbit: float | None = DEFAULT_HOST_BW_MBIT
    delay: str | None = None  # tc syntax, e.g. "2ms"
    loss: float | None = None  # percent

    def link_opts(self) -> dict[str, Any]:
        """Keyword options for ``Topo.addLink`` (consumed by ``topo.links.ShapedLink``)."""
        opts: dict[str, Any] = {}
        if self.bw_mbit is not None:
            opts["bw"] = self.bw_mbit
        if self.delay is not None:
            opts["delay"] = self.delay
        if self.loss is not None:
            opts["loss"] = self.loss
        return opts


def _check_count(what: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise TopologyError(f"{what} must be an integer in {low}..{high}, got {value!r}")


def _check_bw(what: str, value: float | None) -> None:
    if value is None:
        return
    if not isinstance(value, int | float) or not 0 < value <= MAX_BW_MBIT:
        raise TopologyError(f"{what} must be in (0, {MAX_BW_MBIT:g}] Mbit/s, got {value!r}")


def _check_loss(value: float | None) -> None:
    if value is not None and (not isinstance(value, int | float) or not 0 <= value <= 100):
        raise TopologyError(f"loss must be a percentage in 0..100, got {value!r}")


class TestbedTopo(Topo):
    """Common parameters, checks and node helpers of the testbed's topologies.

    Node options (``nodeInfo``) carry everything later stages read: switches have
    ``device_id``, ``grpc_port``, ``grpc_host``, ``thrift_port``, ``cpu_port``, ``role``
    (``leaf``/``spine``), ``index`` and ``dpid``; hosts have ``ip`` (with prefix length),
    ``mac``, ``gpus``, ``leaf`` and ``slot``; links have ``kind`` (``host``/``fabric``),
    ``bw`` and, when requested, ``delay``/``loss``, plus deterministic ``addr1``/``addr2``.
    """

    __test__ = False  # not a pytest test class despite its name
    kind = "testbed"

    def __init__(
        self,
        *,
        host_bw: float | None = DEFAULT_HOST_BW_MBIT,
        gpus_per_host: int = 1,
        delay: str | None = None,
        loss: float | None = None,
        cpu_port: int | None = DEFAULT_CPU_PORT,
        grpc_base_port: int = GRPC_BASE_PORT,
        thrift_base_port: int = THRIFT_BASE_PORT,
        name_prefix: str = "",
    ) -> None:
        _check_bw("host_bw", host_bw)
        _check_count("gpus_per_host", gpus_per_host, 1, 1024)
        _check_loss(loss)
        if cpu_port is not None:
            _check_count("cpu_port", cpu_port, 1, MAX_PORT)
        _check_count("grpc_base_port", grpc_base_port, 1024, 65000)
        _check_count("thrift_base_port", thrift_base_port, 1024, 65000)
        if name_prefix and not name_prefix.isalnum():
            raise TopologyError(f"name_prefix must be letters/digits, got {name_prefix!r}")
        self.host_shape = LinkShape(host_bw, delay, loss)
        self.gpus_per_host = gpus_per_host
        self.cpu_port = cpu_port
        self.grpc_base_port = grpc_base_port
        self.thrift_base_port = thrift_base_port
        self.name_prefix = name_prefix
        super().__init__()

    # ------------------------------------------------------------------ node helpers
    def _name(self, base: str) -> str:
        return f"{self.name_prefix}{base}"

    def _add_switch(self, base: str, device_id: int, role: str, index: int, nports: int) -> str:
        name = self._name(base)
        if len(f"{name}-eth{nports}") > MAX_IFNAME:
            raise TopologyError(
                f"switch name {name!r} is too long: interface {name}-eth{nports} exceeds "
                f"{MAX_IFNAME} characters"
            )
        if self.cpu_port is not None and nports >= self.cpu_port:
            raise TopologyError(
                f"switch {name} needs ports 1..{nports}, which reach the CPU port "
                f"{self.cpu_port}; choose a larger cpu_port or a smaller topology"
            )
        if nports > MAX_PORT:
            raise TopologyError(f"switch {name} would need {nports} ports (max {MAX_PORT})")
        return self.addSwitch(
            name,
            device_id=device_id,
            grpc_host=GRPC_HOST,
            grpc_port=grpc_port(device_id, self.grpc_base_port),
            thrift_port=self.thrift_base_port + device_id,
            cpu_port=self.cpu_port,
            role=role,
            index=index,
            subnet=leaf_subnet(index) if role == "leaf" else None,
            dpid=f"{device_id + 1:016x}",
        )

    def _add_host(self, number: int, leaf: int, slot: int, *, base: str | None = None,
                  gpus: int | None = None) -> str:
        name = self._name(base if base is not None else f"h{number}")
        if len(f"{name}-eth0") > MAX_IFNAME:
            raise TopologyError(f"host name {name!r} is too long for its interface name")
        return self.addHost(
            name,
            ip=f"{host_ip(leaf, slot)}/{HOST_PREFIX_LEN}",
            mac=host_mac(leaf, slot),
            gpus=self.gpus_per_host if gpus is None else gpus,
            leaf=leaf,
            slot=slot,
        )

    def _link_host(self, host: str, switch: str, device_id: int, port: int, leaf: int,
                   slot: int) -> None:
        self.addLink(
            host, switch, port1=0, port2=port, kind="host",
            addr1=host_mac(leaf, slot), addr2=switch_port_mac(device_id, port),
            **self.host_shape.link_opts(),
        )

    # ------------------------------------------------------------------ queries
    def switch_options(self, name: str) -> dict[str, Any]:
        """The options of switch ``name`` (a copy)."""
        if name not in self.g.node or not self.isSwitch(name):
            raise TopologyError(f"no switch named {name!r}")
        return dict(self.nodeInfo(name))

    def host_options(self, name: str) -> dict[str, Any]:
        """The options of host ``name`` (a copy)."""
        if name not in self.g.node or self.isSwitch(name):
            raise TopologyError(f"no host named {name!r}")
        return dict(self.nodeInfo(name))

    def requested_shapes(self) -> list[LinkShape]:
        """Every distinct link shape this topology asks for."""
        return [self.host_shape]


class RackTopo(TestbedTopo):
    """One switch (``s1``, device 0, leaf 1) with ``hosts`` hosts on ports ``1..hosts``."""

    kind = "rack"

    def __init__(self, hosts: int = 4, **kwargs: Any) -> None:
        _check_count("hosts", hosts, 1, MAX_HOSTS_PER_LEAF)
        self.nhosts = hosts
        super().__init__(**kwargs)

    def build(self, *args: Any, **params: Any) -> None:
        """Adds s1, h1..hN and the host links."""
        switch = self._add_switch("s1", 0, "leaf", 1, self.nhosts)
        for slot in range(1, self.nhosts + 1):
            host = self._add_host(slot, 1, slot)
            self._link_host(host, switch, 0, slot, 1, slot)


class SpineLeafTopo(TestbedTopo):
    """Two-tier Clos: ``leaves`` leaf switches with ``hosts_per_leaf`` hosts each, every leaf
    linked once to each of ``spines`` spine switches."""

    kind = "spineleaf"

    def __init__(
        self,
        spines: int = 2,
        leaves: int = 2,
        hosts_per_leaf: int = 2,
        fabric_bw: float | None = None,
        data_server: bool = False,
        **kwargs: Any,
    ) -> None:
        _check_count("spines", spines, 1, 64)
        _check_count("leaves", leaves, 1, MAX_LEAVES)
        _check_count("hosts_per_leaf", hosts_per_leaf, 1, MAX_HOSTS_PER_LEAF)
        _check_bw("fabric_bw", fabric_bw)
        self.nspines = spines
        self.nleaves = leaves
        self.hosts_per_leaf = hosts_per_leaf
        self._fabric_bw = fabric_bw
        if not isinstance(data_server, bool):
            raise TopologyError(f"data_server must be True or False, got {data_server!r}")
        if data_server and hosts_per_leaf + 1 > MAX_HOSTS_PER_LEAF:
            raise TopologyError(f"no room for the data server on a leaf with {hosts_per_leaf} "
                                "hosts")
        self.data_server = data_server
        super().__init__(**kwargs)

    @property
    def fabric_shape(self) -> LinkShape:
        """Fabric links: ``fabric_bw`` (default: the host-link rate), same delay/loss."""
        bw = self._fabric_bw if self._fabric_bw is not None else self.host_shape.bw_mbit
        return LinkShape(bw, self.host_shape.delay, self.host_shape.loss)

    def leaf_id(self, leaf: int) -> int:
        """Device id of leaf ``leaf`` (1-based)."""
        return leaf - 1

    def spine_id(self, spine: int) -> int:
        """Device id of spine ``spine`` (1-based)."""
        return self.nleaves + spine - 1

    def build(self, *args: Any, **params: Any) -> None:
        """Adds leaves, spines, hosts, host links and the full leaf-spine mesh."""
        hpl, ns, nl = self.hosts_per_leaf, self.nspines, self.nleaves
        extra = {nl: 1} if self.data_server else {}  # the data server's port on the last leaf
        leaves = [
            self._add_switch(f"l{leaf}", self.leaf_id(leaf), "leaf", leaf,
                             hpl + ns + extra.get(leaf, 0))
            for leaf in range(1, nl + 1)
        ]
        spines = [
            self._add_switch(f"sp{spine}", self.spine_id(spine), "spine", spine, self.nleaves)
            for spine in range(1, ns + 1)
        ]
        for leaf, lname in enumerate(leaves, start=1):
            for slot in range(1, hpl + 1):
                host = self._add_host((leaf - 1) * hpl + slot, leaf, slot)
                self._link_host(host, lname, self.leaf_id(leaf), slot, leaf, slot)
        fabric = self.fabric_shape.link_opts()
        for leaf, lname in enumerate(leaves, start=1):
            for spine, sname in enumerate(spines, start=1):
                lport, sport = hpl + spine, leaf
                self.addLink(
                    lname, sname, port1=lport, port2=sport, kind="fabric",
                    addr1=switch_port_mac(self.leaf_id(leaf), lport),
                    addr2=switch_port_mac(self.spine_id(spine), sport),
                    **fabric,
                )
        if self.data_server:
            host = self._add_host(0, nl, hpl + 1, base=DATA_HOST, gpus=0)
            self._link_host(host, leaves[-1], self.leaf_id(nl), hpl + ns + 1, nl, hpl + 1)

    @property
    def data_host(self) -> str | None:
        """The data server's host name, or None when the topology has none."""
        return self._name(DATA_HOST) if self.data_server else None

    def requested_shapes(self) -> list[LinkShape]:
        """Host-link and fabric-link shapes."""
        return [self.host_shape, self.fabric_shape]


TOPOLOGIES: dict[str, type[TestbedTopo]] = {"rack": RackTopo, "spineleaf": SpineLeafTopo}
