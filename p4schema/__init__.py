"""P4Info, indexed: the one place that finds tables, actions, externs and their members by
name (full, alias or unique suffix) or id. It imports only the P4Runtime protobufs, so the
controller and the built-in target's P4Runtime server both build on it (docs/architecture.md).
"""

from p4schema.index import (
    KINDS,
    Entities,
    Named,
    P4InfoIndex,
    P4InfoLookupError,
    P4Object,
    resolve_name,
)

__all__ = ["KINDS", "Entities", "Named", "P4InfoIndex", "P4InfoLookupError", "P4Object",
           "resolve_name"]
