"""User-facing errors of the built-in target.

Every problem with a P4 program is reported as ``FILE:LINE:COL: error: message`` and never as
a Python traceback; the CLI catches :class:`P4Error` and prints ``str(err)``.
"""

from __future__ import annotations

from softswitch.ir import Loc


class P4Error(Exception):
    """A rejected P4 program (syntax, names, types, or an unsupported construct)."""

    def __init__(self, message: str, loc: Loc | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        if self.loc is None:
            return f"error: {self.message}"
        return f"{self.loc}: error: {self.message}"


class UnsupportedError(P4Error):
    """A valid P4_16 construct that the built-in target does not implement."""

    def __init__(self, what: str, loc: Loc | None = None) -> None:
        super().__init__(f"{what} is not supported by the built-in target", loc)


class TableError(Exception):
    """A rejected table operation; ``code`` is a P4Runtime/gRPC status name such as
    ``ALREADY_EXISTS`` or ``RESOURCE_EXHAUSTED``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
