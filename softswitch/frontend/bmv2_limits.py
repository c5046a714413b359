"""What p4c's BMv2 back end refuses and the front end therefore refuses too.

The v1model target runs on BMv2 in the lab, so a program the built-in target accepts must
also compile for BMv2; these checks are kept apart from the P4 language rules."""

from __future__ import annotations

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend.exprs import any_subexpr
from softswitch.frontend.typeops import same_type, type_str
from softswitch.frontend.visitor import Visitor


class Bmv2Limits(Visitor):
    """BMv2 back-end restrictions, checked where the expression and statement checkers meet
    them (on the checked IR, so they need no syntax dispatch of their own)."""

    def runtime_division(self, op: str, left: ir.Expr, right: ir.Expr, loc: ir.Loc) -> None:
        """As p4c (CompileTimeOperations after strength reduction): only a division by a
        power of two (a shift or a mask) can be computed at run time on BMv2."""
        if (
            op in ("/", "%")
            and not (isinstance(right, ir.Const) and right.value & (right.value - 1) == 0)
            and not (isinstance(left, ir.Const) and left.value == 0)  # 0 / x is 0 (x still runs)
        ):
            raise P4Error(
                f"'{op}' could not be evaluated at compile time: at run time only a division "
                "by a constant power of two is supported",
                loc,
            )

    def union_stack_index(self, t: ir.StackType, index: ir.Expr, loc: ir.Loc) -> None:
        """p4c flattens union stacks and needs the index constant after constant
        propagation; an index read from a parameter (packet data, metadata) can never be."""
        if isinstance(ir.strip_newtype(t.elem), ir.HeaderUnionType) and _reads_parameter(index):
            raise P4Error(
                "a header union stack needs a constant index on the v1model target (BMv2)", loc
            )

    def switch_in_action(self, kind: str, loc: ir.Loc) -> None:
        """p4c's BMv2 back end refuses a switch statement in an action."""
        if kind == "action":
            raise P4Error(
                "switch statements in actions are not supported on the v1model target (BMv2)", loc
            )

    def check_nested_out_struct(
        self, decl: ir.ExternFunctionDecl, call_args: list[ir.Expr | None], loc: ir.Loc
    ) -> None:
        """p4c's BMv2 back end cannot pass a struct holding structs or headers to an extern
        function's out/inout parameter (it flattens the struct first)."""
        for p, a in zip(decl.params, call_args, strict=False):
            if a is None or p.direction not in ("out", "inout"):
                continue
            st = ir.strip_newtype(a.type)
            nested = (ir.StructType, ir.HeaderType, ir.HeaderUnionType, ir.StackType)
            if isinstance(st, ir.StructType) and any(
                isinstance(ir.strip_newtype(f.type), nested) for f in st.fields
            ):
                raise P4Error(
                    f"extern function '{decl.name}': the argument for {p.direction} parameter "
                    f"'{p.name}' is a struct ({type_str(a.type)}) holding structs or headers, "
                    "which the BMv2 back end cannot pass",
                    loc,
                )

    def check_register_value(
        self, base: ir.Expr, cell: ir.Type, call_args: list[ir.Expr | None]
    ) -> None:
        """A BMv2 register cell is a bit string: reading one into a struct or header cannot be
        expressed (p4c's back end refuses it at the argument; writing one is accepted)."""
        if isinstance(ir.strip_newtype(cell), (ir.BitType, ir.BoolType, ir.EnumType, ir.ErrorType)):
            return
        for a in call_args:
            if a is not None and same_type(a.type, cell):
                raise P4Error(
                    f"register '{self.source_text_of(base)}' holds {type_str(cell)} values: a "
                    "register of a struct or header type is not supported on the v1model target "
                    "(BMv2), its cells are bit strings",
                    a.loc,
                )

    def source_text_of(self, e: ir.Expr) -> str:
        """The name of an extern instance for messages."""
        return e.instance.name if isinstance(e, ir.InstanceRef) else "?"


def _reads_parameter(e: ir.Expr) -> bool:
    """Whether ``e`` reads a parameter (a value known only at run time)."""
    return any_subexpr(e, lambda n: isinstance(n, ir.VarRef) and isinstance(n.var, ir.Param))
