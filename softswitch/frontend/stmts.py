"""Statements: assignments, calls, control flow, loops and block-local declarations."""

from __future__ import annotations

from dataclasses import dataclass

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import syntax as s
from softswitch.frontend.exprs import any_subexpr
from softswitch.frontend.scope import Scope
from softswitch.frontend.typeops import COMPILE_TIME_VALUES, same_type, type_str
from softswitch.frontend.visitor import Visitor


@dataclass
class Ctx:
    """What kind of body is being checked (exit/return/table rules differ)."""

    kind: str  # "parser", "control", "action", "function"
    return_type: ir.Type | None = None
    in_loop: bool = False  # inside the body of a ``for`` (break/continue allowed)


class StmtChecker(Visitor):
    """Checks statements in a scope and a body context (:class:`Ctx`)."""

    def block(self, node: s.Block, scope: Scope, ctx: Ctx) -> ir.Block:
        """A ``{ ... }`` block in its own scope."""
        inner = scope.child()
        stmts = [self.stmt(c, inner, ctx) for c in node.items]
        return ir.Block([st for st in stmts if st is not None], node.loc)

    def visit_CompoundAssignStmt(
        self, node: s.CompoundAssignStmt, scope: Scope, ctx: Ctx
    ) -> ir.Stmt:
        """``a op= b`` is ``a = a op b`` with ``a`` evaluated once (P4_16 1.2.5)."""
        loc = node.loc
        op = node.op
        lhs = self.ctx.exprs.expr(node.lhs, scope)
        if isinstance(lhs, ir.DontCare):
            raise P4Error("cannot assign to '_'", loc)
        self.ctx.exprs.check_lvalue(lhs, node.lhs.loc)
        pinned: list[ir.Stmt] = []
        lhs = self.pin_indexes(lhs, pinned)
        value = self.ctx.exprs.binary(op, node.lhs, node.rhs, scope, loc, left=lhs)
        value = self.ctx.exprs.convert(value, lhs.type, loc, f"'{op}='")
        if pinned:  # `a[f()] op= b`: the index (and f's side effects) evaluated once
            return ir.Block([*pinned, ir.Assign(lhs, value, loc)], loc)
        return ir.Assign(lhs, value, loc)

    def pin_indexes(self, e: ir.Expr, pinned: list[ir.Stmt]) -> ir.Expr:
        """``e`` with each stack index that contains a call read once into a temporary
        (declarations appended to ``pinned``), so ``e`` can be both read and written."""
        if isinstance(e, ir.Member):
            base = self.pin_indexes(e.base, pinned)
            return e if base is e.base else ir.Member(e.type, e.loc, base, e.name)
        if isinstance(e, ir.Slice):
            base = self.pin_indexes(e.base, pinned)
            return e if base is e.base else ir.Slice(e.type, e.loc, base, e.hi, e.lo)
        if isinstance(e, ir.Index):
            base = self.pin_indexes(e.base, pinned)
            index = e.index
            if _has_call(index):
                t = index.type if not isinstance(index.type, ir.IntLitType) else ir.BitType(32)
                var = ir.Variable(f"index_{self.ctx.new_uid()}", t, self.ctx.new_uid(), index.loc)
                pinned.append(
                    ir.VarDecl(var, self.ctx.exprs.convert(index, t, index.loc, "index"), index.loc)
                )
                index = ir.VarRef(t, index.loc, var)
            if base is e.base and index is e.index:
                return e
            return ir.Index(e.type, e.loc, base, index)
        return e

    def stmt(self, node: s.Stmt | s.Decl, scope: Scope, ctx: Ctx) -> ir.Stmt | None:
        """One statement or local declaration (constants yield None)."""
        result: ir.Stmt | None = self.visit(node, scope, ctx)
        return result

    def visit_other(self, node: s.Node, scope: Scope, ctx: Ctx) -> ir.Stmt | None:
        raise P4Error(f"unexpected statement '{self.ctx.source_text(node)}'", node.loc)

    def visit_VariableDecl(self, node: s.VariableDecl, scope: Scope, ctx: Ctx) -> ir.Stmt:
        return self.variable_decl(node, scope)

    def visit_ConstDecl(self, node: s.ConstDecl, scope: Scope, ctx: Ctx) -> None:
        self.const_decl(node, scope)

    def visit_Instantiation(self, node: s.Instantiation, scope: Scope, ctx: Ctx) -> None:
        raise P4Error("instantiations are not allowed inside a block", node.loc)

    def visit_AssignStmt(self, node: s.AssignStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        loc = node.loc
        lhs = self.ctx.exprs.expr(node.lhs, scope)
        if isinstance(lhs, ir.DontCare):
            raise P4Error("cannot assign to '_'", loc)
        self.ctx.exprs.check_lvalue(lhs, node.lhs.loc)
        rhs = self.ctx.exprs.expr(node.rhs, scope, lhs.type)
        rhs = self.ctx.exprs.convert(rhs, lhs.type, node.rhs.loc, "assignment")
        return ir.Assign(lhs, rhs, loc)

    def visit_CallStmt(self, node: s.CallStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        type_args = [self.ctx.typing.resolve_type(t, scope) for t in node.call.type_args]
        call = self.ctx.exprs.call(node.call.callee, type_args, node.call.args, scope, node.loc)
        return self.call_stmt(call, ctx, node.loc)

    def visit_IfStmt(self, node: s.IfStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        cond = self.ctx.exprs.expr(node.cond, scope)
        cond = self.ctx.exprs.expect_bool(cond, node.cond.loc, "if condition")
        then = self.sub_stmt(node.then, scope, ctx)
        else_ = self.sub_stmt(node.else_, scope, ctx) if node.else_ is not None else None
        return ir.If(cond, then, else_, node.loc)

    def visit_Block(self, node: s.Block, scope: Scope, ctx: Ctx) -> ir.Stmt:
        return self.block(node, scope, ctx)

    def visit_EmptyStmt(self, node: s.EmptyStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        return ir.Empty(node.loc)

    def visit_ExitStmt(self, node: s.ExitStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        if ctx.kind == "parser":
            raise P4Error("'exit' is not allowed in a parser", node.loc)
        return ir.Exit(node.loc)

    def visit_BreakStmt(self, node: s.BreakStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        if not ctx.in_loop:
            raise P4Error("'break' outside a loop", node.loc)
        return ir.Break(node.loc)

    def visit_ContinueStmt(self, node: s.ContinueStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        if not ctx.in_loop:
            raise P4Error("'continue' outside a loop", node.loc)
        return ir.Continue(node.loc)

    def loop_body(self, ctx: Ctx, loc: ir.Loc) -> Ctx:
        """The context of a loop's parts and body (break/continue allowed)."""
        if ctx.kind == "parser":
            raise P4Error("'for' statements are not allowed in a parser", loc)
        return Ctx(ctx.kind, ctx.return_type, True)

    def visit_ForStmt(self, node: s.ForStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """``for (init; cond; updates) body`` in its own scope."""
        loc = node.loc
        ctx = self.loop_body(ctx, loc)
        scope = scope.child()
        init = [self.for_part(p, scope, ctx, declare=True) for p in node.init]
        cond: ir.Expr | None = None
        if node.cond is not None:
            cond = self.ctx.exprs.expect_bool(
                self.ctx.exprs.expr(node.cond, scope), node.cond.loc, "for condition"
            )
        updates = [self.for_part(p, scope, ctx, declare=False) for p in node.updates]
        body = self.sub_stmt(node.body, scope, ctx)
        return ir.For(init, cond, updates, body, loc)

    def for_part(
        self, node: s.Stmt | s.VariableDecl, scope: Scope, ctx: Ctx, declare: bool
    ) -> ir.Stmt:
        """One initialiser or update of a ``for``: a declaration (init only), an
        assignment or a call, checked as the equivalent statement."""
        if isinstance(node, s.VariableDecl):  # ``T x = e``
            if not declare:
                raise P4Error("a 'for' update cannot declare a variable", node.loc)
            return self.variable_decl(node, scope)
        stmt = self.stmt(node, scope, ctx)
        assert stmt is not None
        return stmt

    def visit_ForInStmt(self, node: s.ForInStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """``for (T x in low .. high)`` / ``for (T x in collection)``; ``x`` is local."""
        loc = node.loc
        ctx = self.loop_body(ctx, loc)
        scope = scope.child()
        t = self.ctx.typing.resolve_type(node.type, scope)
        st = ir.strip_newtype(t)
        name = node.name
        var = ir.Variable(name, t, self.ctx.new_uid(), node.name_loc)
        if node.collection is None:
            assert node.low is not None and node.high is not None
            if not isinstance(st, ir.BitType):
                raise P4Error(
                    f"a range loop variable must be bit<W> or int<W>, not {type_str(t)}", loc
                )
            bounds = []
            for b in (node.low, node.high):
                e = self.ctx.exprs.expr(b, scope, t)
                bounds.append(self.ctx.exprs.convert(e, t, b.loc, "range bound"))
            scope.declare(name, var, node.name_loc)
            body = self.sub_stmt(node.body, scope, ctx)
            return ir.ForIn(var, body, bounds[0], bounds[1], None, loc)
        coll = self.ctx.exprs.expr(node.collection, scope)
        ct = ir.strip_newtype(coll.type)
        cloc = node.collection.loc
        if isinstance(coll, ir.ListExpr):
            elems = [self.ctx.exprs.convert(x, t, x.loc, "list element") for x in coll.elems]
            coll = ir.ListExpr(ir.TupleType(tuple(t for _ in elems)), coll.loc, elems)
        elif isinstance(ct, ir.StackType):
            if not same_type(ct.elem, t):
                raise P4Error(
                    f"loop variable of type {type_str(t)} cannot iterate over "
                    f"{type_str(coll.type)}",
                    loc,
                )
        else:
            raise P4Error(f"cannot iterate over an expression of type {type_str(coll.type)}", cloc)
        scope.declare(name, var, node.name_loc)
        body = self.sub_stmt(node.body, scope, ctx)
        return ir.ForIn(var, body, None, None, coll, loc)

    def visit_DirectApply(self, node: s.DirectApply, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """``C.apply(args);`` applies a fresh instance of C, as p4c does: the instance is
        named ``C_inst`` (``C_inst_1``, ...) and has the control-plane name ``C``."""
        loc = node.loc
        type_tree = node.type
        t = self.ctx.typing.resolve_type(type_tree, scope)
        if not isinstance(t, ir.BlockType):
            raise P4Error(f"'{self.ctx.source_text(type_tree)}' is not a parser or control", loc)
        if t.decl.ctor_params:
            raise P4Error(
                f"'{t.decl.name}' has constructor parameters; instantiate it to apply it", loc
            )
        pending: list[ir.Instance] = self.ctx.direct_instances
        base = f"{t.decl.name}_inst"
        taken = {i.name for i in pending}
        name = base
        n = 0
        while name in taken or scope.lookup(name) is not None:
            n += 1
            name = f"{base}_{n}"
        inst = ir.Instance(name, t.decl.name, t, [], {"name": [t.decl.name]}, loc)
        pending.append(inst)
        ref = ir.InstanceRef(t, type_tree.loc, inst)
        call = self.ctx.exprs.method_call(ref, "apply", [], list(node.args.items), scope, loc)
        return ir.CallStmt(call, loc)

    def sub_stmt(self, node: s.Stmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """Branch of an if: declarations get their own scope."""
        stmt = self.stmt(node, scope.child(), ctx)
        return stmt if stmt is not None else ir.Empty(node.loc)

    def call_stmt(self, call: ir.Expr, ctx: Ctx, loc: ir.Loc) -> ir.Stmt:
        """A call used as a statement."""
        if (
            isinstance(call, ir.Call)
            and isinstance(call.callee, ir.ActionDecl)
            and ctx.kind == "parser"
        ):
            raise P4Error("actions cannot be called from a parser", loc)
        if (
            isinstance(call, ir.MethodCall)
            and call.method == "apply"
            and ctx.kind in ("action", "parser", "function")
        ):
            if isinstance(call.type, ir.TableApplyResultType):
                raise P4Error(
                    f"tables cannot be applied inside {'an' if ctx.kind == 'action' else 'a'} "
                    f"{ctx.kind}",
                    loc,
                )
            if ctx.kind in ("action", "function"):
                raise P4Error(
                    "a parser or control cannot be applied inside "
                    f"{'an' if ctx.kind == 'action' else 'a'} {ctx.kind}",
                    loc,
                )
        if isinstance(call, ir.BoolConst):
            return ir.Empty(loc)  # a static_assert that held
        if not isinstance(call, (ir.Call, ir.MethodCall)):
            raise P4Error("expression used as a statement is not a call", loc)
        return ir.CallStmt(call, loc)

    def visit_ReturnStmt(self, node: s.ReturnStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """``return`` / ``return e``."""
        loc = node.loc
        if ctx.kind == "parser":
            raise P4Error("'return' is not allowed in a parser", loc)
        if node.value is None:
            if ctx.return_type is not None and not isinstance(ctx.return_type, ir.VoidType):
                raise P4Error("a return value is required", loc)
            return ir.Return(None, loc)
        if ctx.return_type is None or isinstance(ctx.return_type, ir.VoidType):
            raise P4Error("return with a value outside a function that returns one", loc)
        value = self.ctx.exprs.expr(node.value, scope, ctx.return_type)
        value = self.ctx.exprs.convert(value, ctx.return_type, node.value.loc, "return value")
        return ir.Return(value, loc)

    def visit_SwitchStmt(self, node: s.SwitchStmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """``switch`` on ``t.apply().action_run`` or on a bit/enum value."""
        loc = node.loc
        subject = self.ctx.exprs.expr(node.subject, scope)
        st = ir.strip_newtype(subject.type)
        if not isinstance(st, (ir.ActionRunType, ir.BitType, ir.EnumType, ir.ErrorType)):
            raise P4Error(f"cannot switch on an expression of type {type_str(subject.type)}", loc)
        self.ctx.bmv2.switch_in_action(ctx.kind, loc)  # programs stay portable to BMv2
        if not isinstance(st, ir.ActionRunType) and "exact" not in self.ctx.match_kinds:  # as p4c
            raise P4Error(
                "a switch on a value needs match_kind 'exact' (declared in core.p4, not included)",
                loc,
            )
        cases: list[ir.SwitchCase] = []
        seen: set[object] = set()
        for case in node.cases:
            label_node = case.label
            label: object
            if isinstance(label_node, s.DefaultLabel):
                label = "default"
            elif isinstance(st, ir.ActionRunType):
                if not isinstance(label_node, s.NameRef):
                    raise P4Error(
                        "switch labels on action_run must be action names", label_node.loc
                    )
                aname = label_node.name
                action = scope.lookup(aname)
                if not isinstance(action, ir.ActionDecl) or all(
                    r.action is not action for r in st.table.actions
                ):
                    raise P4Error(
                        f"'{aname}' is not an action of table '{st.table.name}'", label_node.loc
                    )
                label = action
            else:
                label = self.switch_value(label_node, subject.type, scope)
            key = label if not isinstance(label, ir.Expr) else _label_key(label)
            if key in seen:
                raise P4Error("duplicate switch label", label_node.loc)
            seen.add(key)
            body = self.block(case.body, scope, ctx) if case.body is not None else None
            if cases and cases[-1].body is None:
                cases[-1].labels.append(label)
                cases[-1].body = body
            else:
                cases.append(ir.SwitchCase([label], body, case.loc))
        return ir.SwitchStmt(subject, cases, loc)

    def switch_value(self, label: s.Expr, t: ir.Type, scope: Scope) -> ir.Expr:
        """A constant switch label converted to the subject's type."""
        loc = label.loc
        e = self.ctx.exprs.convert(self.ctx.exprs.expr(label, scope), t, loc, "switch label")
        if not isinstance(e, (ir.Const, ir.EnumMember, ir.ErrorMember)):
            raise P4Error("switch labels must be compile-time constants", loc)
        return e

    def variable_decl(self, tree: s.VariableDecl, scope: Scope) -> ir.VarDecl:
        """``T x;`` / ``T x = e;`` (also control/parser-level locals)."""
        t = self.ctx.typing.resolve_type(tree.type, scope)
        name = tree.name
        loc = tree.loc
        if isinstance(
            ir.strip_newtype(t), (ir.ExternType, ir.VoidType, ir.IntLitType, ir.StringType)
        ):
            raise P4Error(f"cannot declare a variable of type {type_str(t)}", loc)
        init = None
        if tree.init is not None:
            init = self.ctx.exprs.convert(
                self.ctx.exprs.expr(tree.init, scope, t), t, tree.init.loc, "initializer"
            )
        var = ir.Variable(name, t, self.ctx.new_uid(), loc)
        if isinstance(scope.lookup(name), ir.Param):  # an error in p4c, not just a warning
            raise P4Error(f"declaration of '{name}' shadows a parameter '{name}'", tree.name_loc)
        scope.declare(name, var, tree.name_loc)
        return ir.VarDecl(var, init, loc)

    def const_decl(self, tree: s.ConstDecl, scope: Scope) -> ir.Expr:
        """``const T x = e;`` -> the folded value, declared in ``scope``."""
        t = self.ctx.typing.resolve_type(tree.type, scope)
        name = tree.name
        value = self.ctx.exprs.expr(tree.value, scope, t)
        value = self.ctx.exprs.convert(value, t, tree.value.loc, "constant initializer")
        if not isinstance(value, COMPILE_TIME_VALUES):
            raise P4Error(
                f"the initializer of constant '{name}' is not a compile-time constant",
                tree.value.loc,
            )
        if isinstance(value, ir.Const) and isinstance(t, ir.NewType):
            value = ir.Const(ir.strip_newtype(t), value.loc, value.value)
        scope.declare(name, value, tree.name_loc)
        return value


def _has_call(e: ir.Expr) -> bool:
    """Whether evaluating ``e`` calls something (which may have side effects)."""
    return any_subexpr(e, lambda n: isinstance(n, (ir.Call, ir.MethodCall)))


def _label_key(e: ir.Expr) -> object:
    if isinstance(e, ir.Const):
        return ("c", e.value)
    if isinstance(e, ir.EnumMember):
        return ("e", e.member)
    if isinstance(e, ir.ErrorMember):
        return ("r", e.code)
    return id(e)
