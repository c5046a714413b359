"""Questions about the IR that both code generators (Python and C) ask: which table or
block an ``apply`` applies, which actions it may run, in which order a parser's states
come, which variable an lvalue roots in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def applied_table(e: ir.Expr) -> ir.TableDecl:
    """The table of a ``t.apply()`` call."""
    assert isinstance(e, ir.MethodCall) and isinstance(e.target, ir.InstanceRef)
    decl = e.target.instance
    assert isinstance(decl, ir.TableDecl)
    return decl


def applied_actions(decl: ir.TableDecl) -> list[ir.ActionRef]:
    """The actions an apply of the table may run, each once: the table's, then its
    default action if it is not one of them."""
    arefs = list(decl.actions)
    if decl.default_action is not None and all(
        a.action is not decl.default_action.action for a in arefs
    ):
        arefs.append(decl.default_action)
    out: list[ir.ActionRef] = []
    seen: set[int] = set()
    for aref in arefs:
        if id(aref.action) not in seen:
            seen.add(id(aref.action))
            out.append(aref)
    return out


def applied_block(
    target: ir.Expr, block_args: Mapping[ir.Variable, Any]
) -> tuple[ir.Instance, Any] | None:
    """The sub-parser/sub-control instance ``target.apply(...)`` applies, with its binding
    in ``block_args`` when ``target`` is a constructor parameter (None for an instance
    named directly); None for a parameter bound to no block."""
    where = None
    if isinstance(target, ir.VarRef):
        where = block_args.get(target.var)
        if where is None:
            return None
        inst = where[0]
    else:
        assert isinstance(target, ir.InstanceRef)
        inst = target.instance
    assert isinstance(inst, ir.Instance) and isinstance(inst.type, ir.BlockType)
    return inst, where


def parser_state_order(decl: ir.ParserDecl) -> tuple[list[str], str | None]:
    """The parser's states reachable from start, breadth first (accept and reject are
    not states), and the first name a transition gives that is no state (None: none)."""
    order: list[str] = []
    todo = ["start"]
    while todo:
        s = todo.pop(0)
        if s in order or s in ("accept", "reject"):
            continue
        if s not in decl.states:
            return order, s
        order.append(s)
        tr = decl.states[s].transition
        nexts = [tr.next_state] if tr.select is None else [c.next_state for c in tr.cases]
        todo += [n for n in nexts if n]
    return order, None
