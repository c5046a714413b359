"""The index over one P4Info message that the controller, the P4Runtime server and the STF
runner share, so a name resolves the same way on both ends of a P4Runtime channel.

A name is found as P4Runtime tools resolve it (p4runtime-shell, finsy): the full name
(``MyIngress.ipv4_lpm``), the P4Info alias (the preamble's ``alias``, p4c's shortest unique
suffix), or any suffix of whole dot-separated components that only one object has
(``ipv4_lpm``); a short name that fits two objects is an error that names both. Ids are
looked up exactly. A miss names the kind and the value and suggests the closest name:
``no table named 'ipv4_lmp'. Did you mean 'MyIngress.ipv4_lpm'?``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

from p4.config.v1 import p4info_pb2


class Named(Protocol):
    """A P4Info object: what the index reads of each (tables, actions, counters, ...)."""

    @property
    def preamble(self) -> p4info_pb2.Preamble: ...


class _Member(Protocol):
    """A match field, action parameter or controller metadata field."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)
M = TypeVar("M", bound=_Member)

# Any object the index holds, as :meth:`P4InfoIndex.by_id` returns it.
P4Object: TypeAlias = (
    p4info_pb2.Table | p4info_pb2.Action | p4info_pb2.ActionProfile | p4info_pb2.Counter
    | p4info_pb2.DirectCounter | p4info_pb2.Meter | p4info_pb2.DirectMeter
    | p4info_pb2.Register | p4info_pb2.Digest | p4info_pb2.ValueSet
    | p4info_pb2.ControllerPacketMetadata
)


class P4InfoLookupError(LookupError):
    """A name or id that matches no P4Info object of the requested kind, or several."""

    def __init__(self, message: str, kind: str = "", key: str | int = "") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.key = key

    def __str__(self) -> str:
        return self.message


def _suggest(name: str, candidates: Sequence[str]) -> str:
    """``. Did you mean 'x'?`` for the closest full name or last component, else ``""``."""
    last = {c.rsplit(".", 1)[-1]: c for c in reversed(candidates)}
    close = difflib.get_close_matches(name, list(candidates) + list(last), n=1)
    if not close:
        return ""
    return f". Did you mean '{close[0] if close[0] in candidates else last[close[0]]}'?"


def _ambiguous(kind: str, name: str, matches: Sequence[str]) -> P4InfoLookupError:
    choices = ", ".join(sorted(set(matches)))
    return P4InfoLookupError(f"{kind} name '{name}' is ambiguous: {choices}", kind, name)


def _missing(kind: str, name: str, candidates: Sequence[str]) -> P4InfoLookupError:
    hint = _suggest(name, candidates)
    if not hint and not candidates:
        hint = " (the P4Info has none)"
    return P4InfoLookupError(f"no {kind} named '{name}'{hint}", kind, name)


def resolve_name(
    name: str,
    candidates: Sequence[str],
    kind: str,
    aliases: Mapping[str, Sequence[str]] | None = None,
    plain_suffix: bool = False,
) -> str:
    """The one candidate ``name`` stands for: itself, or the one candidate whose alias it is
    or that it is a dot-separated suffix of (with ``plain_suffix``, then any suffix, as p4c's
    STF files write key names). A short name that fits several candidates (one's alias,
    another's suffix) is ambiguous, never a silent pick.

    Raises :class:`P4InfoLookupError` with a "Did you mean" hint or the ambiguous choices.
    """
    if name in candidates:
        return name
    short = {c for c in candidates if c.endswith("." + name)}
    short.update((aliases or {}).get(name, ()))
    tries = [sorted(short)]
    if plain_suffix:
        tries.append([c for c in candidates if c.endswith(name)])
    for matches in tries:
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise _ambiguous(kind, name, matches)
    raise _missing(kind, name, candidates)


class Entities(Generic[T]):
    """The P4Info objects of one kind (tables, actions, ...) by full name, alias and id."""

    def __init__(self, kind: str, items: Sequence[T]) -> None:
        self.kind = kind
        self.by_name: dict[str, T] = {}
        self.by_id: dict[int, T] = {}
        self.aliases: dict[str, list[str]] = {}
        # every short name (alias, dot-separated suffix) -> the full names it fits
        self._short: dict[str, list[str]] = {}
        for item in items:
            pre = item.preamble
            self.by_name[pre.name] = item
            self.by_id[pre.id] = item
            shorts = {".".join(pre.name.split(".")[k:]) for k in range(1, pre.name.count(".") + 1)}
            if pre.alias and pre.alias != pre.name:
                self.aliases.setdefault(pre.alias, []).append(pre.name)
                shorts.add(pre.alias)
            for short in shorts:
                self._short.setdefault(short, []).append(pre.name)

    def find(self, key: str | int) -> T:
        """The object with this id, or this full name, alias or unique dot-suffix."""
        if isinstance(key, int):
            try:
                return self.by_id[key]
            except KeyError:
                raise P4InfoLookupError(
                    f"no {self.kind} with id {key} ({key:#x})", self.kind, key
                ) from None
        found = self.by_name.get(key)
        if found is not None:
            return found
        owners = self._short.get(key, [])
        if len(owners) == 1:
            return self.by_name[owners[0]]
        if owners:
            raise _ambiguous(self.kind, key, owners)
        raise _missing(self.kind, key, list(self.by_name))

    def get(self, key: str | int) -> T | None:
        """Like :meth:`find`, but None when nothing (or more than one object) matches."""
        try:
            return self.find(key)
        except P4InfoLookupError:
            return None

    def names(self) -> list[str]:
        """The full names, in P4Info order."""
        return list(self.by_name)

    def __iter__(self) -> Iterator[T]:
        return iter(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, key: object) -> bool:
        return key in self.by_id if isinstance(key, int) else key in self.by_name


