"""Tables: their run-time objects (keys, actions, const entries) and the code that applies
them (lookup, direct counters and meters, selectors, then the chosen action inlined)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_instances import enum_name
from softswitch.engine.codegen_types import scalar_width
from softswitch.engine.codegen_walk import applied_actions, applied_table
from softswitch.engine.tables import (
    NO_ACTION,
    ActionCall,
    ActionProfile,
    FieldMatch,
    KeyField,
    MatchKind,
    Table,
    TableEntry,
)
from softswitch.errors import P4Error, UnsupportedError

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


@dataclass
class TableInfo:
    """What the code generator knows about one table instance."""

    gname: str
    table: Table
    decl: ir.TableDecl
    path: str
    local_actions: set[int]


class TableGen:
    """Table instances and ``table.apply()``."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    def action_fq(self, action: ir.ActionDecl, path: str) -> str:
        if id(action) in self.ctx.top_actions:
            return ir.qualify("", action.cp_name)
        return ir.qualify(path, action.cp_name)

    def make_table(
        self, decl: ir.TableDecl, path: str, names: dict[int, object], local_actions: set[int]
    ) -> TableInfo:
        name = ir.qualify(path, decl.cp_name)
        keys = _key_fields(decl)
        action_names, params, tableonly, defaultonly = self._table_actions(decl, path)
        default = NO_ACTION
        if decl.default_action is not None:
            default = self._action_call(decl.default_action, path)
        impl = None
        if decl.implementation is not None:
            impl = self._implementation(decl.implementation, path, names)
        meter_kind = None
        if decl.meters is not None:
            meter_kind = enum_name(decl.meters.args[0], "bytes") if decl.meters.args else "bytes"
        table = Table(
            name,
            keys,
            action_names,
            decl.size or 1024,
            default,
            const_default_action=decl.default_action_const,
            has_const_entries=decl.entries is not None and decl.entries_const,
            action_params=params,
            tableonly=tableonly,
            defaultonly=defaultonly,
            implementation=impl,
            support_timeout=decl.support_timeout,
            direct_meter_kind=meter_kind,
        )
        if decl.entries:
            self._load_entries(table, decl, keys, path)
        self.ctx.out.tables[name] = table
        if decl.counters is not None:
            self.ctx.out.direct_counters[ir.qualify(path, decl.counters.cp_name)] = table
        if decl.meters is not None:
            self.ctx.out.direct_meters[ir.qualify(path, decl.meters.cp_name)] = table
        gname = self.ctx.add_global("tbl_" + decl.name, table)
        return TableInfo(gname, table, decl, path, local_actions)

    def _table_actions(
        self, decl: ir.TableDecl, path: str
    ) -> tuple[list[str], dict[str, list[int]], list[str], list[str]]:
        """The table's actions by full name, their parameters' widths, and those only
        for entries or only as the default; records each action's parameter names for
        the tracer."""
        action_names: list[str] = []
        params: dict[str, list[int]] = {}
        tableonly, defaultonly = [], []
        for aref in decl.actions:
            fq = self.action_fq(aref.action, path)
            action_names.append(fq)
            params[fq] = [scalar_width(p.type) for p in aref.action.cp_params]
            self.ctx.action_param_names[fq] = [
                (p.name, scalar_width(p.type)) for p in aref.action.cp_params
            ]
            if "tableonly" in aref.annotations:
                tableonly.append(fq)
            if "defaultonly" in aref.annotations:
                defaultonly.append(fq)
        return action_names, params, tableonly, defaultonly

    def _implementation(
        self, inst: ir.Instance, path: str, names: dict[int, object]
    ) -> ActionProfile:
        """The action profile/selector object of a table (made here when the block has
        not made it yet)."""
        impl_name = names.get(id(inst))
        if impl_name is None:
            impl_name = self.ctx.instances.make_extern(inst, path)
            names[id(inst)] = impl_name
        assert isinstance(impl_name, str), "an action profile/selector is a global"
        impl: ActionProfile = self.ctx.ns[impl_name]
        return impl

    def _action_call(self, aref: ir.ActionRef, path: str) -> ActionCall:
        ndir = len([p for p in aref.action.params if p.direction])
        cp_args = aref.args[ndir:] if len(aref.args) > ndir else []
        if len(aref.args) == len(aref.action.cp_params) and ndir:
            cp_args = aref.args  # only the control-plane arguments were given
        vals = tuple(int(self.ctx.exprs.const_value(a)) for a in cp_args)
        return ActionCall(self.action_fq(aref.action, path), vals)

    def _load_entries(
        self, table: Table, decl: ir.TableDecl, keys: list[KeyField], path: str
    ) -> None:
        entries = decl.entries or []
        explicit = any(ce.priority is not None for ce in entries)
        needs_priority = table.requires_priority
        for i, ce in enumerate(entries):
            matches = []
            key_decls = [k for k in decl.keys if k.match_kind != "selector"]
            for kd, kf, ks in zip(key_decls, keys, ce.keysets, strict=False):
                matches.append(_field_match(kf, ks, kd.loc))
            if not needs_priority:
                prio = 0
            elif explicit:
                prio = ce.priority or 0
                if not decl.largest_priority_wins:
                    prio = (1 << 24) - prio
            else:
                prio = len(entries) - i
            entry = TableEntry(
                tuple(matches),
                self._action_call(ce.action, path),
                priority=prio,
                is_const=decl.entries_const,
            )
            table.add_const_entry(entry)

    def _on_hit(
        self, decl: ir.TableDecl, T: str, ent: str, ac: str, sc: Scope, em: Emitter
    ) -> None:
        """What a hit does: count and meter the entry, note the hit time, and pick the
        action (from the selector's group member for an action profile/selector)."""
        if decl.counters is not None:
            em.line(f"{ent}.packets += 1")
            em.line(f"{ent}.bytes += _ctx.ingress_length")
        if decl.support_timeout:
            em.line(f"{ent}.last_hit_ns = _now()")
        if decl.meters is not None:
            em.line(f"_ctx.meter_color = {T}.execute_meter({ent}, _ctx.ingress_length, _now())")
        if decl.implementation is None:
            em.line(f"{ac} = {ent}.action")
            return
        sel = [k for k in decl.keys if k.match_kind == "selector"]
        h = "0"
        if sel:
            data = ir.ListExpr(
                ir.TupleType(tuple(k.expr.type for k in sel)),
                decl.loc,
                [k.expr for k in sel],
            )
            packed = self.ctx.exprs.packed_bytes(data, sc, em)
            h = f"{T}.implementation.selector_hash({packed})"
        em.line(f"{ac} = {T}.action_for({ent}, {h})")
        with em.block(f"if {ac} is None:"):
            em.line(f"{ac} = {T}.default_action")

    def table_info(self, decl: ir.TableDecl, sc: Scope) -> TableInfo:
        info = sc.names.get(id(decl))
        if not isinstance(info, TableInfo):
            raise P4Error(f"internal: table {decl.name} not instantiated", decl.loc)
        return info

    def apply_table(self, e: ir.Expr, sc: Scope, em: Emitter) -> tuple[str, str]:
        decl = applied_table(e)
        info = self.table_info(decl, sc)
        T = info.gname
        keys = [
            self.ctx.exprs.expr(k.expr, sc, em) for k in decl.keys if k.match_kind != "selector"
        ]
        ent, hit, ac, an = (
            self.ctx.tmp("ent"),
            self.ctx.tmp("hit"),
            self.ctx.tmp("ac"),
            self.ctx.tmp("an"),
        )
        if keys:
            em.line(f"{ent} = {T}.lookup(({''.join(k + ', ' for k in keys)}))")
        else:
            em.line(f"{ent} = None")
        with em.block(f"if {ent} is None:"):
            em.line(f"{hit} = False")
            em.line(f"{ac} = {T}.default_action")
        with em.block("else:"):
            em.line(f"{hit} = True")
            self._on_hit(decl, T, ent, ac, sc, em)
        em.line(f"{an} = {ac}.name")
        if self.ctx.trace:
            em.line(f"_tr.table({info.table.name!r}, {hit}, {ac})")
        first = True
        for aref in applied_actions(decl):
            fq = self.action_fq(aref.action, info.path)
            ndir = len([p for p in aref.action.params if p.direction])
            dir_args = list(aref.args[:ndir]) + [None] * (ndir - len(aref.args[:ndir]))
            ncp = len(aref.action.cp_params)
            kw = "if" if first else "elif"
            first = False
            with em.block(f"{kw} {an} == {fq!r}:"):
                cp = []
                if ncp:
                    cpv = [self.ctx.tmp("c") for _ in range(ncp)]
                    em.line(f"{', '.join(cpv)}, = {ac}.args")
                    cp = cpv
                self.ctx.calls.inline_action(aref.action, dir_args, cp, sc, em)
        return hit, an


