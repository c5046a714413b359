"""IR -> one generated Python module per program, compiled once.

:func:`compile_program` turns a checked :class:`softswitch.ir.Program` into Python source
(one class per header/struct type, one function per top-level parser/control instance
with actions, tables, sub-controls and sub-parsers inlined), runs ``compile``/``exec`` on it
once and hands back the callables together with the run-time state objects (tables,
registers, counters, meters, action profiles) that the code refers to. Nothing walks the IR
per packet.

The generated functions take ``_ctx`` (a :class:`softswitch.engine.runtime.PacketCtx`)
followed by the block's apply parameters in order, without ``packet_in``/``packet_out``:
a parser returns its error code (the unparsed rest starts at ``_ctx.pos``), a deparser
returns the whole frame: the emitted headers followed by the unparsed payload. Set ``SOFTSWITCH_DUMP_CODE=path`` to write the generated
source to a file for debugging.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from softswitch import ir
from softswitch.engine import externs as ext
from softswitch.engine import runtime as rt
from softswitch.engine.codegen_emit import BlockArg, Emitter, Scope
from softswitch.engine.codegen_expr import strip
from softswitch.engine.codegen_externs import ExternMixin
from softswitch.engine.codegen_types import TypeRegistry, attr, is_composite, scalar_width
from softswitch.engine.codegen_vector import VectorMixin
from softswitch.engine.codegen_vector import runtime_globals as vector_globals
from softswitch.engine.externs import Counter, Meter, Register, hash_reduce, hash_value, pack_fields
from softswitch.engine.tables import (
    NO_ACTION,
    ActionCall,
    ActionProfile,
    ActionSelector,
    FieldMatch,
    KeyField,
    MatchKind,
    Table,
    TableEntry,
)
from softswitch.engine.target import TargetSpec
from softswitch.engine.trace import PacketTracer
from softswitch.errors import P4Error, UnsupportedError

log = logging.getLogger(__name__)
p4log = logging.getLogger("softswitch.p4")

PARSER_LOOP_LIMIT = 10000  # state transitions through back edges before ParserTimeout
PARSER_TREE_LIMIT = 64  # states (counted along every path) up to which a loop-free parser
# is generated as nested code instead of a state machine


@dataclass
class TableInfo:
    """What the code generator knows about one table instance."""

    gname: str
    table: Table
    decl: ir.TableDecl
    path: str
    local_actions: set[int]


@dataclass
class CompiledProgram:
    """Callables and run-time state of one compiled program."""

    program: ir.Program
    source: str
    namespace: dict[str, Any]
    blocks: dict[str, Callable[..., Any]]  # role ("parser", ...) -> function, in main order
    block_params: dict[str, list[ir.Param]]
    classes: dict[str, type]  # role of each apply-parameter type name -> class
    tables: dict[str, Table] = field(default_factory=dict)
    registers: dict[str, Register] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    meters: dict[str, Meter] = field(default_factory=dict)
    action_profiles: dict[str, ActionProfile] = field(default_factory=dict)
    direct_counters: dict[str, Table] = field(default_factory=dict)
    direct_meters: dict[str, Table] = field(default_factory=dict)
    field_lists: dict[int, Callable[[Any, Any], None]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    code: str = ""  # the generated functions only (no type classes): what the program does

    def new(self, t: ir.Type) -> Any:
        """A fresh (zero / invalid) value of a composite type of the program."""
        return self.namespace[self._cls_names[id(strip(t))]]()

    _cls_names: dict[int, str] = field(default_factory=dict)
    tracer: PacketTracer | None = None  # set when compiled with trace=True


class CodeGen(VectorMixin, ExternMixin):
    """Generates the module for one program (see :func:`compile_program`)."""

    def __init__(
        self,
        program: ir.Program,
        target: TargetSpec,
        log_enabled: bool = False,
        trace: bool = False,
    ) -> None:
        self.program = program
        self.target = target
        self.trace = trace
        self.log_enabled = log_enabled or trace
        # action name -> control-plane parameter (name, width)s (for traces)
        self.action_param_names: dict[str, list[tuple[str, int]]] = {}
        self.types = TypeRegistry()
        self.ns: dict[str, Any] = {}
        self.global_inits: list[str] = []
        self.functions: list[str] = []
        self._n = 0
        self._exit_memo = {}
        self._fn_names: dict[int, str] = {}
        self._block_cache: dict[tuple[int, str], dict[int, object]] = {}
        self.out = CompiledProgram(program, "", self.ns, {}, {}, {}, errors=list(program.errors))
        self.global_names: dict[int, object] = {}
        self.top_actions = {id(a) for a in program.actions.values()}

    # ------------------------------------------------------------------ helpers

    def tmp(self, prefix: str = "t") -> str:
        self._n += 1
        return f"_{prefix}{self._n}"

    def err_code(self, name: str) -> int:
        try:
            return self.program.errors.index(name)
        except ValueError:
            raise P4Error(f"error.{name} is not declared (include core.p4)") from None

    def add_global(self, prefix: str, obj: object, init: str | None = None) -> str:
        self._n += 1
        name = f"G{self._n}_{''.join(c if c.isalnum() else '_' for c in prefix)}"
        if init is not None:
            self.global_inits.append(f"{name} = {init}")
        else:
            self.ns[name] = obj
        return name

    def const_value(self, e: ir.Expr) -> Any:
        """Value of a compile-time constant expression."""
        sc = Scope(path="", env={}, names=self.global_names)
        em = Emitter()
        text = self.expr(e, sc, em)
        if em.lines:
            raise P4Error("expected a compile-time constant", e.loc)
        return eval(text, dict(self._runtime_globals()))  # noqa: S307 - our own generated text

    def _runtime_globals(self) -> dict[str, Any]:
        return {
            "_ParserReject": rt.ParserReject,
            "_Struct": struct.Struct,
            "_P4Exit": rt.P4Exit,
            "_P4AssertionFailed": rt.P4AssertionFailed,
            "_Stack": rt.Stack,
            "_stack_next": rt.stack_next,
            "_stack_last": rt.stack_last,
            "_stack_at": rt.stack_at,
            "_stack_at_parser": rt.stack_at_parser,
            "_sext": rt.sext,
            "_shl": rt.shl,
            "_sshr": rt.sshr,
            "_udiv": rt.udiv,
            "_umod": rt.umod,
            "_sdiv": rt.sdiv,
            "_smod": rt.smod,
            "_ssat_add": rt.ssat_add,
            "_ssat_sub": rt.ssat_sub,
            "_pack_fields": pack_fields,
            "_hash_value": hash_value,
            "_h_crc32": rt.crc32,
            "_h_crc16": functools.partial(ext.crc, ext.CRC16_PARAMS),
            "_h_csum16": ext.csum16,
            "_h_xor16": ext.xor16,
            "_h_identity": ext.identity,
            "_csum16_int": rt.csum16_int,
            "_csum16_payload": rt.csum16_payload,
            "_hash_reduce": hash_reduce,
            "_lookahead_bits": rt.lookahead_bits,
            "_advance": rt.advance,
            **vector_globals(),
        }

    # ------------------------------------------------------------------ resources

    def _instance_name(self, inst: ir.Instance, path: str) -> str:
        return ir.qualify(path, inst.cp_name)

    def make_extern(self, inst: ir.Instance, path: str) -> str | None:
        """Create the run-time object of an extern instance; its module-level name."""
        t = inst.type
        if not isinstance(t, ir.ExternType):
            return None
        name = self._instance_name(inst, path)
        args = [self.const_value(a) for a in inst.args]
        kind = t.name
        if kind == "register":
            width = scalar_width(t.type_args[0]) if t.type_args else 32
            obj: Any = Register(name, int(args[0]), width)
            self.out.registers[name] = obj
        elif kind == "counter":
            obj = Counter(name, int(args[0]), self._enum_name(inst.args[1], "packets_and_bytes"))
            self.out.counters[name] = obj
        elif kind == "meter":
            obj = Meter(name, int(args[0]), self._enum_name(inst.args[1], "bytes"))
            self.out.meters[name] = obj
        elif kind == "action_profile":
            obj = ActionProfile(name, int(args[0]))
            self.out.action_profiles[name] = obj
        elif kind == "action_selector":
            algo = self._enum_name(inst.args[0], "crc16")
            obj = ActionSelector(name, int(args[1]), algo, int(args[2]) if len(args) > 2 else 0)
            self.out.action_profiles[name] = obj
        elif kind in ("direct_counter", "direct_meter"):
            return None  # attached to their table, see make_table
        else:
            raise UnsupportedError(f"extern {kind}", inst.loc)
        return self.add_global(kind, obj)

    def _enum_name(self, e: ir.Expr, default: str) -> str:
        if isinstance(e, ir.EnumMember):
            return e.member
        return default

    def action_fq(self, action: ir.ActionDecl, path: str) -> str:
        if id(action) in self.top_actions:
            return ir.qualify("", action.cp_name)
        return ir.qualify(path, action.cp_name)

    def make_table(
        self, decl: ir.TableDecl, path: str, names: dict[int, object], local_actions: set[int]
    ) -> TableInfo:
        name = ir.qualify(path, decl.cp_name)
        keys = []
        for k in decl.keys:
            if k.match_kind == "selector":
                continue
            try:
                mk = MatchKind(k.match_kind)
            except ValueError:
                raise UnsupportedError(f"match kind {k.match_kind}", k.loc) from None
            keys.append(KeyField(k.name, mk, scalar_width(k.expr.type)))
        action_names: list[str] = []
        params: dict[str, list[int]] = {}
        tableonly, defaultonly = [], []
        for aref in decl.actions:
            fq = self.action_fq(aref.action, path)
            action_names.append(fq)
            params[fq] = [scalar_width(p.type) for p in aref.action.cp_params]
            self.action_param_names[fq] = [
                (p.name, scalar_width(p.type)) for p in aref.action.cp_params
            ]
            if "tableonly" in aref.annotations:
                tableonly.append(fq)
            if "defaultonly" in aref.annotations:
                defaultonly.append(fq)
        default = NO_ACTION
        if decl.default_action is not None:
            default = self._action_call(decl.default_action, path)
        impl = None
        if decl.implementation is not None:
            impl_name = names.get(id(decl.implementation))
            if impl_name is None:
                impl_name = self.make_extern(decl.implementation, path)
                names[id(decl.implementation)] = impl_name
            impl = self.ns[impl_name]  # type: ignore[index]
        meter_kind = None
        if decl.meters is not None:
            meter_kind = (
                self._enum_name(decl.meters.args[0], "bytes") if decl.meters.args else "bytes"
            )
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
        self.out.tables[name] = table
        if decl.counters is not None:
            self.out.direct_counters[ir.qualify(path, decl.counters.cp_name)] = table
        if decl.meters is not None:
            self.out.direct_meters[ir.qualify(path, decl.meters.cp_name)] = table
        gname = self.add_global("tbl_" + decl.name, table)
        return TableInfo(gname, table, decl, path, local_actions)

    def _action_call(self, aref: ir.ActionRef, path: str) -> ActionCall:
        ndir = len([p for p in aref.action.params if p.direction])
        cp_args = aref.args[ndir:] if len(aref.args) > ndir else []
        if len(aref.args) == len(aref.action.cp_params) and ndir:
            cp_args = aref.args  # only the control-plane arguments were given
        vals = tuple(int(self.const_value(a)) for a in cp_args)
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

    def table_info(self, decl: ir.TableDecl, sc: Scope) -> TableInfo:
        info = sc.names.get(id(decl))
        if not isinstance(info, TableInfo):
            raise P4Error(f"internal: table {decl.name} not instantiated", decl.loc)
        return info

    def register_locals(
        self, decl: ir.ControlDecl | ir.ParserDecl, path: str
    ) -> tuple[dict[int, object], set[int]]:
        """Instantiate the tables and externs declared in a block instance at ``path``."""
        key = (id(decl), path)
        names = dict(self.global_names)
        local_actions = {id(x) for x in decl.locals if isinstance(x, ir.ActionDecl)}
        if key in self._block_cache:
            names.update(self._block_cache[key])
            return names, local_actions
        mine: dict[int, object] = {}
        for x in decl.locals:
            if isinstance(x, ir.Instance) and isinstance(x.type, ir.ExternType):
                if id(x) in names:
                    continue
                g = self.make_extern(x, path)
                if g is not None:
                    names[id(x)] = mine[id(x)] = g
        for x in decl.locals:
            if isinstance(x, ir.TableDecl):
                info = self.make_table(x, path, names, local_actions)
                names[id(x)] = mine[id(x)] = info
        self._block_cache[key] = mine
        return names, local_actions

    def block_scope(self, inst: ir.Instance, sc: Scope, where: BlockArg | None = None) -> Scope:
        """The scope of sub-block ``inst`` declared in the block at ``sc.path`` (or, for an
        instance passed as a constructor argument, where ``where`` says it was declared)."""
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        decl_path, decl_args = (sc.path, sc.block_args) if where is None else where[1:]
        path = ir.qualify(decl_path, inst.cp_name)
        names, local_actions = self.register_locals(decl, path)
        env, block_args = self.ctor_bindings(decl, inst, decl_path, decl_args)
        inner = sc.child(
            path=path, env=env, names=names, local_actions=local_actions, ret="return",
            block_args=block_args, loop_updates=None, loop_ret_flag=None,
        )  # fmt: skip
        return inner

    def ctor_bindings(
        self,
        decl: ir.ParserDecl | ir.ControlDecl,
        inst: ir.Instance,
        decl_path: str,
        decl_args: dict[ir.Variable, BlockArg],
    ) -> tuple[dict[ir.Variable, str], dict[ir.Variable, BlockArg]]:
        """Constructor arguments of ``inst``: constants into the env; parser/control
        instances (declared beside ``inst`` at ``decl_path``, or passed on from the
        declaring block's own constructor parameters) into the block bindings."""
        env: dict[ir.Variable, str] = {}
        block_args: dict[ir.Variable, BlockArg] = {}
        for p, a in zip(decl.ctor_params, inst.args, strict=False):
            if isinstance(a, ir.InstanceRef) and isinstance(a.instance, ir.Instance):
                block_args[p] = (a.instance, decl_path, decl_args)
            elif isinstance(a, ir.VarRef) and a.var in decl_args:
                block_args[p] = decl_args[a.var]
            else:
                env[p] = repr(self.const_value(a))
        return env, block_args

    # ------------------------------------------------------------------ tables

    def apply_table(self, e: ir.Expr, sc: Scope, em: Emitter) -> tuple[str, str]:
        assert isinstance(e, ir.MethodCall) and isinstance(e.target, ir.InstanceRef)
        decl = e.target.instance
        assert isinstance(decl, ir.TableDecl)
        info = self.table_info(decl, sc)
        T = info.gname
        keys = [self.expr(k.expr, sc, em) for k in decl.keys if k.match_kind != "selector"]
        ent, hit, ac, an = self.tmp("ent"), self.tmp("hit"), self.tmp("ac"), self.tmp("an")
        if keys:
            em.line(f"{ent} = {T}.lookup(({''.join(k + ', ' for k in keys)}))")
        else:
            em.line(f"{ent} = None")
        with em.block(f"if {ent} is None:"):
            em.line(f"{hit} = False")
            em.line(f"{ac} = {T}.default_action")
        with em.block("else:"):
            em.line(f"{hit} = True")
            if decl.counters is not None:
                em.line(f"{ent}.packets += 1")
                em.line(f"{ent}.bytes += _ctx.ingress_length")
            if decl.support_timeout:
                em.line(f"{ent}.last_hit_ns = _now()")
            if decl.meters is not None:
                em.line(f"_ctx.meter_color = {T}.execute_meter({ent}, _ctx.ingress_length, _now())")
            if decl.implementation is not None:
                sel = [k for k in decl.keys if k.match_kind == "selector"]
                h = "0"
                if sel:
                    data = ir.ListExpr(
                        ir.TupleType(tuple(k.expr.type for k in sel)),
                        decl.loc,
                        [k.expr for k in sel],
                    )
                    h = f"{T}.implementation.selector_hash({self.packed_bytes(data, sc, em)})"
                em.line(f"{ac} = {T}.action_for({ent}, {h})")
                with em.block(f"if {ac} is None:"):
                    em.line(f"{ac} = {T}.default_action")
            else:
                em.line(f"{ac} = {ent}.action")
        em.line(f"{an} = {ac}.name")
        if self.trace:
            em.line(f"_tr.table({info.table.name!r}, {hit}, {ac})")
        arefs = list(decl.actions)
        if decl.default_action is not None and all(
            a.action is not decl.default_action.action for a in arefs
        ):
            arefs.append(decl.default_action)
        first = True
        seen: set[int] = set()
        for aref in arefs:
            if id(aref.action) in seen:
                continue
            seen.add(id(aref.action))
            fq = self.action_fq(aref.action, info.path)
            ndir = len([p for p in aref.action.params if p.direction])
            dir_args = list(aref.args[:ndir]) + [None] * (ndir - len(aref.args[:ndir]))
            ncp = len(aref.action.cp_params)
            kw = "if" if first else "elif"
            first = False
            with em.block(f"{kw} {an} == {fq!r}:"):
                cp = []
                if ncp:
                    cpv = [self.tmp("c") for _ in range(ncp)]
                    em.line(f"{', '.join(cpv)}, = {ac}.args")
                    cp = cpv
                self.inline_action(aref.action, dir_args, cp, sc, em)
        return hit, an

    # ------------------------------------------------------------------ functions

    def function_returns_tuple(self, fn: ir.FunctionDecl) -> bool:
        return any(p.direction in ("out", "inout") and not is_composite(p.type) for p in fn.params)

    def function_name(self, fn: ir.FunctionDecl) -> str:
        key = id(fn)
        if key in self._fn_names:
            return self._fn_names[key]
        self._n += 1
        name = f"F{self._n}_{''.join(c if c.isalnum() else '_' for c in fn.name)}"
        self._fn_names[key] = name
        em = Emitter(1)
        env: dict[ir.Variable, str] = {}
        args: list[str] = []
        outs: list[str] = []
        for p in fn.params:
            pn = f"p{p.uid}_{p.name}"
            env[p] = pn
            if p.direction == "out" and not is_composite(p.type):
                em.line(f"{pn} = {self.types.default(p.type)}")
                outs.append(pn)
                continue
            args.append(pn)
            if p.direction == "out":
                em.line(f"{pn}._reset()")
            elif p.direction == "inout" and not is_composite(p.type):
                outs.append(pn)
        sc = Scope(
            path="",
            env=env,
            names=self.global_names,
            ret="return",
            ret_var="_r",
            ret_outs=tuple(outs),
        )
        self.stmt(fn.body, sc, em)
        if outs:
            em.line(f"return (None, {', '.join(outs)})")
        src = [f"def {name}(_ctx, {', '.join(args)}):"] + em.lines + ["    return None"]
        self.functions.append("\n".join(src))
        return name

    # ------------------------------------------------------------------ parsers

    def gen_parser_body(self, decl: ir.ParserDecl, sc: Scope, em: Emitter) -> None:
        order: list[str] = []
        todo = ["start"]
        while todo:
            s = todo.pop(0)
            if s in order or s in ("accept", "reject"):
                continue
            if s not in decl.states:
                raise P4Error(f"parser {decl.name} has no state {s}", decl.loc)
            order.append(s)
            st = decl.states[s]
            tr = st.transition
            nexts = [tr.next_state] if tr.select is None else [c.next_state for c in tr.cases]
            todo += [n for n in nexts if n]
        index = {s: i for i, s in enumerate(order)}
        noerr = self.err_code("NoError")
        if _tree_size(decl, "start", 0) <= PARSER_TREE_LIMIT:
            self._parser_tree(decl, "start", noerr, sc, em)
            return
        stv, itv = self.tmp("st"), self.tmp("it")
        em.line(f"{stv} = 0")
        em.line(f"{itv} = 0")
        with em.block("while True:"):
            for i, s in enumerate(order):
                with em.block(f"if {stv} == {i}:"):
                    state = decl.states[s]
                    if self.trace:
                        em.line(f"_tr.state({s!r})")
                    self.stmts(state.stmts, sc, em)
                    self._transition(state.transition, i, index, stv, itv, noerr, sc, em)

    def _parser_tree(
        self, decl: ir.ParserDecl, name: str, noerr: int, sc: Scope, em: Emitter
    ) -> None:
        """An acyclic parser as nested code: each state inlined where it is entered, so no
        state variable is dispatched per state (``accept`` falls through to the end)."""
        if name == "accept":
            return
        if name == "reject":
            em.line(f"raise _ParserReject({noerr})")
            return
        state = decl.states[name]
        if self.trace:
            em.line(f"_tr.state({name!r})")
        self.stmts(state.stmts, sc, em)
        tr = state.transition
        if tr.select is None:
            self._parser_tree(decl, tr.next_state or "reject", noerr, sc, em)
            return
        cases = self._select_cases(tr, sc, em)
        first = True
        for conds, target in cases:
            if conds is None:  # default
                if first:
                    self._parser_tree(decl, target, noerr, sc, em)
                else:
                    with em.block("else:"):
                        self._parser_tree(decl, target, noerr, sc, em)
                return
            with em.block(f"{'if' if first else 'elif'} {conds}:"):
                self._parser_tree(decl, target, noerr, sc, em)
            first = False
        # no case matched: BMv2 ends parsing there as at an explicit reject (p4c's BMv2 JSON
        # has no default transition, and a missing one ends the parser without an error)
        if first:
            self._parser_tree(decl, "reject", noerr, sc, em)
        else:
            with em.block("else:"):
                self._parser_tree(decl, "reject", noerr, sc, em)

    def _select_cases(
        self, tr: ir.Transition, sc: Scope, em: Emitter
    ) -> list[tuple[str | None, str]]:
        """``(condition or None for a default, next state)`` of a select, in order, up to
        the first default; the select keys are evaluated once, into temporaries."""
        keys = []
        widths = []
        for x in tr.select or []:
            k = self.tmp("k")
            em.line(f"{k} = {self.expr(x, sc, em)}")
            keys.append(k)
            t = strip(x.type)
            widths.append(scalar_width(t) if not isinstance(t, ir.IntLitType) else None)
        out: list[tuple[str | None, str]] = []
        for case in tr.cases:
            conds = []
            for k, w, ks in zip(keys, widths, case.keysets, strict=False):
                m = (1 << w) - 1 if w else -1
                if isinstance(ks, ir.KeysetDefault):
                    continue
                if isinstance(ks, ir.KeysetValue):
                    conds.append(f"{k} == {ks.value & m}")
                elif isinstance(ks, ir.KeysetMask):
                    conds.append(f"({k} & {ks.mask & m}) == {ks.value & ks.mask & m}")
                elif isinstance(ks, ir.KeysetRange):
                    conds.append(f"{ks.low & m} <= {k} <= {ks.high & m}")
                else:
                    raise UnsupportedError(f"select keyset {type(ks).__name__}", case.loc)
            if not conds:
                out.append((None, case.next_state))
                break
            out.append((" and ".join(conds), case.next_state))
        return out

    def _goto(
        self,
        target: str,
        here: int,
        index: dict[str, int],
        stv: str,
        itv: str,
        noerr: int,
        em: Emitter,
    ) -> None:
        if target == "accept":
            em.line("break")
        elif target == "reject":
            em.line(f"raise _ParserReject({noerr})")
        else:
            j = index[target]
            em.line(f"{stv} = {j}")
            if j <= here:
                em.line(f"{itv} += 1")
                with em.block(f"if {itv} > {PARSER_LOOP_LIMIT}:"):
                    em.line(f"raise _ParserReject({self.err_code('ParserTimeout')})")
                em.line("continue")

    def _transition(
        self,
        tr: ir.Transition,
        here: int,
        index: dict[str, int],
        stv: str,
        itv: str,
        noerr: int,
        sc: Scope,
        em: Emitter,
    ) -> None:
        if tr.select is None:
            self._goto(tr.next_state or "reject", here, index, stv, itv, noerr, em)
            return
        first = True
        for conds, target in self._select_cases(tr, sc, em):
            if conds is None:
                if first:
                    self._goto(target, here, index, stv, itv, noerr, em)
                else:
                    with em.block("else:"):
                        self._goto(target, here, index, stv, itv, noerr, em)
                return
            with em.block(f"{'if' if first else 'elif'} {conds}:"):
                self._goto(target, here, index, stv, itv, noerr, em)
            first = False
        # no case matched: as an explicit reject on BMv2 (see _parser_tree)
        if first:
            self._goto("reject", here, index, stv, itv, noerr, em)
        else:
            with em.block("else:"):
                self._goto("reject", here, index, stv, itv, noerr, em)

    # ------------------------------------------------------------------ top level

    def _param_name(self, p: ir.Param) -> str:
        return f"P{p.uid}_{''.join(c if c.isalnum() else '_' for c in p.name)}"

    def gen_top(self, role: str, inst: ir.Instance) -> None:
        """One module-level function for a block instance the architecture calls."""
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        path = decl.name
        names, local_actions = self.register_locals(decl, path)
        env, block_args = self.ctor_bindings(decl, inst, "", {})
        args = []
        sm = None
        pkt_in = pkt_out = False
        for p in decl.params:
            t = strip(p.type)
            if isinstance(t, ir.ExternType):
                pkt_in = pkt_in or t.name == "packet_in"
                pkt_out = pkt_out or t.name == "packet_out"
                continue
            n = self._param_name(p)
            env[p] = n
            args.append(n)
            if isinstance(t, ir.StructType) and t.name == "standard_metadata_t":
                sm = n
        sc = Scope(
            path=path, env=env, names=names, ret="return", sm=sm, local_actions=local_actions,
            block_args=block_args,
        )  # fmt: skip
        sc.obj_cache = {}
        sc.obj_roots = set(args)
        fname = f"blk_{role}"
        em = Emitter(1)
        if isinstance(decl, ir.ParserDecl):
            sc.in_parser = True
            sc.pkt = ("_data", "_pos")
            em.line("_data = _ctx.data")
            em.line("_pos = 0")
            with em.block("try:"):
                for x in decl.locals:
                    if isinstance(x, ir.VarDecl):
                        self.stmt(x, sc, em)
                self.gen_parser_body(decl, sc, em)
            with em.block("except _ParserReject as _err:"):
                em.line("_ctx.pos = _pos")
                em.line("return _tr.parser_end(_err.code)" if self.trace else "return _err.code")
            em.line("_ctx.pos = _pos")
            noerr = self.err_code("NoError")
            em.line(f"return _tr.parser_end({noerr})" if self.trace else f"return {noerr}")
        else:
            if pkt_out:
                sc.out = "_out"
                em.line("_out = bytearray()")
            if role == "ingress":
                sc.digest_sites = []
                em.line("_dg = 0")
            for x in decl.locals:
                if isinstance(x, ir.VarDecl):
                    self.stmt(x, sc, em)
            if self.may_exit(decl.body):
                with em.block("try:"):
                    self.stmt(decl.body, sc, em)
                with em.block("except _P4Exit:"):
                    em.line("pass")
            else:
                self.stmt(decl.body, sc, em)
            if sc.digest_sites:  # BMv2 learns after ingress: the fields' final values
                with em.block("if _dg:"):
                    for k, (dname, vals) in enumerate(sc.digest_sites, 1):
                        kw = "if" if k == 1 else "elif"
                        with em.block(f"{kw} _dg == {k}:"):
                            em.line(f"_ctx.digest = ({dname!r}, ({vals}))")
            if pkt_out:
                em.line("_out += _ctx.payload")
                em.line("return bytes(_out)")
        binds = [f"    {name} = {text}" for text, name in sc.obj_cache.items()]
        src = [f"def {fname}(_ctx, {', '.join(args)}):"] + binds + (em.lines or ["    pass"])
        self.functions.append("\n".join(src))
        self.out.block_params[role] = list(decl.params)

    def field_list_copiers(self, meta_t: ir.Type) -> None:
        """``@field_list(N)`` metadata fields -> one copy function per N."""
        lists: dict[int, list[str]] = {}

        def visit(t: ir.Type, prefix: str) -> None:
            t = strip(t)
            if not isinstance(t, ir.StructType):
                return
            for f in t.fields:
                path = f"{prefix}.{attr(f.name)}"
                for v in f.annotations.get("field_list", []):
                    idx = self._annotation_int(v)
                    if idx is None:
                        log.warning("ignoring @field_list(%r) on %s", v, f.name)
                        continue
                    stmt = (
                        f"d{path}._set(s{path})" if is_composite(f.type) else f"d{path} = s{path}"
                    )
                    lists.setdefault(idx, []).append(stmt)
                if isinstance(strip(f.type), ir.StructType) and "field_list" not in f.annotations:
                    visit(f.type, path)

        visit(meta_t, "")
        for idx, stmts in sorted(lists.items()):
            name = f"fl_copy_{idx}"
            self.functions.append("\n".join([f"def {name}(d, s):"] + ["    " + s for s in stmts]))
            self.out.field_lists[idx] = name  # type: ignore[assignment]

    def _annotation_int(self, v: object) -> int | None:
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return v
        if isinstance(v, ir.Expr):
            try:
                return int(self.const_value(v))
            except (P4Error, TypeError, ValueError):
                return None
        text = str(v).strip()
        try:
            return int(text, 0)
        except ValueError:
            pass
        if "." in text:  # Enum.member of a serializable enum
            ename, member = text.rsplit(".", 1)
            t = self.program.types.get(ename.strip())
            if isinstance(t, ir.EnumType) and member.strip() in t.values:
                return t.values[member.strip()]
        return None

    def build(self, roles: list[str]) -> CompiledProgram:
        prog = self.program
        for inst in prog.instances.values():
            g = self.make_extern(inst, "")
            if g is not None:
                self.global_names[id(inst)] = g
        args = prog.main.args
        if len(args) != len(roles):
            raise P4Error(
                f"{prog.main.package} main expects {len(roles)} blocks, got {len(args)}",
                prog.main.loc,
            )
        for role, inst in zip(roles, args, strict=False):
            self.gen_top(role, inst)
        parser_params = self.out.block_params.get("parser", [])
        if len(parser_params) >= 3:
            self.field_list_copiers(parser_params[2].type)  # the user metadata struct
        for role in roles:
            for p in self.out.block_params[role]:
                t = strip(p.type)
                if is_composite(t):
                    self.out._cls_names[id(t)] = self.types.cls(t)  # noqa: SLF001
        return self.finish()

    def finish(self) -> CompiledProgram:
        head = [
            "# generated by softswitch.engine.codegen — do not edit",
        ]
        src = "\n".join(
            head
            + self.types.struct_lines()
            + self.types.lines
            + [""]
            + self.global_inits
            + [""]
            + [f + "\n" for f in self.functions]
        )
        ns = self.ns
        ns.update(self._runtime_globals())
        ns["_now"] = time.monotonic_ns
        ns["_rng"] = random.Random()
        ns["_random_between"] = lambda lo, hi: ns["_rng"].randint(lo, hi) if lo <= hi else lo
        ns["_log_msg"] = _log_msg
        if self.trace:
            tracer = PacketTracer(self.program.errors, self.action_param_names)
            ns["_tr"] = tracer
            ns["_log_msg"] = tracer.log_msg
            self.out.tracer = tracer
        dump = os.environ.get("SOFTSWITCH_DUMP_CODE")
        if dump:
            with open(dump, "w", encoding="utf-8") as fh:
                fh.write(src)
        code = compile(src, f"<p4:{self.program.source_file}>", "exec")
        exec(code, ns)  # noqa: S102 - executing our own generated module
        out = self.out
        out.source = src
        out.code = "\n".join(self.functions)
        for role in out.block_params:
            out.blocks[role] = ns[f"blk_{role}"]
        out.field_lists = {i: ns[n] for i, n in out.field_lists.items()}  # type: ignore[misc]
        for tname, cname in self.types._names.items():  # noqa: SLF001
            del tname
            out.classes[cname] = ns[cname]
        return out


def _tree_size(decl: ir.ParserDecl, name: str, depth: int) -> int:
    """States emitted when ``name`` is inlined along every path (a large number for a
    parser with a loop or too deep a nesting, which then stays a state machine)."""
    if name in ("accept", "reject"):
        return 0
    if depth > 12 or name not in decl.states:
        return PARSER_TREE_LIMIT + 1
    tr = decl.states[name].transition
    nexts = [tr.next_state or "reject"] if tr.select is None else [c.next_state for c in tr.cases]
    total = 1
    for n in nexts:
        total += _tree_size(decl, n, depth + 1)
        if total > PARSER_TREE_LIMIT:
            break
    return total


def _log_msg(fmt: str, values: tuple[int, ...]) -> None:
    parts = fmt.split("{}")
    text = parts[0]
    for i, rest in enumerate(parts[1:]):
        text += (str(values[i]) if i < len(values) else "{}") + rest
    p4log.debug("%s", text)


def _field_match(kf: KeyField, ks: ir.Keyset, loc: ir.Loc) -> FieldMatch | None:
    """A const entry's keyset as a control-plane match of the key's kind."""
    m = (1 << kf.width) - 1
    if isinstance(ks, ir.KeysetDefault):
        return None
    kind = kf.match_kind
    if isinstance(ks, ir.KeysetValue):
        v = ks.value & m
        if kind == MatchKind.EXACT:
            return FieldMatch(value=v)
        if kind in (MatchKind.TERNARY, MatchKind.OPTIONAL):
            return FieldMatch(value=v, mask=m)
        if kind == MatchKind.LPM:
            return FieldMatch(value=v, prefix_len=kf.width)
        if kind == MatchKind.RANGE:
            return FieldMatch(value=v, high=v)
    if isinstance(ks, ir.KeysetMask):
        mk = ks.mask & m
        if kind == MatchKind.TERNARY:
            return FieldMatch(value=ks.value & mk, mask=mk)
        if kind == MatchKind.LPM:
            plen = bin(mk).count("1")
            if mk != (m ^ ((1 << (kf.width - plen)) - 1)):
                raise P4Error("LPM mask is not a prefix", loc)
            return FieldMatch(value=ks.value & mk, prefix_len=plen)
    if isinstance(ks, ir.KeysetRange) and kind == MatchKind.RANGE:
        return FieldMatch(value=ks.low & m, high=ks.high & m)
    raise P4Error(f"keyset {type(ks).__name__} does not fit a {kind.value} key", loc)


def compile_program(
    program: ir.Program,
    target: TargetSpec,
    *,
    log_enabled: bool = False,
    trace: bool = False,
) -> CompiledProgram:
    """Generate, compile and load the Python module for ``program`` on ``target`` (its block
    roles and primitives); ``trace`` selects the instrumented variant that reports each
    packet's path to ``CompiledProgram.tracer``."""
    gen = CodeGen(program, target, log_enabled=log_enabled, trace=trace)
    return gen.build(list(target.roles))
