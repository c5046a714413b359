"""Extern calls: the extern functions the engine compiles itself, the methods of extern
objects (registers, counters, meters), of headers, stacks and unions, and the hashing and
checksum code that targets' primitives share.

Calls that only one architecture defines are compiled by that architecture and handed in
through :class:`softswitch.engine.target.TargetSpec` (v1model's drop, clone, resubmit,
recirculate, truncate, digest and checksum primitives: :mod:`softswitch.v1model.primitives`);
they take precedence over the functions here.

Facts from BMv2 relied on here (simple_switch primitives and bm_sim):

* ``setValid`` on an invalid header zeroes its fields (``add_header`` resets the header);
  ``setInvalid`` keeps the field values; both adjust the packet-length register.
* ``hash``: ``result = base + (h % max)``, with ``max == 0`` treated as 1; the input bytes
  are the fields packed MSB first (fields of invalid headers skipped, last byte padded
  with zero bits on the right).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.bits import mask
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import PyValue, strip
from softswitch.engine.codegen_types import scalar_width
from softswitch.engine.codegen_walk import given, register_index_base
from softswitch.engine.externs import Register
from softswitch.errors import P4Error, UnsupportedError

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext

HASH_ALGOS = (
    "crc32",
    "crc32_custom",
    "crc16",
    "crc16_custom",
    "random",
    "identity",
    "csum16",
    "xor16",
)


# hash algorithms whose function the generated code calls directly
_DIRECT_HASH = {
    "crc32": "_h_crc32",
    "crc16": "_h_crc16",
    "csum16": "_h_csum16",
    "xor16": "_h_xor16",
    "identity": "_h_identity",
}

_SIMPLE_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


class ExternGen:
    """Extern functions (by name: the target's primitives first, then ``fn_<name>``) and
    methods (by the class of the target's type, then by extern name)."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    def _algo(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        if isinstance(e, ir.EnumMember):
            return repr(e.member)
        t = strip(e.type)
        members = t.members if isinstance(t, ir.EnumType) else list(HASH_ALGOS)
        return f"{tuple(members)!r}[{self.ctx.exprs.expr(e, sc, em)}]"

    def write_out(self, a: ir.Expr | None, val: str, sc: Scope, em: Emitter) -> None:
        """Write ``val`` to out-argument ``a`` (nothing for a don't-care)."""
        if a is None or isinstance(a, ir.DontCare):
            em.line(val)
            return
        if isinstance(a, ir.Slice):
            self.ctx.stmts.assign(a, PyValue(a.type, val), sc, em)
            return
        em.line(f"{self.ctx.exprs.lvalue(a, sc, em)} = {val}")

    def hash_of(
        self,
        algo: ir.Expr,
        data: ir.Expr,
        with_payload: bool,
        sc: Scope,
        em: Emitter,
        known: str | None = None,
    ) -> str:
        """Python expression of the raw hash of field list ``data`` (plus the unparsed
        payload). With a constant algorithm the call goes straight to its function, and
        ``csum16`` is computed on the packed integer without building bytes."""
        name = algo.member if isinstance(algo, ir.EnumMember) else None
        if name == "csum16":
            packed = self.ctx.exprs.packed_int(data, sc, em, known)
            if packed is not None:
                value, nbytes = packed
                if with_payload:
                    return f"_csum16_payload({value}, {nbytes}, _ctx.payload)"
                if nbytes.isdigit():  # inline runtime.csum16_int
                    if int(nbytes) & 1:
                        value = f"({value} << 8)"
                    v = self.ctx.tmp("cv")
                    return f"(0xffff - (({v} := {value}) % 0xffff or (0xffff if {v} else 0)))"
                return f"_csum16_int({value}, {nbytes})"
        raw = self.ctx.exprs.packed_bytes(data, sc, em)
        if with_payload:
            raw = f"({raw} + _ctx.payload)"
        if name in _DIRECT_HASH:
            return f"{_DIRECT_HASH[name]}({raw})"
        return f"_hash_value({self._algo(algo, sc, em)}, {raw}, rng=_rng)"

    # ------------------------------------------------------------------ functions

    def extern_call(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        name = e.callee.name
        primitive = self.ctx.target.primitives.get(name)
        if primitive is not None:
            primitive(self.ctx, e, sc, em)
            return
        meth = getattr(self, "fn_" + name, None)
        if meth is None:
            raise UnsupportedError(f"extern function {name}", e.loc)
        meth(e, sc, em)

    def _arg(self, e: ir.Call | ir.MethodCall, i: int, sc: Scope, em: Emitter) -> str:
        return self.ctx.exprs.expr(given(e.args[i]), sc, em)

    def fn_verify(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        if not sc.in_parser:
            raise P4Error("verify() is only allowed in a parser", e.loc)
        with em.block(f"if not {self._arg(e, 0, sc, em)}:"):
            em.line(f"raise _ParserReject({self._arg(e, 1, sc, em)})")

    def fn_hash(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        a = e.args
        out_t = strip(a[0].type) if a[0] is not None else ir.BitType(32)
        width = scalar_width(out_t)
        h = self.hash_of(given(a[1]), given(a[3]), False, sc, em)
        base, max_ = self._arg(e, 2, sc, em), self._arg(e, 4, sc, em)
        if max_.isdigit() and base.isdigit():  # the usual case: constants
            if int(max_) > 0:
                b = f"{base} + " if int(base) else ""
                val = f"(({b}{h} % {max_}) & {mask(width):#x})"
            else:
                val = str(int(base) & mask(width))
        else:
            val = f"_hash_reduce({h}, {base}, {max_}, {width})"
        self.write_out(a[0], val, sc, em)

    def fn_random(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        lo, hi = self._arg(e, 1, sc, em), self._arg(e, 2, sc, em)
        self.write_out(e.args[0], f"_random_between({lo}, {hi})", sc, em)

    def fn_assert(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        with em.block(f"if not {self._arg(e, 0, sc, em)}:"):
            em.line(f"raise _P4AssertionFailed({str(e.loc)!r})")

    fn_assume = fn_assert

    def fn_log_msg(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        if not self.ctx.log_enabled:
            return
        a = e.args
        fmt = self._arg(e, 0, sc, em)
        if len(a) > 1 and a[1] is not None:
            vals = ", ".join(v for v, _, _ in self.ctx.exprs.flat_fields(a[1], sc, em))
            em.line(f"_log_msg({fmt}, ({vals},))")
        else:
            em.line(f"_log_msg({fmt}, ())")

    def fn_static_assert(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        pass  # checked by the front end

    # ------------------------------------------------------------------ methods

    def method_call(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        """A method call statement: ``apply`` of a table or sub-block, else
        ``method_<class of the target's type>``."""
        if e.method == "apply":
            target = e.target
            if isinstance(target, ir.InstanceRef) and isinstance(target.instance, ir.TableDecl):
                self.ctx.tables.apply_table(e, sc, em)
            else:
                self.ctx.calls.inline_block(e, sc, em)
            return
        tt = strip(e.target.type)
        meth = getattr(self, "method_" + type(tt).__name__, None)
        if meth is None:
            raise UnsupportedError(f"method {e.method} on {type(tt).__name__}", e.loc)
        meth(e, tt, sc, em)

    def method_HeaderType(
        self, e: ir.MethodCall, tt: ir.HeaderType, sc: Scope, em: Emitter
    ) -> None:
        m = e.method
        h = self.ctx.exprs.expr(e.target, sc, em)
        nbytes = (tt.bit_width + 7) // 8
        if m == "setValid":
            with em.block(f"if not {h}._v:"):
                em.line(f"{h}._reset()")
                em.line(f"{h}._v = True")
                em.line(f"_ctx.length_reg += {nbytes}")
            self.ctx.stmts.union_fixup(e.target, sc, em)
        elif m == "setInvalid":
            with em.block(f"if {h}._v:"):
                em.line(f"{h}._v = False")
                em.line(f"_ctx.length_reg -= {nbytes}")
        elif m != "isValid":
            raise UnsupportedError(f"header method {m}", e.loc)

    def method_StackType(self, e: ir.MethodCall, tt: ir.StackType, sc: Scope, em: Emitter) -> None:
        m = e.method
        s = self.ctx.exprs.expr(e.target, sc, em)
        if m not in ("push_front", "pop_front"):
            raise UnsupportedError(f"stack method {m}", e.loc)
        em.line(f"{s}.{m}({self._arg(e, 0, sc, em)})")

    def method_HeaderUnionType(
        self, e: ir.MethodCall, tt: ir.HeaderUnionType, sc: Scope, em: Emitter
    ) -> None:
        if e.method != "isValid":
            raise UnsupportedError(f"header union method {e.method}", e.loc)

    def method_ExternType(
        self, e: ir.MethodCall, tt: ir.ExternType, sc: Scope, em: Emitter
    ) -> None:
        """``packet_in``/``packet_out`` methods go to the packet visitor; the methods of
        an extern object instance to ``<extern>_<method>``."""
        ext, m = tt.name, e.method
        if ext == "packet_in":
            self.ctx.packets.packet_in_stmt(e, sc, em)
            return
        if ext == "packet_out":
            if m != "emit":
                raise UnsupportedError(f"packet_out.{m}", e.loc)
            if sc.out is None:
                raise P4Error("emit() outside a deparser", e.loc)
            value = self._arg(e, 0, sc, em)
            self.ctx.packets.emit_value(value, given(e.args[0]).type, sc.out, em)
            return
        if ext in ("direct_counter", "direct_meter"):  # kept by their table, not a value
            meth = getattr(self, f"{ext}_{m}", None)
            if meth is None:
                raise UnsupportedError(f"extern method {ext}.{m}", e.loc)
            meth("", e, sc, em)
            return
        obj = self.ctx.exprs.expr(e.target, sc, em)
        if ext == "register":
            if m not in ("read", "write"):
                raise UnsupportedError(f"register.{m}", e.loc)
            self._register_access(obj, e, sc, em)
            return
        meth = getattr(self, f"{ext}_{m}", None)
        if meth is None:
            raise UnsupportedError(f"extern method {ext}.{m}", e.loc)
        meth(obj, e, sc, em)

    def counter_count(self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        em.line(f"{obj}.count({self._arg(e, 0, sc, em)}, _ctx.ingress_length)")

    def direct_counter_count(self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        pass  # BMv2 counts direct counters on every hit of the table

    def meter_execute_meter(self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        idx = self._arg(e, 0, sc, em)
        self.write_out(e.args[1], f"{obj}.execute({idx}, _ctx.ingress_length, _now())", sc, em)

    def direct_meter_read(self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        self.write_out(e.args[0], "_ctx.meter_color", sc, em)

    def _register_access(self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        """``r.read(dst, i)`` / ``r.write(i, v)`` inlined on the register's value list.

        As BMv2's ``register_read``/``register_write``: an index out of range leaves the
        destination unchanged, or writes nothing."""
        reg = self.ctx.ns.get(obj)
        if not isinstance(reg, Register):  # not a known instance: bounds checked at run time
            self._unknown_register_access(obj, e, sc, em)
            return
        run = sc.reg_run
        if run is not None and obj in run[1]:
            if self._register_run_access(run, obj, reg, e, sc, em):
                return
        a = e.args
        idx = self.ctx.exprs.expr(given(a[1] if e.method == "read" else a[0]), sc, em)
        val = self._register_value(reg, e, sc, em) if e.method == "write" else ""
        if idx.isdigit():
            if int(idx) >= reg.size:
                return
            guard = None
        else:
            if not _SIMPLE_NAME.match(idx):
                # one shared name: its value lives only in this access, and a numbered
                # temporary per access gave netreduce.p4's ingress at E = 256 some 2,000
                # locals, a frame too big for CPython's data-stack chunk (an mmap and
                # munmap on every call; docs/benchmarks.md, issue 13)
                em.line(f"_ri = {idx}")
                idx = "_ri"
            guard = f"if {idx} < {reg.size}:"
        outer = em.indent
        if guard is not None:
            em.line(guard)
            em.indent += 1
        if e.method == "read":
            self.write_out(a[0], f"{obj}.values[{idx}]", sc, em)
        else:
            em.line(f"{obj}.values[{idx}] = {val}")
        em.indent = outer

    def _unknown_register_access(
        self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter
    ) -> None:
        """A register access through the object's own methods (bounds checked there)."""
        a = e.args
        if e.method == "read":
            t = self.ctx.tmp("ri")
            em.line(f"{t} = {self.ctx.exprs.expr(given(a[1]), sc, em)}")
            with em.block(f"if 0 <= {t} < {obj}.size:"):
                self.write_out(a[0], f"{obj}.values[{t}]", sc, em)
        else:
            idx = self._arg(e, 0, sc, em)
            em.line(f"{obj}.write({idx}, {self._arg(e, 1, sc, em)})")

    def _register_run_access(
        self,
        run: tuple[ir.Variable, dict[str, str]],
        obj: str,
        reg: Register,
        e: ir.MethodCall,
        sc: Scope,
        em: Emitter,
    ) -> bool:
        """An access inside a register run at the run's index variable plus a constant:
        the run's single check covers it, no check here (False: not such an access)."""
        a = e.args
        base = register_index_base(a[1] if e.method == "read" else a[0])
        if base is None or base[0] is not run[0]:
            return False
        var, c = base
        vals = run[1][obj]
        at = f"{vals}[{sc.env[var]} + {c}]" if c else f"{vals}[{sc.env[var]}]"
        if e.method == "read":
            self.write_out(a[0], at, sc, em)
        else:
            em.line(f"{at} = {self._register_value(reg, e, sc, em)}")
        return True

    def _register_value(self, reg: Register, e: ir.MethodCall, sc: Scope, em: Emitter) -> str:
        """The value a write stores, masked to the register's width unless it is a bit<W>
        already."""
        value_arg = given(e.args[1])
        val = self.ctx.exprs.expr(value_arg, sc, em)
        if not isinstance(strip(value_arg.type), ir.BitType):
            val = f"(({val}) & {reg.mask:#x})"
        return val

__all__ = ["HASH_ALGOS", "ExternGen"]
