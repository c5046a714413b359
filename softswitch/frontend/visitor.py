"""Dispatch on the class of a typed syntax node: the checker's visitors share this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from softswitch.frontend.context import CheckContext


class Visitor:
    """``visit(node, ...)`` calls ``visit_<ClassName>(node, ...)`` of the node's class
    (:mod:`softswitch.frontend.syntax`); one subclass per concern of the checker, all
    reading and writing the one :class:`CheckContext` they are built around."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx

    def visit(self, node: Any, *args: Any) -> Any:
        """The result of this visitor's method for ``node``'s class."""
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            return self.visit_other(node, *args)
        return method(node, *args)

    def visit_other(self, node: Any, *args: Any) -> Any:
        """A node class this visitor has no method for (subclasses say what that means)."""
        raise TypeError(f"{type(self).__name__} cannot visit {type(node).__name__}")
