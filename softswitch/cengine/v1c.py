"""The v1model architecture in C: the per-frame pass loop of
:class:`softswitch.v1model.switch.V1Switch` (parser, checksum verification, ingress,
clone/resubmit/multicast/drop, egress, clone/drop, checksum update, deparser,
recirculate/transmit) over the generated block functions, plus the exported entry points
that :mod:`softswitch.cengine.switch` calls through cffi.

The order of copies and outputs is the Python switch's, so that both engines emit the
same frames in the same order (the equivalence tests hold them to it).
"""

from __future__ import annotations

import logging
from importlib import resources

from softswitch import ir
from softswitch.cengine.cgen import CGen
from softswitch.cengine.ctypes_gen import c_ident, strip
from softswitch.cengine.errors import CUnsupported
from softswitch.engine.compiled import CompiledProgram

log = logging.getLogger(__name__)

ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")
MAX_PASSES = 256

# The declarations the Python side (cffi) sees.
CDEF = """
void *ss_new(void);
void ss_free(void *S);
int ss_process(void *S, uint32_t port, const char *frame, uint32_t len, uint64_t now_ns,
               uint64_t t0_ns, char **out);
uint64_t *ss_digests(void *S, uint32_t *nwords);
void ss_table_flush(void *S, int t, uint32_t n, const uint64_t *handles, uint64_t *out);
void ss_table_meter(void *S, int t, uint64_t handle, int configured, uint64_t cir,
                    uint64_t cburst, uint64_t pir, uint64_t pburst);
void ss_meter(void *S, int a, uint64_t index, int configured, uint64_t cir, uint64_t cburst,
              uint64_t pir, uint64_t pburst);
int ss_table_load(void *S, int t, uint32_t n, const uint64_t *rows);
void ss_table_default(void *S, int t, uint64_t action, const uint64_t *args, int nargs);
uint64_t *ss_array(void *S, int a);
int ss_pre_load(void *S, uint32_t ngroups, const uint32_t *groups, uint32_t nsessions,
                const uint32_t *sessions);
void ss_seed(void *S, uint64_t seed);
uint64_t ss_stat(void *S, int which);
"""

_PKT = """
typedef struct {
    const uint8_t *data;
    uint32_t len, pos;
    uint64_t ingress_length;
    int64_t length_reg;
    uint64_t checksum_error;
    uint64_t clone_session; int64_t clone_fl; int has_clone;
    int64_t resubmit_fl; int has_resubmit;
    int64_t recirculate_fl; int has_recirculate;
    uint64_t truncate;
    uint64_t meter_color;
    uint64_t dg_id; uint32_t dg_n; uint64_t dg[64];
    int assert_failed;
    bitbuf_t out;
} pkt_t;
"""


def _field_list_copier(gen: CGen, meta_t: ir.Type) -> str:
    """``fl_copy(idx, d, s)``: the ``@field_list(idx)`` fields of the user metadata."""
    lists: dict[int, list[str]] = {}

    def visit(t: ir.Type, prefix: str) -> None:
        t = strip(t)
        if not isinstance(t, ir.StructType):
            return
        for f in t.fields:
            path = f"{prefix}.f_{c_ident(f.name)}"
            for v in f.annotations.get("field_list", []):
                idx = _annotation_int(gen, v)
                if idx is None:
                    raise CUnsupported(f"@field_list({v!r}) on {f.name}", f.loc)
                lists.setdefault(idx, []).append(f"d->{path[1:]} = s->{path[1:]};")
            if isinstance(strip(f.type), ir.StructType) and "field_list" not in f.annotations:
                visit(f.type, path)

    visit(meta_t, "")
    mt = gen.types.ctype(meta_t)
    body = []
    for idx, stmts in sorted(lists.items()):
        body.append(f"    if (idx == {idx}) {{ " + " ".join(stmts) + " }")
    return (
        f"static void fl_copy(int64_t idx, {mt} *d, const {mt} *s) {{\n"
        + ("\n".join(body) or "    (void)idx; (void)d; (void)s;")
        + "\n}"
    )


