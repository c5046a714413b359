"""IR -> C, the core: one C function per top-level block of a v1model program, with actions, tables,
sub-controls and sub-parsers inlined, over the state that :mod:`softswitch.cengine.switch`
loads from the Python engine's objects (the control plane's source of truth).

The generator mirrors the Python code generator's walk (:mod:`softswitch.engine.codegen`):
the same instance paths, so each table, register and counter of the C program is the
Python object of the same name. Whatever it does not compile raises
:class:`~softswitch.cengine.errors.CUnsupported` naming the construct and its source
location; the program then runs on the Python engine.

Conventions of the generated code: the state is ``S`` (``state_t *``), the packet's
per-pass registers ``P`` (``pkt_t *``); every P4 variable and temporary is declared at the
top of its C function (``goto`` crosses no initialisation); ``exit`` and ``return``
unwind through the copy-outs of inlined calls by ``goto``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from softswitch import ir
from softswitch.cengine.ctypes_gen import (
    CTypes,
    is_scalar,
    is_signed,
    is_wide,
    scalar_width,
    strip,
)
from softswitch.cengine.ctypes_gen import field as fld
from softswitch.cengine.errors import CUnsupported
from softswitch.engine.bits import mask
from softswitch.engine.codegen_stmt import _top_exprs
from softswitch.engine.codegen_walk import (
    applied_actions,
    applied_block,
    dynamic_indexes,
    has_dynamic_indexes,
    root_var,
)
from softswitch.engine.compiled import CompiledProgram
from softswitch.ir_walk import walk

# action selector algorithm -> its C function (the run time's BMv2 hashes)
_SELECTOR_HASHES = {
    "crc16": "h_crc16",
    "crc16_custom": "h_crc16",
    "crc32": "h_crc32",
    "crc32_custom": "h_crc32",
    "csum16": "h_csum16",
    "xor16": "h_xor16",
    "identity": "h_identity",
}
PARSER_LOOP_LIMIT = 10000  # back-edge transitions before error.ParserTimeout (as Python)
DROP_PORT = 511


def cnum(v: int) -> str:
    return f"{v & mask(64)}ull"


class Em:
    """Lines of C with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}: ;")

    @contextmanager
    def block(self, head: str) -> Iterator[None]:
        self.line(head + " {")
        self.indent += 1
        try:
            yield
        finally:
            self.indent -= 1
            self.line("}")


@dataclass
class Fn:
    """One C function being generated: its declarations and name counter."""

    decls: list[str] = field(default_factory=list)
    n: int = 0

    def tmp(self, ctype: str, prefix: str = "t") -> str:
        self.n += 1
        name = f"{prefix}{self.n}"
        self.decls.append(f"{ctype} {name};")
        return name

    def label(self, prefix: str) -> str:
        self.n += 1
        return f"L{prefix}{self.n}"


@dataclass
class TableC:
    """A table as the C program sees it (and the Python side loads it)."""

    index: int
    name: str
    decl: ir.TableDecl
    path: str
    key_words: list[tuple[int, int, str]]  # per key field: (first word, width, match kind)
    kw: int
    action_ids: dict[str, int]  # fully qualified action name -> id in this table
    arg_words: dict[str, list[tuple[int, int]]]  # action -> per cp param (first word, width)
    aw: int
    strategy: int  # 0: hashed mask groups (exact/lpm), 1: ordered list

    selector_hash: str | None = None  # C hash function of an action selector
    selector_keys: list[ir.Expr] = field(default_factory=list)
    idle_timeout: bool = False  # hit times are recorded per entry
    direct_counter: bool = False
    direct_meter: str | None = None  # "packets" / "bytes" when the table has a direct meter

    @property
    def args_offset(self) -> int:
        return 2 + 2 * self.kw + 2 * len(self.key_words)

    @property
    def row_words(self) -> int:
        return self.args_offset + self.aw


@dataclass
class ArrayC:
    """A register or counter array in the state."""

    index: int
    name: str
    kind: str  # "register" / "counter"
    size: int
    width: int  # register cell width (counters: 64)


@dataclass
class Scope:
    env: dict[ir.Variable, str]
    path: str
    names: dict[int, Any]
    local_actions: set[int]
    exit_label: str
    exit_flag: str
    block_args: dict[ir.Variable, Any] = field(default_factory=dict)
    ret_label: str | None = None
    ret_var: str | None = None
    brk: str | None = None
    cont: str | None = None
    parser: tuple[str, str, str] | None = None  # (pos var, error var, reject label)
    deparser: bool = False
    sm: str | None = None
    role: str = ""

    def child(self, **kw: Any) -> Scope:
        c = replace(self, **kw)
        c.env = dict(self.env) if "env" not in kw else kw["env"]
        return c


