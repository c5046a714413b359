"""Statement and keyset checking (the middle layer of the checker; tables: tables.py)."""

from __future__ import annotations

from dataclasses import dataclass

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import syntax as s
from softswitch.frontend.exprs import ExprChecker, any_subexpr
from softswitch.frontend.literals import annotation_values
from softswitch.frontend.scope import Scope
from softswitch.frontend.typeops import same_type, type_str


@dataclass
class Ctx:
    """What kind of body is being checked (exit/return/table rules differ)."""

    kind: str  # "parser", "control", "action", "function"
    return_type: ir.Type | None = None
    in_loop: bool = False  # inside the body of a ``for`` (break/continue allowed)


class StmtChecker(ExprChecker):
    """Statements, parser keysets and tables; declarations are added by the subclass."""

    uid_counter: int

    def new_uid(self) -> int:
        """A program-wide unique variable id."""
        self.uid_counter += 1
        return self.uid_counter

    # --------------------------------------------------------------- annotations

    def annotations(self, annos: s.Annotations) -> ir.Annotations:
        """Annotations as written -> {name: values} (a repeated name keeps the last)."""
        out: ir.Annotations = {}
        for a in annos:
            out[a.name] = annotation_values(a.body)
        return out

    def cp_name(self, annos: ir.Annotations, name: str) -> str:
        """Control-plane name: the ``@name`` annotation, else the local name."""
        vals = annos.get("name")
        if vals and isinstance(vals[0], str):
            return vals[0]
        return name

    # --------------------------------------------------------------- statements

    def block(self, node: s.Block, scope: Scope, ctx: Ctx) -> ir.Block:
        """A ``{ ... }`` block in its own scope."""
        inner = scope.child()
        stmts = [self.stmt(c, inner, ctx) for c in node.items]
        return ir.Block([st for st in stmts if st is not None], node.loc)

    def compound_assign(self, node: s.CompoundAssignStmt, scope: Scope, loc: ir.Loc) -> ir.Stmt:
        """``a op= b`` is ``a = a op b`` with ``a`` evaluated once (P4_16 1.2.5)."""
        op = node.op
        lhs = self.expr(node.lhs, scope)
        if isinstance(lhs, ir.DontCare):
            raise P4Error("cannot assign to '_'", loc)
        self.check_lvalue(lhs, node.lhs.loc)
        pinned: list[ir.Stmt] = []
        lhs = self.pin_indexes(lhs, pinned)
        value = self.binary(op, node.lhs, node.rhs, scope, loc, left=lhs)
        value = self.convert(value, lhs.type, loc, f"'{op}='")
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
                var = ir.Variable(f"index_{self.new_uid()}", t, self.new_uid(), index.loc)
                pinned.append(ir.VarDecl(var, self.convert(index, t, index.loc, "index"), index.loc))
                index = ir.VarRef(t, index.loc, var)
            if base is e.base and index is e.index:
                return e
            return ir.Index(e.type, e.loc, base, index)
        return e

    def stmt(self, node: s.Stmt | s.Decl, scope: Scope, ctx: Ctx) -> ir.Stmt | None:
        """One statement or local declaration (constants yield None)."""
        loc = node.loc
        if isinstance(node, s.Decl):  # a local declaration
            if isinstance(node, s.VariableDecl):
                return self.variable_decl(node, scope)
            if isinstance(node, s.ConstDecl):
                self.const_decl(node, scope)
                return None
            if isinstance(node, s.Instantiation):
                raise P4Error("instantiations are not allowed inside a block", loc)
            raise P4Error(f"unexpected statement '{self.source_text(node)}'", loc)
        if isinstance(node, s.AssignStmt):
            lhs = self.expr(node.lhs, scope)
            if isinstance(lhs, ir.DontCare):
                raise P4Error("cannot assign to '_'", loc)
            self.check_lvalue(lhs, node.lhs.loc)
            rhs = self.expr(node.rhs, scope, lhs.type)
            rhs = self.convert(rhs, lhs.type, node.rhs.loc, "assignment")
            return ir.Assign(lhs, rhs, loc)
        if isinstance(node, s.CompoundAssignStmt):
            return self.compound_assign(node, scope, loc)
        if isinstance(node, s.CallStmt):
            type_args = [self.resolve_type(t, scope) for t in node.call.type_args]
            call = self.call(node.call.callee, type_args, node.call.args, scope, loc)
            return self.call_stmt(call, ctx, loc)
        if isinstance(node, s.IfStmt):
            cond = self.expect_bool(self.expr(node.cond, scope), node.cond.loc, "if condition")
            then = self.sub_stmt(node.then, scope, ctx)
            else_ = self.sub_stmt(node.else_, scope, ctx) if node.else_ is not None else None
            return ir.If(cond, then, else_, loc)
        if isinstance(node, s.Block):
            return self.block(node, scope, ctx)
        if isinstance(node, s.EmptyStmt):
            return ir.Empty(loc)
        if isinstance(node, s.ExitStmt):
            if ctx.kind == "parser":
                raise P4Error("'exit' is not allowed in a parser", loc)
            return ir.Exit(loc)
        if isinstance(node, s.ReturnStmt):
            return self.return_stmt(node, scope, ctx, loc)
        if isinstance(node, s.SwitchStmt):
            return self.switch_stmt(node, scope, ctx, loc)
        if isinstance(node, (s.ForStmt, s.ForInStmt)):
            if ctx.kind == "parser":
                raise P4Error("'for' statements are not allowed in a parser", loc)
            loop_ctx = Ctx(ctx.kind, ctx.return_type, True)
            if isinstance(node, s.ForStmt):
                return self.for_stmt(node, scope.child(), loop_ctx, loc)
            return self.for_in_stmt(node, scope.child(), loop_ctx, loc)
        if isinstance(node, (s.BreakStmt, s.ContinueStmt)):
            word = "break" if isinstance(node, s.BreakStmt) else "continue"
            if not ctx.in_loop:
                raise P4Error(f"'{word}' outside a loop", loc)
            return ir.Break(loc) if word == "break" else ir.Continue(loc)
        if isinstance(node, s.DirectApply):
            return self.direct_apply(node, scope, loc)
        raise P4Error(f"unexpected statement '{self.source_text(node)}'", loc)

    # --------------------------------------------------------------- loops

    def for_stmt(self, node: s.ForStmt, scope: Scope, ctx: Ctx, loc: ir.Loc) -> ir.Stmt:
        """``for (init; cond; updates) body`` in its own scope (``scope``)."""
        init = [self.for_part(p, scope, ctx, declare=True) for p in node.init]
        cond: ir.Expr | None = None
        if node.cond is not None:
            cond = self.expect_bool(self.expr(node.cond, scope), node.cond.loc, "for condition")
        updates = [self.for_part(p, scope, ctx, declare=False) for p in node.updates]
        body = self.sub_stmt(node.body, scope, ctx)
        return ir.For(init, cond, updates, body, loc)

    def for_part(self, node: s.Stmt | s.VariableDecl, scope: Scope, ctx: Ctx, declare: bool) -> ir.Stmt:
        """One initialiser or update of a ``for``: a declaration (init only), an
        assignment or a call, checked as the equivalent statement."""
        if isinstance(node, s.VariableDecl):  # ``T x = e``
            if not declare:
                raise P4Error("a 'for' update cannot declare a variable", node.loc)
            return self.variable_decl(node, scope)
        stmt = self.stmt(node, scope, ctx)
        assert stmt is not None
        return stmt

    def for_in_stmt(self, node: s.ForInStmt, scope: Scope, ctx: Ctx, loc: ir.Loc) -> ir.Stmt:
        """``for (T x in low .. high)`` / ``for (T x in collection)``; ``x`` is local."""
        t = self.resolve_type(node.type, scope)
        st = ir.strip_newtype(t)
        name = node.name
        var = ir.Variable(name, t, self.new_uid(), node.name_loc)
        if node.collection is None:
            assert node.low is not None and node.high is not None
            if not isinstance(st, ir.BitType):
                raise P4Error(f"a range loop variable must be bit<W> or int<W>, not {type_str(t)}", loc)
            bounds = []
            for b in (node.low, node.high):
                e = self.expr(b, scope, t)
                bounds.append(self.convert(e, t, b.loc, "range bound"))
            scope.declare(name, var, node.name_loc)
            body = self.sub_stmt(node.body, scope, ctx)
            return ir.ForIn(var, body, bounds[0], bounds[1], None, loc)
        coll = self.expr(node.collection, scope)
        ct = ir.strip_newtype(coll.type)
        cloc = node.collection.loc
        if isinstance(coll, ir.ListExpr):
            elems = [self.convert(x, t, x.loc, "list element") for x in coll.elems]
            coll = ir.ListExpr(ir.TupleType(tuple(t for _ in elems)), coll.loc, elems)
        elif isinstance(ct, ir.StackType):
            if not same_type(ct.elem, t):
                raise P4Error(
                    f"loop variable of type {type_str(t)} cannot iterate over {type_str(coll.type)}", loc
                )
        else:
            raise P4Error(f"cannot iterate over an expression of type {type_str(coll.type)}", cloc)
        scope.declare(name, var, node.name_loc)
        body = self.sub_stmt(node.body, scope, ctx)
        return ir.ForIn(var, body, None, None, coll, loc)

    def direct_apply(self, node: s.DirectApply, scope: Scope, loc: ir.Loc) -> ir.Stmt:
        """``C.apply(args);`` applies a fresh instance of C, as p4c does: the instance is
        named ``C_inst`` (``C_inst_1``, ...) and has the control-plane name ``C``."""
        type_tree = node.type
        t = self.resolve_type(type_tree, scope)
        if not isinstance(t, ir.BlockType):
            raise P4Error(f"'{self.source_text(type_tree)}' is not a parser or control", loc)
        if t.decl.ctor_params:
            raise P4Error(f"'{t.decl.name}' has constructor parameters; instantiate it to apply it", loc)
        pending: list[ir.Instance] = self.direct_instances
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
        call = self.method_call(ref, "apply", [], list(node.args.items), scope, loc)
        return ir.CallStmt(call, loc)

    def sub_stmt(self, node: s.Stmt, scope: Scope, ctx: Ctx) -> ir.Stmt:
        """Branch of an if: declarations get their own scope."""
        stmt = self.stmt(node, scope.child(), ctx)
        return stmt if stmt is not None else ir.Empty(node.loc)

    def call_stmt(self, call: ir.Expr, ctx: Ctx, loc: ir.Loc) -> ir.Stmt:
        """A call used as a statement."""
        if isinstance(call, ir.Call) and isinstance(call.callee, ir.ActionDecl) and ctx.kind == "parser":
            raise P4Error("actions cannot be called from a parser", loc)
        if isinstance(call, ir.MethodCall) and call.method == "apply" and ctx.kind in ("action", "parser", "function"):
            if isinstance(call.type, ir.TableApplyResultType):
                raise P4Error(f"tables cannot be applied inside {'an' if ctx.kind == 'action' else 'a'} {ctx.kind}", loc)
            if ctx.kind in ("action", "function"):
                raise P4Error(f"a parser or control cannot be applied inside {'an' if ctx.kind == 'action' else 'a'} {ctx.kind}", loc)
        if isinstance(call, ir.BoolConst):
            return ir.Empty(loc)  # a static_assert that held
        if not isinstance(call, (ir.Call, ir.MethodCall)):
            raise P4Error("expression used as a statement is not a call", loc)
        return ir.CallStmt(call, loc)

    def return_stmt(self, node: s.ReturnStmt, scope: Scope, ctx: Ctx, loc: ir.Loc) -> ir.Stmt:
        """``return`` / ``return e``."""
        if ctx.kind == "parser":
            raise P4Error("'return' is not allowed in a parser", loc)
        if node.value is None:
            if ctx.return_type is not None and not isinstance(ctx.return_type, ir.VoidType):
                raise P4Error("a return value is required", loc)
            return ir.Return(None, loc)
        if ctx.return_type is None or isinstance(ctx.return_type, ir.VoidType):
            raise P4Error("return with a value outside a function that returns one", loc)
        value = self.expr(node.value, scope, ctx.return_type)
        value = self.convert(value, ctx.return_type, node.value.loc, "return value")
        return ir.Return(value, loc)

    def switch_stmt(self, node: s.SwitchStmt, scope: Scope, ctx: Ctx, loc: ir.Loc) -> ir.Stmt:
        """``switch`` on ``t.apply().action_run`` or on a bit/enum value."""
        subject = self.expr(node.subject, scope)
        st = ir.strip_newtype(subject.type)
        if not isinstance(st, (ir.ActionRunType, ir.BitType, ir.EnumType, ir.ErrorType)):
            raise P4Error(f"cannot switch on an expression of type {type_str(subject.type)}", loc)
        if ctx.kind == "action":  # p4c's BMv2 back end refuses these; programs stay portable
            raise P4Error("switch statements in actions are not supported on the v1model target (BMv2)", loc)
        if not isinstance(st, ir.ActionRunType) and "exact" not in self.match_kinds:  # as p4c
            raise P4Error("a switch on a value needs match_kind 'exact' (declared in core.p4, not included)", loc)
        cases: list[ir.SwitchCase] = []
        seen: set[object] = set()
        for case in node.cases:
            label_node = case.label
            label: object
            if isinstance(label_node, s.DefaultLabel):
                label = "default"
            elif isinstance(st, ir.ActionRunType):
                if not isinstance(label_node, s.NameRef):
                    raise P4Error("switch labels on action_run must be action names", label_node.loc)
                aname = label_node.name
                action = scope.lookup(aname)
                if not isinstance(action, ir.ActionDecl) or all(r.action is not action for r in st.table.actions):
                    raise P4Error(f"'{aname}' is not an action of table '{st.table.name}'", label_node.loc)
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
        e = self.convert(self.expr(label, scope), t, loc, "switch label")
        if not isinstance(e, (ir.Const, ir.EnumMember, ir.ErrorMember)):
            raise P4Error("switch labels must be compile-time constants", loc)
        return e

    # --------------------------------------------------------------- declarations in blocks

    def variable_decl(self, tree: s.VariableDecl, scope: Scope) -> ir.VarDecl:
        """``T x;`` / ``T x = e;`` (also control/parser-level locals)."""
        t = self.resolve_type(tree.type, scope)
        name = tree.name
        loc = tree.loc
        if isinstance(ir.strip_newtype(t), (ir.ExternType, ir.VoidType, ir.IntLitType, ir.StringType)):
            raise P4Error(f"cannot declare a variable of type {type_str(t)}", loc)
        init = None
        if tree.init is not None:
            init = self.convert(self.expr(tree.init, scope, t), t, tree.init.loc, "initializer")
        var = ir.Variable(name, t, self.new_uid(), loc)
        if isinstance(scope.lookup(name), ir.Param):  # an error in p4c, not just a warning
            raise P4Error(f"declaration of '{name}' shadows a parameter '{name}'", tree.name_loc)
        scope.declare(name, var, tree.name_loc)
        return ir.VarDecl(var, init, loc)

    def const_decl(self, tree: s.ConstDecl, scope: Scope) -> ir.Expr:
        """``const T x = e;`` -> the folded value, declared in ``scope``."""
        t = self.resolve_type(tree.type, scope)
        name = tree.name
        value = self.expr(tree.value, scope, t)
        value = self.convert(value, t, tree.value.loc, "constant initializer")
        if not isinstance(value, (ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember, ir.StringConst, ir.ListExpr, ir.StructInit)):
            raise P4Error(f"the initializer of constant '{name}' is not a compile-time constant", tree.value.loc)
        if isinstance(value, ir.Const) and isinstance(t, ir.NewType):
            value = ir.Const(ir.strip_newtype(t), value.loc, value.value)
        scope.declare(name, value, tree.name_loc)
        return value

    # --------------------------------------------------------------- keysets

    def keysets(self, tree: s.Keyset, types: list[ir.Type], scope: Scope, what: str) -> list[ir.Keyset]:
        """A select case / entry key set: one keyset per expression."""
        loc = tree.loc
        if isinstance(tree, s.TupleKeyset):
            return self.tuple_keysets(list(tree.items), types, scope, what, loc)
        if isinstance(tree, (s.DefaultKeyset, s.DontCareExpr)):
            return [ir.KeysetDefault(loc) for _ in types]
        if len(types) != 1:
            if isinstance(tree, s.ListExpr):
                return self.tuple_keysets(list(tree.items), types, scope, what, loc)
            raise P4Error(f"{what} has 1 element, but {len(types)} are expected", loc)
        return [self.simple_keyset(tree, types[0], scope, what)]

    def tuple_keysets(
        self, elems: list[s.Keyset], types: list[ir.Type], scope: Scope, what: str, loc: ir.Loc
    ) -> list[ir.Keyset]:
        """``(k1, k2, ...)``: one keyset per key (a lone ``default`` covers them all)."""
        if len(elems) == 1 and len(types) != 1 and isinstance(elems[0], s.DefaultKeyset):
            return [ir.KeysetDefault(loc) for _ in types]
        if len(elems) != len(types):
            raise P4Error(f"{what} has {len(elems)} elements, but {len(types)} are expected", loc)
        return [self.simple_keyset(e, t, scope, what) for e, t in zip(elems, types, strict=False)]

    def simple_keyset(self, tree: s.Keyset, t: ir.Type, scope: Scope, what: str) -> ir.Keyset:
        """One keyset element: value, ``v &&& m``, ``lo .. hi``, ``default`` or ``_``."""
        loc = tree.loc
        if isinstance(tree, (s.DefaultKeyset, s.DontCareExpr)):
            return ir.KeysetDefault(loc)
        if isinstance(tree, s.MaskKeyset):
            st = ir.strip_newtype(t)
            # the mask of a serializable enum key is a plain number of the underlying type
            mt = st.underlying if isinstance(st, ir.EnumType) and st.underlying is not None else t
            value = self.key_value(tree.value, t, scope, what)
            return ir.KeysetMask(value, self.key_value(tree.mask, mt, scope, what), loc)
        if isinstance(tree, s.RangeKeyset):
            low = self.key_value(tree.low, t, scope, what)
            return ir.KeysetRange(low, self.key_value(tree.high, t, scope, what), loc)
        assert isinstance(tree, s.Expr)  # the grammar nests no tuple in a tuple
        return ir.KeysetValue(self.key_value(tree, t, scope, what), loc)

    def key_value(self, tree: s.Expr, t: ir.Type, scope: Scope, what: str) -> int:
        """A constant of a keyset, as the integer the engine compares with."""
        loc = self.loc(tree)
        e = self.expr(tree, scope, t)
        st = ir.strip_newtype(t)
        try:
            e = self.convert(e, t, loc, what)
        except P4Error:
            raise P4Error(f"{what}: value of type {type_str(e.type)} does not match the key type {type_str(t)}", loc) from None
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.BoolConst):
            return int(e.value)
        if isinstance(e, ir.ErrorMember):
            return e.code
        if isinstance(e, ir.EnumMember) and isinstance(st, ir.EnumType):
            return st.values[e.member] if st.underlying is not None else st.members.index(e.member)
        raise P4Error(f"{what}: key set values must be compile-time constants", loc)

    def construct(self, tree: s.CtorCall, scope: Scope, name: str, annos: ir.Annotations, loc: ir.Loc) -> ir.Instance:
        """Instance built by a constructor call (provided by the declaration checker)."""
        raise NotImplementedError


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


__all__ = ["Ctx", "StmtChecker", "same_type"]
