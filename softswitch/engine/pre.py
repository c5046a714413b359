"""Packet replication engine: multicast groups and clone (mirroring) sessions.

Two ways to program multicast, both ending in the same replica lists:

* P4Runtime style: a group is a list of ``(egress_port, rid)`` replicas
  (:meth:`PacketReplicationEngine.insert_group` / ``modify_group`` / ``delete_group`` /
  ``set_group``). BMv2's P4Runtime server turns such a group into one PRE node per distinct
  rid (ascending rid) and BMv2 emits each node's ports in ascending port order; replicas
  come out in that order here too.
* BMv2 ``simple_switch_CLI`` / STF style: nodes ``(rid, ports)`` created with
  :meth:`mc_node_create` and attached to groups with :meth:`mc_node_associate`; replicas
  come out node by node in association order, ports ascending within a node.

Clone sessions map a session id to replicas (a single port is a one-replica list), a class
of service and a truncation length (0 = no truncation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from softswitch.errors import TableError

MAX_RID = 0xFFFF

#: A clone session's replicas: ``(egress_port, rid)`` pairs, or one port (rid 0).
CloneReplicas: TypeAlias = Sequence[tuple[int, int]] | int


@dataclass
class CloneSession:
    """One clone session: where clones go and how long they may be."""

    session_id: int
    replicas: tuple[tuple[int, int], ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0  # 0: do not truncate

    def truncate(self, frame: bytes) -> bytes:
        """``frame`` cut to ``packet_length_bytes`` when truncation is configured."""
        n = self.packet_length_bytes
        return frame[:n] if n and len(frame) > n else frame


@dataclass
class _Node:
    rid: int
    ports: tuple[int, ...]  # ascending, no duplicates
    group: int | None = None
    owned: bool = False  # created for a P4Runtime-style group (destroyed with it)


@dataclass
class _Group:
    # P4Runtime replicas as given (None for a group built from CLI nodes)
    replicas: tuple[tuple[int, int], ...] | None = None
    nodes: list[int] = field(default_factory=list)  # node handles, association order


class PacketReplicationEngine:
    """Multicast groups and clone sessions of one switch."""

    def __init__(self, max_port: int = 511) -> None:
        # valid egress ports for replicas: 0 .. max_port - 1 (511 is v1model's drop port)
        self.max_port = max_port
        self._groups: dict[int, _Group] = {}
        self._expanded: dict[int, tuple[tuple[int, int], ...]] = {}
        self._nodes: dict[int, _Node] = {}
        self._next_node = 0
        self._free_nodes: list[int] = []
        self._sessions: dict[int, CloneSession] = {}
        # called after every change the data plane can see (the C engine's mirror)
        self._listeners: list[Callable[[PacketReplicationEngine], None]] = []

    def add_listener(self, fn: Callable[[PacketReplicationEngine], None]) -> None:
        """Call ``fn(self)`` after each change of a group or clone session."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in self._listeners:
            fn(self)

    # ------------------------------------------------------------------ checks

    def _check_port(self, port: int) -> None:
        if not 0 <= port < self.max_port:
            raise TableError(
                "INVALID_ARGUMENT", f"egress port {port} out of range [0, {self.max_port})"
            )

    def _check_replicas(self, what: str, replicas: Sequence[tuple[int, int]]) -> None:
        seen: set[tuple[int, int]] = set()
        for port, rid in replicas:
            self._check_port(port)
            if not 0 <= rid <= MAX_RID:
                raise TableError("INVALID_ARGUMENT", f"{what}: instance {rid} out of range")
            if (port, rid) in seen:
                raise TableError("INVALID_ARGUMENT", f"{what}: duplicate replica {(port, rid)}")
            seen.add((port, rid))

    @staticmethod
    def _check_group_id(gid: int) -> None:
        if gid <= 0 or gid > 0xFFFF:
            raise TableError("INVALID_ARGUMENT", f"multicast group id {gid} out of range")

    # ------------------------------------------------------------------ P4Runtime style

    def insert_group(self, gid: int, replicas: Sequence[tuple[int, int]]) -> None:
        """Create group ``gid``; ALREADY_EXISTS if it exists."""
        self._check_group_id(gid)
        if gid in self._groups:
            raise TableError("ALREADY_EXISTS", f"multicast group {gid} already exists")
        self._check_replicas(f"multicast group {gid}", replicas)
        self._store(gid, replicas)

    def modify_group(self, gid: int, replicas: Sequence[tuple[int, int]]) -> None:
        """Replace the replicas of group ``gid``; NOT_FOUND if it does not exist."""
        self._check_group_id(gid)
        if gid not in self._groups:
            raise TableError("NOT_FOUND", f"multicast group {gid} does not exist")
        self._check_replicas(f"multicast group {gid}", replicas)
        self._drop_nodes(gid)
        self._store(gid, replicas)

    def set_group(self, gid: int, replicas: Sequence[tuple[int, int]]) -> None:
        """Create or replace group ``gid``."""
        if gid in self._groups:
            self.modify_group(gid, replicas)
        else:
            self.insert_group(gid, replicas)

    def delete_group(self, gid: int) -> None:
        """Remove group ``gid``; NOT_FOUND if it does not exist."""
        self._check_group_id(gid)
        if gid not in self._groups:
            raise TableError("NOT_FOUND", f"multicast group {gid} does not exist")
        self._drop_nodes(gid)
        del self._groups[gid]
        del self._expanded[gid]
        self._changed()

    def group_replicas(self, gid: int) -> tuple[tuple[int, int], ...] | None:
        """The replicas of ``gid`` as the control plane wrote them (``None``: no group)."""
        group = self._groups.get(gid)
        if group is None:
            return None
        if group.replicas is not None:
            return group.replicas
        return self._expanded[gid]

    def groups(self) -> list[int]:
        """Ids of all multicast groups, ascending."""
        return sorted(self._groups)

    def _store(self, gid: int, replicas: Sequence[tuple[int, int]]) -> None:
        ports_by_rid: dict[int, set[int]] = {}
        for port, rid in replicas:
            ports_by_rid.setdefault(rid, set()).add(port)
        group = _Group(replicas=tuple((p, r) for p, r in replicas))
        self._groups[gid] = group
        for rid in sorted(ports_by_rid):
            handle = self._new_node(rid, ports_by_rid[rid])
            self._nodes[handle].group = gid
            self._nodes[handle].owned = True
            group.nodes.append(handle)
        self._expand(gid)

    def _drop_nodes(self, gid: int) -> None:
        """Destroy the nodes a P4Runtime-style group created (CLI nodes are only detached)."""
        group = self._groups[gid]
        for handle in group.nodes:
            if self._nodes[handle].owned:
                del self._nodes[handle]
                self._free_nodes.append(handle)
            else:
                self._nodes[handle].group = None
        group.nodes = []

    # ------------------------------------------------------------------ hot path

    def replicas(self, gid: int) -> tuple[tuple[int, int], ...]:
        """``(egress_port, rid)`` copies for group ``gid`` in BMv2 order (empty if unknown)."""
        return self._expanded.get(gid, ())

    def clone_session(self, sid: int) -> CloneSession | None:
        """The clone session ``sid`` or ``None`` (BMv2 then makes no clone)."""
        return self._sessions.get(sid)

    def _expand(self, gid: int) -> None:
        out: list[tuple[int, int]] = []
        for handle in self._groups[gid].nodes:
            node = self._nodes[handle]
            out.extend((port, node.rid) for port in node.ports)
        self._expanded[gid] = tuple(out)
        self._changed()

    # ------------------------------------------------------------------ BMv2 CLI style

    def _new_node(self, rid: int, ports: Iterable[int]) -> int:
        if self._free_nodes:
            self._free_nodes.sort()
            handle = self._free_nodes.pop(0)
        else:
            handle = self._next_node
            self._next_node += 1
        self._nodes[handle] = _Node(rid, tuple(sorted(set(ports))))
        return handle

    def mc_mgrp_create(self, gid: int) -> None:
        """Create an empty group (no-op when it exists, as BMv2)."""
        self._check_group_id(gid)
        if gid not in self._groups:
            self._groups[gid] = _Group()
            self._expanded[gid] = ()
            self._changed()

    def mc_mgrp_destroy(self, gid: int) -> None:
        """Destroy a group, detaching its nodes (no-op when unknown, as BMv2)."""
        if gid in self._groups:
            self.delete_group(gid)

    def mc_node_create(self, rid: int, ports: Iterable[int]) -> int:
        """Create a node replicating to ``ports`` with instance ``rid``; returns its handle."""
        ports = list(ports)
        for port in ports:
            self._check_port(port)
        if not 0 <= rid <= MAX_RID:
            raise TableError("INVALID_ARGUMENT", f"instance {rid} out of range")
        return self._new_node(rid, ports)

    def _node(self, handle: int) -> _Node:
        node = self._nodes.get(handle)
        if node is None:
            raise TableError("NOT_FOUND", f"no multicast node with handle {handle}")
        return node

    def mc_node_update(self, handle: int, ports: Iterable[int]) -> None:
        """Replace the ports of a node."""
        node = self._node(handle)
        ports = list(ports)
        for port in ports:
            self._check_port(port)
        node.ports = tuple(sorted(set(ports)))
        if node.group is not None:
            self._expand(node.group)

    def mc_node_associate(self, gid: int, handle: int) -> None:
        """Append node ``handle`` to group ``gid``."""
        node = self._node(handle)
        group = self._groups.get(gid)
        if group is None:
            raise TableError("NOT_FOUND", f"multicast group {gid} does not exist")
        if node.group is not None:
            raise TableError("ALREADY_EXISTS", f"node {handle} is already associated")
        group.nodes.append(handle)
        group.replicas = None
        node.group = gid
        self._expand(gid)

    def mc_node_dissociate(self, gid: int, handle: int) -> None:
        """Detach node ``handle`` from group ``gid``."""
        node = self._node(handle)
        if node.group != gid:
            raise TableError("NOT_FOUND", f"node {handle} is not in group {gid}")
        group = self._groups[gid]
        group.nodes.remove(handle)
        group.replicas = None
        node.group = None
        self._expand(gid)

    def mc_node_destroy(self, handle: int) -> None:
        """Destroy a node, detaching it first if needed."""
        node = self._node(handle)
        if node.group is not None:
            self.mc_node_dissociate(node.group, handle)
        del self._nodes[handle]
        self._free_nodes.append(handle)

    # ------------------------------------------------------------------ clone sessions

    def _session(self, sid: int, replicas: CloneReplicas, truncate: int,
                 class_of_service: int) -> CloneSession:
        if sid < 0:
            raise TableError("INVALID_ARGUMENT", f"clone session id {sid} out of range")
        reps = [(replicas, 0)] if isinstance(replicas, int) else list(replicas)
        self._check_replicas(f"clone session {sid}", reps)
        if truncate < 0:
            raise TableError("INVALID_ARGUMENT", f"clone session {sid}: negative truncation")
        return CloneSession(sid, tuple(reps), class_of_service, truncate)

    def insert_clone_session(self, sid: int, replicas: CloneReplicas, truncate: int = 0,
                             class_of_service: int = 0) -> None:
        """Create session ``sid``; ALREADY_EXISTS if it exists."""
        if sid in self._sessions:
            raise TableError("ALREADY_EXISTS", f"clone session {sid} already exists")
        self.set_clone_session(sid, replicas, truncate, class_of_service)

    def modify_clone_session(self, sid: int, replicas: CloneReplicas, truncate: int = 0,
                             class_of_service: int = 0) -> None:
        """Replace session ``sid``; NOT_FOUND if it does not exist."""
        if sid not in self._sessions:
            raise TableError("NOT_FOUND", f"clone session {sid} does not exist")
        self.set_clone_session(sid, replicas, truncate, class_of_service)

    def set_clone_session(self, sid: int, replicas: CloneReplicas, truncate: int = 0,
                          class_of_service: int = 0) -> None:
        """Create or replace session ``sid`` (a bare port means one replica with rid 0)."""
        self._sessions[sid] = self._session(sid, replicas, truncate, class_of_service)
        self._changed()

    def delete_clone_session(self, sid: int) -> None:
        """Remove session ``sid``; NOT_FOUND if it does not exist."""
        if self._sessions.pop(sid, None) is None:
            raise TableError("NOT_FOUND", f"clone session {sid} does not exist")
        self._changed()

    def clone_sessions(self) -> list[CloneSession]:
        """All clone sessions, by id."""
        return [self._sessions[s] for s in sorted(self._sessions)]

    def reset(self) -> None:
        """Forget every group, node and session."""
        self._groups.clear()
        self._expanded.clear()
        self._nodes.clear()
        self._next_node = 0
        self._free_nodes = []
        self._sessions.clear()
        self._changed()
