"""Exceptions of the topology layer; each message is meant to be shown to the user as is."""

from __future__ import annotations

from fabricspec import FabricSpecError


class TopoError(Exception):
    """Base of every user-facing error of ``topo/`` (the CLI prints ``error: <message>``)."""


class TopologyError(TopoError, ValueError):
    """A topology that cannot be built as asked (bad sizes, names too long, port clashes)."""


class TopologyFileError(TopoError, FabricSpecError):
    """A ``topology.json`` that is missing, unreadable or does not match the schema (what
    :mod:`fabricspec` found, as an error of topo's)."""


class TargetError(TopoError):
    """A switch target that is unknown or not installed."""


class ProgramBuildError(TopoError):
    """The P4 program could not be compiled for the chosen target."""


class SwitchStartError(TopoError):
    """A switch process that exited or did not open its gRPC port before the deadline."""


class NetworkError(TopoError):
    """The emulated network could not be created (leftovers of an earlier run, no root)."""
