"""Instantiations: constructor calls of externs, parsers and controls, and the main package."""

from __future__ import annotations

from softswitch import ir
from softswitch.errors import P4Error, UnsupportedError
from softswitch.frontend import syntax as s
from softswitch.frontend.ir_ext import BlockProto, PackageType, SpecializedType, TypeVar
from softswitch.frontend.scope import Scope
from softswitch.frontend.typeops import COMPILE_TIME_VALUES, same_type, substitute, type_str
from softswitch.frontend.visitor import Visitor


class InstanceChecker(Visitor):
    """Checks ``T(args) name;`` and the blocks given to the package."""

    def instantiation(self, tree: s.Instantiation, scope: Scope) -> ir.Instance | None:
        """``T(args) name;`` -> an Instance (or the program's main package)."""
        annos = self.ctx.annotations(tree.annotations)
        type_tree, args_tree = tree.type, tree.args
        name = tree.name
        loc = tree.loc
        t = self.ctx.typing.resolve_type(type_tree, scope)
        type_args: tuple[ir.Type, ...] = ()
        if isinstance(t, SpecializedType) and isinstance(t.base, PackageType):
            # ``V1Switch<headers, metadata>(...) main;``: explicit type arguments
            if len(t.args) != len(t.base.type_params):
                raise P4Error(
                    f"package '{t.base.name}' expects {len(t.base.type_params)} type arguments, "
                    f"got {len(t.args)}",
                    loc,
                )
            type_args = t.args
            t = t.base
        if isinstance(t, PackageType):
            if scope is not self.ctx.top:
                raise P4Error("packages can only be instantiated at the top level", loc)
            self.ctx.main = self.package_instance(t, args_tree, name, scope, loc, type_args)
            return None
        inst = self.instance_of(t, list(args_tree.items), name, annos, scope, loc)
        if scope is self.ctx.top and isinstance(inst.type, ir.BlockType):
            raise P4Error(
                f"{name}: a parser or control cannot be instantiated at the top level", loc
            )
        scope.declare(name, inst, tree.name_loc)
        return inst

    def construct(
        self, tree: s.CtorCall, scope: Scope, name: str, annos: ir.Annotations, loc: ir.Loc
    ) -> ir.Instance:
        t = self.ctx.typing.resolve_type(tree.type, scope)
        return self.instance_of(t, list(tree.args.items), name, annos, scope, loc)

    def instance_of(
        self,
        t: ir.Type,
        arg_trees: list[s.Arg],
        name: str,
        annos: ir.Annotations,
        scope: Scope,
        loc: ir.Loc,
    ) -> ir.Instance:
        """Check a constructor call of an extern or a parser/control."""
        if isinstance(t, ir.ExternType):
            decl = self.ctx.typing.extern_decl(t.name, loc)
            if not decl.constructors:
                raise P4Error(f"extern '{t.name}' cannot be instantiated", loc)
            params = self.ctx.exprs.pick_overload(
                [(c, c) for c in decl.constructors], arg_trees, loc, f"constructor of '{t.name}'"
            )
            binding = dict(zip(decl.type_params, t.type_args, strict=False))
            args = self.ctx.exprs.bind_args(
                params, arg_trees, scope, loc, f"constructor of '{t.name}'", binding
            )
            for a in args:
                if a is not None and not isinstance(a, COMPILE_TIME_VALUES):
                    raise P4Error(
                        f"constructor arguments of '{t.name}' must be compile-time constants", a.loc
                    )
            targs = tuple(binding.get(p, ir.DontCareType()) for p in decl.type_params)
            if decl.type_params and any(isinstance(x, ir.DontCareType) for x in targs):
                raise P4Error(f"cannot infer the type arguments of '{t.name}'", loc)
            return ir.Instance(
                name,
                self.ctx.cp_name(annos, name),
                ir.ExternType(t.name, targs),
                [a for a in args if a is not None],
                annos,
                loc,
            )
        if isinstance(t, ir.BlockType):
            what = f"constructor of '{t.decl.name}'"
            args = self.ctx.exprs.bind_args(t.decl.ctor_params, arg_trees, scope, loc, what, {})
            for p, a in zip(t.decl.ctor_params, args, strict=True):
                if isinstance(ir.strip_newtype(p.type), (ir.BlockType, ir.BlockProtoType)):
                    self.check_block_arg_ref(a, p, what, loc)
                elif a is not None and not (
                    isinstance(a, COMPILE_TIME_VALUES)
                    or (
                        isinstance(a, ir.VarRef)
                        and isinstance(a.var, ir.Param)
                        and a.var.direction == ""
                    )
                ):
                    raise P4Error(
                        f"{what}: the argument of '{p.name}' must be a compile-time constant", a.loc
                    )
            return ir.Instance(
                name,
                self.ctx.cp_name(annos, name),
                t,
                [a for a in args if a is not None],
                annos,
                loc,
            )
        raise P4Error(f"type {type_str(t)} cannot be instantiated", loc)

    def check_block_arg_ref(self, a: ir.Expr | None, p: ir.Param, what: str, loc: ir.Loc) -> None:
        """A parser/control passed to a constructor is a named instance of the enclosing
        block or a constructor parameter of it (p4c names the instance in P4Info)."""
        if isinstance(a, ir.InstanceRef) and isinstance(a.instance, ir.Instance):
            return
        if isinstance(a, ir.VarRef) and isinstance(a.var, ir.Param) and a.var.direction == "":
            return
        if isinstance(a, ir.InstanceRef):
            raise UnsupportedError(
                f"{what}: a parser or control constructed inside the argument list", loc
            )
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
            raise P4Error(
                f"package '{pkg.name}' expects {len(pkg.params)} arguments, got {len(arg_trees)}",
                loc,
            )
        binding: dict[str, ir.Type] = dict(zip(pkg.type_params, type_args, strict=False))
        instances: list[ir.Instance] = []
        for p, a in zip(pkg.params, arg_trees, strict=False):
            aloc = a.loc
            if isinstance(a, s.NamedArg):
                raise UnsupportedError("named package arguments", aloc)
            if isinstance(a, s.CtorCall):
                t = self.ctx.typing.resolve_type(a.type, scope)
                if not isinstance(t, ir.BlockType):
                    raise P4Error(
                        f"argument '{p.name}' of package '{pkg.name}' must be a parser or control",
                        aloc,
                    )
                decl = t.decl
                inst = self.instance_of(t, list(a.args.items), decl.name, {}, scope, aloc)
                inst.cp_name = self.ctx.cp_name(decl.annotations, decl.name)
            else:
                e = self.ctx.exprs.expr(a, scope)
                if (
                    not isinstance(e, ir.InstanceRef)
                    or not isinstance(e.instance, ir.Instance)
                    or not isinstance(e.type, ir.BlockType)
                ):
                    raise P4Error(
                        f"argument '{p.name}' of package '{pkg.name}' must be a parser or control",
                        aloc,
                    )
                inst = e.instance
                decl = e.type.decl
            self.check_block_arg(p, decl, binding, aloc)
            instances.append(inst)
        return ir.PackageInstance(pkg.name, name, instances, loc)

    def check_block_arg(
        self,
        p: ir.Param,
        decl: ir.ParserDecl | ir.ControlDecl,
        binding: dict[str, ir.Type],
        loc: ir.Loc,
    ) -> None:
        """The block passed for package parameter ``p`` must match its prototype."""
        pt = p.type
        proto = pt.base if isinstance(pt, SpecializedType) else pt
        if not isinstance(proto, BlockProto):
            return
        _check_block_kind(p, decl, proto, loc)
        local: dict[str, ir.Type] = {}
        if isinstance(pt, SpecializedType):
            for tp, arg in zip(proto.type_params, pt.args, strict=False):
                if isinstance(arg, TypeVar) and arg.name in binding:
                    local[tp] = binding[arg.name]
        for want, have in zip(proto.params, decl.params, strict=False):
            _check_block_param(want, have, decl, proto)
            w = substitute(want.type, local)
            if isinstance(w, TypeVar):
                local[w.name] = have.type
                if isinstance(pt, SpecializedType):
                    _bind_package_type_var(pt, proto, w.name, have, decl, binding)
                continue
            if not same_type(w, have.type):
                raise P4Error(
                    f"parameter '{have.name}' of '{decl.name}' has type {type_str(have.type)}, "
                    f"expected {type_str(w)}",
                    have.loc,
                )


