"""Statements: assignments, control flow, loops, and the register-run fast path.

The body of a control instance becomes one Python function whose locals are the P4 locals;
calls in it (actions, functions, sub-blocks) are inlined by
:mod:`softswitch.engine.codegen_calls`, table applies by
:mod:`softswitch.engine.codegen_tables`.

Run-time header-stack indexes in controls follow p4c's BMv2 back end (its
``HSIndexSimplifier`` turns ``hs[i]`` into one branch per element): the index is evaluated
once per statement, and when it is out of range an assignment *to* the element and a
call statement do nothing, an assignment *from* it stores the default (zero / invalid)
value, an ``if`` takes its else branch and a ``switch`` runs no case. Arguments written
back by copy-out (``s[i]`` as an ``out`` argument) are located before the call, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import PyValue, strip
from softswitch.engine.codegen_types import attr, is_composite, scalar_width
from softswitch.engine.codegen_walk import (
    dynamic_indexes,
    has_return,
    register_index_base,
    root_var,
)
from softswitch.engine.externs import Register
from softswitch.errors import UnsupportedError
from softswitch.ir_walk import walk

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


class StmtGen:
    """Statements: one ``visit_<IR class>`` method per statement node, plus the
    analyses (may it exit?) and the register-run fast path around them."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx
        self._exit_memo: dict[int, bool] = {}

    # ------------------------------------------------------------------ analysis

    def may_exit(self, node: object) -> bool:
        """True when executing ``node`` can run an ``exit`` statement."""
        return any(self._node_may_exit(n) for n in walk(node))

    def _node_may_exit(self, n: object) -> bool:
        """True when this node itself may exit: an exit, or a call of an action, a
        table or a control that may (a control bound per instance is assumed to)."""
        if isinstance(n, ir.Exit):
            return True
        if isinstance(n, ir.Call) and isinstance(n.callee, ir.ActionDecl):
            return self.decl_exits(n.callee, n.callee.body)
        if not isinstance(n, ir.MethodCall) or n.method != "apply":
            return False
        if isinstance(n.target, ir.InstanceRef):
            return self._applied_may_exit(n.target.instance)
        return (
            isinstance(n.target, ir.VarRef)
            and isinstance(proto := strip(n.target.type), ir.BlockProtoType)
            and proto.kind == "control"
        )  # bound per instance: assume it may exit

    def _applied_may_exit(self, inst: ir.Instance | ir.TableDecl) -> bool:
        """True when applying a table (one of its actions) or a sub-control may exit."""
        if isinstance(inst, ir.TableDecl):
            if any(self.decl_exits(a.action, a.action.body) for a in inst.actions):
                return True
            d = inst.default_action
            return d is not None and self.decl_exits(d.action, d.action.body)
        if isinstance(inst.type, ir.BlockType) and isinstance(inst.type.decl, ir.ControlDecl):
            control = inst.type.decl
            return self.decl_exits(control, control.body)
        return False

    def decl_exits(self, decl: object, body: object) -> bool:
        key = id(decl)
        if key not in self._exit_memo:
            self._exit_memo[key] = False  # no recursion in P4; guards cycles anyway
            self._exit_memo[key] = self.may_exit(body)
        return self._exit_memo[key]

    # ------------------------------------------------------------------ statements

    def stmts(self, stmts: list[ir.Stmt], sc: Scope, em: Emitter) -> None:
        if sc.reg_run is not None and not sc.in_parser:
            self.ctx.vectors.run_stmts(stmts, sc, em)  # nested in a register run's fast path
            return
        if sc.in_parser or len(stmts) < _MIN_RUN_ACCESSES:
            for s in stmts:
                self.stmt(s, sc, em)
            return
        i = 0
        while i < len(stmts):
            run = self._register_run(stmts, i, sc)
            if run is None:
                self.stmt(stmts[i], sc, em)
                i += 1
                continue
            end, var, limit, regs = run
            self._emit_register_run(stmts[i:end], var, limit, regs, sc, em)
            i = end

    # ------------------------------------------------------------------ register runs

    def _register_run(
        self, stmts: list[ir.Stmt], start: int, sc: Scope
    ) -> tuple[int, ir.Variable, int, list[str]] | None:
        """A run of statements from ``start`` that access registers at ``v + constant``
        for one local ``v`` the run never changes (unrolled per-element code such as
        ``r.read(x, base + 3)``): ``(end, v, limit, registers)`` where ``v < limit``
        puts every such index in range, or None when there is no worthwhile run.

        Only plain statements qualify (assignments, ifs, blocks, register accesses,
        isValid); anything that could change ``v`` behind the code's back (a call of an
        action, function, extern or table, a declaration) ends the run."""
        first = _stmt_register_accesses(stmts[start], sc, self.ctx.ns)
        if not first or first[0] is None:
            return None
        bases = [b for b in first[1] if b[1] is not None]
        if not bases:
            return None
        var = bases[0][1]
        assert var is not None
        py = sc.env.get(var)
        t = strip(var.type)
        if py is None or not py.isidentifier() or not isinstance(t, ir.BitType):
            return None
        limits: dict[str, int] = {}
        count = 0
        end = start
        while end < len(stmts):
            info = _stmt_register_accesses(stmts[end], sc, self.ctx.ns)
            if info is None or info[0] is None or var in info[0]:
                break
            for obj, v, c in info[1]:
                if v is var:
                    reg = self.ctx.ns[obj]
                    bound = min(reg.size, 1 << t.width) - c
                    limits[obj] = min(limits.get(obj, bound), bound)
                    count += 1
            end += 1
        if count < _MIN_RUN_ACCESSES or not limits:
            return None
        limit = min(limits.values())
        if limit <= 0:
            return None
        return end, var, limit, sorted(limits)

    def _emit_register_run(
        self,
        stmts: list[ir.Stmt],
        var: ir.Variable,
        limit: int,
        regs: list[str],
        sc: Scope,
        em: Emitter,
    ) -> None:
        """The run twice: with one bounds check for all its indexes and the value lists
        in locals, else as usual (some index out of range: BMv2's per-access rules)."""
        with em.block(f"if {sc.env[var]} < {limit}:"):
            lists: dict[str, str] = {}
            for obj in regs:
                lists[obj] = self.ctx.tmp("rv")
                em.line(f"{lists[obj]} = {obj}.values")
            self.ctx.vectors.run_stmts(stmts, sc.child(reg_run=(var, lists)), em)
        with em.block("else:"):
            for s in stmts:
                self.stmt(s, sc, em)

    def stmt(self, s: ir.Stmt, sc: Scope, em: Emitter) -> None:
        if self.ctx.dynamic_indexes and not sc.in_parser and not isinstance(s, ir.Block):
            dyn = dynamic_indexes(_top_exprs(s))
            if dyn:
                self._guarded_stmt(s, dyn, sc, em)
                return
        # dispatched here rather than through _stmt: one Python frame less per nesting
        # level of the P4 code (with the extra frame, generating netreduce.p4's code took
        # some 20% more CPU time, measured against the mixin version in alternating runs)
        meth = getattr(self, "visit_" + type(s).__name__, None)
        if meth is None:
            raise UnsupportedError(f"statement {type(s).__name__}", getattr(s, "loc", None))
        meth(s, sc, em)

    def _stmt(self, s: ir.Stmt, sc: Scope, em: Emitter) -> None:
        meth = getattr(self, "visit_" + type(s).__name__, None)
        if meth is None:
            raise UnsupportedError(f"statement {type(s).__name__}", getattr(s, "loc", None))
        meth(s, sc, em)

    def visit_Block(self, s: ir.Block, sc: Scope, em: Emitter) -> None:
        self.stmts(s.stmts, sc, em)

    def visit_Assign(self, s: ir.Assign, sc: Scope, em: Emitter) -> None:
        self.assign(s.lhs, s.rhs, sc, em)

    def visit_CallStmt(self, s: ir.CallStmt, sc: Scope, em: Emitter) -> None:
        self.ctx.calls.call_stmt(s.call, sc, em)

    def visit_If(self, s: ir.If, sc: Scope, em: Emitter) -> None:
        c = self.ctx.exprs.cond(s.cond, sc, em)
        with em.block(f"if {c}:"):
            self.stmt(s.then, sc, em)
        if s.else_ is not None and not isinstance(s.else_, ir.Empty):
            with em.block("else:"):
                self.stmt(s.else_, sc, em)

    def visit_Exit(self, s: ir.Exit, sc: Scope, em: Emitter) -> None:
        if self.ctx.trace:
            em.line(f"_tr.note({f'exit at {s.loc}'!r})")
        em.line("raise _P4Exit()")

    def visit_Empty(self, s: ir.Empty, sc: Scope, em: Emitter) -> None:
        pass

    def visit_Break(self, s: ir.Break, sc: Scope, em: Emitter) -> None:
        em.line("break")

    def visit_Continue(self, s: ir.Continue, sc: Scope, em: Emitter) -> None:
        for u in sc.loop_updates or ():
            self.stmt(u, sc, em)
        em.line("continue")

    def _guarded_stmt(self, s: ir.Stmt, dyn: list[ir.Index], sc: Scope, em: Emitter) -> None:
        """``s`` with run-time stack indexes: evaluate each once, then run ``s`` only when
        all are in range (see the module docstring for what happens otherwise)."""
        saved = sc.pins_checked
        sc.pins_checked = False
        mine: list[int] = []
        lhs_guard: list[str] = []
        rhs_guard: list[str] = []
        lhs_ids = set()
        if isinstance(s, ir.Assign):
            lhs_ids = {id(x) for x in dynamic_indexes([s.lhs])}
        try:
            for ix in dyn:
                t = self.ctx.tmp("ix")
                em.line(f"{t} = {self.ctx.exprs.expr(ix.index, sc, em)}")
                sc.pins[id(ix)] = t
                mine.append(id(ix))
                stack = strip(ix.base.type)
                assert isinstance(stack, ir.StackType), "only a header stack has a run-time index"
                size = stack.size
                (lhs_guard if id(ix) in lhs_ids else rhs_guard).append(f"{t} < {size}")
            if isinstance(s, ir.If):
                c = self.ctx.tmp("c")
                with em.block(f"if {' and '.join(rhs_guard)}:"):
                    sc.pins_checked = True
                    em.line(f"{c} = {self.ctx.exprs.cond(s.cond, sc, em)}")
                    sc.pins_checked = False
                with em.block("else:"):
                    em.line(f"{c} = False")
                for k in mine:
                    del sc.pins[k]
                mine = []
                sc.pins_checked = saved
                self._stmt(ir.If(PyValue(ir.BoolType(), c), s.then, s.else_, s.loc), sc, em)
                return
            if isinstance(s, (ir.Assign, ir.VarDecl)):
                lhs = s.lhs if isinstance(s, ir.Assign) else _var_ref(s.var)
                if isinstance(s, ir.VarDecl):
                    self._stmt(ir.VarDecl(s.var, None, s.loc), sc, em)
                rhs = s.rhs if isinstance(s, ir.Assign) else s.init
                assert rhs is not None
                outer = em.indent
                if lhs_guard:
                    em.line(f"if {' and '.join(lhs_guard)}:")
                    em.indent += 1
                sc.pins_checked = True
                if rhs_guard:
                    with em.block(f"if {' and '.join(rhs_guard)}:"):
                        self.assign(lhs, rhs, sc, em)
                    with em.block("else:"):
                        self.assign_default(lhs, sc, em)
                else:
                    self.assign(lhs, rhs, sc, em)
                em.indent = outer
                return
            with em.block(f"if {' and '.join(rhs_guard)}:"):
                sc.pins_checked = True
                self._stmt(s, sc, em)
        finally:
            for k in mine:
                sc.pins.pop(k, None)
            sc.pins_checked = saved

    def assign_default(self, lhs: ir.Expr, sc: Scope, em: Emitter) -> None:
        """``lhs`` = the undefined value p4c gives an out-of-range stack read (zero/invalid)."""
        if is_composite(lhs.type):
            em.line(f"{self.ctx.exprs.lvalue(lhs, sc, em)}._reset()")
            return
        self.assign(lhs, PyValue(lhs.type, self.ctx.types.default(lhs.type)), sc, em)

    def pin_lvalue(self, e: ir.Expr, sc: Scope, em: Emitter) -> ir.Expr:
        """An equivalent lvalue whose run-time parts (stack indexes, ``next``/``last``) are
        evaluated now, so that writing it later does not evaluate them again."""
        if not _needs_pin(e):
            return e
        if isinstance(e, ir.Slice):
            return ir.Slice(e.type, e.loc, self.pin_lvalue(e.base, sc, em), e.hi, e.lo)
        if is_composite(e.type):
            t = self.ctx.tmp("lv")
            em.line(f"{t} = {self.ctx.exprs.expr(e, sc, em)}")
            return PyValue(e.type, t)
        if isinstance(e, ir.Member):
            return ir.Member(e.type, e.loc, self.pin_lvalue(e.base, sc, em), e.name)
        return e

    def visit_VarDecl(self, s: ir.VarDecl, sc: Scope, em: Emitter) -> None:
        name = f"v{s.var.uid}_{_ident(s.var.name)}"
        if s.init is not None:
            val = self.ctx.exprs.value(s.init, sc, em)
        else:
            val = self.ctx.types.default(s.var.type)
        sc.env[s.var] = name
        em.line(f"{name} = {val}")

    # ------------------------------------------------------------------ loops

    def _loop_scope(self, body: ir.Stmt, sc: Scope, updates: list[ir.Stmt]) -> Scope:
        """The scope of a loop body; a ``return`` inside an inlined body (compiled as
        ``break``) gets a flag so that it leaves the body, not only the loop."""
        flag = None
        if sc.ret == "break" and has_return(body):
            flag = self.ctx.tmp("ret")
        return sc.child(loop_updates=updates, loop_ret_flag=flag)

    def _after_loop(self, inner: Scope, sc: Scope, em: Emitter) -> None:
        if inner.loop_ret_flag is not None:
            with em.block(f"if {inner.loop_ret_flag}:"):
                self.visit_Return(ir.Return(None), sc, em)

    def visit_For(self, s: ir.For, sc: Scope, em: Emitter) -> None:
        """``for (init; cond; updates)``: a Python ``while``; ``continue`` runs the updates
        itself before continuing."""
        outer = sc.child()
        for x in s.init:
            self.stmt(x, outer, em)
        inner = self._loop_scope(s.body, outer, s.updates)
        if inner.loop_ret_flag is not None:
            em.line(f"{inner.loop_ret_flag} = False")
        cond = "True"
        pre = Emitter(em.indent + 1)
        if s.cond is not None:
            cond = self.ctx.exprs.cond(s.cond, outer, pre)
        if pre.lines:
            with em.block("while True:"):
                em.lines += pre.lines
                em.line(f"if not ({cond}):")
                em.line("    break")
                self.stmt(s.body, inner, em)
                for u in s.updates:
                    self.stmt(u, inner, em)
        else:
            with em.block(f"while {cond}:"):
                self.stmt(s.body, inner, em)
                for u in s.updates:
                    self.stmt(u, inner, em)
        self._after_loop(inner, sc, em)

    def visit_ForIn(self, s: ir.ForIn, sc: Scope, em: Emitter) -> None:
        """``for (T x in a .. b)`` over a Python ``range``; a list or a stack over a tuple
        of values evaluated before the first iteration."""
        inner = self._loop_scope(s.body, sc, [])
        name = f"v{s.var.uid}_{_ident(s.var.name)}"
        inner.env[s.var] = name
        if inner.loop_ret_flag is not None:
            em.line(f"{inner.loop_ret_flag} = False")
        t = strip(s.var.type)
        if s.collection is None:
            assert s.low is not None and s.high is not None and isinstance(t, ir.BitType)
            lo, hi = self.ctx.tmp("lo"), self.ctx.tmp("hi")
            em.line(f"{lo} = {self.ctx.exprs.expr(s.low, sc, em)}")
            em.line(f"{hi} = {self.ctx.exprs.expr(s.high, sc, em)}")
            if t.signed:
                k = self.ctx.tmp("k")
                header = f"for {k} in range(_sext({lo}, {t.width}), _sext({hi}, {t.width}) + 1):"
                with em.block(header):
                    em.line(f"{name} = {k} & {(1 << t.width) - 1:#x}")
                    self.stmt(s.body, inner, em)
            else:
                with em.block(f"for {name} in range({lo}, {hi} + 1):"):
                    self.stmt(s.body, inner, em)
        else:
            coll = s.collection
            ct = strip(coll.type)
            items = self.ctx.tmp("it")
            if isinstance(coll, ir.ListExpr):
                vals = [self.ctx.exprs.value(x, sc, em) for x in coll.elems]
                em.line(f"{items} = ({''.join(v + ', ' for v in vals)})")
            else:
                assert isinstance(ct, ir.StackType)
                em.line(f"{items} = [_e._copy() for _e in {self.ctx.exprs.expr(coll, sc, em)}.h]")
            with em.block(f"for {name} in {items}:"):
                self.stmt(s.body, inner, em)
        self._after_loop(inner, sc, em)

    def visit_Return(self, s: ir.Return, sc: Scope, em: Emitter) -> None:
        if sc.ret == "break" and sc.loop_ret_flag is not None:
            em.line(f"{sc.loop_ret_flag} = True")
            em.line("break")
            return
        if sc.ret == "break":
            em.line("break")
            return
        if sc.ret_var is not None:  # a function: value plus copy-outs
            val = self.ctx.exprs.value(s.value, sc, em) if s.value is not None else "None"
            if sc.ret_outs:
                em.line(f"return ({val}, {', '.join(sc.ret_outs)})")
            else:
                em.line(f"return {val}")
            return
        em.line("return")

    def assign(self, lhs: ir.Expr, rhs: ir.Expr, sc: Scope, em: Emitter) -> None:
        lt = strip(lhs.type)
        if isinstance(lhs, ir.Slice):
            base = self.ctx.exprs.lvalue(lhs.base, sc, em)
            val = self.ctx.exprs.expr(rhs, sc, em)
            bw = scalar_width(lhs.base.type)
            m = (1 << (lhs.hi - lhs.lo + 1)) - 1
            keep = ((1 << bw) - 1) & ~(m << lhs.lo)
            shifted = f"(({val} & {m:#x}) << {lhs.lo})" if lhs.lo else f"({val} & {m:#x})"
            em.line(f"{base} = ({base} & {keep:#x}) | {shifted}")
            return
        if is_composite(lt):
            if isinstance(rhs, ir.ListExpr) and isinstance(lt, (ir.StructType, ir.HeaderType)):
                vals = [self.ctx.exprs.value(x, sc, em) for x in rhs.elems]
                target = self.ctx.exprs.lvalue(lhs, sc, em)
                t = self.ctx.tmp("o")
                em.line(f"{t} = {target}")
                for f, v in zip(lt.fields, vals, strict=False):
                    if is_composite(f.type):
                        em.line(f"{t}.{attr(f.name)}._set({v})")
                    else:
                        em.line(f"{t}.{attr(f.name)} = {v}")
                if isinstance(lt, ir.HeaderType):
                    em.line(f"{t}._v = True")
            else:
                val = self.ctx.exprs.expr(rhs, sc, em)
                target = self.ctx.exprs.lvalue(lhs, sc, em)
                em.line(f"{target}._set({val})")
            self.union_fixup(lhs, sc, em)
            return
        sub = Emitter(em.indent)
        val = self.ctx.exprs.expr(rhs, sc, sub)
        if sub.lines:  # the left-hand side is located before the right-hand side runs
            lhs = self.pin_lvalue(lhs, sc, em)
            em.lines += sub.lines
        target = self.ctx.exprs.lvalue(lhs, sc, em)
        em.line(f"{target} = {val}")

    def union_fixup(self, h: ir.Expr, sc: Scope, em: Emitter) -> None:
        """After a union member became valid, the other members become invalid."""
        if isinstance(h, ir.Member) and isinstance(strip(h.base.type), ir.HeaderUnionType):
            u = self.ctx.exprs.expr(h.base, sc, em)
            with em.block(f"if {u}.{attr(h.name)}._v:"):
                em.line(f"{u}._only({attr(h.name)!r})")

    def visit_SwitchStmt(self, s: ir.SwitchStmt, sc: Scope, em: Emitter) -> None:
        subj_t = strip(s.subject.type)
        subj = self.ctx.exprs.expr(s.subject, sc, em)
        if not isinstance(subj_t, ir.ActionRunType):
            v = self.ctx.tmp("sw")
            em.line(f"{v} = {subj}")
            subj = v
        pending: list[object] = []
        first = True
        default_body: ir.Block | None = None
        for case in s.cases:
            pending += case.labels
            if case.body is None:
                continue
            labels, pending = pending, []
            if any(lab == "default" for lab in labels):
                default_body = case.body
                continue
            conds = []
            for lab in labels:
                if isinstance(lab, ir.ActionDecl):
                    assert isinstance(subj_t, ir.ActionRunType)
                    conds.append(f"{subj} == {self.ctx.calls.action_name(lab, sc)!r}")
                elif isinstance(lab, ir.Expr):
                    conds.append(f"{subj} == {self.ctx.exprs.expr(lab, sc, em)}")
                else:
                    raise UnsupportedError(f"switch label {lab!r}", case.loc)
            kw = "if" if first else "elif"
            first = False
            with em.block(f"{kw} {' or '.join(conds) or 'False'}:"):
                self.stmt(case.body, sc, em)
        if default_body is not None:
            if first:
                self.stmt(default_body, sc, em)
            else:
                with em.block("else:"):
                    self.stmt(default_body, sc, em)


