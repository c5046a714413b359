"""Packets and parsers of the C back end (a mixin of :class:`softswitch.cengine.cgen.CGen`):
``packet_in`` (extract, advance, lookahead, length), ``packet_out.emit`` and parser states
as labels with ``goto`` transitions, with the errors of the Python engine."""

from __future__ import annotations

from dataclasses import dataclass

from softswitch import ir
from softswitch.cengine.cgen_core import PARSER_LOOP_LIMIT, CGenCore, Em, Scope, cnum
from softswitch.cengine.ctypes_gen import field as fld
from softswitch.cengine.ctypes_gen import is_scalar, is_wide, scalar_width, strip
from softswitch.cengine.errors import CUnsupported
from softswitch.engine.bits import mask
from softswitch.engine.codegen_walk import parser_state_order


class PacketMixin(CGenCore):
    """``packet_in``, ``packet_out`` and parsers."""

    def packet_in_stmt(self, e: ir.MethodCall, sc: Scope, em: Em) -> None:
        if sc.parser is None:
            raise CUnsupported("packet_in outside a parser", e.loc)
        pos, err, rej = sc.parser
        pts = self.err_code("PacketTooShort")
        if e.method == "extract":
            self.extract(e, sc, em, pts)
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

    def extract(self, e: ir.MethodCall, sc: Scope, em: Em, pts: int) -> None:
        """``packet_in.extract(target[, nbits])``: the header's bytes (or a header type's
        length for ``_``) from the cursor on, or PacketTooShort."""
        assert sc.parser is not None
        pos, err, rej = sc.parser
        target = e.args[0]
        nbits = e.args[1] if len(e.args) > 1 else None
        if target is None or isinstance(target, ir.DontCare):
            nb = (_skipped_header(e).bit_width + 7) // 8
            em.line(f"if ({pos} + {nb} > P->len) {{ {err} = {pts}; goto {rej}; }}")
            em.line(f"{pos} += {nb};")
            return
        h, stack, others = self.extract_target(target, sc, em)
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
            self.extract_varbit(h, ht, vb, nbits, sc, em, pts)
        if stack is not None:
            if others:
                em.line(" ".join(others))
            em.line(f"{stack}.n += 1;")
        else:
            self.union_fixup(target, sc, em)

    def extract_target(
        self, target: ir.Expr, sc: Scope, em: Em
    ) -> tuple[str, str | None, list[str]]:
        """Where an extract writes: the header, the stack that advances (None: none) and
        the statements that invalidate the other members of a union in a stack. A stack's
        ``next`` out of range is StackOutOfBounds."""
        if (
            isinstance(target, ir.Member)
            and target.name == "next"
            and isinstance(strip(target.base.type), ir.StackType)
        ):
            base = self.stack_next(target.base, em, sc)
            return f"{base}.h[{base}.n]", base, []
        if (
            isinstance(target, ir.Member)
            and isinstance(target.base, ir.Member)
            and target.base.name == "next"
            and isinstance(strip(target.base.base.type), ir.StackType)
        ):  # stack_of_unions.next.member: the union at nextIndex; the stack advances
            st = strip(target.base.base.type)
            assert isinstance(st, ir.StackType)
            base = self.stack_next(target.base.base, em, sc)
            u = f"{base}.h[{base}.n]"
            ut = strip(st.elem)
            assert isinstance(ut, ir.HeaderUnionType)
            others = [f"{u}.{fld(f.name)}._v = 0;" for f in ut.fields if f.name != target.name]
            return f"{u}.{fld(target.name)}", base, others
        return self.expr(target, sc, em), None, []

    def stack_next(self, stack: ir.Expr, em: Em, sc: Scope) -> str:
        """The stack whose ``next`` an extract fills, checked for room."""
        assert sc.parser is not None
        _, err, rej = sc.parser
        st = strip(stack.type)
        assert isinstance(st, ir.StackType)
        base = self.expr(stack, sc, em)
        soob = self.err_code("StackOutOfBounds")
        em.line(f"if ({base}.n >= {st.size}) {{ {err} = {soob}; goto {rej}; }}")
        return base

    def extract_varbit(
        self,
        h: str,
        ht: ir.HeaderType,
        vb: ir.StructField,
        nbits: ir.Expr,
        sc: Scope,
        em: Em,
        pts: int,
    ) -> None:
        """A header with a varbit field ``nbits`` wide: a size beyond the field is
        HeaderTooShort, one not in whole bytes ParserInvalidArgument."""
        assert sc.parser is not None
        pos, err, rej = sc.parser
        if ht.bit_width % 8:
            raise CUnsupported(f"header {ht.name}: varbit beside fields not in whole bytes", ht.loc)
        vt = strip(vb.type)
        assert isinstance(vt, ir.VarbitType)
        n = self.fn.tmp("uint64_t", "vn")
        em.line(f"{n} = {self.narrow(self.expr(nbits, sc, em), nbits.type)};")
        em.line(
            f"if ({n} > {vt.max_width}) "
            f"{{ {err} = {self.err_code('HeaderTooShort')}; goto {rej}; }}"
        )
        em.line(
            f"if ({n} % 8) "
            f"{{ {err} = {self.err_code('ParserInvalidArgument')}; goto {rej}; }}"
        )
        em.line(
            f"if ({pos} + ({ht.bit_width} + {n}) / 8 > P->len) "
            f"{{ {err} = {pts}; goto {rej}; }}"
        )
        self.read_header(h, ht, f"P->data + {pos}", n, em)
        em.line(f"{h}._v = 1;")
        em.line(f"{pos} += (uint32_t)(({ht.bit_width} + {n}) / 8);")

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
                em.line(
                    f"for (uint64_t _i = 0; _i < {nbits} / 8; _i++) "
                    f"{x}.b[_i] = (uint8_t)get_bits({base}, {at} + 8 * _i, 8);"
                )
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
        if isinstance(t, ir.HeaderType):
            vb = _varbit_of(t)
            self.emit_bound += (t.bit_width + 7) // 8
            if vb is not None:
                vt = strip(vb.type)
                assert isinstance(vt, ir.VarbitType)
                self.emit_bound += (vt.max_width + 7) // 8
                self.emit_varbit_header(x, t, em)
            else:
                self.emit_fixed_header(x, t, em)
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

    def emit_fixed_header(self, x: str, t: ir.HeaderType, em: Em) -> None:
        """A valid header of fixed length written straight into the output buffer (whole
        bytes stored, other fields put bit by bit)."""
        nb = (t.bit_width + 7) // 8
        with em.block(f"if ({x}._v)"):
            em.line("uint8_t *_o = P->out.b + (P->out.nbits >> 3);")
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

    def emit_varbit_header(self, x: str, t: ir.HeaderType, em: Em) -> None:
        """A valid header with a varbit field, appended field by field."""
        with em.block(f"if ({x}._v)"):
            for leaf, lt in self.leaves(x, t):
                if isinstance(lt, ir.VarbitType):
                    em.line(f"bb_bytes(&P->out, {leaf}.b, (uint32_t)({leaf}.nbits / 8));")
                elif is_wide(lt):
                    em.line(f"bb_putw(&P->out, {leaf}, {scalar_width(lt)});")
                else:
                    em.line(f"bb_put_fast(&P->out, {leaf}, {scalar_width(lt)});")

    # ------------------------------------------------------------------ parsers

    def parser_body(self, decl: ir.ParserDecl, sc: Scope, em: Em) -> None:
        order, missing = parser_state_order(decl)
        if missing is not None:
            raise CUnsupported(f"parser {decl.name} has no state {missing}", decl.loc)
        index = {s: i for i, s in enumerate(order)}
        assert sc.parser is not None
        labels = {s: self.fn.label("st_" + "".join(c if c.isalnum() else "_" for c in s))
                  for s in order}  # fmt: skip
        accept = self.fn.label("accept")
        noreject = self.fn.label("noerr_reject")
        it = self.fn.tmp("uint32_t", "it")
        em.line(f"{it} = 0;")
        _, err, reject = sc.parser
        noerr = self.err_code("NoError")
        timeout = self.err_code("ParserTimeout")
        goto = _Gotos(index, labels, accept, noreject, it, err, reject, timeout)
        for i, s in enumerate(order):
            st = decl.states[s]
            em.label(labels[s])
            for s_ in st.stmts:
                self.stmt(s_, sc, em)
            tr = st.transition
            if tr.select is None:
                goto.line(tr.next_state or "reject", i, em)
                continue
            keys = self.select_keys(tr.select, sc, em)
            for case in tr.cases:
                conds = _keyset_conds(keys, case)
                if not conds:
                    goto.line(case.next_state, i, em)
                    break
                with em.block(f"if ({' && '.join(conds)})"):
                    goto.line(case.next_state, i, em)
            else:
                goto.line("reject", i, em)
        em.label(noreject)
        em.line(f"{err} = {noerr};")
        em.line(f"goto {reject};")
        em.label(accept)

    def select_keys(self, select: list[ir.Expr], sc: Scope, em: Em) -> list[tuple[str, int]]:
        """A select's key expressions, each evaluated once into a temporary, with its
        width (an unsized one: 64)."""
        keys = []
        for x in select:
            xt = strip(x.type)
            if is_wide(xt):
                raise CUnsupported("select on more than 64 bits", x.loc)
            k = self.fn.tmp("uint64_t", "k")
            em.line(f"{k} = {self.expr(x, sc, em)};")
            w = scalar_width(xt) if not isinstance(xt, ir.IntLitType) else 64
            keys.append((k, w))
        return keys

    # ------------------------------------------------------------------ top level


