"""Reading and writing ``topology.json`` (docs/topology.md): schema 2, and schema 1 of older
run directories (links' ``bw_mbit`` in Mbit/s and a tc ``delay`` string).

One parser for every reader. Keys that the writer always sets but a hand-written file for the
controller may leave out have defaults (a port's ``intf``, a host's ``leaf``, the file's
``links``...; see :func:`topology_from_dict`); a key that is present must have the right type.
Every problem is a :class:`FabricSpecError` naming the file, the field and the value.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from fabricspec.errors import FabricSpecError
from fabricspec.records import (
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    HostRecord,
    LinkRecord,
    PortRecord,
    SwitchRecord,
    Topology,
)
from vtime import UnitError, parse_delay

TOPOLOGY_FILE = "topology.json"
_MISSING = object()


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    """The JSON-ready form (``switches[].ports`` is a list of port objects)."""
    data: dict[str, Any] = json.loads(json.dumps(asdict(topology)))  # tuples -> lists
    data["schema"] = SCHEMA_VERSION
    return data


def _type_names(kinds: tuple[type, ...]) -> str:
    """``str``, ``int``, ``list``...; int-or-float is ``number`` (JSON's word)."""
    if set(kinds) == {int, float}:
        return "number"
    return " or ".join(k.__name__ for k in kinds)


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
         default: Any = _MISSING) -> Any:
    """``obj[key]`` checked against ``kind``; ``default`` when the key is absent or null (no
    default: the key is required). ``where`` ends with its separator: ``"f.json: "``,
    ``"f.json: hosts[0]."``."""
    value = obj.get(key)
    if value is None:
        if default is not _MISSING:
            return default
        raise FabricSpecError(f"{where.rstrip(': .')}: missing key {key!r}")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise FabricSpecError(f"{where}{key}: expected {_type_names(kinds)}, got {value!r}")
    return value


def _number(obj: Mapping[str, Any], key: str, where: str) -> float | None:
    value = _get(obj, key, (int, float), where, None)
    return None if value is None else float(value)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise FabricSpecError(f"{where.rstrip(': .')}: expected an object, got {value!r}")
    return value


#: Each schema's link keys that the other does not know: a file that carries the other's
#: keys was labelled wrongly (or not at all), and reading it as labelled would drop its rates.
_OTHER_SCHEMA_KEYS = {1: ("bw_bps", "delay_s"), 2: ("bw_mbit", "delay")}


def _link_rate(ln: Mapping[str, Any], where: str, schema: int) -> float | None:
    """A link's bits/s: ``bw_bps``, or schema 1's ``bw_mbit``."""
    for key in _OTHER_SCHEMA_KEYS.get(schema, ()):
        if key in ln:
            raise FabricSpecError(
                f"{where}{key}: not a schema {schema} key (got {ln[key]!r}); set the file's "
                f"\"schema\" to the one it is written in")
    if schema == 1:
        mbit = _number(ln, "bw_mbit", where)
        return None if mbit is None else mbit * 1e6
    return _number(ln, "bw_bps", where)


def _link_delay(ln: Mapping[str, Any], where: str, schema: int) -> float | None:
    """A link's delay in seconds: ``delay_s``, or schema 1's tc string ``delay``."""
    if schema != 1:
        return _number(ln, "delay_s", where)
    text = _get(ln, "delay", str, where, None)
    if text is None:
        return None
    try:
        return parse_delay(text, f"{where}delay")
    except UnitError as exc:
        raise FabricSpecError(str(exc)) from None


