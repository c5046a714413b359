"""Front-end-only additions to the IR vocabulary (never reach the engine as values).

Generic externs and the architecture's block prototypes need a few types that
:mod:`softswitch.ir` does not have: type variables and parser/control/package prototypes.
They appear inside :class:`~softswitch.ir.ExternDecl` parameter lists (``T`` of
``register<T>``) and in the front end's scopes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from softswitch import ir


@dataclass(frozen=True)
class TypeVar(ir.Type):
    """A type parameter such as ``T`` in ``extern register<T>``."""

    name: str


@dataclass(eq=False)
class BlockProto(ir.BlockProtoType):
    """A parser or control type declaration (``parser Parser<H, M>(...);``) with its type
    parameters (the engine only ever sees non-generic ones, as :class:`ir.BlockProtoType`)."""

    type_params: list[str] = field(default_factory=list)


@dataclass(eq=False)
class PackageType(ir.Type):
    """A package declaration (``package V1Switch<H, M>(Parser<H, M> p, ...);``)."""

    name: str
    type_params: list[str]
    params: list[ir.Param]
    loc: ir.Loc = ir.NOLOC


@dataclass(frozen=True)
class SpecializedType(ir.Type):
    """``Parser<H, M>``-style use of a generic block prototype (package parameters)."""

    base: ir.Type
    args: tuple[ir.Type, ...] = field(default_factory=tuple)
