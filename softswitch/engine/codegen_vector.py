"""Whole-payload register runs: unrolled per-element code executed as numpy array operations.

P4 has no loops, so a program that sums a packet's payload into registers writes the same
statements once per element (``netreduce.p4``'s ``NR_FOR_EACH_ELEM``): element *j* reads
``r[base + c + j]`` and field ``e<d + j>`` of one header. Executed statement by statement,
that costs the Python target about a microsecond per element, so a 256-element packet cost
five times a 32-element one. Here such a sequence is recognised inside a register run
(:meth:`StmtGen._emit_register_run`, whose one bounds check already covers every index)
and executed once over all elements: the header's fields are one ``int64`` array
(:func:`softswitch.engine.codegen_types.vector_header_width`), register cells a list slice.

A sequence qualifies when it is ``K >= MIN_ELEMENTS`` repetitions of a template of at most
``MAX_TEMPLATE`` statements that differ only in the register index constant (``+ j``) and
the header field (``+ j``), and when the repetitions cannot see each other: every access of
one register (and of one vector header) in the template uses the same offset, every local
the template assigns is assigned before it is read (its value after the run is that of the
last element), and a local written only as ``if (cond) { v = constant; }`` is never read
(a flag: set when any element sets it). Expressions are constants, locals, header fields,
casts and the operators below on ``bit<W>``/``int<W>`` with ``W <= 32`` (values are the
two's-complement bit patterns, as everywhere in the engine). Anything else is emitted
element by element as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from softswitch import ir
from softswitch.engine.bits import mask
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_types import attr, vector_field_index
from softswitch.engine.codegen_walk import given, register_index_base
from softswitch.engine.externs import Register
from softswitch.ir_walk import walk

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext

MIN_ELEMENTS = 128  # repetitions that pay for the array set-up (at 32 and 64 they do not)
MAX_TEMPLATE = 8  # statements per element
_ARITH = ("+", "-", "&", "|", "^", "|+|", "|-|")
_COMPARE = ("==", "!=", "<", "<=", ">", ">=")


class _NotVector(Exception):
    """The statements cannot run as array operations (emit them one by one)."""


def _type_key(t: ir.Type) -> tuple[Any, ...]:
    t = ir.strip_newtype(t)
    if isinstance(t, ir.BitType):
        return ("b", t.width, t.signed)
    if isinstance(t, ir.BoolType):
        return ("bool",)
    raise _NotVector


class _Canon:
    """Canonical form of a statement for element ``j``: equal for every element of a run."""

    def __init__(
        self,
        base_var: ir.Variable,
        field_pos: Callable[[ir.Member], int | None],
        reg_of: Callable[[ir.MethodCall], str | None],
    ) -> None:
        self.base_var = base_var
        self.field_pos = field_pos
        self.reg_of = reg_of

    def stmt(self, s: ir.Stmt, j: int) -> tuple[Any, ...]:
        if isinstance(s, ir.Assign):
            return ("A", self.expr(s.lhs, j), self.expr(s.rhs, j))
        if isinstance(s, ir.If):
            return (
                "I",
                self.expr(s.cond, j),
                self.stmt(s.then, j),
                None if s.else_ is None else self.stmt(s.else_, j),
            )
        if isinstance(s, ir.Block):
            return ("K", tuple(self.stmt(x, j) for x in s.stmts))
        if isinstance(s, ir.CallStmt) and isinstance(s.call, ir.MethodCall):
            call = s.call
            reg = self.reg_of(call)
            if reg is None or call.method not in ("read", "write") or None in call.args:
                raise _NotVector
            idx_arg = call.args[1] if call.method == "read" else call.args[0]
            base = register_index_base(idx_arg)
            if base is None or base[0] is not self.base_var:
                raise _NotVector
            val_arg = call.args[0] if call.method == "read" else call.args[1]
            return ("R", call.method, reg, base[1] - j, self.expr(given(val_arg), j))
        raise _NotVector

    def expr(self, e: ir.Expr, j: int) -> tuple[Any, ...]:
        if isinstance(e, ir.Const):
            return ("C", e.value, _type_key(e.type))
        if isinstance(e, ir.BoolConst):
            return ("C", e.value, ("bool",))
        if isinstance(e, ir.VarRef):
            return ("V", e.var.uid, _type_key(e.type))
        if isinstance(e, ir.Member):
            pos = self.field_pos(e)
            if pos is not None:
                return (
                    "F",
                    self.expr(e.base, j) if not _is_path(e.base) else _path(e.base),
                    pos - j,
                )
            if not _is_path(e):
                raise _NotVector
            return ("M", _path(e), _type_key(e.type))
        if isinstance(e, ir.Binary):
            return ("B", e.op, _type_key(e.type), self.expr(e.left, j), self.expr(e.right, j))
        if isinstance(e, ir.Unary):
            return ("U", e.op, _type_key(e.type), self.expr(e.operand, j))
        if isinstance(e, ir.Cast):
            return ("X", _type_key(e.type), _type_key(e.operand.type), self.expr(e.operand, j))
        raise _NotVector


def _is_path(e: ir.Expr) -> bool:
    while isinstance(e, ir.Member):
        e = e.base
    return isinstance(e, ir.VarRef)


def _path(e: ir.Expr) -> tuple[Any, ...]:
    parts: list[Any] = []
    while isinstance(e, ir.Member):
        parts.append(e.name)
        e = e.base
    assert isinstance(e, ir.VarRef)
    parts.append(e.var.uid)
    return tuple(reversed(parts))


class VectorGen:
    """Finds whole-payload runs in a register run's fast path and emits them as arrays."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    def run_stmts(self, stmts: list[ir.Stmt], sc: Scope, em: Emitter) -> None:
        """The statements of a register run's fast path, element-wise sequences as arrays."""
        assert sc.reg_run is not None
        canon = _Canon(sc.reg_run[0], _field_position, lambda c: self.register_of(c, sc))
        i = 0
        while i < len(stmts):
            found = self._find_run(stmts, i, canon)
            if found is None:
                self.ctx.stmts.stmt(stmts[i], sc, em)
                i += 1
                continue
            length, count = found
            try:
                sub = Emitter(em.indent)
                _VectorEmitter(self, sc, sub, count).emit(stmts[i : i + length])
            except _NotVector:
                self.ctx.stmts.stmt(stmts[i], sc, em)
                i += 1
                continue
            em.lines += sub.lines
            i += length * count

    def register_of(self, call: ir.MethodCall, sc: Scope) -> str | None:
        tt = ir.strip_newtype(call.target.type)
        if not (isinstance(tt, ir.ExternType) and tt.name == "register"):
            return None
        if not isinstance(call.target, ir.InstanceRef):
            return None
        obj = sc.names.get(id(call.target.instance))
        if not isinstance(obj, str) or not isinstance(self.ctx.ns.get(obj), Register):
            return None
        assert sc.reg_run is not None
        return obj if obj in sc.reg_run[1] else None

    @staticmethod
    def _find_run(stmts: list[ir.Stmt], start: int, canon: _Canon) -> tuple[int, int] | None:
        """``(template length, repetitions)`` of the longest element-wise run at ``start``."""
        best: tuple[int, int] | None = None
        for length in range(1, MAX_TEMPLATE + 1):
            if start + length * MIN_ELEMENTS > len(stmts):
                break
            try:
                first = tuple(canon.stmt(s, 0) for s in stmts[start : start + length])
            except _NotVector:
                continue
            count = 1
            while start + (count + 1) * length <= len(stmts):
                lo = start + count * length
                try:
                    group = tuple(canon.stmt(s, count) for s in stmts[lo : lo + length])
                except _NotVector:
                    break
                if group != first:
                    break
                count += 1
            if count >= MIN_ELEMENTS and (best is None or length * count > best[0] * best[1]):
                best = (length, count)
        return best


