"""Declarations and their scopes: types, externs, parsers, controls, actions, functions."""

from __future__ import annotations

import re
from collections.abc import Callable

from softswitch import ir
from softswitch.errors import P4Error, UnsupportedError
from softswitch.frontend import syntax as s
from softswitch.frontend.ir_ext import BlockProto, PackageType, SpecializedType, TypeVar
from softswitch.frontend.scope import Overloads, Scope
from softswitch.frontend.stmts import Ctx
from softswitch.frontend.typeops import type_str
from softswitch.frontend.visitor import Visitor


class DeclChecker(Visitor):
    """Checks one declaration at a time and records it in the context."""

    def params(
        self, params: tuple[s.Param, ...] | None, scope: Scope, declare_in: Scope | None = None
    ) -> list[ir.Param]:
        """A parameter list; parameters are declared in ``declare_in`` when given."""
        out: list[ir.Param] = []
        if params is None:
            return out
        seen: set[str] = set()
        for p in params:
            annos = self.ctx.annotations(p.annotations)
            direction = p.direction
            t = self.ctx.typing.resolve_type(p.type, scope)
            name = p.name
            loc = p.loc
            if name in seen:
                raise P4Error(f"duplicate parameter '{name}'", loc)
            seen.add(name)
            if direction and isinstance(ir.strip_newtype(t), (ir.ExternType, ir.StringType)):
                raise P4Error(
                    f"parameter '{name}': a parameter of type {type_str(t)} cannot have a "
                    "direction",
                    loc,
                )
            default = self.ctx.exprs.expr(p.default, scope, t) if p.default is not None else None
            if default is not None:
                default = self.ctx.exprs.convert(default, t, loc, "default value")
            param = ir.Param(name, t, self.ctx.new_uid(), loc, direction, default, annos)
            out.append(param)
            if declare_in is not None:
                declare_in.declare(name, param, p.name_loc)
        return out

    def _fields(self, tree: s.StructLikeDecl, scope: Scope, kind: str) -> list[ir.StructField]:
        fields: list[ir.StructField] = []
        names: set[str] = set()
        for f in tree.fields:
            t = self.ctx.typing.resolve_type(f.type, scope)
            fname = f.name
            floc = f.loc
            if fname in names:
                raise P4Error(f"duplicate field '{fname}'", floc)
            names.add(fname)
            st = ir.strip_newtype(t)
            # P4_16 allows a struct of fixed-width fields in a header (laid out in place)
            struct_ok = isinstance(st, ir.StructType) and _fixed_width_struct(st)
            if (
                kind == "header"
                and not struct_ok
                and not isinstance(st, (ir.BitType, ir.VarbitType, ir.BoolType, ir.EnumType))
            ):
                raise P4Error(f"header field '{fname}' cannot have type {type_str(t)}", floc)
            if kind == "header_union" and not isinstance(st, ir.HeaderType):
                raise P4Error(
                    f"header_union field '{fname}' must be a header, not {type_str(t)}", floc
                )
            if kind == "header" and isinstance(st, ir.EnumType) and st.underlying is None:
                raise P4Error(f"header field '{fname}' cannot have type {type_str(t)}", floc)
            fields.append(ir.StructField(fname, t, self.ctx.annotations(f.annotations), floc))
        return fields

    def visit_HeaderDecl(self, tree: s.HeaderDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        t = ir.HeaderType(
            name, self._fields(tree, scope, "header"), self.ctx.annotations(tree.annotations), nloc
        )
        if sum(1 for f in t.fields if isinstance(f.type, ir.VarbitType)) > 1:
            raise P4Error(f"header '{name}' has more than one varbit field", nloc)
        self._add_type(name, t, scope, nloc)

    def visit_HeaderUnionDecl(self, tree: s.HeaderUnionDecl, scope: Scope) -> None:
        annos = self.ctx.annotations(tree.annotations)
        t = ir.HeaderUnionType(
            tree.name, self._fields(tree, scope, "header_union"), annos, tree.name_loc
        )
        self._add_type(tree.name, t, scope, tree.name_loc)

    def visit_StructDecl(self, tree: s.StructDecl, scope: Scope) -> None:
        annos = self.ctx.annotations(tree.annotations)
        t = ir.StructType(tree.name, self._fields(tree, scope, "struct"), annos, tree.name_loc)
        self._add_type(tree.name, t, scope, tree.name_loc)

    def _add_type(self, name: str, t: object, scope: Scope, loc: ir.Loc) -> None:
        scope.declare_type(name, t, loc)
        if scope is self.ctx.top and isinstance(t, ir.Type) and not isinstance(t, (TypeVar,)):
            if isinstance(
                t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType, ir.EnumType, ir.NewType)
            ):
                self.ctx.types[name] = t

    def visit_EnumDecl(self, tree: s.EnumDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        members = [m.name for m in tree.members]
        if len(set(members)) != len(members):
            raise P4Error(f"duplicate member in enum '{name}'", nloc)
        annos = self.ctx.annotations(tree.annotations)
        self._add_type(name, ir.EnumType(name, members, None, {}, annos, nloc), scope, nloc)

    def visit_SerEnumDecl(self, tree: s.SerEnumDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        under = self.ctx.typing.resolve_type(tree.underlying, scope)
        if not isinstance(under, ir.BitType):
            raise P4Error(f"the underlying type of enum '{name}' must be bit<W> or int<W>", nloc)
        members: list[str] = []
        values: dict[str, int] = {}
        for ev in tree.members:
            m = ev.name
            if m in values:
                raise P4Error(f"duplicate member '{m}' in enum '{name}'", ev.loc)
            v = self.ctx.exprs.convert(
                self.ctx.exprs.expr(ev.value, scope, under), under, ev.loc, "enum value"
            )
            if not isinstance(v, ir.Const):
                raise P4Error("enum values must be compile-time constants", ev.loc)
            members.append(m)
            values[m] = v.value
        annos = self.ctx.annotations(tree.annotations)
        self._add_type(name, ir.EnumType(name, members, under, values, annos, nloc), scope, nloc)

    def visit_TypedefDecl(self, tree: s.TypedefDecl, scope: Scope) -> None:
        t = self.ctx.typing.resolve_type(tree.type, scope)
        scope.declare_type(tree.name, t, tree.name_loc)

    def visit_NewTypeDecl(self, tree: s.NewTypeDecl, scope: Scope) -> None:
        t = self.ctx.typing.resolve_type(tree.type, scope)
        name = tree.name
        if not isinstance(
            ir.strip_newtype(t),
            (ir.BitType, ir.BoolType, ir.VarbitType, ir.StringType, ir.EnumType),
        ):
            raise P4Error(
                f"'type' can only be applied to base types, not {type_str(t)}", tree.type.loc
            )
        annos = self.ctx.annotations(tree.annotations)
        translation = annos.get("p4runtime_translation")
        if (
            translation
            and len(translation) > 1
            and not (
                isinstance(translation[1], int)
                or re.fullmatch(r"string|bit\s*<\s*\d+\s*>", str(translation[1]).strip())
            )
        ):
            raise P4Error(
                f"@p4runtime_translation of '{name}': the controller type must be bit<W>, string "
                "or a width, "
                f"not {translation[1]}",
                tree.loc,
            )
        nt = ir.NewType(name, t, annos, tree.name_loc)
        scope.declare_type(name, nt, tree.name_loc)
        self.ctx.types[name] = nt

    def visit_ErrorDecl(self, tree: s.ErrorDecl, scope: Scope) -> None:
        for c in tree.members:
            if c.name in self.ctx.errors:
                raise P4Error(f"duplicate error member '{c.name}'", c.loc)
            self.ctx.errors.append(c.name)

    def visit_MatchKindDecl(self, tree: s.MatchKindDecl, scope: Scope) -> None:
        for c in tree.members:
            if c.name in self.ctx.match_kinds:
                raise P4Error(f"duplicate match_kind member '{c.name}'", c.loc)
            self.ctx.match_kinds.append(c.name)

    def visit_ConstDecl(self, tree: s.ConstDecl, scope: Scope) -> None:
        value = self.ctx.stmts.const_decl(tree, scope)
        if isinstance(value, (ir.Const, ir.BoolConst)):
            self.ctx.constants[tree.name] = value

    def visit_ExternObjDecl(self, tree: s.ExternObjDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        tparams, inner = self.ctx.typing.type_param_scope(tree.type_params, scope)
        decl = ir.ExternDecl(name, tparams, [], {}, self.ctx.annotations(tree.annotations), nloc)
        scope.declare_type(name, decl, nloc)
        self.ctx.externs[name] = decl
        for m in tree.members:
            if isinstance(m, s.CtorProto):
                if m.name != name:
                    raise P4Error(
                        f"constructor name '{m.name}' does not match extern '{name}'", m.name_loc
                    )
                decl.constructors.append(self.params(m.params, inner))
                continue
            mtparams, minner = self.ctx.typing.type_param_scope(m.type_params, inner)
            rtype = self.ctx.typing.resolve_type(m.return_type, minner)
            params = self.params(m.params, minner)
            decl.methods.setdefault(m.name, []).append(params)
            self.ctx.method_info[id(params)] = (mtparams, rtype)

    def visit_ExternFuncDecl(self, tree: s.ExternFuncDecl, scope: Scope) -> None:
        tparams, inner = self.ctx.typing.type_param_scope(tree.type_params, scope)
        rtype = self.ctx.typing.resolve_type(tree.return_type, inner)
        name = tree.name
        params = self.params(tree.params, inner)
        decl = ir.ExternFunctionDecl(name, rtype, params, tparams, tree.loc)
        existing = scope.lookup(name) if scope is self.ctx.top else None
        if isinstance(existing, Overloads):
            if any(len(d.params) == len(params) for d in existing.decls):
                raise P4Error(
                    f"duplicate declaration of '{name}' with {len(params)} parameters", tree.loc
                )
            existing.decls.append(decl)
        else:
            scope.declare(name, Overloads(name, [decl]), tree.name_loc)
            self.ctx.extern_functions[name] = decl

    def visit_ParserTypeDecl(self, tree: s.ParserTypeDecl, scope: Scope) -> None:
        self._block_proto(tree, scope, "parser")

    def visit_ControlTypeDecl(self, tree: s.ControlTypeDecl, scope: Scope) -> None:
        self._block_proto(tree, scope, "control")

    def _block_proto(self, tree: s.BlockTypeDecl, scope: Scope, kind: str) -> None:
        name, nloc = tree.name, tree.name_loc
        tparams, inner = self.ctx.typing.type_param_scope(tree.type_params, scope)
        params = self.params(tree.params, inner)
        scope.declare_type(name, BlockProto(kind, name, params, nloc, tparams), nloc)

    def visit_PackageDecl(self, tree: s.PackageDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        tparams, inner = self.ctx.typing.type_param_scope(tree.type_params, scope)
        params = self.params(tree.params, inner)
        scope.declare_type(name, PackageType(name, tparams, params, nloc), nloc)

    def visit_ActionDecl(self, tree: s.ActionDecl, scope: Scope) -> None:
        action = self.action_decl(tree, scope)
        if scope is self.ctx.top:
            self.ctx.actions[action.name] = action

    def action_decl(self, tree: s.ActionDecl, scope: Scope) -> ir.ActionDecl:
        """An action; its directionless parameters come from the control plane."""
        annos = self.ctx.annotations(tree.annotations)
        name = tree.name
        inner = scope.child()
        params = self.params(tree.params, scope, inner)
        seen_cp = False
        for p in params:
            pt = ir.strip_newtype(p.type)
            if isinstance(pt, (ir.ExternType, ir.BlockProtoType)):
                raise P4Error(
                    f"action parameter '{p.name}' cannot have type {type_str(p.type)}", p.loc
                )
            if p.direction == "" and not (
                isinstance(pt, (ir.BitType, ir.BoolType))
                or (isinstance(pt, ir.EnumType) and pt.underlying is not None)
            ):
                raise P4Error(
                    f"action data parameter '{p.name}' has type {type_str(p.type)}; it must be "
                    "bit<>, int<>, "
                    "bool, a type of those or a serializable enum",
                    p.loc,
                )
            if p.direction == "":
                seen_cp = True
            elif seen_cp:
                raise P4Error(
                    f"directional parameter '{p.name}' after action data parameters", p.loc
                )
        body = self.ctx.stmts.block(tree.body, inner, Ctx("action"))
        action = ir.ActionDecl(name, self.ctx.cp_name(annos, name), params, body, annos, tree.loc)
        scope.declare(name, action, tree.name_loc)
        return action

    def visit_FunctionDecl(self, tree: s.FunctionDecl, scope: Scope) -> None:
        tparams, inner = self.ctx.typing.type_param_scope(tree.type_params, scope)
        if tparams:
            raise UnsupportedError("generic functions", tree.loc)
        rtype = self.ctx.typing.resolve_type(tree.return_type, scope)
        name = tree.name
        body_scope = inner.child()
        params = self.params(tree.params, scope, body_scope)
        body = self.ctx.stmts.block(tree.body, body_scope, Ctx("function", rtype))
        if not isinstance(rtype, ir.VoidType) and not _always_leaves(body):
            raise P4Error(f"function '{name}' does not return a value on all paths", tree.loc)
        fn = ir.FunctionDecl(name, rtype, params, body, tree.loc)
        scope.declare(name, fn, tree.name_loc)
        self.ctx.functions[name] = fn

    def visit_Instantiation(self, tree: s.Instantiation, scope: Scope) -> None:
        inst = self.ctx.ctors.instantiation(tree, scope)
        if inst is not None:
            self.ctx.instances[inst.name] = inst

    def block_local(
        self, c: s.Decl, inner: Scope, add_local: Callable[[ir.VarDecl | ir.Instance], None]
    ) -> bool:
        """Declare a variable, constant or instantiation local to a parser or control (given
        to ``add_local``, which appends it to the block's locals); False when ``c`` is none of
        these (the caller handles the block-specific kinds)."""
        if isinstance(c, s.VariableDecl):
            add_local(self.ctx.stmts.variable_decl(c, inner))
        elif isinstance(c, s.ConstDecl):
            self.ctx.stmts.const_decl(c, inner)
        elif isinstance(c, s.Instantiation):
            inst = self.ctx.ctors.instantiation(c, inner)
            if inst is not None:
                add_local(inst)
        else:
            return False
        return True

    def block_signature(self, tree: s.ParserDecl | s.ControlDecl, what: str, scope: Scope
                        ) -> tuple[Scope, list[ir.Param], list[ir.Param], ir.Annotations]:
        """(inner scope, parameters, constructor parameters, annotations) of a parser or
        control declaration; ``what`` names the kind in the error for type parameters."""
        if tree.type_params:
            raise UnsupportedError(f"generic {what} declarations", tree.name_loc)
        annos = self.ctx.annotations(tree.annotations)
        inner = scope.child()
        params = self.params(tree.params, scope, inner)
        ctor = self.params(tree.ctor_params, scope, inner) if tree.ctor_params is not None else []
        self.check_ctor_params(ctor)
        return inner, params, ctor, annos

    def visit_ParserDecl(self, tree: s.ParserDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        inner, params, ctor, annos = self.block_signature(tree, "parser", scope)
        decl = ir.ParserDecl(name, params, ctor, [], {}, annos, nloc)
        outer_direct, self.ctx.direct_instances = self.ctx.direct_instances, []
        for c in tree.locals:
            if self.block_local(c, inner, decl.locals.append):
                continue
            if isinstance(c, s.ValueSetDecl):
                raise UnsupportedError("value_set", c.loc)
        names = _states_by_name(tree)
        for sname, st in names.items():
            decl.states[sname] = self.parser_state(st, inner, names)
        if not _reaches_final_state(decl):
            raise P4Error(f"parser '{name}' never reaches the accept or reject state", nloc)
        for p in params:
            if isinstance(p.type, BlockProto):
                raise P4Error(
                    f"parameter '{p.name}' cannot have the parser/control type {p.type.name}", p.loc
                )
        decl.locals[:0] = self.ctx.direct_instances
        self.ctx.direct_instances = outer_direct
        scope.declare_type(name, decl, nloc)
        self.ctx.parsers[name] = decl

    def check_ctor_params(self, ctor: list[ir.Param]) -> None:
        """Constructor parameters are values or (non-generic) parser/control instances."""
        for p in ctor:
            if isinstance(p.type, BlockProto) and p.type.type_params:
                raise UnsupportedError(
                    "a generic parser or control type as a constructor parameter", p.loc
                )
            if isinstance(p.type, (SpecializedType, PackageType)):
                raise UnsupportedError(f"a constructor parameter of type {type_str(p.type)}", p.loc)

    def parser_state(
        self, tree: s.ParserState, scope: Scope, states: dict[str, s.ParserState]
    ) -> ir.ParserState:
        """One state: statements and its transition."""
        inner = scope.child()
        ctx = Ctx("parser")
        stmts: list[ir.Stmt] = []
        for c in tree.body:
            st = self.ctx.stmts.stmt(c, inner, ctx)
            if st is not None:
                stmts.append(st)
        transition = ir.Transition("reject", None, [], tree.loc)
        tr = tree.transition
        if isinstance(tr, s.DirectTransition):
            self.check_state(tr.next_state, states, tr.next_loc)
            transition = ir.Transition(tr.next_state, None, [], tr.loc)
        elif isinstance(tr, s.SelectTransition):
            exprs = [self.ctx.exprs.expr(e, inner) for e in tr.subjects.items]
            for e, et in zip(exprs, tr.subjects.items, strict=False):
                if not isinstance(
                    ir.strip_newtype(e.type), (ir.BitType, ir.BoolType, ir.EnumType, ir.ErrorType)
                ):
                    raise P4Error(
                        f"cannot select on an expression of type {type_str(e.type)}", et.loc
                    )
            cases: list[ir.SelectCase] = []
            for case in tr.cases:
                keysets = self.ctx.keysets.keysets(
                    case.keyset, [e.type for e in exprs], inner, "select key set"
                )
                self.check_state(case.next_state, states, case.next_loc)
                cases.append(ir.SelectCase(keysets, case.next_state, case.loc))
            transition = ir.Transition(None, exprs, cases, tr.loc)
        return ir.ParserState(
            tree.name, stmts, transition, self.ctx.annotations(tree.annotations), tree.loc
        )

    def check_state(self, target: str, states: dict[str, s.ParserState], loc: ir.Loc) -> None:
        """A transition target must be a state of this parser."""
        if target not in states and target not in ("accept", "reject"):
            raise P4Error(f"no state named '{target}'", loc)

    def visit_ControlDecl(self, tree: s.ControlDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        inner, params, ctor, annos = self.block_signature(tree, "control", scope)
        decl = ir.ControlDecl(name, params, ctor, [], ir.Block([]), annos, nloc)
        outer_direct, self.ctx.direct_instances = self.ctx.direct_instances, []
        for c in tree.locals:
            if self.block_local(c, inner, decl.locals.append):
                continue
            if isinstance(c, s.ActionDecl):
                decl.locals.append(self.action_decl(c, inner))
            elif isinstance(c, s.TableDecl):
                table = self.ctx.tables.table_decl(c, inner)
                inner.declare(table.name, table, c.name_loc)
                decl.locals.append(table)
        decl.body = self.ctx.stmts.block(tree.body, inner, Ctx("control"))
        decl.locals[:0] = self.ctx.direct_instances
        self.ctx.direct_instances = outer_direct
        scope.declare_type(name, decl, nloc)
        self.ctx.controls[name] = decl


def _reaches_final_state(decl: ir.ParserDecl) -> bool:
    """Whether some path from ``start`` ends in accept or reject (a select without a
    default case rejects when nothing matches)."""
    seen, todo = set(), ["start"]
    while todo:
        name = todo.pop()
        if name in ("accept", "reject"):
            return True
        if name in seen or name not in decl.states:
            continue
        seen.add(name)
        tr = decl.states[name].transition
        if tr.select is None:
            todo.append(tr.next_state or "reject")
            continue
        if not any(all(isinstance(k, ir.KeysetDefault) for k in c.keysets) for c in tr.cases):
            return True
        todo += [c.next_state for c in tr.cases]
    return False


def _always_leaves(s: ir.Stmt | None) -> bool:
    """Whether every path through ``s`` ends in ``return`` or ``exit``."""
    if isinstance(s, (ir.Return, ir.Exit)):
        return True
    if isinstance(s, ir.Block):
        return any(_always_leaves(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return _always_leaves(s.then) and s.else_ is not None and _always_leaves(s.else_)
    if isinstance(s, ir.SwitchStmt):
        has_default = any("default" in c.labels for c in s.cases)
        return has_default and all(_always_leaves(c.body) for c in s.cases if c.body is not None)
    return False


def _fixed_width_struct(t: ir.StructType) -> bool:
    """A struct that P4_16 allows inside a header: only bit<W>, int<W>, bool, serializable
    enums and such structs, recursively."""
    for f in t.fields:
        ft = ir.strip_newtype(f.type)
        if isinstance(ft, ir.StructType):
            if not _fixed_width_struct(ft):
                return False
        elif isinstance(ft, ir.EnumType):
            if ft.underlying is None:
                return False
        elif not isinstance(ft, (ir.BitType, ir.BoolType)):
            return False
    return True


def _states_by_name(tree: s.ParserDecl) -> dict[str, s.ParserState]:
    """A parser's states by name: each once, none called accept or reject, one start."""
    names: dict[str, s.ParserState] = {}
    for st in tree.states:
        sname = st.name
        if sname in names or sname in ("accept", "reject"):
            raise P4Error(f"duplicate state '{sname}'", st.loc)
        names[sname] = st
    if "start" not in names:
        raise P4Error(f"parser '{tree.name}' has no 'start' state", tree.name_loc)
    return names
