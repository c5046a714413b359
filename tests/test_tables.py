"""Tables, action profiles and action selectors of the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from softswitch.engine.externs import GREEN, RED, YELLOW, MeterConfig
from softswitch.engine.tables import (
    ActionCall,
    ActionProfile,
    ActionSelector,
    FieldMatch,
    KeyField,
    MatchKind,
    Table,
    TableEntry,
)
from softswitch.errors import TableError

FWD = "MyIngress.forward"
DROP = "MyIngress.drop"
PARAMS = {FWD: (9,), DROP: (), "NoAction": ()}


def fwd(port: int) -> ActionCall:
    return ActionCall(FWD, (port,))


def code(fn: Callable[..., object], *args: object) -> str:
    with pytest.raises(TableError) as err:
        fn(*args)
    return err.value.code


def exact_table(size: int = 16, **kw: Any) -> Table:
    keys = [KeyField("hdr.eth.dst", MatchKind.EXACT, 48), KeyField("port", MatchKind.EXACT, 9)]
    return Table("MyIngress.l2", keys, [FWD, DROP, "NoAction"], size, action_params=PARAMS, **kw)


def lpm_table(extra_exact: bool = False) -> Table:
    keys = [KeyField("hdr.ipv4.dstAddr", MatchKind.LPM, 32)]
    if extra_exact:
        keys.insert(0, KeyField("meta.vrf", MatchKind.EXACT, 8))
    return Table("MyIngress.ipv4_lpm", keys, [FWD, DROP, "NoAction"], 64, action_params=PARAMS)


def ternary_table() -> Table:
    keys = [
        KeyField("hdr.ipv4.dstAddr", MatchKind.TERNARY, 32),
        KeyField("hdr.tcp.dport", MatchKind.RANGE, 16),
    ]
    return Table("MyIngress.acl", keys, [FWD, DROP, "NoAction"], 64, action_params=PARAMS)


IP = 0x0A000001  # 10.0.0.1


# ----------------------------------------------------------------------------- exact


def test_exact_hit_and_miss() -> None:
    """Exact tables hit only on the full key."""
    t = exact_table()
    t.insert(TableEntry((FieldMatch(0xAABBCCDDEEFF), FieldMatch(1)), fwd(2)))
    assert t.strategy == "exact"
    hit = t.lookup((0xAABBCCDDEEFF, 1))
    assert hit is not None and hit.action == fwd(2)
    assert t.lookup((0xAABBCCDDEEFF, 2)) is None


def test_exact_duplicate_is_already_exists() -> None:
    """Inserting the same key twice is ALREADY_EXISTS."""
    t = exact_table()
    t.insert(TableEntry((FieldMatch(1), FieldMatch(1)), fwd(2)))
    assert code(t.insert, TableEntry((FieldMatch(1), FieldMatch(1)), fwd(3))) == "ALREADY_EXISTS"


def test_table_full_is_resource_exhausted() -> None:
    """A table holds at most ``size`` entries."""
    t = exact_table(size=2)
    t.insert(TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1)))
    t.insert(TableEntry((FieldMatch(2), FieldMatch(1)), fwd(1)))
    assert (
        code(t.insert, TableEntry((FieldMatch(3), FieldMatch(1)), fwd(1))) == "RESOURCE_EXHAUSTED"
    )


def test_modify_and_delete() -> None:
    """Modify replaces the action and keeps counters; delete removes; missing is NOT_FOUND."""
    t = exact_table()
    key = (FieldMatch(5), FieldMatch(0))
    t.insert(TableEntry(key, fwd(1)))
    e = t.lookup((5, 0))
    assert e is not None
    t.record_hit(e, 100)
    t.modify(TableEntry(key, ActionCall(DROP)))
    e = t.lookup((5, 0))
    assert e is not None and e.action == ActionCall(DROP) and (e.packets, e.bytes) == (1, 100)
    t.delete(TableEntry(key, None))
    assert t.lookup((5, 0)) is None
    assert code(t.delete, TableEntry(key, None)) == "NOT_FOUND"
    assert code(t.modify, TableEntry(key, fwd(1))) == "NOT_FOUND"


def test_action_validation() -> None:
    """Unknown action, wrong arity, too-wide argument and @defaultonly are INVALID_ARGUMENT."""
    t = exact_table(defaultonly=[DROP])
    key = (FieldMatch(1), FieldMatch(1))
    assert code(t.insert, TableEntry(key, ActionCall("MyIngress.other"))) == "INVALID_ARGUMENT"
    assert code(t.insert, TableEntry(key, ActionCall(FWD, ()))) == "INVALID_ARGUMENT"
    assert code(t.insert, TableEntry(key, fwd(512))) == "INVALID_ARGUMENT"
    assert code(t.insert, TableEntry(key, ActionCall(DROP))) == "INVALID_ARGUMENT"
    assert len(t) == 0


def test_key_validation() -> None:
    """Wrong number of fields, too-wide value or missing exact field is INVALID_ARGUMENT."""
    t = exact_table()
    assert code(t.insert, TableEntry((FieldMatch(1),), fwd(1))) == "INVALID_ARGUMENT"
    assert (
        code(t.insert, TableEntry((FieldMatch(1), FieldMatch(512)), fwd(1))) == "INVALID_ARGUMENT"
    )
    assert code(t.insert, TableEntry((FieldMatch(1), None), fwd(1))) == "INVALID_ARGUMENT"
    assert code(t.insert, TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1), priority=3)) == (
        "INVALID_ARGUMENT"
    )


def test_default_action_set_and_reset() -> None:
    """set_default/reset_default change and restore the miss action."""
    t = exact_table(default_action=ActionCall(DROP))
    t.set_default(fwd(7))
    assert t.default_action == fwd(7)
    t.reset_default()
    assert t.default_action == ActionCall(DROP)
    assert code(t.set_default, ActionCall("MyIngress.other")) == "INVALID_ARGUMENT"


def test_const_default_action_is_permission_denied() -> None:
    """A const default action cannot be changed."""
    t = exact_table(default_action=ActionCall(DROP), const_default_action=True)
    assert code(t.set_default, fwd(1)) == "PERMISSION_DENIED"
    assert t.default_action == ActionCall(DROP)


def test_tableonly_action_cannot_be_default() -> None:
    """An @tableonly action is rejected as default action."""
    t = exact_table(tableonly=[FWD])
    assert code(t.set_default, fwd(1)) == "INVALID_ARGUMENT"


def test_const_entries_block_writes() -> None:
    """Tables with const entries reject runtime writes but accept add_const_entry."""
    t = exact_table(has_const_entries=True)
    key = (FieldMatch(1), FieldMatch(1))
    t.add_const_entry(TableEntry(key, fwd(3)))
    e = t.lookup((1, 1))
    assert e is not None and e.is_const and e.action == fwd(3)
    assert code(t.insert, TableEntry((FieldMatch(2), FieldMatch(1)), fwd(3))) == "PERMISSION_DENIED"
    assert code(t.modify, TableEntry(key, fwd(4))) == "PERMISSION_DENIED"
    assert code(t.delete, TableEntry(key, None)) == "PERMISSION_DENIED"


def test_keyless_table_always_misses() -> None:
    """A table without keys never hits and takes no entries."""
    t = Table("MyIngress.t", [], [DROP], default_action=ActionCall(DROP))
    assert t.lookup(()) is None
    assert code(t.insert, TableEntry((), ActionCall(DROP))) == "INVALID_ARGUMENT"


def test_find_and_entries() -> None:
    """find() returns the stored entry; entries() lists all in insertion order."""
    t = exact_table()
    a = TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1))
    b = TableEntry((FieldMatch(2), FieldMatch(1)), fwd(2))
    t.insert(a)
    t.insert(b)
    assert t.find((FieldMatch(2), FieldMatch(1))) is b
    assert t.find((FieldMatch(3), FieldMatch(1))) is None
    assert t.entries() == [a, b]


def test_clear_keeps_const_entries() -> None:
    """clear() removes runtime entries only."""
    t = exact_table()
    t.add_const_entry(TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1)))
    t.insert(TableEntry((FieldMatch(2), FieldMatch(1)), fwd(2)))
    t.clear()
    assert t.lookup((1, 1)) is not None
    assert t.lookup((2, 1)) is None
    assert len(t) == 1


# ----------------------------------------------------------------------------- lpm


def test_lpm_longest_prefix_wins() -> None:
    """The longest matching prefix wins regardless of insertion order."""
    t = lpm_table()
    t.insert(TableEntry((FieldMatch(0x0A000000, prefix_len=8),), fwd(1)))
    t.insert(TableEntry((FieldMatch(0x0A000000, prefix_len=24),), fwd(3)))
    t.insert(TableEntry((FieldMatch(0x0A000000, prefix_len=16),), fwd(2)))
    t.insert(TableEntry((None,), fwd(9)))
    assert t.strategy == "lpm"
    assert t.lookup((IP,)).action == fwd(3)  # type: ignore[union-attr]
    assert t.lookup((0x0A000101,)).action == fwd(2)  # type: ignore[union-attr]
    assert t.lookup((0x0A010101,)).action == fwd(1)  # type: ignore[union-attr]
    assert t.lookup((0x0B000000,)).action == fwd(9)  # type: ignore[union-attr]


def test_lpm_delete_falls_back_to_shorter() -> None:
    """Deleting the longest prefix exposes the next one."""
    t = lpm_table()
    t.insert(TableEntry((FieldMatch(0x0A000000, prefix_len=8),), fwd(1)))
    t.insert(TableEntry((FieldMatch(IP, prefix_len=32),), fwd(4)))
    assert t.lookup((IP,)).action == fwd(4)  # type: ignore[union-attr]
    t.delete(TableEntry((FieldMatch(IP, prefix_len=32),), None))
    assert t.lookup((IP,)).action == fwd(1)  # type: ignore[union-attr]


def test_lpm_non_canonical_value_rejected() -> None:
    """Value bits beyond the prefix length are INVALID_ARGUMENT."""
    t = lpm_table()
    assert (
        code(t.insert, TableEntry((FieldMatch(IP, prefix_len=24),), fwd(1))) == "INVALID_ARGUMENT"
    )
    assert code(t.insert, TableEntry((FieldMatch(0, prefix_len=33),), fwd(1))) == "INVALID_ARGUMENT"


def test_lpm_zero_prefix_equals_wildcard() -> None:
    """A /0 prefix is the same entry as a don't-care."""
    t = lpm_table()
    t.insert(TableEntry((FieldMatch(0, prefix_len=0),), fwd(1)))
    assert code(t.insert, TableEntry((None,), fwd(2))) == "ALREADY_EXISTS"
    assert t.entries()[0].matches == (None,)


