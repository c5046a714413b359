"""P4Runtime entities the controller writes, and how it compares them with what it reads.

The controller describes the state it wants on a switch as a list of ``p4.v1.Entity``
messages. Each entity has an identity (:func:`entity_key`: the table and match for a table
entry, the group id for a multicast group, ...) and a content; reconciliation reads the
switch, matches entities by identity and rewrites only those whose content differs
(:func:`same_content`), so running jobs are never disturbed by a controller restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeAlias

from p4.v1 import p4runtime_pb2

Update: TypeAlias = p4runtime_pb2.Update
Entity: TypeAlias = p4runtime_pb2.Entity
# Update.INSERT / MODIFY / DELETE
UpdateType: TypeAlias = p4runtime_pb2.Update.Type.ValueType
EntityKey = tuple[object, ...]


def entity(table_entry: p4runtime_pb2.TableEntry | None = None,
           group: p4runtime_pb2.MulticastGroupEntry | None = None,
           clone: p4runtime_pb2.CloneSessionEntry | None = None) -> Entity:
    """Wrap one message in an Entity."""
    out = Entity()
    if table_entry is not None:
        out.table_entry.CopyFrom(table_entry)
    elif group is not None:
        out.packet_replication_engine_entry.multicast_group_entry.CopyFrom(group)
    elif clone is not None:
        out.packet_replication_engine_entry.clone_session_entry.CopyFrom(clone)
    return out


def multicast_group(group_id: int, replicas: Sequence[tuple[int, int]]) -> Entity:
    """A multicast group entity with (egress port, instance/rid) replicas."""
    group = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=group_id)
    for port, instance in replicas:
        group.replicas.add(egress_port=port, instance=instance)
    return entity(group=group)


def clone_session(session_id: int, replicas: Sequence[tuple[int, int]]) -> Entity:
    clone = p4runtime_pb2.CloneSessionEntry(session_id=session_id)
    for port, instance in replicas:
        clone.replicas.add(egress_port=port, instance=instance)
    return entity(clone=clone)


def update(kind: UpdateType, ent: Entity) -> Update:
    """An Update of ``kind`` (Update.INSERT / MODIFY / DELETE)."""
    return Update(type=kind, entity=ent)


def updates(kind: UpdateType, ents: Iterable[Entity]) -> list[Update]:
    return [update(kind, e) for e in ents]


def is_default_entry(ent: Entity) -> bool:
    return ent.WhichOneof("entity") == "table_entry" and ent.table_entry.is_default_action


def entity_key(ent: Entity) -> EntityKey:
    """The identity of an entity: what a MODIFY or DELETE names."""
    kind = ent.WhichOneof("entity")
    if kind == "table_entry":
        te = ent.table_entry
        if te.is_default_action:
            return ("default", te.table_id)
        matches = tuple(sorted(fm.SerializeToString(deterministic=True) for fm in te.match))
        return ("table", te.table_id, matches, te.priority)
    if kind == "packet_replication_engine_entry":
        pre = ent.packet_replication_engine_entry
        if pre.WhichOneof("type") == "multicast_group_entry":
            return ("mcast", pre.multicast_group_entry.multicast_group_id)
        return ("clone", pre.clone_session_entry.session_id)
    if kind == "action_profile_member":
        m = ent.action_profile_member
        return ("member", m.action_profile_id, m.member_id)
    if kind == "action_profile_group":
        g = ent.action_profile_group
        return ("group", g.action_profile_id, g.group_id)
    return (kind, ent.SerializeToString(deterministic=True))


def _content(ent: Entity) -> bytes:
    kind = ent.WhichOneof("entity")
    if kind == "table_entry":
        te = ent.table_entry
        return te.action.SerializeToString(deterministic=True)
    if kind == "packet_replication_engine_entry":
        pre = ent.packet_replication_engine_entry
        if pre.WhichOneof("type") == "multicast_group_entry":
            reps = pre.multicast_group_entry.replicas
        else:
            reps = pre.clone_session_entry.replicas
        return repr(sorted((r.egress_port, r.instance) for r in reps)).encode()
    if kind == "action_profile_group":
        g = ent.action_profile_group
        return repr(sorted((m.member_id, m.weight) for m in g.members)).encode()
    if kind == "action_profile_member":
        return ent.action_profile_member.action.SerializeToString(deterministic=True)
    return ent.SerializeToString(deterministic=True)


def same_content(a: Entity, b: Entity) -> bool:
    """True when two entities with the same identity carry the same configuration
    (counters, meters and replica order are ignored)."""
    return _content(a) == _content(b)


def read_requests(ents: Iterable[Entity]) -> list[Entity]:
    """Wildcard Read requests covering every table/group/profile kind used by ``ents``."""
    tables: set[int] = set()
    kinds: set[str] = set()
    profiles: set[tuple[str, int]] = set()
    for e in ents:
        kind = e.WhichOneof("entity")
        if kind == "table_entry":
            tables.add(e.table_entry.table_id)
        elif kind == "packet_replication_engine_entry":
            kinds.add(e.packet_replication_engine_entry.WhichOneof("type") or "")
        elif kind in ("action_profile_member", "action_profile_group"):
            profiles.add((kind, getattr(e, kind).action_profile_id))
    out = [wildcard_table(table_id) for table_id in sorted(tables)]
    out += [wildcard_pre(kind) for kind in sorted(kinds)]
    out += [wildcard_profile(kind, profile_id) for kind, profile_id in sorted(profiles)]
    return out


def wildcard_table(table_id: int, default: bool = False) -> Entity:
    """A Read request for every entry of a table (``default``: its default entry)."""
    req = Entity()
    req.table_entry.table_id = table_id
    if default:
        req.table_entry.is_default_action = True
    return req


def wildcard_pre(kind: str) -> Entity:
    """A Read request for every multicast group (``kind`` "multicast_group_entry") or
    every clone session (any other kind)."""
    req = Entity()
    if kind == "multicast_group_entry":
        req.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    else:
        req.packet_replication_engine_entry.clone_session_entry.session_id = 0
    return req


def wildcard_profile(kind: str, profile_id: int) -> Entity:
    """A Read request for every member (``kind`` "action_profile_member") or group
    ("action_profile_group") of an action profile."""
    req = Entity()
    getattr(req, kind).action_profile_id = profile_id
    return req


def write_order(kind: UpdateType, ents: Sequence[Entity]) -> list[list[Entity]]:
    """Batches in dependency order: members before groups before table entries for INSERT
    and MODIFY; the reverse for DELETE."""
    rank = {"action_profile_member": 0, "action_profile_group": 1,
            "packet_replication_engine_entry": 2, "table_entry": 3}
    buckets: dict[int, list[Entity]] = {}
    for e in ents:
        buckets.setdefault(rank.get(e.WhichOneof("entity") or "", 4), []).append(e)
    order = sorted(buckets)
    if kind == Update.DELETE:
        order.reverse()
    return [buckets[r] for r in order]
