"""Typed intermediate representation handed from the front end to the engine.

The front end (``softswitch.frontend``) parses, resolves names, infers and checks types and
folds constants; what it produces is a tree of these dataclasses in which every expression
carries its type and source location and every name reference points at its declaration.
The engine never looks at source text. Keeping this boundary narrow is what lets the
front end and the engine be tested and changed independently (BMv2 keeps the same split
between p4c's JSON and ``bm_sim``).

Conventions
-----------
* Values of ``bit<W>``/``int<W>`` are Python ints; signed ones as two's-complement bit patterns.
* Constants are folded: a reference to a ``const`` declaration becomes a :class:`Const`.
* ``typedef`` is resolved away; ``type`` (new types) keeps its name in :class:`NewType` for
  P4Info but behaves as its underlying type.
* Every call's ``args`` list is aligned with the callee's parameters (named arguments
  reordered, default values filled in, ``_`` as ``None``).
* Declarations compare and hash by identity (``eq=False``), so they can key dicts.
* Control-plane names: each nameable declaration has ``cp_name``: its local name, or the
  value of its ``@name`` annotation (a leading ``.`` makes it absolute). The fully qualified
  name as p4c writes it into P4Info is ``qualify(instance_path, cp_name)``, where the path
  is the chain of control/parser instance names from ``main`` (e.g. ``"MyIngress"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Loc:
    """A position in the original (pre-processed) source: file, 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOLOC = Loc("<builtin>", 0, 0)

# An annotation body: the raw token text for unstructured annotations, or parsed
# expression values (ints/strings) for structured ones; ``@name("x")`` -> ["x"].
Annotations = dict[str, list[object]]


# --------------------------------------------------------------------------------- types


class Type:
    """Base of all types."""


@dataclass(frozen=True)
class BitType(Type):
    """``bit<W>`` (signed=False) or ``int<W>`` (signed=True)."""

    width: int
    signed: bool = False


@dataclass(frozen=True)
class IntLitType(Type):
    """The arbitrary-precision type ``int`` of unsized literals (compile time only)."""


@dataclass(frozen=True)
class BoolType(Type):
    pass


@dataclass(frozen=True)
class VarbitType(Type):
    max_width: int


@dataclass(frozen=True)
class StringType(Type):
    pass


@dataclass(frozen=True)
class VoidType(Type):
    pass


@dataclass(frozen=True)
class ErrorType(Type):
    """The ``error`` type; values are indices into :attr:`Program.errors`."""


@dataclass(frozen=True)
class MatchKindType(Type):
    pass


@dataclass(frozen=True)
class DontCareType(Type):
    """Type of ``_`` in a keyset or an argument position."""


@dataclass(eq=False)
class StructField:
    name: str
    type: Type
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class HeaderType(Type):
    name: str
    fields: list[StructField]
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC

    @property
    def bit_width(self) -> int:
        """Width in bits of the fixed-size fields (a varbit counts as 0; a struct field,
        which P4_16 allows in headers, counts with all its fields)."""
        return sum(fixed_width(f.type) for f in self.fields)


@dataclass(eq=False)
class StructType(Type):
    name: str
    fields: list[StructField]
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class HeaderUnionType(Type):
    name: str
    fields: list[StructField]  # every field's type is a HeaderType
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(frozen=True)
class StackType(Type):
    """``H[size]`` — a header stack (or a stack of header unions)."""

    elem: Type
    size: int


@dataclass(frozen=True)
class TupleType(Type):
    """``tuple<...>`` and the type of list expressions ``{a, b}``."""

    elems: tuple[Type, ...]