def test_lpm_with_exact_key() -> None:
    """LPM tables with extra exact keys match the exact part first."""
    t = lpm_table(extra_exact=True)
    t.insert(TableEntry((FieldMatch(1), FieldMatch(0x0A000000, prefix_len=8)), fwd(1)))
    t.insert(TableEntry((FieldMatch(2), FieldMatch(0x0A000000, prefix_len=24)), fwd(2)))
    assert t.lookup((1, IP)).action == fwd(1)  # type: ignore[union-attr]
    assert t.lookup((2, IP)).action == fwd(2)  # type: ignore[union-attr]
    assert t.lookup((3, IP)) is None


# ----------------------------------------------------------------------------- ternary


def test_ternary_highest_priority_wins() -> None:
    """Larger P4Runtime priority wins among matching entries."""
    t = ternary_table()
    t.insert(TableEntry((FieldMatch(0x0A000000, 0xFF000000), None), fwd(1), priority=10))
    t.insert(TableEntry((FieldMatch(IP, 0xFFFFFFFF), None), fwd(2), priority=20))
    t.insert(TableEntry((None, None), fwd(3), priority=1))
    assert t.strategy == "list"
    assert t.lookup((IP, 80)).action == fwd(2)  # type: ignore[union-attr]
    assert t.lookup((0x0A000002, 80)).action == fwd(1)  # type: ignore[union-attr]
    assert t.lookup((0x0B000002, 80)).action == fwd(3)  # type: ignore[union-attr]


