"""The state every part of the code generator shares, and the names the generated code sees.

The generator is a set of visitors, one per concern (expressions, statements, calls,
externs, packets, extern instances, tables, parsers, blocks, element-wise vector runs),
none derived from another. Each holds this one :class:`GenContext` and reaches the others through it
(``ctx.exprs.expr(...)``), so what a visitor shares is explicit: the program, the
target, the type registry, the module's globals and the temporary-name counter.
"""

from __future__ import annotations

import functools
import struct
from typing import TYPE_CHECKING, Any

from softswitch import ir
from softswitch.engine import externs as ext
from softswitch.engine import runtime as rt
from softswitch.engine.codegen_types import TypeRegistry
from softswitch.engine.codegen_vector import runtime_globals as vector_globals
from softswitch.engine.codegen_walk import has_dynamic_indexes
from softswitch.engine.compiled import CompiledProgram
from softswitch.engine.externs import hash_reduce, hash_value, pack_fields
from softswitch.engine.target import TargetSpec
from softswitch.errors import P4Error

if TYPE_CHECKING:
    from softswitch.engine.codegen_blocks import BlockGen
    from softswitch.engine.codegen_calls import CallGen
    from softswitch.engine.codegen_expr import ExprGen
    from softswitch.engine.codegen_externs import ExternGen
    from softswitch.engine.codegen_instances import InstanceGen
    from softswitch.engine.codegen_packets import PacketGen
    from softswitch.engine.codegen_parser import ParserGen
    from softswitch.engine.codegen_stmt import StmtGen
    from softswitch.engine.codegen_tables import TableGen
    from softswitch.engine.codegen_vector import VectorGen


class GenContext:
    """One program's code generation: its inputs, the module being built and the visitors.

    The visitors are attached by :class:`softswitch.engine.codegen.CodeGen` right after
    construction; each keeps its own private memos."""

    exprs: ExprGen
    stmts: StmtGen
    calls: CallGen
    externs: ExternGen
    packets: PacketGen
    instances: InstanceGen
    tables: TableGen
    parsers: ParserGen
    blocks: BlockGen
    vectors: VectorGen

    def __init__(
        self, program: ir.Program, target: TargetSpec, log_enabled: bool, trace: bool
    ) -> None:
        self.program = program
        self.target = target
        self.trace = trace  # emit the per-packet trace calls (see softswitch.engine.trace)
        self.log_enabled = log_enabled or trace
        # action name -> control-plane parameter (name, width)s (for traces)
        self.action_param_names: dict[str, list[tuple[str, int]]] = {}
        self.types = TypeRegistry()
        self.ns: dict[str, Any] = {}  # module globals bound to run-time objects
        self.global_inits: list[str] = []  # module-level lines that create the other globals
        self.functions: list[str] = []  # the generated functions' source, in order
        self.global_names: dict[int, object] = {}  # id(top-level instance) -> global name
        # @field_list number -> name of its generated copy function (linked into
        # CompiledProgram.field_lists once the module runs)
        self.field_list_names: dict[int, str] = {}
        self.top_actions = {id(a) for a in program.actions.values()}
        # statements search for run-time stack indexes only where the program has any
        self.dynamic_indexes = has_dynamic_indexes(program)
        self.out = CompiledProgram(program, "", self.ns, {}, {}, {}, errors=list(program.errors),
                                   dynamic_indexes=self.dynamic_indexes)
        self._n = 0

    def next_number(self) -> int:
        """A number not used by any other generated name."""
        self._n += 1
        return self._n

    def tmp(self, prefix: str = "t") -> str:
        """A fresh local name."""
        return f"_{prefix}{self.next_number()}"

    def err_code(self, name: str) -> int:
        """The value of ``error.name`` in this program."""
        try:
            return self.program.errors.index(name)
        except ValueError:
            raise P4Error(f"error.{name} is not declared (include core.p4)") from None

    def add_global(self, prefix: str, obj: object, init: str | None = None) -> str:
        """A new module global bound to ``obj``, or created by the line ``init``."""
        name = f"G{self.next_number()}_{''.join(c if c.isalnum() else '_' for c in prefix)}"
        if init is not None:
            self.global_inits.append(f"{name} = {init}")
        else:
            self.ns[name] = obj
        return name

    def spare_for(self, t: ir.Type) -> str:
        """A global default value of ``t`` (what an out-of-range stack element reads)."""
        return self.add_global("spare", None, init=self.types.default(t))


def runtime_globals() -> dict[str, Any]:
    """The helpers every generated module refers to, by the name it uses."""
    return {
        "_ParserReject": rt.ParserReject,
        "_Struct": struct.Struct,
        "_P4Exit": rt.P4Exit,
        "_P4AssertionFailed": rt.P4AssertionFailed,
        "_Stack": rt.Stack,
        "_stack_next": rt.stack_next,
        "_stack_last": rt.stack_last,
        "_stack_at": rt.stack_at,
        "_stack_at_parser": rt.stack_at_parser,
        "_sext": rt.sext,
        "_shl": rt.shl,
        "_sshr": rt.sshr,
        "_udiv": rt.udiv,
        "_umod": rt.umod,
        "_sdiv": rt.sdiv,
        "_smod": rt.smod,
        "_ssat_add": rt.ssat_add,
        "_ssat_sub": rt.ssat_sub,
        "_pack_fields": pack_fields,
        "_hash_value": hash_value,
        "_h_crc32": rt.crc32,
        "_h_crc16": functools.partial(ext.crc, ext.CRC16_PARAMS),
        "_h_csum16": ext.csum16,
        "_h_xor16": ext.xor16,
        "_h_identity": ext.identity,
        "_csum16_int": rt.csum16_int,
        "_csum16_payload": rt.csum16_payload,
        "_hash_reduce": hash_reduce,
        "_lookahead_bits": rt.lookahead_bits,
        "_advance": rt.advance,
        **vector_globals(),
    }
