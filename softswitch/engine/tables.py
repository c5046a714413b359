"""Match-action tables, action profiles and action selectors (run-time state).

A :class:`Table` validates control-plane writes the way BMv2's P4Runtime server does and
answers data-plane look-ups through a strategy chosen once per table:

* only exact keys: one dict keyed by the key tuple;
* one LPM key (other keys exact): one dict per prefix length, probed longest first;
* anything else (ternary / range / optional): a list sorted by priority, larger P4Runtime
  priority first; equal priorities resolve to the entry with the lowest BMv2 entry handle
  (handles are allocated lowest-free, so normally the oldest entry wins).

Entries are identified by their normalised matches plus priority, as in P4Runtime. Rejected
operations raise :class:`softswitch.errors.TableError` with a P4Runtime status name.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from softswitch.engine.externs import GREEN, MeterCell, MeterConfig, hash_value
from softswitch.errors import TableError

__all__ = [
    "MatchKind",
    "KeyField",
    "FieldMatch",
    "ActionCall",
    "TableEntry",
    "MeterConfig",
    "ActionProfile",
    "ActionSelector",
    "Table",
]


class MatchKind(enum.StrEnum):
    EXACT = "exact"
    LPM = "lpm"
    TERNARY = "ternary"
    RANGE = "range"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class KeyField:
    """One key element of a table (selector fields of an action selector are not keys)."""

    name: str
    match_kind: MatchKind
    width: int


@dataclass(frozen=True)
class FieldMatch:
    """How one key field of an entry matches; ``None`` in an entry means don't care.

    exact/optional: ``value``; ternary: ``value``/``mask``; lpm: ``value``/``prefix_len``;
    range: ``value`` = low, ``high`` = high (inclusive).
    """

    value: int = 0
    mask: int | None = None
    prefix_len: int | None = None
    high: int | None = None


@dataclass(frozen=True)
class ActionCall:
    name: str
    args: tuple[int, ...] = ()


@dataclass
class TableEntry:
    matches: tuple[FieldMatch | None, ...]
    action: ActionCall | None
    priority: int = 0
    member_id: int | None = None
    group_id: int | None = None
    packets: int = 0
    bytes: int = 0
    meter: MeterConfig | None = None
    idle_timeout_ns: int = 0
    is_const: bool = False
    # run-time bookkeeping (not part of the entry's identity)
    last_hit_ns: int = field(default=0, compare=False)
    meter_state: MeterCell | None = field(default=None, compare=False, repr=False)
    handle: int = field(default=-1, compare=False, repr=False)


NO_ACTION = ActionCall("NoAction", ())

_PRIORITY_KINDS = (MatchKind.TERNARY, MatchKind.RANGE, MatchKind.OPTIONAL)


class _HandleAllocator:
    """Lowest-free integer handles, as BMv2's ``HandleMgr`` gives them."""

    __slots__ = ("_next", "_free")

    def __init__(self) -> None:
        self._next = 0
        self._free: list[int] = []

    def get(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        h = self._next
        self._next += 1
        return h

    def release(self, h: int) -> None:
        heapq.heappush(self._free, h)

    def clear(self) -> None:
        self._next = 0
        self._free = []


def _ternary_field(where: str, fm: FieldMatch, full: int) -> FieldMatch | None:
    """A ternary match: the mask fits the field and covers the value; mask 0 matches
    anything (None)."""
    mask = full if fm.mask is None else fm.mask
    if mask < 0 or mask > full:
        raise TableError("INVALID_ARGUMENT", f"{where}: mask {mask:#x} too wide")
    if fm.value & ~mask:
        raise TableError(
            "INVALID_ARGUMENT",
            f"{where}: value {fm.value:#x} has bits outside mask {mask:#x}",
        )
    return None if mask == 0 else FieldMatch(fm.value, mask)


def _lpm_field(where: str, fm: FieldMatch, w: int) -> FieldMatch | None:
    """An LPM match: a prefix length within the field and no value bits beyond it;
    /0 matches anything (None)."""
    full = (1 << w) - 1
    plen = w if fm.prefix_len is None else fm.prefix_len
    if not 0 <= plen <= w:
        raise TableError("INVALID_ARGUMENT", f"{where}: prefix length {plen} invalid")
    pmask = full ^ ((1 << (w - plen)) - 1)
    if fm.value & ~pmask:
        raise TableError(
            "INVALID_ARGUMENT", f"{where}: value {fm.value:#x} has bits beyond /{plen}"
        )
    return None if plen == 0 else FieldMatch(fm.value, prefix_len=plen)


def _range_field(where: str, fm: FieldMatch, full: int) -> FieldMatch | None:
    """A range match: low <= high, both within the field; the whole range matches
    anything (None)."""
    high = fm.value if fm.high is None else fm.high
    if high < 0 or high > full:
        raise TableError("INVALID_ARGUMENT", f"{where}: high {high:#x} too wide")
    if fm.value > high:
        raise TableError("INVALID_ARGUMENT", f"{where}: low {fm.value:#x} > high {high:#x}")
    return None if (fm.value == 0 and high == full) else FieldMatch(fm.value, high=high)


def _check_action(
    action: ActionCall,
    params: Mapping[str, Sequence[int]] | None,
    allowed: Iterable[str],
    where: str,
) -> None:
    """INVALID_ARGUMENT unless ``action`` is allowed and its arguments fit its params."""
    if action.name not in allowed:
        raise TableError("INVALID_ARGUMENT", f"{where}: action {action.name} is not allowed here")
    if params is None or action.name not in params:
        return
    widths = params[action.name]
    if len(action.args) != len(widths):
        raise TableError(
            "INVALID_ARGUMENT",
            f"{where}: action {action.name} takes {len(widths)} argument(s), "
            f"got {len(action.args)}",
        )
    for i, (arg, width) in enumerate(zip(action.args, widths, strict=True)):
        if arg < 0 or arg >> width:
            raise TableError(
                "INVALID_ARGUMENT",
                f"{where}: argument {i} of {action.name} ({arg:#x}) does not fit in {width} bits",
            )


# --------------------------------------------------------------------------- profiles


class ActionProfile:
    """``action_profile(size)``: members (id -> ActionCall) shared by indirect tables."""

    has_selector = False

    def __init__(
        self,
        name: str,
        size: int,
        action_params: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        self.name = name
        self.size = size
        # action name -> widths of its control-plane parameters (None: no validation)
        self.action_params = dict(action_params) if action_params is not None else None
        self.members: dict[int, ActionCall] = {}
        self._member_handle: dict[int, int] = {}
        self._handles = _HandleAllocator()
        self._refs: dict[tuple[str, int], int] = {}
        # called after every change of members or groups (the C engine's mirror)
        self._listeners: list[Callable[[ActionProfile], None]] = []

    def add_listener(self, fn: Callable[[ActionProfile], None]) -> None:
        """Call ``fn(self)`` after each change of a member or a group."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in self._listeners:
            fn(self)

    # references from table entries and groups, so in-use objects cannot be deleted
    def _ref(self, kind: str, ident: int, delta: int) -> None:
        key = (kind, ident)
        n = self._refs.get(key, 0) + delta
        if n:
            self._refs[key] = n
        else:
            self._refs.pop(key, None)

    def _in_use(self, kind: str, ident: int) -> bool:
        return self._refs.get((kind, ident), 0) > 0

    def _check_member_action(self, action: ActionCall) -> None:
        allowed = self.action_params.keys() if self.action_params is not None else (action.name,)
        _check_action(action, self.action_params, allowed, f"action profile {self.name}")

    def insert_member(self, member_id: int, action: ActionCall) -> None:
        """Add a member; ALREADY_EXISTS / RESOURCE_EXHAUSTED / INVALID_ARGUMENT."""
        if member_id in self.members:
            raise TableError("ALREADY_EXISTS", f"{self.name}: member {member_id} exists")
        self._check_member_action(action)
        if len(self.members) >= self.size:
            raise TableError("RESOURCE_EXHAUSTED", f"{self.name}: action profile is full")
        self.members[member_id] = action
        self._member_handle[member_id] = self._handles.get()
        self._changed()

    def modify_member(self, member_id: int, action: ActionCall) -> None:
        """Replace a member's action; NOT_FOUND when it does not exist."""
        if member_id not in self.members:
            raise TableError("NOT_FOUND", f"{self.name}: no member {member_id}")
        self._check_member_action(action)
        self.members[member_id] = action
        self._changed()

    def delete_member(self, member_id: int) -> None:
        """Remove a member; NOT_FOUND, or FAILED_PRECONDITION while referenced."""
        if member_id not in self.members:
            raise TableError("NOT_FOUND", f"{self.name}: no member {member_id}")
        if self._in_use("member", member_id):
            raise TableError(
                "FAILED_PRECONDITION", f"{self.name}: member {member_id} is still in use"
            )
        del self.members[member_id]
        self._handles.release(self._member_handle.pop(member_id))
        self._changed()

    def member(self, member_id: int) -> ActionCall | None:
        """Action of a member (``None`` when unknown)."""
        return self.members.get(member_id)

    def clear(self) -> None:
        """Drop every member (and group); tables using it must be cleared first."""
        self.members.clear()
        self._member_handle.clear()
        self._handles.clear()
        self._refs.clear()
        self._changed()


class ActionSelector(ActionProfile):
    """``action_selector(algo, size, width)``: members plus groups of weighted members.

    A group's members are ordered as BMv2 orders them (by member handle, i.e. creation
    order with reuse of freed handles); a member of weight ``w`` takes ``w`` consecutive
    slots. :meth:`select` picks slot ``hash % slots``.
    """

    has_selector = True

    def __init__(
        self,
        name: str,
        size: int,
        algo: str = "crc16",
        output_width: int = 0,
        action_params: Mapping[str, Sequence[int]] | None = None,
        max_group_size: int = 0,
    ) -> None:
        super().__init__(name, size, action_params)
        self.algo = algo
        self.output_width = output_width
        self.max_group_size = max_group_size
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self._slots: dict[int, tuple[ActionCall, ...]] = {}

    def _check_group(self, group_id: int, members: Sequence[tuple[int, int]]) -> None:
        seen: set[int] = set()
        for member_id, weight in members:
            if member_id not in self.members:
                raise TableError("NOT_FOUND", f"{self.name}: no member {member_id}")
            if weight < 1:
                raise TableError(
                    "INVALID_ARGUMENT", f"{self.name}: member {member_id} has weight {weight}"
                )
            if member_id in seen:
                raise TableError(
                    "INVALID_ARGUMENT",
                    f"{self.name}: member {member_id} appears twice in group {group_id}",
                )
            seen.add(member_id)
        total = sum(w for _, w in members)
        if self.max_group_size and total > self.max_group_size:
            raise TableError(
                "RESOURCE_EXHAUSTED",
                f"{self.name}: group {group_id} of size {total} exceeds {self.max_group_size}",
            )

    def _rebuild(self, group_id: int) -> None:
        ordered = sorted(self.groups[group_id], key=lambda mw: self._member_handle[mw[0]])
        slots: list[ActionCall] = []
        for member_id, weight in ordered:
            slots.extend([self.members[member_id]] * weight)
        self._slots[group_id] = tuple(slots)
        self._changed()

    def _set_members(self, group_id: int, members: Sequence[tuple[int, int]]) -> None:
        for member_id, _ in self.groups.get(group_id, ()):
            self._ref("member", member_id, -1)
        self.groups[group_id] = [(m, w) for m, w in members]
        for member_id, _ in members:
            self._ref("member", member_id, +1)
        self._rebuild(group_id)

    def insert_group(self, group_id: int, members: Sequence[tuple[int, int]] = ()) -> None:
        """Create a group of ``(member_id, weight)``; ALREADY_EXISTS, NOT_FOUND, ..."""
        if group_id in self.groups:
            raise TableError("ALREADY_EXISTS", f"{self.name}: group {group_id} exists")
        self._check_group(group_id, members)
        if len(self.groups) >= self.size:
            raise TableError("RESOURCE_EXHAUSTED", f"{self.name}: too many groups")
        self._set_members(group_id, members)

    def modify_group(self, group_id: int, members: Sequence[tuple[int, int]]) -> None:
        """Replace a group's members; NOT_FOUND when the group does not exist."""
        if group_id not in self.groups:
            raise TableError("NOT_FOUND", f"{self.name}: no group {group_id}")
        self._check_group(group_id, members)
        self._set_members(group_id, members)

    def delete_group(self, group_id: int) -> None:
        """Remove a group; NOT_FOUND, or FAILED_PRECONDITION while a table entry uses it."""
        if group_id not in self.groups:
            raise TableError("NOT_FOUND", f"{self.name}: no group {group_id}")
        if self._in_use("group", group_id):
            raise TableError(
                "FAILED_PRECONDITION", f"{self.name}: group {group_id} is still in use"
            )
        for member_id, _ in self.groups.pop(group_id):
            self._ref("member", member_id, -1)
        del self._slots[group_id]
        self._changed()

    def group_slots(self, group_id: int) -> tuple[ActionCall, ...]:
        """The actions a group's hash picks among (``slots[h % len(slots)]``), in order."""
        return self._slots.get(group_id, ())

    def modify_member(self, member_id: int, action: ActionCall) -> None:
        super().modify_member(member_id, action)
        for group_id, members in self.groups.items():
            if any(m == member_id for m, _ in members):
                self._rebuild(group_id)

    def select(self, group_id: int, h: int) -> ActionCall | None:
        """Member action chosen for hash ``h``; ``None`` for an empty or unknown group."""
        slots = self._slots.get(group_id)
        if not slots:
            return None
        return slots[h % len(slots)]

    def selector_hash(self, data: bytes) -> int:
        """Hash of the packed selector fields with this selector's algorithm."""
        return hash_value(self.algo, data)

    def clear(self) -> None:
        super().clear()
        self.groups.clear()
        self._slots.clear()


# --------------------------------------------------------------------------- tables


def _exact_key(entry: TableEntry, skip: int = -1) -> tuple[int, ...]:
    """The values of an entry's exact key fields (all but field ``skip``, the LPM one):
    after normalisation they are never don't-care."""
    key: list[int] = []
    for j, fm in enumerate(entry.matches):
        if j != skip:
            assert fm is not None, "an exact key field is never don't-care"
            key.append(fm.value)
    return tuple(key)


#: A row of a "list" table: (-priority, handle, mask, value, ranges as (key index, low,
#: high), entry); rows sort by priority first, then by insertion.
_Row = tuple[int, int, int, int, tuple[tuple[int, int, int], ...], TableEntry]


class Table:
    """A P4 table: entries, default action and the look-up structure."""

    lookup: Callable[[tuple[int, ...]], TableEntry | None]

    def __init__(
        self,
        name: str,
        keys: Sequence[KeyField],
        action_names: Sequence[str],
        size: int = 1024,
        default_action: ActionCall | None = None,
        *,
        const_default_action: bool = False,
        has_const_entries: bool = False,
        action_params: Mapping[str, Sequence[int]] | None = None,
        tableonly: Iterable[str] = (),
        defaultonly: Iterable[str] = (),
        implementation: ActionProfile | None = None,
        support_timeout: bool = False,
        direct_meter_kind: str | None = None,
    ) -> None:
        self.name = name
        self.keys = tuple(keys)
        self.action_names = tuple(action_names)
        self.size = size
        self.initial_default_action = default_action or NO_ACTION
        self.default_action = self.initial_default_action
        self.const_default_action = const_default_action
        self.has_const_entries = has_const_entries
        # action name -> widths of its control-plane params (None: arity not checked)
        self.action_params = dict(action_params) if action_params is not None else None
        self.tableonly = frozenset(tableonly)
        self.defaultonly = frozenset(defaultonly)
        self.implementation = implementation
        self.support_timeout = support_timeout
        self.direct_meter_kind = direct_meter_kind
        self.requires_priority = any(k.match_kind in _PRIORITY_KINDS for k in self.keys)

        self._by_id: dict[tuple[tuple[FieldMatch | None, ...], int], TableEntry] = {}
        # called after every change of entries or default action (the C engine's mirror)
        self._listeners: list[Callable[[Table], None]] = []
        # called before the direct counters of entries are read or written (the C engine
        # adds the counts it holds)
        self._counter_syncs: list[Callable[[Table], None]] = []
        self._handles = _HandleAllocator()
        self._widths = tuple(k.width for k in self.keys)
        shifts = []
        total = 0
        for w in reversed(self._widths):
            shifts.append(total)
            total += w
        self._shifts = tuple(reversed(shifts))

        kinds = [k.match_kind for k in self.keys]
        lpm_count = kinds.count(MatchKind.LPM)
        if not self.keys:
            self.strategy = "keyless"
            self.lookup = self._lookup_keyless
        elif all(k == MatchKind.EXACT for k in kinds):
            self.strategy = "exact"
            self._exact: dict[tuple[int, ...], TableEntry] = {}
            self.lookup = self._exact.get
        elif lpm_count == 1 and all(k in (MatchKind.EXACT, MatchKind.LPM) for k in kinds):
            self.strategy = "lpm"
            self._lpm_index = kinds.index(MatchKind.LPM)
            self._lpm_by_len: dict[int, dict[object, TableEntry]] = {}
            self._lpm_levels: list[tuple[int, dict[object, TableEntry]]] = []
            self.lookup = self._lookup_lpm1 if len(self.keys) == 1 else self._lookup_lpm
        else:
            self.strategy = "list"
            self._rows: list[_Row] = []
            self.lookup = self._lookup_list

    def add_listener(self, fn: Callable[[Table], None]) -> None:
        """Call ``fn(self)`` after each change of the entries or the default action."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in self._listeners:
            fn(self)

    def add_counter_sync(self, fn: Callable[[Table], None]) -> None:
        """Call ``fn(self)`` whenever :meth:`sync_counters` runs."""
        self._counter_syncs.append(fn)

    def sync_counters(self) -> None:
        """Bring the entries' direct counters up to date (a data path that counts
        elsewhere adds its counts here); call before reading or writing them."""
        for fn in self._counter_syncs:
            fn(self)

    # ------------------------------------------------------------------ hot path

    @staticmethod
    def _lookup_keyless(key: tuple[int, ...]) -> TableEntry | None:
        return None

    def _lookup_lpm1(self, key: tuple[int, ...]) -> TableEntry | None:
        v = key[0]
        for m, d in self._lpm_levels:
            e = d.get(v & m)
            if e is not None:
                return e
        return None

    def _lookup_lpm(self, key: tuple[int, ...]) -> TableEntry | None:
        i = self._lpm_index
        v = key[i]
        rest = key[:i] + key[i + 1 :]
        for m, d in self._lpm_levels:
            e = d.get((rest, v & m))
            if e is not None:
                return e
        return None

    def _lookup_list(self, key: tuple[int, ...]) -> TableEntry | None:
        k = 0
        for v, s in zip(key, self._shifts, strict=False):
            k |= v << s
        for _, _, m, val, ranges, e in self._rows:
            if k & m == val:
                if ranges:
                    for i, lo, hi in ranges:
                        if not lo <= key[i] <= hi:
                            break
                    else:
                        return e
                    continue
                return e
        return None

    def record_hit(self, entry: TableEntry, nbytes: int, now_ns: int = 0) -> None:
        """Direct-counter update (and idle-timeout time stamp) for a hit on ``entry``."""
        entry.packets += 1
        entry.bytes += nbytes
        if self.support_timeout:
            entry.last_hit_ns = now_ns

    def execute_meter(self, entry: TableEntry, nbytes: int, now_ns: int) -> int:
        """Colour from ``entry``'s direct meter (green when it has no configuration)."""
        cell = entry.meter_state
        if cell is None:
            return GREEN
        return cell.execute(1 if self.direct_meter_kind == "packets" else nbytes, now_ns)

    def action_for(self, entry: TableEntry, h: int = 0) -> ActionCall | None:
        """Action an entry runs: its own, its member's, or the one its group picks for
        the selector hash ``h`` (``None``: empty group, run the default action)."""
        if entry.action is not None:
            return entry.action
        impl = self.implementation
        if impl is None:
            return None
        if entry.member_id is not None:
            return impl.members.get(entry.member_id)
        if entry.group_id is not None and isinstance(impl, ActionSelector):
            return impl.select(entry.group_id, h)
        return None

    # ------------------------------------------------------------------ validation

    def _normalise(self, matches: Sequence[FieldMatch | None]) -> tuple[FieldMatch | None, ...]:
        """Canonical form of ``matches`` (wildcards become None) or INVALID_ARGUMENT."""
        if len(matches) != len(self.keys):
            raise TableError(
                "INVALID_ARGUMENT",
                f"table {self.name}: expected {len(self.keys)} match field(s), got {len(matches)}",
            )
        out: list[FieldMatch | None] = []
        for kf, fm in zip(self.keys, matches, strict=True):
            out.append(self._normalise_field(kf, fm))
        return tuple(out)

    def _normalise_field(self, kf: KeyField, fm: FieldMatch | None) -> FieldMatch | None:
        w = kf.width
        full = (1 << w) - 1
        where = f"table {self.name}, field {kf.name}"
        kind = kf.match_kind
        if fm is None:
            if kind == MatchKind.EXACT:
                raise TableError("INVALID_ARGUMENT", f"{where}: exact field cannot be omitted")
            return None
        if fm.value < 0 or fm.value > full:
            raise TableError("INVALID_ARGUMENT", f"{where}: value {fm.value:#x} too wide")
        if kind in (MatchKind.EXACT, MatchKind.OPTIONAL):
            if fm.mask is not None and fm.mask != full:
                raise TableError("INVALID_ARGUMENT", f"{where}: {kind.value} match takes no mask")
            return FieldMatch(fm.value) if kind == MatchKind.EXACT else FieldMatch(fm.value, full)
        if kind == MatchKind.TERNARY:
            return _ternary_field(where, fm, full)
        if kind == MatchKind.LPM:
            return _lpm_field(where, fm, w)
        return _range_field(where, fm, full)

    def _check_priority(self, priority: int, is_const: bool) -> None:
        if self.requires_priority:
            if priority < 0 or (priority == 0 and not is_const):
                raise TableError(
                    "INVALID_ARGUMENT", f"table {self.name}: entries need a priority > 0"
                )
        elif priority != 0:
            raise TableError(
                "INVALID_ARGUMENT", f"table {self.name}: entries of this table take no priority"
            )

    def _check_entry_action(self, entry: TableEntry) -> None:
        impl = self.implementation
        where = f"table {self.name}"
        if entry.idle_timeout_ns and not self.support_timeout:
            raise TableError("INVALID_ARGUMENT", f"{where} does not support idle timeout")
        if impl is None:
            self._check_direct_action(entry, where)
        else:
            self._check_indirect_action(entry, impl, where)

    def _check_direct_action(self, entry: TableEntry, where: str) -> None:
        """An entry of a direct table names one of its actions (not a @defaultonly one)
        with the right parameters, and no member or group."""
        if entry.action is None or entry.member_id is not None or entry.group_id is not None:
            raise TableError("INVALID_ARGUMENT", f"{where}: a direct table needs an action")
        if entry.action.name in self.defaultonly:
            raise TableError(
                "INVALID_ARGUMENT", f"{where}: action {entry.action.name} is @defaultonly"
            )
        _check_action(entry.action, self.action_params, self.action_names, where)

    def _check_indirect_action(self, entry: TableEntry, impl: ActionProfile, where: str) -> None:
        """An entry of a table with an action profile/selector names exactly one existing
        member (whose action the table allows) or group (selectors only)."""
        chosen = [x is not None for x in (entry.action, entry.member_id, entry.group_id)]
        if chosen.count(True) != 1 or entry.action is not None:
            raise TableError(
                "INVALID_ARGUMENT", f"{where}: an indirect entry needs one member or group id"
            )
        if entry.member_id is not None:
            if entry.member_id not in impl.members:
                raise TableError(
                    "NOT_FOUND", f"{where}: no member {entry.member_id} in {impl.name}"
                )
            action = impl.members[entry.member_id]
            if action.name not in self.action_names or action.name in self.defaultonly:
                raise TableError(
                    "INVALID_ARGUMENT", f"{where}: member action {action.name} not allowed"
                )
        else:
            if not isinstance(impl, ActionSelector):
                raise TableError("INVALID_ARGUMENT", f"{where}: {impl.name} has no groups")
            if entry.group_id not in impl.groups:
                raise TableError("NOT_FOUND", f"{where}: no group {entry.group_id} in {impl.name}")

    def _reference(self, entry: TableEntry, delta: int) -> None:
        impl = self.implementation
        if impl is None:
            return
        if entry.member_id is not None:
            impl._ref("member", entry.member_id, delta)
        elif entry.group_id is not None:
            impl._ref("group", entry.group_id, delta)

    # ------------------------------------------------------------------ index upkeep

    def _index_add(self, entry: TableEntry) -> None:
        if self.strategy == "exact":
            self._exact[_exact_key(entry)] = entry
        elif self.strategy == "lpm":
            plen, probe = self._lpm_probe(entry)
            level = self._lpm_by_len.get(plen)
            if level is None:
                level = self._lpm_by_len[plen] = {}
                self._rebuild_levels()
            level[probe] = entry
        elif self.strategy == "list":
            bisect.insort(self._rows, self._row(entry))

    def _index_remove(self, entry: TableEntry) -> None:
        if self.strategy == "exact":
            del self._exact[_exact_key(entry)]
        elif self.strategy == "lpm":
            plen, probe = self._lpm_probe(entry)
            level = self._lpm_by_len[plen]
            del level[probe]
            if not level:
                del self._lpm_by_len[plen]
                self._rebuild_levels()
        elif self.strategy == "list":
            row = self._row(entry)
            i = bisect.bisect_left(self._rows, row[:2], key=lambda r: r[:2])
            del self._rows[i]

    def _lpm_probe(self, entry: TableEntry) -> tuple[int, object]:
        i = self._lpm_index
        fm = entry.matches[i]
        plen = 0 if fm is None else (fm.prefix_len or 0)
        value = 0 if fm is None else fm.value
        if len(self.keys) == 1:
            return plen, value
        rest = _exact_key(entry, skip=i)
        return plen, (rest, value)

    def _rebuild_levels(self) -> None:
        w = self.keys[self._lpm_index].width
        full = (1 << w) - 1
        self._lpm_levels = [
            (full ^ ((1 << (w - plen)) - 1), self._lpm_by_len[plen])
            for plen in sorted(self._lpm_by_len, reverse=True)
        ]

    def _row(self, entry: TableEntry) -> _Row:
        mask = value = 0
        ranges: list[tuple[int, int, int]] = []
        for i, (kf, fm, s) in enumerate(zip(self.keys, entry.matches, self._shifts, strict=True)):
            if fm is None:
                continue
            w = kf.width
            full = (1 << w) - 1
            kind = kf.match_kind
            if kind == MatchKind.RANGE:
                # a normalised range entry has ``high`` (None means high = low)
                ranges.append((i, fm.value, fm.value if fm.high is None else fm.high))
                continue
            if kind == MatchKind.TERNARY:
                m = fm.mask or 0
            elif kind == MatchKind.LPM:
                m = full ^ ((1 << (w - (fm.prefix_len or 0))) - 1)
            else:
                m = full
            mask |= m << s
            value |= fm.value << s
        return (-entry.priority, entry.handle, mask, value, tuple(ranges), entry)

    # ------------------------------------------------------------------ control plane

    def _add(self, entry: TableEntry, is_const: bool) -> None:
        matches = self._normalise(entry.matches)
        self._check_priority(entry.priority, is_const)
        self._check_entry_action(entry)
        ident = (matches, entry.priority)
        if ident in self._by_id:
            raise TableError("ALREADY_EXISTS", f"table {self.name}: entry already exists")
        if not is_const and len(self._by_id) >= self.size:
            raise TableError("RESOURCE_EXHAUSTED", f"table {self.name} is full ({self.size})")
        entry.matches = matches
        entry.is_const = is_const
        entry.handle = self._handles.get()
        entry.meter_state = MeterCell(entry.meter) if entry.meter is not None else None
        self._by_id[ident] = entry
        self._index_add(entry)
        self._reference(entry, +1)
        self._changed()

    def _writable(self) -> None:
        if self.has_const_entries:
            raise TableError(
                "PERMISSION_DENIED", f"table {self.name} has const entries and cannot be written"
            )

    def insert(self, entry: TableEntry) -> None:
        """Add ``entry`` (stored as given, its matches normalised)."""
        self._writable()
        if not self.keys:
            raise TableError("INVALID_ARGUMENT", f"table {self.name} has no key")
        self._add(entry, False)

    def add_const_entry(self, entry: TableEntry) -> None:
        """Add an entry of the program's ``entries`` list (bypasses the const write ban and
        the size limit; priority 0 is allowed and ties go to the earlier entry)."""
        self._add(entry, True)

    def modify(self, entry: TableEntry) -> None:
        """Replace the action (member/group), meter config and idle timeout of the stored
        entry with the same matches and priority; its counters are kept."""
        self._writable()
        stored = self.find(self._normalise(entry.matches), entry.priority)
        if stored is None:
            raise TableError("NOT_FOUND", f"table {self.name}: no such entry")
        self._check_entry_action(entry)
        self._reference(stored, -1)
        stored.action = entry.action
        stored.member_id = entry.member_id
        stored.group_id = entry.group_id
        stored.idle_timeout_ns = entry.idle_timeout_ns
        stored.meter = entry.meter
        stored.meter_state = MeterCell(entry.meter) if entry.meter is not None else None
        self._reference(stored, +1)
        self._changed()

    def delete(self, entry: TableEntry) -> None:
        """Remove the stored entry with the same matches and priority."""
        self._writable()
        matches = self._normalise(entry.matches)
        stored = self._by_id.pop((matches, entry.priority), None)
        if stored is None:
            raise TableError("NOT_FOUND", f"table {self.name}: no such entry")
        self._index_remove(stored)
        self._handles.release(stored.handle)
        self._reference(stored, -1)
        self._changed()

    def find(self, matches: Sequence[FieldMatch | None], priority: int = 0) -> TableEntry | None:
        """The stored entry with these matches and priority, or ``None``."""
        self.sync_counters()
        try:
            norm = self._normalise(matches)
        except TableError:
            return None
        return self._by_id.get((norm, priority))

    def entries(self) -> list[TableEntry]:
        """All entries (const ones included), in handle order (their direct counters up
        to date)."""
        self.sync_counters()
        return sorted(self._by_id.values(), key=lambda e: e.handle)

    def clear(self) -> None:
        """Delete every non-const entry (pipeline reset)."""
        for entry in [e for e in self._by_id.values() if not e.is_const]:
            del self._by_id[(entry.matches, entry.priority)]
            self._index_remove(entry)
            self._handles.release(entry.handle)
            self._reference(entry, -1)
        self._changed()

    def set_default(self, action: ActionCall) -> None:
        """Change the default action; PERMISSION_DENIED when it is const."""
        if self.const_default_action:
            raise TableError("PERMISSION_DENIED", f"table {self.name}: the default action is const")
        if action.name in self.tableonly:
            raise TableError(
                "INVALID_ARGUMENT", f"table {self.name}: action {action.name} is @tableonly"
            )
        _check_action(action, self.action_params, self.action_names, f"table {self.name}")
        self.default_action = action
        self._changed()

    def reset_default(self) -> None:
        """Restore the program's default action."""
        self.default_action = self.initial_default_action
        self._changed()

    def set_meter_config(self, entry: TableEntry, config: MeterConfig | None) -> None:
        """Configure the direct meter of a stored entry (``None``: unconfigured)."""
        entry.meter = config
        entry.meter_state = MeterCell(config) if config is not None else None
        self._changed()

    def expired(self, now_ns: int) -> list[TableEntry]:
        """Entries whose idle timeout has elapsed since their last hit (or insertion time
        stamp ``last_hit_ns`` set by the caller)."""
        if not self.support_timeout:
            return []
        self.sync_counters()  # hit times kept elsewhere (the C engine) come in too
        return [
            e
            for e in self._by_id.values()
            if e.idle_timeout_ns > 0 and now_ns - e.last_hit_ns >= e.idle_timeout_ns
        ]

    def __len__(self) -> int:
        return len(self._by_id)
