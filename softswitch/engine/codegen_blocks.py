"""Blocks: the module-level function of each block instance the architecture calls, the
scopes of sub-blocks inlined into it, and the tables and externs each instance owns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.codegen_emit import BlockArg, Emitter, Scope
from softswitch.engine.codegen_expr import strip

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


class BlockGen:
    """Top-level block functions and block instantiation (the architecture's hooks run at
    the start and end of each top-level block, see
    :class:`~softswitch.engine.target.TargetSpec`)."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx
        # (id(declaration), path) -> the instance's own tables and externs
        self._block_cache: dict[tuple[int, str], dict[int, object]] = {}

    def register_locals(
        self, decl: ir.ControlDecl | ir.ParserDecl, path: str
    ) -> tuple[dict[int, object], set[int]]:
        """Instantiate the tables and externs declared in a block instance at ``path``."""
        key = (id(decl), path)
        names = dict(self.ctx.global_names)
        local_actions = {id(x) for x in decl.locals if isinstance(x, ir.ActionDecl)}
        if key in self._block_cache:
            names.update(self._block_cache[key])
            return names, local_actions
        mine: dict[int, object] = {}
        for x in decl.locals:
            if isinstance(x, ir.Instance) and isinstance(x.type, ir.ExternType):
                if id(x) in names:
                    continue
                g = self.ctx.instances.make_extern(x, path)
                if g is not None:
                    names[id(x)] = mine[id(x)] = g
        for x in decl.locals:
            if isinstance(x, ir.TableDecl):
                info = self.ctx.tables.make_table(x, path, names, local_actions)
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
                env[p] = repr(self.ctx.exprs.const_value(a))
        return env, block_args

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
        sc = Scope(
            path=path, env=env, names=names, ret="return", local_actions=local_actions,
            block_args=block_args,
        )  # fmt: skip
        sc.obj_cache = {}
        sc.obj_roots = set(args)
        fname = f"blk_{role}"
        em = Emitter(1)
        if isinstance(decl, ir.ParserDecl):
            self._parser_function(role, decl, sc, em)
        else:
            self._control_function(role, decl, pkt_out, sc, em)
        binds = [f"    {name} = {text}" for text, name in sc.obj_cache.items()]
        src = [f"def {fname}(_ctx, {', '.join(args)}):"] + binds + (em.lines or ["    pass"])
        self.ctx.functions.append("\n".join(src))
        self.ctx.out.block_params[role] = list(decl.params)

    def _parser_function(
        self, role: str, decl: ir.ParserDecl, sc: Scope, em: Emitter
    ) -> None:
        """A top-level parser's body: it returns its error code (a reject raises
        ``_ParserReject``) and leaves the cursor in ``_ctx.pos``."""
        sc.in_parser = True
        sc.pkt = ("_data", "_pos")
        em.line("_data = _ctx.data")
        em.line("_pos = 0")
        self._begin_block(role, decl, sc, em)
        with em.block("try:"):
            for x in decl.locals:
                if isinstance(x, ir.VarDecl):
                    self.ctx.stmts.stmt(x, sc, em)
            self.ctx.parsers.gen_parser_body(decl, sc, em)
        with em.block("except _ParserReject as _err:"):
            em.line("_ctx.pos = _pos")
            em.line("return _tr.parser_end(_err.code)" if self.ctx.trace else "return _err.code")
        em.line("_ctx.pos = _pos")
        noerr = self.ctx.err_code("NoError")
        em.line(f"return _tr.parser_end({noerr})" if self.ctx.trace else f"return {noerr}")

    def _control_function(
        self, role: str, decl: ir.ControlDecl, pkt_out: bool, sc: Scope, em: Emitter
    ) -> None:
        """A top-level control's body (an exit raises ``_P4Exit`` when it may happen); a
        deparser returns the bytes it emitted followed by the payload."""
        if pkt_out:
            sc.out = "_out"
            em.line("_out = bytearray()")
        self._begin_block(role, decl, sc, em)
        for local in decl.locals:
            if isinstance(local, ir.VarDecl):
                self.ctx.stmts.stmt(local, sc, em)
        if self.ctx.stmts.may_exit(decl.body):
            with em.block("try:"):
                self.ctx.stmts.stmt(decl.body, sc, em)
            with em.block("except _P4Exit:"):
                em.line("pass")
        else:
            self.ctx.stmts.stmt(decl.body, sc, em)
        if self.ctx.target.end_block is not None:
            self.ctx.target.end_block(self.ctx, role, sc, em)
        if pkt_out:
            em.line("_out += _ctx.payload")
            em.line("return bytes(_out)")

    def _begin_block(
        self, role: str, decl: ir.ParserDecl | ir.ControlDecl, sc: Scope, em: Emitter
    ) -> None:
        if self.ctx.target.begin_block is not None:
            self.ctx.target.begin_block(self.ctx, role, decl, sc, em)
