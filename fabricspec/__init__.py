"""``topology.json``, the file that says what a run's network is (docs/topology.md): its
records, its parser and its checks, in one place for every reader.

``topo`` writes the file and the controller, the live view and the experiment code read it;
this package sits below all of them (it imports only :mod:`vtime`, for the units of schema 1)
so that neither ``topo`` nor ``controller`` keeps a copy. Errors: :class:`FabricSpecError`
(a :class:`ValueError`), whose messages name the file, the field and the value.
"""

from fabricspec.errors import FabricSpecError, UnknownNodeError
from fabricspec.parse import (
    TOPOLOGY_FILE,
    read_topology,
    topology_from_dict,
    topology_path,
    topology_to_dict,
)
from fabricspec.records import (
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    HostRecord,
    LinkRecord,
    PortRecord,
    SwitchRecord,
    Topology,
)

__all__ = [
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "TOPOLOGY_FILE",
    "FabricSpecError",
    "HostRecord",
    "LinkRecord",
    "PortRecord",
    "SwitchRecord",
    "Topology",
    "UnknownNodeError",
    "read_topology",
    "topology_from_dict",
    "topology_path",
    "topology_to_dict",
]
