/* softswitch C engine run time: wide values, hashes, checksums and match tables.
 * Included at the top of every generated program (after WK, the word count of wide_t). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t w[WK]; } wide_t;

#define MASKW(n) ((n) >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << (n)) - 1))
#define SX(v, n) ((n) >= 64 ? (int64_t)(v) : ((int64_t)((uint64_t)(v) << (64 - (n))) >> (64 - (n))))

static inline uint64_t shl64(uint64_t a, uint64_t n, int w) { return n >= (uint64_t)w ? 0 : (a << n) & MASKW(w); }
static inline uint64_t shr64(uint64_t a, uint64_t n, int w) { (void)w; return n >= 64 ? 0 : a >> n; }
static inline uint64_t sshr64(uint64_t a, uint64_t n, int w) {
    if (n >= (uint64_t)w) n = w - 1;
    return (uint64_t)(SX(a, w) >> n) & MASKW(w);
}
static inline uint64_t udiv64(uint64_t a, uint64_t b) { return b ? a / b : 0; }
static inline uint64_t umod64(uint64_t a, uint64_t b) { return b ? a % b : 0; }
static inline uint64_t sdiv64(uint64_t a, uint64_t b, int w) {
    int64_t x = SX(a, w), y = SX(b, w);
    if (!y) return 0;
    uint64_t q = (uint64_t)(x < 0 ? -x : x) / (uint64_t)(y < 0 ? -y : y);
    if ((x < 0) != (y < 0)) q = -q;
    return q & MASKW(w);
}
static inline uint64_t smod64(uint64_t a, uint64_t b, int w) {
    int64_t x = SX(a, w), y = SX(b, w);
    if (!y) return 0;
    uint64_t r = (uint64_t)(x < 0 ? -x : x) % (uint64_t)(y < 0 ? -y : y);
    if (x < 0) r = -r;
    return r & MASKW(w);
}
static inline uint64_t usat_add(uint64_t a, uint64_t b, int w) {
    uint64_t m = MASKW(w), r = a + b;
    return (r < a || r > m) ? m : r;
}
static inline uint64_t usat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
static inline uint64_t ssat_add(uint64_t a, uint64_t b, int w) {
    __int128 r = (__int128)SX(a, w) + SX(b, w);
    __int128 hi = ((__int128)1 << (w - 1)) - 1, lo = -((__int128)1 << (w - 1));
    if (r > hi) r = hi;
    if (r < lo) r = lo;
    return (uint64_t)r & MASKW(w);
}
static inline uint64_t ssat_sub(uint64_t a, uint64_t b, int w) {
    __int128 r = (__int128)SX(a, w) - SX(b, w);
    __int128 hi = ((__int128)1 << (w - 1)) - 1, lo = -((__int128)1 << (w - 1));
    if (r > hi) r = hi;
    if (r < lo) r = lo;
    return (uint64_t)r & MASKW(w);
}

/* ------------------------------------------------------------------ wide values */
static inline wide_t wz(void) { wide_t r; memset(&r, 0, sizeof r); return r; }
static inline wide_t wfrom(uint64_t v) { wide_t r = wz(); r.w[0] = v; return r; }
static inline uint64_t wlo(wide_t a) { return a.w[0]; }
static inline wide_t wmask(wide_t a, int n) {
    for (int i = 0; i < WK; i++) {
        int lo = i * 64;
        if (n <= lo) a.w[i] = 0;
        else if (n < lo + 64) a.w[i] &= MASKW(n - lo);
    }
    return a;
}
static inline wide_t wand(wide_t a, wide_t b) { for (int i = 0; i < WK; i++) a.w[i] &= b.w[i]; return a; }
static inline wide_t wor(wide_t a, wide_t b) { for (int i = 0; i < WK; i++) a.w[i] |= b.w[i]; return a; }
static inline wide_t wxor(wide_t a, wide_t b) { for (int i = 0; i < WK; i++) a.w[i] ^= b.w[i]; return a; }
static inline wide_t wnot(wide_t a, int n) { for (int i = 0; i < WK; i++) a.w[i] = ~a.w[i]; return wmask(a, n); }
static inline wide_t wadd(wide_t a, wide_t b, int n) {
    unsigned __int128 c = 0;
    for (int i = 0; i < WK; i++) { c += (unsigned __int128)a.w[i] + b.w[i]; a.w[i] = (uint64_t)c; c >>= 64; }
    return wmask(a, n);
}
static inline wide_t wsub(wide_t a, wide_t b, int n) {
    uint64_t borrow = 0;
    for (int i = 0; i < WK; i++) {
        uint64_t x = a.w[i], y = b.w[i];
        uint64_t d = x - y - borrow;
        borrow = (x < y) || (x == y && borrow) ? 1 : 0;
        a.w[i] = d;
    }
    return wmask(a, n);
}
static inline wide_t wshl(wide_t a, uint64_t s, int n) {
    if (s >= (uint64_t)n) return wz();
    wide_t r = wz();
    int ws = (int)(s / 64), bs = (int)(s % 64);
    for (int i = WK - 1; i >= ws; i--) {
        uint64_t v = a.w[i - ws] << bs;
        if (bs && i - ws - 1 >= 0) v |= a.w[i - ws - 1] >> (64 - bs);
        r.w[i] = v;
    }
    return wmask(r, n);
}
static inline wide_t wshr(wide_t a, uint64_t s) {
    if (s >= (uint64_t)WK * 64) return wz();
    wide_t r = wz();
    int ws = (int)(s / 64), bs = (int)(s % 64);
    for (int i = 0; i + ws < WK; i++) {
        uint64_t v = a.w[i + ws] >> bs;
        if (bs && i + ws + 1 < WK) v |= a.w[i + ws + 1] << (64 - bs);
        r.w[i] = v;
    }
    return r;
}
static inline int weq(wide_t a, wide_t b) { return memcmp(&a, &b, sizeof a) == 0; }
static inline int wlt(wide_t a, wide_t b) {
    for (int i = WK - 1; i >= 0; i--) if (a.w[i] != b.w[i]) return a.w[i] < b.w[i];
    return 0;
}
/* bits hi..lo of a (hi - lo < 64 for the narrow form) */
static inline uint64_t wslice64(wide_t a, int hi, int lo) { return wlo(wshr(a, lo)) & MASKW(hi - lo + 1); }
static inline wide_t wslice(wide_t a, int hi, int lo) { return wmask(wshr(a, lo), hi - lo + 1); }
/* a with bits hi..lo replaced by v */
static inline wide_t wsetbits(wide_t a, int hi, int lo, wide_t v, int n) {
    int width = hi - lo + 1;
    wide_t m = wshl(wmask(wnot(wz(), WK * 64), width), lo, WK * 64);
    a = wand(a, wnot(m, WK * 64));
    return wmask(wor(a, wand(wshl(v, lo, WK * 64), m)), n);
}