_MIN_RUN_ACCESSES = 8  # register accesses at base + constant that pay for the extra check
_REGISTER_METHODS = ("read", "write")


def _stmt_register_accesses(
    s: ir.Stmt, sc: Scope, ns: dict[str, Any]
) -> tuple[set[ir.Variable] | None, list[tuple[str, ir.Variable | None, int]]] | None:
    """For a statement that may sit in a register run: the variables it writes and its
    register accesses ``(global, base variable or None, constant)``; ``(None, [])`` or
    None when it ends a run."""
    writes: set[ir.Variable] = set()
    accesses: list[tuple[str, ir.Variable | None, int]] = []
    for n in walk(s):
        if isinstance(n, (ir.Call, ir.VarDecl, ir.Exit, ir.Return, ir.SwitchStmt)):
            return None
        if isinstance(n, (ir.For, ir.ForIn, ir.Break, ir.Continue)):
            return None
        if isinstance(n, ir.Assign):
            v = root_var(n.lhs)
            if v is not None:
                writes.add(v)
        elif isinstance(n, ir.MethodCall):
            if n.method == "isValid" and not n.args:
                continue
            access = _register_call(n, sc, ns)
            if access is None:
                return None
            obj, written, idx = access
            if written is not None:
                writes.add(written)
            base = register_index_base(idx) if idx is not None else None
            accesses.append((obj, *base) if base is not None else (obj, None, 0))
    return writes, accesses