@dataclass(eq=False)
class EnumType(Type):
    """``enum E {..}`` (underlying None) or serializable ``enum bit<8> E {A = 1, ..}``."""

    name: str
    members: list[str]
    underlying: BitType | None = None
    values: dict[str, int] = field(default_factory=dict)  # only for serializable enums
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class NewType(Type):
    """``type bit<9> PortId_t;`` — behaves as ``underlying``; the name is kept for P4Info."""

    name: str
    underlying: Type
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(frozen=True)
class ExternType(Type):
    """An instance of an extern object, e.g. ``register<bit<32>>`` -> name "register"."""

    name: str
    type_args: tuple[Type, ...] = ()


@dataclass(frozen=True)
class TableApplyResultType(Type):
    """Result of ``t.apply()``: members ``hit``, ``miss`` (bool) and ``action_run``."""

    table: TableDecl


@dataclass(frozen=True)
class ActionRunType(Type):
    """Type of ``t.apply().action_run``; switch labels are actions of ``table``."""

    table: TableDecl


@dataclass(frozen=True)
class BlockType(Type):
    """Type of a parser/control instance (sub-parser, sub-control)."""

    decl: ParserDecl | ControlDecl


@dataclass(eq=False)
class BlockProtoType(Type):
    """A parser/control type declaration (``control my_t(inout bit<16> x);``): the type of
    a constructor parameter that receives a parser/control instance. Inside the block,
    ``p.apply(args)`` is a MethodCall on a VarRef to that parameter; ``params`` are the
    prototype's apply parameters."""

    kind: str  # "parser" or "control"
    name: str
    params: list[Param]
    loc: Loc = NOLOC


def strip_newtype(t: Type) -> Type:
    """The type that values of ``t`` actually have at run time."""
    while isinstance(t, NewType):
        t = t.underlying
    return t


def fixed_width(t: Type) -> int:
    """Bits a header field of type ``t`` occupies on the wire (varbit: 0)."""
    t = strip_newtype(t)
    if isinstance(t, BitType):
        return t.width
    if isinstance(t, BoolType):
        return 1
    if isinstance(t, EnumType) and t.underlying is not None:
        return t.underlying.width
    if isinstance(t, StructType):
        return sum(fixed_width(f.type) for f in t.fields)
    return 0


# --------------------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr:
    type: Type
    loc: Loc


@dataclass(eq=False)
class Const(Expr):
    """An integer constant (type BitType or IntLitType) — already masked for BitType."""

    value: int


@dataclass(eq=False)
class BoolConst(Expr):
    value: bool


@dataclass(eq=False)
class StringConst(Expr):
    value: str


@dataclass(eq=False)
class VarRef(Expr):
    """Reference to a variable or parameter (see :class:`Variable`)."""

    var: Variable


@dataclass(eq=False)
class InstanceRef(Expr):
    """Reference to an extern, table, or sub-block instance declared in a block."""

    instance: Instance | TableDecl


@dataclass(eq=False)
class Member(Expr):
    """``base.name``: header/struct/union field; on a stack: ``next``, ``last``, ``lastIndex``,
    ``size``; on a table-apply result: ``hit``, ``miss``, ``action_run``."""

    base: Expr
    name: str


@dataclass(eq=False)
class Index(Expr):
    """``stack[index]``."""

    base: Expr
    index: Expr


@dataclass(eq=False)
class Slice(Expr):
    """``base[hi:lo]`` (bounds are compile-time constants; type is bit<hi-lo+1>)."""

    base: Expr
    hi: int
    lo: int


@dataclass(eq=False)
class Unary(Expr):
    """op in ``-`` (negate), ``~`` (complement), ``!`` (logical not)."""

    op: str
    operand: Expr


@dataclass(eq=False)
class Binary(Expr):
    """op in ``+ - * / % << >> & | ^ ++ |+| |-| == != < <= > >= && ||``.

    Operands have been unified by the front end (an unsized literal beside a sized operand
    is given the sized type), except shifts and ``++`` whose operands keep their own types.
    """

    op: str
    left: Expr
    right: Expr


@dataclass(eq=False)
class Cast(Expr):
    """``(type) operand``; the target type is ``self.type``."""

    operand: Expr