class CGenCore:
    """Expressions, statements, calls, block instances and the top-level block functions;
    tables, externs, packets and parsers come from the mixins in :mod:`softswitch.cengine.cgen`."""

    def __init__(self, program: ir.Program, compiled: CompiledProgram) -> None:
        self.program = program
        self.compiled = compiled
        self.types = CTypes()
        self.functions: list[str] = []
        self.tables: list[TableC] = []
        self.arrays: list[ArrayC] = []
        self._tables_by_name: dict[str, TableC] = {}
        self._arrays_by_name: dict[str, ArrayC] = {}
        self._block_cache: dict[tuple[int, str], dict[int, Any]] = {}
        self.global_names: dict[int, Any] = {}
        self.top_actions = {id(a) for a in program.actions.values()}
        # statements search for run-time stack indexes only where the program has any (the
        # Python generator found out already when it made ``compiled`` of this program)
        self.dynamic_indexes = (compiled.dynamic_indexes if compiled.program is program
                                else has_dynamic_indexes(program))
        self.fn = Fn()
        self.uses_random = False
        self.field_lists: dict[int, list[str]] = {}
        self.pins: dict[int, str] = {}  # id(Index) -> its index, evaluated once
        # digests: (name, field widths) per id; the ingress call sites (id, values)
        self.digests: list[tuple[str, list[int]]] = []
        self.digest_sites: list[tuple[int, list[tuple[str, int]]]] = []
        self.digest_flag: str | None = None
        self.asserts: list[str] = []  # source location of each assert/assume
        self.may_loop = False  # resubmit/recirculate/clone: a frame can take many passes
        self.emit_bound = 0  # bytes the deparser's emit calls can write at most

    # ------------------------------------------------------------------ helpers

    def err_code(self, name: str) -> int:
        try:
            return self.program.errors.index(name)
        except ValueError:
            raise CUnsupported(f"error.{name} not declared") from None

    def const_value(self, e: ir.Expr) -> int:
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.BoolConst):
            return int(e.value)
        if isinstance(e, ir.EnumMember):
            t = strip(e.type)
            assert isinstance(t, ir.EnumType)
            return t.values[e.member] if t.underlying is not None else t.members.index(e.member)
        if isinstance(e, ir.ErrorMember):
            return e.code
        if isinstance(e, ir.Cast):
            v = self.const_value(e.operand)
            t = strip(e.type)
            return v & mask(scalar_width(t)) if isinstance(t, ir.BitType) else v
        raise CUnsupported(f"a non-constant {type(e).__name__} where a constant is needed", e.loc)

    # ------------------------------------------------------------------ instances

    def register_locals(self, decl: ir.ControlDecl | ir.ParserDecl, path: str) -> dict[int, Any]:
        key = (id(decl), path)
        names = dict(self.global_names)
        if key in self._block_cache:
            names.update(self._block_cache[key])
            return names
        mine: dict[int, Any] = {}
        for x in decl.locals:
            if isinstance(x, ir.Instance) and isinstance(x.type, ir.ExternType):
                if id(x) in names:
                    continue
                g = self.make_extern(x, path)
                if g is not None:
                    names[id(x)] = mine[id(x)] = g
        for x in decl.locals:
            if isinstance(x, ir.TableDecl):
                t = self.make_table(x, path)
                names[id(x)] = mine[id(x)] = t
        self._block_cache[key] = mine
        return names

    def make_extern(self, inst: ir.Instance, path: str) -> ArrayC | None:
        t = inst.type
        assert isinstance(t, ir.ExternType)
        name = ir.qualify(path, inst.cp_name)
        if t.name == "register":
            reg = self.compiled.registers[name]
            if reg.width > 64:
                self.types.ctype(ir.BitType(reg.width))
            return self._array(name, "register", reg.size, reg.width)
        if t.name == "counter":
            c = self.compiled.counters[name]
            return self._array(name, "counter", c.size, 64)
        if t.name in ("direct_counter", "direct_meter"):
            return None  # kept by its table
        if t.name == "meter":
            m = self.compiled.meters[name]
            return self._array(name, "meter", m.size, 0)
        if t.name in ("action_profile", "action_selector"):
            return None  # its members are loaded into the tables that use it
        raise CUnsupported(f"extern {t.name}", inst.loc)

    def _array(self, name: str, kind: str, size: int, width: int) -> ArrayC:
        a = self._arrays_by_name.get(name)
        if a is None:
            a = ArrayC(len(self.arrays), name, kind, size, width)
            self.arrays.append(a)
            self._arrays_by_name[name] = a
        return a

    def action_fq(self, action: ir.ActionDecl, path: str) -> str:
        if id(action) in self.top_actions:
            return ir.qualify("", action.cp_name)
        return ir.qualify(path, action.cp_name)

    def make_table(self, decl: ir.TableDecl, path: str) -> TableC:
        name = ir.qualify(path, decl.cp_name)
        if name in self._tables_by_name:
            return self._tables_by_name[name]
        key_words, kw = _key_words(decl)
        if kw > 32:
            raise CUnsupported(f"table {name}: key wider than 2048 bits", decl.loc)
        action_ids: dict[str, int] = {}
        arg_words: dict[str, list[tuple[int, int]]] = {}
        aw = 0
        for i, aref in enumerate(applied_actions(decl)):
            fq = self.action_fq(aref.action, path)
            action_ids[fq] = i
            words, off = _param_words(aref.action)
            arg_words[fq] = words
            aw = max(aw, off)
        if aw > 64:
            raise CUnsupported(f"table {name}: action data wider than 64 words", decl.loc)
        table = self.compiled.tables[name]
        strategy = 0 if table.strategy in ("exact", "lpm", "keyless") else 1
        tc = TableC(len(self.tables), name, decl, path, key_words, kw, action_ids, arg_words, aw,
                    strategy)  # fmt: skip
        impl = table.implementation
        if impl is not None:
            tc.aw = max(tc.aw, 1)  # a group's row holds its slot count there
            algo = getattr(impl, "algo", None)
            if impl.has_selector and algo not in _SELECTOR_HASHES:
                raise CUnsupported(f"action selector hash {algo}", decl.loc)
            tc.selector_hash = _SELECTOR_HASHES.get(algo or "")
            tc.selector_keys = [k.expr for k in decl.keys if k.match_kind == "selector"]
        tc.idle_timeout = decl.support_timeout
        tc.direct_counter = decl.counters is not None
        tc.direct_meter = table.direct_meter_kind if decl.meters is not None else None
        self.tables.append(tc)
        self._tables_by_name[name] = tc
        return tc

    # ------------------------------------------------------------------ expressions

    def wide(self, code: str, t: ir.Type) -> str:
        return code if is_wide(t) else f"wfrom({code})"

    def narrow(self, code: str, t: ir.Type) -> str:
        return f"wlo({code})" if is_wide(t) else code

    def expr(self, e: ir.Expr, sc: Scope, em: Em) -> str:
        meth = getattr(self, "x_" + type(e).__name__, None)
        if meth is None:
            raise CUnsupported(f"expression {type(e).__name__}", e.loc)
        return meth(e, sc, em)

    def x_Const(self, e: ir.Const, sc: Scope, em: Em) -> str:
        t = strip(e.type)
        if isinstance(t, ir.BitType) and t.width > 64:
            self.types.ctype(t)
            v = e.value & mask(t.width)
            words = []
            while v:
                words.append(v & mask(64))
                v >>= 64
            inner = ", ".join(f"{w}ull" for w in words) or "0"
            return f"((wide_t){{{{{inner}}}}})"
        return cnum(e.value)

    def x_BoolConst(self, e: ir.BoolConst, sc: Scope, em: Em) -> str:
        return "1ull" if e.value else "0ull"

    def x_EnumMember(self, e: ir.EnumMember, sc: Scope, em: Em) -> str:
        return cnum(self.const_value(e))

    def x_ErrorMember(self, e: ir.ErrorMember, sc: Scope, em: Em) -> str:
        return cnum(e.code)

    def x_MatchKindMember(self, e: ir.MatchKindMember, sc: Scope, em: Em) -> str:
        return cnum(self.program.match_kinds.index(e.member))

    def x_VarRef(self, e: ir.VarRef, sc: Scope, em: Em) -> str:
        v = sc.env.get(e.var)
        if v is None:
            raise CUnsupported(f"reference to {e.var.name} outside its scope", e.loc)
        return v

    def x_Member(self, e: ir.Member, sc: Scope, em: Em) -> str:
        bt = strip(e.base.type)
        if isinstance(bt, ir.TableApplyResultType):
            hit, an = self.apply_table(e.base, sc, em)
            if e.name == "hit":
                return f"(uint64_t)({hit})"
            if e.name == "miss":
                return f"(uint64_t)(!{hit})"
            return an
        if isinstance(bt, (ir.HeaderType, ir.StructType, ir.HeaderUnionType)):
            return f"{self.expr(e.base, sc, em)}.{fld(e.name)}"
        if isinstance(bt, ir.StackType):
            return self.stack_member(e, bt, sc, em)
        raise CUnsupported(f"member {e.name} of {type(bt).__name__}", e.loc)

    def stack_member(self, e: ir.Member, bt: ir.StackType, sc: Scope, em: Em) -> str:
        base = self.expr(e.base, sc, em)
        n = bt.size
        if e.name == "size":
            return cnum(n)
        if e.name == "lastIndex":
            return f"(({base}.n - 1) & 0xffffffffull)"
        if e.name == "nextIndex":
            return f"{base}.n"
        if e.name not in ("next", "last"):
            raise CUnsupported(f"member {e.name} of a header stack", e.loc)
        at = f"{base}.n" if e.name == "next" else f"({base}.n - 1)"
        if sc.parser is not None:
            _, err, rej = sc.parser
            bad = f"{base}.n >= {n}" if e.name == "next" else f"{base}.n == 0"
            em.line(f"if ({bad}) {{ {err} = {self.err_code('StackOutOfBounds')}; goto {rej}; }}")
            return f"{base}.h[{at}]"
        i = self.fn.tmp("uint64_t", "ix")
        em.line(f"{i} = {at};")
        return f"STK_AT({base}, {n}, {i})"

    def x_Index(self, e: ir.Index, sc: Scope, em: Em) -> str:
        bt = strip(e.base.type)
        if not isinstance(bt, ir.StackType):
            raise CUnsupported("indexing a non-stack value", e.loc)
        base = self.expr(e.base, sc, em)
        if isinstance(e.index, ir.Const) and 0 <= e.index.value < bt.size:
            return f"{base}.h[{e.index.value}]"
        pinned = self.pins.get(id(e))
        if pinned is not None:
            return f"STK_AT({base}, {bt.size}, {pinned})"
        i = self.fn.tmp("uint64_t", "ix")
        em.line(f"{i} = {self.narrow(self.expr(e.index, sc, em), e.index.type)};")
        if sc.parser is not None:
            _, err, rej = sc.parser
            soob = self.err_code("StackOutOfBounds")
            em.line(f"if ({i} >= {bt.size}) {{ {err} = {soob}; goto {rej}; }}")
            return f"{base}.h[{i}]"
        return f"STK_AT({base}, {bt.size}, {i})"

    def x_Slice(self, e: ir.Slice, sc: Scope, em: Em) -> str:
        b = self.expr(e.base, sc, em)
        w = e.hi - e.lo + 1
        if is_wide(e.base.type):
            if w <= 64:
                return f"wslice64({b}, {e.hi}, {e.lo})"
            return f"wslice({b}, {e.hi}, {e.lo})"
        return f"((({b}) >> {e.lo}) & {cnum(mask(w))})"

    def x_Unary(self, e: ir.Unary, sc: Scope, em: Em) -> str:
        a = self.expr(e.operand, sc, em)
        t = strip(e.type)
        if e.op == "!":
            return f"(uint64_t)(!({a}))"
        w = scalar_width(t)
        if is_wide(t):
            if e.op == "~":
                return f"wnot({a}, {w})"
            if e.op == "-":
                return f"wsub(wz(), {a}, {w})"
        if e.op == "~":
            return f"((~({a})) & {cnum(mask(w))})"
        if e.op == "-":
            return f"((-({a})) & {cnum(mask(w))})"
        raise CUnsupported(f"unary {e.op}", e.loc)

    def _short_circuit(self, e: ir.Binary, sc: Scope, em: Em) -> str:
        a = self.expr(e.left, sc, em)
        sub = Em()
        sub.indent = em.indent + 1
        b = self.expr(e.right, sc, sub)
        if not sub.lines:
            op = "&&" if e.op == "&&" else "||"
            return f"(uint64_t)(({a}) {op} ({b}))"
        r = self.fn.tmp("uint64_t")
        em.line(f"{r} = (uint64_t)(({a}) != 0);")
        with em.block(f"if ({'' if e.op == '&&' else '!'}{r})"):
            em.lines += sub.lines
            em.line(f"{r} = (uint64_t)(({b}) != 0);")
        return r

    def operands(self, exprs: list[ir.Expr], sc: Scope, em: Em) -> list[str]:
        """C texts of ``exprs`` evaluated left to right: an operand whose evaluation runs
        statements (a function call, a table apply) first pins the earlier ones."""
        out: list[str] = []
        for x in exprs:
            sub = Em()
            sub.indent = em.indent
            v = self.expr(x, sc, sub)
            if sub.lines:
                for i, (prev, px) in enumerate(zip(out, exprs, strict=False)):
                    if not prev.endswith("ull") and not prev.startswith("((wide_t)"):
                        tmp = self.fn.tmp(
                            self.types.ctype(px.type)
                            if not isinstance(strip(px.type), ir.IntLitType)
                            else "uint64_t"
                        )
                        em.line(f"{tmp} = {prev};")
                        out[i] = tmp
                em.lines += sub.lines
            out.append(v)
        return out

    def x_Binary(self, e: ir.Binary, sc: Scope, em: Em) -> str:
        op = e.op
        if op in ("&&", "||"):
            return self._short_circuit(e, sc, em)
        lt, rt, t = strip(e.left.type), strip(e.right.type), strip(e.type)
        if op in ("==", "!=") and not is_scalar(lt):
            return self._composite_eq(e, sc, em)
        a, b = self.operands([e.left, e.right], sc, em)
        if op == "++":
            return self._concat(a, b, lt, rt)
        if op in ("<<", ">>"):
            return self._shift(op, a, b, t, rt, e.loc)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return self._compare(op, a, b, lt, rt, e.loc)
        if isinstance(t, ir.IntLitType):
            if op in ("+", "-", "*", "&", "|", "^"):
                return f"(uint64_t)((int64_t)({a}) {op} (int64_t)({b}))"
            raise CUnsupported(f"operator {op} on unsized integers at run time", e.loc)
        if is_wide(t):
            return _wide_arithmetic(op, a, b, scalar_width(t), e.loc)
        return _arithmetic(op, a, b, t, e.loc)

    def _concat(self, a: str, b: str, lt: ir.Type, rt: ir.Type) -> str:
        """``a ++ b``: the left operand shifted above the right one."""
        wa, wb = scalar_width(lt), scalar_width(rt)
        w = wa + wb
        if w <= 64:
            return f"((({a}) << {wb}) | ({b}))"
        self.types.ctype(ir.BitType(w))
        return f"wor(wshl({self.wide(a, lt)}, {wb}, {w}), {self.wide(b, rt)})"

    def _shift(self, op: str, a: str, b: str, t: ir.Type, rt: ir.Type, loc: ir.Loc) -> str:
        """``<<``/``>>`` of a value of type ``t`` by an amount of type ``rt`` (a wide amount
        is capped: anything at 4096 or more shifts every bit out)."""
        w = scalar_width(t)
        n = self.narrow(b, rt)
        if is_wide(rt):
            n = f"(wlt(wfrom(4096), {b}) ? 4096ull : wlo({b}))"
        if is_wide(t):
            if op == "<<":
                return f"wshl({a}, {n}, {w})"
            if is_signed(t):
                raise CUnsupported("arithmetic shift of a wide signed value", loc)
            return f"wshr({a}, {n})"
        if op == "<<":
            return f"shl64({a}, {n}, {w})"
        if is_signed(t):
            return f"sshr64({a}, {n}, {w})"
        return f"shr64({a}, {n}, {w})"

    def _compare(
        self, op: str, a: str, b: str, lt: ir.Type, rt: ir.Type, loc: ir.Loc
    ) -> str:
        """A comparison of scalars: wide ones by the runtime's helpers, signed ones
        sign-extended, unsized ones as signed 64-bit numbers."""
        if is_wide(lt) or is_wide(rt):
            if is_signed(lt):
                raise CUnsupported("comparison of wide signed values", loc)
            x, y = self.wide(a, lt), self.wide(b, rt)
            return {
                "==": f"(uint64_t)weq({x}, {y})",
                "!=": f"(uint64_t)!weq({x}, {y})",
                "<": f"(uint64_t)wlt({x}, {y})",
                ">": f"(uint64_t)wlt({y}, {x})",
                "<=": f"(uint64_t)!wlt({y}, {x})",
                ">=": f"(uint64_t)!wlt({x}, {y})",
            }[op]
        if is_signed(lt) and op not in ("==", "!="):
            w = scalar_width(lt)
            return f"(uint64_t)(SX({a}, {w}) {op} SX({b}, {w}))"
        if isinstance(lt, ir.IntLitType) and isinstance(rt, ir.IntLitType):
            return f"(uint64_t)((int64_t)({a}) {op} (int64_t)({b}))"
        return f"(uint64_t)(({a}) {op} ({b}))"

    def _composite_eq(self, e: ir.Binary, sc: Scope, em: Em) -> str:
        t = strip(e.left.type)
        if not isinstance(t, (ir.HeaderType, ir.StructType, ir.HeaderUnionType, ir.StackType,
                              ir.VarbitType)):  # fmt: skip
            raise CUnsupported(f"comparison of {type(t).__name__} values", e.loc)
        a, b = self.operands([e.left, e.right], sc, em)
        conds = self._eq_conds(a, b, t)
        c = " && ".join(conds) or "1"
        return f"(uint64_t)({'' if e.op == '==' else '!'}({c}))"

    def _eq_conds(self, a: str, b: str, t: ir.Type) -> list[str]:
        t = strip(t)
        if isinstance(t, ir.HeaderType):
            fields = " && ".join(self._fields_eq_conds(a, b, t.fields)) or "1"
            return [f"({a}._v == {b}._v && (!{a}._v || ({fields})))"]
        if isinstance(t, ir.StructType):
            return self._fields_eq_conds(a, b, t.fields)
        if is_wide(t):
            return [f"weq({a}, {b})"]
        if is_scalar(t):
            return [f"{a} == {b}"]
        if isinstance(t, ir.VarbitType):
            return [f"({a}.nbits == {b}.nbits && memcmp({a}.b, {b}.b, {a}.nbits / 8) == 0)"]
        if isinstance(t, ir.HeaderUnionType):
            return self._fields_eq_conds(a, b, t.fields)
        if isinstance(t, ir.StackType):
            out: list[str] = []
            for i in range(t.size):
                out += self._eq_conds(f"{a}.h[{i}]", f"{b}.h[{i}]", t.elem)
            return out
        raise CUnsupported(f"comparison of {type(t).__name__} values")

    def _fields_eq_conds(self, a: str, b: str, fields: list[ir.StructField]) -> list[str]:
        """The conditions under which every field of ``a`` equals that of ``b``."""
        out: list[str] = []
        for f in fields:
            out += self._eq_conds(f"{a}.{fld(f.name)}", f"{b}.{fld(f.name)}", f.type)
        return out

    def x_Cast(self, e: ir.Cast, sc: Scope, em: Em) -> str:
        d, s = strip(e.type), strip(e.operand.type)
        if isinstance(e.operand, (ir.Const, ir.BoolConst)) and isinstance(
            d, (ir.BitType, ir.BoolType)
        ):
            v = self.const_value(e.operand)
            w = scalar_width(d)
            return self.x_Const(ir.Const(d, e.loc, v & mask(w)), sc, em)
        a = self.expr(e.operand, sc, em)
        if isinstance(d, ir.BoolType):
            return f"(uint64_t)(({self.narrow(a, s)}) != 0)"
        if not is_scalar(d) or not is_scalar(s):
            raise CUnsupported(f"cast from {type(s).__name__} to {type(d).__name__}", e.loc)
        return self.scalar_cast(a, s, d, e.loc)

    def scalar_cast(self, a: str, s: ir.Type, d: ir.Type, loc: ir.Loc) -> str:
        """The C value ``a`` of scalar type ``s`` cast to scalar type ``d``: masked to a
        narrower width, sign-extended from a signed one, widened past 64 bits."""
        wd = scalar_width(d)
        if isinstance(s, ir.IntLitType):
            if wd > 64:
                return f"wmask(((int64_t)({a}) < 0 ? wnot(wz(), {wd}) : wz()), {wd})"
            return f"(({a}) & {cnum(mask(wd))})"
        ws = scalar_width(s)
        if is_signed(s) and wd > ws:
            if wd > 64:
                raise CUnsupported("sign extension to more than 64 bits", loc)
            return f"((uint64_t)SX({a}, {ws}) & {cnum(mask(wd))})"
        if wd < ws:
            if is_wide(s):
                return f"wslice64({a}, {wd - 1}, 0)" if wd <= 64 else f"wmask({a}, {wd})"
            return f"(({a}) & {cnum(mask(wd))})"
        if is_wide(d) and not is_wide(s):
            self.types.ctype(d)
            return f"wfrom({a})"
        return a

    def x_Mux(self, e: ir.Mux, sc: Scope, em: Em) -> str:
        c = self.expr(e.cond, sc, em)
        sub1, sub2 = Em(), Em()
        sub1.indent = sub2.indent = em.indent + 1
        a = self.expr(e.then, sc, sub1)
        b = self.expr(e.else_, sc, sub2)
        t = strip(e.type)
        if not sub1.lines and not sub2.lines:
            return f"(({c}) ? ({a}) : ({b}))"
        r = self.fn.tmp(self.types.ctype(t))
        with em.block(f"if ({c})"):
            em.lines += sub1.lines
            em.line(f"{r} = {a};")
        with em.block("else"):
            em.lines += sub2.lines
            em.line(f"{r} = {b};")
        return r

    def x_StructInit(self, e: ir.StructInit, sc: Scope, em: Em) -> str:
        t = strip(e.type)
        r = self.fn.tmp(self.types.ctype(t))
        em.line(f"memset(&{r}, 0, sizeof {r});")
        for name, x in e.fields.items():
            self.assign_to(f"{r}.{fld(name)}", x.type, x, sc, em)
        if isinstance(t, ir.HeaderType):
            em.line(f"{r}._v = 1;")
        return r

    def x_InvalidHeader(self, e: ir.InvalidHeader, sc: Scope, em: Em) -> str:
        t = strip(e.type)
        r = self.fn.tmp(self.types.ctype(t))
        em.line(f"memset(&{r}, 0, sizeof {r});")
        return r

    def x_MethodCall(self, e: ir.MethodCall, sc: Scope, em: Em) -> str:
        tt = strip(e.target.type)
        if e.method == "isValid" and isinstance(tt, ir.HeaderType):
            return f"{self.expr(e.target, sc, em)}._v"
        if e.method == "isValid" and isinstance(tt, ir.HeaderUnionType):
            u = self.expr(e.target, sc, em)
            return "(" + " || ".join(f"{u}.{fld(f.name)}._v" for f in tt.fields) + " || 0)"
        if e.method == "apply" and isinstance(e.target, ir.InstanceRef):
            if isinstance(e.target.instance, ir.TableDecl):
                hit, _ = self.apply_table(e, sc, em)
                return hit
        if isinstance(tt, ir.ExternType) and tt.name == "packet_in":
            return self.packet_expr(e, sc, em)
        raise CUnsupported(f"method {e.method} in an expression", e.loc)

    def x_Call(self, e: ir.Call, sc: Scope, em: Em) -> str:
        if isinstance(e.callee, ir.FunctionDecl):
            return self.call_function(e, sc, em)
        raise CUnsupported(f"call of {e.callee.name} in an expression", e.loc)

    # ------------------------------------------------------------------ statements

    def stmt(self, s: ir.Stmt, sc: Scope, em: Em) -> None:
        if self.dynamic_indexes and sc.parser is None and not isinstance(s, ir.Block):
            dyn = [x for x in dynamic_indexes(_top_exprs(s)) if id(x) not in self.pins]
            if dyn:
                self.guarded(s, dyn, sc, em)
                return
        self._stmt(s, sc, em)

    def guarded(self, s: ir.Stmt, dyn: list[ir.Index], sc: Scope, em: Em) -> None:
        """``s`` with run-time stack indexes, as the Python engine runs it: each index
        evaluated once; out of range, an assignment's left side skips the statement, its
        right side assigns zero/invalid, a condition is false, anything else is skipped."""
        lhs_ids = {id(x) for x in dynamic_indexes([s.lhs])} if isinstance(s, ir.Assign) else set()
        lhs_guard: list[str] = []
        rhs_guard: list[str] = []
        mine = []
        try:
            for ix in dyn:
                t = self.fn.tmp("uint64_t", "pin")
                em.line(f"{t} = {self.narrow(self.expr(ix.index, sc, em), ix.index.type)};")
                self.pins[id(ix)] = t
                mine.append(id(ix))
                st = strip(ix.base.type)
                assert isinstance(st, ir.StackType)
                (lhs_guard if id(ix) in lhs_ids else rhs_guard).append(f"{t} < {st.size}")
            rg = " && ".join(rhs_guard) or "1"
            if isinstance(s, ir.If):
                c = self.fn.tmp("uint64_t")
                em.line(f"{c} = 0;")
                with em.block(f"if ({rg})"):
                    em.line(f"{c} = {self.expr(s.cond, sc, em)};")
                with em.block(f"if ({c})"):
                    self.stmt(s.then, sc, em)
                if s.else_ is not None:
                    with em.block("else"):
                        self.stmt(s.else_, sc, em)
                return
            if isinstance(s, (ir.Assign, ir.VarDecl)):
                if isinstance(s, ir.VarDecl):
                    lhs: ir.Expr = ir.VarRef(s.var.type, s.var.loc, s.var)
                    self._stmt(ir.VarDecl(s.var, None, s.loc), sc, em)
                    rhs = s.init
                else:
                    lhs, rhs = s.lhs, s.rhs
                assert rhs is not None
                with em.block(f"if ({' && '.join(lhs_guard) or '1'})"):
                    with em.block(f"if ({rg})"):
                        self._stmt(ir.Assign(lhs, rhs, s.loc), sc, em)
                    with em.block("else"):
                        if isinstance(lhs, ir.Slice):
                            self.assign_slice(lhs, "0", ir.BitType(64), sc, em)
                        else:
                            self.zero(self.expr(lhs, sc, em), lhs.type, em)
                return
            with em.block(f"if ({rg})"):
                self._stmt(s, sc, em)
        finally:
            for k in mine:
                self.pins.pop(k, None)

    def _stmt(self, s: ir.Stmt, sc: Scope, em: Em) -> None:
        meth = getattr(self, "s_" + type(s).__name__, None)
        if meth is None:
            raise CUnsupported(f"statement {type(s).__name__}", s.loc)
        meth(s, sc, em)

    def s_Block(self, s: ir.Block, sc: Scope, em: Em) -> None:
        for x in s.stmts:
            self.stmt(x, sc, em)

    def s_Empty(self, s: ir.Empty, sc: Scope, em: Em) -> None:
        pass

    def s_Assign(self, s: ir.Assign, sc: Scope, em: Em) -> None:
        if isinstance(s.lhs, ir.DontCare):
            self.expr(s.rhs, sc, em)
            return
        if isinstance(s.lhs, ir.Slice):
            self.assign_slice(s.lhs, self.expr(s.rhs, sc, em), s.rhs.type, sc, em)
            return
        lv = self.expr(s.lhs, sc, em)
        self.assign_to(lv, s.lhs.type, s.rhs, sc, em)
        if not is_scalar(s.lhs.type):
            self.union_fixup(s.lhs, sc, em)

    def assign_slice(self, lhs: ir.Slice, val: str, vt: ir.Type, sc: Scope, em: Em) -> None:
        if isinstance(lhs.base, ir.Slice):
            raise CUnsupported("assignment to a slice of a slice", lhs.loc)
        base = self.expr(lhs.base, sc, em)
        bt = strip(lhs.base.type)
        w = lhs.hi - lhs.lo + 1
        if is_wide(bt):
            bw = scalar_width(bt)
            em.line(f"{base} = wsetbits({base}, {lhs.hi}, {lhs.lo}, {self.wide(val, vt)}, {bw});")
            return
        m = mask(w)
        em.line(
            f"{base} = ({base} & ~({cnum(m)} << {lhs.lo})) | ((({val}) & {cnum(m)}) << {lhs.lo});"
        )

    def assign_to(self, lv: str, lt: ir.Type, rhs: ir.Expr, sc: Scope, em: Em) -> None:
        t = strip(lt)
        if isinstance(rhs, ir.ListExpr) and isinstance(t, (ir.StructType, ir.HeaderType)):
            tmp = self.fn.tmp(self.types.ctype(t))
            for f, x in zip(t.fields, rhs.elems, strict=False):
                self.assign_to(f"{tmp}.{fld(f.name)}", f.type, x, sc, em)
            if isinstance(t, ir.HeaderType):
                em.line(f"{tmp}._v = 1;")
            em.line(f"{lv} = {tmp};")
            return
        if isinstance(rhs, ir.ListExpr) and isinstance(t, ir.TupleType):
            tmp = self.fn.tmp(self.types.ctype(t))
            for i, (et, x) in enumerate(zip(t.elems, rhs.elems, strict=False)):
                self.assign_to(f"{tmp}.e{i}", et, x, sc, em)
            em.line(f"{lv} = {tmp};")
            return
        v = self.expr(rhs, sc, em)
        rt = strip(rhs.type)
        if is_scalar(t):
            if is_wide(t):
                v = self.wide(v, rt)
                if isinstance(rt, ir.IntLitType):
                    v = f"wmask({v}, {scalar_width(t)})"
            else:
                v = self.narrow(v, rt)
                if isinstance(rt, ir.IntLitType):
                    v = f"(({v}) & {cnum(mask(scalar_width(t)))})"
        em.line(f"{lv} = {v};")

    def s_CallStmt(self, s: ir.CallStmt, sc: Scope, em: Em) -> None:
        e = s.call
        if isinstance(e, ir.MethodCall):
            self.method_stmt(e, sc, em)
        elif isinstance(e, ir.Call):
            if isinstance(e.callee, ir.ActionDecl):
                self.call_action(e, sc, em)
            elif isinstance(e.callee, ir.FunctionDecl):
                self.call_function(e, sc, em)
            else:
                self.extern_call(e, sc, em)
        else:
            raise CUnsupported(f"{type(e).__name__} as a statement", s.loc)

    def s_If(self, s: ir.If, sc: Scope, em: Em) -> None:
        c = self.expr(s.cond, sc, em)
        with em.block(f"if ({c})"):
            self.stmt(s.then, sc, em)
        if s.else_ is not None:
            with em.block("else"):
                self.stmt(s.else_, sc, em)

    def s_Exit(self, s: ir.Exit, sc: Scope, em: Em) -> None:
        em.line(f"{sc.exit_flag} = 1;")
        em.line(f"goto {sc.exit_label};")

    def s_Return(self, s: ir.Return, sc: Scope, em: Em) -> None:
        if s.value is not None:
            if sc.ret_var is None:
                raise CUnsupported("return with a value outside a function", s.loc)
            em.line(f"{sc.ret_var} = {self.expr(s.value, sc, em)};")
        if sc.ret_label is None:
            # a top-level control's return: as exit, but only this block
            em.line(f"goto {sc.exit_label};")
            return
        em.line(f"goto {sc.ret_label};")

    def s_Break(self, s: ir.Break, sc: Scope, em: Em) -> None:
        if sc.brk is None:
            raise CUnsupported("break outside a loop", s.loc)
        em.line(f"goto {sc.brk};")

    def s_Continue(self, s: ir.Continue, sc: Scope, em: Em) -> None:
        if sc.cont is None:
            raise CUnsupported("continue outside a loop", s.loc)
        em.line(f"goto {sc.cont};")

    def declare(self, var: ir.Variable, sc: Scope) -> str:
        name = self.fn.tmp(self.types.ctype(var.type), "v")
        sc.env[var] = name
        return name

    def zero(self, name: str, t: ir.Type, em: Em) -> None:
        if is_scalar(t):
            em.line(f"{name} = {'wz()' if is_wide(t) else '0'};")
        else:
            em.line(f"memset(&{name}, 0, sizeof {name});")

    def s_VarDecl(self, s: ir.VarDecl, sc: Scope, em: Em) -> None:
        name = self.declare(s.var, sc)
        if s.init is None:
            self.zero(name, s.var.type, em)
        else:
            self.assign_to(name, s.var.type, s.init, sc, em)

    def s_For(self, s: ir.For, sc: Scope, em: Em) -> None:
        inner = sc.child()
        for x in s.init:
            self.stmt(x, inner, em)
        top, cont, brk = self.fn.label("top"), self.fn.label("cont"), self.fn.label("brk")
        body = inner.child(brk=brk, cont=cont)
        em.label(top)
        if s.cond is not None:
            c = self.expr(s.cond, body, em)
            em.line(f"if (!({c})) goto {brk};")
        self.stmt(s.body, body, em)
        em.label(cont)
        for x in s.updates:
            self.stmt(x, inner, em)
        em.line(f"goto {top};")
        em.label(brk)

    def s_ForIn(self, s: ir.ForIn, sc: Scope, em: Em) -> None:
        if s.collection is not None and isinstance(strip(s.collection.type), ir.StackType):
            st = strip(s.collection.type)
            assert isinstance(st, ir.StackType)
            coll = self.expr(s.collection, sc, em)
            brk = self.fn.label("brk")
            inner = sc.child()
            v = self.declare(s.var, inner)
            for i in range(st.size):
                cont = self.fn.label("cont")
                em.line(f"{v} = {coll}.h[{i}];")
                self.stmt(s.body, inner.child(brk=brk, cont=cont), em)
                em.label(cont)
            em.label(brk)
            return
        if s.collection is not None:
            if not isinstance(s.collection, ir.ListExpr):
                raise CUnsupported("for-in over this collection", s.loc)
            brk = self.fn.label("brk")
            inner = sc.child()
            v = self.declare(s.var, inner)
            for x in s.collection.elems:
                cont = self.fn.label("cont")
                self.assign_to(v, s.var.type, x, inner, em)
                self.stmt(s.body, inner.child(brk=brk, cont=cont), em)
                em.label(cont)
            em.label(brk)
            return
        if s.low is None or s.high is None or is_wide(s.var.type):
            raise CUnsupported("for-in loop form", s.loc)
        inner = sc.child()
        v = self.declare(s.var, inner)
        lo, hi = self.fn.tmp("uint64_t"), self.fn.tmp("uint64_t")
        em.line(f"{lo} = {self.expr(s.low, sc, em)};")
        em.line(f"{hi} = {self.expr(s.high, sc, em)};")
        cmp = "<=" if not is_signed(s.var.type) else "<="
        w = scalar_width(s.var.type)
        sig = is_signed(s.var.type)
        top, cont, brk = self.fn.label("top"), self.fn.label("cont"), self.fn.label("brk")
        if sig:
            em.line(f"if (SX({lo}, {w}) > SX({hi}, {w})) goto {brk};")
        else:
            em.line(f"if ({lo} > {hi}) goto {brk};")
        em.line(f"{v} = {lo};")
        em.label(top)
        self.stmt(s.body, inner.child(brk=brk, cont=cont), em)
        em.label(cont)
        em.line(f"if ({v} == {hi}) goto {brk};")
        em.line(f"{v} = ({v} + 1) & {cnum(mask(w))};")
        del cmp
        em.line(f"goto {top};")
        em.label(brk)

    def s_SwitchStmt(self, s: ir.SwitchStmt, sc: Scope, em: Em) -> None:
        v, ids = self.switch_subject(s, sc, em)
        end = self.fn.label("swend")
        pending: list[str] = []
        first = True
        default_body: ir.Block | None = None
        has_default = False
        for case in s.cases:
            conds, case_default = self.case_conds(case, v, ids)
            pending += conds
            has_default = has_default or case_default
            if case.body is None:
                continue
            if has_default:
                default_body = case.body
                pending = []
                break
            if pending:
                with em.block(f"{'if' if first else 'else if'} ({' || '.join(pending)})"):
                    self.stmt(case.body, sc, em)
                first = False
            pending = []
        if default_body is not None:
            if first:
                self.stmt(default_body, sc, em)
            else:
                with em.block("else"):
                    self.stmt(default_body, sc, em)
        em.label(end)

    def switch_subject(
        self, s: ir.SwitchStmt, sc: Scope, em: Em
    ) -> tuple[str, dict[int, int] | None]:
        """The switch's subject in a C value, and for ``t.apply().action_run`` the C id
        of each action of the table (by the action's id)."""
        subj_t = strip(s.subject.type)
        if isinstance(subj_t, ir.ActionRunType):
            assert isinstance(s.subject, ir.Member)
            _, an = self.apply_table(s.subject.base, sc, em)
            info = self.table_c(subj_t.table, sc)
            ids = {}
            for aref in applied_actions(subj_t.table):
                ids[id(aref.action)] = info.action_ids[self.action_fq(aref.action, info.path)]
            return an, ids
        if is_wide(subj_t):
            raise CUnsupported("switch on a wide value", s.loc)
        v = self.fn.tmp("uint64_t")
        em.line(f"{v} = {self.expr(s.subject, sc, em)};")
        return v, None

    def case_conds(
        self, case: ir.SwitchCase, v: str, ids: dict[int, int] | None
    ) -> tuple[list[str], bool]:
        """The C conditions of a case's labels on subject ``v`` (actions the table does
        not list match nothing), and whether one label is ``default``."""
        conds: list[str] = []
        has_default = False
        for lab in case.labels:
            if lab == "default":
                has_default = True
                continue
            if isinstance(lab, ir.ActionDecl):
                assert ids is not None
                if id(lab) not in ids:
                    continue
                conds.append(f"{v} == {ids[id(lab)]}")
            else:
                assert isinstance(lab, ir.Expr)
                conds.append(f"{v} == {cnum(self.const_value(lab))}")
        return conds, has_default

    # ------------------------------------------------------------------ calls

    def bind_params(
        self,
        params: list[ir.Param],
        args: list[ir.Expr | None],
        sc: Scope,
        inner: Scope,
        em: Em,
        body: object,
    ) -> list[tuple[ir.Expr, str]]:
        """Copy-in of directional arguments; the copy-outs to do. Headers and structs
        pass by reference unless aliasing makes copy-in/copy-out observable."""
        outs: list[tuple[ir.Expr, str]] = []
        roots = [
            root_var(a) if p.direction in ("out", "inout") else None
            for p, a in zip(params, args, strict=False)
        ]
        for p, a in zip(params, args, strict=False):
            t = strip(p.type)
            if isinstance(t, ir.ExternType):
                continue
            if a is None or isinstance(a, ir.DontCare):
                name = self.declare(p, inner)
                self.zero(name, t, em)
                continue
            if p.direction in ("in", ""):
                name = self.declare(p, inner)
                self.assign_to(name, t, a, sc, em)
                continue
            composite = not is_scalar(t)
            if composite:
                root = root_var(a)
                shared = root is not None and (roots.count(root) > 1 or _reaches(body, root))
                if not shared and _stable(a):
                    obj = self.expr(a, sc, em)
                    inner.env[p] = obj
                    if p.direction == "out":
                        self.zero(obj, t, em)
                    continue
            name = self.declare(p, inner)
            if p.direction == "inout":
                em.line(f"{name} = {self.expr(a, sc, em)};")
            else:
                self.zero(name, t, em)
            outs.append((a, name))
        return outs

    def copy_out(self, outs: list[tuple[ir.Expr, str]], sc: Scope, em: Em) -> None:
        for a, name in outs:
            if isinstance(a, ir.Slice):
                self.assign_slice(a, name, a.type, sc, em)
            else:
                em.line(f"{self.expr(a, sc, em)} = {name};")

    def inline_body(
        self,
        body: ir.Stmt,
        inner: Scope,
        outer: Scope,
        em: Em,
        outs: list[tuple[ir.Expr, str]],
        prologue: list[ir.Stmt] | None = None,
    ) -> None:
        ret = self.fn.label("ret")
        inner.ret_label = ret
        inner.brk = inner.cont = None
        if outs:
            inner.exit_label = self.fn.label("xit")
        for s in prologue or []:
            self.stmt(s, inner, em)
        self.stmt(body, inner, em)
        em.label(ret)
        if outs:
            em.label(inner.exit_label)
            self.copy_out(outs, outer, em)
            em.line(f"if ({outer.exit_flag}) goto {outer.exit_label};")

    def call_action(self, e: ir.Call, sc: Scope, em: Em) -> None:
        action = e.callee
        assert isinstance(action, ir.ActionDecl)
        dir_args = [a for p, a in zip(action.params, e.args, strict=False) if p.direction]
        cp = []
        for p, a in zip(action.params, e.args, strict=False):
            if not p.direction:
                if a is None:
                    cp.append("0" if not is_wide(p.type) else "wz()")
                else:
                    v = self.expr(a, sc, em)
                    cp.append(self.wide(v, a.type) if is_wide(p.type) else self.narrow(v, a.type))
        self.inline_action(action, dir_args, cp, sc, em)

    def inline_action(
        self, action: ir.ActionDecl, dir_args: list[ir.Expr | None], cp: list[str], sc: Scope,
        em: Em,
    ) -> None:  # fmt: skip
        inner = sc.child()
        dparams = [p for p in action.params if p.direction]
        outs = self.bind_params(dparams, dir_args, sc, inner, em, action.body)
        for p, v in zip(action.cp_params, cp, strict=False):
            name = self.declare(p, inner)
            em.line(f"{name} = {v};")
        self.inline_body(action.body, inner, sc, em, outs)

    def call_function(self, e: ir.Call, sc: Scope, em: Em) -> str:
        fn = e.callee
        assert isinstance(fn, ir.FunctionDecl)
        inner = sc.child()
        outs = self.bind_params(fn.params, e.args, sc, inner, em, fn.body)
        rt = strip(fn.return_type)
        r = "0"
        if not isinstance(rt, ir.VoidType):
            r = self.fn.tmp(self.types.ctype(rt))
            inner.ret_var = r
        self.inline_body(fn.body, inner, sc, em, outs)
        return r

    def method_stmt(self, e: ir.MethodCall, sc: Scope, em: Em) -> None:
        if e.method == "apply":
            t = e.target
            if isinstance(t, ir.InstanceRef) and isinstance(t.instance, ir.TableDecl):
                self.apply_table(e, sc, em)
            else:
                self.inline_block(e, sc, em)
            return
        tt = strip(e.target.type)
        if isinstance(tt, ir.HeaderType):
            self.header_method_stmt(e, tt, sc, em)
            return
        if isinstance(tt, ir.StackType):
            if e.method not in ("push_front", "pop_front"):
                raise CUnsupported(f"stack method {e.method}", e.loc)
            st = self.expr(e.target, sc, em)
            cnt = self.arg(e, 0, sc, em)
            em.line(f"stk_{e.method}({st}.h, &{st}.n, {tt.size}, sizeof {st}.h[0], {cnt});")
            return
        if isinstance(tt, ir.HeaderUnionType) and e.method == "isValid":
            return
        if isinstance(tt, ir.ExternType):
            self.extern_method(e, tt, sc, em)
            return
        raise CUnsupported(f"method {e.method} on {type(tt).__name__}", e.loc)

    def header_method_stmt(self, e: ir.MethodCall, tt: ir.HeaderType, sc: Scope, em: Em) -> None:
        """``setValid``/``setInvalid`` (a header that changes validity changes the packet's
        length); ``isValid`` as a statement does nothing."""
        h = self.expr(e.target, sc, em)
        nbytes = (tt.bit_width + 7) // 8
        if e.method == "setValid":
            with em.block(f"if (!{h}._v)"):
                em.line(f"memset(&{h}, 0, sizeof {h});")
                em.line(f"{h}._v = 1;")
                em.line(f"P->length_reg += {nbytes};")
        elif e.method == "setInvalid":
            with em.block(f"if ({h}._v)"):
                em.line(f"{h}._v = 0;")
                em.line(f"P->length_reg -= {nbytes};")
        elif e.method != "isValid":
            raise CUnsupported(f"header method {e.method}", e.loc)
        if e.method == "setValid":
            self.union_fixup(e.target, sc, em)

    def union_fixup(self, h: ir.Expr, sc: Scope, em: Em) -> None:
        """After a union member became valid, the other members become invalid."""
        if isinstance(h, ir.Member) and isinstance(strip(h.base.type), ir.HeaderUnionType):
            ut = strip(h.base.type)
            assert isinstance(ut, ir.HeaderUnionType)
            u = self.expr(h.base, sc, em)
            others = [f"{u}.{fld(f.name)}._v = 0;" for f in ut.fields if f.name != h.name]
            if others:
                with em.block(f"if ({u}.{fld(h.name)}._v)"):
                    em.line(" ".join(others))

    def inline_block(self, e: ir.MethodCall, sc: Scope, em: Em) -> None:
        applied = applied_block(e.target, sc.block_args)
        if applied is None:
            assert isinstance(e.target, ir.VarRef)
            raise CUnsupported(f"'{e.target.var.name}' is not bound to a block", e.loc)
        inst, where = applied
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        inner = self.block_scope(inst, sc, where)
        outs = self.bind_params(decl.params, e.args, sc, inner, em, None)
        if isinstance(decl, ir.ControlDecl):
            prologue: list[ir.Stmt] = [x for x in decl.locals if isinstance(x, ir.VarDecl)]
            self.inline_body(decl.body, inner, sc, em, outs, prologue)
        else:
            if sc.parser is None:
                raise CUnsupported("a sub-parser outside a parser", e.loc)
            for x in decl.locals:
                if isinstance(x, ir.VarDecl):
                    self.stmt(x, inner, em)
            self.parser_body(decl, inner, em)
            self.copy_out(outs, sc, em)

    def block_scope(self, inst: ir.Instance, sc: Scope, where: Any) -> Scope:
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        decl_path, decl_args = (sc.path, sc.block_args) if where is None else where[1:]
        path = ir.qualify(decl_path, inst.cp_name)
        names = self.register_locals(decl, path)
        env, block_args = self.ctor_bindings(decl, inst, decl_path, decl_args)
        local_actions = {id(x) for x in decl.locals if isinstance(x, ir.ActionDecl)}
        inner = sc.child(env=dict(sc.env))
        inner.env.update(env)
        inner.path = path
        inner.names = names
        inner.local_actions = local_actions
        inner.block_args = block_args
        inner.brk = inner.cont = None
        return inner

    def ctor_bindings(
        self, decl: ir.ParserDecl | ir.ControlDecl, inst: ir.Instance, decl_path: str,
        decl_args: dict[ir.Variable, Any],
    ) -> tuple[dict[ir.Variable, str], dict[ir.Variable, Any]]:  # fmt: skip
        env: dict[ir.Variable, str] = {}
        block_args: dict[ir.Variable, Any] = {}
        for p, a in zip(decl.ctor_params, inst.args, strict=False):
            if isinstance(a, ir.InstanceRef) and isinstance(a.instance, ir.Instance):
                block_args[p] = (a.instance, decl_path, decl_args)
            elif isinstance(a, ir.VarRef) and a.var in decl_args:
                block_args[p] = decl_args[a.var]
            else:
                v = self.const_value(a)
                t = strip(p.type)
                if is_wide(t):
                    env[p] = self.x_Const(ir.Const(t, a.loc, v), None, Em())  # type: ignore[arg-type]
                else:
                    env[p] = cnum(v)
        return env, block_args

    # ------------------------------------------------------------------ tables

    def gen_top(self, role: str, inst: ir.Instance) -> list[ir.Param]:
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        path = decl.name
        names = self.register_locals(decl, path)
        env, block_args = self.ctor_bindings(decl, inst, "", {})
        self.fn = fn = Fn()
        params: list[str] = []
        sm = None
        for p in decl.params:
            t = strip(p.type)
            if isinstance(t, ir.ExternType):
                continue
            n = f"p{len(params)}"
            params.append(f"{self.types.ctype(t)} *{n}")
            env[p] = f"(*{n})"
            if isinstance(t, ir.StructType) and t.name == "standard_metadata_t":
                sm = f"(*{n})"
        xflag = fn.tmp("int", "xf")
        sc = Scope(env=env, path=path, names=names,
                   local_actions={id(x) for x in decl.locals if isinstance(x, ir.ActionDecl)},
                   exit_label="Lexit", exit_flag=xflag, block_args=block_args, sm=sm,
                   role=role)  # fmt: skip
        em = Em()
        em.line(f"{xflag} = 0;")
        if isinstance(decl, ir.ParserDecl):
            self.parser_top(decl, sc, em)
        else:
            self.control_top(decl, role, sc, em)
        ret = "uint64_t"
        self.field_list_params = decl.params
        sig = ", ".join(["state_t *S", "pkt_t *P"] + params)
        body = ["    " + d for d in fn.decls] + em.lines
        self.functions.append(f"static {ret} blk_{role}({sig}) {{\n" + "\n".join(body) + "\n}")
        return decl.params

    def parser_top(self, decl: ir.ParserDecl, sc: Scope, em: Em) -> None:
        """A top-level parser's body: it returns its error code and leaves the cursor in
        ``P->pos``."""
        pos = self.fn.tmp("uint32_t", "pos")
        err = self.fn.tmp("uint64_t", "err")
        em.line(f"{pos} = 0;")
        sc.parser = (pos, err, "Lreject")
        for x in decl.locals:
            if isinstance(x, ir.VarDecl):
                self.stmt(x, sc, em)
        self.parser_body(decl, sc, em)
        em.line(f"P->pos = {pos};")
        em.line(f"return {self.err_code('NoError')};")
        em.label("Lreject")
        em.line(f"P->pos = {pos};")
        em.line(f"return {err};")
        em.label("Lexit")
        em.label("Labort")
        em.line(f"P->pos = {pos};")
        em.line("return 0;")

    def control_top(self, decl: ir.ControlDecl, role: str, sc: Scope, em: Em) -> None:
        """A top-level control's body; ingress sends the digests it made at its end."""
        sc.deparser = role == "deparser"
        if role == "ingress":
            self.digest_flag = self.fn.tmp("uint64_t", "dgf")
            em.line(f"{self.digest_flag} = 0;")
        for local in decl.locals:
            if isinstance(local, ir.VarDecl):
                self.stmt(local, sc, em)
        self.stmt(decl.body, sc, em)
        em.label("Lexit")
        if role == "ingress":
            self.end_digests(em)
            self.digest_flag = None
        em.label("Labort")
        em.line("return 0;")

    # ---------------------------------------------------- provided by the mixins (cgen.py)

    def table_c(self, decl: ir.TableDecl, sc: Scope) -> TableC:
        raise NotImplementedError

    def apply_table(self, e: ir.Expr, sc: Scope, em: Em) -> tuple[str, str]:
        raise NotImplementedError

    def extern_call(self, e: ir.Call, sc: Scope, em: Em) -> None:
        raise NotImplementedError

    def extern_method(self, e: ir.MethodCall, tt: ir.ExternType, sc: Scope, em: Em) -> None:
        raise NotImplementedError

    def arg(self, e: ir.Call | ir.MethodCall, i: int, sc: Scope, em: Em) -> str:
        raise NotImplementedError

    def end_digests(self, em: Em) -> None:
        raise NotImplementedError

    def packet_in_stmt(self, e: ir.MethodCall, sc: Scope, em: Em) -> None:
        raise NotImplementedError

    def packet_expr(self, e: ir.MethodCall, sc: Scope, em: Em) -> str:
        raise NotImplementedError

    def parser_body(self, decl: ir.ParserDecl, sc: Scope, em: Em) -> None:
        raise NotImplementedError

    def emit_value(self, x: str, t: ir.Type, em: Em) -> None:
        raise NotImplementedError


