"""Packet replication engine: multicast groups, BMv2-style nodes and clone sessions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from softswitch.engine.pre import PacketReplicationEngine
from softswitch.errors import TableError


def code(fn: Callable[..., object], *args: object, **kw: object) -> str:
    with pytest.raises(TableError) as err:
        fn(*args, **kw)
    return err.value.code


def test_group_replicas_in_bmv2_order() -> None:
    """P4Runtime replicas come out grouped by rid (ascending), ports ascending."""
    pre = PacketReplicationEngine()
    pre.insert_group(1, [(3, 1), (1, 2), (2, 1), (0, 2)])
    assert pre.replicas(1) == ((2, 1), (3, 1), (0, 2), (1, 2))
    assert pre.group_replicas(1) == ((3, 1), (1, 2), (2, 1), (0, 2))


def test_unknown_group_has_no_replicas() -> None:
    """Replicating to an unknown group yields nothing."""
    assert PacketReplicationEngine().replicas(9) == ()


def test_group_insert_modify_delete_codes() -> None:
    """Insert of an existing group, modify/delete of a missing one are rejected."""
    pre = PacketReplicationEngine()
    pre.insert_group(5, [(1, 0)])
    assert code(pre.insert_group, 5, [(2, 0)]) == "ALREADY_EXISTS"
    assert code(pre.modify_group, 6, [(2, 0)]) == "NOT_FOUND"
    assert code(pre.delete_group, 6) == "NOT_FOUND"
    pre.modify_group(5, [(4, 0), (2, 0)])
    assert pre.replicas(5) == ((2, 0), (4, 0))
    pre.delete_group(5)
    assert pre.replicas(5) == ()
    assert pre.groups() == []


def test_group_argument_checks() -> None:
    """Group id 0, ports out of range, bad rid and duplicate replicas are INVALID_ARGUMENT."""
    pre = PacketReplicationEngine(max_port=16)
    assert code(pre.insert_group, 0, [(1, 0)]) == "INVALID_ARGUMENT"
    assert code(pre.insert_group, 1, [(16, 0)]) == "INVALID_ARGUMENT"
    assert code(pre.insert_group, 1, [(-1, 0)]) == "INVALID_ARGUMENT"
    assert code(pre.insert_group, 1, [(1, 0x10000)]) == "INVALID_ARGUMENT"
    assert code(pre.insert_group, 1, [(1, 0), (1, 0)]) == "INVALID_ARGUMENT"
    assert pre.groups() == []


def test_set_group_upserts() -> None:
    """set_group creates or replaces."""
    pre = PacketReplicationEngine()
    pre.set_group(2, [(1, 0)])
    pre.set_group(2, [(3, 7)])
    assert pre.replicas(2) == ((3, 7),)


def test_cli_nodes_in_association_order() -> None:
    """STF/CLI nodes replicate node by node (association order), ports ascending."""
    pre = PacketReplicationEngine()
    pre.mc_mgrp_create(1)
    n1 = pre.mc_node_create(5, [3, 1])
    n2 = pre.mc_node_create(2, [2])
    pre.mc_node_associate(1, n1)
    pre.mc_node_associate(1, n2)
    assert pre.replicas(1) == ((1, 5), (3, 5), (2, 2))
    pre.mc_node_update(n1, [4])
    assert pre.replicas(1) == ((4, 5), (2, 2))
    pre.mc_node_dissociate(1, n1)
    assert pre.replicas(1) == ((2, 2),)
    pre.mc_node_destroy(n2)
    assert pre.replicas(1) == ()


def test_cli_node_errors() -> None:
    """Associating to a missing group, or an already associated node, is rejected."""
    pre = PacketReplicationEngine()
    n = pre.mc_node_create(0, [1])
    assert code(pre.mc_node_associate, 3, n) == "NOT_FOUND"
    pre.mc_mgrp_create(3)
    pre.mc_node_associate(3, n)
    assert code(pre.mc_node_associate, 3, n) == "ALREADY_EXISTS"
    assert code(pre.mc_node_update, 99, [1]) == "NOT_FOUND"
    assert code(pre.mc_node_create, 0, [600]) == "INVALID_ARGUMENT"


def test_mgrp_destroy_detaches_nodes() -> None:
    """Destroying a group keeps its CLI nodes, which can join another group."""
    pre = PacketReplicationEngine()
    pre.mc_mgrp_create(1)
    n = pre.mc_node_create(1, [6])
    pre.mc_node_associate(1, n)
    pre.mc_mgrp_destroy(1)
    pre.mc_mgrp_destroy(1)  # unknown group: no-op as in BMv2
    pre.mc_mgrp_create(2)
    pre.mc_node_associate(2, n)
    assert pre.replicas(2) == ((6, 1),)


def test_clone_session_single_port() -> None:
    """A bare port is one replica with rid 0; no truncation by default."""
    pre = PacketReplicationEngine()
    pre.set_clone_session(100, 4)
    s = pre.clone_session(100)
    assert s is not None
    assert s.replicas == ((4, 0),)
    assert s.truncate(b"\x01" * 100) == b"\x01" * 100


def test_clone_session_truncates() -> None:
    """packet_length_bytes cuts clones to that length."""
    pre = PacketReplicationEngine()
    pre.insert_clone_session(5, [(1, 1), (2, 2)], truncate=4, class_of_service=3)
    s = pre.clone_session(5)
    assert s is not None
    assert (s.replicas, s.class_of_service, s.packet_length_bytes) == (((1, 1), (2, 2)), 3, 4)
    assert s.truncate(bytes(range(10))) == b"\x00\x01\x02\x03"
    assert s.truncate(b"\xaa") == b"\xaa"


def test_clone_session_codes() -> None:
    """Clone session insert/modify/delete report P4Runtime codes."""
    pre = PacketReplicationEngine(max_port=8)
    pre.insert_clone_session(1, 2)
    assert code(pre.insert_clone_session, 1, 3) == "ALREADY_EXISTS"
    assert code(pre.modify_clone_session, 2, 3) == "NOT_FOUND"
    assert code(pre.delete_clone_session, 2) == "NOT_FOUND"
    assert code(pre.insert_clone_session, 3, 8) == "INVALID_ARGUMENT"
    pre.modify_clone_session(1, [(5, 9)])
    assert pre.clone_session(1).replicas == ((5, 9),)  # type: ignore[union-attr]
    pre.delete_clone_session(1)
    assert pre.clone_session(1) is None
    assert pre.clone_sessions() == []


def test_reset_forgets_everything() -> None:
    """reset() drops groups, nodes and sessions."""
    pre = PacketReplicationEngine()
    pre.insert_group(1, [(1, 1)])
    pre.set_clone_session(1, 1)
    pre.reset()
    assert pre.replicas(1) == () and pre.clone_session(1) is None and pre.groups() == []
