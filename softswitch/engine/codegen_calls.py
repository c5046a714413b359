"""Calls: actions, sub-controls and sub-parsers inlined at their call sites, P4 functions
compiled once each into a module-level Python function.

Calls follow P4's copy-in/copy-out rules: scalar ``inout``/``out`` arguments go through
temporaries that are written back after the body (also when ``exit`` unwinds through it);
composite ``inout``/``out`` arguments are passed by reference (``out`` ones reset first),
composite ``in`` arguments are copied. ``return`` in an inlined body becomes ``break`` out
of a ``while True`` wrapper; ``exit`` raises :class:`softswitch.engine.runtime.P4Exit`,
caught by the control the architecture invoked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import PyValue, strip
from softswitch.engine.codegen_types import is_composite, scalar_width
from softswitch.engine.codegen_walk import applied_block, has_return, root_var
from softswitch.errors import P4Error, UnsupportedError
from softswitch.ir_walk import walk

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


class CallGen:
    """Calls of actions, functions, extern functions and sub-blocks (``call_stmt`` dispatches
    on the kind of callee)."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx
        self._fn_names: dict[int, str] = {}  # id(function) -> its Python function

    def action_name(self, action: ir.ActionDecl, sc: Scope) -> str:
        if id(action) in sc.local_actions:
            return ir.qualify(sc.path, action.cp_name)
        return ir.qualify("", action.cp_name)

    def call_stmt(self, e: ir.Expr, sc: Scope, em: Emitter) -> None:
        """A call used as a statement: ``call_<callee class>`` for a call, the method
        dispatch of :class:`~softswitch.engine.codegen_externs.ExternGen` for a method call."""
        if isinstance(e, ir.MethodCall):
            self.ctx.externs.method_call(e, sc, em)
            return
        if not isinstance(e, ir.Call):
            raise UnsupportedError(f"{type(e).__name__} as a statement", e.loc)
        meth = getattr(self, "call_" + type(e.callee).__name__, None)
        if meth is None:
            raise UnsupportedError(f"call of {type(e.callee).__name__}", e.loc)
        meth(e, sc, em)

    def call_ActionDecl(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        action = e.callee
        assert isinstance(action, ir.ActionDecl)
        dir_args = [a for p, a in zip(action.params, e.args, strict=False) if p.direction]
        cp = [
            self.ctx.exprs.expr(a, sc, em) if a is not None else "0"
            for p, a in zip(action.params, e.args, strict=False)
            if not p.direction
        ]
        if self.ctx.trace:
            fq = self.action_name(action, sc)
            self.ctx.action_param_names[fq] = [
                (p.name, scalar_width(p.type)) for p in action.cp_params
            ]
            em.line(f"_tr.action({fq!r}, ({''.join(c + ', ' for c in cp)}))")
        self.inline_action(action, dir_args, cp, sc, em)

    def call_FunctionDecl(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        em.line(self.call_function(e, sc, em))

    def call_ExternFunctionDecl(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        self.ctx.externs.extern_call(e, sc, em)

    def bind_params(
        self,
        params: list[ir.Param],
        args: list[ir.Expr | None],
        sc: Scope,
        inner: Scope,
        em: Emitter,
        body: object = None,
    ) -> list[tuple[ir.Expr, str]]:
        """Copy-in of directional arguments into ``inner.env``; returns the copy-outs.

        A header/struct argument is passed by reference unless ``body`` (an action's) also
        reaches the argument's variable directly, or another out/inout argument shares its variable:
        then it is copied in and out, so that the callee's own writes to the variable are
        overwritten by the copy-out, as P4's copy-in/copy-out prescribes."""
        outs: list[tuple[ir.Expr, str]] = []
        # variables reached through more than one out/inout argument (``in`` ones are copies)
        roots = [
            root_var(a) if p.direction in ("out", "inout") else None
            for p, a in zip(params, args, strict=False)
        ]
        for p, a in zip(params, args, strict=False):
            t = strip(p.type)
            if isinstance(t, ir.ExternType):  # packet_in / packet_out pass through
                continue
            name = f"p{p.uid}_{self.ctx.tmp('')}"
            inner.env[p] = name
            if a is None or isinstance(a, ir.DontCare):
                em.line(f"{name} = {self.ctx.types.default(p.type)}")
                continue
            if p.direction == "in":
                if isinstance(a, (ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember)):
                    inner.env[p] = self.ctx.exprs.expr(a, sc, em)
                else:
                    em.line(f"{name} = {self.ctx.exprs.value(a, sc, em)}")
            elif is_composite(t):
                root = root_var(a)
                copy = root is not None and (roots.count(root) > 1 or _reaches(body, root))
                out = self._bind_composite(p, a, name, copy, sc, inner, em)
                if out is not None:
                    outs.append(out)
            else:
                a = self.ctx.stmts.pin_lvalue(a, sc, em)
                if p.direction == "inout":
                    em.line(f"{name} = {self.ctx.exprs.expr(a, sc, em)}")
                else:
                    em.line(f"{name} = {self.ctx.types.default(p.type)}")
                outs.append((a, name))
        return outs

    def _bind_composite(
        self,
        p: ir.Param,
        a: ir.Expr,
        name: str,
        copy: bool,
        sc: Scope,
        inner: Scope,
        em: Emitter,
    ) -> tuple[ir.Expr, str] | None:
        """A header/struct argument of an out/inout parameter: by reference, or copied in
        when ``copy`` (its variable is reached otherwise too) and then returned for the
        copy-out; an out one starts reset."""
        obj = self.ctx.exprs.expr(a, sc, em)
        if copy:
            em.line(f"{name} = {obj}._copy()")
            if p.direction == "out":
                em.line(f"{name}._reset()")
            return a, name
        if sc.is_stable_object(obj):  # no alias needed
            inner.env[p] = obj
            name = obj
        else:
            em.line(f"{name} = {obj}")
        if p.direction == "out":
            em.line(f"{name}._reset()")
        return None

    def copy_out(self, outs: list[tuple[ir.Expr, str]], sc: Scope, em: Emitter) -> None:
        for a, name in outs:
            if is_composite(strip(a.type)):
                em.line(f"{self.ctx.exprs.expr(a, sc, em)}._set({name})")
            elif isinstance(a, ir.Slice):
                self.ctx.stmts.assign(a, PyValue(a.type, name), sc, em)
            else:
                em.line(f"{self.ctx.exprs.lvalue(a, sc, em)} = {name}")

    def inline_body(
        self,
        body: ir.Stmt,
        inner: Scope,
        outer: Scope,
        em: Emitter,
        outs: list[tuple[ir.Expr, str]],
        exits: bool,
        prologue: Sequence[ir.Stmt] = (),
    ) -> None:
        """Emit ``body`` in ``inner`` with the return/exit/copy-out plumbing it needs."""
        ret = has_return(body)
        inner.ret = "break" if ret else inner.ret
        inner.ret_var = None
        inner.loop_updates = None  # break/continue/return of the body are its own
        inner.loop_ret_flag = None

        def emit_body() -> None:
            for s in prologue:
                self.ctx.stmts.stmt(s, inner, em)
            if ret:
                with em.block("while True:"):
                    self.ctx.stmts.stmt(body, inner, em)
                    em.line("break")
            else:
                self.ctx.stmts.stmt(body, inner, em)

        if outs and exits:
            with em.block("try:"):
                emit_body()
            with em.block("finally:"):
                self.copy_out(outs, outer, em)
        else:
            emit_body()
            self.copy_out(outs, outer, em)

    def inline_action(
        self,
        action: ir.ActionDecl,
        dir_args: list[ir.Expr | None],
        cp_args: list[str],
        sc: Scope,
        em: Emitter,
    ) -> None:
        inner = sc.child()
        dparams = [p for p in action.params if p.direction]
        outs = self.bind_params(dparams, dir_args, sc, inner, em, action.body)
        cps = action.cp_params
        if cps:
            names = [f"a{p.uid}_{self.ctx.tmp('')}" for p in cps]
            for p, n, v in zip(cps, names, cp_args, strict=False):
                if v.isidentifier() or v.isdigit():  # a temporary or a literal: read-only
                    inner.env[p] = v
                else:
                    inner.env[p] = n
                    em.line(f"{n} = {v}")
        self.inline_body(
            action.body, inner, sc, em, outs, self.ctx.stmts.decl_exits(action, action.body)
        )

    def call_function(self, e: ir.Call, sc: Scope, em: Emitter) -> str:
        """Call of a P4 function (compiled to a module-level Python function)."""
        fn = e.callee
        assert isinstance(fn, ir.FunctionDecl)
        pyname = self.function_name(fn)
        args: list[str] = []
        outs: list[tuple[ir.Expr, int]] = []
        for p, a in zip(fn.params, e.args, strict=False):
            t = strip(p.type)
            if p.direction == "out" and not is_composite(t):
                if a is not None and not isinstance(a, ir.DontCare):
                    outs.append((self.ctx.stmts.pin_lvalue(a, sc, em), len(outs) + 1))
                continue
            if a is None or isinstance(a, ir.DontCare):
                args.append(self.ctx.types.default(p.type))
            elif p.direction in ("in", ""):
                args.append(self.ctx.exprs.value(a, sc, em))
            else:
                if p.direction == "inout" and not is_composite(t):
                    a = self.ctx.stmts.pin_lvalue(a, sc, em)
                args.append(self.ctx.exprs.expr(a, sc, em))
                if p.direction == "inout" and not is_composite(t):
                    outs.append((a, len(outs) + 1))
        call = f"{pyname}(_ctx, {', '.join(args)})"
        if not self.function_returns_tuple(fn):
            return call
        r = self.ctx.tmp("r")
        em.line(f"{r} = {call}")
        self._scalar_outs(r, outs, sc, em)
        return f"{r}[0]"

    def _scalar_outs(
        self, r: str, outs: list[tuple[ir.Expr, int]], sc: Scope, em: Emitter
    ) -> None:
        """Assign a function's scalar out/inout results (items 1.. of its tuple ``r``)."""
        for a, i in outs:
            if isinstance(a, ir.Slice):
                self.ctx.stmts.assign(a, PyValue(a.type, f"{r}[{i}]"), sc, em)
            else:
                em.line(f"{self.ctx.exprs.lvalue(a, sc, em)} = {r}[{i}]")

    def inline_block(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        """``c.apply(args)`` of a sub-control or sub-parser instance, or of a constructor
        parameter bound to one."""
        applied = applied_block(e.target, sc.block_args)
        if applied is None:
            assert isinstance(e.target, ir.VarRef)
            raise P4Error(f"internal: '{e.target.var.name}' is not bound to a block", e.loc)
        inst, where = applied
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        inner = self.ctx.blocks.block_scope(inst, sc, where)
        outs = self.bind_params(decl.params, e.args, sc, inner, em)
        if isinstance(decl, ir.ControlDecl):
            prologue = [x for x in decl.locals if isinstance(x, ir.VarDecl)]
            self.inline_body(
                decl.body, inner, sc, em, outs, self.ctx.stmts.decl_exits(decl, decl.body), prologue
            )
        else:
            inner.in_parser = True
            for x in decl.locals:
                if isinstance(x, ir.VarDecl):
                    self.ctx.stmts.stmt(x, inner, em)
            self.ctx.parsers.gen_parser_body(decl, inner, em)
            self.copy_out(outs, sc, em)

    def function_returns_tuple(self, fn: ir.FunctionDecl) -> bool:
        return any(p.direction in ("out", "inout") and not is_composite(p.type) for p in fn.params)

    def function_name(self, fn: ir.FunctionDecl) -> str:
        key = id(fn)
        if key in self._fn_names:
            return self._fn_names[key]
        name = f"F{self.ctx.next_number()}_{''.join(c if c.isalnum() else '_' for c in fn.name)}"
        self._fn_names[key] = name
        em = Emitter(1)
        env: dict[ir.Variable, str] = {}
        args: list[str] = []
        outs: list[str] = []
        for p in fn.params:
            pn = f"p{p.uid}_{p.name}"
            env[p] = pn
            if p.direction == "out" and not is_composite(p.type):
                em.line(f"{pn} = {self.ctx.types.default(p.type)}")
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
            names=self.ctx.global_names,
            ret="return",
            ret_var="_r",
            ret_outs=tuple(outs),
        )
        self.ctx.stmts.stmt(fn.body, sc, em)
        if outs:
            em.line(f"return (None, {', '.join(outs)})")
        src = [f"def {name}(_ctx, {', '.join(args)}):"] + em.lines + ["    return None"]
        self.ctx.functions.append("\n".join(src))
        return name


def _reaches(body: object, var: ir.Variable, seen: set[int] | None = None) -> bool:
    """Whether ``body`` (or an action it calls) refers to ``var`` by name."""
    if body is None:
        return False
    seen = set() if seen is None else seen
    for n in walk(body):
        if isinstance(n, ir.VarRef) and n.var is var:
            return True
        if (
            isinstance(n, ir.Call)
            and isinstance(n.callee, ir.ActionDecl)
            and id(n.callee) not in seen
        ):
            seen.add(id(n.callee))
            if _reaches(n.callee.body, var, seen):
                return True
    return False