def test_ternary_equal_priority_first_inserted_wins() -> None:
    """Equal priorities resolve to the oldest entry (lowest BMv2 handle)."""
    t = ternary_table()
    t.insert(TableEntry((FieldMatch(0x0A000000, 0xFF000000), None), fwd(1), priority=5))
    t.insert(TableEntry((FieldMatch(IP, 0xFFFFFFFF), None), fwd(2), priority=5))
    assert t.lookup((IP, 0)).action == fwd(1)  # type: ignore[union-attr]


def test_ternary_freed_handle_is_reused() -> None:
    """After a delete, the next entry takes the freed (lower) handle, as in BMv2."""
    t = ternary_table()
    a = (FieldMatch(0x01000000, 0xFF000000), None)
    t.insert(TableEntry(a, fwd(1), priority=5))
    t.insert(TableEntry((FieldMatch(IP, 0xFFFFFFFF), None), fwd(2), priority=5))
    t.delete(TableEntry(a, None, priority=5))
    t.insert(TableEntry((FieldMatch(0x0A000000, 0xFF000000), None), fwd(3), priority=5))
    assert t.lookup((IP, 0)).action == fwd(3)  # type: ignore[union-attr]


def test_range_match() -> None:
    """Range fields match inclusive bounds."""
    t = ternary_table()
    t.insert(TableEntry((None, FieldMatch(1000, high=2000)), fwd(1), priority=2))
    t.insert(TableEntry((None, FieldMatch(1500, high=1500)), fwd(2), priority=3))
    assert t.lookup((IP, 1000)).action == fwd(1)  # type: ignore[union-attr]
    assert t.lookup((IP, 2000)).action == fwd(1)  # type: ignore[union-attr]
    assert t.lookup((IP, 1500)).action == fwd(2)  # type: ignore[union-attr]
    assert t.lookup((IP, 2001)) is None
    assert t.lookup((IP, 999)) is None


