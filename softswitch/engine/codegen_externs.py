"""Translation of extern calls: the extern functions targets share, extern object methods, the
packet_in/packet_out methods and the built-in header/stack methods.

Facts from BMv2 relied on here (simple_switch primitives and bm_sim):

* ``setValid`` on an invalid header zeroes its fields (``add_header`` resets the header);
  ``setInvalid`` keeps the field values; both adjust the packet-length register.
* ``hash``: ``result = base + (h % max)``, with ``max == 0`` treated as 1; the input bytes
  are the fields packed MSB first (fields of invalid headers skipped, last byte padded
  with zero bits on the right).
* ``verify_checksum`` sets ``checksum_error``; ``update_checksum`` writes only when the
  condition holds.
* v1model's own primitives (``mark_to_drop``, clone, resubmit, recirculate, truncate) are
  compiled by :mod:`softswitch.v1model.primitives`, handed in through the target.
* ``digest``: BMv2's ``generate_digest`` only records the field-list id; the learning
  engine reads the fields' values after the ingress control has finished (last call
  wins). The ingress control therefore notes which call ran and builds the message at
  its end from the fields' final values (computed values are taken at call time, as the
  temporaries p4c would create). Digests outside ingress are never delivered by BMv2.
"""

from __future__ import annotations

import re

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import mask, strip
from softswitch.engine.codegen_stmt import StmtMixin, register_index_base
from softswitch.engine.codegen_types import attr, is_composite, scalar_width
from softswitch.engine.externs import Register
from softswitch.engine.target import TargetSpec
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


# hash algorithms whose function the generated code calls directly
_DIRECT_HASH = {
    "crc32": "_h_crc32",
    "crc16": "_h_crc16",
    "csum16": "_h_csum16",
    "xor16": "_h_xor16",
    "identity": "_h_identity",
}

_SIMPLE_NAME = re.compile(r"^[A-Za-z_][\w.]*$")

# field values that can be read again at the end of ingress: a path of attributes (or a
# bool of one) or a literal
_READ_LATE = re.compile(r"^(\(1 if [A-Za-z_][\w.]* else 0\)|[A-Za-z_][\w.]*|\d+)$")


