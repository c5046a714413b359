"""The v1model switch on the C engine: the same ``process(port, frame)`` as
:class:`softswitch.v1model.switch.V1Switch`, one C call per received frame.

State ownership (why this split): the Python objects stay the control plane's source of
truth for *tables* and the *packet replication engine* (their validation, entry
identities, handles and P4Runtime reads are there and are the reference); their writes
mark a C mirror stale and the stale tables are reloaded into C before the next frame, so
a burst of control-plane writes costs one reload, not one per write. *Registers and
counters* are the opposite: the data plane writes them on every packet, so C owns their
memory and the Python objects read and write it through views (``Register.values``,
``Counter.packets``/``bytes``) without copying.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from softswitch import ir
from softswitch.cengine import build as cbuild
from softswitch.cengine.cgen import ArrayC, CGen, TableC
from softswitch.cengine.errors import CUnsupported
from softswitch.cengine.v1c import CDEF, MAX_PASSES, generate
from softswitch.engine.compiled import CompiledProgram
from softswitch.engine.externs import Counter, Meter, Register
from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.tables import (
    ActionProfile,
    ActionSelector,
    FieldMatch,
    MatchKind,
    Table,
    TableEntry,
)

log = logging.getLogger(__name__)

_MASK48 = (1 << 48) - 1
_M64 = (1 << 64) - 1
_HDR = struct.Struct("<II")


def _words(value: int, n: int) -> list[int]:
    return [(value >> (64 * i)) & _M64 for i in range(n)]


class CArrayView:
    """A list-like window on C words: cell ``i`` is ``words`` words at ``offset + i *
    stride`` (little-endian words, masked to ``width`` bits on writes)."""

    def __init__(self, ptr: Any, size: int, stride: int, offset: int, words: int, width: int):
        self._p = ptr
        self._size = size
        self._stride = stride
        self._off = offset
        self._words = words
        self._mask = (1 << width) - 1

    def __len__(self) -> int:
        return self._size

    def _get(self, i: int) -> int:
        base = self._off + i * self._stride
        if self._words == 1:
            return int(self._p[base])
        v = 0
        for k in range(self._words - 1, -1, -1):
            v = (v << 64) | int(self._p[base + k])
        return v

    def _set(self, i: int, value: int) -> None:
        base = self._off + i * self._stride
        value &= self._mask
        for k in range(self._words):
            self._p[base + k] = (value >> (64 * k)) & _M64

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._get(k) for k in range(*i.indices(self._size))]
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError(i)
        return self._get(i)

    def __setitem__(self, i: Any, value: Any) -> None:
        if isinstance(i, slice):
            idx = range(*i.indices(self._size))
            vals = list(value)
            if len(vals) != len(idx):
                raise ValueError("slice assignment must keep the length")
            if self._words == 1:  # a pipeline load binds whole arrays: no call per cell
                p, off, stride, mask = self._p, self._off, self._stride, self._mask
                masked = [int(v) & mask for v in vals]
                if stride == 1 and idx.step == 1:
                    p[off + idx.start : off + idx.start + len(masked)] = masked
                else:
                    for k, v in zip(idx, masked, strict=True):
                        p[off + k * stride] = v
                return
            for k, v in zip(idx, vals, strict=True):
                self._set(k, int(v))
            return
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError(i)
        self._set(i, int(value))

    def __iter__(self) -> Iterator[int]:
        return (self._get(k) for k in range(self._size))

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, CArrayView)) else False

    __hash__ = None  # type: ignore[assignment]


class _CRegister(Register):
    """A register whose cells live in the C engine: ``values`` is a view on them, and
    assigning a list to ``values`` copies it into the cells."""

    __slots__ = ()

    @property
    def values(self) -> Any:
        return _REG_VALUES.__get__(self, Register)

    @values.setter
    def values(self, new: Any) -> None:
        _REG_VALUES.__get__(self, Register)[:] = list(new)


class _CCounter(Counter):
    """A counter whose counts live in the C engine (see :class:`_CRegister`)."""

    __slots__ = ()

    @property
    def packets(self) -> Any:
        return _CTR_PACKETS.__get__(self, Counter)

    @packets.setter
    def packets(self, new: Any) -> None:
        _CTR_PACKETS.__get__(self, Counter)[:] = list(new)

    @property
    def bytes(self) -> Any:
        return _CTR_BYTES.__get__(self, Counter)

    @bytes.setter
    def bytes(self, new: Any) -> None:
        _CTR_BYTES.__get__(self, Counter)[:] = list(new)


_REG_VALUES: Any = Register.__dict__["values"]
_CTR_PACKETS: Any = Counter.__dict__["packets"]
_CTR_BYTES: Any = Counter.__dict__["bytes"]


class CV1Switch:
    """Runs frames through the compiled C program (see the module docstring)."""

    tracing = False

    def __init__(
        self,
        compiled: CompiledProgram,
        pre: PacketReplicationEngine,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        source, gen = generate(compiled.program, compiled)
        self.source = source
        self._ffi, self._lib = cbuild.build_and_load(source, CDEF)
        self._state = self._ffi.gc(self._lib.ss_new(), self._lib.ss_free)
        self._gen: CGen = gen
        self.compiled = compiled
        self.pre = pre
        self.clock_ns = clock_ns
        self._t0 = clock_ns()
        self.digests: deque[tuple[str, tuple[int, ...]]] = deque()
        self._out = self._ffi.new("char **")
        self._ndg = self._ffi.new("uint32_t *")
        self._assert_seen = 0
        self._passes_seen = 0
        self._may_loop = gen.may_loop
        self._stale_tables: set[int] = set(range(len(gen.tables)))
        self._pre_stale = True
        self._dirty = True
        # called when a control-plane write makes the C copy stale (the C packet loop's
        # switch wakes its Python thread with it, to reload writes made without its lock)
        self.on_dirty: Callable[[], None] | None = None
        self._tables: list[tuple[TableC, Table]] = []
        # per table: the entries as last loaded (row order), and each handle's direct
        # meter cell as last loaded (a new cell means a new configuration: reset)
        self._loaded: list[list[TableEntry]] = [[] for _ in gen.tables]
        self._meter_cells: list[dict[int, Any]] = [{} for _ in gen.tables]
        for tc in gen.tables:
            table = compiled.tables[tc.name]
            self._tables.append((tc, table))
            table.add_listener(self._table_listener(tc.index))
            if tc.direct_counter or tc.idle_timeout:
                table.add_counter_sync(self._counter_sync(tc.index))
            if table.implementation is not None:
                table.implementation.add_listener(self._profile_listener(tc.index))
        pre.add_listener(self._pre_changed)
        self._meters: list[tuple[ArrayC, Meter, list[Any]]] = []
        self._stale_meters: set[int] = set()
        for a in gen.arrays:
            self._bind_array(a)
        self._needs_clock = bool(self._meters) or any(
            tc.direct_meter is not None or tc.idle_timeout for tc in gen.tables
        )
        sm_t = ir.strip_newtype(compiled.block_params["parser"][3].type)
        names = {f.name for f in getattr(sm_t, "fields", [])}
        self._needs_clock = self._needs_clock or bool(
            {"ingress_global_timestamp", "egress_global_timestamp", "enq_timestamp"} & names
        )

    # ------------------------------------------------------------------ state mirrors

    def _table_listener(self, index: int) -> Callable[[Table], None]:
        def changed(_table: Table) -> None:
            self._stale_tables.add(index)
            self._mark_dirty()

        return changed

    def _counter_sync(self, index: int) -> Callable[[Table], None]:
        def sync(_table: Table) -> None:
            self._flush_counters(index)

        return sync

    def _flush_counters(self, index: int) -> None:
        """Add the C engine's direct counts to the entries last loaded into table
        ``index`` (and zero them in C)."""
        entries = self._loaded[index]
        tc = self._tables[index][0]
        if not entries or not (tc.direct_counter or tc.idle_timeout):
            return
        handles = self._ffi.new("uint64_t[]", [e.handle for e in entries])
        out = self._ffi.new("uint64_t[]", 3 * len(entries))
        self._lib.ss_table_flush(self._state, index, len(entries), handles, out)
        for i, e in enumerate(entries):
            e.packets += out[3 * i]
            e.bytes += out[3 * i + 1]
            if out[3 * i + 2]:
                e.last_hit_ns = int(out[3 * i + 2])

    def _meter_listener(self, index: int) -> Callable[[Meter], None]:
        def changed(_meter: Meter) -> None:
            self._stale_meters.add(index)
            self._mark_dirty()

        return changed

    def _load_meter(self, index: int) -> None:
        a, meter, last = self._meters[index]
        for i, cell in enumerate(meter.cells):
            state = (cell, getattr(cell, "_buckets", None))
            if last[i] is not None and last[i][0] is state[0] and last[i][1] is state[1]:
                continue
            last[i] = state
            cfg = cell.config
            if cfg is None:
                self._lib.ss_meter(self._state, a.index, i, 0, 0, 0, 0, 0)
            else:
                self._lib.ss_meter(
                    self._state, a.index, i, 1, cfg.cir, cfg.cburst, cfg.pir, cfg.pburst
                )

    def _profile_listener(self, index: int) -> Callable[[ActionProfile], None]:
        def changed(_profile: ActionProfile) -> None:
            self._stale_tables.add(index)
            self._mark_dirty()

        return changed

    def _pre_changed(self, _pre: PacketReplicationEngine) -> None:
        self._pre_stale = True
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        self._dirty = True
        if self.on_dirty is not None:
            self.on_dirty()

    def sync_if_dirty(self) -> None:
        """Reload the stale tables, meters and groups into C now (the C packet loop's
        thread paused or stopped)."""
        if self._dirty:
            self._sync()

    @property
    def dirty(self) -> bool:
        """True when a control-plane write has not reached C yet."""
        return self._dirty

    def _bind_array(self, a: ArrayC) -> None:
        ptr = self._lib.ss_array(self._state, a.index)
        if a.kind == "meter":
            meter = self.compiled.meters[a.name]
            index = len(self._meters)
            self._meters.append((a, meter, [None] * meter.size))
            meter.add_listener(self._meter_listener(index))
            self._stale_meters.add(index)
            return
        if a.kind == "register":
            reg = self.compiled.registers[a.name]
            words = self._gen.types.words if a.width > 64 else 1
            view = CArrayView(ptr, a.size, words, 0, words, a.width)
            view[:] = list(reg.values)
            _REG_VALUES.__set__(reg, view)
            reg.__class__ = _CRegister
        else:
            ctr = self.compiled.counters[a.name]
            packets = CArrayView(ptr, a.size, 2, 0, 1, 64)
            nbytes = CArrayView(ptr, a.size, 2, 1, 1, 64)
            packets[:] = list(ctr.packets)
            nbytes[:] = list(ctr.bytes)
            _CTR_PACKETS.__set__(ctr, packets)
            _CTR_BYTES.__set__(ctr, nbytes)
            ctr.__class__ = _CCounter

    def _sync(self) -> None:
        # Each flag is cleared before what it marks is copied, never after: a write that
        # lands while the copy runs (one made without the switch's lock) marks it stale
        # again and the next reload takes it, instead of being dropped for good.
        self._dirty = False
        for index in sorted(self._stale_tables):
            self._stale_tables.discard(index)
            tc, table = self._tables[index]
            self._load_table(tc, table)
        for index in sorted(self._stale_meters):
            self._stale_meters.discard(index)
            self._load_meter(index)
        if self._pre_stale:
            self._pre_stale = False
            self._load_pre()

    def _load_table(self, tc: TableC, table: Table) -> None:
        self._flush_counters(tc.index)
        entries = table.entries()
        if tc.strategy == 0:
            entries.sort(key=lambda e: -_prefix_bits(table, e))
        else:
            entries.sort(key=lambda e: (-e.priority, e.handle))
        words: list[int] = []
        slots: list[int] = []
        for e in entries:
            words += self._row(tc, table, e, slots)
        if table.implementation is not None:
            buf = self._ffi.new("uint64_t[]", slots or [0])
            if self._lib.ss_table_slots(self._state, tc.index, len(slots), buf) != 0:
                raise MemoryError(f"C engine: loading the groups of table {tc.name} failed")
        rows = self._ffi.new("uint64_t[]", words or [0])
        rc = self._lib.ss_table_load(self._state, tc.index, len(entries), rows)
        if rc != 0:
            raise MemoryError(f"C engine: loading table {tc.name} failed ({rc})")
        self._loaded[tc.index] = entries
        if tc.direct_meter is not None:
            cells = self._meter_cells[tc.index]
            for e in entries:
                cell = e.meter_state
                state = (cell, getattr(cell, "_buckets", None))
                old = cells.get(e.handle)
                if old is not None and old[0] is state[0] and old[1] is state[1]:
                    continue
                cells[e.handle] = state
                cfg = cell.config if cell is not None else None
                if cfg is None:
                    self._lib.ss_table_meter(self._state, tc.index, e.handle, 0, 0, 0, 0, 0)
                else:
                    self._lib.ss_table_meter(
                        self._state, tc.index, e.handle, 1, cfg.cir, cfg.cburst, cfg.pir,
                        cfg.pburst,
                    )  # fmt: skip
        name, args = table.default_action.name, table.default_action.args
        aid = tc.action_ids.get(name, 0)
        argw = self._args(tc, name, args)
        self._lib.ss_table_default(
            self._state, tc.index, aid, self._ffi.new("uint64_t[]", argw or [0]), len(argw)
        )

    def _args(self, tc: TableC, name: str, args: Sequence[int]) -> list[int]:
        out = [0] * tc.aw
        for (off, w), v in zip(tc.arg_words.get(name, []), args, strict=False):
            for k, word in enumerate(_words(v, max(1, (w + 63) // 64))):
                out[off + k] = word
        return out

    def _row(self, tc: TableC, table: Table, e: TableEntry, slots: list[int]) -> list[int]:
        values = [0] * tc.kw
        masks = [0] * tc.kw
        ranges: list[int] = []
        for (off, w, kind), fm in zip(tc.key_words, e.matches, strict=True):
            n = max(1, (w + 63) // 64)
            v, m, lo, hi = _match_words(fm, kind, w)
            for k, word in enumerate(_words(v & m, n)):
                values[off + k] = word
            for k, word in enumerate(_words(m, n)):
                masks[off + k] = word
            ranges += [lo & _M64, hi & _M64]
        impl = table.implementation
        if e.group_id is not None and isinstance(impl, ActionSelector):
            # the group's slots, each (action, args); the row points at the first
            first = len(slots) // (1 + tc.aw)
            members = impl.group_slots(e.group_id)
            for slot in members:
                slots += [tc.action_ids[slot.name], *self._args(tc, slot.name, slot.args)]
            args = [len(members)] + [0] * (tc.aw - 1)
            return [(1 << 63) | first, e.handle, *values, *masks, *ranges, *args]
        direct = table.action_for(e)
        if direct is None:
            raise CUnsupported(f"table {tc.name}: entry without an action")
        aid = tc.action_ids[direct.name]
        args = self._args(tc, direct.name, direct.args)
        return [aid, e.handle, *values, *masks, *ranges, *args]

    def _load_pre(self) -> None:
        groups: list[int] = []
        gids = self.pre.groups()
        for gid in gids:
            reps = self.pre.replicas(gid)
            groups += [gid, len(reps)]
            for port, rid in reps:
                groups += [port, rid]
        sessions: list[int] = []
        clone_sessions = self.pre.clone_sessions()
        for s in clone_sessions:
            sessions += [s.session_id, s.packet_length_bytes or 0, len(s.replicas)]
            for port, rid in s.replicas:
                sessions += [port, rid]
        self._lib.ss_pre_load(
            self._state,
            len(gids),
            self._ffi.new("uint32_t[]", groups or [0]),
            len(clone_sessions),
            self._ffi.new("uint32_t[]", sessions or [0]),
        )

    # ------------------------------------------------------------------ packets

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """All frames transmitted because ``frame`` arrived on ``port``, in order."""
        if self._dirty:
            self._sync()
        now = self.clock_ns() if self._needs_clock else self._t0
        n = self._lib.ss_process(self._state, port, frame, len(frame), now, self._t0, self._out)
        if self._gen.digests:
            self._take_digests()
        if self._gen.asserts:
            self._check_asserts()
        if self._may_loop:
            self._check_passes(port)
        if n == 0:
            return []
        buf = self._ffi.unpack(self._out[0], n)
        out = []
        pos = 0
        unpack = _HDR.unpack_from
        while pos < n:
            p, ln = unpack(buf, pos)
            pos += 8
            out.append((p, buf[pos : pos + ln]))
            pos += ln
        return out

    def _check_passes(self, port: int) -> None:
        """Warn about a frame that exceeded the pass limit, as the Python switch does."""
        over = int(self._lib.ss_stat(self._state, 1))
        if over != self._passes_seen:
            self._passes_seen = over
            log.warning(
                "packet from port %d exceeded %d passes; dropping the rest", port, MAX_PASSES
            )

    def _check_asserts(self) -> None:
        """Log each packet an assert/assume dropped, as the Python switch does."""
        failures = int(self._lib.ss_stat(self._state, 0))
        if failures != self._assert_seen:
            self._assert_seen = failures
            where = self._gen.asserts[int(self._lib.ss_stat(self._state, 2)) - 1]
            log.error("assert/assume failed at %s; packet dropped", where)

    def _take_digests(self) -> None:
        ptr = self._lib.ss_digests(self._state, self._ndg)
        n = self._ndg[0]
        if n:
            self.digests.extend(self.parse_digest_words([int(ptr[i]) for i in range(n)]))

    def parse_digest_words(self, words: Sequence[int]) -> list[tuple[str, tuple[int, ...]]]:
        """Digest messages ``(name, field values)`` from the C engine's digest words
        (per message: digest index, word count, then each field's words)."""
        out = []
        pos = 0
        n = len(words)
        while pos < n:
            name, widths = self._gen.digests[words[pos]]
            pos += 2
            values = []
            for w in widths:
                nw = max(1, (w + 63) // 64)
                v = 0
                for k in range(nw - 1, -1, -1):
                    v = (v << 64) | int(words[pos + k])
                values.append(v)
                pos += nw
            out.append((name, tuple(values)))
        return out

    def assert_location(self, index: int) -> str:
        """Where the assert/assume numbered ``index`` (1-based, as C reports it) is."""
        return str(self._gen.asserts[index - 1]) if 0 < index <= len(self._gen.asserts) else "?"

    @property
    def assertion_failures(self) -> int:
        return int(self._lib.ss_stat(self._state, 0))

    def seed(self, value: int) -> None:
        """Seed ``random()`` of the C program (its own generator, not Python's)."""
        self._lib.ss_seed(self._state, value & _M64)


def _prefix_bits(table: Table, e: TableEntry) -> int:
    """Set bits of an entry's masks (an LPM entry's prefix length): longer first."""
    total = 0
    for kf, fm in zip(table.keys, e.matches, strict=True):
        if fm is None:
            continue
        if kf.match_kind == MatchKind.LPM:
            total += kf.width if fm.prefix_len is None else fm.prefix_len
        else:
            total += kf.width
    return total


def make_switch(
    compiled: CompiledProgram, pre: PacketReplicationEngine, clock_ns: Callable[[], int]
) -> CV1Switch:
    """A C switch for ``compiled`` (raises CUnsupported / CBuildError)."""
    return CV1Switch(compiled, pre, clock_ns)


__all__ = ["CArrayView", "CV1Switch", "FieldMatch", "make_switch"]


def _match_words(fm: FieldMatch | None, kind: str, w: int) -> tuple[int, int, int, int]:
    """One key field of an entry as the C tables store it: (value, mask, range low, range
    high); a field left out matches anything."""
    full = (1 << w) - 1
    if fm is None:
        return 0, 0, 0, full
    if kind == MatchKind.RANGE:
        return 0, 0, fm.value, fm.value if fm.high is None else fm.high
    if kind == MatchKind.TERNARY:
        return fm.value, (full if fm.mask is None else fm.mask), 0, full
    if kind == MatchKind.LPM:
        plen = w if fm.prefix_len is None else fm.prefix_len
        return fm.value, full ^ ((1 << (w - plen)) - 1), 0, full
    return fm.value, full, 0, full