def test_priority_rules() -> None:
    """Priority tables need priority > 0; same key with other priority is a new entry."""
    t = ternary_table()
    key = (FieldMatch(IP, 0xFFFFFFFF), None)
    assert code(t.insert, TableEntry(key, fwd(1))) == "INVALID_ARGUMENT"
    t.insert(TableEntry(key, fwd(1), priority=1))
    t.insert(TableEntry(key, fwd(2), priority=2))
    assert code(t.insert, TableEntry(key, fwd(3), priority=2)) == "ALREADY_EXISTS"
    assert t.lookup((IP, 0)).action == fwd(2)  # type: ignore[union-attr]
    assert t.find(key, 1) is not None


def test_ternary_non_canonical_rejected() -> None:
    """Value bits outside the mask, or low > high, are INVALID_ARGUMENT."""
    t = ternary_table()
    assert code(t.insert, TableEntry((FieldMatch(IP, 0xFF000000), None), fwd(1), priority=1)) == (
        "INVALID_ARGUMENT"
    )
    assert code(t.insert, TableEntry((None, FieldMatch(9, high=3)), fwd(1), priority=1)) == (
        "INVALID_ARGUMENT"
    )


def test_ternary_zero_mask_and_full_range_are_wildcards() -> None:
    """mask 0 and the full range normalise to don't-care."""
    t = ternary_table()
    t.insert(TableEntry((FieldMatch(0, 0), FieldMatch(0, high=0xFFFF)), fwd(1), priority=1))
    assert t.entries()[0].matches == (None, None)
    assert t.find((None, None), 1) is not None


def test_optional_match() -> None:
    """Optional fields match exactly or are wildcards."""
    keys = [KeyField("a", MatchKind.OPTIONAL, 8), KeyField("b", MatchKind.OPTIONAL, 8)]
    t = Table("t", keys, [FWD], action_params=PARAMS)
    t.insert(TableEntry((FieldMatch(1), None), fwd(1), priority=1))
    t.insert(TableEntry((FieldMatch(1), FieldMatch(2)), fwd(2), priority=2))
    assert t.lookup((1, 2)).action == fwd(2)  # type: ignore[union-attr]
    assert t.lookup((1, 3)).action == fwd(1)  # type: ignore[union-attr]
    assert t.lookup((2, 2)) is None


def test_const_entries_textual_order() -> None:
    """Const entries with priority 0 in a ternary table: the first one listed wins."""
    t = ternary_table()
    t.has_const_entries = True
    t.add_const_entry(TableEntry((FieldMatch(0x0A000000, 0xFF000000), None), fwd(1)))
    t.add_const_entry(TableEntry((FieldMatch(IP, 0xFFFFFFFF), None), fwd(2)))
    assert t.lookup((IP, 0)).action == fwd(1)  # type: ignore[union-attr]


# ------------------------------------------------------------------ counters, meters, timeouts


def test_direct_counter_and_idle_time() -> None:
    """record_hit counts packets/bytes and stamps the hit time when timeouts are on."""
    t = exact_table(support_timeout=True)
    t.insert(TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1), idle_timeout_ns=1000))
    e = t.lookup((1, 1))
    assert e is not None
    t.record_hit(e, 60, now_ns=500)
    t.record_hit(e, 40, now_ns=700)
    assert (e.packets, e.bytes, e.last_hit_ns) == (2, 100, 700)
    assert t.expired(1699) == []
    assert t.expired(1700) == [e]


def test_idle_timeout_needs_support() -> None:
    """An idle timeout on a table without support_timeout is INVALID_ARGUMENT."""
    t = exact_table()
    entry = TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1), idle_timeout_ns=10)
    assert code(t.insert, entry) == "INVALID_ARGUMENT"
    assert t.expired(100) == []


def test_direct_meter() -> None:
    """An entry's direct meter colours packets; no config means green."""
    t = exact_table(direct_meter_kind="packets")
    t.insert(TableEntry((FieldMatch(1), FieldMatch(1)), fwd(1), meter=MeterConfig(1, 1, 2, 2)))
    t.insert(TableEntry((FieldMatch(2), FieldMatch(1)), fwd(1)))
    e = t.lookup((1, 1))
    assert e is not None
    assert [t.execute_meter(e, 64, 0) for _ in range(3)] == [GREEN, YELLOW, RED]
    e2 = t.lookup((2, 1))
    assert e2 is not None and t.execute_meter(e2, 64, 0) == GREEN
    t.set_meter_config(e2, MeterConfig(0, 0, 0, 0))
    assert t.execute_meter(e2, 64, 0) == RED


