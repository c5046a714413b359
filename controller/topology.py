"""What the controller needs from a run directory's ``topology.json`` (docs/topology.md).

It reads schema 1 and 2 alike: what changed between them (link rates and delays with units)
is not something the controller uses.

The controller reads the file itself, keeping only the fields it uses, so that it depends on
P4Runtime and the file format only (never on Mininet or the topology code that wrote it).
Every problem is a :class:`FabricTopologyError` naming the file and the key.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class FabricTopologyError(ValueError):
    """topology.json is missing, unreadable or lacks something the controller needs."""


@dataclass(frozen=True)
class Port:
    port: int
    mac: str
    peer: str
    peer_port: int


@dataclass(frozen=True)
class SwitchInfo:
    name: str
    device_id: int
    grpc_addr: str
    role: str  # "leaf", "aggregation", "spine" or "core"
    index: int
    cpu_port: int | None
    ports: tuple[Port, ...]
    subnet: ipaddress.IPv4Network | None = None  # a leaf's block, when topology.json names it
    thrift_port: int | None = None  # BMv2's runtime (Thrift) port, on grpc_addr's host

    @property
    def thrift_addr(self) -> tuple[str, int] | None:
        """(host, port) of BMv2's Thrift runtime server, when topology.json names one."""
        if self.thrift_port is None:
            return None
        return self.grpc_addr.rpartition(":")[0] or "127.0.0.1", self.thrift_port

    def port_to(self, peer: str) -> Port:
        for p in self.ports:
            if p.peer == peer:
                return p
        raise FabricTopologyError(f"switch {self.name} has no port to {peer!r}")

    def port(self, number: int) -> Port:
        for p in self.ports:
            if p.port == number:
                return p
        raise FabricTopologyError(f"switch {self.name} has no port {number}")


@dataclass(frozen=True)
class HostInfo:
    name: str
    ip: str
    prefix_len: int
    mac: str
    switch: str
    switch_port: int
    gpus: int
    intra_bw_bps: float | None = None  # between its GPUs, bits/s (topology.json schema 2)


@dataclass(frozen=True)
class FabricTopology:
    switches: tuple[SwitchInfo, ...]
    hosts: tuple[HostInfo, ...]
    p4info: Path | None
    device_config: Path | None
    program: Path | None
    source: Path

    def switch(self, name: str) -> SwitchInfo:
        for s in self.switches:
            if s.name == name:
                return s
        raise FabricTopologyError(
            f"unknown switch {name!r} (switches: {', '.join(self.switch_names())})")

    def host(self, name: str) -> HostInfo:
        for h in self.hosts:
            if h.name == name or h.ip == name:
                return h
        raise FabricTopologyError(
            f"unknown host {name!r} (hosts: {', '.join(h.name for h in self.hosts)})"
        )

    def switch_names(self) -> list[str]:
        return [s.name for s in self.switches]

    def leaves(self) -> list[SwitchInfo]:
        """Switches hosts attach to (role ``leaf``), leaf 1 first."""
        return sorted((s for s in self.switches if s.role == "leaf"), key=lambda s: s.index)

    def spines(self) -> list[SwitchInfo]:
        return sorted((s for s in self.switches if s.role == "spine"), key=lambda s: s.index)

    def hosts_of(self, switch: str) -> list[HostInfo]:
        return sorted((h for h in self.hosts if h.switch == switch), key=lambda h: h.switch_port)

    def subnet_of(self, switch: str) -> ipaddress.IPv4Network | None:
        """The leaf's block of host addresses: as topology.json names it, else the smallest
        network holding every host of the leaf and no host of another switch (None when there
        is none). The hosts' own prefix length says nothing here: hosts are on one /16 so that
        all of them are on-link, while each leaf owns a smaller block."""
        named = self.switch(switch).subnet
        if named is not None:
            return named
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


