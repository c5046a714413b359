"""Walks over the IR that the code generator's analyses share."""

from __future__ import annotations

from softswitch import ir
from softswitch.errors import UnsupportedError
from softswitch.ir_walk import walk


def given(arg: ir.Expr | None) -> ir.Expr:
    """A call argument that must be there (None is an optional argument left out; the
    front end fills every required one); a missing one fails as ``ExprGen.expr``
    fails on it."""
    if arg is None:
        raise UnsupportedError("expression NoneType", None)
    return arg


def has_return(body: object) -> bool:
    return any(isinstance(n, ir.Return) for n in walk(body))


def register_index_base(e: ir.Expr | None) -> tuple[ir.Variable, int] | None:
    """``(v, c)`` when the index expression ``e`` is ``v``, ``v + c`` or ``c + v``."""
    if isinstance(e, ir.VarRef):
        return e.var, 0
    if isinstance(e, ir.Binary) and e.op == "+":
        if isinstance(e.left, ir.VarRef) and isinstance(e.right, ir.Const):
            return e.left.var, e.right.value
        if isinstance(e.right, ir.VarRef) and isinstance(e.left, ir.Const):
            return e.right.var, e.left.value
    return None


def root_var(e: ir.Expr | None) -> ir.Variable | None:
    while isinstance(e, (ir.Member, ir.Index, ir.Slice)):
        e = e.base
    return e.var if isinstance(e, ir.VarRef) else None
