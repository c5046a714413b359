"""What an architecture hands the code generator: its block roles and its primitives.

The engine compiles P4 statements, expressions and the externs every target shares (hash,
checksums, registers, ...). Calls that only mean something to one architecture (v1model's
``mark_to_drop``, ``clone``, ``resubmit``, ...) are compiled by that architecture, which
passes them in here, so the engine itself stays architecture-neutral.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from softswitch import ir
    from softswitch.engine.codegen_emit import Emitter, Scope

# (code generator, the call, the scope it is in, the emitter to write Python lines to)
Primitive = Callable[[Any, "ir.Call", "Scope", "Emitter"], None]


@dataclass(frozen=True)
class TargetSpec:
    """One architecture as the code generator sees it."""

    name: str
    # the package's block parameters, in order, by the role the generator compiles them for
    roles: tuple[str, ...]
    # extern function name -> the function that writes its Python code
    primitives: Mapping[str, Primitive] = field(default_factory=dict)