/* ------------------------------------------------------------------ bit buffers */
/* Appends fields MSB first to a byte buffer, as BMv2 packs field lists. */
typedef struct { uint8_t *b; uint32_t nbits; uint32_t cap; } bitbuf_t;
static inline void bb_put(bitbuf_t *bb, uint64_t v, int w) {
    for (int i = w - 1; i >= 0; i--) {
        uint32_t byte = bb->nbits >> 3;
        if (byte >= bb->cap) return;
        if ((bb->nbits & 7) == 0) bb->b[byte] = 0;
        if ((v >> i) & 1) bb->b[byte] |= (uint8_t)(0x80 >> (bb->nbits & 7));
        bb->nbits++;
    }
}
static inline void bb_put_fast(bitbuf_t *bb, uint64_t v, int w) {
    if ((bb->nbits & 7) == 0 && (w & 7) == 0 && (bb->nbits >> 3) + (w >> 3) <= bb->cap) {
        uint32_t byte = bb->nbits >> 3;
        for (int i = w - 8; i >= 0; i -= 8) bb->b[byte++] = (uint8_t)(v >> i);
        bb->nbits += w;
        return;
    }
    bb_put(bb, v, w);
}
static inline void bb_putw(bitbuf_t *bb, wide_t v, int w) {
    for (int i = w; i > 0; i -= 64) {
        int n = i >= 64 ? 64 : i;
        int lo = i - n;
        bb_put_fast(bb, wslice64(v, lo + n - 1, lo), n);
    }
}
static inline void bb_bytes(bitbuf_t *bb, const uint8_t *p, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) bb_put_fast(bb, p[i], 8);
}
static inline uint32_t bb_len(const bitbuf_t *bb) { return (bb->nbits + 7) >> 3; }