@dataclass(eq=False)
class Mux(Expr):
    """``cond ? then : else_``."""

    cond: Expr
    then: Expr
    else_: Expr


@dataclass(eq=False)
class EnumMember(Expr):
    """``E.A`` — ``self.type`` is the EnumType."""

    member: str


@dataclass(eq=False)
class ErrorMember(Expr):
    """``error.PacketTooShort`` — ``code`` is its index in Program.errors."""

    member: str
    code: int


@dataclass(eq=False)
class MatchKindMember(Expr):
    member: str


@dataclass(eq=False)
class ListExpr(Expr):
    """``{a, b, c}`` whose type is TupleType (e.g. the data argument of hash/digest)."""

    elems: list[Expr]


@dataclass(eq=False)
class StructInit(Expr):
    """A struct/header value built from named or positional initialisers; ``self.type`` is
    the StructType/HeaderType; a header built this way is valid."""

    fields: dict[str, Expr]


@dataclass(eq=False)
class InvalidHeader(Expr):
    """``{#}`` — an invalid header (or union) of ``self.type``."""


@dataclass(eq=False)
class DontCare(Expr):
    """``_`` where an expression is allowed (out argument)."""


@dataclass(eq=False)
class Call(Expr):
    """Call of a function, action or extern function.

    ``callee`` is a FunctionDecl, ActionDecl or ExternFunctionDecl. ``args`` is aligned with
    ``callee.params``; ``None`` means "don't care" for an out parameter.
    """

    callee: FunctionDecl | ActionDecl | ExternFunctionDecl
    args: list[Expr | None]
    type_args: tuple[Type, ...] = ()


@dataclass(eq=False)
class MethodCall(Expr):
    """Call of a method on a value or instance.

    * extern object methods: target type ExternType (``packet_in.extract``, ``register.read``,
      ``counter.count``, ``packet_out.emit`` ...), with ``method`` the method name;
    * built-in methods of headers/unions/stacks: ``isValid``, ``setValid``, ``setInvalid``,
      ``push_front``, ``pop_front`` (args: a Const count);
    * ``apply``: target is an InstanceRef to a TableDecl (type TableApplyResultType) or to
      a sub-parser/sub-control Instance (args aligned with the block's apply params).

    ``args`` are aligned with the method's parameters (``None`` = don't care). For
    overloaded extern methods (``extract`` with one or two args) the list has the length of
    the overload that was chosen.
    """

    target: Expr
    method: str
    args: list[Expr | None]
    type_args: tuple[Type, ...] = ()


# ----------------------------------------------------------------------------- keysets


@dataclass(eq=False)
class KeysetDefault:
    """``default`` or ``_`` in a select case, table key set or const entry."""

    loc: Loc = NOLOC


@dataclass(eq=False)
class KeysetValue:
    value: int
    loc: Loc = NOLOC


@dataclass(eq=False)
class KeysetMask:
    """``value &&& mask``."""

    value: int
    mask: int
    loc: Loc = NOLOC


@dataclass(eq=False)
class KeysetRange:
    """``low .. high`` (inclusive)."""

    low: int
    high: int
    loc: Loc = NOLOC


Keyset = KeysetDefault | KeysetValue | KeysetMask | KeysetRange


# -------------------------------------------------------------------------- statements


class Stmt:
    loc: Loc


@dataclass(eq=False)
class Assign(Stmt):
    lhs: Expr
    rhs: Expr
    loc: Loc = NOLOC


@dataclass(eq=False)
class CallStmt(Stmt):
    """A call (Call or MethodCall) evaluated for its effect."""

    call: Expr
    loc: Loc = NOLOC


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt]
    loc: Loc = NOLOC


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: Stmt
    else_: Stmt | None = None
    loc: Loc = NOLOC