def _field_position(e: ir.Member) -> int | None:
    """Index of field ``e`` in its header when the header is held as one array."""
    t = ir.strip_newtype(e.base.type)
    if not isinstance(t, ir.HeaderType):
        return None
    return vector_field_index(t, e.name)


class _VectorEmitter:
    """Emits one template (element 0's statements) as array code over ``count`` elements."""

    def __init__(self, gen: VectorGen, sc: Scope, em: Emitter, count: int) -> None:
        self.gen = gen
        self.sc = sc
        self.em = em
        self.count = count
        assert sc.reg_run is not None
        self.base = sc.env[sc.reg_run[0]]
        self.lists = sc.reg_run[1]
        self.vec: dict[ir.Variable, str] = {}  # locals assigned in the template
        self.flags: set[ir.Variable] = set()
        self.written: set[ir.Variable] = set()
        self.reg_offset: dict[str, int] = {}
        self.hdr_offset: dict[tuple[Any, ...], int] = {}

    # -- analysis -----------------------------------------------------------------------

    def _check(self, template: list[ir.Stmt]) -> None:
        flag_writes: set[ir.Variable] = set()
        written: set[ir.Variable] = set()
        for s in template:
            self._collect_writes(s, flag_writes, written)
        if flag_writes & written:
            raise _NotVector
        self.flags = flag_writes
        self.written = written
        assigned: set[ir.Variable] = set()
        for s in template:
            self._scan(s, assigned, flag_writes)

    def _collect_writes(
        self, s: ir.Stmt, flag_writes: set[ir.Variable], written: set[ir.Variable]
    ) -> None:
        """The flags the template's ``if``s set (any other ``if`` is element-dependent
        control flow: not a vector) and the variables it assigns or reads registers
        into."""
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._collect_writes(x, flag_writes, written)
        elif isinstance(s, ir.If):
            targets = self._flag_targets(s)
            if not targets:
                raise _NotVector  # element-dependent control flow
            flag_writes.update(targets)
        elif isinstance(s, ir.Assign) and isinstance(s.lhs, ir.VarRef):
            written.add(s.lhs.var)
        elif (
            isinstance(s, ir.CallStmt)
            and isinstance(s.call, ir.MethodCall)
            and s.call.method == "read"
            and isinstance(s.call.args[0], ir.VarRef)
        ):
            written.add(s.call.args[0].var)

    @staticmethod
    def _flag_assign(s: ir.If) -> tuple[ir.VarRef, ir.Expr] | None:
        """(target, constant) of an ``if (c) flag = constant;`` (the only ``if`` allowed)."""
        body = s.then
        if isinstance(body, ir.Block) and len(body.stmts) == 1:
            body = body.stmts[0]
        if (
            s.else_ is None
            and isinstance(body, ir.Assign)
            and isinstance(body.lhs, ir.VarRef)
            and isinstance(body.rhs, (ir.Const, ir.BoolConst))
        ):
            return body.lhs, body.rhs
        return None

    def _flag_targets(self, s: ir.If) -> list[ir.Variable]:
        flag = self._flag_assign(s)
        return [flag[0].var] if flag is not None else []

    def _scan(self, s: ir.Stmt, assigned: set[ir.Variable], flags: set[ir.Variable]) -> None:
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._scan(x, assigned, flags)
            return
        if isinstance(s, ir.If):
            self._reads(s.cond, assigned, flags)
            flag = self._flag_assign(s)
            if flag is None:
                raise _NotVector  # element-dependent control flow
            self._reads(flag[1], assigned, flags)
            return
        if isinstance(s, ir.Assign):
            self._reads(s.rhs, assigned, flags)
            self._target(s.lhs, assigned, flags)
            return
        if isinstance(s, ir.CallStmt) and isinstance(s.call, ir.MethodCall):
            call = s.call
            reg = self.gen.register_of(call, self.sc)
            assert reg is not None
            idx = call.args[1] if call.method == "read" else call.args[0]
            base = register_index_base(idx)
            assert base is not None
            if self.reg_offset.setdefault(reg, base[1]) != base[1]:
                raise _NotVector  # elements would see each other's cells
            if call.method == "read":
                self._target(given(call.args[0]), assigned, flags)
            else:
                self._reads(given(call.args[1]), assigned, flags)
            return
        raise _NotVector

    def _target(self, e: ir.Expr, assigned: set[ir.Variable], flags: set[ir.Variable]) -> None:
        if isinstance(e, ir.VarRef):
            t = ir.strip_newtype(e.var.type)
            if not isinstance(t, ir.BitType) or t.width > 32:
                raise _NotVector
            assigned.add(e.var)
            if e.var not in self.vec:
                self.vec[e.var] = self.gen.ctx.tmp("vv")
            return
        if isinstance(e, ir.Member) and _field_position(e) is not None:
            self._header(e)
            return
        raise _NotVector

    def _reads(self, e: ir.Expr, assigned: set[ir.Variable], flags: set[ir.Variable]) -> None:
        for n in walk(e):
            if isinstance(n, ir.VarRef):
                if n.var in flags:
                    raise _NotVector  # a flag must not be read inside the run
                if n.var in self.written and n.var not in assigned:
                    raise _NotVector  # read before written: the previous element's value
            elif isinstance(n, ir.Member) and _field_position(n) is not None:
                self._header(n)
            elif isinstance(n, (ir.Call, ir.MethodCall, ir.Mux, ir.Index, ir.Slice)):
                raise _NotVector

    def _header(self, e: ir.Member) -> None:
        if not _is_path(e.base):
            raise _NotVector
        key = _path(e.base)
        pos = _field_position(e)
        assert pos is not None
        t = ir.strip_newtype(e.base.type)
        assert isinstance(t, ir.HeaderType)
        if pos + self.count > len(t.fields):
            raise _NotVector
        if self.hdr_offset.setdefault(key, pos) != pos:
            raise _NotVector

    # -- emission -----------------------------------------------------------------------

    def emit(self, template: list[ir.Stmt]) -> None:
        # locals the template reads but does not write must not be vector names yet
        self._check(template)
        for s in template:
            self._stmt(s)
        for var, name in self.vec.items():
            self.em.line(f"{self.sc.env[var]} = _vec_last({name})")

    def _stmt(self, s: ir.Stmt) -> None:
        em = self.em
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._stmt(x)
            return
        if isinstance(s, ir.If):
            flag = self._flag_assign(s)
            assert flag is not None  # _check accepted the template
            target, rhs = flag
            cond, vector = self._expr(s.cond)
            with em.block(f"if _vec_any({cond}):" if vector else f"if {cond}:"):
                value = self.gen.ctx.exprs.expr(rhs, self.sc, em)
                em.line(f"{self.sc.env[target.var]} = {value}")
            return
        if isinstance(s, ir.Assign):
            val, _ = self._expr(s.rhs)
            self._store(s.lhs, val)
            return
        assert isinstance(s, ir.CallStmt) and isinstance(s.call, ir.MethodCall)
        call = s.call
        reg = self.gen.register_of(call, self.sc)
        assert reg is not None
        cells = self._cells(reg)
        if call.method == "read":
            self._store(given(call.args[0]), f"_vec_array({cells})")
        else:
            value_arg = given(call.args[1])
            val, _ = self._expr(value_arg)
            rt = ir.strip_newtype(value_arg.type)
            if not isinstance(rt, ir.BitType):
                raise _NotVector
            em.line(f"{cells} = _vec_list({val}, {self.count})")

    def _cells(self, reg: str) -> str:
        lo = self.reg_offset[reg]
        start = f"{self.base} + {lo}" if lo else self.base
        return f"{self.lists[reg]}[{start}:{self.base} + {lo + self.count}]"

    def _store(self, lhs: ir.Expr, val: str) -> None:
        if isinstance(lhs, ir.VarRef):
            self.em.line(f"{self.vec[lhs.var]} = {val}")
            return
        assert isinstance(lhs, ir.Member)
        h = self.gen.ctx.exprs.expr(lhs.base, self.sc, self.em)
        lo = _field_position(lhs)
        assert lo is not None  # _check accepted the template
        self.em.line(f"{h}._a[{lo}:{lo + self.count}] = {val}")

    def _expr(self, e: ir.Expr) -> tuple[str, bool]:
        """Python text of ``e`` over all elements and whether it is an array."""
        if isinstance(e, ir.VarRef) and e.var in self.vec:
            return self.vec[e.var], True
        if isinstance(e, ir.Member) and (lo := _field_position(e)) is not None:
            h = self.gen.ctx.exprs.expr(e.base, self.sc, self.em)
            return f"{h}._a[{lo}:{lo + self.count}]", True
        if isinstance(e, ir.Cast):
            x, vector = self._expr(e.operand)
            if not vector:
                return self.gen.ctx.exprs.expr(e, self.sc, self.em), False
            return self._cast(x, e.operand.type, e.type), True
        if isinstance(e, ir.Binary):
            left, lv = self._expr(e.left)
            right, rv = self._expr(e.right)
            if not (lv or rv):
                return self.gen.ctx.exprs.expr(e, self.sc, self.em), False
            return self._binary(e, left, right), True
        if isinstance(e, ir.Unary):
            x, vector = self._expr(e.operand)
            if not vector:
                return self.gen.ctx.exprs.expr(e, self.sc, self.em), False
            return _unary(e, x), True
        if isinstance(e, (ir.Const, ir.BoolConst, ir.VarRef, ir.Member)):
            return self.gen.ctx.exprs.expr(e, self.sc, self.em), False
        raise _NotVector

    @staticmethod
    def _cast(x: str, src_t: ir.Type, dst_t: ir.Type) -> str:
        src, dst = ir.strip_newtype(src_t), ir.strip_newtype(dst_t)
        if isinstance(dst, ir.BoolType) and isinstance(src, ir.BitType):
            return f"({x} != 0)"
        if isinstance(dst, ir.BitType) and isinstance(src, ir.BoolType):
            return f"_vec_int({x})"
        if not (isinstance(dst, ir.BitType) and isinstance(src, ir.BitType)):
            raise _NotVector
        if dst.width > 32 or src.width > 32:
            raise _NotVector
        m = mask(dst.width)
        if src.signed and dst.width > src.width:
            sb = 1 << (src.width - 1)
            return f"((({x} ^ {sb:#x}) - {sb:#x}) & {m:#x})"
        if dst.width < src.width:
            return f"({x} & {m:#x})"
        return x

    @staticmethod
    def _binary(e: ir.Binary, left: str, right: str) -> str:
        op = e.op
        lt = ir.strip_newtype(e.left.type)
        if op in ("&&", "||"):
            return f"({left} {'&' if op == '&&' else '|'} {right})"
        if not isinstance(lt, ir.BitType) or lt.width > 32:
            raise _NotVector
        if op in _COMPARE:
            if op not in ("==", "!=") and lt.signed:
                sb = 1 << (lt.width - 1)
                return f"(({left} ^ {sb:#x}) {op} ({right} ^ {sb:#x}))"
            return f"({left} {op} {right})"
        t = ir.strip_newtype(e.type)
        if op not in _ARITH or not isinstance(t, ir.BitType) or t.width > 32:
            raise _NotVector
        m = mask(t.width)
        if op in ("+", "-"):
            return f"(({left} {op} {right}) & {m:#x})"
        if op in ("&", "|", "^"):
            return f"({left} {op} {right})"
        if not t.signed:
            if op == "|+|":
                return f"_vec_min({left} + {right}, {m:#x})"
            return f"_vec_max({left} - {right}, 0)"
        sb = 1 << (t.width - 1)
        pyop = op[1]
        return (
            f"(_vec_min(_vec_max((({left} ^ {sb:#x}) - {sb:#x}) {pyop} (({right} ^ {sb:#x})"
            f" - {sb:#x}), {-sb}), {sb - 1}) & {m:#x})"
        )


