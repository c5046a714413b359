"""What the code generator hands back: the program's callables and its run-time state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from softswitch import ir
from softswitch.engine.externs import Counter, Meter, Register
from softswitch.engine.tables import ActionProfile, Table
from softswitch.engine.trace import PacketTracer


@dataclass
class CompiledProgram:
    """Callables and run-time state of one compiled program."""

    program: ir.Program
    source: str
    namespace: dict[str, Any]
    blocks: dict[str, Callable[..., Any]]  # role ("parser", ...) -> function, in main order
    block_params: dict[str, list[ir.Param]]
    classes: dict[str, type]  # role of each apply-parameter type name -> class
    tables: dict[str, Table] = field(default_factory=dict)
    registers: dict[str, Register] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    meters: dict[str, Meter] = field(default_factory=dict)
    action_profiles: dict[str, ActionProfile] = field(default_factory=dict)
    direct_counters: dict[str, Table] = field(default_factory=dict)
    direct_meters: dict[str, Table] = field(default_factory=dict)
    field_lists: dict[int, Callable[[Any, Any], None]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    code: str = ""  # the generated functions only (no type classes): what the program does
    # whether the program indexes a header stack at run time anywhere (the C generator
    # searches statements for such indexes only then, as the Python one did)
    dynamic_indexes: bool = True

    def new(self, t: ir.Type) -> Any:
        """A fresh (zero / invalid) value of a composite type of the program."""
        return self.namespace[self._cls_names[id(ir.strip_newtype(t))]]()

    _cls_names: dict[int, str] = field(default_factory=dict)
    tracer: PacketTracer | None = None  # set when compiled with trace=True
