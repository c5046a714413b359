"""The checker: typed syntax tree -> checked :class:`ir.Program`.

:class:`Checker` composes one visitor per concern around one :class:`CheckContext`:
type references (:mod:`.typerefs`), expressions (:mod:`.exprs`), statements (:mod:`.stmts`),
key sets (:mod:`.keysets`), declarations and scopes (:mod:`.decls`), instantiations
(:mod:`.instances`), tables (:mod:`.tables`) and the BMv2 back end's restrictions
(:mod:`.bmv2_limits`). None of them inherits from another; each reaches the others through
the context.
"""

from __future__ import annotations

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import syntax as s
from softswitch.frontend.bmv2_limits import Bmv2Limits
from softswitch.frontend.context import CheckContext
from softswitch.frontend.decls import DeclChecker
from softswitch.frontend.exprs import ExprChecker
from softswitch.frontend.instances import InstanceChecker
from softswitch.frontend.keysets import KeysetChecker
from softswitch.frontend.preprocess import Preprocessed
from softswitch.frontend.stmts import StmtChecker
from softswitch.frontend.tables import TableChecker
from softswitch.frontend.typerefs import TypeResolver


class Checker:
    """Checks one program's syntax tree and assembles the :class:`ir.Program`."""

    def __init__(self, pre: Preprocessed, source_file: str) -> None:
        self.ctx = ctx = CheckContext(pre, source_file)
        ctx.typing = TypeResolver(ctx)
        ctx.exprs = ExprChecker(ctx)
        ctx.stmts = StmtChecker(ctx)
        ctx.keysets = KeysetChecker(ctx)
        ctx.decls = DeclChecker(ctx)
        ctx.ctors = InstanceChecker(ctx)
        ctx.tables = TableChecker(ctx)
        ctx.bmv2 = Bmv2Limits(ctx)

    def program(self, tree: s.Program) -> ir.Program:
        """Check every top-level declaration in order."""
        ctx = self.ctx
        for decl in tree.decls:
            ctx.decls.visit(decl, ctx.top)
        if ctx.main is None:
            raise P4Error(
                "the program has no 'main' package instance", ir.Loc(ctx.source_file, 1, 1)
            )
        self.check_global_names()
        return ir.Program(
            source_file=ctx.source_file,
            types=ctx.types,
            errors=ctx.errors,
            match_kinds=ctx.match_kinds,
            constants=ctx.constants,
            externs=ctx.externs,
            extern_functions=ctx.extern_functions,
            actions=ctx.actions,
            functions=ctx.functions,
            parsers=ctx.parsers,
            controls=ctx.controls,
            instances=ctx.instances,
            main=ctx.main,
        )

    def check_global_names(self) -> None:
        """Two actions (or tables) may not share one global control-plane name: top-level
        actions and declarations named ``@name(".x")`` (p4c: "conflicting control plane
        name")."""
        seen: dict[tuple[str, str], object] = {}

        def claim(kind: str, name: str, decl: object, loc: ir.Loc) -> None:
            other = seen.setdefault((kind, name), decl)
            if other is not decl:
                raise P4Error(
                    f"conflicting control plane name '.{name}' (another {kind} has it)", loc
                )

        for action in self.ctx.actions.values():
            claim("action", action.cp_name.lstrip("."), action, action.loc)
        blocks: list[ir.ControlDecl | ir.ParserDecl] = [
            *self.ctx.controls.values(),
            *self.ctx.parsers.values(),
        ]
        for block in blocks:
            for local in block.locals:
                if isinstance(local, (ir.ActionDecl, ir.TableDecl)) and local.cp_name.startswith(
                    "."
                ):
                    kind = "action" if isinstance(local, ir.ActionDecl) else "table"
                    claim(kind, local.cp_name[1:], local, local.loc)