def _key_fields(decl: ir.TableDecl) -> list[KeyField]:
    """The table's key fields as the control plane matches them (selector keys left
    out: they only feed the selector's hash)."""
    keys = []
    for k in decl.keys:
        if k.match_kind == "selector":
            continue
        try:
            mk = MatchKind(k.match_kind)
        except ValueError:
            raise UnsupportedError(f"match kind {k.match_kind}", k.loc) from None
        keys.append(KeyField(k.name, mk, scalar_width(k.expr.type)))
    return keys


def _field_match(kf: KeyField, ks: ir.Keyset, loc: ir.Loc) -> FieldMatch | None:
    """A const entry's keyset as a control-plane match of the key's kind."""
    m = (1 << kf.width) - 1
    if isinstance(ks, ir.KeysetDefault):
        return None
    kind = kf.match_kind
    fm = None
    if isinstance(ks, ir.KeysetValue):
        fm = _value_match(kf, ks.value & m)
    elif isinstance(ks, ir.KeysetMask):
        fm = _mask_match(kf, ks, m, loc)
    if fm is not None:
        return fm
    if isinstance(ks, ir.KeysetRange) and kind == MatchKind.RANGE:
        return FieldMatch(value=ks.low & m, high=ks.high & m)
    raise P4Error(f"keyset {type(ks).__name__} does not fit a {kind.value} key", loc)


