"""Typed syntax tree of a P4 program: declarations, statements, expressions and types.

The grammar (``p4.lark``) gives lark trees whose children are read by position;
:mod:`softswitch.frontend.syntax_build` turns the whole tree into these dataclasses, so the
checks read named fields and never touch lark. Every node carries ``loc`` (the original
FILE:LINE:COL, after the preprocessor's line mapping) and ``span`` (offsets into the
preprocessed text, for messages and P4Info names that quote the source).
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
    """A type argument list ``<A, B>`` (``value_set<T>``, ``tuple<...>``)."""

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
    """A statement as written."""


@dataclass(frozen=True, eq=False)
class Block(Stmt):
    """``{ ... }``: statements and local declarations (:class:`VariableDecl`,
    :class:`ConstDecl`, :class:`Instantiation`) in order."""

    items: tuple[Stmt | LocalDecl, ...]


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
    then: Stmt
    else_: Stmt | None


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

    init: tuple[Stmt | VariableDecl, ...]
    cond: Expr | None
    updates: tuple[Stmt | VariableDecl, ...]  # a declaration here is an error
    body: Stmt


@dataclass(frozen=True, eq=False)
class ForInStmt(Stmt):
    """``for (T x in collection)`` or, with ``low``/``high``, ``for (T x in low .. high)``."""

    type: TypeRef
    name: str
    name_loc: ir.Loc
    collection: Expr | None
    low: Expr | None
    high: Expr | None
    body: Stmt


# ---------------------------------------------------------------------- declarations


@dataclass(frozen=True, eq=False)
class Ident(Node):
    """A declared name with its own position (error members, type parameters ...)."""

    name: str


@dataclass(frozen=True, eq=False)
class Annotation(Node):
    """``@name`` or ``@name(body)``; ``body`` is the raw text between the parentheses."""

    name: str
    body: str | None


Annotations = tuple[Annotation, ...]


@dataclass(frozen=True, eq=False)
class Param(Node):
    """``@anno dir T name = default`` (``direction`` is '' when none is written)."""

    annotations: Annotations
    direction: str
    type: TypeRef
    name: str
    name_loc: ir.Loc
    default: Expr | None


class Decl(Node):
    """A declaration (top level, block local, control local or extern member)."""


@dataclass(frozen=True, eq=False)
class StructField(Node):
    annotations: Annotations
    type: TypeRef
    name: str


@dataclass(frozen=True, eq=False)
class StructLikeDecl(Decl):
    """Common part of ``header``, ``header_union`` and ``struct``."""

    annotations: Annotations
    name: str
    name_loc: ir.Loc
    fields: tuple[StructField, ...]


@dataclass(frozen=True, eq=False)
class HeaderDecl(StructLikeDecl):
    pass


@dataclass(frozen=True, eq=False)
class HeaderUnionDecl(StructLikeDecl):
    pass


@dataclass(frozen=True, eq=False)
class StructDecl(StructLikeDecl):
    pass


@dataclass(frozen=True, eq=False)
class EnumDecl(Decl):
    """``enum E { A, B }``."""

    annotations: Annotations
    name: str
    name_loc: ir.Loc
    members: tuple[Ident, ...]


@dataclass(frozen=True, eq=False)
class EnumValue(Node):
    """``A = value`` in a serializable enum."""

    name: str
    value: Expr


@dataclass(frozen=True, eq=False)
class SerEnumDecl(Decl):
    """``enum bit<8> E { A = 1 }``."""

    annotations: Annotations
    underlying: TypeRef
    name: str
    name_loc: ir.Loc
    members: tuple[EnumValue, ...]


@dataclass(frozen=True, eq=False)
class TypedefDecl(Decl):
    annotations: Annotations
    type: TypeRef
    name: str
    name_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class NewTypeDecl(Decl):
    """``type T name;``."""

    annotations: Annotations
    type: TypeRef
    name: str
    name_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class ErrorDecl(Decl):
    members: tuple[Ident, ...]


@dataclass(frozen=True, eq=False)
class MatchKindDecl(Decl):
    members: tuple[Ident, ...]


@dataclass(frozen=True, eq=False)
class ConstDecl(Decl):
    annotations: Annotations
    type: TypeRef
    name: str
    name_loc: ir.Loc
    value: Expr


@dataclass(frozen=True, eq=False)
class VariableDecl(Decl):
    """``T x;`` / ``T x = e;`` (also a ``for`` loop's ``T x = e``)."""

    annotations: Annotations
    type: TypeRef
    name: str
    name_loc: ir.Loc
    init: Expr | None


@dataclass(frozen=True, eq=False)
class Instantiation(Decl):
    """``T(args) name;``."""

    annotations: Annotations
    type: TypeRef
    args: Args
    name: str
    name_loc: ir.Loc


LocalDecl = VariableDecl | ConstDecl | Instantiation


@dataclass(frozen=True, eq=False)
class MethodProto(Node):
    """``R name<T>(params);`` in an extern."""

    annotations: Annotations
    return_type: TypeRef
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    params: tuple[Param, ...]


@dataclass(frozen=True, eq=False)
class CtorProto(Node):
    """``E(params);``, a constructor of extern ``E``."""

    annotations: Annotations
    name: str
    name_loc: ir.Loc
    params: tuple[Param, ...]


@dataclass(frozen=True, eq=False)
class ExternObjDecl(Decl):
    annotations: Annotations
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    members: tuple[MethodProto | CtorProto, ...]


@dataclass(frozen=True, eq=False)
class ExternFuncDecl(Decl):
    annotations: Annotations
    return_type: TypeRef
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    params: tuple[Param, ...]


@dataclass(frozen=True, eq=False)
class BlockTypeDecl(Decl):
    """Common part of the prototypes ``parser P(...);``, ``control C(...);`` and
    ``package S(...);``."""

    annotations: Annotations
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    params: tuple[Param, ...]


@dataclass(frozen=True, eq=False)
class ParserTypeDecl(BlockTypeDecl):
    pass


@dataclass(frozen=True, eq=False)
class ControlTypeDecl(BlockTypeDecl):
    pass


@dataclass(frozen=True, eq=False)
class PackageDecl(BlockTypeDecl):
    pass


@dataclass(frozen=True, eq=False)
class ActionDecl(Decl):
    annotations: Annotations
    name: str
    name_loc: ir.Loc
    params: tuple[Param, ...]
    body: Block


@dataclass(frozen=True, eq=False)
class FunctionDecl(Decl):
    annotations: Annotations
    return_type: TypeRef
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    params: tuple[Param, ...]
    body: Block


# --- parsers


@dataclass(frozen=True, eq=False)
class ValueSetDecl(Decl):
    """``value_set<T>(size) name;``."""

    annotations: Annotations
    type_args: TypeArgs
    size: Expr
    name: str
    name_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class TupleKeyset(Node):
    """``(k1, k2)`` in a select case or an entry."""

    items: tuple[Keyset, ...]


@dataclass(frozen=True, eq=False)
class MaskKeyset(Node):
    """``value &&& mask``."""

    value: Expr
    mask: Expr


@dataclass(frozen=True, eq=False)
class RangeKeyset(Node):
    """``low .. high``."""

    low: Expr
    high: Expr


@dataclass(frozen=True, eq=False)
class DefaultKeyset(Node):
    """``default``."""


Keyset = Expr | TupleKeyset | MaskKeyset | RangeKeyset | DefaultKeyset


@dataclass(frozen=True, eq=False)
class SelectCase(Node):
    """``keyset: next_state;``."""

    keyset: Keyset
    next_state: str
    next_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class DirectTransition(Node):
    """``transition next_state;``."""

    next_state: str
    next_loc: ir.Loc


@dataclass(frozen=True, eq=False)
class SelectTransition(Node):
    """``transition select (subjects) { cases }``."""

    subjects: ExprList
    cases: tuple[SelectCase, ...]


@dataclass(frozen=True, eq=False)
class ParserState(Node):
    annotations: Annotations
    name: str
    name_loc: ir.Loc
    body: tuple[Stmt | LocalDecl, ...]
    transition: DirectTransition | SelectTransition | None


@dataclass(frozen=True, eq=False)
class ParserDecl(Decl):
    annotations: Annotations
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    params: tuple[Param, ...]
    ctor_params: tuple[Param, ...] | None  # None: no constructor parameter list
    locals: tuple[LocalDecl | ValueSetDecl, ...]
    states: tuple[ParserState, ...]


# --- controls and tables


@dataclass(frozen=True, eq=False)
class KeyElement(Node):
    """``expr : match_kind @name(...);``."""

    expr: Expr
    match_kind: str
    match_kind_loc: ir.Loc
    annotations: Annotations


@dataclass(frozen=True, eq=False)
class KeyProperty(Node):
    elements: tuple[KeyElement, ...]


@dataclass(frozen=True, eq=False)
class ActionItem(Node):
    """``@anno a(args);`` in an ``actions`` list (``args`` None without parentheses)."""

    annotations: Annotations
    action: NameRef
    args: Args | None


@dataclass(frozen=True, eq=False)
class ActionsProperty(Node):
    items: tuple[ActionItem, ...]


@dataclass(frozen=True, eq=False)
class Entry(Node):
    """``priority = p: keyset : a(args) @anno;`` of an ``entries`` list; ``action`` is a
    :class:`NameRef` or, with arguments, a :class:`Call`."""

    const: bool
    priority: Expr | None
    keyset: Keyset
    action: Expr
    annotations: Annotations


@dataclass(frozen=True, eq=False)
class EntriesProperty(Node):
    annotations: Annotations
    const: bool
    entries: tuple[Entry, ...]


@dataclass(frozen=True, eq=False)
class SimpleProperty(Node):
    """``name = value;`` (``default_action``, ``size``, ``implementation`` ...)."""

    annotations: Annotations
    const: bool
    name: str
    value: Expr


TableProperty = KeyProperty | ActionsProperty | EntriesProperty | SimpleProperty


@dataclass(frozen=True, eq=False)
class TableDecl(Decl):
    annotations: Annotations
    name: str
    name_loc: ir.Loc
    properties: tuple[TableProperty, ...]


@dataclass(frozen=True, eq=False)
class ControlDecl(Decl):
    annotations: Annotations
    name: str
    name_loc: ir.Loc
    type_params: tuple[Ident, ...]
    params: tuple[Param, ...]
    ctor_params: tuple[Param, ...] | None
    locals: tuple[LocalDecl | ActionDecl | TableDecl, ...]
    body: Block


@dataclass(frozen=True, eq=False)
class Program(Node):
    """The top-level declarations in source order (empty ``;`` declarations dropped)."""

    decls: tuple[Decl, ...]
