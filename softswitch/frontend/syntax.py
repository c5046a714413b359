"""Typed syntax tree of P4 expressions and type references, with source positions.

The grammar (``p4.lark``) gives lark trees whose children are read by position; for
expressions and type references :mod:`softswitch.frontend.syntax_build` turns them into these
dataclasses instead, so the checks read named fields. Every node carries ``loc`` (the
original FILE:LINE:COL, after the preprocessor's line mapping) and ``span`` (offsets into the
preprocessed text, for messages and P4Info names that quote the source).

Declarations and statements are still lark trees whose expression and type children are
these nodes (the next layer to convert).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from softswitch import ir


@dataclass(frozen=True, eq=False)
class Node:
    """Common part of every node: where it is in the source."""

    loc: ir.Loc
    span: tuple[int, int] = field(repr=False)


# ---------------------------------------------------------------------------- types


class TypeRef(Node):
    """A type as written (resolved to an :class:`ir.Type` by the checker)."""


@dataclass(frozen=True, eq=False)
class BaseTypeRef(TypeRef):
    """``bool``, ``error``, ``string``, ``match_kind``, ``bit``, ``int``, ``void``, ``_``."""

    kind: str  # the grammar's rule name: bool_type, void_type, dontcare_type, ...


@dataclass(frozen=True, eq=False)
class BitTypeRef(TypeRef):
    """``bit<W>``, ``int<W>``, ``varbit<W>``: ``width`` is an integer literal's text or an
    expression in parentheses."""

    kind: str  # bit_type, int_type or varbit_type
    width: Expr | str
    width_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class TypeName(TypeRef):
    """A named type; ``dotted`` for ``.T`` (looked up at the top level)."""

    name: str
    dotted: bool


@dataclass(frozen=True, eq=False)
class SpecializedTypeRef(TypeRef):
    """``T<A, B>``."""

    base: TypeName
    args: tuple[TypeRef, ...]


@dataclass(frozen=True, eq=False)
class StackTypeRef(TypeRef):
    """``T[size]``."""

    elem: TypeRef
    size: Expr


@dataclass(frozen=True, eq=False)
class TupleTypeRef(TypeRef):
    """``tuple<A, B>``."""

    elems: tuple[TypeRef, ...]


@dataclass(frozen=True, eq=False)
class TypeArgs(Node):
    """The type argument list of a declaration that is still a lark tree (``value_set``)."""

    items: tuple[TypeRef, ...]


def type_name_of(t: TypeRef) -> str:
    """The name a named or specialized type reference starts with ('' for others)."""
    if isinstance(t, TypeName):
        return t.name
    if isinstance(t, SpecializedTypeRef):
        return t.base.name
    return ""


# ---------------------------------------------------------------------- expressions


class Expr(Node):
    """An expression as written."""


@dataclass(frozen=True, eq=False)
class IntLit(Expr):
    text: str  # as written: 8w255, 0x1F, 1_000 ...


@dataclass(frozen=True, eq=False)
class StrLit(Expr):
    text: str  # with its quotes


@dataclass(frozen=True, eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True, eq=False)
class DontCareExpr(Expr):
    """``_``."""


@dataclass(frozen=True, eq=False)
class InvalidExpr(Expr):
    """``{#}``, the invalid header."""


@dataclass(frozen=True, eq=False)
class NameRef(Expr):
    """A name; ``dotted`` for ``.x`` (looked up at the top level)."""

    name: str
    dotted: bool


@dataclass(frozen=True, eq=False)
class TypeMember(Expr):
    """``T.member`` (an enum member)."""

    type: TypeRef
    member: str
    member_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class ErrorMember(Expr):
    """``error.member``."""

    member: str


@dataclass(frozen=True, eq=False)
class ListExpr(Expr):
    """``{a, b}``."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class KeyValue(Node):
    """``name = value`` in a structure initializer."""

    name: str
    value: Expr


@dataclass(frozen=True, eq=False)
class StructInit(Expr):
    """``{a = 1, b = 2}``."""

    fields: tuple[KeyValue, ...]


@dataclass(frozen=True, eq=False)
class Mux(Expr):
    """``cond ? then : else_``."""

    cond: Expr
    then: Expr
    else_: Expr


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, eq=False)
class Unary(Expr):
    op: str  # '!', '~', '-', '+'
    operand: Expr


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    """``(type) operand``."""

    type: TypeRef
    operand: Expr


@dataclass(frozen=True, eq=False)
class Member(Expr):
    """``base.member``."""

    base: Expr
    member: str
    member_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class Index(Expr):
    """``base[index]``."""

    base: Expr
    index: Expr


@dataclass(frozen=True, eq=False)
class Slice(Expr):
    """``base[hi:lo]``."""

    base: Expr
    hi: Expr
    lo: Expr


@dataclass(frozen=True, eq=False)
class NamedArg(Node):
    """``name = value`` in an argument list."""

    name: str
    value: Expr


Arg = Expr | NamedArg


@dataclass(frozen=True, eq=False)
class Args(Node):
    """An argument list ``(a, b = c)``."""

    items: tuple[Arg, ...]


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """``callee(args)`` or ``callee<type_args>(args)``."""

    callee: Expr
    type_args: tuple[TypeRef, ...]
    args: Args


@dataclass(frozen=True, eq=False)
class CtorCall(Expr):
    """``T(args)`` (an instantiation's constructor, not allowed as a plain expression)."""

    type: TypeRef
    args: Args


@dataclass(frozen=True, eq=False)
class ExprList(Node):
    """``a, b, c`` (a ``select`` subject)."""

    items: tuple[Expr, ...]