@dataclass(eq=False)
class SwitchCase:
    """``labels`` are Exprs (constants / enum members), ActionDecl objects for a switch on
    ``action_run``, or the string ``"default"``. ``body`` None = fall through to the next
    case."""

    labels: list[object]
    body: Block | None
    loc: Loc = NOLOC


@dataclass(eq=False)
class SwitchStmt(Stmt):
    subject: Expr
    cases: list[SwitchCase]
    loc: Loc = NOLOC


@dataclass(eq=False)
class VarDecl(Stmt):
    """A local variable declaration (also used for control/parser-level locals)."""

    var: Variable
    init: Expr | None = None
    loc: Loc = NOLOC


@dataclass(eq=False)
class Exit(Stmt):
    loc: Loc = NOLOC


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None = None
    loc: Loc = NOLOC


@dataclass(eq=False)
class Empty(Stmt):
    loc: Loc = NOLOC


@dataclass(eq=False)
class For(Stmt):
    """``for (init; cond; updates) body`` (P4_16 1.2.4): ``init`` are VarDecl/Assign/CallStmt
    run once, ``cond`` (None = true) is tested before each iteration, ``updates`` run after
    each iteration, also after ``continue``. Variables declared in ``init`` are local to
    the loop."""

    init: list[Stmt]
    cond: Expr | None
    updates: list[Stmt]
    body: Stmt
    loc: Loc = NOLOC


@dataclass(eq=False)
class ForIn(Stmt):
    """``for (T var in low .. high) body`` or ``for (T var in collection) body``.

    A range includes both ends; its bounds (of ``var``'s type) are evaluated once, before
    the first iteration, and an empty range (``low > high``) runs no iteration. A
    collection is a list expression (its elements are evaluated once, in order) or a
    header stack (each element is copied into ``var``)."""

    var: Variable
    body: Stmt
    low: Expr | None = None
    high: Expr | None = None
    collection: Expr | None = None
    loc: Loc = NOLOC


@dataclass(eq=False)
class Break(Stmt):
    """``break``: leaves the innermost enclosing loop."""

    loc: Loc = NOLOC


@dataclass(eq=False)
class Continue(Stmt):
    """``continue``: the innermost loop goes on with its next iteration (a ``For`` runs
    its updates first)."""

    loc: Loc = NOLOC


# ------------------------------------------------------------------------ declarations


@dataclass(eq=False)
class Variable:
    """A variable or a parameter. Identity matters: VarRef.var points here. ``uid`` is unique
    in the program (handy for generating distinct Python names)."""

    name: str
    type: Type
    uid: int
    loc: Loc = NOLOC


@dataclass(eq=False)
class Param(Variable):
    """``direction`` is "in", "out", "inout" or "" (directionless: an action's control-plane
    parameter, or a constructor parameter)."""

    direction: str = ""
    default: Expr | None = None
    annotations: Annotations = field(default_factory=dict)


@dataclass(eq=False)
class ActionDecl:
    name: str
    cp_name: str
    params: list[Param]
    body: Block
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC

    @property
    def cp_params(self) -> list[Param]:
        """The directionless parameters, supplied by the control plane."""
        return [p for p in self.params if p.direction == ""]


@dataclass(eq=False)
class FunctionDecl:
    name: str
    return_type: Type
    params: list[Param]
    body: Block
    loc: Loc = NOLOC


@dataclass(eq=False)
class ExternFunctionDecl:
    """An extern function such as ``mark_to_drop`` or ``hash`` (declared in v1model.p4)."""

    name: str
    return_type: Type
    params: list[Param]
    type_params: list[str] = field(default_factory=list)
    loc: Loc = NOLOC


