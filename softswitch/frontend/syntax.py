"""Typed syntax tree of P4 statements, expressions and type references, with positions.

The grammar (``p4.lark``) gives lark trees whose children are read by position; for
statements, expressions and type references :mod:`softswitch.frontend.syntax_build` turns them
into these
dataclasses instead, so the checks read named fields. Every node carries ``loc`` (the
original FILE:LINE:COL, after the preprocessor's line mapping) and ``span`` (offsets into the
preprocessed text, for messages and P4Info names that quote the source).

Statements are nodes too; declarations (top level, block locals, parser states, tables) are
still lark trees whose statement, expression and type children are these nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


# ----------------------------------------------------------------------- statements


class Stmt(Node):
    """A statement as written (local declarations inside blocks stay lark trees)."""


@dataclass(frozen=True, eq=False)
class Block(Stmt):
    """``{ ... }``: statements and local declarations (``variable_decl``, ``const_decl``,
    ``instantiation`` lark trees) in order."""

    items: tuple[Any, ...]


@dataclass(frozen=True, eq=False)
class AssignStmt(Stmt):
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, eq=False)
class CompoundAssignStmt(Stmt):
    """``lhs op= rhs`` (``op`` without the ``=``; ``>>`` for ``>>=``)."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, eq=False)
class CallStmt(Stmt):
    call: Call


@dataclass(frozen=True, eq=False)
class IfStmt(Stmt):
    cond: Expr
    then: Any  # a statement or a local declaration tree
    else_: Any | None


@dataclass(frozen=True, eq=False)
class EmptyStmt(Stmt):
    pass


@dataclass(frozen=True, eq=False)
class ExitStmt(Stmt):
    pass


@dataclass(frozen=True, eq=False)
class ReturnStmt(Stmt):
    value: Expr | None


@dataclass(frozen=True, eq=False)
class BreakStmt(Stmt):
    pass


@dataclass(frozen=True, eq=False)
class ContinueStmt(Stmt):
    pass


@dataclass(frozen=True, eq=False)
class DefaultLabel(Node):
    """``default:`` in a switch."""


@dataclass(frozen=True, eq=False)
class SwitchCase(Node):
    """``label: { ... }`` or ``label:`` (falls through to the next case's block)."""

    label: Expr | DefaultLabel
    body: Block | None


@dataclass(frozen=True, eq=False)
class SwitchStmt(Stmt):
    subject: Expr
    cases: tuple[SwitchCase, ...]


@dataclass(frozen=True, eq=False)
class DirectApply(Stmt):
    """``C.apply(args);`` for a parser or control type ``C``."""

    type: TypeRef
    args: Args


@dataclass(frozen=True, eq=False)
class ForStmt(Stmt):
    """``for (init; cond; updates) body``."""

    init: tuple[Any, ...]  # statements and ``variable_decl`` trees
    cond: Expr | None
    updates: tuple[Any, ...]
    body: Any


@dataclass(frozen=True, eq=False)
class ForInStmt(Stmt):
    """``for (T x in collection)`` or, with ``low``/``high``, ``for (T x in low .. high)``."""

    type: TypeRef
    name: str
    name_loc: ir.Loc
    collection: Expr | None
    low: Expr | None
    high: Expr | None
    body: Any