def _subnet(text: str | None, where: str) -> ipaddress.IPv4Network | None:
    if text is None:
        return None
    try:
        return ipaddress.IPv4Network(text)
    except ValueError:
        raise FabricTopologyError(f"{where}: {text!r} is not an IPv4 network") from None


def _get(obj: Any, key: str, kind: type | tuple[type, ...], where: str, default: Any = ...) -> Any:
    if not isinstance(obj, dict):
        raise FabricTopologyError(f"{where}: expected an object")
    if key not in obj or obj[key] is None:
        if default is not ...:
            return default
        raise FabricTopologyError(f"{where}: missing key {key!r}")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise FabricTopologyError(f"{where}.{key}: unexpected value {value!r}")
    return value


def _rate(value: float | None) -> float | None:
    return None if value is None else float(value)


def _path(base: Path, value: str | None) -> Path | None:
    if not value:
        return None
    p = Path(value)
    return p if p.is_absolute() else (base / p)


def load_topology(path: str | Path) -> FabricTopology:
    """Read ``topology.json`` (or the one inside a run directory)."""
    src = Path(path)
    if src.suffix != ".json":
        src = src / "topology.json"
    try:
        data = json.loads(src.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FabricTopologyError(f"{src}: no such file (is this a run directory?)") from None
    except (OSError, ValueError) as err:
        raise FabricTopologyError(f"{src}: cannot read: {err}") from None
    where = src.name
    switches = []
    for i, sw in enumerate(_get(data, "switches", list, where)):
        w = f"{where}: switches[{i}]"
        ports = tuple(
            Port(
                _get(p, "port", int, f"{w}.ports[{j}]"),
                str(_get(p, "mac", str, f"{w}.ports[{j}]", "")),
                _get(p, "peer", str, f"{w}.ports[{j}]"),
                _get(p, "peer_port", int, f"{w}.ports[{j}]", 0),
            )
            for j, p in enumerate(_get(sw, "ports", list, w, []))
        )
        switches.append(
            SwitchInfo(
                name=_get(sw, "name", str, w),
                device_id=_get(sw, "device_id", int, w),
                grpc_addr=_get(sw, "grpc_addr", str, w),
                role=_get(sw, "role", str, w, "leaf"),
                index=_get(sw, "index", int, w, i + 1),
                cpu_port=_get(sw, "cpu_port", int, w, None),
                ports=tuple(sorted(ports, key=lambda p: p.port)),
                subnet=_subnet(_get(sw, "subnet", str, w, None), f"{w}.subnet"),
                thrift_port=_get(sw, "thrift_port", int, w, None),
            )
        )
    hosts = []
    for i, h in enumerate(_get(data, "hosts", list, where)):
        w = f"{where}: hosts[{i}]"
        ip_text = _get(h, "ip", str, w)
        ip, _, plen = ip_text.partition("/")
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            raise FabricTopologyError(f"{w}.ip: {ip_text!r} is not an IPv4 address") from None
        hosts.append(
            HostInfo(
                name=_get(h, "name", str, w),
                ip=ip,
                prefix_len=_get(h, "prefix_len", int, w, int(plen) if plen else 24),
                mac=_get(h, "mac", str, w),
                switch=_get(h, "switch", str, w),
                switch_port=_get(h, "switch_port", int, w),
                gpus=_get(h, "gpus", int, w, 1),
                intra_bw_bps=_rate(_get(h, "intra_bw_bps", (int, float), w, None)),
            )
        )
    names = {s.name for s in switches}
    for h in hosts:
        if h.switch not in names:
            raise FabricTopologyError(
                f"{where}: host {h.name} is attached to unknown switch {h.switch!r}"
            )
    base = src.parent
    return FabricTopology(
        switches=tuple(sorted(switches, key=lambda s: s.device_id)),
        hosts=tuple(hosts),
        p4info=_path(base, data.get("p4info")),
        device_config=_path(base, data.get("device_config")),
        program=_path(base, data.get("program")),
        source=src,
    )