def _annotation_int(gen: CGen, v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, ir.Expr):
        try:
            return gen.const_value(v)
        except CUnsupported:
            return None
    text = str(v).strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    if "." in text:
        ename, member = text.rsplit(".", 1)
        t = gen.program.types.get(ename.strip())
        if isinstance(t, ir.EnumType) and member.strip() in t.values:
            return t.values[member.strip()]
    return None


def generate(program: ir.Program, compiled: CompiledProgram) -> tuple[str, CGen]:
    """The whole C source of ``program`` (raises CUnsupported)."""
    gen = CGen(program, compiled)
    if program.main.package != "V1Switch":
        raise CUnsupported(f"package {program.main.package} (only V1Switch)", program.main.loc)
    for inst in program.instances.values():
        if isinstance(inst.type, ir.ExternType):
            g = gen.make_extern(inst, "")
            if g is not None:
                gen.global_names[id(inst)] = g
    args = program.main.args
    if len(args) != len(ROLES):
        raise CUnsupported(f"V1Switch with {len(args)} blocks", program.main.loc)
    params: dict[str, list[ir.Param]] = {}
    for role, inst in zip(ROLES, args, strict=True):
        params[role] = gen.gen_top(role, inst)
    pp = [p for p in params["parser"] if not isinstance(strip(p.type), ir.ExternType)]
    if len(pp) != 3:
        raise CUnsupported("a v1model parser without (hdr, meta, standard_metadata)")
    hdr_t, meta_t, sm_t = (p.type for p in pp)
    H, M, SM = (gen.types.ctype(t) for t in (hdr_t, meta_t, sm_t))
    sm_fields = {f.name for f in getattr(strip(sm_t), "fields", [])}
    fl = _field_list_copier(gen, meta_t)
    loop = _LOOP.replace("HDR_T", H).replace("META_T", M).replace("SM_T", SM)
    opt = []
    for name in ("ingress_global_timestamp", "egress_global_timestamp"):
        if name in sm_fields:
            opt.append(f"#define HAS_{name.upper()} 1")
    if {"enq_timestamp", "deq_timedelta"} <= sm_fields:
        opt.append("#define HAS_QUEUE_FIELDS 1")
    runtime = resources.files("softswitch.cengine").joinpath("runtime.h").read_text("utf-8")
    state = [
        "typedef struct {",
        f"    table_t tbl[{max(1, len(gen.tables))}];",
        f"    uint64_t *arr[{max(1, len(gen.arrays))}];",
        "    uint64_t rng;",
        "    uint32_t ngroups, nsessions;",
        "    uint32_t *groups;   /* gid, count, then (port, rid) pairs; sorted by gid */",
        "    uint32_t *sessions; /* sid, truncate, count, then (port, rid) pairs */",
        "    uint64_t stats[4];",
        "    uint64_t now_ns;",
        "    uint64_t *dgbuf; uint32_t dg_used, dg_cap;",
        "    char *out; uint32_t out_cap;",
        "} state_t;",
    ]
    arrays = []
    for a in gen.arrays:
        if a.kind == "meter":
            arrays.append(
                f"    S->arr[{a.index}] = (uint64_t *)calloc({max(1, a.size)}, sizeof(meter_t));"
            )
            continue
        words = 2 if a.kind == "counter" else (gen.types.words if a.width > 64 else 1)
        arrays.append(f"    S->arr[{a.index}] = (uint64_t *)calloc({max(1, a.size)} * {words}, 8);")
    tables = []
    for t in gen.tables:
        rw = [w for w, _, kind in t.key_words]
        ranges = ", ".join(
            str(w if kind == "range" else -1) for w, _, kind in t.key_words
        ) or "-1"
        tables.append(f"    static const int rw{t.index}[] = {{{ranges}}};")
        tables.append(
            f"    S->tbl[{t.index}].kw = {t.kw}; S->tbl[{t.index}].nk = {len(t.key_words)}; "
            f"S->tbl[{t.index}].aw = {t.aw}; S->tbl[{t.index}].rw = {t.row_words}; "
            f"S->tbl[{t.index}].strategy = {t.strategy}; S->tbl[{t.index}].range_word = rw{t.index};"
        )
        del rw
    # wide register arrays are typed views of the same words
    typed = []
    for a in gen.arrays:
        if a.kind == "register" and a.width > 64:
            typed.append(f"#define ARR{a.index} ((wide_t *)S->arr[{a.index}])")
    src = "\n".join(
        [
            "/* generated by softswitch.cengine: do not edit */",
            f"#define WK {gen.types.words}",
            runtime,
            _PKT,
            *gen.types.lines,
            *state,
            *typed,
            "",
        ]
    )
    funcs = [_fix_arrays(f, gen) for f in gen.functions]
    new_fn = (
        "void *ss_new(void) {\n"
        "    state_t *S = (state_t *)calloc(1, sizeof(state_t));\n"
        "    init_hash_tables();\n"
        + "\n".join(arrays + tables)
        + "\n    S->rng = 0x5eed;\n    return S;\n}\n"
        "void ss_free(void *vs) {\n    state_t *S = (state_t *)vs;\n"
        + "".join(f"    table_free(&S->tbl[{t.index}]);\n" for t in gen.tables)
        + "".join(f"    free(S->arr[{a.index}]);\n" for a in gen.arrays)
        + "    free(S->groups); free(S->sessions); free(S->out); free(S->dgbuf); free(S);\n}\n"
    )
    src += "\n\n".join(funcs) + "\n\n" + fl + "\n" + "\n".join(opt) + "\n" + loop + "\n" + new_fn
    return src, gen


