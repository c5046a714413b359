"""The one exception root of ``fabricspec``; each message is meant to be shown as is."""

from __future__ import annotations


class FabricSpecError(ValueError):
    """A ``topology.json`` that is missing, unreadable or breaks the schema (the message names
    the file, the field and the value), or a lookup of a node the file does not have."""


class UnknownNodeError(FabricSpecError, KeyError):
    """A switch, host or port the topology does not have. Also a :class:`KeyError`, so that
    ``topology.switch(name)`` reads like a mapping lookup."""

    def __str__(self) -> str:
        # KeyError shows its argument as a repr (quoted); this message is for people.
        return Exception.__str__(self)
