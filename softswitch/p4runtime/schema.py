"""The server's view of a P4Info: entities by id (the shared :mod:`p4schema` index, with
P4Runtime status errors), per-table facts, and the consistency check against the compiled
program.

The server translates every P4Runtime entity through this index (ids -> names), and the
engine is addressed by fully qualified names only, so the two stay decoupled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from p4.config.v1 import p4info_pb2

from p4schema import Entities, Named, P4InfoIndex, P4InfoLookupError
from softswitch.p4runtime.status import invalid

T = TypeVar("T", bound=Named)

MATCH_KIND_NAMES = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}
# Tables with one of these match kinds order their entries by priority (P4Runtime spec).
_PRIORITY_MATCH_TYPES = (
    p4info_pb2.MatchField.TERNARY,
    p4info_pb2.MatchField.RANGE,
    p4info_pb2.MatchField.OPTIONAL,
)


@dataclass
class TableInfo:
    proto: p4info_pb2.Table
    name: str
    fields_by_id: dict[int, p4info_pb2.MatchField]
    field_index: dict[int, int]  # field id -> position in the key
    action_scopes: dict[int, int]  # action id -> ActionRef scope
    direct_counter: p4info_pb2.DirectCounter | None = None
    direct_meter: p4info_pb2.DirectMeter | None = None
    needs_priority: bool = False


@dataclass
class ControllerHeader:
    """A @controller_header's metadata fields in wire order."""

    name: str
    fields: list[p4info_pb2.ControllerPacketMetadata.Metadata] = field(default_factory=list)

    @property
    def widths(self) -> list[int]:
        return [m.bitwidth for m in self.fields]

    @property
    def byte_len(self) -> int:
        return (sum(self.widths) + 7) // 8


class P4InfoById:
    """The server's look-ups into one P4Info, built on the shared :class:`P4InfoIndex`; every
    miss raises a StatusError with a precise message.

    An id that the P4Info does not define makes the request malformed: INVALID_ARGUMENT
    (the specification's rule for malformed entities, and what BMv2 answers), not
    NOT_FOUND, which P4Runtime keeps for entities missing from a container."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.index = P4InfoIndex(p4info)
        index = self.index
        self.actions = index.actions.by_id
        self.action_params = {
            aid: {p.id: p for p in a.params} for aid, a in index.actions.by_id.items()
        }
        self.counters = index.counters.by_id
        self.meters = index.meters.by_id
        self.registers = index.registers.by_id
        self.digests = index.digests.by_id
        self.action_profiles = index.action_profiles.by_id
        self.direct_counters = index.direct_counters.by_id
        self.direct_meters = index.direct_meters.by_id
        direct_counters = {c.direct_table_id: c for c in index.direct_counters}
        direct_meters = {m.direct_table_id: m for m in index.direct_meters}
        self.tables: dict[int, TableInfo] = {}
        for t in index.tables:
            self.tables[t.preamble.id] = TableInfo(
                proto=t,
                name=t.preamble.name,
                fields_by_id={f.id: f for f in t.match_fields},
                field_index={f.id: i for i, f in enumerate(t.match_fields)},
                action_scopes={r.id: r.scope for r in t.action_refs},
                direct_counter=direct_counters.get(t.preamble.id),
                direct_meter=direct_meters.get(t.preamble.id),
                needs_priority=any(f.match_type in _PRIORITY_MATCH_TYPES for f in t.match_fields),
            )
        self.table_ids_by_name = {t.name: tid for tid, t in self.tables.items()}
        self.action_ids_by_name = {name: a.preamble.id for name, a in index.actions.by_name.items()}
        self.controller_headers = {
            c.preamble.name: ControllerHeader(c.preamble.name, list(c.metadata))
            for c in index.controller_packet_metadata
        }

    # ------------------------------------------------------------------ look-ups by id
    @staticmethod
    def _find(entities: Entities[T], ident: int) -> T:
        try:
            return entities.find(ident)
        except P4InfoLookupError as err:
            raise invalid(f"{err} in the P4Info") from None

    def table(self, table_id: int) -> TableInfo:
        self._find(self.index.tables, table_id)
        return self.tables[table_id]

    def action(self, action_id: int) -> p4info_pb2.Action:
        return self._find(self.index.actions, action_id)

    def counter(self, counter_id: int) -> p4info_pb2.Counter:
        return self._find(self.index.counters, counter_id)

    def meter(self, meter_id: int) -> p4info_pb2.Meter:
        return self._find(self.index.meters, meter_id)

    def register(self, register_id: int) -> p4info_pb2.Register:
        return self._find(self.index.registers, register_id)

    def digest(self, digest_id: int) -> p4info_pb2.Digest:
        return self._find(self.index.digests, digest_id)

    def action_profile(self, profile_id: int) -> p4info_pb2.ActionProfile:
        return self._find(self.index.action_profiles, profile_id)

    def digest_by_name(self, name: str) -> p4info_pb2.Digest | None:
        """The digest with this full name (the engine's names are full), None if none."""
        return self.index.digests.by_name.get(name)


def _names_ids(items: list[p4info_pb2.Preamble]) -> dict[str, int]:
    return {p.name: p.id for p in items}


def check_p4info_matches(client: p4info_pb2.P4Info, built: p4info_pb2.P4Info) -> None:
    """Raise INVALID_ARGUMENT unless the client's P4Info names the same tables and actions,
    with the same ids and match fields, as the one built from the compiled program."""
    for kind, theirs, ours in (
        ("table", _names_ids([t.preamble for t in client.tables]),
         _names_ids([t.preamble for t in built.tables])),
        ("action", _names_ids([a.preamble for a in client.actions]),
         _names_ids([a.preamble for a in built.actions])),
    ):
        missing = sorted(set(ours) - set(theirs))
        extra = sorted(set(theirs) - set(ours))
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {kind}s {missing}")
            if extra:
                parts.append(f"unknown {kind}s {extra}")
            raise invalid(f"P4Info does not match the device config: {'; '.join(parts)}")
        for name, pid in ours.items():
            if theirs[name] != pid:
                raise invalid(
                    f"P4Info does not match the device config: {kind} {name!r} has id "
                    f"{theirs[name]}, the program's is {pid}"
                )
    ours_tables = {t.preamble.name: t for t in built.tables}
    for t in client.tables:
        mine = ours_tables[t.preamble.name]
        a = [(f.id, f.name, f.bitwidth, f.match_type) for f in t.match_fields]
        b = [(f.id, f.name, f.bitwidth, f.match_type) for f in mine.match_fields]
        if a != b:
            raise invalid(
                f"P4Info does not match the device config: match fields of table "
                f"{t.preamble.name!r} differ"
            )