def _register_call(
    n: ir.MethodCall, sc: Scope, ns: dict[str, Any]
) -> tuple[str, ir.Variable | None, ir.Expr | None] | None:
    """For a read or write of a register this block owns: its global, the variable a
    read writes (None: none) and the index; None for any other method call."""
    tt = strip(n.target.type)
    if not (isinstance(tt, ir.ExternType) and tt.name == "register"):
        return None
    if n.method not in _REGISTER_METHODS:
        return None
    obj = sc.names.get(id(n.target.instance)) if isinstance(n.target, ir.InstanceRef) else None
    if not isinstance(obj, str) or not isinstance(ns.get(obj), Register):
        return None
    if n.method == "read":
        return obj, root_var(n.args[0]), n.args[1]
    return obj, None, n.args[0]


def _top_exprs(s: ir.Stmt) -> list[ir.Expr]:
    """The expressions a statement itself evaluates (not those of nested statements)."""
    if isinstance(s, ir.Assign):
        return [s.lhs, s.rhs]
    if isinstance(s, ir.CallStmt):
        return [s.call]
    if isinstance(s, ir.If):
        return [s.cond]
    if isinstance(s, ir.SwitchStmt):
        return [s.subject]
    if isinstance(s, ir.VarDecl) and s.init is not None:
        return [s.init]
    return []


def _needs_pin(e: ir.Expr) -> bool:
    """True when evaluating lvalue ``e`` twice could reach a different location."""
    if isinstance(e, ir.Index):
        return not isinstance(e.index, ir.Const) or _needs_pin(e.base)
    if isinstance(e, ir.Member):
        if isinstance(strip(e.base.type), ir.StackType) and e.name in ("next", "last"):
            return True
        return _needs_pin(e.base)
    if isinstance(e, ir.Slice):
        return _needs_pin(e.base)
    return False


def _var_ref(var: ir.Variable) -> ir.Expr:
    return ir.VarRef(var.type, var.loc, var)


def _ident(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)


__all__ = ["StmtGen"]
