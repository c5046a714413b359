"""Lexical scopes of the checker: one for values, one for types, chained to the parent."""

from __future__ import annotations

from dataclasses import dataclass, field

from softswitch import ir
from softswitch.errors import P4Error


@dataclass(eq=False)
class Overloads:
    """All declarations of an extern function name (``mark_to_drop`` has two)."""

    name: str
    decls: list[ir.ExternFunctionDecl] = field(default_factory=list)


@dataclass(eq=False)
class Scope:
    """Names visible in one block; lookups walk outwards through ``parent``."""

    parent: Scope | None = None
    values: dict[str, object] = field(default_factory=dict)
    types: dict[str, object] = field(default_factory=dict)

    def child(self) -> Scope:
        """A nested scope."""
        return Scope(self)

    def lookup(self, name: str) -> object | None:
        """The value declaration ``name`` refers to, or None."""
        s: Scope | None = self
        while s is not None:
            if name in s.values:
                return s.values[name]
            s = s.parent
        return None

    def lookup_type(self, name: str) -> object | None:
        """The type declaration ``name`` refers to, or None."""
        s: Scope | None = self
        while s is not None:
            if name in s.types:
                return s.types[name]
            s = s.parent
        return None

    def root(self) -> Scope:
        """The top-level scope."""
        s = self
        while s.parent is not None:
            s = s.parent
        return s

    def declare(self, name: str, obj: object, loc: ir.Loc) -> None:
        """Add a value; a second declaration of a name in one scope is an error."""
        if name in self.values or name in self.types:
            old = self.values.get(name)
            if isinstance(old, Overloads) and isinstance(obj, Overloads):
                return
            raise P4Error(f"duplicate declaration of '{name}'", loc)
        self.values[name] = obj

    def declare_type(self, name: str, obj: object, loc: ir.Loc) -> None:
        """Add a type name; a second declaration of a name in one scope is an error."""
        if name in self.types or name in self.values:
            raise P4Error(f"duplicate declaration of '{name}'", loc)
        self.types[name] = obj