def _tdf(data: Mapping[str, Any], source: str) -> float:
    value = data.get("tdf", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
        raise FabricSpecError(f"{source}: tdf: expected a number >= 1, got {value!r}")
    return float(value)


def _subnet(text: str | None, where: str) -> str | None:
    if text is None:
        return None
    try:
        ipaddress.IPv4Network(text)
    except ValueError:
        raise FabricSpecError(f"{where}subnet: {text!r} is not an IPv4 network") from None
    return text


def _port(p: Any, where: str, switch: str) -> PortRecord:
    p = _object(p, where)
    number = _get(p, "port", int, where)
    peer = _get(p, "peer", str, where)
    peer_port = _get(p, "peer_port", int, where, 0)
    return PortRecord(
        number, _get(p, "intf", str, where, f"{switch}-eth{number}"),
        _get(p, "mac", str, where, ""), peer, peer_port,
        _get(p, "peer_intf", str, where, f"{peer}-eth{peer_port}"),
    )


def _switch(sw: Any, where: str, i: int, target: str) -> SwitchRecord:
    sw = _object(sw, where)
    name = _get(sw, "name", str, where)
    ports = [_port(p, f"{where}ports[{j}].", name)
             for j, p in enumerate(_get(sw, "ports", list, where, []))]
    return SwitchRecord(
        name=name, device_id=_get(sw, "device_id", int, where),
        grpc_addr=_get(sw, "grpc_addr", str, where),
        role=_get(sw, "role", str, where, "leaf"), index=_get(sw, "index", int, where, i + 1),
        target=_get(sw, "target", str, where, target),
        cpu_port=_get(sw, "cpu_port", int, where, None),
        ports=tuple(sorted(ports, key=lambda r: r.port)),
        log=_get(sw, "log", str, where, None),
        subnet=_subnet(_get(sw, "subnet", str, where, None), where),
        thrift_port=_get(sw, "thrift_port", int, where, None),
    )


def _host(h: Any, where: str, leaf_index: Mapping[str, int]) -> HostRecord:
    h = _object(h, where)
    name = _get(h, "name", str, where)
    ip_text = _get(h, "ip", str, where)
    ip, _, plen = ip_text.partition("/")
    try:
        ipaddress.IPv4Address(ip)
        prefix = int(plen) if plen else 24
    except ValueError:
        raise FabricSpecError(f"{where}ip: {ip_text!r} is not an IPv4 address") from None
    switch = _get(h, "switch", str, where)
    switch_port = _get(h, "switch_port", int, where)
    return HostRecord(
        name, ip, _get(h, "prefix_len", int, where, prefix), _get(h, "mac", str, where),
        _get(h, "intf", str, where, f"{name}-eth0"), switch, switch_port,
        _get(h, "leaf", int, where, leaf_index.get(switch, 0)),
        _get(h, "slot", int, where, switch_port), _get(h, "gpus", int, where, 1),
        _get(h, "role", str, where, "worker"), _number(h, "intra_bw_bps", where),
    )


def _link(ln: Any, where: str, schema: int) -> LinkRecord:
    ln = _object(ln, where)
    return LinkRecord(
        _get(ln, "node1", str, where), _get(ln, "port1", int, where),
        _get(ln, "node2", str, where), _get(ln, "port2", int, where),
        _get(ln, "kind", str, where, "fabric"), _link_rate(ln, where, schema),
        _link_delay(ln, where, schema), _number(ln, "loss", where),
    )


def topology_from_dict(data: Any, source: str = TOPOLOGY_FILE) -> Topology:
    """Parses and checks the JSON form of ``source`` (schema 2, or 1 of older runs).

    Required: ``switches`` (each with ``name``, ``device_id``, ``grpc_addr``), ``hosts``
    (each with ``name``, ``ip``, ``mac``, ``switch``, ``switch_port``) and, in ``ports`` and
    ``links``, the numbers and names that say what is connected. Everything else has the
    default the docs give (no ``schema``: 1, no ``kind``/``target``: ``"unknown"``, a port's
    ``intf``: ``<switch>-eth<port>``, a host's ``leaf``: its switch's index...). Raises
    :class:`FabricSpecError` naming the file, the key and the bad value."""
    if not isinstance(data, dict):
        raise FabricSpecError(f"{source}: expected a JSON object at the top level")
    top: Mapping[str, Any] = data
    src = f"{source}: "
    schema = _get(top, "schema", int, src, 1)
    if schema not in READABLE_SCHEMAS:
        raise FabricSpecError(f"{source}: schema {schema} is not supported (expected one of "
                              f"{', '.join(map(str, READABLE_SCHEMAS))})")
    target = _get(top, "target", str, src, "unknown")
    switches = [_switch(sw, f"{source}: switches[{i}].", i, target)
                for i, sw in enumerate(_get(top, "switches", list, src))]
    leaf_index = {s.name: s.index for s in switches}
    hosts = [_host(h, f"{source}: hosts[{i}].", leaf_index)
             for i, h in enumerate(_get(top, "hosts", list, src))]
    links = [_link(ln, f"{source}: links[{i}].", schema)
             for i, ln in enumerate(_get(top, "links", list, src, []))]
    names = [s.name for s in switches] + [h.name for h in hosts]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise FabricSpecError(f"{source}: node name {dup[0]!r} appears twice")
    for h in hosts:
        if h.switch not in leaf_index:
            raise FabricSpecError(f"{source}: host {h.name} is attached to unknown switch "
                                  f"{h.switch!r}")
    return Topology(
        kind=_get(top, "kind", str, src, "unknown"), target=target,
        switches=tuple(sorted(switches, key=lambda s: s.device_id)), hosts=tuple(hosts),
        links=tuple(links),
        program=_get(top, "program", str, src, None),
        p4info=_get(top, "p4info", str, src, None),
        device_config=_get(top, "device_config", str, src, None),
        netem=_get(top, "netem", bool, src, False),
        tdf=_tdf(top, source),
        delay_line=_get(top, "delay_line", bool, src, False),
        delay_nodes=_get(top, "delay_nodes", bool, src, False),
        rundir=_get(top, "rundir", str, src, None),
        extra=dict(_object(top.get("extra", {}), f"{source}: extra")),
    )


def topology_path(path: str | Path) -> Path:
    """``path/topology.json`` when ``path`` is a (run) directory (``run/latest`` works), else
    ``path`` itself."""
    path = Path(path)
    return path / TOPOLOGY_FILE if path.is_dir() else path


def read_topology(path: str | Path, missing_hint: str = "is this a run directory?") -> Topology:
    """The :class:`Topology` in a ``topology.json``, or in a run directory holding one.
    Relative program, P4Info and device config paths are taken from the file's directory.
    Raises :class:`FabricSpecError` with the reason (``missing_hint`` in parentheses when
    there is no file: each reader knows best what its user should check)."""
    src = topology_path(path)
    try:
        text = src.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FabricSpecError(f"{src}: no such file ({missing_hint})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FabricSpecError(f"{src}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FabricSpecError(f"{src}: not valid JSON: {exc}") from None
    topology = topology_from_dict(data, str(src))

    def resolve(value: str | None) -> str | None:
        return value if not value or Path(value).is_absolute() else str(src.parent / value)

    return replace(topology, program=resolve(topology.program), p4info=resolve(topology.p4info),
                   device_config=resolve(topology.device_config))
