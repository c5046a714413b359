"""Small building blocks of the code generator: an indenting line emitter and the
per-block scope (how P4 names map to Python expressions)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

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
    sm: str | None = None  # standard_metadata expression (for mark_to_drop())
    in_parser: bool = False
    local_actions: set[int] = field(default_factory=set)

    def child(self, **changes: object) -> Scope:
        """A copy with its own env dict and the given fields replaced."""
        s = Scope(
            path=self.path,
            env=dict(self.env),
            names=self.names,
            ret=self.ret,
            ret_var=self.ret_var,
            ret_outs=self.ret_outs,
            pkt=self.pkt,
            out=self.out,
            sm=self.sm,
            in_parser=self.in_parser,
            local_actions=self.local_actions,
        )
        for k, v in changes.items():
            setattr(s, k, v)
        return s