def _fix_arrays(code: str, gen: CGen) -> str:
    """Wide registers are read through their typed view."""
    for a in gen.arrays:
        if a.kind == "register" and a.width > 64:
            code = code.replace(f"S->arr{a.index}[", f"ARR{a.index}[")
        else:
            code = code.replace(f"S->arr{a.index}[", f"S->arr[{a.index}][")
    return code


_LOOP = r"""
#define DROP_PORT 511
#define MAX_PASSES """ + str(MAX_PASSES) + r"""
typedef struct job {
    HDR_T hdr; META_T meta; SM_T sm;
    pkt_t P;
    uint32_t port;
    struct job *next;
} job_t;

typedef struct { job_t *head, *tail; } jq_t;
static void jq_push(jq_t *q, job_t *j) { j->next = NULL; if (q->tail) q->tail->next = j; else q->head = j; q->tail = j; }
static void jq_push_front(jq_t *q, job_t *j) { j->next = q->head; q->head = j; if (!q->tail) q->tail = j; }
static job_t *jq_pop(jq_t *q) { job_t *j = q->head; if (j) { q->head = j->next; if (!q->head) q->tail = NULL; } return j; }

typedef struct frame { struct frame *next; uint8_t data[]; } frame_t;

typedef struct {
    state_t *S;
    jq_t iq, eq;
    frame_t *frames;
    uint64_t now_us;
    uint32_t used;
} run_t;

static job_t *job_new(void) { return (job_t *)calloc(1, sizeof(job_t)); }

static void pkt_init(pkt_t *P, const uint8_t *data, uint32_t len, uint64_t ilen) {
    memset(P, 0, sizeof *P);
    P->data = data; P->len = len; P->ingress_length = ilen; P->length_reg = (int64_t)ilen;
}
static void pkt_copy(pkt_t *d, const pkt_t *s) {
    pkt_init(d, s->data, s->len, s->ingress_length);
    d->pos = s->pos; d->length_reg = s->length_reg;
}
static job_t *fresh(const uint8_t *data, uint32_t len, uint32_t port, uint64_t itype, uint64_t length) {
    job_t *j = job_new();
    pkt_init(&j->P, data, len, length);
    j->sm.f_ingress_port = port; j->sm.f_instance_type = itype; j->sm.f_packet_length = length;
    j->port = port;
    return j;
}
static const uint32_t *find_group(state_t *S, uint32_t gid, uint32_t *count) {
    uint32_t *g = S->groups;
    for (uint32_t i = 0; i < S->ngroups; i++) {
        if (g[0] == gid) { *count = g[1]; return g + 2; }
        g += 2 + 2 * g[1];
    }
    *count = 0; return NULL;
}
static const uint32_t *find_session(state_t *S, uint32_t sid, uint32_t *count, uint32_t *trunc) {
    uint32_t *g = S->sessions;
    for (uint32_t i = 0; i < S->nsessions; i++) {
        if (g[0] == sid) { *trunc = g[1]; *count = g[2]; return g + 3; }
        g += 3 + 2 * g[2];
    }
    *count = 0; return NULL;
}

static void ingress_pass(run_t *R, job_t *j) {
    state_t *S = R->S;
    pkt_t *P = &j->P;
    j->sm.f_parser_error = blk_parser(S, P, &j->hdr, &j->meta, &j->sm);
    if (P->assert_failed) return;
    blk_verify_checksum(S, P, &j->hdr, &j->meta);
    j->sm.f_checksum_error = P->checksum_error;
    if (P->assert_failed) return;
    blk_ingress(S, P, &j->hdr, &j->meta, &j->sm);
}

static void after_ingress(run_t *R, job_t *j) {
    state_t *S = R->S;
    pkt_t *P = &j->P;
    if (P->has_clone) {
        uint32_t n, trunc;
        const uint32_t *rep = find_session(S, (uint32_t)(P->clone_session & 0x7FFF), &n, &trunc);
        int64_t fl = P->clone_fl;
        P->has_clone = 0;
        for (uint32_t i = 0; rep && i < n; i++) {
            job_t *c = fresh(P->data, P->len, j->port, 1, P->ingress_length);
            blk_parser(S, &c->P, &c->hdr, &c->meta, &c->sm);
            memset(&c->meta, 0, sizeof c->meta);
            memset(&c->sm, 0, sizeof c->sm);
            if (fl >= 0) fl_copy(fl, &c->meta, &j->meta);
            c->sm.f_instance_type = 1;
            c->sm.f_egress_rid = rep[2 * i + 1];
            c->P.truncate = trunc;
            c->port = rep[2 * i];
            jq_push(&R->eq, c);
        }
    }
    if (P->dg_id) {
        uint32_t need = S->dg_used + 2 + P->dg_n;
        if (need > S->dg_cap) {
            uint32_t cap = S->dg_cap ? S->dg_cap : 256;
            while (cap < need) cap *= 2;
            S->dgbuf = (uint64_t *)realloc(S->dgbuf, 8 * cap);
            S->dg_cap = cap;
        }
        S->dgbuf[S->dg_used] = P->dg_id - 1;
        S->dgbuf[S->dg_used + 1] = P->dg_n;
        memcpy(S->dgbuf + S->dg_used + 2, P->dg, 8 * P->dg_n);
        S->dg_used = need;
        P->dg_id = 0;
    }
    if (P->has_resubmit) {
        job_t *r = fresh(P->data, P->len, 0, 6, P->ingress_length);
        if (P->resubmit_fl >= 0) fl_copy(P->resubmit_fl, &r->meta, &j->meta);
        jq_push_front(&R->iq, r);
        free(j);
        return;
    }
    uint64_t mgid = j->sm.f_mcast_grp;
    if (mgid) {
        uint32_t n;
        const uint32_t *rep = find_group(S, (uint32_t)mgid, &n);
        j->sm.f_instance_type = 5;
        for (uint32_t i = 0; rep && i < n; i++) {
            j->sm.f_egress_rid = rep[2 * i + 1];
            job_t *c = (i + 1 == n) ? j : job_new();
            if (c != j) { c->hdr = j->hdr; c->meta = j->meta; c->sm = j->sm; }
            pkt_t tmp; pkt_copy(&tmp, P); c->P = tmp;
            c->port = rep[2 * i];
            jq_push(&R->eq, c);
        }
        if (!rep || n == 0) free(j);
        return;
    }
    if (j->sm.f_egress_spec == DROP_PORT) { free(j); return; }
    j->sm.f_instance_type = 0;
    j->port = (uint32_t)j->sm.f_egress_spec;
    jq_push(&R->eq, j);
}

static void egress_pass(run_t *R, job_t *j) {
    state_t *S = R->S;
#ifdef HAS_EGRESS_GLOBAL_TIMESTAMP
    j->sm.f_egress_global_timestamp = R->now_us;
#endif
#ifdef HAS_QUEUE_FIELDS
    j->sm.f_enq_timestamp = R->now_us & 0xFFFFFFFFull;
    j->sm.f_deq_timedelta = 0;
#endif
    j->sm.f_egress_port = j->port;
    j->sm.f_egress_spec = (DROP_PORT + 1) & 0x1FF;
    j->sm.f_packet_length = (uint64_t)j->P.length_reg & 0xFFFFFFFFull;
    blk_egress(S, &j->P, &j->hdr, &j->meta, &j->sm);
}

static uint8_t *frame_alloc(run_t *R, uint32_t n) {
    frame_t *f = (frame_t *)malloc(sizeof(frame_t) + n + 16);
    f->next = R->frames; R->frames = f;
    return f->data;
}

/* computeChecksum and the deparser: the frame's bytes (headers + payload, truncated) */
static uint32_t emit_frame(run_t *R, job_t *j, uint8_t **out) {
    state_t *S = R->S;
    pkt_t *P = &j->P;
    blk_compute_checksum(S, P, &j->hdr, &j->meta);
    uint32_t payload = P->len > P->pos ? P->len - P->pos : 0;
    uint32_t cap = (uint32_t)sizeof(HDR_T) + 64 + payload;
    uint8_t *buf = frame_alloc(R, cap);
    P->out.b = buf; P->out.nbits = 0; P->out.cap = cap;
    blk_deparser(S, P, &j->hdr);
    uint32_t n = bb_len(&P->out);
    memcpy(buf + n, P->data + P->pos, payload);
    n += payload;
    if (P->truncate && n > P->truncate) n = (uint32_t)P->truncate;
    *out = buf;
    return n;
}

static void put_out(run_t *R, uint32_t port, const uint8_t *b, uint32_t n) {
    state_t *S = R->S;
    uint32_t need = R->used + 8 + n;
    if (need > S->out_cap) {
        uint32_t cap = S->out_cap ? S->out_cap : 4096;
        while (cap < need) cap *= 2;
        S->out = (char *)realloc(S->out, cap);
        S->out_cap = cap;
    }
    memcpy(S->out + R->used, &port, 4);
    memcpy(S->out + R->used + 4, &n, 4);
    memcpy(S->out + R->used + 8, b, n);
    R->used = need;
}

static void after_egress(run_t *R, job_t *j) {
    state_t *S = R->S;
    pkt_t *P = &j->P;
    if (P->has_clone) {
        uint32_t n, trunc;
        const uint32_t *rep = find_session(S, (uint32_t)(P->clone_session & 0x7FFF), &n, &trunc);
        int64_t fl = P->clone_fl;
        P->has_clone = 0;
        for (uint32_t i = 0; rep && i < n; i++) {
            job_t *c = job_new();
            c->hdr = j->hdr;
            if (fl >= 0) fl_copy(fl, &c->meta, &j->meta);
            c->sm.f_instance_type = 2;
            c->sm.f_egress_rid = rep[2 * i + 1];
            pkt_copy(&c->P, P);
            c->P.truncate = trunc;
            c->port = rep[2 * i];
            jq_push(&R->eq, c);
        }
    }
    if (j->sm.f_egress_spec == DROP_PORT) { free(j); return; }
    uint8_t *frame;
    uint32_t n = emit_frame(R, j, &frame);
    if (P->has_recirculate) {
        job_t *r = fresh(frame, n, 0, 4, n);
        if (P->recirculate_fl >= 0) fl_copy(P->recirculate_fl, &r->meta, &j->meta);
        jq_push_front(&R->iq, r);
        free(j);
        return;
    }
    put_out(R, j->port, frame, n);
    free(j);
}

int ss_process(void *vs, uint32_t port, const char *frame, uint32_t len, uint64_t now_ns, uint64_t t0_ns, char **out) {
    run_t R;
    memset(&R, 0, sizeof R);
    R.S = (state_t *)vs;
    uint64_t now_us = ((now_ns - t0_ns) / 1000) & 0xFFFFFFFFFFFFull;
    R.now_us = now_us;
    R.S->now_ns = now_ns;
    R.S->dg_used = 0;
    job_t *j = job_new();
    pkt_init(&j->P, (const uint8_t *)frame, len, len);
    j->sm.f_ingress_port = port;
    j->sm.f_packet_length = len;
#ifdef HAS_INGRESS_GLOBAL_TIMESTAMP
    j->sm.f_ingress_global_timestamp = now_us;
#endif
    j->port = port;
    jq_push(&R.iq, j);
    int passes = 0;
    while (R.iq.head || R.eq.head) {
        if (++passes > MAX_PASSES) { R.S->stats[1]++; break; }
        if (R.iq.head) {
            job_t *x = jq_pop(&R.iq);
            ingress_pass(&R, x);
            if (x->P.assert_failed) { R.S->stats[0]++; R.S->stats[2] = x->P.assert_failed; free(x); continue; }
            after_ingress(&R, x);
        } else {
            job_t *x = jq_pop(&R.eq);
            egress_pass(&R, x);
            if (x->P.assert_failed) { R.S->stats[0]++; R.S->stats[2] = x->P.assert_failed; free(x); continue; }
            after_egress(&R, x);
        }
    }
    job_t *x;
    while ((x = jq_pop(&R.iq)) != NULL) free(x);
    while ((x = jq_pop(&R.eq)) != NULL) free(x);
    while (R.frames) { frame_t *f = R.frames; R.frames = f->next; free(f); }
    *out = R.S->out;
    return (int)R.used;
}

int ss_table_load(void *vs, int t, uint32_t n, const uint64_t *rows) {
    return table_load(&((state_t *)vs)->tbl[t], n, rows);
}
void ss_table_default(void *vs, int t, uint64_t action, const uint64_t *args, int nargs) {
    table_t *tb = &((state_t *)vs)->tbl[t];
    tb->def_action = action;
    memset(tb->def_args, 0, sizeof tb->def_args);
    for (int i = 0; i < nargs && i < 64; i++) tb->def_args[i] = args[i];
}
uint64_t *ss_array(void *vs, int a) { return ((state_t *)vs)->arr[a]; }
uint64_t *ss_digests(void *vs, uint32_t *nwords) {
    state_t *S = (state_t *)vs;
    *nwords = S->dg_used;
    return S->dgbuf;
}
void ss_table_flush(void *vs, int t, uint32_t n, const uint64_t *handles, uint64_t *out) {
    table_t *tb = &((state_t *)vs)->tbl[t];
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h = handles[i];
        if (h < tb->nhandles) {
            out[2 * i] = tb->cnt[2 * h]; out[2 * i + 1] = tb->cnt[2 * h + 1];
            tb->cnt[2 * h] = 0; tb->cnt[2 * h + 1] = 0;
        } else { out[2 * i] = 0; out[2 * i + 1] = 0; }
    }
}
void ss_table_meter(void *vs, int t, uint64_t handle, int configured, uint64_t cir,
                    uint64_t cburst, uint64_t pir, uint64_t pburst) {
    table_t *tb = &((state_t *)vs)->tbl[t];
    if (table_handles(tb, (uint32_t)handle + 1)) return;
    meter_set(&tb->mtr[handle], configured, cir, cburst, pir, pburst);
}
void ss_meter(void *vs, int a, uint64_t index, int configured, uint64_t cir, uint64_t cburst,
              uint64_t pir, uint64_t pburst) {
    meter_set(&((meter_t *)((state_t *)vs)->arr[a])[index], configured, cir, cburst, pir, pburst);
}
int ss_pre_load(void *vs, uint32_t ngroups, const uint32_t *groups, uint32_t nsessions, const uint32_t *sessions) {
    state_t *S = (state_t *)vs;
    uint32_t gl = 0, sl = 0;
    const uint32_t *g = groups;
    for (uint32_t i = 0; i < ngroups; i++) { gl += 2 + 2 * g[1]; g += 2 + 2 * g[1]; }
    g = sessions;
    for (uint32_t i = 0; i < nsessions; i++) { sl += 3 + 2 * g[2]; g += 3 + 2 * g[2]; }
    free(S->groups); free(S->sessions);
    S->groups = (uint32_t *)malloc(4 * (gl + 1));
    S->sessions = (uint32_t *)malloc(4 * (sl + 1));
    memcpy(S->groups, groups, 4 * gl);
    memcpy(S->sessions, sessions, 4 * sl);
    S->ngroups = ngroups; S->nsessions = nsessions;
    return 0;
}
void ss_seed(void *vs, uint64_t seed) { ((state_t *)vs)->rng = seed; }
uint64_t ss_stat(void *vs, int which) { return ((state_t *)vs)->stats[which & 3]; }
"""
