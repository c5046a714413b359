"""Small building blocks of the code generator: an indenting line emitter and the
per-block scope (how P4 names map to Python expressions)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from softswitch import ir


class Emitter:
    """Collects the lines of one generated Python function."""

    def __init__(self, indent: int = 1) -> None:
        self.lines: list[str] = []
        self.indent = indent

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """``header:`` followed by an indented body (``pass`` when it stays empty)."""
        self.line(header)
        self.indent += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.line("pass")
            self.indent -= 1


# A constructor parameter bound to a parser/control instance: the instance, the path of
# the block that declared it, and that block's own such bindings (to resolve its arguments).
BlockArg = tuple[ir.Instance, str, "dict[ir.Variable, BlockArg]"]


@dataclass
class Scope:
    """Name resolution for the body being generated.

    ``env`` maps variables and parameters to Python expressions; ``names`` maps the
    instances and tables declared in the enclosing control/parser instance (keyed by
    ``id`` of the declaration) to module-level names. ``ret`` says how ``return`` is
    compiled: ``"return"`` (top of a Python function) or ``"break"`` (an inlined body
    wrapped in ``while True``).
    """

    path: str
    env: dict[ir.Variable, str]
    names: dict[int, object]
    ret: str = "return"
    ret_var: str | None = None
    ret_outs: tuple[str, ...] = ()
    pkt: tuple[str, str] | None = None  # (data, pos) Python names of the packet_in
    out: str | None = None  # Python name of the packet_out buffer
    in_parser: bool = False
    local_actions: set[int] = field(default_factory=set)
    # run-time stack indexes evaluated once for the statement being generated:
    # id(ir.Index) -> Python temp; ``pins_checked`` once the bounds guard has passed
    pins: dict[int, str] = field(default_factory=dict)
    pins_checked: bool = False
    # the architecture's own state for the top-level block being generated, shared by
    # the sub-blocks inlined into it (set by TargetSpec.begin_block; v1model: its
    # standard_metadata parameter and digest call sites); None elsewhere
    arch: Any = None
    # composite sub-objects of the block's parameters bound to Python locals once per
    # call (objects keep their identity, see codegen_types): "P1_hdr.ipv4" -> "_o1";
    # None outside a top-level block function
    obj_cache: dict[str, str] | None = None
    obj_roots: set[str] = field(default_factory=set)
    # innermost P4 loop: the updates a ``continue`` runs first (a C-style ``for``), and
    # the flag a ``return`` sets before ``break`` when ``ret`` is "break" (the return
    # must leave the inlined body, not only the loop)
    loop_updates: list[ir.Stmt] | None = None
    loop_ret_flag: str | None = None
    # constructor parameters bound to parser/control instances: the instance and the
    # control-plane path where it was declared
    block_args: dict[ir.Variable, BlockArg] = field(default_factory=dict)
    # inside a run of register accesses at ``base + constant`` whose bounds were checked
    # once (see StmtGen.stmts): the base variable and, per register global, the local
    # bound to its value list
    reg_run: tuple[ir.Variable, dict[str, str]] | None = None

    def cached_object(self, text: str) -> str:
        """A local bound to the object at ``text`` when its base is a stable object."""
        assert self.obj_cache is not None
        name = self.obj_cache.get(text)
        if name is not None:
            return name
        base = text.rsplit(".", 1)[0]
        if base not in self.obj_roots:
            return text
        name = f"_o{len(self.obj_cache) + 1}"
        self.obj_cache[text] = name
        self.obj_roots.add(name)
        return name

    def is_stable_object(self, text: str) -> bool:
        """True for a local that names the same object for the whole block call."""
        return text in self.obj_roots

    def child(self, **changes: object) -> Scope:
        """A copy with its own env dict and the given fields replaced."""
        s = copy.copy(self)  # every field shared, as a new Scope of the same values
        s.env = dict(self.env)
        for k, v in changes.items():
            setattr(s, k, v)
        return s
