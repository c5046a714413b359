"""Every exception of ``controller/``, under one root, :class:`ControllerError`.

Callers (the CLI, the experiment session, the live view, the scenario runner) catch the root;
the subclasses say which part failed and keep the bases they had (``ValueError`` for bad
input), and stay importable from the modules that raise them. The one defined elsewhere is
:class:`~controller.p4client.P4RuntimeRequestError` (a ``ControllerError`` too), which decodes
gRPC errors and so lives with the gRPC client. Messages are one line for people.
"""

from __future__ import annotations

from fabricspec import FabricSpecError


class ControllerError(Exception):
    """A request the controller cannot carry out (one line, for people); the root of every
    controller exception."""


class UsageError(ControllerError):
    """Bad command-line syntax (argparse's message)."""


class FabricTopologyError(ControllerError, FabricSpecError):
    """topology.json is missing, unreadable or lacks something the controller needs."""


class SchemaError(ControllerError, ValueError):
    """A name or value does not fit the P4Info (the message says which and why)."""


class StateError(ControllerError, ValueError):
    """The state file is unreadable or from an incompatible version."""


class TreeError(ControllerError, ValueError):
    """No tree can be built as asked; ``field`` names the request field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


class JobError(ControllerError, ValueError):
    """A job request that cannot be satisfied; ``field`` names the offending input."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class Bmv2RuntimeError(ControllerError):
    """A BMv2 runtime (Thrift) operation failed; the message is one line for people."""
