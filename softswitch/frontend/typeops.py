"""Type helpers of the checker: printing, equality, substitution of type variables."""

from __future__ import annotations

from collections.abc import Mapping

from softswitch import ir
from softswitch.frontend.ir_ext import BlockProto, PackageType, SpecializedType, TypeVar

# The folded expressions that are compile-time known values (constant initializers and
# constructor arguments must be one of them).
COMPILE_TIME_VALUES: tuple[type[ir.Expr], ...] = (
    ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember, ir.StringConst, ir.ListExpr,
    ir.StructInit,
)


def type_str(t: ir.Type) -> str:
    """The P4 spelling of a type, for error messages."""
    if isinstance(t, ir.BitType):
        return f"{'int' if t.signed else 'bit'}<{t.width}>"
    if isinstance(t, ir.VarbitType):
        return f"varbit<{t.max_width}>"
    for cls, spelling in _KEYWORD_TYPES:
        if isinstance(t, cls):
            return spelling
    if isinstance(t, ir.StackType):
        return f"{type_str(t.elem)}[{t.size}]"
    if isinstance(t, ir.TupleType):
        return "tuple<" + ", ".join(type_str(e) for e in t.elems) + ">"
    return _named_type_str(t)


# types spelled by a keyword
_KEYWORD_TYPES: tuple[tuple[type[ir.Type], str], ...] = (
    (ir.IntLitType, "int"), (ir.BoolType, "bool"), (ir.StringType, "string"),
    (ir.VoidType, "void"), (ir.ErrorType, "error"), (ir.MatchKindType, "match_kind"),
    (ir.DontCareType, "_"),
)


def _named_type_str(t: ir.Type) -> str:
    """The spelling of a type known by a name (with its type arguments, if any)."""
    if isinstance(t, ir.ExternType):
        if t.type_args:
            return t.name + "<" + ", ".join(type_str(a) for a in t.type_args) + ">"
        return t.name
    if isinstance(t, ir.TableApplyResultType):
        return f"apply result of table {t.table.name}"
    if isinstance(t, ir.ActionRunType):
        return f"action_run of table {t.table.name}"
    if isinstance(t, ir.BlockType):
        return t.decl.name
    if isinstance(t, (TypeVar, BlockProto, PackageType)):
        return t.name
    if isinstance(t, SpecializedType):
        return type_str(t.base) + "<" + ", ".join(type_str(a) for a in t.args) + ">"
    name = getattr(t, "name", None)
    return str(name) if name is not None else type(t).__name__


def same_type(a: ir.Type, b: ir.Type) -> bool:
    """Type equality (new types compare as their underlying type)."""
    a, b = ir.strip_newtype(a), ir.strip_newtype(b)
    if a is b:
        return True
    if isinstance(a, ir.TupleType) and isinstance(b, ir.TupleType):
        return len(a.elems) == len(b.elems) and all(
            same_type(x, y) for x, y in zip(a.elems, b.elems, strict=False)
        )
    if isinstance(a, ir.StackType) and isinstance(b, ir.StackType):
        return a.size == b.size and same_type(a.elem, b.elem)
    if isinstance(a, ir.ExternType) and isinstance(b, ir.ExternType):
        return (
            a.name == b.name
            and len(a.type_args) == len(b.type_args)
            and all(same_type(x, y) for x, y in zip(a.type_args, b.type_args, strict=False))
        )
    if isinstance(a, (ir.TableApplyResultType, ir.ActionRunType)):
        return type(a) is type(b) and a.table is b.table
    try:
        return a == b
    except TypeError:
        return False


def substitute(t: ir.Type, binding: Mapping[str, ir.Type]) -> ir.Type:
    """``t`` with bound type variables replaced."""
    if isinstance(t, TypeVar):
        return binding.get(t.name, t)
    if isinstance(t, ir.TupleType):
        return ir.TupleType(tuple(substitute(e, binding) for e in t.elems))
    if isinstance(t, ir.StackType):
        return ir.StackType(substitute(t.elem, binding), t.size)
    if isinstance(t, ir.ExternType):
        return ir.ExternType(t.name, tuple(substitute(a, binding) for a in t.type_args))
    if isinstance(t, SpecializedType):
        return SpecializedType(t.base, tuple(substitute(a, binding) for a in t.args))
    return t


def has_typevar(t: ir.Type) -> bool:
    """True when ``t`` still mentions a type variable."""
    if isinstance(t, TypeVar):
        return True
    if isinstance(t, ir.TupleType):
        return any(has_typevar(e) for e in t.elems)
    if isinstance(t, ir.StackType):
        return has_typevar(t.elem)
    if isinstance(t, (ir.ExternType,)):
        return any(has_typevar(a) for a in t.type_args)
    return False


def bind(pattern: ir.Type, actual: ir.Type, binding: dict[str, ir.Type]) -> None:
    """Extend ``binding`` so that ``pattern`` matches ``actual`` (first binding wins)."""
    if isinstance(pattern, TypeVar):
        if pattern.name not in binding and not isinstance(actual, ir.DontCareType):
            binding[pattern.name] = actual
        return
    if isinstance(pattern, ir.TupleType) and isinstance(actual, ir.TupleType):
        for p, a in zip(pattern.elems, actual.elems, strict=False):
            bind(p, a, binding)
    elif isinstance(pattern, ir.StackType) and isinstance(actual, ir.StackType):
        bind(pattern.elem, actual.elem, binding)
    elif isinstance(pattern, ir.ExternType) and isinstance(actual, ir.ExternType):
        for p, a in zip(pattern.type_args, actual.type_args, strict=False):
            bind(p, a, binding)


def is_numeric(t: ir.Type) -> bool:
    """bit<W>, int<W> or an unsized integer."""
    return isinstance(ir.strip_newtype(t), (ir.BitType, ir.IntLitType))


def is_header_like(t: ir.Type) -> bool:
    """Headers and header unions (things with a validity bit)."""
    return isinstance(ir.strip_newtype(t), (ir.HeaderType, ir.HeaderUnionType))