# ----------------------------------------------------------------------------- profiles


def test_action_profile_members() -> None:
    """Indirect entries point at members; missing members are NOT_FOUND; in-use ones stay."""
    prof = ActionProfile("MyIngress.ap", 4, action_params=PARAMS)
    t = exact_table(implementation=prof)
    prof.insert_member(1, fwd(5))
    key = (FieldMatch(1), FieldMatch(1))
    assert code(t.insert, TableEntry(key, None, member_id=2)) == "NOT_FOUND"
    assert code(t.insert, TableEntry(key, fwd(1))) == "INVALID_ARGUMENT"
    t.insert(TableEntry(key, None, member_id=1))
    e = t.lookup((1, 1))
    assert e is not None and t.action_for(e) == fwd(5)
    prof.modify_member(1, fwd(6))
    assert t.action_for(e) == fwd(6)
    assert code(prof.delete_member, 1) == "FAILED_PRECONDITION"
    t.delete(TableEntry(key, None))
    prof.delete_member(1)
    assert code(prof.delete_member, 1) == "NOT_FOUND"


def test_action_profile_errors() -> None:
    """Duplicate member, full profile and bad member action are rejected."""
    prof = ActionProfile("ap", 1, action_params=PARAMS)
    prof.insert_member(1, fwd(1))
    assert code(prof.insert_member, 1, fwd(1)) == "ALREADY_EXISTS"
    assert code(prof.insert_member, 2, fwd(1)) == "RESOURCE_EXHAUSTED"
    assert code(prof.modify_member, 1, ActionCall(FWD, (1, 2))) == "INVALID_ARGUMENT"
    assert code(prof.modify_member, 9, fwd(1)) == "NOT_FOUND"


def test_action_selector_selects_by_hash() -> None:
    """A group picks member slot hash % slots, members ordered by creation, weights expand."""
    sel = ActionSelector("MyIngress.as", 8, "crc16", 16, action_params=PARAMS)
    for mid, port in ((30, 3), (10, 1), (20, 2)):
        sel.insert_member(mid, fwd(port))
    sel.insert_group(7, [(10, 1), (30, 1), (20, 2)])
    # creation order 30, 10, 20 -> slots [p3, p1, p2, p2]
    assert [sel.select(7, h) for h in range(5)] == [fwd(3), fwd(1), fwd(2), fwd(2), fwd(3)]
    t = exact_table(implementation=sel)
    t.insert(TableEntry((FieldMatch(1), FieldMatch(1)), None, group_id=7))
    e = t.lookup((1, 1))
    assert e is not None and t.action_for(e, h=1) == fwd(1)


def test_action_selector_group_errors() -> None:
    """Group operations report P4Runtime codes; used groups and members are protected."""
    sel = ActionSelector("as", 4, max_group_size=2, action_params=PARAMS)
    sel.insert_member(1, fwd(1))
    assert code(sel.insert_group, 1, [(2, 1)]) == "NOT_FOUND"
    assert code(sel.insert_group, 1, [(1, 0)]) == "INVALID_ARGUMENT"
    assert code(sel.insert_group, 1, [(1, 3)]) == "RESOURCE_EXHAUSTED"
    sel.insert_group(1, [(1, 1)])
    assert code(sel.insert_group, 1, []) == "ALREADY_EXISTS"
    assert code(sel.delete_member, 1) == "FAILED_PRECONDITION"
    assert code(sel.modify_group, 2, []) == "NOT_FOUND"
    t = exact_table(implementation=sel)
    t.insert(TableEntry((FieldMatch(1), FieldMatch(1)), None, group_id=1))
    assert code(sel.delete_group, 1) == "FAILED_PRECONDITION"
    t.delete(TableEntry((FieldMatch(1), FieldMatch(1)), None))
    sel.modify_group(1, [])
    assert sel.select(1, 0) is None
    sel.delete_group(1)
    sel.delete_member(1)
    assert code(sel.delete_group, 1) == "NOT_FOUND"


def test_selector_hash_uses_algorithm() -> None:
    """selector_hash hashes the packed selector fields with the selector's algorithm."""
    sel = ActionSelector("as", 4, "crc32", 16)
    assert sel.selector_hash(b"123456789") == 0xCBF43926
