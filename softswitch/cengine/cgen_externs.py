"""Tables, extern functions and extern methods of the C back end (a mixin of
:class:`softswitch.cengine.cgen.CGen`): table apply, registers, counters, meters, hashes,
checksums, digests and the v1model primitives (drop, clone, resubmit, recirculate,
truncate), with the semantics of the Python engine's code generator."""

from __future__ import annotations

from softswitch import ir
from softswitch.cengine.cgen_core import DROP_PORT, ArrayC, CGenCore, Em, Scope, TableC, cnum
from softswitch.cengine.ctypes_gen import field as fld
from softswitch.cengine.ctypes_gen import is_scalar, is_wide, scalar_width, strip
from softswitch.cengine.errors import CUnsupported
from softswitch.engine.bits import mask
from softswitch.engine.codegen_walk import applied_actions, applied_table
from softswitch.v1model.primitives import _unwrap_struct_init


class ExternMixin(CGenCore):
    """Tables and externs."""

    def table_c(self, decl: ir.TableDecl, sc: Scope) -> TableC:
        t = sc.names.get(id(decl))
        if not isinstance(t, TableC):
            raise CUnsupported(f"table {decl.name} not instantiated here", decl.loc)
        return t

    def apply_table(self, e: ir.Expr, sc: Scope, em: Em) -> tuple[str, str]:
        decl = applied_table(e)
        tc = self.table_c(decl, sc)
        T = f"S->tbl[{tc.index}]"
        hit = self.fn.tmp("uint64_t", "hit")
        an = self.fn.tmp("uint64_t", "act")
        args = self.fn.tmp("const uint64_t *", "args")
        row = self.fn.tmp("const uint64_t *", "row")
        if tc.key_words:
            k = self.lookup_key(decl, tc, sc, em)
            em.line(f"{row} = table_lookup(&{T}, {k});")
        else:
            em.line(f"{row} = 0;")
        with em.block(f"if ({row})"):
            em.line(f"{hit} = 1; {an} = {row}[0]; {args} = {row} + {tc.args_offset};")
            if tc.direct_counter:
                em.line(
                    f"{T}.cnt[2 * {row}[1]] += 1; {T}.cnt[2 * {row}[1] + 1] += P->ingress_length;"
                )
            if tc.idle_timeout:
                em.line(f"{T}.hit_ns[{row}[1]] = S->now_ns;")
            if tc.direct_meter is not None:
                units = "1" if tc.direct_meter == "packets" else "P->ingress_length"
                em.line(f"P->meter_color = meter_exec(&{T}.mtr[{row}[1]], {units}, S->now_ns);")
            if tc.selector_hash is not None or decl.implementation is not None:
                self._group_select(tc, an, args, sc, em)
        with em.block("else"):
            em.line(f"{hit} = 0; {an} = {T}.def_action; {args} = {T}.def_args;")
        first = True
        for aref in applied_actions(decl):
            fq = self.action_fq(aref.action, tc.path)
            aid = tc.action_ids[fq]
            ndir = len([p for p in aref.action.params if p.direction])
            dir_args: list[ir.Expr | None] = list(aref.args[:ndir])
            dir_args += [None] * (ndir - len(dir_args))
            with em.block(f"{'if' if first else 'else if'} ({an} == {aid})"):
                words = [w for w, _p in zip(tc.arg_words[fq], aref.action.cp_params, strict=True)]
                cp = self.action_data(words, args, em)
                self.inline_action(aref.action, dir_args, cp, sc, em)
            first = False
        return hit, an

    def lookup_key(self, decl: ir.TableDecl, tc: TableC, sc: Scope, em: Em) -> str:
        """The table's key words (selector keys left out) in a local array, wide fields
        word by word."""
        k = self.fn.tmp("uint64_t", "key")
        self.fn.decls[-1] = f"uint64_t {k}[{max(1, tc.kw)}];"
        keys = [kd for kd in decl.keys if kd.match_kind != "selector"]
        for kd, (off, w, _kind) in zip(keys, tc.key_words, strict=True):
            v = self.expr(kd.expr, sc, em)
            kt = strip(kd.expr.type)
            if is_wide(kt):
                for i in range((w + 63) // 64):
                    em.line(f"{k}[{off + i}] = ({v}).w[{i}];")
            else:
                em.line(f"{k}[{off}] = {v};")
        return k

    def action_data(self, words: list[tuple[int, int]], args: str, em: Em) -> list[str]:
        """The C values of an action's control-plane parameters read from the row's
        argument words (a wide one gathered into a temporary)."""
        cp = []
        for off, w in words:
            if w > 64:
                nw = (w + 63) // 64
                tmp = self.fn.tmp("wide_t")
                em.line(f"{tmp} = wz();")
                for i in range(nw):
                    em.line(f"{tmp}.w[{i}] = {args}[{off + i}];")
                cp.append(tmp)
            else:
                cp.append(f"{args}[{off}]")
        return cp

    def _group_select(self, tc: TableC, an: str, args: str, sc: Scope, em: Em) -> None:
        """A row that names an action selector's group: the member its slots give for
        the selector hash (an empty group runs the default action, still a hit)."""
        T = f"S->tbl[{tc.index}]"
        with em.block(f"if ({an} >> 63)"):
            first, n = self.fn.tmp("uint64_t"), self.fn.tmp("uint64_t")
            em.line(f"{first} = {an} & 0x7fffffffffffffffull; {n} = {args}[0];")
            with em.block(f"if ({n} == 0)"):
                em.line(f"{an} = {T}.def_action; {args} = {T}.def_args;")
            with em.block("else"):
                h = "0"
                if tc.selector_keys and tc.selector_hash is not None:
                    data = ir.ListExpr(
                        ir.TupleType(tuple(x.type for x in tc.selector_keys)),
                        tc.decl.loc,
                        list(tc.selector_keys),
                    )
                    bb = self.pack(data, sc, em)
                    h = f"{tc.selector_hash}({bb}.b, bb_len(&{bb}))"
                slot = f"{T}.slots + ({first} + ({h}) % {n}) * {1 + tc.aw}"
                em.line(f"{an} = ({slot})[0]; {args} = ({slot}) + 1;")

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
        # the *_custom algorithms run with their defaults, which equal crc16/crc32 (BMv2)
        fn = {
            "crc32": "h_crc32",
            "crc32_custom": "h_crc32",
            "crc16": "h_crc16",
            "crc16_custom": "h_crc16",
            "csum16": "h_csum16",
            "xor16": "h_xor16",
            "identity": "h_identity",
        }.get(name)
        if fn is None:
            raise CUnsupported(f"hash algorithm {name}", algo.loc)
        assert data is not None
        if not payload:
            bb = self.pack(data, sc, em)
            return f"{fn}({bb}.b, bb_len(&{bb}))"
        # the payload can be any length: a buffer of the packet's size, freed at once
        bb = self.pack(data, sc, em, extra="(P->len - P->pos)")
        em.line(f"bb_bytes(&{bb}, P->data + P->pos, P->len - P->pos);")
        h = self.fn.tmp("uint64_t")
        em.line(f"{h} = {fn}({bb}.b, bb_len(&{bb}));")
        em.line(f"free({bb}.b);")
        return h

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
        xv = self.expr(e, sc, em)
        valid = None
        if isinstance(e, ir.Member) and isinstance(strip(e.base.type), ir.HeaderType):
            valid = f"{self.expr(e.base, sc, em)}._v"
        if isinstance(t, ir.VarbitType):  # a negative width: its maximum bytes
            return [(xv, -((t.max_width + 7) // 8), valid, False)]
        if not is_scalar(t):
            raise CUnsupported(f"a {type(t).__name__} in a field list", e.loc)
        w = scalar_width(t) if not isinstance(t, ir.IntLitType) else 32
        return [(xv, w, valid, is_wide(t))]

    def flat_obj(
        self, x: str, t: ir.Type, valid: str | None
    ) -> list[tuple[str, int, str | None, bool]]:
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
            return [(x, -((t.max_width + 7) // 8), valid, False)]
        if not is_scalar(t):
            raise CUnsupported(f"{type(t).__name__} in a field list")
        return [(x, scalar_width(t), valid, is_wide(t))]

    def pack(self, data: ir.Expr, sc: Scope, em: Em, extra: str | None = None) -> str:
        """A bit buffer holding field list ``data`` packed as BMv2 packs it (fields of
        invalid headers left out); ``extra``: bytes to leave room for after them (the
        buffer is then malloc'ed; the caller frees it)."""
        fields = self.flat(data, sc, em)
        total = sum(w for _, w, _, _ in fields if w > 0)
        total += sum(-8 * w for _, w, _, _ in fields if w < 0)  # varbits at their maximum
        nbytes = (total + 7) // 8 + 8
        bb = self.fn.tmp("bitbuf_t", "bb")
        if extra is None:
            buf = self.fn.tmp("uint8_t", "hb")
            self.fn.decls[-1] = f"uint8_t {buf}[{nbytes}];"
            em.line(f"{bb}.b = {buf}; {bb}.nbits = 0; {bb}.cap = sizeof {buf};")
        else:
            em.line(f"{bb}.cap = {nbytes} + {extra}; {bb}.nbits = 0;")
            em.line(f"{bb}.b = (uint8_t *)malloc({bb}.cap);")
        for x, w, valid, wide in fields:
            if w < 0:
                put = f"bb_bytes(&{bb}, {x}.b, (uint32_t)({x}.nbits / 8));"
            elif wide:
                put = f"bb_putw(&{bb}, {x}, {w});"
            else:
                put = f"bb_put_fast(&{bb}, {x}, {w});"
            em.line(f"if ({valid}) {put}" if valid else put)
        return bb

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
        self.may_loop = True
        self._clone_const(e)
        em.line(f"P->clone_session = {self.arg(e, 1, sc, em)}; P->has_clone = 1; P->clone_fl = -1;")

    fn_clone3 = fn_clone

    def fn_clone_preserving_field_list(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self.may_loop = True
        self._clone_const(e)
        em.line(f"P->clone_session = {self.arg(e, 1, sc, em)}; P->has_clone = 1;")
        em.line(f"P->clone_fl = (int64_t){self.arg(e, 2, sc, em)};")

    def fn_resubmit(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self.may_loop = True
        em.line("P->has_resubmit = 1; P->resubmit_fl = -1;")

    def fn_resubmit_preserving_field_list(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self.may_loop = True
        em.line(f"P->has_resubmit = 1; P->resubmit_fl = (int64_t){self.arg(e, 0, sc, em)};")

    def fn_recirculate(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self.may_loop = True
        em.line("P->has_recirculate = 1; P->recirculate_fl = -1;")

    def fn_recirculate_preserving_field_list(self, e: ir.Call, sc: Scope, em: Em) -> None:
        self.may_loop = True
        em.line(f"P->has_recirculate = 1; P->recirculate_fl = (int64_t){self.arg(e, 0, sc, em)};")

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
            self.packet_out_emit(e, sc, em)
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
        if ext == "register" and m in ("read", "write"):
            self.register_access(e, obj, sc, em)
            return
        if ext == "meter" and m == "execute_meter":
            self.execute_meter(e, obj, sc, em)
            return
        if ext == "counter" and m == "count":
            arr = f"S->arr{obj.index}"
            idx = self.fn.tmp("uint64_t")
            em.line(f"{idx} = {self.arg(e, 0, sc, em)};")
            with em.block(f"if ({idx} < {obj.size})"):
                em.line(f"{arr}[2 * {idx}] += 1; {arr}[2 * {idx} + 1] += P->ingress_length;")
            return
        raise CUnsupported(f"extern method {ext}.{m}", e.loc)

    def packet_out_emit(self, e: ir.MethodCall, sc: Scope, em: Em) -> None:
        """``packet_out.emit``, only in a deparser."""
        if e.method != "emit" or not sc.deparser:
            raise CUnsupported(f"packet_out.{e.method} here", e.loc)
        a = e.args[0]
        assert a is not None
        self.emit_value(self.expr(a, sc, em), a.type, em)

    def execute_meter(self, e: ir.MethodCall, obj: ArrayC, sc: Scope, em: Em) -> None:
        """``meter.execute_meter``: the color of the indexed meter (0, green, out of
        range), by packets or bytes as the meter counts."""
        idx = self.fn.tmp("uint64_t")
        em.line(f"{idx} = {self.arg(e, 0, sc, em)};")
        kind = self.compiled.meters[obj.name].kind
        units = "1" if kind == "packets" else "P->ingress_length"
        col = self.fn.tmp("uint64_t")
        em.line(
            f"{col} = {idx} < {obj.size} ? "
            f"meter_exec(&((meter_t *)S->arr[{obj.index}])[{idx}], {units}, S->now_ns) : 0;"
        )
        self.write_out(e.args[1], col, ir.BitType(64), sc, em)

    def register_access(self, e: ir.MethodCall, obj: ArrayC, sc: Scope, em: Em) -> None:
        """``register.read``/``write``: an index out of range reads nothing (the out
        argument keeps its value) and writes nothing."""
        arr = f"S->arr{obj.index}"
        idx = self.fn.tmp("uint64_t")
        if e.method == "read":
            em.line(f"{idx} = {self.arg(e, 1, sc, em)};")
            with em.block(f"if ({idx} < {obj.size})"):
                vt = ir.BitType(obj.width)
                self.write_out(e.args[0], f"{arr}[{idx}]", vt, sc, em)
            return
        em.line(f"{idx} = {self.arg(e, 0, sc, em)};")
        a1 = e.args[1]
        assert a1 is not None
        v = self.expr(a1, sc, em)
        with em.block(f"if ({idx} < {obj.size})"):
            if obj.width > 64:
                em.line(f"{arr}[{idx}] = wmask({self.wide(v, a1.type)}, {obj.width});")
            else:
                em.line(f"{arr}[{idx}] = ({self.narrow(v, a1.type)}) & {cnum(mask(obj.width))};")

    # ------------------------------------------------------------------ packets


def _is_path(e: ir.Expr) -> bool:
    """A field path or a constant: what the end of ingress can read again."""
    if isinstance(e, (ir.Const, ir.BoolConst)):
        return True
    while isinstance(e, ir.Member):
        e = e.base
    return isinstance(e, ir.VarRef)