/* bits [bitpos, bitpos + w) of p, MSB first (w <= 64) */
static inline uint64_t get_bits(const uint8_t *p, uint32_t bitpos, int w) {
    uint64_t v = 0;
    uint32_t end = bitpos + w;
    if ((bitpos & 7) == 0 && (w & 7) == 0) {
        const uint8_t *q = p + (bitpos >> 3);
        for (int i = 0; i < (w >> 3); i++) v = (v << 8) | q[i];
        return v;
    }
    for (uint32_t b = bitpos; b < end; b++) v = (v << 1) | ((p[b >> 3] >> (7 - (b & 7))) & 1);
    return v;
}
static inline wide_t get_bits_w(const uint8_t *p, uint32_t bitpos, int w) {
    wide_t r = wz();
    for (int i = 0; i < w; i += 64) {
        int n = (w - i) >= 64 ? 64 : (w - i);
        r = wor(wshl(r, n, WK * 64), wfrom(get_bits(p, bitpos + i, n)));
    }
    return r;
}

/* big-endian loads and stores of whole bytes at any address */
static inline uint64_t ld_be(const uint8_t *p, int nbytes) {
    switch (nbytes) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return __builtin_bswap16(v); }
    case 4: { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
    case 8: { uint64_t v; memcpy(&v, p, 8); return __builtin_bswap64(v); }
    default: { uint64_t v = 0; for (int i = 0; i < nbytes; i++) v = (v << 8) | p[i]; return v; }
    }
}
static inline void st_be(uint8_t *p, uint64_t v, int nbytes) {
    switch (nbytes) {
    case 1: p[0] = (uint8_t)v; return;
    case 2: { uint16_t x = __builtin_bswap16((uint16_t)v); memcpy(p, &x, 2); return; }
    case 4: { uint32_t x = __builtin_bswap32((uint32_t)v); memcpy(p, &x, 4); return; }
    case 8: { uint64_t x = __builtin_bswap64(v); memcpy(p, &x, 8); return; }
    default: for (int i = nbytes - 1; i >= 0; i--) { p[i] = (uint8_t)v; v >>= 8; } return;
    }
}
/* ORs the w low bits of v into bits [bitpos, bitpos + w) of p (which are zero) */
static inline void put_bits(uint8_t *p, uint32_t bitpos, uint64_t v, int w) {
    for (int i = w - 1; i >= 0; i--, bitpos++)
        if ((v >> i) & 1) p[bitpos >> 3] |= (uint8_t)(0x80 >> (bitpos & 7));
}
static inline void put_bits_w(uint8_t *p, uint32_t bitpos, wide_t v, int w) {
    for (int i = w; i > 0; i -= 64) {
        int n = i >= 64 ? 64 : i;
        put_bits(p, bitpos, wslice64(v, i - 1, i - n), n);
        bitpos += n;
    }
}