def _check_block_kind(
    p: ir.Param, decl: ir.ParserDecl | ir.ControlDecl, proto: BlockProto, loc: ir.Loc
) -> None:
    """The block is of the prototype's kind (parser or control), with as many
    parameters."""
    kind = "parser" if isinstance(decl, ir.ParserDecl) else "control"
    if kind != proto.kind:
        raise P4Error(
            f"argument '{p.name}' must be a {proto.kind}, but '{decl.name}' is a {kind}", loc
        )
    if len(decl.params) != len(proto.params):
        raise P4Error(
            f"{kind} '{decl.name}' has {len(decl.params)} parameters, but '{proto.name}' needs "
            f"{len(proto.params)}",
            loc,
        )


def _check_block_param(
    want: ir.Param, have: ir.Param, decl: ir.ParserDecl | ir.ControlDecl, proto: BlockProto
) -> None:
    """A block's parameter has its prototype's direction; p4c accepts an 'in' block
    parameter where the prototype says 'inout' (the block then only reads it), e.g.
    ``control vrfy(in H hdr, inout M meta)``."""
    if want.direction != have.direction and not (
        want.direction == "inout" and have.direction == "in"
    ):
        raise P4Error(
            f"parameter '{have.name}' of '{decl.name}' must be "
            f"'{want.direction or 'directionless'}' as in '{proto.name}'",
            have.loc,
        )


def _bind_package_type_var(
    pt: SpecializedType,
    proto: BlockProto,
    name: str,
    have: ir.Param,
    decl: ir.ParserDecl | ir.ControlDecl,
    binding: dict[str, ir.Type],
) -> None:
    """The package's type variable behind the prototype's type parameter ``name`` takes
    the type of ``have``; the blocks passed to one package must agree on it."""
    for tp, arg in zip(proto.type_params, pt.args, strict=False):
        if tp != name or not isinstance(arg, TypeVar):
            continue
        binding.setdefault(arg.name, have.type)
        bound = binding[arg.name]
        if bound is not have.type and type_str(bound) != type_str(have.type):
            raise P4Error(
                f"parameter '{have.name}' of '{decl.name}' has type {type_str(have.type)}, "
                f"but {type_str(bound)} is used by the other blocks",
                have.loc,
            )