def _value_match(kf: KeyField, v: int) -> FieldMatch | None:
    """A single value as a match of the key's kind (None: no such match)."""
    kind = kf.match_kind
    if kind == MatchKind.EXACT:
        return FieldMatch(value=v)
    if kind in (MatchKind.TERNARY, MatchKind.OPTIONAL):
        return FieldMatch(value=v, mask=(1 << kf.width) - 1)
    if kind == MatchKind.LPM:
        return FieldMatch(value=v, prefix_len=kf.width)
    if kind == MatchKind.RANGE:
        return FieldMatch(value=v, high=v)
    return None


def _mask_match(kf: KeyField, ks: ir.KeysetMask, m: int, loc: ir.Loc) -> FieldMatch | None:
    """``value &&& mask`` as a ternary match, or an LPM one when the mask is a prefix
    (None: the key's kind takes no mask)."""
    mk = ks.mask & m
    if kf.match_kind == MatchKind.TERNARY:
        return FieldMatch(value=ks.value & mk, mask=mk)
    if kf.match_kind == MatchKind.LPM:
        plen = bin(mk).count("1")
        if mk != (m ^ ((1 << (kf.width - plen)) - 1)):
            raise P4Error("LPM mask is not a prefix", loc)
        return FieldMatch(value=ks.value & mk, prefix_len=plen)
    return None
