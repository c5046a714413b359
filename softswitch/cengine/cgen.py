"""IR -> C: one C function per top-level block of a v1model program, with actions, tables,
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
from softswitch.engine.codegen_stmt import _dynamic_indexes, _top_exprs
from softswitch.engine.codegen_walk import has_return, root_var, walk
from softswitch.engine.compiled import CompiledProgram
from softswitch.engine.tables import MatchKind
from softswitch.v1model.primitives import _unwrap_struct_init

PARSER_LOOP_LIMIT = 10000  # back-edge transitions before error.ParserTimeout (as Python)
DROP_PORT = 511


def mask(w: int) -> int:
    return (1 << w) - 1


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


class CGen:
    """Generates the C source of one v1model program (see :func:`generate`)."""

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
        self.fn = Fn()
        self.uses_random = False
        self.field_lists: dict[int, list[str]] = {}
        self.pins: dict[int, str] = {}  # id(Index) -> its index, evaluated once
        # digests: (name, field widths) per id; the ingress call sites (id, values)
        self.digests: list[tuple[str, list[int]]] = []
        self.digest_sites: list[tuple[int, list[tuple[str, int]]]] = []
        self.digest_flag: str | None = None
        self.asserts: list[str] = []  # source location of each assert/assume

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
            raise CUnsupported(f"extern {t.name} ({name})", inst.loc)
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

    def table_arefs(self, decl: ir.TableDecl) -> list[ir.ActionRef]:
        arefs = list(decl.actions)
        if decl.default_action is not None and all(
            a.action is not decl.default_action.action for a in arefs
        ):
            arefs.append(decl.default_action)
        out: list[ir.ActionRef] = []
        seen: set[int] = set()
        for a in arefs:
            if id(a.action) not in seen:
                seen.add(id(a.action))
                out.append(a)
        return out

    def make_table(self, decl: ir.TableDecl, path: str) -> TableC:
        name = ir.qualify(path, decl.cp_name)
        if name in self._tables_by_name:
            return self._tables_by_name[name]
        if decl.implementation is not None:
            raise CUnsupported(f"table {name} with an action profile/selector", decl.loc)
        if decl.support_timeout:
            raise CUnsupported(f"table {name} with idle timeout", decl.loc)
        key_words: list[tuple[int, int, str]] = []
        kw = 0
        for k in decl.keys:
            if k.match_kind == "selector":
                raise CUnsupported("selector keys", k.loc)
            w = scalar_width(k.expr.type)
            if k.match_kind == "range" and w > 64:
                raise CUnsupported(f"range match on {w} bits", k.loc)
            key_words.append((kw, w, k.match_kind))
            kw += max(1, (w + 63) // 64)
        if kw > 32:
            raise CUnsupported(f"table {name}: key wider than 2048 bits", decl.loc)
        action_ids: dict[str, int] = {}
        arg_words: dict[str, list[tuple[int, int]]] = {}
        aw = 0
        for i, aref in enumerate(self.table_arefs(decl)):
            fq = self.action_fq(aref.action, path)
            action_ids[fq] = i
            words = []
            off = 0
            for p in aref.action.cp_params:
                w = scalar_width(p.type)
                words.append((off, w))
                off += max(1, (w + 63) // 64)
            arg_words[fq] = words
            aw = max(aw, off)
        if aw > 64:
            raise CUnsupported(f"table {name}: action data wider than 64 words", decl.loc)
        table = self.compiled.tables[name]
        strategy = 0 if table.strategy in ("exact", "lpm", "keyless") else 1
        tc = TableC(len(self.tables), name, decl, path, key_words, kw, action_ids, arg_words, aw,
                    strategy)  # fmt: skip
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
                        tmp = self.fn.tmp(self.types.ctype(px.type) if not isinstance(
                            strip(px.type), ir.IntLitType) else "uint64_t")
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
            wa, wb = scalar_width(lt), scalar_width(rt)
            w = wa + wb
            if w <= 64:
                return f"((({a}) << {wb}) | ({b}))"
            self.types.ctype(ir.BitType(w))
            return f"wor(wshl({self.wide(a, lt)}, {wb}, {w}), {self.wide(b, rt)})"
        if op in ("<<", ">>"):
            w = scalar_width(t)
            n = self.narrow(b, rt)
            if is_wide(rt):
                n = f"(wlt(wfrom(4096), {b}) ? 4096ull : wlo({b}))"
            if is_wide(t):
                if op == "<<":
                    return f"wshl({a}, {n}, {w})"
                if is_signed(t):
                    raise CUnsupported("arithmetic shift of a wide signed value", e.loc)
                return f"wshr({a}, {n})"
            if op == "<<":
                return f"shl64({a}, {n}, {w})"
            if is_signed(t):
                return f"sshr64({a}, {n}, {w})"
            return f"shr64({a}, {n}, {w})"
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if is_wide(lt) or is_wide(rt):
                if is_signed(lt):
                    raise CUnsupported("comparison of wide signed values", e.loc)
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
        if isinstance(t, ir.IntLitType):
            if op in ("+", "-", "*", "&", "|", "^"):
                return f"(uint64_t)((int64_t)({a}) {op} (int64_t)({b}))"
            raise CUnsupported(f"operator {op} on unsized integers at run time", e.loc)
        w = scalar_width(t)
        m = cnum(mask(w))
        if is_wide(t):
            if op in ("&", "|", "^"):
                f = {"&": "wand", "|": "wor", "^": "wxor"}[op]
                return f"{f}({a}, {b})"
            if op == "+":
                return f"wadd({a}, {b}, {w})"
            if op == "-":
                return f"wsub({a}, {b}, {w})"
            raise CUnsupported(f"operator {op} on bit<{w}>", e.loc)
        if op in ("&", "|", "^"):
            return f"(({a}) {op} ({b}))"
        if op in ("+", "-", "*"):
            return f"((({a}) {op} ({b})) & {m})" if w < 64 else f"(({a}) {op} ({b}))"
        signed = is_signed(t)
        if op == "/":
            return f"sdiv64({a}, {b}, {w})" if signed else f"udiv64({a}, {b})"
        if op == "%":
            return f"smod64({a}, {b}, {w})" if signed else f"umod64({a}, {b})"
        if op == "|+|":
            return f"ssat_add({a}, {b}, {w})" if signed else f"usat_add({a}, {b}, {w})"
        if op == "|-|":
            return f"ssat_sub({a}, {b}, {w})" if signed else f"usat_sub({a}, {b})"
        raise CUnsupported(f"operator {op}", e.loc)

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
            inner: list[str] = []
            for f in t.fields:
                inner += self._eq_conds(f"{a}.{fld(f.name)}", f"{b}.{fld(f.name)}", f.type)
            fields = " && ".join(inner) or "1"
            return [f"({a}._v == {b}._v && (!{a}._v || ({fields})))"]
        if isinstance(t, ir.StructType):
            out: list[str] = []
            for f in t.fields:
                out += self._eq_conds(f"{a}.{fld(f.name)}", f"{b}.{fld(f.name)}", f.type)
            return out
        if is_wide(t):
            return [f"weq({a}, {b})"]
        if is_scalar(t):
            return [f"{a} == {b}"]
        if isinstance(t, ir.VarbitType):
            return [f"({a}.nbits == {b}.nbits && memcmp({a}.b, {b}.b, {a}.nbits / 8) == 0)"]
        if isinstance(t, ir.HeaderUnionType):
            out: list[str] = []
            for f in t.fields:
                out += self._eq_conds(f"{a}.{fld(f.name)}", f"{b}.{fld(f.name)}", f.type)
            return out
        if isinstance(t, ir.StackType):
            out = []
            for i in range(t.size):
                out += self._eq_conds(f"{a}.h[{i}]", f"{b}.h[{i}]", t.elem)
            return out
        raise CUnsupported(f"comparison of {type(t).__name__} values")

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
        wd = scalar_width(d)
        if isinstance(s, ir.IntLitType):
            if wd > 64:
                return f"wmask(((int64_t)({a}) < 0 ? wnot(wz(), {wd}) : wz()), {wd})"
            return f"(({a}) & {cnum(mask(wd))})"
        ws = scalar_width(s)
        if is_signed(s) and wd > ws:
            if wd > 64:
                raise CUnsupported("sign extension to more than 64 bits", e.loc)
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
        if sc.parser is None and not isinstance(s, ir.Block):
            dyn = [x for x in _dynamic_indexes(_top_exprs(s)) if id(x) not in self.pins]
            if dyn:
                self.guarded(s, dyn, sc, em)
                return
        self._stmt(s, sc, em)

    def guarded(self, s: ir.Stmt, dyn: list[ir.Index], sc: Scope, em: Em) -> None:
        """``s`` with run-time stack indexes, as the Python engine runs it: each index
        evaluated once; out of range, an assignment's left side skips the statement, its
        right side assigns zero/invalid, a condition is false, anything else is skipped."""
        lhs_ids = {id(x) for x in _dynamic_indexes([s.lhs])} if isinstance(s, ir.Assign) else set()
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
        subj_t = strip(s.subject.type)
        ids: dict[int, int] | None = None
        if isinstance(subj_t, ir.ActionRunType):
            assert isinstance(s.subject, ir.Member)
            _, an = self.apply_table(s.subject.base, sc, em)
            info = self.table_c(subj_t.table, sc)
            ids = {}
            for aref in self.table_arefs(subj_t.table):
                ids[id(aref.action)] = info.action_ids[self.action_fq(aref.action, info.path)]
            v = an
        else:
            if is_wide(subj_t):
                raise CUnsupported("switch on a wide value", s.loc)
            v = self.fn.tmp("uint64_t")
            em.line(f"{v} = {self.expr(s.subject, sc, em)};")
        end = self.fn.label("swend")
        pending: list[str] = []
        first = True
        default_body: ir.Block | None = None
        has_default = False
        for case in s.cases:
            for lab in case.labels:
                if lab == "default":
                    has_default = True
                    continue
                if isinstance(lab, ir.ActionDecl):
                    assert ids is not None
                    if id(lab) not in ids:
                        continue
                    pending.append(f"{v} == {ids[id(lab)]}")
                else:
                    assert isinstance(lab, ir.Expr)
                    pending.append(f"{v} == {cnum(self.const_value(lab))}")
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
                    cp.append(("0" if not is_wide(p.type) else "wz()"))
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
        where = None
        if isinstance(e.target, ir.VarRef):
            where = sc.block_args.get(e.target.var)
            if where is None:
                raise CUnsupported(f"'{e.target.var.name}' is not bound to a block", e.loc)
            inst = where[0]
        else:
            assert isinstance(e.target, ir.InstanceRef)
            inst = e.target.instance
        assert isinstance(inst, ir.Instance) and isinstance(inst.type, ir.BlockType)
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

    def table_c(self, decl: ir.TableDecl, sc: Scope) -> TableC:
        t = sc.names.get(id(decl))
        if not isinstance(t, TableC):
            raise CUnsupported(f"table {decl.name} not instantiated here", decl.loc)
        return t

    def apply_table(self, e: ir.Expr, sc: Scope, em: Em) -> tuple[str, str]:
        assert isinstance(e, ir.MethodCall) and isinstance(e.target, ir.InstanceRef)
        decl = e.target.instance
        assert isinstance(decl, ir.TableDecl)
        tc = self.table_c(decl, sc)
        T = f"S->tbl[{tc.index}]"
        hit = self.fn.tmp("uint64_t", "hit")
        an = self.fn.tmp("uint64_t", "act")
        args = self.fn.tmp("const uint64_t *", "args")
        row = self.fn.tmp("const uint64_t *", "row")
        if decl.keys:
            k = self.fn.tmp(f"uint64_t", "key")
            self.fn.decls[-1] = f"uint64_t {k}[{max(1, tc.kw)}];"
            for kd, (off, w, _kind) in zip(decl.keys, tc.key_words, strict=True):
                v = self.expr(kd.expr, sc, em)
                kt = strip(kd.expr.type)
                if is_wide(kt):
                    for i in range((w + 63) // 64):
                        em.line(f"{k}[{off + i}] = ({v}).w[{i}];")
                else:
                    em.line(f"{k}[{off}] = {v};")
            em.line(f"{row} = table_lookup(&{T}, {k});")
        else:
            em.line(f"{row} = 0;")
        with em.block(f"if ({row})"):
            em.line(f"{hit} = 1; {an} = {row}[0]; {args} = {row} + {tc.args_offset};")
            if tc.direct_counter:
                em.line(f"{T}.cnt[2 * {row}[1]] += 1; {T}.cnt[2 * {row}[1] + 1] += P->ingress_length;")
            if tc.direct_meter is not None:
                units = "1" if tc.direct_meter == "packets" else "P->ingress_length"
                em.line(f"P->meter_color = meter_exec(&{T}.mtr[{row}[1]], {units}, S->now_ns);")
        with em.block("else"):
            em.line(f"{hit} = 0; {an} = {T}.def_action; {args} = {T}.def_args;")
        first = True
        for aref in self.table_arefs(decl):
            fq = self.action_fq(aref.action, tc.path)
            aid = tc.action_ids[fq]
            ndir = len([p for p in aref.action.params if p.direction])
            dir_args: list[ir.Expr | None] = list(aref.args[:ndir])
            dir_args += [None] * (ndir - len(dir_args))
            with em.block(f"{'if' if first else 'else if'} ({an} == {aid})"):
                cp = []
                for (off, w), p in zip(tc.arg_words[fq], aref.action.cp_params, strict=True):
                    if w > 64:
                        nw = (w + 63) // 64
                        tmp = self.fn.tmp("wide_t")
                        em.line(f"{tmp} = wz();")
                        for i in range(nw):
                            em.line(f"{tmp}.w[{i}] = {args}[{off + i}];")
                        cp.append(tmp)
                    else:
                        cp.append(f"{args}[{off}]")
                    del p
                self.inline_action(aref.action, dir_args, cp, sc, em)
            first = False
        return hit, an

    # ------------------------------------------------------------------ externs

    def extern_call(self, e: ir.Call, sc: Scope, em: Em) -> None:
        name = e.callee.name
        meth = getattr(self, "fn_" + name, None)
        if meth is None:
            raise CUnsupported(f"extern function {name}", e.loc)
        meth(e, sc, em)

    def arg(self, e: ir.Call | ir.MethodCall, i: int, sc: Scope, em: Em) -> str:
        a = e.args[i]
        if a is None:
            raise CUnsupported(f"missing argument {i} of {getattr(e, 'method', '')}", e.loc)
        return self.narrow(self.expr(a, sc, em), a.type)

    def write_out(self, a: ir.Expr | None, val: str, vt: ir.Type, sc: Scope, em: Em) -> None:
        if a is None or isinstance(a, ir.DontCare):
            return
        if isinstance(a, ir.Slice):
            self.assign_slice(a, val, vt, sc, em)
            return
        lv = self.expr(a, sc, em)
        t = strip(a.type)
        if is_wide(t):
            em.line(f"{lv} = wmask({self.wide(val, vt)}, {scalar_width(t)});")
        else:
            em.line(f"{lv} = ({self.narrow(val, vt)}) & {cnum(mask(scalar_width(t)))};")

    def fn_mark_to_drop(self, e: ir.Call, sc: Scope, em: Em) -> None:
        if e.args and e.args[0] is not None:
            sm = self.expr(e.args[0], sc, em)
        elif sc.sm is not None:
            sm = sc.sm
        else:
            raise CUnsupported("mark_to_drop() without standard_metadata in scope", e.loc)
        em.line(f"{sm}.f_egress_spec = {DROP_PORT};")
        em.line(f"{sm}.f_mcast_grp = 0;")

    def fn_log_msg(self, e: ir.Call, sc: Scope, em: Em) -> None:
        pass  # no effect on packets; the Python engine logs them

    def fn_static_assert(self, e: ir.Call, sc: Scope, em: Em) -> None:
        pass

    def fn_verify(self, e: ir.Call, sc: Scope, em: Em) -> None:
        if sc.parser is None:
            raise CUnsupported("verify() outside a parser", e.loc)
        _, err, rej = sc.parser
        with em.block(f"if (!({self.arg(e, 0, sc, em)}))"):
            em.line(f"{err} = {self.arg(e, 1, sc, em)};")
            em.line(f"goto {rej};")

    def fn_assert(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self.asserts.append(str(e.loc))
        with em.block(f"if (!({self.arg(e, 0, sc, em)}))"):
            em.line(f"P->assert_failed = {len(self.asserts)};")
            em.line("goto Labort;")

    fn_assume = fn_assert

    def fn_random(self, e: ir.Call, sc: Scope, em: Em) -> None:
        a0 = e.args[0]
        assert a0 is not None
        if is_wide(a0.type):
            raise CUnsupported("random() into more than 64 bits", e.loc)
        lo, hi = self.arg(e, 1, sc, em), self.arg(e, 2, sc, em)
        self.write_out(a0, f"rng_between(&S->rng, {lo}, {hi})", ir.BitType(64), sc, em)

    def fn_hash(self, e: ir.Call, sc: Scope, em: Em) -> None:
        a = e.args
        out = a[0]
        assert out is not None
        if is_wide(out.type):
            raise CUnsupported("hash() into more than 64 bits", e.loc)
        h = self.hash_of(a[1], a[3], False, sc, em)
        base, mx = self.arg(e, 2, sc, em), self.arg(e, 4, sc, em)
        r = self.fn.tmp("uint64_t")
        em.line(f"{r} = ({mx}) > 0 ? ({base}) + ({h}) % ({mx}) : ({base});")
        self.write_out(out, r, ir.BitType(64), sc, em)

    def hash_of(self, algo: ir.Expr | None, data: ir.Expr | None, payload: bool, sc: Scope,
                em: Em) -> str:  # fmt: skip
        if not isinstance(algo, ir.EnumMember):
            raise CUnsupported("a hash algorithm chosen at run time", getattr(algo, "loc", None))
        name = algo.member
        fn = {"crc32": "h_crc32", "crc16": "h_crc16", "csum16": "h_csum16", "xor16": "h_xor16",
              "identity": "h_identity"}.get(name)  # fmt: skip
        if fn is None:
            raise CUnsupported(f"hash algorithm {name}", algo.loc)
        assert data is not None
        bb = self.pack(data, sc, em)
        if payload:
            em.line(f"bb_bytes(&{bb}, P->data + P->pos, P->len - P->pos);")
        return f"{fn}({bb}.b, bb_len(&{bb}))"

    def flat(self, e: ir.Expr, sc: Scope, em: Em) -> list[tuple[str, int, str | None, bool]]:
        """``(value, width, validity condition, wide)`` of each scalar of a field list."""
        t = strip(e.type)
        if isinstance(e, ir.ListExpr):
            out: list[tuple[str, int, str | None, bool]] = []
            for x in e.elems:
                out += self.flat(x, sc, em)
            return out
        if isinstance(e, ir.StructInit):
            out = []
            for x in e.fields.values():
                out += self.flat(x, sc, em)
            return out
        if isinstance(t, (ir.HeaderType, ir.StructType)):
            return self.flat_obj(self.expr(e, sc, em), t, None)
        x = self.expr(e, sc, em)
        valid = None
        if isinstance(e, ir.Member) and isinstance(strip(e.base.type), ir.HeaderType):
            valid = f"{self.expr(e.base, sc, em)}._v"
        if isinstance(t, ir.VarbitType):
            return [(x, -1, valid, False)]
        if not is_scalar(t):
            raise CUnsupported(f"a {type(t).__name__} in a field list", e.loc)
        w = scalar_width(t) if not isinstance(t, ir.IntLitType) else 32
        return [(x, w, valid, is_wide(t))]

    def flat_obj(self, x: str, t: ir.Type, valid: str | None) -> list[tuple[str, int, str | None, bool]]:
        t = strip(t)
        if isinstance(t, ir.HeaderType):
            out: list[tuple[str, int, str | None, bool]] = []
            for f in t.fields:
                out += self.flat_obj(f"{x}.{fld(f.name)}", f.type, f"{x}._v")
            return out
        if isinstance(t, ir.StructType):
            out = []
            for f in t.fields:
                out += self.flat_obj(f"{x}.{fld(f.name)}", f.type, valid)
            return out
        if isinstance(t, ir.VarbitType):
            return [(x, -1, valid, False)]
        if not is_scalar(t):
            raise CUnsupported(f"{type(t).__name__} in a field list")
        return [(x, scalar_width(t), valid, is_wide(t))]

    def pack(self, data: ir.Expr, sc: Scope, em: Em) -> str:
        fields = self.flat(data, sc, em)
        total = sum(w for _, w, _, _ in fields if w > 0)
        total += sum(8 * self._varbit_bytes(x) for x, w, _, _ in fields if w < 0)
        nbytes = (total + 7) // 8 + 4
        buf = self.fn.tmp("uint8_t", "hb")
        self.fn.decls[-1] = f"uint8_t {buf}[{nbytes + 1600}];"
        bb = self.fn.tmp("bitbuf_t", "bb")
        em.line(f"{bb}.b = {buf}; {bb}.nbits = 0; {bb}.cap = sizeof {buf};")
        for x, w, valid, wide in fields:
            if w < 0:
                put = f"bb_bytes(&{bb}, {x}.b, (uint32_t)({x}.nbits / 8));"
            elif wide:
                put = f"bb_putw(&{bb}, {x}, {w});"
            else:
                put = f"bb_put_fast(&{bb}, {x}, {w});"
            em.line(f"if ({valid}) {put}" if valid else put)
        return bb

    @staticmethod
    def _varbit_bytes(x: str) -> int:
        return 128  # room for any varbit's bytes (the buffer has 1600 spare bytes too)

    def fn_verify_checksum(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self._checksum(e, sc, em, update=False, payload=False)

    def fn_update_checksum(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self._checksum(e, sc, em, update=True, payload=False)

    def fn_verify_checksum_with_payload(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self._checksum(e, sc, em, update=False, payload=True)

    def fn_update_checksum_with_payload(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self._checksum(e, sc, em, update=True, payload=True)

    def _checksum(self, e: ir.Call, sc: Scope, em: Em, update: bool, payload: bool) -> None:
        a = e.args
        cond = self.arg(e, 0, sc, em)
        target = a[2]
        assert target is not None
        w = scalar_width(target.type)
        if w > 64:
            raise CUnsupported("a checksum field wider than 64 bits", e.loc)
        with em.block(f"if ({cond})"):
            h = self.hash_of(a[3], a[1], payload, sc, em)
            r = self.fn.tmp("uint64_t")
            em.line(f"{r} = ({h}) & {cnum(mask(w))};")
            if update:
                self.write_out(target, r, ir.BitType(64), sc, em)
            else:
                with em.block(f"if ({r} != {self.arg(e, 2, sc, em)})"):
                    em.line("P->checksum_error = 1;")

    def _clone_const(self, e: ir.Call) -> None:
        if not isinstance(e.args[0], (ir.EnumMember, ir.Const)):
            raise CUnsupported("a clone type chosen at run time", e.loc)

    def fn_clone(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self._clone_const(e)
        em.line(f"P->clone_session = {self.arg(e, 1, sc, em)}; P->has_clone = 1; P->clone_fl = -1;")

    fn_clone3 = fn_clone

    def fn_clone_preserving_field_list(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self._clone_const(e)
        em.line(f"P->clone_session = {self.arg(e, 1, sc, em)}; P->has_clone = 1;")
        em.line(f"P->clone_fl = (int64_t){self.arg(e, 2, sc, em)};")

    def fn_resubmit(self, e: ir.Call, sc: Scope, em: Em) -> None:
        em.line("P->has_resubmit = 1; P->resubmit_fl = -1;")

    def fn_resubmit_preserving_field_list(self, e: ir.Call, sc: Scope, em: Em) -> None:
        em.line(f"P->has_resubmit = 1; P->resubmit_fl = (int64_t){self.arg(e, 0, sc, em)};")

    def fn_recirculate(self, e: ir.Call, sc: Scope, em: Em) -> None:
        em.line("P->has_recirculate = 1; P->recirculate_fl = -1;")

    def fn_recirculate_preserving_field_list(self, e: ir.Call, sc: Scope, em: Em) -> None:
        em.line(
            f"P->has_recirculate = 1; P->recirculate_fl = (int64_t){self.arg(e, 0, sc, em)};"
        )

    def fn_digest(self, e: ir.Call, sc: Scope, em: Em) -> None:
        """A digest call in ingress (BMv2 delivers no other): the message is built at the
        end of ingress from the fields' final values, as the Python engine does (values
        that are not plain fields are taken at the call)."""
        if sc.role != "ingress" or self.digest_flag is None:
            return
        data = e.args[1]
        assert data is not None
        t = strip(e.type_args[0] if e.type_args else data.type)
        name = getattr(t, "name", "digest")
        ann = getattr(t, "annotations", {}).get("name")
        if ann:
            name = str(ann[0]).strip('"')
            name = name[1:] if name.startswith(".") else name
        data = _unwrap_struct_init(data)
        values: list[tuple[str, int]] = []
        for x, w, late in self.digest_fields(data, sc, em):
            if w < 0:
                raise CUnsupported("a varbit field in a digest", e.loc)
            if not late:
                tmp = self.fn.tmp("wide_t" if w > 64 else "uint64_t", "dv")
                em.line(f"{tmp} = {x};")
                x = tmp
            values.append((x, w))
        widths = [w for _, w in values]
        if sum(max(1, (w + 63) // 64) for w in widths) > 64:
            raise CUnsupported("a digest of more than 64 words", e.loc)
        ident = len(self.digests)
        self.digests.append((name, widths))
        self.digest_sites.append((ident, values))
        em.line(f"{self.digest_flag} = {ident + 1};")

    def digest_fields(self, e: ir.Expr, sc: Scope, em: Em) -> list[tuple[str, int, bool]]:
        """``(value, width, read late)`` of each scalar of a digest's data."""
        t = strip(e.type)
        if isinstance(e, ir.ListExpr):
            out: list[tuple[str, int, bool]] = []
            for x in e.elems:
                out += self.digest_fields(x, sc, em)
            return out
        late = _is_path(e)
        return [(x, w, late) for x, w, _, _ in (
            self.flat_obj(self.expr(e, sc, em), t, None)
            if isinstance(t, (ir.HeaderType, ir.StructType)) else self.flat(e, sc, em)
        )]  # fmt: skip

    def end_digests(self, em: Em) -> None:
        """At the end of ingress: the message of the last digest call that ran."""
        flag = self.digest_flag
        for ident, values in self.digest_sites:
            with em.block(f"if ({flag} == {ident + 1})"):
                em.line(f"P->dg_id = {ident + 1};")
                k = 0
                for x, w in values:
                    if w > 64:
                        for i in range((w + 63) // 64):
                            em.line(f"P->dg[{k}] = ({x}).w[{i}];")
                            k += 1
                    else:
                        em.line(f"P->dg[{k}] = {x};")
                        k += 1
                em.line(f"P->dg_n = {k};")

    def fn_truncate(self, e: ir.Call, sc: Scope, em: Em) -> None:
        em.line(f"P->truncate = {self.arg(e, 0, sc, em)};")

    def extern_method(self, e: ir.MethodCall, tt: ir.ExternType, sc: Scope, em: Em) -> None:
        ext, m = tt.name, e.method
        if ext == "packet_in":
            self.packet_in_stmt(e, sc, em)
            return
        if ext == "packet_out":
            if m != "emit" or not sc.deparser:
                raise CUnsupported(f"packet_out.{m} here", e.loc)
            a = e.args[0]
            assert a is not None
            self.emit_value(self.expr(a, sc, em), a.type, em)
            return
        if not isinstance(e.target, ir.InstanceRef):
            raise CUnsupported(f"{ext}.{m} on a non-instance", e.loc)
        if ext == "direct_counter" and m == "count":
            return  # counted on every hit of its table
        if ext == "direct_meter" and m == "read":
            self.write_out(e.args[0], "P->meter_color", ir.BitType(64), sc, em)
            return
        obj = sc.names.get(id(e.target.instance))
        if not isinstance(obj, ArrayC):
            raise CUnsupported(f"{ext} instance {e.target.instance.name}", e.loc)
        arr = f"S->arr{obj.index}"
        if ext == "register" and m == "read":
            idx = self.fn.tmp("uint64_t")
            em.line(f"{idx} = {self.arg(e, 1, sc, em)};")
            with em.block(f"if ({idx} < {obj.size})"):
                vt = ir.BitType(obj.width)
                self.write_out(e.args[0], f"{arr}[{idx}]", vt, sc, em)
            return
        if ext == "register" and m == "write":
            idx = self.fn.tmp("uint64_t")
            em.line(f"{idx} = {self.arg(e, 0, sc, em)};")
            a1 = e.args[1]
            assert a1 is not None
            v = self.expr(a1, sc, em)
            with em.block(f"if ({idx} < {obj.size})"):
                if obj.width > 64:
                    em.line(f"{arr}[{idx}] = wmask({self.wide(v, a1.type)}, {obj.width});")
                else:
                    em.line(f"{arr}[{idx}] = ({self.narrow(v, a1.type)}) & {cnum(mask(obj.width))};")
            return
        if ext == "meter" and m == "execute_meter":
            idx = self.fn.tmp("uint64_t")
            em.line(f"{idx} = {self.arg(e, 0, sc, em)};")
            kind = self.compiled.meters[obj.name].kind
            units = "1" if kind == "packets" else "P->ingress_length"
            col = self.fn.tmp("uint64_t")
            em.line(f"{col} = {idx} < {obj.size} ? meter_exec(&((meter_t *)S->arr[{obj.index}])[{idx}], {units}, S->now_ns) : 0;")
            self.write_out(e.args[1], col, ir.BitType(64), sc, em)
            return
        if ext == "counter" and m == "count":
            idx = self.fn.tmp("uint64_t")
            em.line(f"{idx} = {self.arg(e, 0, sc, em)};")
            with em.block(f"if ({idx} < {obj.size})"):
                em.line(f"{arr}[2 * {idx}] += 1; {arr}[2 * {idx} + 1] += P->ingress_length;")
            return
        raise CUnsupported(f"extern method {ext}.{m}", e.loc)

    # ------------------------------------------------------------------ packets

    def packet_in_stmt(self, e: ir.MethodCall, sc: Scope, em: Em) -> None:
        if sc.parser is None:
            raise CUnsupported("packet_in outside a parser", e.loc)
        pos, err, rej = sc.parser
        pts = self.err_code("PacketTooShort")
        if e.method == "extract":
            target = e.args[0]
            nbits = e.args[1] if len(e.args) > 1 else None
            if target is None or isinstance(target, ir.DontCare):
                if not e.type_args:
                    raise CUnsupported("extract into _ without a type", e.loc)
                ht = strip(e.type_args[0])
                if not isinstance(ht, ir.HeaderType) or _varbit_of(ht) is not None:
                    raise CUnsupported("extract into _ of this type", e.loc)
                nb = (ht.bit_width + 7) // 8
                em.line(f"if ({pos} + {nb} > P->len) {{ {err} = {pts}; goto {rej}; }}")
                em.line(f"{pos} += {nb};")
                return
            stack: tuple[str, int] | None = None
            others: list[str] = []
            if (
                isinstance(target, ir.Member)
                and target.name == "next"
                and isinstance(strip(target.base.type), ir.StackType)
            ):
                st = strip(target.base.type)
                assert isinstance(st, ir.StackType)
                base = self.expr(target.base, sc, em)
                soob = self.err_code("StackOutOfBounds")
                em.line(f"if ({base}.n >= {st.size}) {{ {err} = {soob}; goto {rej}; }}")
                h = f"{base}.h[{base}.n]"
                stack = (base, st.size)
            elif (
                isinstance(target, ir.Member)
                and isinstance(target.base, ir.Member)
                and target.base.name == "next"
                and isinstance(strip(target.base.base.type), ir.StackType)
            ):  # stack_of_unions.next.member: the union at nextIndex; the stack advances
                st = strip(target.base.base.type)
                assert isinstance(st, ir.StackType)
                base = self.expr(target.base.base, sc, em)
                soob = self.err_code("StackOutOfBounds")
                em.line(f"if ({base}.n >= {st.size}) {{ {err} = {soob}; goto {rej}; }}")
                u = f"{base}.h[{base}.n]"
                h = f"{u}.{fld(target.name)}"
                ut = strip(st.elem)
                assert isinstance(ut, ir.HeaderUnionType)
                others = [f"{u}.{fld(f.name)}._v = 0;" for f in ut.fields if f.name != target.name]
                stack = (base, st.size)
            else:
                h = self.expr(target, sc, em)
            ht = strip(target.type)
            if not isinstance(ht, ir.HeaderType):
                raise CUnsupported(f"extract into {type(ht).__name__}", e.loc)
            vb = _varbit_of(ht)
            if (vb is None) != (nbits is None):
                raise CUnsupported("extract whose size argument does not fit the header", e.loc)
            if vb is None:
                nb = (ht.bit_width + 7) // 8
                em.line(f"if ({pos} + {nb} > P->len) {{ {err} = {pts}; goto {rej}; }}")
                self.read_header(h, ht, f"P->data + {pos}", None, em)
                em.line(f"{h}._v = 1;")
                em.line(f"{pos} += {nb};")
            else:
                assert nbits is not None
                if ht.bit_width % 8:
                    raise CUnsupported(f"header {ht.name}: varbit beside fields not in whole bytes", ht.loc)
                vt = strip(vb.type)
                assert isinstance(vt, ir.VarbitType)
                n = self.fn.tmp("uint64_t", "vn")
                em.line(f"{n} = {self.narrow(self.expr(nbits, sc, em), nbits.type)};")
                em.line(f"if ({n} > {vt.max_width}) {{ {err} = {self.err_code('HeaderTooShort')}; goto {rej}; }}")
                em.line(f"if ({n} % 8) {{ {err} = {self.err_code('ParserInvalidArgument')}; goto {rej}; }}")
                em.line(f"if ({pos} + ({ht.bit_width} + {n}) / 8 > P->len) {{ {err} = {pts}; goto {rej}; }}")
                self.read_header(h, ht, f"P->data + {pos}", n, em)
                em.line(f"{h}._v = 1;")
                em.line(f"{pos} += (uint32_t)(({ht.bit_width} + {n}) / 8);")
            if stack is not None:
                if others:
                    em.line(" ".join(others))
                em.line(f"{stack[0]}.n += 1;")
            else:
                self.union_fixup(target, sc, em)
            return
        if e.method == "advance":
            n = self.arg(e, 0, sc, em)
            t = self.fn.tmp("uint64_t")
            em.line(f"{t} = {pos} + (({n}) >> 3);")
            em.line(f"if ({t} > P->len) {{ {err} = {pts}; goto {rej}; }}")
            em.line(f"{pos} = (uint32_t){t};")
            return
        if e.method in ("lookahead", "length"):
            self.packet_expr(e, sc, em)
            return
        raise CUnsupported(f"packet_in.{e.method}", e.loc)

    def leaves(self, x: str, t: ir.Type) -> list[tuple[str, ir.Type]]:
        """The wire-order scalar (and varbit) leaves of a header: struct-typed fields
        flattened, p4c's padding to whole bytes last."""
        t = strip(t)
        out: list[tuple[str, ir.Type]] = []
        if isinstance(t, (ir.HeaderType, ir.StructType)):
            for f in t.fields:
                out += self.leaves(f"{x}.{fld(f.name)}", f.type)
            if isinstance(t, ir.HeaderType) and t.bit_width % 8:
                out.append((f"{x}._pad", ir.BitType(-t.bit_width % 8)))
            return out
        if isinstance(t, ir.VarbitType) or is_scalar(t):
            return [(x, t)]
        raise CUnsupported(f"a {type(t).__name__} field in a header")

    def read_header(self, h: str, ht: ir.HeaderType, base: str, nbits: str | None, em: Em) -> None:
        """Fields of header ``h`` from the bytes at ``base`` (``nbits``: the varbit's
        width at run time)."""
        off = "0"
        static = 0
        for x, t in self.leaves(h, ht):
            at = f"{static}" if off == "0" else f"{off} + {static}"
            if isinstance(t, ir.VarbitType):
                assert nbits is not None
                em.line(f"{x}.nbits = {nbits};")
                em.line(f"for (uint64_t _i = 0; _i < {nbits} / 8; _i++) {x}.b[_i] = (uint8_t)get_bits({base}, {at} + 8 * _i, 8);")
                off = nbits
                continue
            w = scalar_width(t)
            if is_wide(t):
                em.line(f"{x} = get_bits_w({base}, {at}, {w});")
            elif off == "0" and static % 8 == 0 and w % 8 == 0:
                em.line(f"{x} = ld_be({base} + {static // 8}, {w // 8});")
            else:
                em.line(f"{x} = get_bits({base}, {at}, {w});")
            static += w

    def packet_expr(self, e: ir.MethodCall, sc: Scope, em: Em) -> str:
        if sc.parser is None:
            raise CUnsupported("packet_in outside a parser", e.loc)
        pos, err, rej = sc.parser
        if e.method == "length":
            return "(uint64_t)P->len"
        if e.method != "lookahead":
            raise CUnsupported(f"packet_in.{e.method} in an expression", e.loc)
        t = strip(e.type_args[0] if e.type_args else e.type)
        pts = self.err_code("PacketTooShort")
        if isinstance(t, (ir.HeaderType, ir.StructType)):
            if isinstance(t, ir.HeaderType) and _varbit_of(t) is not None:
                raise CUnsupported("lookahead of a header with a varbit field", e.loc)
            bits = sum(scalar_width(lt) for _, lt in self.leaves("x", t))
            nb = (bits + 7) // 8
            h = self.fn.tmp(self.types.ctype(t), "la")
            em.line(f"if ({pos} + {nb} > P->len) {{ {err} = {pts}; goto {rej}; }}")
            em.line(f"memset(&{h}, 0, sizeof {h});")
            if isinstance(t, ir.HeaderType):
                self.read_header(h, t, f"P->data + {pos}", None, em)
                em.line(f"{h}._v = 1;")
            else:
                off = 0
                for x, lt in self.leaves(h, t):
                    w = scalar_width(lt)
                    fn = "get_bits_w" if is_wide(lt) else "get_bits"
                    em.line(f"{x} = {fn}(P->data + {pos}, {off}, {w});")
                    off += w
            return h
        if not isinstance(t, (ir.BitType, ir.BoolType)):
            raise CUnsupported(f"lookahead of {type(t).__name__}", e.loc)
        w = scalar_width(t)
        nb = (w + 7) // 8
        em.line(f"if ({pos} + {nb} > P->len) {{ {err} = {pts}; goto {rej}; }}")
        if is_wide(t):
            return f"get_bits_w(P->data + {pos}, 0, {w})"
        return f"get_bits(P->data + {pos}, 0, {w})"

    def emit_value(self, x: str, t: ir.Type, em: Em) -> None:
        t = strip(t)
        if isinstance(t, ir.HeaderType) and _varbit_of(t) is None:
            nb = (t.bit_width + 7) // 8
            with em.block(f"if ({x}._v)"):
                em.line(f"uint8_t *_o = P->out.b + (P->out.nbits >> 3);")
                em.line(f"if ((P->out.nbits >> 3) + {nb} > P->out.cap) goto Lexit;")
                em.line(f"P->out.nbits += {nb * 8};")
                leaves = self.leaves(x, t)
                if any(scalar_width(lt) % 8 for _, lt in leaves):
                    em.line(f"memset(_o, 0, {nb});")
                off = 0
                for leaf, lt in leaves:
                    w = scalar_width(lt)
                    if is_wide(lt):
                        if off % 8 == 0 and w % 8 == 0:
                            em.line(f"memset(_o + {off // 8}, 0, {w // 8});")
                        em.line(f"put_bits_w(_o, {off}, {leaf}, {w});")
                    elif off % 8 == 0 and w % 8 == 0:
                        em.line(f"st_be(_o + {off // 8}, {leaf}, {w // 8});")
                    else:
                        em.line(f"put_bits(_o, {off}, {leaf}, {w});")
                    off += w
            return
        if isinstance(t, ir.HeaderType):
            with em.block(f"if ({x}._v)"):
                for leaf, lt in self.leaves(x, t):
                    if isinstance(lt, ir.VarbitType):
                        em.line(f"bb_bytes(&P->out, {leaf}.b, (uint32_t)({leaf}.nbits / 8));")
                    elif is_wide(lt):
                        em.line(f"bb_putw(&P->out, {leaf}, {scalar_width(lt)});")
                    else:
                        em.line(f"bb_put_fast(&P->out, {leaf}, {scalar_width(lt)});")
            return
        if isinstance(t, (ir.StructType, ir.HeaderUnionType)):
            for f in t.fields:
                self.emit_value(f"{x}.{fld(f.name)}", f.type, em)
            return
        if isinstance(t, ir.StackType):
            for i in range(t.size):
                self.emit_value(f"{x}.h[{i}]", t.elem, em)
            return
        raise CUnsupported(f"emit of {type(t).__name__}")

    # ------------------------------------------------------------------ parsers

    def parser_body(self, decl: ir.ParserDecl, sc: Scope, em: Em) -> None:
        order: list[str] = []
        todo = ["start"]
        while todo:
            s = todo.pop(0)
            if s in order or s in ("accept", "reject"):
                continue
            if s not in decl.states:
                raise CUnsupported(f"parser {decl.name} has no state {s}", decl.loc)
            order.append(s)
            tr = decl.states[s].transition
            nexts = [tr.next_state] if tr.select is None else [c.next_state for c in tr.cases]
            todo += [n for n in nexts if n]
        index = {s: i for i, s in enumerate(order)}
        assert sc.parser is not None
        labels = {s: self.fn.label("st_" + "".join(c if c.isalnum() else "_" for c in s))
                  for s in order}  # fmt: skip
        accept = self.fn.label("accept")
        noreject = self.fn.label("noerr_reject")
        it = self.fn.tmp("uint32_t", "it")
        em.line(f"{it} = 0;")
        _, err, _ = sc.parser
        noerr = self.err_code("NoError")
        timeout = self.err_code("ParserTimeout")

        def goto(target: str, here: int, ind: Em) -> None:
            if target == "accept":
                ind.line(f"goto {accept};")
            elif target == "reject":
                ind.line(f"goto {noreject};")
            else:
                j = index[target]
                if j <= here:
                    ind.line(f"if (++{it} > {PARSER_LOOP_LIMIT}) {{ {err} = {timeout}; goto {sc.parser[2]}; }}")  # type: ignore[index]
                ind.line(f"goto {labels[target]};")

        for i, s in enumerate(order):
            st = decl.states[s]
            em.label(labels[s])
            for x in st.stmts:
                self.stmt(x, sc, em)
            tr = st.transition
            if tr.select is None:
                goto(tr.next_state or "reject", i, em)
                continue
            keys = []
            for x in tr.select:
                xt = strip(x.type)
                if is_wide(xt):
                    raise CUnsupported("select on more than 64 bits", x.loc)
                k = self.fn.tmp("uint64_t", "k")
                em.line(f"{k} = {self.expr(x, sc, em)};")
                w = scalar_width(xt) if not isinstance(xt, ir.IntLitType) else 64
                keys.append((k, w))
            for case in tr.cases:
                conds = []
                for (k, w), ks in zip(keys, case.keysets, strict=False):
                    m = mask(w)
                    if isinstance(ks, ir.KeysetDefault):
                        continue
                    if isinstance(ks, ir.KeysetValue):
                        conds.append(f"{k} == {cnum(ks.value & m)}")
                    elif isinstance(ks, ir.KeysetMask):
                        conds.append(f"({k} & {cnum(ks.mask & m)}) == {cnum(ks.value & ks.mask & m)}")
                    elif isinstance(ks, ir.KeysetRange):
                        conds.append(f"({cnum(ks.low & m)} <= {k} && {k} <= {cnum(ks.high & m)})")
                    else:
                        raise CUnsupported(f"select keyset {type(ks).__name__}", case.loc)
                if not conds:
                    goto(case.next_state, i, em)
                    break
                with em.block(f"if ({' && '.join(conds)})"):
                    goto(case.next_state, i, em)
            else:
                goto("reject", i, em)
        em.label(noreject)
        em.line(f"{err} = {noerr};")
        em.line(f"goto {sc.parser[2]};")
        em.label(accept)

    # ------------------------------------------------------------------ top level

    def gen_top(self, role: str, inst: ir.Instance) -> list[ir.Param]:
        assert isinstance(inst.type, ir.BlockType)
        decl = inst.type.decl
        path = decl.name
        names = self.register_locals(decl, path)
        env, block_args = self.ctor_bindings(decl, inst, "", {})
        self.fn = fn = Fn()
        params = []
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
            pos = fn.tmp("uint32_t", "pos")
            err = fn.tmp("uint64_t", "err")
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
            ret = "uint64_t"
        else:
            sc.deparser = role == "deparser"
            if role == "ingress":
                self.digest_flag = fn.tmp("uint64_t", "dgf")
                em.line(f"{self.digest_flag} = 0;")
            for x in decl.locals:
                if isinstance(x, ir.VarDecl):
                    self.stmt(x, sc, em)
            self.stmt(decl.body, sc, em)
            em.label("Lexit")
            if role == "ingress":
                self.end_digests(em)
                self.digest_flag = None
            em.label("Labort")
            em.line("return 0;")
            ret = "uint64_t"
        self.field_list_params = decl.params
        sig = ", ".join(["state_t *S", "pkt_t *P"] + params)
        body = ["    " + d for d in fn.decls] + em.lines
        self.functions.append(f"static {ret} blk_{role}({sig}) {{\n" + "\n".join(body) + "\n}")
        return decl.params


def _varbit_of(t: ir.HeaderType) -> ir.StructField | None:
    """The varbit field of a header (None when it has none); more than one is refused."""
    vbs = [f for f in t.fields if isinstance(strip(f.type), ir.VarbitType)]
    if len(vbs) > 1:
        raise CUnsupported(f"header {t.name} with more than one varbit field", t.loc)
    return vbs[0] if vbs else None


def _is_path(e: ir.Expr) -> bool:
    """A field path or a constant: what the end of ingress can read again."""
    if isinstance(e, (ir.Const, ir.BoolConst)):
        return True
    while isinstance(e, ir.Member):
        e = e.base
    return isinstance(e, ir.VarRef)


def _stable(a: ir.Expr) -> bool:
    """An lvalue whose C text names the same object every time (no indexes, no calls)."""
    while isinstance(a, ir.Member):
        a = a.base
    return isinstance(a, ir.VarRef)


def _reaches(body: object, var: ir.Variable) -> bool:
    if body is None:
        return False
    return any(isinstance(n, ir.VarRef) and n.var is var for n in walk(body))


__all__ = ["CGen", "TableC", "ArrayC", "MatchKind", "has_return"]
