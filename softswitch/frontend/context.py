"""The state the checker's visitors share while checking one program.

One :class:`CheckContext` per program: what has been declared so far (the parts of the
:class:`ir.Program` being assembled), the top-level scope, the source text for messages,
and the visitors themselves, so that each concern reaches the others through it
(``ctx.exprs.expr(...)``, ``ctx.typing.resolve_type(...)``) rather than through a class
hierarchy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.frontend import syntax as s
from softswitch.frontend.literals import annotation_values
from softswitch.frontend.preprocess import Preprocessed
from softswitch.frontend.scope import Scope

if TYPE_CHECKING:
    from softswitch.frontend.bmv2_limits import Bmv2Limits
    from softswitch.frontend.decls import DeclChecker
    from softswitch.frontend.exprs import ExprChecker
    from softswitch.frontend.instances import InstanceChecker
    from softswitch.frontend.keysets import KeysetChecker
    from softswitch.frontend.stmts import StmtChecker
    from softswitch.frontend.tables import TableChecker
    from softswitch.frontend.typerefs import TypeResolver


class CheckContext:
    """Declarations, scopes and counters of one program being checked, and its visitors."""

    # the visitors, one per concern (set by :class:`softswitch.frontend.check.Checker`)
    typing: TypeResolver
    exprs: ExprChecker
    stmts: StmtChecker
    keysets: KeysetChecker
    decls: DeclChecker
    ctors: InstanceChecker
    tables: TableChecker
    bmv2: Bmv2Limits

    def __init__(self, pre: Preprocessed, source_file: str) -> None:
        self.pre = pre
        self.source_file = source_file
        self.top = Scope()
        # the program being assembled
        self.errors: list[str] = []
        self.match_kinds: list[str] = []
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
        self.uid_counter = 0

    def new_uid(self) -> int:
        """A program-wide unique variable id."""
        self.uid_counter += 1
        return self.uid_counter

    def source_text(self, node: s.Node) -> str:
        """Source text of a node with whitespace runs collapsed (P4Info key names)."""
        start, end = node.span
        return " ".join(self.pre.text[start:end].split())

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
