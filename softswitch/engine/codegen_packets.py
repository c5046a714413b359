"""Packets: ``packet_in`` (extract, advance, lookahead, length) in parsers and
``packet_out.emit`` in deparsers, as code on the frame's bytes and the header classes'
extract/pack methods (:mod:`softswitch.engine.codegen_types`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import fixed_fields, strip
from softswitch.engine.codegen_types import attr, scalar_width
from softswitch.engine.codegen_walk import given
from softswitch.errors import P4Error, UnsupportedError

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


class PacketGen:
    """The ``packet_in`` and ``packet_out`` methods."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    def packet_in_stmt(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        """A ``packet_in`` method call statement: ``in_<method>``."""
        if sc.pkt is None:
            raise P4Error("packet_in used outside a parser", e.loc)
        meth = getattr(self, "in_" + e.method, None)
        if meth is None:
            raise UnsupportedError(f"packet_in.{e.method}", e.loc)
        meth(e, sc, em)

    def in_extract(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        assert sc.pkt is not None
        data, pos = sc.pkt
        a = e.args
        pts = self.ctx.err_code("PacketTooShort")
        target = a[0]
        if target is None or isinstance(target, ir.DontCare):  # extract<T>(_): read and drop
            if not e.type_args:
                raise P4Error("extract into _ needs a type argument", e.loc)
            target = ir.DontCare(e.type_args[0], e.loc)
            hv = self.ctx.tmp("h")
            em.line(f"{hv} = {self.ctx.types.cls(strip(e.type_args[0]))}()")
            self._extract_into(hv, target, a, data, pos, pts, sc, em)
            return
        stack_base: str | None = None
        union: str | None = None
        if (
            isinstance(target, ir.Member)
            and target.name == "next"
            and isinstance(strip(target.base.type), ir.StackType)
        ):
            stack_base = self.ctx.tmp("stk")
            em.line(f"{stack_base} = {self.ctx.exprs.expr(target.base, sc, em)}")
            h = f"_stack_next({stack_base}, {self.ctx.err_code('StackOutOfBounds')})"
        elif (
            isinstance(target, ir.Member)
            and isinstance(target.base, ir.Member)
            and target.base.name == "next"
            and isinstance(strip(target.base.base.type), ir.StackType)
        ):  # stack_of_unions.next.member: the union at nextIndex; the stack advances
            stack_base = self.ctx.tmp("stk")
            union = self.ctx.tmp("u")
            em.line(f"{stack_base} = {self.ctx.exprs.expr(target.base.base, sc, em)}")
            em.line(f"{union} = _stack_next({stack_base}, {self.ctx.err_code('StackOutOfBounds')})")
            h = f"{union}.{attr(target.name)}"
        else:
            h = self.ctx.exprs.expr(target, sc, em)
        hv = h if sc.is_stable_object(h) else self.ctx.tmp("h")
        if hv != h:
            em.line(f"{hv} = {h}")
        self._extract_into(hv, target, a, data, pos, pts, sc, em)
        if stack_base is not None:
            em.line(f"{stack_base}.n += 1")
        if self.ctx.trace:
            em.line(f"_tr.extract({expr_text(target)!r})")
        if union is not None:
            assert isinstance(target, ir.Member)
            with em.block(f"if {hv}._v:"):
                em.line(f"{union}._only({attr(target.name)!r})")
        else:
            self.ctx.stmts.union_fixup(target, sc, em)

    def in_advance(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        assert sc.pkt is not None
        data, pos = sc.pkt
        pts = self.ctx.err_code("PacketTooShort")
        nbits = self.ctx.exprs.expr(given(e.args[0]), sc, em)
        em.line(f"{pos} = _advance({data}, {pos}, {nbits}, {pts})")

    def in_lookahead(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> None:
        em.line(self.packet_expr(e, sc, em))

    in_length = in_lookahead

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
        if (len(a) < 2 or a[1] is None) and self.ctx.types.fixed_size(ht) is not None:
            assert isinstance(ht, ir.HeaderType)
            for line in self.ctx.types.inline_extract(ht, hv, data, pos, pts, self.ctx.tmp("v")):
                em.line(line)
        elif len(a) > 1 and a[1] is not None:
            nbits = self.ctx.exprs.expr(a[1], sc, em)
            too_short = self.ctx.err_code("HeaderTooShort")
            invalid = self.ctx.err_code("ParserInvalidArgument")
            em.line(f"{pos} = {hv}._extv({data}, {pos}, {nbits}, {pts}, {too_short}, {invalid})")
        else:
            em.line(f"{pos} = {hv}._ext({data}, {pos}, {pts})")

    def packet_expr(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> str:
        if sc.pkt is None:
            raise P4Error("packet_in used outside a parser", e.loc)
        data, pos = sc.pkt
        pts = self.ctx.err_code("PacketTooShort")
        if e.method == "length":
            return f"len({data})"
        if e.method != "lookahead":
            raise UnsupportedError(f"packet_in.{e.method} in an expression", e.loc)
        t = strip(e.type_args[0] if e.type_args else e.type)
        if isinstance(t, ir.HeaderType):
            h = self.ctx.tmp("la")
            em.line(f"{h} = {self.ctx.types.cls(t)}()")
            em.line(f"{h}._ext({data}, {pos}, {pts})")
            return h
        if isinstance(t, (ir.BitType, ir.BoolType)):
            return f"_lookahead_bits({data}, {pos}, {scalar_width(t)}, {pts})"
        if isinstance(t, ir.StructType):  # fixed-width struct: its fields in order, in place
            obj = self.ctx.tmp("la")
            bits = self.ctx.tmp("v")
            fields = fixed_fields(self.ctx.exprs.flat_obj(obj, t, None))
            if fields is None:
                raise UnsupportedError("lookahead of a struct with a varbit field", e.loc)
            total = sum(w for _, w, _ in fields)
            em.line(f"{obj} = {self.ctx.types.cls(t)}()")
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
        """``packet.emit(x)``: valid headers in order, recursively through structs
        (``emit_<type class>``)."""
        t = strip(t)
        meth = getattr(self, "emit_" + type(t).__name__, None)
        if meth is None:
            raise UnsupportedError(f"emit of {type(t).__name__}")
        meth(x, t, out, em)

    def emit_HeaderType(self, x: str, t: ir.HeaderType, out: str, em: Emitter) -> None:
        with em.block(f"if {x}._v:"):
            if self.ctx.types.fixed_size(t) is not None:
                em.line(f"{out} += {self.ctx.types.pack_expr(t, x)}")
            else:
                em.line(f"{out} += {x}._pack()")

    def emit_StructType(
        self, x: str, t: ir.StructType | ir.HeaderUnionType, out: str, em: Emitter
    ) -> None:
        for f in t.fields:
            self.emit_value(f"{x}.{attr(f.name)}", f.type, out, em)

    emit_HeaderUnionType = emit_StructType

    def emit_StackType(self, x: str, t: ir.StackType, out: str, em: Emitter) -> None:
        v = self.ctx.tmp("e")
        with em.block(f"for {v} in {x}.h:"):
            self.emit_value(v, t.elem, out, em)


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
