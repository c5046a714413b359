"""Walks over the IR that the code generator's analyses share."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from softswitch import ir
from softswitch.errors import UnsupportedError


def given(arg: ir.Expr | None) -> ir.Expr:
    """A call argument that must be there (None is an optional argument left out; the
    front end fills every required one); a missing one fails as ``ExprGen.expr``
    fails on it."""
    if arg is None:
        raise UnsupportedError("expression NoneType", None)
    return arg


def walk(node: object) -> Iterator[object]:
    """Every IR expression/statement node below ``node`` (not into declarations)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(reversed(n))
            continue
        if isinstance(n, dict):
            stack.extend(n.values())
            continue
        if not isinstance(n, (ir.Expr, ir.Stmt, ir.SwitchCase)):
            continue
        yield n
        assert dataclasses.is_dataclass(n)  # every concrete IR node class is a dataclass
        for f in dataclasses.fields(n):
            if f.name in ("type", "var", "callee", "instance", "loc"):
                continue
            v = getattr(n, f.name)
            if isinstance(v, (ir.Expr, ir.Stmt, ir.SwitchCase, list, dict)):
                stack.append(v)


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