class ExternMixin(StmtMixin):
    """Extern part of :class:`softswitch.engine.codegen.CodeGen`."""

    log_enabled: bool
    target: TargetSpec

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

    def _hash_of(
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
            packed = self.packed_int(data, sc, em, known)
            if packed is not None:
                value, nbytes = packed
                if with_payload:
                    return f"_csum16_payload({value}, {nbytes}, _ctx.payload)"
                if nbytes.isdigit():  # inline runtime.csum16_int
                    if int(nbytes) & 1:
                        value = f"({value} << 8)"
                    v = self.tmp("cv")
                    return f"(0xffff - (({v} := {value}) % 0xffff or (0xffff if {v} else 0)))"
                return f"_csum16_int({value}, {nbytes})"
        raw = self.packed_bytes(data, sc, em)
        if with_payload:
            raw = f"({raw} + _ctx.payload)"
        if name in _DIRECT_HASH:
            return f"{_DIRECT_HASH[name]}({raw})"
        return f"_hash_value({self._algo(algo, sc, em)}, {raw}, rng=_rng)"

    # ------------------------------------------------------------------ functions

    def extern_call(self, e: ir.Call, sc: Scope, em: Emitter) -> None:
        name = e.callee.name
        a = e.args
        x = lambda i: self.expr(a[i], sc, em)  # noqa: E731
        primitive = self.target.primitives.get(name)
        if primitive is not None:
            primitive(self, e, sc, em)
        elif name == "verify":
            if not sc.in_parser:
                raise P4Error("verify() is only allowed in a parser", e.loc)
            with em.block(f"if not {x(0)}:"):
                em.line(f"raise _ParserReject({x(1)})")
        elif name == "hash":
            out_t = strip(a[0].type) if a[0] is not None else ir.BitType(32)
            width = scalar_width(out_t)
            h = self._hash_of(a[1], a[3], False, sc, em)  # type: ignore[arg-type]
            base, max_ = x(2), x(4)
            if max_.isdigit() and base.isdigit():  # the usual case: constants
                if int(max_) > 0:
                    b = f"{base} + " if int(base) else ""
                    val = f"(({b}{h} % {max_}) & {mask(width):#x})"
                else:
                    val = str(int(base) & mask(width))
            else:
                val = f"_hash_reduce({h}, {base}, {max_}, {width})"
            self._out(a[0], val, sc, em)
        elif name == "random":
            lo, hi = x(1), x(2)
            self._out(a[0], f"_random_between({lo}, {hi})", sc, em)
        elif name in ("verify_checksum", "verify_checksum_with_payload"):
            cond = x(0)
            with em.block(f"if {cond}:"):
                h = self._hash_of(a[3], a[1], name.endswith("payload"), sc, em, cond)  # type: ignore[arg-type]
                w = scalar_width(a[2].type)  # type: ignore[union-attr]
                with em.block(f"if ({h} & {mask(w):#x}) != {x(2)}:"):
                    em.line("_ctx.checksum_error = 1")
        elif name in ("update_checksum", "update_checksum_with_payload"):
            cond = x(0)
            with em.block(f"if {cond}:"):
                h = self._hash_of(a[3], a[1], name.endswith("payload"), sc, em, cond)  # type: ignore[arg-type]
                w = scalar_width(a[2].type)  # type: ignore[union-attr]
                self._out(a[2], f"({h} & {mask(w):#x})", sc, em)
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
        data = _unwrap_struct_init(data)
        fields = self.flat_fields(data, sc, em)
        if sc.digest_sites is None:  # not in the ingress control itself: call-time values
            vals = "".join(f"{v}, " for v, _, _ in fields)
            em.line(f"_ctx.digest = ({name!r}, ({vals}))")
            return
        late = []
        for v, _, _ in fields:
            if not _READ_LATE.match(v):
                t = self.tmp("dv")
                em.line(f"{t} = {v}")
                v = t
            late.append(v)
        sc.digest_sites.append((name, "".join(f"{v}, " for v in late)))
        em.line(f"_dg = {len(sc.digest_sites)}")

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
            nbytes = (tt.bit_width + 7) // 8
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
            if m not in ("read", "write"):
                raise UnsupportedError(f"register.{m}", e.loc)
            self._register_access(obj, e, sc, em)
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

    def _register_access(self, obj: str, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        """``r.read(dst, i)`` / ``r.write(i, v)`` inlined on the register's value list.

        As BMv2's ``register_read``/``register_write``: an index out of range leaves the
        destination unchanged, or writes nothing."""
        reg = self.ns.get(obj)
        a = e.args
        if not isinstance(reg, Register):  # not a known instance: bounds checked at run time
            if e.method == "read":
                t = self.tmp("ri")
                em.line(f"{t} = {self.expr(a[1], sc, em)}")  # type: ignore[arg-type]
                with em.block(f"if 0 <= {t} < {obj}.size:"):
                    self._out(a[0], f"{obj}.values[{t}]", sc, em)
            else:
                em.line(f"{obj}.write({self.expr(a[0], sc, em)}, {self.expr(a[1], sc, em)})")  # type: ignore[arg-type]
            return
        run = sc.reg_run
        if run is not None and obj in run[1]:
            base = register_index_base(a[1] if e.method == "read" else a[0])  # type: ignore[arg-type]
            if base is not None and base[0] is run[0]:
                # in a register run: the run's single check covers this index
                var, c = base
                vals = run[1][obj]
                at = f"{vals}[{sc.env[var]} + {c}]" if c else f"{vals}[{sc.env[var]}]"
                if e.method == "read":
                    self._out(a[0], at, sc, em)
                else:
                    val = self.expr(a[1], sc, em)  # type: ignore[arg-type]
                    if not isinstance(strip(a[1].type), ir.BitType):  # type: ignore[union-attr]
                        val = f"(({val}) & {reg.mask:#x})"
                    em.line(f"{at} = {val}")
                return
        idx = self.expr(a[1] if e.method == "read" else a[0], sc, em)  # type: ignore[arg-type]
        if e.method == "write":
            val = self.expr(a[1], sc, em)  # type: ignore[arg-type]
            if not isinstance(strip(a[1].type), ir.BitType):  # type: ignore[union-attr]
                val = f"(({val}) & {reg.mask:#x})"
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
            self._out(a[0], f"{obj}.values[{idx}]", sc, em)
        else:
            em.line(f"{obj}.values[{idx}] = {val}")
        em.indent = outer

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
            if target is None or isinstance(target, ir.DontCare):  # extract<T>(_): read and drop
                if not e.type_args:
                    raise P4Error("extract into _ needs a type argument", e.loc)
                target = ir.DontCare(e.type_args[0], e.loc)
                hv = self.tmp("h")
                em.line(f"{hv} = {self.types.cls(strip(e.type_args[0]))}()")
                self._extract_into(hv, target, a, data, pos, pts, sc, em)
                return
            stack_base: str | None = None
            union: str | None = None
            if (
                isinstance(target, ir.Member)
                and target.name == "next"
                and isinstance(strip(target.base.type), ir.StackType)
            ):
                stack_base = self.tmp("stk")
                em.line(f"{stack_base} = {self.expr(target.base, sc, em)}")
                h = f"_stack_next({stack_base}, {self.err_code('StackOutOfBounds')})"
            elif (
                isinstance(target, ir.Member)
                and isinstance(target.base, ir.Member)
                and target.base.name == "next"
                and isinstance(strip(target.base.base.type), ir.StackType)
            ):  # stack_of_unions.next.member: the union at nextIndex; the stack advances
                stack_base = self.tmp("stk")
                union = self.tmp("u")
                em.line(f"{stack_base} = {self.expr(target.base.base, sc, em)}")
                em.line(f"{union} = _stack_next({stack_base}, {self.err_code('StackOutOfBounds')})")
                h = f"{union}.{attr(target.name)}"
            else:
                h = self.expr(target, sc, em)
            hv = h if sc.is_stable_object(h) else self.tmp("h")
            if hv != h:
                em.line(f"{hv} = {h}")
            self._extract_into(hv, target, a, data, pos, pts, sc, em)
            if stack_base is not None:
                em.line(f"{stack_base}.n += 1")
            if self.trace:
                em.line(f"_tr.extract({expr_text(target)!r})")
            if union is not None:
                assert isinstance(target, ir.Member)
                with em.block(f"if {hv}._v:"):
                    em.line(f"{union}._only({attr(target.name)!r})")
            else:
                self._union_fixup(target, sc, em)
        elif m == "advance":
            em.line(f"{pos} = _advance({data}, {pos}, {self.expr(a[0], sc, em)}, {pts})")  # type: ignore[arg-type]
        elif m in ("lookahead", "length"):
            em.line(self.packet_expr(e, sc, em))
        else:
            raise UnsupportedError(f"packet_in.{m}", e.loc)

    def _extract_into(
        self,
        hv: str,
        target: ir.Expr,
        a: list[ir.Expr | None],
        data: str,
        pos: str,
        pts: int,
        sc: Scope,
        em: Emitter,
    ) -> None:
        """Code that extracts into header object ``hv`` (of ``target``'s type)."""
        ht = strip(target.type)
        if (len(a) < 2 or a[1] is None) and self.types.fixed_size(ht) is not None:
            assert isinstance(ht, ir.HeaderType)
            for line in self.types.inline_extract(ht, hv, data, pos, pts, self.tmp("v")):
                em.line(line)
        elif len(a) > 1 and a[1] is not None:
            nbits = self.expr(a[1], sc, em)
            em.line(
                f"{pos} = {hv}._extv({data}, {pos}, {nbits}, {pts}, "
                f"{self.err_code('HeaderTooShort')}, {self.err_code('ParserInvalidArgument')})"
            )
        else:
            em.line(f"{pos} = {hv}._ext({data}, {pos}, {pts})")

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
        if isinstance(t, ir.StructType):  # fixed-width struct: its fields in order, in place
            obj = self.tmp("la")
            bits = self.tmp("v")
            fields = self._flat_obj(obj, t, None)
            if any(not isinstance(w, int) for _, w, _ in fields):
                raise UnsupportedError("lookahead of a struct with a varbit field", e.loc)
            total = sum(w for _, w, _ in fields)
            em.line(f"{obj} = {self.types.cls(t)}()")
            em.line(f"{bits} = _lookahead_bits({data}, {pos}, {total}, {pts})")
            shift = total
            for x, w, _ in fields:
                shift -= w
                value = f"({bits} >> {shift}) & {(1 << w) - 1}"
                if x.startswith("(1 if "):  # a bool field: _flat_obj wraps it
                    x = x[len("(1 if ") : -len(" else 0)")]
                    value = f"bool({value})"
                em.line(f"{x} = {value}")
            return obj
        raise UnsupportedError(f"lookahead of {type(t).__name__}", e.loc)

    def emit_value(self, x: str, t: ir.Type, out: str, em: Emitter) -> None:
        """``packet.emit(x)``: valid headers in order, recursively through structs."""
        t = strip(t)
        if isinstance(t, ir.HeaderType):
            with em.block(f"if {x}._v:"):
                if self.types.fixed_size(t) is not None:
                    em.line(f"{out} += {self.types.pack_expr(t, x)}")
                else:
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

    ns: dict[str, object]

    def err_code(self, name: str) -> int: ...  # type: ignore[empty-body]


def expr_text(e: ir.Expr) -> str:
    """P4-like text of an lvalue (``hdr.ipv4``, ``hdr.stack.next``) for traces."""
    if isinstance(e, ir.Member):
        return f"{expr_text(e.base)}.{e.name}"
    if isinstance(e, ir.Index):
        idx = str(e.index.value) if isinstance(e.index, ir.Const) else "i"
        return f"{expr_text(e.base)}[{idx}]"
    if isinstance(e, ir.VarRef):
        return e.var.name
    return type(e).__name__


def _unwrap_struct_init(e: ir.Expr) -> ir.Expr:
    """``{a, b}`` typed as a struct: its component expressions (p4c builds the field list
    from them, so the fields themselves are read, not a copy)."""
    if isinstance(e, ir.StructInit):
        t = strip(e.type)
        order = [f.name for f in getattr(t, "fields", [])]
        if set(order) == set(e.fields):
            elems = [_unwrap_struct_init(e.fields[n]) for n in order]
            return ir.ListExpr(ir.TupleType(tuple(x.type for x in elems)), e.loc, elems)
    return e


__all__ = ["ExternMixin", "is_composite"]
