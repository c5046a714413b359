"""Translation of extern calls: v1model extern functions, extern object methods, the
packet_in/packet_out methods and the built-in header/stack methods.

Facts from BMv2 relied on here (simple_switch primitives and bm_sim):

* ``setValid`` on an invalid header zeroes its fields (``add_header`` resets the header);
  ``setInvalid`` keeps the field values; both adjust the packet-length register.
* ``hash``: ``result = base + (h % max)``, with ``max == 0`` treated as 1; the input bytes
  are the fields packed MSB first (fields of invalid headers skipped, last byte padded
  with zero bits on the right).
* ``mark_to_drop``: ``egress_spec = 511`` and ``mcast_grp = 0``.
* ``verify_checksum`` sets ``checksum_error``; ``update_checksum`` writes only when the
  condition holds.
* clone/resubmit/recirculate only record a request; the architecture acts on it after
  the control returns. ``digest`` keeps the last request of the packet.
"""

from __future__ import annotations

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import mask, strip
from softswitch.engine.codegen_stmt import StmtMixin
from softswitch.engine.codegen_types import attr, is_composite, scalar_width
from softswitch.errors import P4Error, UnsupportedError

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


class ExternMixin(StmtMixin):
    """Extern part of :class:`softswitch.engine.codegen.CodeGen`."""

    log_enabled: bool

    def _algo(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        if isinstance(e, ir.EnumMember):
            return repr(e.member)
        t = strip(e.type)
        members = t.members if isinstance(t, ir.EnumType) else list(HASH_ALGOS)
        return f"{tuple(members)!r}[{self.expr(e, sc, em)}]"

    def _out(self, a: ir.Expr | None, val: str, sc: Scope, em: Emitter) -> None:
        """Write ``val`` to out-argument ``a`` (nothing for a don't-care)."""
        if a is None or isinstance(a, ir.DontCare):
            em.line(val)
            return
        if isinstance(a, ir.Slice):
            from softswitch.engine.codegen_stmt import _PyValue

            self.assign(a, _PyValue(a.type, val), sc, em)
            return
        em.line(f"{self.lvalue(a, sc, em)} = {val}")

    def _sm(self, sc: Scope, loc: ir.Loc) -> str:
        if sc.sm is None:
            raise P4Error("mark_to_drop() needs standard_metadata in scope", loc)
        return sc.sm

    # ------------------------------------------------------------------ functions

    def extern_call(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        name = e.callee.name
        a = e.args
        x = lambda i: self.expr(a[i], sc, em)  # noqa: E731
        if name == "mark_to_drop":
            sm = x(0) if a else self._sm(sc, e.loc)
            em.line(f"{sm}.egress_spec = 511")
            em.line(f"{sm}.mcast_grp = 0")
        elif name == "verify":
            if not sc.in_parser:
                raise P4Error("verify() is only allowed in a parser", e.loc)
            with em.block(f"if not {x(0)}:"):
                em.line(f"raise _ParserReject({x(1)})")
        elif name == "hash":
            out_t = strip(a[0].type) if a[0] is not None else ir.BitType(32)
            width = scalar_width(out_t)
            data = self.packed_bytes(a[3], sc, em)  # type: ignore[arg-type]
            val = (
                f"_hash_reduce(_hash_value({self._algo(a[1], sc, em)}, {data}, rng=_rng), "
                f"{x(2)}, {x(4)}, {width})"
            )
            self._out(a[0], val, sc, em)
        elif name == "random":
            lo, hi = x(1), x(2)
            self._out(a[0], f"_random_between({lo}, {hi})", sc, em)
        elif name in ("verify_checksum", "verify_checksum_with_payload"):
            data = self.packed_bytes(a[1], sc, em)  # type: ignore[arg-type]
            if name.endswith("payload"):
                data = f"({data} + _ctx.payload)"
            w = scalar_width(a[2].type)  # type: ignore[union-attr]
            h = f"(_hash_value({self._algo(a[3], sc, em)}, {data}, rng=_rng) & {mask(w):#x})"
            with em.block(f"if {x(0)} and {h} != {x(2)}:"):
                em.line("_ctx.checksum_error = 1")
        elif name in ("update_checksum", "update_checksum_with_payload"):
            with em.block(f"if {x(0)}:"):
                data = self.packed_bytes(a[1], sc, em)  # type: ignore[arg-type]
                if name.endswith("payload"):
                    data = f"({data} + _ctx.payload)"
                w = scalar_width(a[2].type)  # type: ignore[union-attr]
                h = f"(_hash_value({self._algo(a[3], sc, em)}, {data}, rng=_rng) & {mask(w):#x})"
                self._out(a[2], h, sc, em)
        elif name in ("clone", "clone3"):
            em.line(f"_ctx.clone_session = {x(1)}")
            em.line("_ctx.clone_fl = None")
        elif name == "clone_preserving_field_list":
            em.line(f"_ctx.clone_session = {x(1)}")
            em.line(f"_ctx.clone_fl = {x(2)}")
        elif name == "resubmit":
            em.line("_ctx.resubmit_fl = -1")
        elif name == "resubmit_preserving_field_list":
            em.line(f"_ctx.resubmit_fl = {x(0)}")
        elif name == "recirculate":
            em.line("_ctx.recirculate_fl = -1")
        elif name == "recirculate_preserving_field_list":
            em.line(f"_ctx.recirculate_fl = {x(0)}")
        elif name == "truncate":
            em.line(f"_ctx.truncate = {x(0)}")
        elif name == "digest":
            self._digest(e, sc, em)
        elif name in ("assert", "assume"):
            with em.block(f"if not {x(0)}:"):
                em.line(f"raise _P4AssertionFailed({str(e.loc)!r})")
        elif name == "log_msg":
            if self.log_enabled:
                fmt = x(0)
                if len(a) > 1 and a[1] is not None:
                    vals = ", ".join(v for v, _, _ in self.flat_fields(a[1], sc, em))
                    em.line(f"_log_msg({fmt}, ({vals},))")
                else:
                    em.line(f"_log_msg({fmt}, ())")
        elif name == "static_assert":
            pass
        else:
            raise UnsupportedError(f"extern function {name}", e.loc)

    def _digest(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        data = e.args[1]
        assert data is not None
        t = e.type_args[0] if e.type_args else data.type
        t = strip(t)
        name = getattr(t, "name", "digest")
        ann = getattr(t, "annotations", {}).get("name")
        if ann:
            name = str(ann[0]).strip('"')
            name = name[1:] if name.startswith(".") else name
        fields = self.flat_fields(data, sc, em)
        vals = "".join(f"{v}, " for v, _, _ in fields)
        em.line(f"_ctx.digest = ({name!r}, ({vals}))")

    # ------------------------------------------------------------------ methods

    def method_call(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        tt = strip(e.target.type)
        m = e.method
        if m == "apply":
            target = e.target
            if isinstance(target, ir.InstanceRef) and isinstance(target.instance, ir.TableDecl):
                self.apply_table(e, sc, em)
            else:
                self.inline_block(e, sc, em)
            return
        if isinstance(tt, ir.HeaderType):
            h = self.expr(e.target, sc, em)
            nbytes = tt.bit_width // 8
            if m == "setValid":
                with em.block(f"if not {h}._v:"):
                    em.line(f"{h}._reset()")
                    em.line(f"{h}._v = True")
                    em.line(f"_ctx.length_reg += {nbytes}")
                self._union_fixup(e.target, sc, em)
            elif m == "setInvalid":
                with em.block(f"if {h}._v:"):
                    em.line(f"{h}._v = False")
                    em.line(f"_ctx.length_reg -= {nbytes}")
            elif m == "isValid":
                pass
            else:
                raise UnsupportedError(f"header method {m}", e.loc)
            return
        if isinstance(tt, ir.StackType):
            s = self.expr(e.target, sc, em)
            if m in ("push_front", "pop_front"):
                em.line(f"{s}.{m}({self.expr(e.args[0], sc, em)})")  # type: ignore[arg-type]
                return
            raise UnsupportedError(f"stack method {m}", e.loc)
        if isinstance(tt, ir.HeaderUnionType):
            if m == "isValid":
                return
            raise UnsupportedError(f"header union method {m}", e.loc)
        if isinstance(tt, ir.ExternType):
            self.extern_method(tt.name, e, sc, em)
            return
        raise UnsupportedError(f"method {m} on {type(tt).__name__}", e.loc)

    def extern_method(self, ext: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        m = e.method
        a = e.args
        if ext == "packet_in":
            self.packet_in_stmt(e, sc, em)
            return
        if ext == "packet_out":
            if m != "emit":
                raise UnsupportedError(f"packet_out.{m}", e.loc)
            if sc.out is None:
                raise P4Error("emit() outside a deparser", e.loc)
            self.emit_value(self.expr(a[0], sc, em), a[0].type, sc.out, em)  # type: ignore[arg-type, union-attr]
            return
        obj = self.expr(e.target, sc, em)
        if ext == "register":
            if m == "read":
                self._out(a[0], f"{obj}.read({self.expr(a[1], sc, em)})", sc, em)  # type: ignore[arg-type]
            elif m == "write":
                em.line(f"{obj}.write({self.expr(a[0], sc, em)}, {self.expr(a[1], sc, em)})")  # type: ignore[arg-type]
            else:
                raise UnsupportedError(f"register.{m}", e.loc)
        elif ext == "counter" and m == "count":
            em.line(f"{obj}.count({self.expr(a[0], sc, em)}, _ctx.ingress_length)")  # type: ignore[arg-type]
        elif ext == "direct_counter" and m == "count":
            pass  # BMv2 counts direct counters on every hit of the table
        elif ext == "meter" and m == "execute_meter":
            idx = self.expr(a[0], sc, em)  # type: ignore[arg-type]
            self._out(a[1], f"{obj}.execute({idx}, _ctx.ingress_length, _now())", sc, em)
        elif ext == "direct_meter" and m == "read":
            self._out(a[0], "_ctx.meter_color", sc, em)
        else:
            raise UnsupportedError(f"extern method {ext}.{m}", e.loc)

    # ------------------------------------------------------------------ packets

    def packet_in_stmt(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        if sc.pkt is None:
            raise P4Error("packet_in used outside a parser", e.loc)
        data, pos = sc.pkt
        m = e.method
        a = e.args
        pts = self.err_code("PacketTooShort")
        if m == "extract":
            target = a[0]
            assert target is not None
            stack_base: str | None = None
            if (
                isinstance(target, ir.Member)
                and target.name == "next"
                and isinstance(strip(target.base.type), ir.StackType)
            ):
                stack_base = self.tmp("stk")
                em.line(f"{stack_base} = {self.expr(target.base, sc, em)}")
                h = f"_stack_next({stack_base}, {self.err_code('StackOutOfBounds')})"
            else:
                h = self.expr(target, sc, em)
            hv = self.tmp("h")
            em.line(f"{hv} = {h}")
            if len(a) > 1 and a[1] is not None:
                nbits = self.expr(a[1], sc, em)
                em.line(
                    f"{pos} = {hv}._extv({data}, {pos}, {nbits}, {pts}, "
                    f"{self.err_code('HeaderTooShort')}, {self.err_code('ParserInvalidArgument')})"
                )
            else:
                em.line(f"{pos} = {hv}._ext({data}, {pos}, {pts})")
            if stack_base is not None:
                em.line(f"{stack_base}.n += 1")
            self._union_fixup(target, sc, em)
        elif m == "advance":
            em.line(f"{pos} = _advance({data}, {pos}, {self.expr(a[0], sc, em)}, {pts})")  # type: ignore[arg-type]
        elif m in ("lookahead", "length"):
            em.line(self.packet_expr(e, sc, em))
        else:
            raise UnsupportedError(f"packet_in.{m}", e.loc)

    def packet_expr(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> str:
        if sc.pkt is None:
            raise P4Error("packet_in used outside a parser", e.loc)
        data, pos = sc.pkt
        pts = self.err_code("PacketTooShort")
        if e.method == "length":
            return f"len({data})"
        if e.method != "lookahead":
            raise UnsupportedError(f"packet_in.{e.method} in an expression", e.loc)
        t = strip(e.type_args[0] if e.type_args else e.type)
        if isinstance(t, ir.HeaderType):
            h = self.tmp("la")
            em.line(f"{h} = {self.types.cls(t)}()")
            em.line(f"{h}._ext({data}, {pos}, {pts})")
            return h
        if isinstance(t, (ir.BitType, ir.BoolType)):
            return f"_lookahead_bits({data}, {pos}, {scalar_width(t)}, {pts})"
        raise UnsupportedError(f"lookahead of {type(t).__name__}", e.loc)

    def emit_value(self, x: str, t: ir.Type, out: str, em: Emitter) -> None:
        """``packet.emit(x)``: valid headers in order, recursively through structs."""
        t = strip(t)
        if isinstance(t, ir.HeaderType):
            with em.block(f"if {x}._v:"):
                em.line(f"{out} += {x}._pack()")
        elif isinstance(t, (ir.StructType, ir.HeaderUnionType)):
            for f in t.fields:
                self.emit_value(f"{x}.{attr(f.name)}", f.type, out, em)
        elif isinstance(t, ir.StackType):
            v = self.tmp("e")
            with em.block(f"for {v} in {x}.h:"):
                self.emit_value(v, t.elem, out, em)
        else:
            raise UnsupportedError(f"emit of {type(t).__name__}")

    def spare_for(self, t: ir.Type) -> str:
        return self.add_global("spare", None, init=self.types.default(t))

    def add_global(self, prefix: str, obj: object, init: str | None = None) -> str: ...  # type: ignore[empty-body]

    def err_code(self, name: str) -> int: ...  # type: ignore[empty-body]


__all__ = ["ExternMixin", "is_composite"]
