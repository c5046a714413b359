"""Questions about the IR that both code generators (Python and C) ask: which table or
block an ``apply`` applies, which actions it may run, in which order a parser's states
come, which variable an lvalue roots in."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, cast

from softswitch import ir
from softswitch.errors import UnsupportedError
from softswitch.ir_walk import walk, walk_innermost_first


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


def has_dynamic_indexes(program: ir.Program) -> bool:
    """Whether any ``hs[i]`` with a non-constant index is anywhere in ``program``: without
    one, no statement needs the per-statement search of :func:`dynamic_indexes`, which was
    40 % of generating netreduce.p4's C code (it has no header stack; its actions are
    inlined at every call site, so the search ran over 9,000 times). One pass over every
    object the program holds (declarations, bodies, whatever they refer to; each once)
    sees at least every expression a statement can hold (types hold none: not entered)."""
    seen: set[int] = set()
    todo: list[object] = [program]
    while todo:
        x = todo.pop()
        names = _held(type(x))
        if names is None or id(x) in seen:
            continue
        seen.add(id(x))
        if names == _CONTAINER:
            todo.extend(x.values() if isinstance(x, dict) else cast(Iterable[object], x))
            continue
        if (isinstance(x, ir.Index) and not isinstance(x.index, ir.Const)
                and isinstance(ir.strip_newtype(x.base.type), ir.StackType)):
            return True
        todo.extend(getattr(x, name) for name in names)
    return False


_CONTAINER = ("*",)
#: class -> the fields :func:`has_dynamic_indexes` follows: None for leaves (scalars,
#: positions, types, anything not a dataclass), _CONTAINER for lists, tuples, sets, dicts.
_HELD: dict[type, tuple[str, ...] | None] = {}


def _held(cls: type) -> tuple[str, ...] | None:
    try:
        return _HELD[cls]
    except KeyError:
        pass
    names: tuple[str, ...] | None = None
    if issubclass(cls, (list, tuple, set, frozenset, dict)):
        names = _CONTAINER
    elif dataclasses.is_dataclass(cls) and not issubclass(cls, (ir.Loc, ir.Type)):
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "loc")
    _HELD[cls] = names
    return names


def dynamic_indexes(exprs: list[ir.Expr]) -> list[ir.Index]:
    """``hs[i]`` nodes with a non-constant index in ``exprs``, innermost first."""
    return [
        n
        # not into struct initialisers: the search never looked there, and pinning an
        # index there changes the code (and what an out-of-range read gives) of programs
        # that read hs[i] in one; whether it should is an open question
        for n in walk_innermost_first(exprs, struct_init_fields=False)
        if isinstance(n, ir.Index)
        and not isinstance(n.index, ir.Const)
        and isinstance(ir.strip_newtype(n.base.type), ir.StackType)
    ]
