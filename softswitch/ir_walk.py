"""Walks over IR expression and statement trees: the one place that knows which fields of a
node hold its sub-trees, so that the code generator's analyses and the P4Info builder see
the same children."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from softswitch import ir

# Fields that refer to something declared elsewhere (a type, a variable, the called
# action/function, the applied instance) or give a source position: never sub-trees.
NOT_CHILDREN = frozenset({"type", "loc", "var", "callee", "instance"})


def is_node(x: object) -> bool:
    """True for the IR nodes the walks yield: expressions, statements and switch cases."""
    return isinstance(x, (ir.Expr, ir.Stmt, ir.SwitchCase))


def child_slots(node: object) -> list[object]:
    """The values of ``node``'s fields that hold sub-trees, in field order: a node, or a
    list or dict of nodes (a list may nest lists); empty for anything but a node."""
    if not is_node(node):
        return []
    assert dataclasses.is_dataclass(node)  # every concrete IR node class is a dataclass
    out: list[object] = []
    for f in dataclasses.fields(node):
        if f.name in NOT_CHILDREN:
            continue
        v = getattr(node, f.name)
        if is_node(v) or isinstance(v, (list, dict)):
            out.append(v)
    return out


def _flat(slot: object) -> Iterator[object]:
    """The nodes in one slot, in order (lists and dicts flattened)."""
    if isinstance(slot, list):
        for x in slot:
            yield from _flat(x)
    elif isinstance(slot, dict):
        for x in slot.values():
            yield from _flat(x)
    elif is_node(slot):
        yield slot


def children(node: object, *, struct_init_fields: bool = True) -> list[object]:
    """The direct child nodes of ``node``, in field order; ``struct_init_fields=False``
    leaves out the values of a struct initialiser (its only dict field)."""
    return [
        c
        for slot in child_slots(node)
        if struct_init_fields or not isinstance(slot, dict)
        for c in _flat(slot)
    ]


def walk(node: object) -> Iterator[object]:
    """Every node at or below ``node`` (a node, or a list/dict of them), parent before
    children; a node's fields are visited last field first, a list's items in order, a
    dict's values last first. The code generator's analyses depend on this order (the
    first register access found picks a run's index variable): keep it."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(reversed(n))
            continue
        if isinstance(n, dict):
            stack.extend(n.values())
            continue
        if not is_node(n):
            continue
        yield n
        stack.extend(child_slots(n))


def walk_in_order(node: object, *, struct_init_fields: bool = True) -> Iterator[object]:
    """Every node at or below ``node``, parent first, children in field order (source
    order): the order p4c lists what it finds."""
    for n in _flat(node):
        yield n
        for c in children(n, struct_init_fields=struct_init_fields):
            yield from walk_in_order(c, struct_init_fields=struct_init_fields)


def walk_innermost_first(node: object, *, struct_init_fields: bool = True) -> Iterator[object]:
    """Every node at or below ``node``, children (in field order) before their parent."""
    for n in _flat(node):
        for c in children(n, struct_init_fields=struct_init_fields):
            yield from walk_innermost_first(c, struct_init_fields=struct_init_fields)
        yield n
