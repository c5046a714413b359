"""Declarations and the whole program: typed syntax tree -> checked :class:`ir.Program`."""

from __future__ import annotations

import re

from softswitch import ir
from softswitch.errors import P4Error, UnsupportedError
from softswitch.frontend import syntax as s
from softswitch.frontend.ir_ext import BlockProto, PackageType, SpecializedType, TypeVar
from softswitch.frontend.literals import check_width, parse_int
from softswitch.frontend.preprocess import Preprocessed
from softswitch.frontend.scope import Overloads, Scope
from softswitch.frontend.stmts import Ctx, StmtChecker
from softswitch.frontend.tables import TableChecker
from softswitch.frontend.typeops import same_type, substitute, type_str

_BASE_TYPES: dict[str, ir.Type] = {
    "bool_type": ir.BoolType(),
    "error_type": ir.ErrorType(),
    "string_type": ir.StringType(),
    "match_kind_type": ir.MatchKindType(),
    "bit1_type": ir.BitType(1),
    "int_any_type": ir.IntLitType(),
    "void_type": ir.VoidType(),
    "dontcare_type": ir.DontCareType(),
}


class Checker(StmtChecker):
    """Checks one parse tree and assembles the program."""

    def __init__(self, pre: Preprocessed, source_file: str) -> None:
        self.pre = pre
        self.source_file = source_file
        self.errors: list[str] = []
        self.match_kinds: list[str] = []
        self.uid_counter = 0
        self.top = Scope()
        self.types: dict[str, ir.Type] = {}
        self.constants: dict[str, ir.Const | ir.BoolConst] = {}
        self.externs: dict[str, ir.ExternDecl] = {}
        self.extern_functions: dict[str, ir.ExternFunctionDecl] = {}
        self.actions: dict[str, ir.ActionDecl] = {}
        self.functions: dict[str, ir.FunctionDecl] = {}
        self.parsers: dict[str, ir.ParserDecl] = {}
        self.controls: dict[str, ir.ControlDecl] = {}
        self.instances: dict[str, ir.Instance] = {}
        self.main: ir.PackageInstance | None = None
        # per method overload (keyed by the id of its parameter list): type params, return type
        self.method_info: dict[int, tuple[list[str], ir.Type]] = {}
        # instances created for direct applications ``C.apply()`` in the current block
        self.direct_instances: list[ir.Instance] = []
        # one concern per composed checker: tables (keys, actions, entries, properties)
        self.table_checker = TableChecker(self)

    # ------------------------------------------------------------------ program

    def program(self, tree: s.Program) -> ir.Program:
        """Check every top-level declaration in order."""
        for decl in tree.decls:
            method = getattr(self, "_d_" + type(decl).__name__)
            method(decl, self.top)
        if self.main is None:
            raise P4Error("the program has no 'main' package instance", ir.Loc(self.source_file, 1, 1))
        self.check_global_names()
        return ir.Program(
            source_file=self.source_file,
            types=self.types,
            errors=self.errors,
            match_kinds=self.match_kinds,
            constants=self.constants,
            externs=self.externs,
            extern_functions=self.extern_functions,
            actions=self.actions,
            functions=self.functions,
            parsers=self.parsers,
            controls=self.controls,
            instances=self.instances,
            main=self.main,
        )

    def check_global_names(self) -> None:
        """Two actions (or tables) may not share one global control-plane name: top-level
        actions and declarations named ``@name(".x")`` (p4c: "conflicting control plane name")."""
        seen: dict[tuple[str, str], object] = {}

        def claim(kind: str, name: str, decl: object, loc: ir.Loc) -> None:
            other = seen.setdefault((kind, name), decl)
            if other is not decl:
                raise P4Error(f"conflicting control plane name '.{name}' (another {kind} has it)", loc)

        for action in self.actions.values():
            claim("action", action.cp_name.lstrip("."), action, action.loc)
        for block in [*self.controls.values(), *self.parsers.values()]:
            for local in block.locals:
                if isinstance(local, (ir.ActionDecl, ir.TableDecl)) and local.cp_name.startswith("."):
                    kind = "action" if isinstance(local, ir.ActionDecl) else "table"
                    claim(kind, local.cp_name[1:], local, local.loc)

    # ------------------------------------------------------------------ types

    def resolve_type(self, tree: s.TypeRef, scope: Scope) -> ir.Type:
        """A type reference -> ir.Type (typedefs resolved away)."""
        if isinstance(tree, s.BaseTypeRef):
            return _BASE_TYPES[tree.kind]
        loc = tree.loc
        if isinstance(tree, s.BitTypeRef):
            kind = tree.kind
            if isinstance(tree.width, str):
                width = parse_int(tree.width, tree.width_loc).value
            else:
                width = self.const_int(tree.width, scope, "type width")
            if width <= 0 and kind != "bit_type" or width < 0:
                raise P4Error(f"invalid width {width}", loc)
            check_width(width, loc, "type")
            if kind == "varbit_type":
                return ir.VarbitType(width)
            return ir.BitType(width, kind == "int_type")
        if isinstance(tree, s.TypeName):
            return self.named_type(tree.name, self.top if tree.dotted else scope, loc)
        if isinstance(tree, s.SpecializedTypeRef):
            base = self.resolve_type(tree.base, scope)
            args = tuple(self.resolve_type(a, scope) for a in tree.args)
            if isinstance(base, ir.ExternType):
                decl = self.externs.get(base.name)
                if decl is not None and len(decl.type_params) != len(args):
                    raise P4Error(f"extern '{base.name}' expects {len(decl.type_params)} type arguments, got {len(args)}", loc)
                return ir.ExternType(base.name, args)
            return SpecializedType(base, args)
        if isinstance(tree, s.StackTypeRef):
            elem = self.resolve_type(tree.elem, scope)
            size = self.const_int(tree.size, scope, "stack size")
            if not isinstance(ir.strip_newtype(elem), (ir.HeaderType, ir.HeaderUnionType)):
                raise P4Error(f"header stacks need a header element type, not {type_str(elem)}", loc)
            if size <= 0:
                raise P4Error(f"invalid header stack size {size}", loc)
            return ir.StackType(elem, size)
        if isinstance(tree, s.TupleTypeRef):
            return ir.TupleType(tuple(self.resolve_type(a, scope) for a in tree.elems))
        raise P4Error(f"unsupported type '{self.source_text(tree)}'", loc)

    def named_type(self, name: str, scope: Scope, loc: ir.Loc) -> ir.Type:
        """The type a type name refers to."""
        t = scope.lookup_type(name)
        if t is None:
            raise P4Error(f"no type named '{name}'", loc)
        if isinstance(t, ir.ExternDecl):
            return ir.ExternType(t.name)
        if isinstance(t, (ir.ParserDecl, ir.ControlDecl)):
            return ir.BlockType(t)
        assert isinstance(t, ir.Type)
        return t

    def extern_decl(self, name: str, loc: ir.Loc) -> ir.ExternDecl:
        decl = self.externs.get(name)
        if decl is None:
            raise P4Error(f"no extern named '{name}'", loc)
        return decl

    def method_type_params(self, decl: ir.ExternDecl, method: str, params: list[ir.Param]) -> list[str]:
        return self.method_info[id(params)][0]

    def method_return(self, decl: ir.ExternDecl, method: str, params: list[ir.Param]) -> ir.Type:
        return self.method_info[id(params)][1]

    def type_param_scope(self, type_params: tuple[s.Ident, ...], scope: Scope) -> tuple[list[str], Scope]:
        """Names of the type parameters ``type_params`` and a scope that knows them."""
        inner = scope.child()
        names: list[str] = []
        for tp in type_params:
            names.append(tp.name)
            inner.declare_type(tp.name, TypeVar(tp.name), tp.loc)
        return names, inner

    def params(self, params: tuple[s.Param, ...] | None, scope: Scope, declare_in: Scope | None = None) -> list[ir.Param]:
        """A parameter list; parameters are declared in ``declare_in`` when given."""
        out: list[ir.Param] = []
        if params is None:
            return out
        seen: set[str] = set()
        for p in params:
            annos = self.annotations(p.annotations)
            direction = p.direction
            t = self.resolve_type(p.type, scope)
            name = p.name
            loc = p.loc
            if name in seen:
                raise P4Error(f"duplicate parameter '{name}'", loc)
            seen.add(name)
            if direction and isinstance(ir.strip_newtype(t), (ir.ExternType, ir.StringType)):
                raise P4Error(f"parameter '{name}': a parameter of type {type_str(t)} cannot have a direction", loc)
            default = self.expr(p.default, scope, t) if p.default is not None else None
            if default is not None:
                default = self.convert(default, t, loc, "default value")
            param = ir.Param(name, t, self.new_uid(), loc, direction, default, annos)
            out.append(param)
            if declare_in is not None:
                declare_in.declare(name, param, p.name_loc)
        return out

    # ------------------------------------------------------------------ type declarations

    def _fields(self, tree: s.StructLikeDecl, scope: Scope, kind: str) -> list[ir.StructField]:
        fields: list[ir.StructField] = []
        names: set[str] = set()
        for f in tree.fields:
            t = self.resolve_type(f.type, scope)
            fname = f.name
            floc = f.loc
            if fname in names:
                raise P4Error(f"duplicate field '{fname}'", floc)
            names.add(fname)
            st = ir.strip_newtype(t)
            # P4_16 allows a struct of fixed-width fields in a header (laid out in place)
            struct_ok = isinstance(st, ir.StructType) and _fixed_width_struct(st)
            if kind == "header" and not struct_ok and not isinstance(st, (ir.BitType, ir.VarbitType, ir.BoolType, ir.EnumType)):
                raise P4Error(f"header field '{fname}' cannot have type {type_str(t)}", floc)
            if kind == "header_union" and not isinstance(st, ir.HeaderType):
                raise P4Error(f"header_union field '{fname}' must be a header, not {type_str(t)}", floc)
            if kind == "header" and isinstance(st, ir.EnumType) and st.underlying is None:
                raise P4Error(f"header field '{fname}' cannot have type {type_str(t)}", floc)
            fields.append(ir.StructField(fname, t, self.annotations(f.annotations), floc))
        return fields

    def _d_HeaderDecl(self, tree: s.HeaderDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        t = ir.HeaderType(name, self._fields(tree, scope, "header"), self.annotations(tree.annotations), nloc)
        if sum(1 for f in t.fields if isinstance(f.type, ir.VarbitType)) > 1:
            raise P4Error(f"header '{name}' has more than one varbit field", nloc)
        self._add_type(name, t, scope, nloc)

    def _d_HeaderUnionDecl(self, tree: s.HeaderUnionDecl, scope: Scope) -> None:
        annos = self.annotations(tree.annotations)
        t = ir.HeaderUnionType(tree.name, self._fields(tree, scope, "header_union"), annos, tree.name_loc)
        self._add_type(tree.name, t, scope, tree.name_loc)

    def _d_StructDecl(self, tree: s.StructDecl, scope: Scope) -> None:
        annos = self.annotations(tree.annotations)
        t = ir.StructType(tree.name, self._fields(tree, scope, "struct"), annos, tree.name_loc)
        self._add_type(tree.name, t, scope, tree.name_loc)

    def _add_type(self, name: str, t: object, scope: Scope, loc: ir.Loc) -> None:
        scope.declare_type(name, t, loc)
        if scope is self.top and isinstance(t, ir.Type) and not isinstance(t, (TypeVar,)):
            if isinstance(t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType, ir.EnumType, ir.NewType)):
                self.types[name] = t

    def _d_EnumDecl(self, tree: s.EnumDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        members = [m.name for m in tree.members]
        if len(set(members)) != len(members):
            raise P4Error(f"duplicate member in enum '{name}'", nloc)
        annos = self.annotations(tree.annotations)
        self._add_type(name, ir.EnumType(name, members, None, {}, annos, nloc), scope, nloc)

    def _d_SerEnumDecl(self, tree: s.SerEnumDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        under = self.resolve_type(tree.underlying, scope)
        if not isinstance(under, ir.BitType):
            raise P4Error(f"the underlying type of enum '{name}' must be bit<W> or int<W>", nloc)
        members: list[str] = []
        values: dict[str, int] = {}
        for ev in tree.members:
            m = ev.name
            if m in values:
                raise P4Error(f"duplicate member '{m}' in enum '{name}'", ev.loc)
            v = self.convert(self.expr(ev.value, scope, under), under, ev.loc, "enum value")
            if not isinstance(v, ir.Const):
                raise P4Error("enum values must be compile-time constants", ev.loc)
            members.append(m)
            values[m] = v.value
        annos = self.annotations(tree.annotations)
        self._add_type(name, ir.EnumType(name, members, under, values, annos, nloc), scope, nloc)

    def _d_TypedefDecl(self, tree: s.TypedefDecl, scope: Scope) -> None:
        t = self.resolve_type(tree.type, scope)
        scope.declare_type(tree.name, t, tree.name_loc)

    def _d_NewTypeDecl(self, tree: s.NewTypeDecl, scope: Scope) -> None:
        t = self.resolve_type(tree.type, scope)
        name = tree.name
        if not isinstance(ir.strip_newtype(t), (ir.BitType, ir.BoolType, ir.VarbitType, ir.StringType, ir.EnumType)):
            raise P4Error(f"'type' can only be applied to base types, not {type_str(t)}", tree.type.loc)
        annos = self.annotations(tree.annotations)
        translation = annos.get("p4runtime_translation")
        if translation and len(translation) > 1 and not (
            isinstance(translation[1], int) or re.fullmatch(r"string|bit\s*<\s*\d+\s*>", str(translation[1]).strip())
        ):
            raise P4Error(
                f"@p4runtime_translation of '{name}': the controller type must be bit<W>, string or a width, "
                f"not {translation[1]}",
                tree.loc,
            )
        nt = ir.NewType(name, t, annos, tree.name_loc)
        scope.declare_type(name, nt, tree.name_loc)
        self.types[name] = nt

    def _d_ErrorDecl(self, tree: s.ErrorDecl, scope: Scope) -> None:
        for c in tree.members:
            if c.name in self.errors:
                raise P4Error(f"duplicate error member '{c.name}'", c.loc)
            self.errors.append(c.name)

    def _d_MatchKindDecl(self, tree: s.MatchKindDecl, scope: Scope) -> None:
        for c in tree.members:
            if c.name in self.match_kinds:
                raise P4Error(f"duplicate match_kind member '{c.name}'", c.loc)
            self.match_kinds.append(c.name)

    def _d_ConstDecl(self, tree: s.ConstDecl, scope: Scope) -> None:
        value = self.const_decl(tree, scope)
        if isinstance(value, (ir.Const, ir.BoolConst)):
            self.constants[tree.name] = value

    # ------------------------------------------------------------------ externs

    def _d_ExternObjDecl(self, tree: s.ExternObjDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        tparams, inner = self.type_param_scope(tree.type_params, scope)
        decl = ir.ExternDecl(name, tparams, [], {}, self.annotations(tree.annotations), nloc)
        scope.declare_type(name, decl, nloc)
        self.externs[name] = decl
        for m in tree.members:
            if isinstance(m, s.CtorProto):
                if m.name != name:
                    raise P4Error(f"constructor name '{m.name}' does not match extern '{name}'", m.name_loc)
                decl.constructors.append(self.params(m.params, inner))
                continue
            mtparams, minner = self.type_param_scope(m.type_params, inner)
            rtype = self.resolve_type(m.return_type, minner)
            params = self.params(m.params, minner)
            decl.methods.setdefault(m.name, []).append(params)
            self.method_info[id(params)] = (mtparams, rtype)

    def _d_ExternFuncDecl(self, tree: s.ExternFuncDecl, scope: Scope) -> None:
        tparams, inner = self.type_param_scope(tree.type_params, scope)
        rtype = self.resolve_type(tree.return_type, inner)
        name = tree.name
        params = self.params(tree.params, inner)
        decl = ir.ExternFunctionDecl(name, rtype, params, tparams, tree.loc)
        existing = scope.lookup(name) if scope is self.top else None
        if isinstance(existing, Overloads):
            if any(len(d.params) == len(params) for d in existing.decls):
                raise P4Error(f"duplicate declaration of '{name}' with {len(params)} parameters", tree.loc)
            existing.decls.append(decl)
        else:
            scope.declare(name, Overloads(name, [decl]), tree.name_loc)
            self.extern_functions[name] = decl

    def _d_ParserTypeDecl(self, tree: s.ParserTypeDecl, scope: Scope) -> None:
        self._block_proto(tree, scope, "parser")

    def _d_ControlTypeDecl(self, tree: s.ControlTypeDecl, scope: Scope) -> None:
        self._block_proto(tree, scope, "control")

    def _block_proto(self, tree: s.BlockTypeDecl, scope: Scope, kind: str) -> None:
        name, nloc = tree.name, tree.name_loc
        tparams, inner = self.type_param_scope(tree.type_params, scope)
        params = self.params(tree.params, inner)
        scope.declare_type(name, BlockProto(kind, name, params, nloc, tparams), nloc)

    def _d_PackageDecl(self, tree: s.PackageDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        tparams, inner = self.type_param_scope(tree.type_params, scope)
        params = self.params(tree.params, inner)
        scope.declare_type(name, PackageType(name, tparams, params, nloc), nloc)

    # ------------------------------------------------------------------ actions / functions

    def _d_ActionDecl(self, tree: s.ActionDecl, scope: Scope) -> None:
        action = self.action_decl(tree, scope)
        if scope is self.top:
            self.actions[action.name] = action

    def action_decl(self, tree: s.ActionDecl, scope: Scope) -> ir.ActionDecl:
        """An action; its directionless parameters come from the control plane."""
        annos = self.annotations(tree.annotations)
        name = tree.name
        inner = scope.child()
        params = self.params(tree.params, scope, inner)
        seen_cp = False
        for p in params:
            pt = ir.strip_newtype(p.type)
            if isinstance(pt, (ir.ExternType, ir.BlockProtoType)):
                raise P4Error(f"action parameter '{p.name}' cannot have type {type_str(p.type)}", p.loc)
            if p.direction == "" and not (
                isinstance(pt, (ir.BitType, ir.BoolType)) or (isinstance(pt, ir.EnumType) and pt.underlying is not None)
            ):
                raise P4Error(
                    f"action data parameter '{p.name}' has type {type_str(p.type)}; it must be bit<>, int<>, "
                    "bool, a type of those or a serializable enum",
                    p.loc,
                )
            if p.direction == "":
                seen_cp = True
            elif seen_cp:
                raise P4Error(f"directional parameter '{p.name}' after action data parameters", p.loc)
        body = self.block(tree.body, inner, Ctx("action"))
        action = ir.ActionDecl(name, self.cp_name(annos, name), params, body, annos, tree.loc)
        scope.declare(name, action, tree.name_loc)
        return action

    def _d_FunctionDecl(self, tree: s.FunctionDecl, scope: Scope) -> None:
        tparams, inner = self.type_param_scope(tree.type_params, scope)
        if tparams:
            raise UnsupportedError("generic functions", tree.loc)
        rtype = self.resolve_type(tree.return_type, scope)
        name = tree.name
        body_scope = inner.child()
        params = self.params(tree.params, scope, body_scope)
        body = self.block(tree.body, body_scope, Ctx("function", rtype))
        if not isinstance(rtype, ir.VoidType) and not _always_leaves(body):
            raise P4Error(f"function '{name}' does not return a value on all paths", tree.loc)
        fn = ir.FunctionDecl(name, rtype, params, body, tree.loc)
        scope.declare(name, fn, tree.name_loc)
        self.functions[name] = fn

    # ------------------------------------------------------------------ instances

    def _d_Instantiation(self, tree: s.Instantiation, scope: Scope) -> None:
        inst = self.instantiation(tree, scope)
        if inst is not None:
            self.instances[inst.name] = inst

    def instantiation(self, tree: s.Instantiation, scope: Scope) -> ir.Instance | None:
        """``T(args) name;`` -> an Instance (or the program's main package)."""
        annos = self.annotations(tree.annotations)
        type_tree, args_tree = tree.type, tree.args
        name = tree.name
        loc = tree.loc
        t = self.resolve_type(type_tree, scope)
        type_args: tuple[ir.Type, ...] = ()
        if isinstance(t, SpecializedType) and isinstance(t.base, PackageType):
            # ``V1Switch<headers, metadata>(...) main;``: explicit type arguments
            if len(t.args) != len(t.base.type_params):
                raise P4Error(
                    f"package '{t.base.name}' expects {len(t.base.type_params)} type arguments, got {len(t.args)}", loc
                )
            t, type_args = t.base, t.args
        if isinstance(t, PackageType):
            if scope is not self.top:
                raise P4Error("packages can only be instantiated at the top level", loc)
            self.main = self.package_instance(t, args_tree, name, scope, loc, type_args)
            return None
        inst = self.instance_of(t, list(args_tree.items), name, annos, scope, loc)
        if scope is self.top and isinstance(inst.type, ir.BlockType):
            raise P4Error(f"{name}: a parser or control cannot be instantiated at the top level", loc)
        scope.declare(name, inst, tree.name_loc)
        return inst

    def construct(self, tree: s.CtorCall, scope: Scope, name: str, annos: ir.Annotations, loc: ir.Loc) -> ir.Instance:
        t = self.resolve_type(tree.type, scope)
        return self.instance_of(t, list(tree.args.items), name, annos, scope, loc)

    def instance_of(
        self, t: ir.Type, arg_trees: list[s.Arg], name: str, annos: ir.Annotations, scope: Scope, loc: ir.Loc
    ) -> ir.Instance:
        """Check a constructor call of an extern or a parser/control."""
        if isinstance(t, ir.ExternType):
            decl = self.extern_decl(t.name, loc)
            if not decl.constructors:
                raise P4Error(f"extern '{t.name}' cannot be instantiated", loc)
            params = self.pick_overload([(c, c) for c in decl.constructors], arg_trees, loc, f"constructor of '{t.name}'")
            binding = dict(zip(decl.type_params, t.type_args, strict=False))
            args = self.bind_args(params, arg_trees, scope, loc, f"constructor of '{t.name}'", binding)
            for a in args:
                if a is not None and not isinstance(a, (ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember, ir.StringConst, ir.ListExpr, ir.StructInit)):
                    raise P4Error(f"constructor arguments of '{t.name}' must be compile-time constants", a.loc)
            targs = tuple(binding.get(p, ir.DontCareType()) for p in decl.type_params)
            if decl.type_params and any(isinstance(x, ir.DontCareType) for x in targs):
                raise P4Error(f"cannot infer the type arguments of '{t.name}'", loc)
            return ir.Instance(name, self.cp_name(annos, name), ir.ExternType(t.name, targs), [a for a in args if a is not None], annos, loc)
        if isinstance(t, ir.BlockType):
            what = f"constructor of '{t.decl.name}'"
            args = self.bind_args(t.decl.ctor_params, arg_trees, scope, loc, what, {})
            for p, a in zip(t.decl.ctor_params, args, strict=True):
                if isinstance(ir.strip_newtype(p.type), (ir.BlockType, ir.BlockProtoType)):
                    self.check_block_arg_ref(a, p, what, loc)
                elif a is not None and not (
                    isinstance(a, (ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember, ir.StringConst, ir.ListExpr, ir.StructInit))
                    or (isinstance(a, ir.VarRef) and isinstance(a.var, ir.Param) and a.var.direction == "")
                ):
                    raise P4Error(f"{what}: the argument of '{p.name}' must be a compile-time constant", a.loc)
            return ir.Instance(name, self.cp_name(annos, name), t, [a for a in args if a is not None], annos, loc)
        raise P4Error(f"type {type_str(t)} cannot be instantiated", loc)

    def check_block_arg_ref(self, a: ir.Expr | None, p: ir.Param, what: str, loc: ir.Loc) -> None:
        """A parser/control passed to a constructor is a named instance of the enclosing
        block or a constructor parameter of it (p4c names the instance in P4Info)."""
        if isinstance(a, ir.InstanceRef) and isinstance(a.instance, ir.Instance):
            return
        if isinstance(a, ir.VarRef) and isinstance(a.var, ir.Param) and a.var.direction == "":
            return
        if isinstance(a, ir.InstanceRef):
            raise UnsupportedError(f"{what}: a parser or control constructed inside the argument list", loc)
        raise P4Error(f"{what}: parameter '{p.name}' needs a parser or control instance", loc)

    def package_instance(
        self,
        pkg: PackageType,
        args_tree: s.Args,
        name: str,
        scope: Scope,
        loc: ir.Loc,
        type_args: tuple[ir.Type, ...] = (),
    ) -> ir.PackageInstance:
        """``V1Switch(MyParser(), ...) main;`` with each block checked against the package."""
        arg_trees = list(args_tree.items)
        if len(arg_trees) != len(pkg.params):
            raise P4Error(f"package '{pkg.name}' expects {len(pkg.params)} arguments, got {len(arg_trees)}", loc)
        binding: dict[str, ir.Type] = dict(zip(pkg.type_params, type_args, strict=False))
        instances: list[ir.Instance] = []
        for p, a in zip(pkg.params, arg_trees, strict=False):
            aloc = self.loc(a)
            if isinstance(a, s.NamedArg):
                raise UnsupportedError("named package arguments", aloc)
            if isinstance(a, s.CtorCall):
                t = self.resolve_type(a.type, scope)
                if not isinstance(t, ir.BlockType):
                    raise P4Error(f"argument '{p.name}' of package '{pkg.name}' must be a parser or control", aloc)
                decl = t.decl
                inst = self.instance_of(t, list(a.args.items), decl.name, {}, scope, aloc)
                inst.cp_name = self.cp_name(decl.annotations, decl.name)
            else:
                e = self.expr(a, scope)
                if not isinstance(e, ir.InstanceRef) or not isinstance(e.instance, ir.Instance) or not isinstance(e.type, ir.BlockType):
                    raise P4Error(f"argument '{p.name}' of package '{pkg.name}' must be a parser or control", aloc)
                inst = e.instance
                decl = e.type.decl
            self.check_block_arg(p, decl, binding, aloc)
            instances.append(inst)
        return ir.PackageInstance(pkg.name, name, instances, loc)

    def check_block_arg(self, p: ir.Param, decl: ir.ParserDecl | ir.ControlDecl, binding: dict[str, ir.Type], loc: ir.Loc) -> None:
        """The block passed for package parameter ``p`` must match its prototype."""
        pt = p.type
        proto = pt.base if isinstance(pt, SpecializedType) else pt
        if not isinstance(proto, BlockProto):
            return
        kind = "parser" if isinstance(decl, ir.ParserDecl) else "control"
        if kind != proto.kind:
            raise P4Error(f"argument '{p.name}' must be a {proto.kind}, but '{decl.name}' is a {kind}", loc)
        if len(decl.params) != len(proto.params):
            raise P4Error(
                f"{kind} '{decl.name}' has {len(decl.params)} parameters, but '{proto.name}' needs {len(proto.params)}",
                loc,
            )
        local: dict[str, ir.Type] = {}
        if isinstance(pt, SpecializedType):
            for tp, arg in zip(proto.type_params, pt.args, strict=False):
                if isinstance(arg, TypeVar) and arg.name in binding:
                    local[tp] = binding[arg.name]
        for want, have in zip(proto.params, decl.params, strict=False):
            # p4c accepts an 'in' block parameter where the prototype says 'inout' (the
            # block then only reads it), e.g. ``control vrfy(in H hdr, inout M meta)``.
            if want.direction != have.direction and not (want.direction == "inout" and have.direction == "in"):
                raise P4Error(
                    f"parameter '{have.name}' of '{decl.name}' must be '{want.direction or 'directionless'}' as in '{proto.name}'",
                    have.loc,
                )
            w = substitute(want.type, local)
            if isinstance(w, TypeVar):
                local[w.name] = have.type
                if isinstance(pt, SpecializedType):
                    for tp, arg in zip(proto.type_params, pt.args, strict=False):
                        if tp == w.name and isinstance(arg, TypeVar):
                            binding.setdefault(arg.name, have.type)
                            if binding[arg.name] is not have.type and type_str(binding[arg.name]) != type_str(have.type):
                                raise P4Error(
                                    f"parameter '{have.name}' of '{decl.name}' has type {type_str(have.type)}, "
                                    f"but {type_str(binding[arg.name])} is used by the other blocks",
                                    have.loc,
                                )
                continue
            if not same_type(w, have.type):
                raise P4Error(
                    f"parameter '{have.name}' of '{decl.name}' has type {type_str(have.type)}, expected {type_str(w)}",
                    have.loc,
                )

    # ------------------------------------------------------------------ parsers

    def block_local(self, c: s.Decl, inner: Scope, locals_: list) -> bool:
        """Declare a variable, constant or instantiation local to a parser or control;
        False when ``c`` is none of these (the caller handles the block-specific kinds)."""
        if isinstance(c, s.VariableDecl):
            locals_.append(self.variable_decl(c, inner))
        elif isinstance(c, s.ConstDecl):
            self.const_decl(c, inner)
        elif isinstance(c, s.Instantiation):
            inst = self.instantiation(c, inner)
            if inst is not None:
                locals_.append(inst)
        else:
            return False
        return True

    def _d_ParserDecl(self, tree: s.ParserDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        if tree.type_params:
            raise UnsupportedError("generic parser declarations", nloc)
        annos = self.annotations(tree.annotations)
        inner = scope.child()
        params = self.params(tree.params, scope, inner)
        ctor = self.params(tree.ctor_params, scope, inner) if tree.ctor_params is not None else []
        self.check_ctor_params(ctor)
        decl = ir.ParserDecl(name, params, ctor, [], {}, annos, nloc)
        outer_direct, self.direct_instances = self.direct_instances, []
        for c in tree.locals:
            if self.block_local(c, inner, decl.locals):
                continue
            if isinstance(c, s.ValueSetDecl):
                raise UnsupportedError("value_set", c.loc)
        names: dict[str, s.ParserState] = {}
        for st in tree.states:
            sname = st.name
            if sname in names or sname in ("accept", "reject"):
                raise P4Error(f"duplicate state '{sname}'", st.loc)
            names[sname] = st
        if "start" not in names:
            raise P4Error(f"parser '{name}' has no 'start' state", nloc)
        for sname, st in names.items():
            decl.states[sname] = self.parser_state(st, inner, names)
        if not _reaches_final_state(decl):
            raise P4Error(f"parser '{name}' never reaches the accept or reject state", nloc)
        for p in params:
            if isinstance(p.type, BlockProto):
                raise P4Error(f"parameter '{p.name}' cannot have the parser/control type {p.type.name}", p.loc)
        decl.locals[:0] = self.direct_instances
        self.direct_instances = outer_direct
        scope.declare_type(name, decl, nloc)
        self.parsers[name] = decl

    def check_ctor_params(self, ctor: list[ir.Param]) -> None:
        """Constructor parameters are values or (non-generic) parser/control instances."""
        for p in ctor:
            if isinstance(p.type, BlockProto) and p.type.type_params:
                raise UnsupportedError("a generic parser or control type as a constructor parameter", p.loc)
            if isinstance(p.type, (SpecializedType, PackageType)):
                raise UnsupportedError(f"a constructor parameter of type {type_str(p.type)}", p.loc)

    def parser_state(self, tree: s.ParserState, scope: Scope, states: dict[str, s.ParserState]) -> ir.ParserState:
        """One state: statements and its transition."""
        inner = scope.child()
        ctx = Ctx("parser")
        stmts: list[ir.Stmt] = []
        for c in tree.body:
            st = self.stmt(c, inner, ctx)
            if st is not None:
                stmts.append(st)
        transition = ir.Transition("reject", None, [], tree.loc)
        tr = tree.transition
        if isinstance(tr, s.DirectTransition):
            self.check_state(tr.next_state, states, tr.next_loc)
            transition = ir.Transition(tr.next_state, None, [], tr.loc)
        elif isinstance(tr, s.SelectTransition):
            exprs = [self.expr(e, inner) for e in tr.subjects.items]
            for e, et in zip(exprs, tr.subjects.items, strict=False):
                if not isinstance(ir.strip_newtype(e.type), (ir.BitType, ir.BoolType, ir.EnumType, ir.ErrorType)):
                    raise P4Error(f"cannot select on an expression of type {type_str(e.type)}", et.loc)
            cases: list[ir.SelectCase] = []
            for case in tr.cases:
                keysets = self.keysets(case.keyset, [e.type for e in exprs], inner, "select key set")
                self.check_state(case.next_state, states, case.next_loc)
                cases.append(ir.SelectCase(keysets, case.next_state, case.loc))
            transition = ir.Transition(None, exprs, cases, tr.loc)
        return ir.ParserState(tree.name, stmts, transition, self.annotations(tree.annotations), tree.loc)

    def check_state(self, target: str, states: dict[str, s.ParserState], loc: ir.Loc) -> None:
        """A transition target must be a state of this parser."""
        if target not in states and target not in ("accept", "reject"):
            raise P4Error(f"no state named '{target}'", loc)

    # ------------------------------------------------------------------ controls

    def _d_ControlDecl(self, tree: s.ControlDecl, scope: Scope) -> None:
        name, nloc = tree.name, tree.name_loc
        if tree.type_params:
            raise UnsupportedError("generic control declarations", nloc)
        annos = self.annotations(tree.annotations)
        inner = scope.child()
        params = self.params(tree.params, scope, inner)
        ctor = self.params(tree.ctor_params, scope, inner) if tree.ctor_params is not None else []
        self.check_ctor_params(ctor)
        decl = ir.ControlDecl(name, params, ctor, [], ir.Block([]), annos, nloc)
        outer_direct, self.direct_instances = self.direct_instances, []
        for c in tree.locals:
            if self.block_local(c, inner, decl.locals):
                continue
            if isinstance(c, s.ActionDecl):
                decl.locals.append(self.action_decl(c, inner))
            elif isinstance(c, s.TableDecl):
                table = self.table_checker.table_decl(c, inner)
                inner.declare(table.name, table, c.name_loc)
                decl.locals.append(table)
        decl.body = self.block(tree.body, inner, Ctx("control"))
        decl.locals[:0] = self.direct_instances
        self.direct_instances = outer_direct
        scope.declare_type(name, decl, nloc)
        self.controls[name] = decl


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
