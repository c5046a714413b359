"""Topology descriptions: Mininet ``Topo`` subclasses that only describe, never start.

:class:`FileTopo` builds any topology file (``topo.topofile``, docs/topology.md);
:class:`RackTopo` and :class:`SpineLeafTopo` are the shipped ``rack.yaml`` and
``spineleaf.yaml`` behind their old keyword arguments. The plan below is theirs; a file's
follows the same rules (docs/topology.md, "Topology files").

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
  device ``D`` listens on ``127.0.0.1:(grpc_base_port + D)`` (default base 9559, P4Runtime's
  registered port, below the kernel's ephemeral ports); BMv2's
  Thrift runtime port is ``thrift_base_port + D`` (default base 9090).
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any

from mininet.topo import Topo

from topo.errors import TopologyError
from topo.topofile import LinkShapeSpec, TopologySpec, builtin_files, load_spec, resolve
from vtime import UnitError, parse_delay, parse_rate

# Below the kernel's ephemeral ports (32768 up): at 50051 a fat-tree's switch failed to
# bind its port because a client socket (a readiness probe of another switch) held it.
GRPC_BASE_PORT = 9559
THRIFT_BASE_PORT = 9090
GRPC_HOST = "127.0.0.1"
DEFAULT_CPU_PORT = 255
# Host links of 3 Mbit/s keep the built-in switch (about 90 us per packet and hop under load,
# all ports of one switch on one core, two cores for the whole testbed) below saturation in an
# in-network all-reduce with 64-element packets (~1,200 packets/s per link), so the emulated
# links, not the switch processes, are the bottleneck; see "Link rates" in docs/topology.md
# for the arithmetic and the measurement. Fabric links default to the host-link rate.
DEFAULT_HOST_BW = "3M"  # as users write it (a bare number is Mbit/s too)
DEFAULT_HOST_BW_BPS = parse_rate(DEFAULT_HOST_BW)
HOST_PREFIX_LEN = 16
LEAF_PREFIX_LEN = 24
NET_BASE = "10.0.0.0"
MAX_IFNAME = 15  # Linux IFNAMSIZ - 1
MAX_LEAVES = 254
MAX_HOSTS_PER_LEAF = 253  # .1-.253; .0, .254 (reserved) and .255 are never hosts
MAX_PORT = 510  # 511 is v1model's drop port


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
    """What one class of links should emulate, in emulated units; ``delay_s``/``loss`` need
    netem. The real link's parameters come from ``topo.links.real_link_params``."""

    bw_bps: float | None = DEFAULT_HOST_BW_BPS  # bits/s; None: unshaped
    delay_s: float | None = None  # seconds, one way
    loss: float | None = None  # percent
    queue: int | None = None  # packets (netem's limit, else a pfifo under the data class)

    def link_opts(self) -> dict[str, Any]:
        """Keyword options for ``Topo.addLink`` (consumed by ``topo.links.ShapedLink``)."""
        opts: dict[str, Any] = {}
        if self.bw_bps is not None:
            opts["bw_bps"] = self.bw_bps
        if self.delay_s is not None:
            opts["delay_s"] = self.delay_s
        if self.loss is not None:
            opts["loss"] = self.loss
        if self.queue is not None:
            opts["max_queue_size"] = self.queue
        return opts


