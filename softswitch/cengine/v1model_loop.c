/* The v1model pass loop of the C engine, appended to every generated program (HDR_T,
 * META_T and SM_T are replaced by the program's types; see softswitch/cengine/v1c.py). */
#define DROP_PORT 511
#define MAX_PASSES 256
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
    uint32_t cap = EMIT_BOUND + 64 + payload;
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
int ss_table_slots(void *vs, int t, uint32_t nwords, const uint64_t *words) {
    table_t *tb = &((state_t *)vs)->tbl[t];
    free(tb->slots);
    tb->slots = (uint64_t *)malloc(8 * (nwords + 1));
    if (!tb->slots) return -1;
    memcpy(tb->slots, words, 8 * nwords);
    return 0;
}
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
            out[3 * i] = tb->cnt[2 * h]; out[3 * i + 1] = tb->cnt[2 * h + 1];
            out[3 * i + 2] = tb->hit_ns[h];
            tb->cnt[2 * h] = 0; tb->cnt[2 * h + 1] = 0; tb->hit_ns[h] = 0;
        } else { out[3 * i] = 0; out[3 * i + 1] = 0; out[3 * i + 2] = 0; }
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
