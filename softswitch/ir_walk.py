"""Walks over IR expression and statement trees: the one place that knows which fields of a
node hold its sub-trees, so that the code generator's analyses and the P4Info builder see
the same children."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, cast

from softswitch import ir

# Fields that refer to something declared elsewhere (a type, a variable, the called
# action/function, the applied instance) or give a source position: never sub-trees.
NOT_CHILDREN = frozenset({"type", "loc", "var", "callee", "instance"})


def is_node(x: object) -> bool:
    """True for the IR nodes the walks yield: expressions, statements and switch cases."""
    return _node_slots(type(x)) is not None


#: class -> its :func:`_node_slots` (IR classes are fixed: filled once, never changed).
_SLOTS: dict[type, tuple[str, ...] | None] = {}


def _node_slots(cls: type) -> tuple[str, ...] | None:
    """For a node class, the names of its fields that may hold sub-trees (in field order);
    None for any other class. Looked up once a class: ``dataclasses.fields`` and the
    isinstance tests on every node were half of a program load's walking."""
    try:
        return _SLOTS[cls]
    except KeyError:
        pass
    names = None
    if issubclass(cls, (ir.Expr, ir.Stmt, ir.SwitchCase)):
        # every concrete IR node class is a dataclass (dataclasses.fields raises on others)
        names = tuple(f.name for f in dataclasses.fields(cast(Any, cls))
                      if f.name not in NOT_CHILDREN)
    _SLOTS[cls] = names
    return names


def child_slots(node: object) -> list[object]:
    """The values of ``node``'s fields that hold sub-trees, in field order: a node, or a
    list or dict of nodes (a list may nest lists); empty for anything but a node."""
    names = _node_slots(type(node))
    if names is None:
        return []
    out: list[object] = []
    for name in names:
        v = getattr(node, name)
        if isinstance(v, (list, dict)) or is_node(v):
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
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        n = pop()
        names = _node_slots(n.__class__)
        if names is None:  # a list or dict of sub-trees, or a leaf value
            if isinstance(n, list):
                extend(reversed(n))
            elif isinstance(n, dict):
                extend(n.values())
            continue
        yield n
        # every field that may hold a sub-tree; the values that are none are skipped when
        # popped (the order of the nodes among them is the same)
        for name in names:
            push(getattr(n, name))


def walk_in_order(node: object, *, struct_init_fields: bool = True) -> Iterator[object]:
    """Every node at or below ``node``, parent first, children in field order (source
    order): the order p4c lists what it finds. (A stack, not nested generators: those cost
    every node its depth.) A node's children are read after the node was yielded, as the
    recursive walk read them."""
    stack = list(_flat(node))
    stack.reverse()
    while stack:
        n = stack.pop()
        yield n
        kids = children(n, struct_init_fields=struct_init_fields)
        kids.reverse()
        stack.extend(kids)


def walk_innermost_first(node: object, *, struct_init_fields: bool = True) -> Iterator[object]:
    """Every node at or below ``node``, children (in field order) before their parent."""
    stack: list[tuple[object, bool]] = [(n, False) for n in _flat(node)]
    stack.reverse()
    while stack:
        n, expanded = stack.pop()
        if expanded:
            yield n
            continue
        stack.append((n, True))
        stack.extend((c, False) for c in reversed(children(
            n, struct_init_fields=struct_init_fields)))
