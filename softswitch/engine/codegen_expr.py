"""Expression translation: P4 IR expressions -> Python expression text.

Values are Python ints masked to their width (signed ``int<W>`` as two's-complement
patterns), bools, or objects of the generated composite classes. Everything is inlined
except what needs statements first (table applies, calls with copy-out), which is
*hoisted*: emitted before the statement that uses it, into a temporary. Hoisting keeps P4's
left-to-right order and short-circuit evaluation: when the right operand of ``&&``/``||``
(or a branch of ``?:``) needs statements, they are emitted under an ``if`` on the value
of the left operand (the condition), so a table in a skipped operand is never applied;
and a left operand whose value could change is captured in a temporary first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from softswitch import ir
from softswitch.engine.bits import mask
from softswitch.engine.codegen_context import runtime_globals
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_types import attr, is_composite, scalar_width
from softswitch.errors import P4Error, UnsupportedError

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


#: A scalar of a field list: (value, width, validity condition or None); the width is a
#: number of bits, or for a varbit the Python expression of its current width.
FlatField = tuple[str, int | str, str | None]

#: A field list's scalar of a width known at compile time.
FixedField = tuple[str, int, str | None]


def fixed_fields(fields: Sequence[FlatField]) -> list[FixedField] | None:
    """``fields`` when every width is known at compile time (None when one is a varbit's)."""
    fixed = [(x, w, v) for x, w, v in fields if isinstance(w, int)]
    return fixed if len(fixed) == len(fields) else None


def strip(t: ir.Type) -> ir.Type:
    return ir.strip_newtype(t)


def is_fresh(e: ir.Expr) -> bool:
    """True when ``e`` builds a new composite object (no copy needed)."""
    return isinstance(e, (ir.StructInit, ir.InvalidHeader, ir.Call))


class ExprGen:
    """Expressions: one ``visit_<IR class>`` method per expression node."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    # ------------------------------------------------------------------ entry points

    def expr(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        """Python expression for the value of ``e`` (composites by reference)."""
        meth = getattr(self, "visit_" + type(e).__name__, None)
        if meth is None:
            raise UnsupportedError(f"expression {type(e).__name__}", getattr(e, "loc", None))
        return meth(e, sc, em)

    def const_value(self, e: ir.Expr) -> Any:
        """Value of a compile-time constant expression."""
        sc = Scope(path="", env={}, names=self.ctx.global_names)
        em = Emitter()
        text = self.expr(e, sc, em)
        if em.lines:
            raise P4Error("expected a compile-time constant", e.loc)
        return eval(text, dict(runtime_globals()))  # noqa: S307 - our own generated text

    def value(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        """Like :meth:`expr` but a composite is copied (for ``in`` arguments, initialisers)."""
        x = self.expr(e, sc, em)
        if is_composite(e.type) and not is_fresh(e):
            return f"{x}._copy()"
        return x

    def cond(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        return self.expr(e, sc, em)

    def lvalue(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        """Python assignment target for ``e`` (a variable, field or stack element)."""
        if isinstance(e, ir.VarRef):
            return self._var(e.var, sc, e.loc)
        if isinstance(e, ir.Member):
            return self.expr(e, sc, em)
        if isinstance(e, ir.Index):
            return self.expr(e, sc, em)
        if isinstance(e, PyValue):  # a pinned lvalue
            return e.text
        raise P4Error("expression cannot be assigned to", e.loc)

    # ------------------------------------------------------------------ leaves

    def _var(self, var: ir.Variable, sc: Scope, loc: ir.Loc) -> str:
        try:
            return sc.env[var]
        except KeyError:
            raise P4Error(f"internal: unresolved variable {var.name}", loc) from None

    def visit_Const(self, e: ir.Const, sc: Scope, em: Emitter) -> str:
        t = strip(e.type)
        if isinstance(t, ir.BitType):
            return str(e.value & mask(t.width))
        return str(e.value)

    def visit_BoolConst(self, e: ir.BoolConst, sc: Scope, em: Emitter) -> str:
        return "True" if e.value else "False"

    def visit_StringConst(self, e: ir.StringConst, sc: Scope, em: Emitter) -> str:
        return repr(e.value)

    def visit_VarRef(self, e: ir.VarRef, sc: Scope, em: Emitter) -> str:
        return self._var(e.var, sc, e.loc)

    def visit_EnumMember(self, e: ir.EnumMember, sc: Scope, em: Emitter) -> str:
        t = strip(e.type)
        if isinstance(t, ir.EnumType):
            if t.underlying is not None:
                return str(t.values[e.member])
            return str(t.members.index(e.member))
        raise P4Error(f"enum member {e.member} of a non-enum type", e.loc)

    def visit_ErrorMember(self, e: ir.ErrorMember, sc: Scope, em: Emitter) -> str:
        return str(e.code)

    def visit_MatchKindMember(self, e: ir.MatchKindMember, sc: Scope, em: Emitter) -> str:
        return repr(e.member)

    def visit_DontCare(self, e: ir.DontCare, sc: Scope, em: Emitter) -> str:
        return self.ctx.types.default(e.type)

    def visit_InvalidHeader(self, e: ir.InvalidHeader, sc: Scope, em: Emitter) -> str:
        return self.ctx.types.default(e.type)

    def visit_InstanceRef(self, e: ir.InstanceRef, sc: Scope, em: Emitter) -> str:
        got = sc.names.get(id(e.instance))
        if not isinstance(got, str):
            raise P4Error(f"internal: instance {e.instance.name} is not a value", e.loc)
        return got

    def values_in_order(self, elems: list[ir.Expr], sc: Scope, em: Emitter) -> list[str]:
        """:meth:`value` of each element, left to right: an element whose code has side
        effects (a call) comes after the earlier elements were read into temporaries."""
        parts: list[str] = []
        for x in elems:
            sub = Emitter(em.indent)
            v = self.value(x, sc, sub)
            if sub.lines:
                for i, p in enumerate(parts):
                    if not _is_literal(p):
                        t = self.ctx.tmp("l")
                        em.line(f"{t} = {p}")
                        parts[i] = t
                em.lines += sub.lines
            parts.append(v)
        return parts

    def visit_ListExpr(self, e: ir.ListExpr, sc: Scope, em: Emitter) -> str:
        parts = self.values_in_order(e.elems, sc, em)
        return "(" + "".join(p + ", " for p in parts) + ")"

    def visit_StructInit(self, e: ir.StructInit, sc: Scope, em: Emitter) -> str:
        t = strip(e.type)
        cls = self.ctx.types.cls(t)
        name = self.ctx.tmp("s")
        vals = dict(
            zip(e.fields, self.values_in_order(list(e.fields.values()), sc, em), strict=True)
        )
        em.line(f"{name} = {cls}()")
        for k, v in vals.items():
            if is_composite(e.fields[k].type):
                em.line(f"{name}.{attr(k)}._set({v})")
            else:
                em.line(f"{name}.{attr(k)} = {v}")
        if isinstance(t, ir.HeaderType):
            em.line(f"{name}._v = True")
        return name

    # ------------------------------------------------------------------ structure

    def visit_Member(self, e: ir.Member, sc: Scope, em: Emitter) -> str:
        bt = strip(e.base.type)
        if isinstance(bt, ir.TableApplyResultType):
            hit, an = self.ctx.tables.apply_table(e.base, sc, em)
            if e.name == "hit":
                return hit
            if e.name == "miss":
                return f"(not {hit})"
            if e.name == "action_run":
                return an
            raise P4Error(f"no member {e.name} of a table apply result", e.loc)
        if isinstance(bt, ir.StackType):
            return self._stack_member(e, bt, sc, em)
        if isinstance(bt, (ir.HeaderType, ir.StructType, ir.HeaderUnionType)):
            text = f"{self.expr(e.base, sc, em)}.{attr(e.name)}"
            if sc.obj_cache is not None and is_composite(e.type):
                return sc.cached_object(text)
            return text
        raise UnsupportedError(f"member {e.name} of {type(bt).__name__}", e.loc)

    def _stack_member(self, e: ir.Member, bt: ir.StackType, sc: Scope, em: Emitter) -> str:
        """``size``, ``lastIndex``, ``nextIndex``, ``next`` and ``last`` of a header
        stack (``next``/``last`` out of range in a parser: StackOutOfBounds)."""
        base = self.expr(e.base, sc, em)
        soob = self.ctx.err_code("StackOutOfBounds")
        if e.name == "size":
            return str(bt.size)
        if e.name == "lastIndex":
            return f"(({base}.n - 1) & 0xffffffff)"
        if e.name == "nextIndex":
            return f"{base}.n"
        if e.name == "next":
            if sc.in_parser:
                return f"_stack_next({base}, {soob})"
            return f"_stack_at({base}, {base}.n, {self.ctx.spare_for(bt.elem)})"
        if e.name == "last":
            if sc.in_parser:
                return f"_stack_last({base}, {soob})"
            return f"_stack_at({base}, {base}.n - 1, {self.ctx.spare_for(bt.elem)})"
        raise P4Error(f"no member {e.name} of a header stack", e.loc)

    def visit_Index(self, e: ir.Index, sc: Scope, em: Emitter) -> str:
        bt = strip(e.base.type)
        if not isinstance(bt, ir.StackType):
            raise UnsupportedError("indexing a non-stack value", e.loc)
        base = self.expr(e.base, sc, em)
        if isinstance(e.index, ir.Const) and 0 <= e.index.value < bt.size:
            return f"{base}.h[{e.index.value}]"
        pinned = sc.pins.get(id(e))
        if pinned is not None:  # index evaluated once and bounds-checked (codegen_stmt)
            if sc.pins_checked:
                return f"{base}.h[{pinned}]"
            return f"_stack_at({base}, {pinned}, {self.ctx.spare_for(bt.elem)})"
        idx = self.expr(e.index, sc, em)
        if sc.in_parser:
            return f"_stack_at_parser({base}, {idx}, {self.ctx.err_code('StackOutOfBounds')})"
        return f"_stack_at({base}, {idx}, {self.ctx.spare_for(bt.elem)})"

    def visit_Slice(self, e: ir.Slice, sc: Scope, em: Emitter) -> str:
        base = self.expr(e.base, sc, em)
        m = mask(e.hi - e.lo + 1)
        if e.lo == 0:
            return f"({base} & {m:#x})"
        return f"(({base} >> {e.lo}) & {m:#x})"

    def visit_Mux(self, e: ir.Mux, sc: Scope, em: Emitter) -> str:
        c = self.expr(e.cond, sc, em)
        sub_a, sub_b = Emitter(em.indent + 1), Emitter(em.indent + 1)
        a = self.expr(e.then, sc, sub_a)
        b = self.expr(e.else_, sc, sub_b)
        if not sub_a.lines and not sub_b.lines:
            return f"({a} if {c} else {b})"
        # a branch needs statements: only the chosen branch may run them
        t = self.ctx.tmp("mx")
        with em.block(f"if {c}:"):
            em.lines += sub_a.lines
            em.line(f"{t} = {a}")
        with em.block("else:"):
            em.lines += sub_b.lines
            em.line(f"{t} = {b}")
        return t

    def _short_circuit(self, e: ir.Binary, sc: Scope, em: Emitter) -> str:
        """``&&``/``||``: the right operand's statements run only when it is evaluated."""
        left = self.expr(e.left, sc, em)
        sub = Emitter(em.indent + 1)
        right = self.expr(e.right, sc, sub)
        if not sub.lines:
            return f"({left} {'and' if e.op == '&&' else 'or'} {right})"
        t = self.ctx.tmp("sc")
        em.line(f"{t} = {left}")
        with em.block(f"if {t}:" if e.op == "&&" else f"if not {t}:"):
            em.lines += sub.lines
            em.line(f"{t} = {right}")
        return t

    # ------------------------------------------------------------------ operators

    def visit_Unary(self, e: ir.Unary, sc: Scope, em: Emitter) -> str:
        x = self.expr(e.operand, sc, em)
        t = strip(e.type)
        if e.op == "!":
            return f"(not {x})"
        if isinstance(t, ir.IntLitType):
            return f"({e.op}{x})"
        if not isinstance(t, ir.BitType):
            raise UnsupportedError(f"operator {e.op} on {type(t).__name__}", e.loc)
        m = mask(t.width)
        if e.op == "-":
            return f"((-{x}) & {m:#x})"
        if e.op == "~":
            return f"({x} ^ {m:#x})"
        raise UnsupportedError(f"unary operator {e.op}", e.loc)

    def visit_Binary(self, e: ir.Binary, sc: Scope, em: Emitter) -> str:
        op = e.op
        if op in ("&&", "||"):
            return self._short_circuit(e, sc, em)
        left, right = self._operands(e, sc, em)
        lt = strip(e.left.type)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return _compare(op, left, right, lt)
        if op == "++":
            rw = scalar_width(e.right.type)
            return f"(({left} << {rw}) | {right})"
        rt = strip(e.type)
        if isinstance(rt, ir.IntLitType):
            pyop = {"/": "//"}.get(op, op)
            if op in ("|+|", "|-|"):
                pyop = op[1]
            return f"({left} {pyop} {right})"
        if not isinstance(rt, ir.BitType):
            raise UnsupportedError(f"operator {op} on {type(rt).__name__}", e.loc)
        rconst = e.right.value if isinstance(e.right, ir.Const) else None
        return self._bit_binary(op, left, right, rt, rconst, e.loc)

    def _operands(self, e: ir.Binary, sc: Scope, em: Emitter) -> tuple[str, str]:
        """Both operands; when the right one needs statements, the left one is
        evaluated into a temporary first (its value before the right one's effects)."""
        left = self.expr(e.left, sc, em)
        sub = Emitter(em.indent)
        right = self.expr(e.right, sc, sub)
        if sub.lines:
            if not _is_literal(left):
                t = self.ctx.tmp("l")
                em.line(f"{t} = {left}")
                left = t
            em.lines += sub.lines
        return left, right

    def _bit_binary(
        self, op: str, left: str, right: str, rt: ir.BitType, rconst: int | None, loc: ir.Loc
    ) -> str:
        """An arithmetic, bitwise or shift operation on bit<w>/int<w>, kept in width
        (``rconst``: the right operand when it is a constant)."""
        w, m, signed = rt.width, mask(rt.width), rt.signed
        if op in ("+", "-", "*"):
            return f"(({left} {op} {right}) & {m:#x})"
        if op in ("&", "|", "^"):
            return f"({left} {op} {right})"
        if op in ("/", "%"):
            return _divide(op, left, right, w, signed, rconst)
        if op == "<<":
            if rconst is not None:
                return "0" if rconst >= w else f"(({left} << {rconst}) & {m:#x})"
            t = self.ctx.tmp("sh")
            return f"((({left} << {t}) & {m:#x}) if ({t} := {right}) < {w} else 0)"
        if op == ">>":
            if signed:
                return f"_sshr({left}, {right}, {w})"
            return f"({left} >> {right})"
        if op in ("|+|", "|-|"):
            return self._saturating(op, left, right, rt)
        raise UnsupportedError(f"binary operator {op}", loc)

    def _saturating(self, op: str, left: str, right: str, rt: ir.BitType) -> str:
        """``|+|``/``|-|``: the result clamped to the type's range."""
        w, m = rt.width, mask(rt.width)
        t = self.ctx.tmp("sat")
        if op == "|+|":
            if rt.signed:
                # offset binary: (x ^ sb) is x + sb, so the sum of both is the true sum
                # plus 2**w, in range exactly when it lies in [sb, 3 * sb)
                sb = 1 << (w - 1)
                total = f"({left} ^ {sb:#x}) + ({right} ^ {sb:#x})"
                return (
                    f"(({t} & {m:#x}) if {sb:#x} <= ({t} := {total})"
                    f" <= {3 * sb - 1:#x} else ({sb - 1:#x} if {t} > {sb:#x} else {sb:#x}))"
                )
            return f"({t} if ({t} := {left} + {right}) <= {m:#x} else {m:#x})"
        if rt.signed:
            sb = 1 << (w - 1)
            diff = f"({left} ^ {sb:#x}) - ({right} ^ {sb:#x})"
            return (
                f"(({t} & {m:#x}) if {-sb:#x} <= ({t} := {diff})"
                f" <= {sb - 1:#x} else ({sb - 1:#x} if {t} > 0 else {sb:#x}))"
            )
        return f"({t} if ({t} := {left} - {right}) > 0 else 0)"

    def visit_Cast(self, e: ir.Cast, sc: Scope, em: Emitter) -> str:
        src = strip(e.operand.type)
        dst = strip(e.type)
        if isinstance(e.operand, ir.Const) and isinstance(dst, ir.BitType):
            return str(e.operand.value & mask(dst.width))
        x = self.expr(e.operand, sc, em)
        if isinstance(dst, ir.BoolType):
            return x if isinstance(src, ir.BoolType) else f"({x} != 0)"
        if isinstance(dst, ir.BitType):
            m = mask(dst.width)
            if isinstance(src, ir.BoolType):
                return f"(1 if {x} else 0)"
            if isinstance(src, ir.BitType):
                if src.signed and dst.width > src.width:
                    sb = 1 << (src.width - 1)
                    return f"((({x} ^ {sb:#x}) - {sb:#x}) & {m:#x})"
                if dst.width < src.width:
                    return f"({x} & {m:#x})"
                return x
            return f"({x} & {m:#x})"
        if isinstance(dst, ir.EnumType) and dst.underlying is not None:
            return f"({x} & {mask(dst.underlying.width):#x})"
        return x

    # ------------------------------------------------------------------ calls

    def visit_Call(self, e: ir.Call, sc: Scope, em: Emitter) -> str:
        if isinstance(e.callee, ir.FunctionDecl):
            return self.ctx.calls.call_function(e, sc, em)
        raise UnsupportedError(f"calling {type(e.callee).__name__} in an expression", e.loc)

    def visit_MethodCall(self, e: ir.MethodCall, sc: Scope, em: Emitter) -> str:
        tt = strip(e.target.type)
        if e.method == "isValid":
            base = self.expr(e.target, sc, em)
            if isinstance(tt, ir.HeaderUnionType):
                return f"{base}._valid()"
            return f"{base}._v"
        if e.method == "apply" and isinstance(strip(e.type), ir.TableApplyResultType):
            hit, _ = self.ctx.tables.apply_table(e, sc, em)
            return hit
        if isinstance(tt, ir.ExternType) and tt.name == "packet_in":
            return self.ctx.packets.packet_expr(e, sc, em)
        raise UnsupportedError(f"method {e.method} in an expression", e.loc)

    def visit_PyValue(self, e: PyValue, sc: Scope, em: Emitter) -> str:
        return e.text

    # ------------------------------------------------------------------ field lists

    def flat_fields(
        self, e: ir.Expr, sc: Scope, em: Emitter, valid: str | None = None
    ) -> list[FlatField]:
        """``(value, width, validity condition)`` of every scalar in ``e`` in order —
        the field list of hashes, checksums and digests."""
        t = strip(e.type)
        if isinstance(e, ir.ListExpr):
            out: list[FlatField] = []
            for elem in e.elems:
                out += self.flat_fields(elem, sc, em)
            return out
        if isinstance(t, (ir.HeaderType, ir.StructType)):
            base = self.expr(e, sc, em)
            if isinstance(t, ir.HeaderType):
                valid = f"{base}._v"
            out = []
            for f in t.fields:
                out += self.flat_obj(f"{base}.{attr(f.name)}", f.type, valid)
            return out
        if isinstance(t, (ir.HeaderUnionType, ir.StackType)):
            raise UnsupportedError("a header union or stack in a field list", e.loc)
        x = self.expr(e, sc, em)
        if isinstance(t, ir.BoolType):
            x = f"(1 if {x} else 0)"
        if isinstance(e, ir.Member) and isinstance(strip(e.base.type), ir.HeaderType):
            valid = f"{self.expr(e.base, sc, em)}._v"
        if isinstance(t, ir.VarbitType):
            return self.flat_obj(x, t, valid)
        width = scalar_width(t) if not isinstance(t, ir.IntLitType) else 32
        return [(x, width, valid)]

    def flat_obj(self, x: str, t: ir.Type, valid: str | None) -> list[FlatField]:
        t = strip(t)
        if isinstance(t, ir.HeaderType):
            out: list[FlatField] = []
            for f in t.fields:
                out += self.flat_obj(f"{x}.{attr(f.name)}", f.type, f"{x}._v")
            return out
        if isinstance(t, ir.StructType):
            out = []
            for f in t.fields:
                out += self.flat_obj(f"{x}.{attr(f.name)}", f.type, valid)
            return out
        if isinstance(t, ir.VarbitType):  # its current bits: width known at run time
            return [(f"{x}[1]", f"{x}[0]", valid)]
        if isinstance(t, ir.BoolType):
            return [(f"(1 if {x} else 0)", 1, valid)]
        return [(x, scalar_width(t), valid)]

    def packed_bytes(self, e: ir.Expr, sc: Scope, em: Emitter) -> str:
        """Python expression for the bytes BMv2 hashes for field list ``e`` (fields of
        invalid headers left out, last byte zero-padded on the right)."""
        flat = self.flat_fields(e, sc, em)
        fields = fixed_fields(flat)
        if fields is None:  # a varbit: widths at run time
            return _runtime_pack(flat)
        conds = {v for _, _, v in fields}
        if len(conds) == 1 and None not in conds:  # one header: all or nothing
            (cond,) = conds
            plain: list[FixedField] = [(x, w, None) for x, w, _ in fields]
            return f"({self._fast_pack(plain)} if {cond} else b'')"
        if all(v is None for _, _, v in fields):
            return self._fast_pack(fields)
        return _runtime_pack(fields)

    def packed_int(
        self, e: ir.Expr, sc: Scope, em: Emitter, known: str | None = None
    ) -> tuple[str, str] | None:
        """``(int expression, byte count expression)`` of the bytes :meth:`packed_bytes`
        gives, as one big-endian integer; None when validity varies field by field.
        ``known`` is a condition already known to hold (a header's validity)."""
        fields = fixed_fields(self.flat_fields(e, sc, em))
        if fields is None:
            return None
        conds = {v for _, _, v in fields}
        total = sum(w for _, w, _ in fields)
        nbytes = (total + 7) // 8
        acc = self._pack_int([(x, w) for x, w, _ in fields])
        if conds == {None} or conds == {known}:
            return acc, str(nbytes)
        if len(conds) == 1:
            (cond,) = conds
            return f"({acc} if {cond} else 0)", f"({nbytes} if {cond} else 0)"
        return None

    @staticmethod
    def _pack_int(fields: list[tuple[str, int]]) -> str:
        total = sum(w for _, w in fields)
        if total == 0:
            return "0"
        acc = " | ".join(
            f"({x} << {sh})" if sh else x
            for x, sh in zip((f[0] for f in fields), _shifts([w for _, w in fields]), strict=False)
        )
        pad = -total % 8
        return f"(({acc}) << {pad})" if pad else f"({acc})"

    @staticmethod
    def _fast_pack(fields: list[FixedField]) -> str:
        total = sum(w for _, w, _ in fields)
        if total == 0:
            return "b''"
        acc = " | ".join(
            f"({x} << {sh})" if sh else x
            for x, sh in zip(
                (f[0] for f in fields), _shifts([w for _, w, _ in fields]), strict=False
            )
        )
        pad = -total % 8
        nbytes = (total + pad) // 8
        if pad:
            acc = f"(({acc}) << {pad})"
        return f"({acc}).to_bytes({nbytes}, 'big')"


@dataclasses.dataclass(eq=False)
class PyValue(ir.Expr):
    """A ready Python expression posing as an IR expression (a pinned lvalue, a value
    already computed into a temporary)."""

    text: str = ""

    def __init__(self, type_: ir.Type, text: str) -> None:
        self.type = type_
        self.loc = ir.NOLOC
        self.text = text


def _runtime_pack(fields: Sequence[FlatField]) -> str:
    """``_pack_fields`` call over the fields (those of invalid headers left out)."""
    parts = []
    for x, w, v in fields:
        parts.append(f"({x}, {w})" if v is None else f"(({x}, {w}) if {v} else (0, 0))")
    return "_pack_fields((" + "".join(p + ", " for p in parts) + "))"


def _is_literal(text: str) -> bool:
    return text.isdigit() or text in ("True", "False")


def _shifts(widths: list[int]) -> list[int]:
    out = []
    total = 0
    for w in reversed(widths):
        out.append(total)
        total += w
    return list(reversed(out))


def _divide(op: str, left: str, right: str, w: int, signed: bool, rconst: int | None) -> str:
    """``/``/``%``: signed ones by the runtime; unsigned ones by Python's operators when
    the divisor is a non-zero constant, else by the runtime (division by zero)."""
    if op == "/":
        if signed:
            return f"_sdiv({left}, {right}, {w})"
        return f"({left} // {right})" if rconst else f"_udiv({left}, {right})"
    if signed:
        return f"_smod({left}, {right}, {w})"
    return f"({left} % {right})" if rconst else f"_umod({left}, {right})"


def _compare(op: str, left: str, right: str, lt: ir.Type) -> str:
    """A comparison: composites by their ``_eq``, signed values ordered by flipping the
    sign bit."""
    if op in ("==", "!="):
        if is_composite(lt):
            s = f"{left}._eq({right})"
            return s if op == "==" else f"(not {s})"
        return f"({left} {op} {right})"
    if isinstance(lt, ir.BitType) and lt.signed:
        sb = 1 << (lt.width - 1)
        return f"(({left} ^ {sb:#x}) {op} ({right} ^ {sb:#x}))"
    return f"({left} {op} {right})"
