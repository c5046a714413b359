"""What an architecture hands the code generator: its block roles, its primitives and the
code it adds around its blocks.

The engine compiles P4 statements, expressions and the externs every target shares (hash,
registers, counters, ...). Calls that only mean something to one architecture (v1model's
``mark_to_drop``, ``clone``, ``resubmit``, ``digest``, ``verify_checksum``, ...) and the
per-block set-up they need are compiled by that architecture, which passes them in here,
so the engine itself stays architecture-neutral.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from softswitch import ir
    from softswitch.engine.codegen_context import GenContext
    from softswitch.engine.codegen_emit import Emitter, Scope

# (generation context, the call, the scope it is in, the emitter to write Python lines to)
Primitive = Callable[["GenContext", "ir.Call", "Scope", "Emitter"], None]
# (context, role, the block's declaration, its scope, its emitter): called once the engine's
# own set-up lines of a top-level block function are written; may set ``Scope.arch``
BeginBlock = Callable[
    ["GenContext", str, "ir.ParserDecl | ir.ControlDecl", "Scope", "Emitter"], None
]
# (context, role, scope, emitter): called after a top-level control's body
EndBlock = Callable[["GenContext", str, "Scope", "Emitter"], None]
# called once every top-level block function is generated (extra module functions)
AfterBlocks = Callable[["GenContext"], None]


@dataclass(frozen=True)
class TargetSpec:
    """One architecture as the code generator sees it."""

    name: str
    # the package's block parameters, in order, by the role the generator compiles them for
    roles: tuple[str, ...]
    # extern function name -> the function that writes its Python code
    primitives: Mapping[str, Primitive] = field(default_factory=dict)
    begin_block: BeginBlock | None = None
    end_block: EndBlock | None = None
    after_blocks: AfterBlocks | None = None