def _stable(a: ir.Expr) -> bool:
    """An lvalue whose C text names the same object every time (no indexes, no calls)."""
    while isinstance(a, ir.Member):
        a = a.base
    return isinstance(a, ir.VarRef)


def _reaches(body: object, var: ir.Variable) -> bool:
    if body is None:
        return False
    return any(isinstance(n, ir.VarRef) and n.var is var for n in walk(body))


__all__ = ["ArrayC", "CGenCore", "Em", "Fn", "Scope", "TableC", "cnum", "mask"]


def _wide_arithmetic(op: str, a: str, b: str, w: int, loc: ir.Loc) -> str:
    """Bitwise operations, + and - on a bit<w> wider than 64 bits (runtime helpers)."""
    if op in ("&", "|", "^"):
        f = {"&": "wand", "|": "wor", "^": "wxor"}[op]
        return f"{f}({a}, {b})"
    if op == "+":
        return f"wadd({a}, {b}, {w})"
    if op == "-":
        return f"wsub({a}, {b}, {w})"
    raise CUnsupported(f"operator {op} on bit<{w}>", loc)


def _arithmetic(op: str, a: str, b: str, t: ir.Type, loc: ir.Loc) -> str:
    """An arithmetic or bitwise operation on a value of at most 64 bits, kept in width."""
    w = scalar_width(t)
    if op in ("&", "|", "^"):
        return f"(({a}) {op} ({b}))"
    if op in ("+", "-", "*"):
        return f"((({a}) {op} ({b})) & {cnum(mask(w))})" if w < 64 else f"(({a}) {op} ({b}))"
    signed = is_signed(t)
    if op == "/":
        return f"sdiv64({a}, {b}, {w})" if signed else f"udiv64({a}, {b})"
    if op == "%":
        return f"smod64({a}, {b}, {w})" if signed else f"umod64({a}, {b})"
    if op == "|+|":
        return f"ssat_add({a}, {b}, {w})" if signed else f"usat_add({a}, {b}, {w})"
    if op == "|-|":
        return f"ssat_sub({a}, {b}, {w})" if signed else f"usat_sub({a}, {b})"
    raise CUnsupported(f"operator {op}", loc)


def _key_words(decl: ir.TableDecl) -> tuple[list[tuple[int, int, str]], int]:
    """Each key field's (first word, width, match kind) in the key's 64-bit words
    (selector keys left out), and the words in all."""
    key_words: list[tuple[int, int, str]] = []
    kw = 0
    for k in decl.keys:
        if k.match_kind == "selector":
            continue
        w = scalar_width(k.expr.type)
        if k.match_kind == "range" and w > 64:
            raise CUnsupported(f"range match on {w} bits", k.loc)
        key_words.append((kw, w, k.match_kind))
        kw += max(1, (w + 63) // 64)
    return key_words, kw


def _param_words(action: ir.ActionDecl) -> tuple[list[tuple[int, int]], int]:
    """Each control-plane parameter's (first word, width) in an entry's action data,
    and the words in all."""
    words = []
    off = 0
    for p in action.cp_params:
        w = scalar_width(p.type)
        words.append((off, w))
        off += max(1, (w + 63) // 64)
    return words, off