def _check_count(what: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise TopologyError(f"{what} must be an integer in {low}..{high}, got {value!r}")


def link_rate(what: str, value: float | str | None) -> float | None:
    """Bits/s of a rate argument as users write it (``100G``, ``500k``; a bare number is
    Mbit/s); None: unshaped. Whether the real link can carry it is decided where links are
    configured (``topo.links.real_link_params``), where time dilation is known."""
    if value is None:
        return None
    try:
        return parse_rate(value, what)
    except UnitError as exc:
        raise TopologyError(str(exc)) from None


def link_delay(what: str, value: float | str | None) -> float | None:
    """Seconds of a delay argument (``2us``, ``1ms``); None: no delay."""
    if value is None:
        return None
    try:
        return parse_delay(value, what)
    except UnitError as exc:
        raise TopologyError(str(exc)) from None


def _check_loss(value: float | None) -> None:
    if value is not None and (not isinstance(value, int | float) or not 0 <= value <= 100):
        raise TopologyError(f"loss must be a percentage in 0..100, got {value!r}")


class TestbedTopo(Topo):
    """Common parameters, checks and node helpers of the testbed's topologies.

    Node options (``nodeInfo``) carry everything later stages read: switches have
    ``device_id``, ``grpc_port``, ``grpc_host``, ``thrift_port``, ``cpu_port``, ``role``
    (``leaf``/``spine``), ``index`` and ``dpid``; hosts have ``ip`` (with prefix length),
    ``mac``, ``gpus``, ``leaf``, ``slot`` and ``intra_bw_bps``; links have ``kind``
    (``host``/``fabric``), ``bw_bps`` and, when requested, ``delay_s``/``loss``/
    ``max_queue_size`` (emulated units), plus deterministic ``addr1``/``addr2``.

    Rates are given as users write them (``host_bw=3`` is 3 Mbit/s, ``"100G"``), delays with
    their unit (``"2us"``).
    """

    __test__ = False  # not a pytest test class despite its name
    kind = "testbed"

    def __init__(
        self,
        *,
        host_bw: float | str | None = DEFAULT_HOST_BW,
        gpus_per_host: int = 1,
        delay: str | None = None,
        loss: float | None = None,
        cpu_port: int | None = DEFAULT_CPU_PORT,
        grpc_base_port: int = GRPC_BASE_PORT,
        thrift_base_port: int = THRIFT_BASE_PORT,
        name_prefix: str = "",
    ) -> None:
        host_bps = link_rate("host_bw", host_bw)
        delay_s = link_delay("delay", delay)
        _check_count("gpus_per_host", gpus_per_host, 1, 1024)
        _check_loss(loss)
        if cpu_port is not None:
            _check_count("cpu_port", cpu_port, 1, MAX_PORT)
        _check_count("grpc_base_port", grpc_base_port, 1024, 65000)
        _check_count("thrift_base_port", thrift_base_port, 1024, 65000)
        if name_prefix and not name_prefix.isalnum():
            raise TopologyError(f"name_prefix must be letters/digits, got {name_prefix!r}")
        self.host_shape = LinkShape(host_bps, delay_s, loss)
        self.gpus_per_host = gpus_per_host
        self.cpu_port = cpu_port
        self.grpc_base_port = grpc_base_port
        self.thrift_base_port = thrift_base_port
        self.name_prefix = name_prefix
        super().__init__()

    # ------------------------------------------------------------------ node helpers
    def _name(self, base: str) -> str:
        return f"{self.name_prefix}{base}"

    def _add_switch(self, base: str, device_id: int, role: str, index: int, nports: int,
                    cpu_port: int | None | EllipsisType = ...,
                    grpc_port_number: int | None = None) -> str:
        name = self._name(base)
        cpu = self.cpu_port if cpu_port is ... else cpu_port
        if len(f"{name}-eth{nports}") > MAX_IFNAME:
            raise TopologyError(
                f"switch name {name!r} is too long: interface {name}-eth{nports} exceeds "
                f"{MAX_IFNAME} characters"
            )
        if cpu is not None and nports >= cpu:
            raise TopologyError(
                f"switch {name} needs ports 1..{nports}, which reach the CPU port "
                f"{cpu}; choose a larger cpu_port or a smaller topology"
            )
        if nports > MAX_PORT:
            raise TopologyError(f"switch {name} would need {nports} ports (max {MAX_PORT})")
        return self.addSwitch(
            name,
            device_id=device_id,
            grpc_host=GRPC_HOST,
            grpc_port=grpc_port_number or grpc_port(device_id, self.grpc_base_port),
            thrift_port=self.thrift_base_port + device_id,
            cpu_port=cpu,
            role=role,
            index=index,
            subnet=leaf_subnet(index) if role == "leaf" else None,
            dpid=f"{device_id + 1:016x}",
        )

    def _add_host(self, number: int, leaf: int, slot: int, *, base: str | None = None,
                  gpus: int | None = None, role: str = "worker",
                  intra_bw_bps: float | None = None) -> str:
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
            role=role,
            intra_bw_bps=intra_bw_bps,
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

    def describe_extra(self) -> dict[str, Any]:
        """What ``topology.json`` records under ``extra`` (the file and its parameters)."""
        return {}


class FileTopo(TestbedTopo):
    """A topology described by a file (``topo.topofile``): any switches, hosts and links.

    Decided here, deterministically: device ids (the file's ``options.device_id``, else the
    next free one in file order), ports (the file's, else the lowest free port of the
    switch in file order: hosts' links first, then switch links), a leaf's number (its rank
    among the leaves, so leaf ``L`` owns ``10.0.L.0/24``) and a host's slot (its rank among
    the leaf's hosts: address ``10.0.L.slot``)."""

    kind = "file"

    def __init__(self, spec: TopologySpec, *, cpu_port: int | None | EllipsisType = ...,
                 grpc_base_port: int = GRPC_BASE_PORT, thrift_base_port: int = THRIFT_BASE_PORT,
                 name_prefix: str = "") -> None:
        self.spec = spec
        self.kind = spec.kind
        first_worker = next((h for h in spec.hosts if h.role == "worker"), None)
        super().__init__(
            host_bw=None, delay=None, loss=None,
            cpu_port=spec.cpu_port if cpu_port is ... else cpu_port,
            grpc_base_port=grpc_base_port, thrift_base_port=thrift_base_port,
            name_prefix=name_prefix,
        )
        self.host_shape = LinkShape(first_worker.link.bw_bps if first_worker else None)

    def _plan_ports(self) -> tuple[dict[str, int], list[int], list[tuple[int, int]]]:
        """(device id per switch, each host's switch port, each link's two ports)."""
        spec = self.spec
        ids = _device_ids(spec)
        used: dict[str, set[int]] = {s.name: set() for s in spec.switches}
        for h in spec.hosts:
            if h.port is not None:
                used[h.switch].add(h.port)
        for ln in spec.links:
            for node, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
                if port is not None:
                    used[node].add(port)

        def free(node: str) -> int:
            port = 1
            while port in used[node]:
                port += 1
            used[node].add(port)
            return port

        host_ports = [h.port if h.port is not None else free(h.switch) for h in spec.hosts]
        link_ports = [(ln.a_port if ln.a_port is not None else free(ln.a),
                       ln.b_port if ln.b_port is not None else free(ln.b)) for ln in spec.links]
        return ids, host_ports, link_ports

    def build(self, *args: Any, **params: Any) -> None:
        """Adds the file's switches, hosts with their links, and the switch links."""
        spec = self.spec
        ids, host_ports, link_ports = self._plan_ports()
        nports: dict[str, int] = {s.name: 0 for s in spec.switches}
        for h, port in zip(spec.hosts, host_ports, strict=True):
            nports[h.switch] = max(nports[h.switch], port)
        for ln, (pa, pb) in zip(spec.links, link_ports, strict=True):
            nports[ln.a] = max(nports[ln.a], pa)
            nports[ln.b] = max(nports[ln.b], pb)
        index: dict[str, int] = {}
        per_role: dict[str, int] = {}
        for sw in spec.switches:
            per_role[sw.role] = per_role.get(sw.role, 0) + 1
            index[sw.name] = per_role[sw.role]
            if sw.role == "leaf" and index[sw.name] > MAX_LEAVES:
                raise TopologyError(f"{spec.source}: {sw.where}: more than {MAX_LEAVES} leaves")
            self._add_switch(sw.name, ids[sw.name], sw.role, index[sw.name],
                             max(nports[sw.name], 1),
                             cpu_port=sw.cpu_port if sw.own_cpu_port else ...,
                             grpc_port_number=sw.grpc_port)
        slots: dict[str, int] = {}
        for number, (h, port) in enumerate(zip(spec.hosts, host_ports, strict=True), start=1):
            leaf = index[h.switch]
            slots[h.switch] = slot = slots.get(h.switch, 0) + 1
            if slot > MAX_HOSTS_PER_LEAF:
                raise TopologyError(f"{spec.source}: {h.where}: more than {MAX_HOSTS_PER_LEAF} "
                                    f"hosts on {h.switch}")
            host = self._add_host(number, leaf, slot, base=h.name, gpus=h.gpus, role=h.role,
                                  intra_bw_bps=h.intra_bw_bps)
            self.addLink(host, self._name(h.switch), port1=0, port2=port, kind="host",
                         addr1=host_mac(leaf, slot), addr2=switch_port_mac(ids[h.switch], port),
                         **_shape(h.link).link_opts())
        for ln, (pa, pb) in zip(spec.links, link_ports, strict=True):
            self.addLink(self._name(ln.a), self._name(ln.b), port1=pa, port2=pb, kind="fabric",
                         addr1=switch_port_mac(ids[ln.a], pa),
                         addr2=switch_port_mac(ids[ln.b], pb), **_shape(ln.shape).link_opts())

    @property
    def data_host(self) -> str | None:
        """The (first) data-server host's name, or None when the topology has none."""
        return next((self._name(h.name) for h in self.spec.hosts if h.role == "data"), None)

    def requested_shapes(self) -> list[LinkShape]:
        """Every distinct link shape of the file."""
        return [_shape(s) for s in self.spec.shapes()]

    def describe_extra(self) -> dict[str, Any]:
        """The file, its parameters and its jobs (``topology.json``'s ``extra``)."""
        return {"topology_file": self.spec.source, "params": dict(self.spec.params),
                "jobs": [asdict(j) for j in self.spec.jobs]}


def _shape(spec: LinkShapeSpec) -> LinkShape:
    return LinkShape(spec.bw_bps, spec.delay_s, spec.loss, spec.queue)


def shipped_file(name: str) -> Path:
    """The topology file shipped with the project under ``name`` (``rack``, ``spineleaf``)."""
    return builtin_files()[name]


def load_topology_file(name_or_path: str | Path, params: dict[str, Any] | None = None,
                       **options: Any) -> FileTopo:
    """A :class:`FileTopo` of a shipped topology's name or a file path, with ``params``;
    ``options`` go to :class:`FileTopo` (``name_prefix``, ``grpc_base_port``, ``cpu_port``)."""
    return FileTopo(load_spec(resolve(name_or_path), params), **options)


class RackTopo(FileTopo):
    """One switch (``s1``, device 0, leaf 1) with ``hosts`` hosts on ports ``1..hosts``
    (``topo/files/rack.yaml``)."""

    def __init__(self, hosts: int = 4, *, host_bw: float | str | None = DEFAULT_HOST_BW,
                 gpus_per_host: int = 1, delay: str | None = None, loss: float | None = None,
                 intra_bw: float | str | None = None,
                 cpu_port: int | None = DEFAULT_CPU_PORT, grpc_base_port: int = GRPC_BASE_PORT,
                 name_prefix: str = "") -> None:
        _check_count("hosts", hosts, 1, MAX_HOSTS_PER_LEAF)
        _check_common(host_bw, gpus_per_host, loss, delay, intra_bw)
        self.nhosts = hosts
        spec = load_spec(shipped_file("rack"), {"hosts": hosts, "gpus": gpus_per_host,
                                                "bw": host_bw, "delay": delay, "loss": loss,
                                                "intra_bw": intra_bw})
        super().__init__(spec, cpu_port=cpu_port, grpc_base_port=grpc_base_port,
                         name_prefix=name_prefix)


class SpineLeafTopo(FileTopo):
    """Two-tier Clos: ``leaves`` leaf switches with ``hosts_per_leaf`` hosts each, every leaf
    linked once to each of ``spines`` spine switches (``topo/files/spineleaf.yaml``)."""

    def __init__(
        self,
        spines: int = 2,
        leaves: int = 2,
        hosts_per_leaf: int = 2,
        fabric_bw: float | str | None = None,
        data_server: bool = False,
        *,
        host_bw: float | str | None = DEFAULT_HOST_BW,
        gpus_per_host: int = 1,
        delay: str | None = None,
        loss: float | None = None,
        intra_bw: float | str | None = None,
        cpu_port: int | None = DEFAULT_CPU_PORT,
        grpc_base_port: int = GRPC_BASE_PORT,
        name_prefix: str = "",
    ) -> None:
        _check_count("spines", spines, 1, 64)
        _check_count("leaves", leaves, 1, MAX_LEAVES)
        _check_count("hosts_per_leaf", hosts_per_leaf, 1, MAX_HOSTS_PER_LEAF)
        fabric_bps = link_rate("fabric_bw", fabric_bw)
        _check_common(host_bw, gpus_per_host, loss, delay, intra_bw)
        if not isinstance(data_server, bool):
            raise TopologyError(f"data_server must be True or False, got {data_server!r}")
        if data_server and hosts_per_leaf + 1 > MAX_HOSTS_PER_LEAF:
            raise TopologyError(f"no room for the data server on a leaf with {hosts_per_leaf} "
                                "hosts")
        self.nspines = spines
        self.nleaves = leaves
        self.hosts_per_leaf = hosts_per_leaf
        self.data_server = data_server
        self._fabric_bps = fabric_bps
        spec = load_spec(shipped_file("spineleaf"), {
            "spines": spines, "leaves": leaves, "hosts": hosts_per_leaf, "gpus": gpus_per_host,
            "bw": host_bw, "fabric_bw": fabric_bw, "delay": delay, "loss": loss,
            "intra_bw": intra_bw, "data_server": data_server})
        super().__init__(spec, cpu_port=cpu_port, grpc_base_port=grpc_base_port,
                         name_prefix=name_prefix)
        self.host_shape = LinkShape(link_rate("host_bw", host_bw), link_delay("delay", delay),
                                    loss)

    @property
    def fabric_shape(self) -> LinkShape:
        """Fabric links: ``fabric_bw`` (default: the host-link rate), same delay/loss."""
        bw = self._fabric_bps if self._fabric_bps is not None else self.host_shape.bw_bps
        return LinkShape(bw, self.host_shape.delay_s, self.host_shape.loss)

    def leaf_id(self, leaf: int) -> int:
        """Device id of leaf ``leaf`` (1-based)."""
        return leaf - 1

    def spine_id(self, spine: int) -> int:
        """Device id of spine ``spine`` (1-based)."""
        return self.nleaves + spine - 1


def _check_common(host_bw: float | str | None, gpus_per_host: int, loss: float | None,
                  delay: str | None, intra_bw: float | str | None) -> None:
    """The keyword arguments' errors named as the caller wrote them (not as the file's
    parameters they become)."""
    link_rate("host_bw", host_bw)
    link_rate("intra_bw", intra_bw)
    link_delay("delay", delay)
    _check_count("gpus_per_host", gpus_per_host, 1, 1024)
    _check_loss(loss)


#: Python classes of two shipped files (their keyword arguments as before the files existed).
TOPOLOGIES: dict[str, type[TestbedTopo]] = {"rack": RackTopo, "spineleaf": SpineLeafTopo}


def _device_ids(spec: TopologySpec) -> dict[str, int]:
    """Each switch's device id: its own, else the lowest one no switch has, in file order."""
    taken_ids = {s.device_id for s in spec.switches if s.device_id is not None}
    ids: dict[str, int] = {}
    nxt = 0
    for sw in spec.switches:
        if sw.device_id is not None:
            ids[sw.name] = sw.device_id
            continue
        while nxt in taken_ids:
            nxt += 1
        ids[sw.name] = nxt
        taken_ids.add(nxt)
    return ids