# The P4Info repeated fields indexed by name and id, with the kind each is called in errors.
KINDS: dict[str, str] = {
    "tables": "table",
    "actions": "action",
    "action_profiles": "action profile",
    "counters": "counter",
    "direct_counters": "direct counter",
    "meters": "meter",
    "direct_meters": "direct meter",
    "registers": "register",
    "digests": "digest",
    "value_sets": "value set",
    "controller_packet_metadata": "controller packet metadata",
}


def _members(owner: str, what: str, items: Sequence[M], key: str | int) -> M:
    """One match field / parameter / metadata field of ``owner`` by id, name or dot-suffix."""
    for item in items:
        if item.id == key or item.name == key:
            return item
    names = [item.name for item in items]
    if isinstance(key, str):
        suffix = [n for n in names if n.endswith("." + key)]
        if len(suffix) == 1:
            return next(item for item in items if item.name == suffix[0])
        if len(suffix) > 1:
            raise _ambiguous(f"{what} of {owner}", key, suffix)
        hint = _suggest(key, names) or f" ({what}s: {', '.join(names) or 'none'})"
        raise P4InfoLookupError(f"{owner} has no {what} named '{key}'{hint}", what, key)
    raise P4InfoLookupError(f"{owner} has no {what} with id {key}", what, key)


class P4InfoIndex:
    """Read-only index of one P4Info: every kind by full name, alias, unique suffix or id,
    and the members of tables, actions and controller headers."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.tables = Entities("table", p4info.tables)
        self.actions = Entities("action", p4info.actions)
        self.action_profiles = Entities("action profile", p4info.action_profiles)
        self.counters = Entities("counter", p4info.counters)
        self.direct_counters = Entities("direct counter", p4info.direct_counters)
        self.meters = Entities("meter", p4info.meters)
        self.direct_meters = Entities("direct meter", p4info.direct_meters)
        self.registers = Entities("register", p4info.registers)
        self.digests = Entities("digest", p4info.digests)
        self.value_sets = Entities("value set", p4info.value_sets)
        self.controller_packet_metadata = Entities(
            "controller packet metadata", p4info.controller_packet_metadata
        )
        # the typed look-ups, one per kind: ``index.table("ipv4_lpm")`` is a p4info_pb2.Table
        self.table = self.tables.find
        self.action = self.actions.find
        self.action_profile = self.action_profiles.find
        self.counter = self.counters.find
        self.direct_counter = self.direct_counters.find
        self.meter = self.meters.find
        self.direct_meter = self.direct_meters.find
        self.register = self.registers.find
        self.digest = self.digests.find
        self.value_set = self.value_sets.find
        self.packet_metadata = self.controller_packet_metadata.find
        self._by_id: dict[int, P4Object] = {}
        for field_name in KINDS:
            self._by_id.update(self.entities(field_name).by_id)

    def entities(self, kind: str) -> Entities[Any]:
        """The objects of one kind, named as the P4Info field ("tables") or singular
        ("table", "direct_counter"). The kind is a run-time string, so the objects are Any
        here: callers that know the kind use the typed attributes (``tables``, ``table()``)."""
        for field_name, singular in KINDS.items():
            if kind in (field_name, singular, singular.replace(" ", "_")):
                found: Entities[Any] = getattr(self, field_name)
                return found
        raise ValueError(f"unknown P4Info object kind {kind!r} (kinds: {', '.join(KINDS)})")

    def find(self, kind: str, key: str | int) -> Any:
        """The object of ``kind`` with this name (full, alias or unique suffix) or id."""
        return self.entities(kind).find(key)

    def names(self, kind: str) -> list[str]:
        """Full names of every object of ``kind``, in P4Info order."""
        return self.entities(kind).names()

    def by_id(self, ident: int) -> P4Object:
        """The object of any kind with this id (the id's top byte says the kind)."""
        try:
            return self._by_id[ident]
        except KeyError:
            raise P4InfoLookupError(
                f"no P4Info object has id {ident} ({ident:#x})", "object", ident
            ) from None

    # ---- members
    @staticmethod
    def match_field(table: p4info_pb2.Table, key: str | int) -> p4info_pb2.MatchField:
        """A key field of ``table`` by id, name or unique dot-suffix."""
        return _members(f"table '{table.preamble.name}'", "match field", table.match_fields, key)

    @staticmethod
    def param(action: p4info_pb2.Action, key: str | int) -> p4info_pb2.Action.Param:
        """A parameter of ``action`` by id or name."""
        return _members(f"action '{action.preamble.name}'", "parameter", action.params, key)

    @staticmethod
    def metadata(
        header: p4info_pb2.ControllerPacketMetadata, key: str | int
    ) -> p4info_pb2.ControllerPacketMetadata.Metadata:
        """A metadata field of a controller header (packet_in/packet_out) by id or name."""
        owner = f"controller header '{header.preamble.name}'"
        return _members(owner, "metadata field", header.metadata, key)

    def table_actions(self, table: p4info_pb2.Table) -> list[str]:
        """Full names of the actions a table may use, in P4Info order."""
        return [self.action(ref.id).preamble.name for ref in table.action_refs]
