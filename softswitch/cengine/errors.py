"""Why a program cannot run on the C engine."""

from __future__ import annotations

from softswitch import ir


class CUnsupported(Exception):
    """A construct the C back end does not compile; the program then runs on the Python
    engine. ``construct`` names it, ``loc`` is where it is in the P4 source (if known)."""

    def __init__(self, construct: str, loc: ir.Loc | None = None) -> None:
        self.construct = construct
        self.loc = loc if loc is not None and loc != ir.NOLOC else None
        where = f"{self.loc}: " if self.loc is not None else ""
        super().__init__(f"{where}{construct}")


class CBuildError(Exception):
    """The C compiler failed on generated code (a bug of the back end, reported with the
    compiler's first error lines)."""