def _varbit_of(t: ir.HeaderType) -> ir.StructField | None:
    """The varbit field of a header (None when it has none); more than one is refused."""
    vbs = [f for f in t.fields if isinstance(strip(f.type), ir.VarbitType)]
    if len(vbs) > 1:
        raise CUnsupported(f"header {t.name} with more than one varbit field", t.loc)
    return vbs[0] if vbs else None


def _skipped_header(e: ir.MethodCall) -> ir.HeaderType:
    """The header type an ``extract`` into ``_`` skips (fixed length only)."""
    if not e.type_args:
        raise CUnsupported("extract into _ without a type", e.loc)
    ht = strip(e.type_args[0])
    if not isinstance(ht, ir.HeaderType) or _varbit_of(ht) is not None:
        raise CUnsupported("extract into _ of this type", e.loc)
    return ht


def _keyset_conds(keys: list[tuple[str, int]], case: ir.SelectCase) -> list[str]:
    """The C conditions under which a select case matches its keys (none: default)."""
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
    return conds


@dataclass(frozen=True)
class _Gotos:
    """The jumps between one parser's states: accept and reject by their labels, a jump
    back counted against the parser loop limit (ParserTimeout)."""

    index: dict[str, int]
    labels: dict[str, str]
    accept: str
    noreject: str
    it: str
    err: str
    reject: str
    timeout: int

    def line(self, target: str, here: int, ind: Em) -> None:
        if target == "accept":
            ind.line(f"goto {self.accept};")
        elif target == "reject":
            ind.line(f"goto {self.noreject};")
        else:
            j = self.index[target]
            if j <= here:
                ind.line(
                    f"if (++{self.it} > {PARSER_LOOP_LIMIT}) "
                    f"{{ {self.err} = {self.timeout}; goto {self.reject}; }}"
                )
            ind.line(f"goto {self.labels[target]};")