/* ------------------------------------------------------------------ hashes */
static uint32_t crc32_table[256];
static uint16_t crc16_table[256];
static int hash_tables_ready;
static uint64_t reflect_bits(uint64_t v, int n) {
    uint64_t r = 0;
    for (int i = 0; i < n; i++) { r = (r << 1) | (v & 1); v >>= 1; }
    return r;
}
static void init_hash_tables(void) {
    if (hash_tables_ready) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc32_table[i] = c;
        uint16_t r = (uint16_t)(i << 8);
        for (int k = 0; k < 8; k++) r = (r & 0x8000) ? (uint16_t)((r << 1) ^ 0x8005) : (uint16_t)(r << 1);
        crc16_table[i] = r;
    }
    hash_tables_ready = 1;
}
static uint64_t h_crc32(const uint8_t *p, uint32_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (uint32_t i = 0; i < n; i++) c = crc32_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}
static uint64_t h_crc16(const uint8_t *p, uint32_t n) {
    /* BMv2 crc16: poly 0x8005, MSB-first table on reflected data, remainder reflected */
    uint16_t rem = 0;
    for (uint32_t i = 0; i < n; i++)
        rem = (uint16_t)(crc16_table[(uint8_t)reflect_bits(p[i], 8) ^ (rem >> 8)] ^ (rem << 8));
    return reflect_bits(rem, 16);
}
static uint64_t h_csum16(const uint8_t *p, uint32_t n) {
    uint64_t s = 0;
    uint32_t i = 0;
    for (; i + 1 < n; i += 2) s += ((uint32_t)p[i] << 8) | p[i + 1];
    if (n & 1) s += (uint32_t)p[n - 1] << 8;
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return (~s) & 0xFFFF;
}
static uint64_t h_xor16(const uint8_t *p, uint32_t n) {
    uint64_t r = 0;
    uint32_t i = 0;
    for (; i + 1 < n; i += 2) r ^= ((uint32_t)p[i] << 8) | p[i + 1];
    if (n & 1) r ^= (uint32_t)p[n - 1] << 8;
    return r;
}
static uint64_t h_identity(const uint8_t *p, uint32_t n) {
    uint64_t r = 0;
    for (uint32_t i = 0; i < n && i < 8; i++) r = (r << 8) | p[i];
    return r;
}
static inline uint64_t rng_next(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t rng_between(uint64_t *s, uint64_t lo, uint64_t hi) {
    if (lo > hi) return lo;
    uint64_t span = hi - lo + 1;
    if (span == 0) return rng_next(s);
    return lo + rng_next(s) % span;
}

/* ------------------------------------------------------------------ meters */
/* A two-rate three-colour marker as the Python engine's MeterCell (and BMv2): tokens in
 * whole units refilled from a fixed origin, peak bucket first. */
typedef struct { double rate; int64_t burst, tokens, last; uint64_t color; } bucket_t;
typedef struct { int configured; bucket_t b[2]; } meter_t;
static void meter_set(meter_t *m, int configured, uint64_t cir, uint64_t cburst, uint64_t pir, uint64_t pburst) {
    memset(m, 0, sizeof *m);
    m->configured = configured;
    if (!configured) return;
    m->b[0].rate = (double)pir / 1e6; m->b[0].burst = (int64_t)pburst; m->b[0].tokens = (int64_t)pburst; m->b[0].last = -1; m->b[0].color = 2;
    m->b[1].rate = (double)cir / 1e6; m->b[1].burst = (int64_t)cburst; m->b[1].tokens = (int64_t)cburst; m->b[1].last = -1; m->b[1].color = 1;
}
static uint64_t meter_exec(meter_t *m, uint64_t units, uint64_t now_ns) {
    if (!m->configured) return 0;
    int64_t micros = (int64_t)(now_ns / 1000);
    for (int i = 0; i < 2; i++) {
        bucket_t *b = &m->b[i];
        int64_t since = (int64_t)((double)micros * b->rate);
        int64_t last = b->last;
        if (last < 0 || since < last) last = since;
        int64_t tokens = b->tokens + (since - last);
        if (tokens > b->burst) tokens = b->burst;
        b->last = since;
        if (tokens < (int64_t)units) { b->tokens = tokens; return b->color; }
        b->tokens = tokens - (int64_t)units;
    }
    return 0;
}

/* ------------------------------------------------------------------ match tables */
/* A table holds rows loaded (in match order) by the control plane. Row layout (words):
 * [action, entry handle, key values (kw), key masks (kw), range low/high per key field
 * (2 * nk), args (aw)]. Strategy 0 (exact and LPM tables): rows grouped by mask, one hash
 * per group, groups probed in load order (longest prefix first). Strategy 1: rows scanned
 * in order. Per entry handle: direct counter deltas (flushed to the Python entries) and
 * direct meter state. */
typedef struct {
    uint64_t mask[32];
    uint32_t cap;      /* power of two */
    int32_t *slots;    /* row index + 1; 0 empty */
} tgroup_t;

typedef struct {
    int kw, nk, aw, rw, strategy;
    const int *range_word;   /* per key field: its word index when it is a range key, else -1 */
    uint32_t nrows;
    uint64_t *rows;
    int ngroups;
    tgroup_t groups[130];
    uint64_t def_action;
    uint64_t def_args[64];
    uint32_t nhandles;       /* capacity of the per-handle arrays */
    uint64_t *cnt;           /* 2 per handle: packets, bytes since the last flush */
    meter_t *mtr;            /* per handle */
    uint64_t *slots;         /* action selector groups: (action, args) per slot */
    uint64_t *hit_ns;        /* per handle: time of the last hit since the last flush (0: none) */
} table_t;

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ull; h ^= h >> 33;
    return h;
}
static inline uint64_t tkey_hash(const uint64_t *k, const uint64_t *m, int kw) {
    uint64_t h = 0x12345;
    for (int i = 0; i < kw; i++) h = mix64(h ^ (k[i] & m[i]) ^ ((uint64_t)i << 56));
    return h;
}
static void table_free_rows(table_t *t) {
    for (int g = 0; g < t->ngroups; g++) free(t->groups[g].slots);
    t->ngroups = 0;
    free(t->rows);
    t->rows = NULL;
    t->nrows = 0;
}
static void table_free(table_t *t) {
    table_free_rows(t);
    free(t->cnt); free(t->mtr); free(t->slots); free(t->hit_ns);
    t->cnt = NULL; t->mtr = NULL; t->slots = NULL; t->hit_ns = NULL; t->nhandles = 0;
}
static int table_handles(table_t *t, uint32_t need) {
    if (need <= t->nhandles) return 0;
    uint32_t cap = t->nhandles ? t->nhandles : 64;
    while (cap < need) cap *= 2;
    uint64_t *cnt = (uint64_t *)realloc(t->cnt, sizeof(uint64_t) * 2 * cap);
    if (!cnt) return -1;
    t->cnt = cnt;
    meter_t *mtr = (meter_t *)realloc(t->mtr, sizeof(meter_t) * cap);
    if (!mtr) return -1;
    t->mtr = mtr;
    uint64_t *hit = (uint64_t *)realloc(t->hit_ns, sizeof(uint64_t) * cap);
    if (!hit) return -1;
    t->hit_ns = hit;
    memset(t->hit_ns + t->nhandles, 0, sizeof(uint64_t) * (cap - t->nhandles));
    memset(t->cnt + 2 * t->nhandles, 0, sizeof(uint64_t) * 2 * (cap - t->nhandles));
    memset(t->mtr + t->nhandles, 0, sizeof(meter_t) * (cap - t->nhandles));
    t->nhandles = cap;
    return 0;
}
static int table_load(table_t *t, uint32_t n, const uint64_t *rows) {
    table_free_rows(t);
    uint32_t maxh = 0;
    for (uint32_t r = 0; r < n; r++) if (rows[(size_t)r * t->rw + 1] + 1 > maxh) maxh = (uint32_t)rows[(size_t)r * t->rw + 1] + 1;
    if (table_handles(t, maxh)) return -1;
    if (n) {
        t->rows = (uint64_t *)malloc(sizeof(uint64_t) * t->rw * n);
        if (!t->rows) return -1;
        memcpy(t->rows, rows, sizeof(uint64_t) * t->rw * n);
    }
    t->nrows = n;
    if (t->strategy != 0) return 0;
    for (uint32_t r = 0; r < n; r++) {
        const uint64_t *row = t->rows + (size_t)r * t->rw;
        const uint64_t *mask = row + 2 + t->kw;
        int g;
        for (g = 0; g < t->ngroups; g++)
            if (memcmp(t->groups[g].mask, mask, sizeof(uint64_t) * t->kw) == 0) break;
        if (g == t->ngroups) {
            if (g >= 130) return -2;
            memset(&t->groups[g], 0, sizeof(tgroup_t));
            memcpy(t->groups[g].mask, mask, sizeof(uint64_t) * t->kw);
            t->ngroups++;
        }
    }
    for (int g = 0; g < t->ngroups; g++) {
        uint32_t cnt = 0;
        for (uint32_t r = 0; r < n; r++)
            if (memcmp(t->groups[g].mask, t->rows + (size_t)r * t->rw + 2 + t->kw, sizeof(uint64_t) * t->kw) == 0) cnt++;
        uint32_t cap = 8;
        while (cap < cnt * 2) cap <<= 1;
        t->groups[g].cap = cap;
        t->groups[g].slots = (int32_t *)calloc(cap, sizeof(int32_t));
        if (!t->groups[g].slots) return -1;
    }
    for (uint32_t r = 0; r < n; r++) {
        const uint64_t *row = t->rows + (size_t)r * t->rw;
        for (int g = 0; g < t->ngroups; g++) {
            tgroup_t *gr = &t->groups[g];
            if (memcmp(gr->mask, row + 2 + t->kw, sizeof(uint64_t) * t->kw) != 0) continue;
            uint32_t i = (uint32_t)tkey_hash(row + 2, gr->mask, t->kw) & (gr->cap - 1);
            while (gr->slots[i]) i = (i + 1) & (gr->cap - 1);
            gr->slots[i] = (int32_t)r + 1;
            break;
        }
    }
    return 0;
}
/* the matching row, or NULL */
static inline const uint64_t *table_lookup(const table_t *t, const uint64_t *key) {
    int kw = t->kw;
    if (t->strategy == 0) {
        for (int g = 0; g < t->ngroups; g++) {
            const tgroup_t *gr = &t->groups[g];
            uint32_t i = (uint32_t)tkey_hash(key, gr->mask, kw) & (gr->cap - 1);
            int32_t s;
            while ((s = gr->slots[i]) != 0) {
                const uint64_t *row = t->rows + (size_t)(s - 1) * t->rw;
                int ok = 1;
                for (int j = 0; j < kw; j++) if ((key[j] & gr->mask[j]) != row[2 + j]) { ok = 0; break; }
                if (ok) return row;
                i = (i + 1) & (gr->cap - 1);
            }
        }
        return NULL;
    }
    for (uint32_t r = 0; r < t->nrows; r++) {
        const uint64_t *row = t->rows + (size_t)r * t->rw;
        int ok = 1;
        for (int j = 0; j < kw; j++) if ((key[j] & row[2 + kw + j]) != row[2 + j]) { ok = 0; break; }
        if (!ok) continue;
        const uint64_t *rg = row + 2 + 2 * kw;
        for (int f = 0; f < t->nk && ok; f++) {
            int w = t->range_word[f];
            if (w < 0) continue;
            if (key[w] < rg[2 * f] || key[w] > rg[2 * f + 1]) ok = 0;
        }
        if (ok) return row;
    }
    return NULL;
}
/* ------------------------------------------------------------------ header stacks */
/* the spare element (index N) an out-of-range index reaches, reset to invalid/zero */
static inline void *stk_spare(void *spare, size_t size) { memset(spare, 0, size); return spare; }
#define STK_AT(s, N, i) (*((i) < (uint64_t)(N) ? &(s).h[(i)] : (__typeof__(&(s).h[0]))stk_spare(&(s).h[N], sizeof (s).h[0])))
static inline void stk_push_front(void *base, uint64_t *n, int size, size_t esz, uint64_t count) {
    uint8_t *h = (uint8_t *)base;
    if (count > (uint64_t)size) count = size;
    if (count) {
        memmove(h + count * esz, h, (size - count) * esz);
        memset(h, 0, count * esz);
    }
    *n = (*n + count) > (uint64_t)size ? (uint64_t)size : *n + count;
}
static inline void stk_pop_front(void *base, uint64_t *n, int size, size_t esz, uint64_t count) {
    uint8_t *h = (uint8_t *)base;
    if (count > (uint64_t)size) count = size;
    if (count) {
        memmove(h, h + count * esz, (size - count) * esz);
        memset(h + (size - count) * esz, 0, count * esz);
    }
    *n = *n > count ? *n - count : 0;
}