def runtime_globals() -> dict[str, Any]:
    """Helpers the generated array code calls."""
    def vec_array(cells: list[int]) -> Any:
        return np.array(cells, dtype=np.int64)

    def vec_list(x: Any, count: int) -> list[int]:
        if isinstance(x, np.ndarray):
            return x.tolist()
        return [int(x)] * count

    def vec_last(x: Any) -> int:
        return int(x[-1]) if isinstance(x, np.ndarray) else int(x)

    def vec_any(x: Any) -> bool:
        return bool(np.any(x))

    def vec_int(x: Any) -> Any:
        return np.asarray(x).astype(np.int64)

    return {
        "_vec_array": vec_array,
        "_vec_list": vec_list,
        "_vec_last": vec_last,
        "_vec_any": vec_any,
        "_vec_int": vec_int,
        "_vec_min": np.minimum,
        "_vec_max": np.maximum,
        "_vec_field": vector_field,
        "_vec_zeros": _zeros,
        "_vec_parse": vector_parse,
    }


def vector_field(k: int) -> property:
    """Field ``k`` of an array-held header as a Python int attribute (scalar code)."""

    def get(self: Any) -> int:
        return int(self._a[k])

    def put(self: Any, value: int) -> None:
        self._a[k] = value

    return property(get, put)


def _zeros(count: int) -> Any:
    return np.zeros(count, dtype=np.int64)


def vector_parse(data: bytes, pos: int, count: int, dtype: str) -> Any:
    """``count`` big-endian words of ``dtype`` (``>u1``/``>u2``/``>u4``) at ``pos``."""
    return np.frombuffer(data, dtype=dtype, count=count, offset=pos).astype(np.int64)


__all__ = ["VectorGen", "runtime_globals", "MIN_ELEMENTS", "MAX_TEMPLATE", "attr"]


def _unary(e: ir.Unary, x: str) -> str:
    """A unary operator over the array ``x``: not of bools, complement and negation of
    bit<w> up to 32 bits."""
    t = ir.strip_newtype(e.type)
    if e.op == "!" and isinstance(t, ir.BoolType):
        return f"(~{x})"
    if e.op == "~" and isinstance(t, ir.BitType) and t.width <= 32:
        return f"({x} ^ {mask(t.width):#x})"
    if e.op == "-" and isinstance(t, ir.BitType) and t.width <= 32:
        return f"((-{x}) & {mask(t.width):#x})"
    raise _NotVector