@dataclass(eq=False)
class ExternDecl:
    """An extern object type such as ``register`` with its constructors' and methods'
    parameter lists (method name -> list of overloads)."""

    name: str
    type_params: list[str]
    constructors: list[list[Param]]
    methods: dict[str, list[list[Param]]]
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class Instance:
    """An instantiation inside a block or at top level: an extern object
    (``register<bit<32>>(1024) r;`` -> type ExternType("register", (bit<32>,)),
    args [Const 1024]) or a sub-parser/sub-control (type BlockType)."""

    name: str
    cp_name: str
    type: Type
    args: list[Expr]  # aligned with the chosen constructor's params; constants
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class TableKey:
    expr: Expr
    match_kind: str  # "exact", "lpm", "ternary", "range", "optional", "selector"
    name: str  # P4Info match-field name: @name or the expression's source text
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class ActionRef:
    """An action named in a table's action list, default_action or entry. ``args`` holds
    the bound arguments for *directional* params in the action list, and for a default
    action or const entry the arguments of all params (directional first, then cp)."""

    action: ActionDecl
    args: list[Expr]
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class ConstEntry:
    keysets: list[Keyset]  # one per table key
    action: ActionRef
    priority: int | None = None
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class TableDecl:
    name: str
    cp_name: str
    keys: list[TableKey]
    actions: list[ActionRef]
    default_action: ActionRef | None  # the front end fills in NoAction when none is given
    default_action_const: bool = False
    entries: list[ConstEntry] | None = None
    entries_const: bool = True
    size: int | None = None
    implementation: Instance | None = None  # action_profile / action_selector instance
    counters: Instance | None = None  # direct_counter instance
    meters: Instance | None = None  # direct_meter instance
    support_timeout: bool = False
    largest_priority_wins: bool = True
    properties: dict[str, Expr] = field(default_factory=dict)  # any other properties
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class Transition:
    """``transition select(exprs) { cases }`` or, with ``select`` None, ``transition name``.
    State names "accept" and "reject" are the final states."""

    next_state: str | None = None
    select: list[Expr] | None = None
    cases: list[SelectCase] = field(default_factory=list)
    loc: Loc = NOLOC


@dataclass(eq=False)
class SelectCase:
    keysets: list[Keyset]  # one per select expression
    next_state: str = "reject"
    loc: Loc = NOLOC


@dataclass(eq=False)
class ParserState:
    name: str
    stmts: list[Stmt]
    transition: Transition
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class ParserDecl:
    name: str
    params: list[Param]  # apply parameters
    ctor_params: list[Param]
    locals: list[VarDecl | Instance]
    states: dict[str, ParserState]  # "start" is always present
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class ControlDecl:
    name: str
    params: list[Param]  # apply parameters
    ctor_params: list[Param]
    locals: list[VarDecl | Instance | ActionDecl | TableDecl]
    body: Block
    annotations: Annotations = field(default_factory=dict)
    loc: Loc = NOLOC


@dataclass(eq=False)
class PackageInstance:
    """``V1Switch(MyParser(), ...) main;`` — ``args`` are the block instances in order."""

    package: str
    name: str
    args: list[Instance]
    loc: Loc = NOLOC


@dataclass(eq=False)
class Program:
    """A whole checked program."""

    source_file: str
    types: dict[str, Type]  # named types (headers, structs, unions, enums, new types)
    errors: list[str]  # error members; ErrorMember.code indexes this list
    match_kinds: list[str]
    constants: dict[str, Const | BoolConst]
    externs: dict[str, ExternDecl]
    extern_functions: dict[str, ExternFunctionDecl]
    actions: dict[str, ActionDecl]  # top-level actions (e.g. NoAction)
    functions: dict[str, FunctionDecl]
    parsers: dict[str, ParserDecl]
    controls: dict[str, ControlDecl]
    instances: dict[str, Instance]  # top-level extern instances
    main: PackageInstance
    annotations: Annotations = field(default_factory=dict)


def qualify(prefix: str, cp_name: str) -> str:
    """Fully qualified control-plane name as p4c writes it into P4Info."""
    if cp_name.startswith("."):
        return cp_name[1:]
    return f"{prefix}.{cp_name}" if prefix else cp_name
