"""What the controller reads from a run directory: ``topology.json`` (docs/topology.md).

The records and the parser are :mod:`fabricspec`'s, the same ones ``topo`` writes and reads,
so the controller still depends only on P4Runtime and the file format (never on Mininet or
the topology code). The names below are the controller's for them. Schemas 1 and 2 are read
alike; a file written by hand for the controller may leave out what it does not use (a
port's ``intf``, a host's ``leaf``, the links...). Every problem of the file is a
:class:`FabricTopologyError` naming the file, the key and the value.
"""

from __future__ import annotations

from pathlib import Path

import fabricspec
from controller.errors import FabricTopologyError
from fabricspec import HostRecord, PortRecord, SwitchRecord, Topology

__all__ = ["FabricTopology", "FabricTopologyError", "HostInfo", "Port", "SwitchInfo",
           "load_topology"]

FabricTopology = Topology
SwitchInfo = SwitchRecord
HostInfo = HostRecord
Port = PortRecord


def load_topology(path: str | Path) -> FabricTopology:
    """Read ``topology.json`` (or the one inside a run directory); relative program, P4Info
    and device config paths are taken from the file's directory."""
    try:
        return fabricspec.read_topology(path)
    except fabricspec.FabricSpecError as exc:
        raise FabricTopologyError(str(exc)) from None
