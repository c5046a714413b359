/* The packet loop of the C engine on its own thread (appended after v1model_loop.c; see
 * softswitch/cengine/loop.py for the Python side).
 *
 * One thread per switch reads every data port in batches (a PACKET_RX_RING, else
 * recvmmsg), runs each frame through ss_process, and sends in batches (a PACKET_TX_RING
 * filled in place and kicked with one send() per port and batch, else sendmmsg), holding
 * frames on the per-port delay lines (link propagation delay) where a port has one. It
 * never touches Python.
 * What it cannot finish (frames for the CPU port, digests, log events) goes to Python
 * through the punt queue, with an eventfd to wake the Python thread.
 *
 * Control: the Python side pauses the thread (ss_loop_pause) around every control-plane
 * action (table reloads, counter and register reads, PacketOut): the thread finishes its
 * batch, then waits until ss_loop_resume, so a reload never races a frame. */
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <errno.h>
#include <unistd.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>

#define LB 64                     /* frames per recvmmsg/sendmmsg batch and port */
#define RB 256                    /* frames per receive-ring batch and port */
#define PUNT_MAX (64u << 20)      /* bytes the punt queue holds before it drops */
#define RING_BYTES (4u << 20)     /* PACKET_RX_RING: as much as the sockets' 4 MiB buffers */
#define TX_RING_BYTES (2u << 20)  /* PACKET_TX_RING: frames queued to the kernel, in flight */
#define RING_BLOCK_FRAMES 16      /* frames per ring block */
#define VNET (sizeof(struct virtio_net_hdr))
/* per-port counters (the Python side reads them: keep in step with loop.py) */
enum { PC_RXP, PC_RXB, PC_TXP, PC_TXB, PC_TXD, PC_MAL, PC_DROP, PC_EHELD, PC_EMAX, PC_EOVF,
       PC_IHELD, PC_IMAX, PC_IOVF, NPC = 16 };
/* switch-wide counters */
enum { SC_NOPORT, SC_RELEASED, SC_MAXHELD, SC_PUNTED, SC_PUNTDROP, SC_HELD, SC_BATCHES, NSC = 8 };
/* punt record types */
enum { PT_CPU = 1, PT_DIGEST = 2, PT_ASSERT = 3, PT_PASSES = 4 };

typedef struct { uint64_t due; uint32_t len; uint8_t *data; } held_t;
typedef struct { held_t *q; uint32_t head, n, cap; uint64_t delay; } dline_t;

typedef struct {
    int fd; uint32_t num; uint32_t bufsize;
    uint8_t *rxbuf;              /* LB slots of bufsize + 4 (room for a VLAN tag) */
    struct mmsghdr rmsg[LB]; struct iovec riov[LB];
    struct sockaddr_ll raddr[LB]; uint64_t rctl[LB][8];
    void *rbase[RB]; uint32_t rlen[RB]; uint32_t nrx;
    /* PACKET_RX_RING (AF_PACKET sockets): frames read in place, no receive system call */
    uint8_t *ring; size_t ring_len; uint32_t ring_frames, ring_fsize, ring_fpb, ring_bsize;
    uint32_t ring_pos, ntaken; uint32_t taken[RB];
    /* PACKET_TX_RING (after the receive ring in the same mapping): frames written in
     * place, each with a virtio_net header that makes the kernel copy the whole frame
     * (no ring page stays in flight); one send() per batch hands them over */
    uint8_t *tring; uint32_t tring_frames, tring_pos, tring_queued, vnet;
    int tring_pending;           /* frames handed to the ring that no send() took yet */
    int qdrained;                /* the plain receive queue (before the ring) is empty */
    struct mmsghdr tmsg[LB]; struct iovec tiov[LB]; uint32_t toff[LB];
    uint8_t *txbuf; uint32_t txcap, txused, ntx;
    dline_t eline, iline;
    uint64_t *ctr;
} lport_t;

typedef struct {
    state_t *S;
    uint32_t n; lport_t *ports;
    int16_t map[512];            /* port number -> index, -1 none */
    int32_t cpu;
    double tdf; int needs_clock; uint64_t t0;
    uint32_t capacity;
    uint64_t *sw;
    int wake_fd, notify_fd;
    pthread_t th; int running;
    volatile int stop; int nohold;
    int all_rings;               /* every port has a receive ring: busy loops skip ppoll */
    pthread_mutex_t m; pthread_cond_t cv;
    int want, owned, busy;
    pthread_mutex_t pm;
    uint8_t *pq, *pq2; uint32_t pq_used, pq_cap, pq2_cap;
    uint64_t seen_assert, seen_passes;
} loop_t;

static uint64_t mono_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* the pipeline's clock: VirtualClock.now_ns (real ns / TDF, truncated), or t0 when the
 * program reads no time */
static uint64_t lp_now(loop_t *L) {
    if (!L->needs_clock) return L->t0;
    uint64_t ns = mono_ns();
    return L->tdf == 1.0 ? ns : (uint64_t)((double)ns / L->tdf);
}

/* ------------------------------------------------------------------ punt queue */
static void lp_punt(loop_t *L, uint32_t type, uint32_t port, const void *data, uint32_t len) {
    pthread_mutex_lock(&L->pm);
    uint32_t need = L->pq_used + 12 + len;
    if (need > PUNT_MAX) { L->sw[SC_PUNTDROP]++; pthread_mutex_unlock(&L->pm); return; }
    if (need > L->pq_cap) {
        uint32_t cap = L->pq_cap ? L->pq_cap : 65536;
        while (cap < need) cap *= 2;
        uint8_t *q = (uint8_t *)realloc(L->pq, cap);
        if (!q) { L->sw[SC_PUNTDROP]++; pthread_mutex_unlock(&L->pm); return; }
        L->pq = q; L->pq_cap = cap;
    }
    int was_empty = L->pq_used == 0;
    uint32_t h[3] = {type, port, len};
    memcpy(L->pq + L->pq_used, h, 12);
    if (len) memcpy(L->pq + L->pq_used + 12, data, len);
    L->pq_used = need;
    L->sw[SC_PUNTED]++;
    pthread_mutex_unlock(&L->pm);
    if (was_empty) { uint64_t one = 1; ssize_t w = write(L->notify_fd, &one, 8); (void)w; }
}

/* ------------------------------------------------------------------ delay lines */
static int dl_push(loop_t *L, dline_t *d, uint64_t due, const uint8_t *data, uint32_t len) {
    if (d->n >= L->capacity) return 0;
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 64;
        held_t *q = (held_t *)malloc(sizeof(held_t) * cap);
        if (!q) return 0;
        for (uint32_t i = 0; i < d->n; i++) q[i] = d->q[(d->head + i) % d->cap];
        free(d->q); d->q = q; d->head = 0; d->cap = cap;
    }
    uint8_t *copy = (uint8_t *)malloc(len ? len : 1);
    if (!copy) return 0;
    memcpy(copy, data, len);
    held_t *h = &d->q[(d->head + d->n) % d->cap];
    h->due = due; h->len = len; h->data = copy;
    d->n++;
    return 1;
}
static held_t *dl_head(dline_t *d) { return d->n ? &d->q[d->head] : NULL; }
static void dl_pop(dline_t *d) { d->head = (d->head + 1) % d->cap; d->n--; }

static void lp_note_held(loop_t *L, int delta) {
    L->sw[SC_HELD] += (uint64_t)(int64_t)delta;
    if (L->sw[SC_HELD] > L->sw[SC_MAXHELD]) L->sw[SC_MAXHELD] = L->sw[SC_HELD];
}

/* ------------------------------------------------------------------ transmit */
static struct tpacket2_hdr *ring_at(lport_t *p, uint8_t *base, uint32_t i) {
    return (struct tpacket2_hdr *)(base + (size_t)(i / p->ring_fpb) * p->ring_bsize
                                   + (size_t)(i % p->ring_fpb) * p->ring_fsize);
}
#define TX_DATA TPACKET_ALIGN(sizeof(struct tpacket2_hdr))  /* frame start in a tx slot */

/* Hand the frames written into the transmit ring to the kernel: one send() sends them
 * all (without waiting). A frame it could not take yet (the send buffer full of frames
 * in flight) stays queued for the next kick. */
static void tring_kick(lport_t *p) {
    if (!p->tring_pending) return;
    while (send(p->fd, NULL, 0, MSG_DONTWAIT) < 0 && errno == EINTR) {}
    uint32_t last = (p->tring_pos + p->tring_frames - 1) % p->tring_frames;
    p->tring_pending = __atomic_load_n(&ring_at(p, p->tring, last)->tp_status,
                                       __ATOMIC_ACQUIRE) == TP_STATUS_SEND_REQUEST;
    p->tring_queued = 0;
}
/* One frame into the transmit ring, behind a virtio_net header whose hdr_len is the whole
 * frame: the kernel copies it all into its buffer, so no ring page is referenced after
 * the slot is free again. A full ring (after a kick) drops the frame, as a full send
 * buffer does with sendmmsg. */
static void tring_tx(lport_t *p, const uint8_t *data, uint32_t len) {
    if (len < 14 || TX_DATA + VNET + len > p->ring_fsize) { p->ctr[PC_TXD]++; return; }
    struct tpacket2_hdr *h = ring_at(p, p->tring, p->tring_pos);
    if (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE) {
        tring_kick(p);
        if (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE) {
            p->ctr[PC_TXD]++;
            return;
        }
    }
    uint8_t *d = (uint8_t *)h + TX_DATA;
    struct virtio_net_hdr vh;
    memset(&vh, 0, sizeof vh);
    vh.hdr_len = (__virtio16)len;  /* little-endian hosts: the legacy header's order */
    memcpy(d, &vh, VNET);
    memcpy(d + VNET, data, len);
    h->tp_len = len + (uint32_t)VNET;
    __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
    p->tring_pos = (p->tring_pos + 1) % p->tring_frames;
    p->tring_pending = 1;
    p->ctr[PC_TXP]++; p->ctr[PC_TXB] += len;
    if (++p->tring_queued >= LB) tring_kick(p);  /* a long batch leaves in parts */
}

static void lp_flush_port(lport_t *p) {
    if (p->tring) { tring_kick(p); return; }
    for (uint32_t i = 0; i < p->ntx; i++) {
        p->tiov[i].iov_base = p->txbuf + p->toff[i];
        memset(&p->tmsg[i].msg_hdr, 0, sizeof p->tmsg[i].msg_hdr);
        p->tmsg[i].msg_hdr.msg_iov = &p->tiov[i];
        p->tmsg[i].msg_hdr.msg_iovlen = 1;
    }
    uint32_t i = 0;
    while (i < p->ntx) {
        int r = sendmmsg(p->fd, p->tmsg + i, p->ntx - i, MSG_DONTWAIT);
        if (r > 0) {
            for (uint32_t k = i; k < i + (uint32_t)r; k++) {
                p->ctr[PC_TXP]++; p->ctr[PC_TXB] += p->tiov[k].iov_len;
            }
            i += (uint32_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            p->ctr[PC_TXD]++;  /* the kernel refused this frame: a transmit drop */
            i++;
        }
    }
    p->ntx = 0; p->txused = 0;
}
static void lp_flush_all(loop_t *L) {
    for (uint32_t i = 0; i < L->n; i++)
        if (L->ports[i].ntx || L->ports[i].tring_pending) lp_flush_port(&L->ports[i]);
}
static void lp_tx(lport_t *p, const uint8_t *data, uint32_t len) {
    if (p->tring) { tring_tx(p, data, len); return; }
    if (p->ntx == LB) lp_flush_port(p);
    if (p->txused + len > p->txcap) {
        uint32_t cap = p->txcap ? p->txcap : 16384;
        while (cap < p->txused + len) cap *= 2;
        uint8_t *b = (uint8_t *)realloc(p->txbuf, cap);
        if (!b) { p->ctr[PC_TXD]++; return; }
        p->txbuf = b; p->txcap = cap;
    }
    memcpy(p->txbuf + p->txused, data, len);
    p->toff[p->ntx] = p->txused;
    p->tiov[p->ntx].iov_len = len;
    p->ntx++;
    p->txused += len;
}

/* ------------------------------------------------------------------ one frame */
static void lp_process(loop_t *L, lport_t *in, const uint8_t *data, uint32_t len) {
    state_t *S = L->S;
    char *out = NULL;
    int n = ss_process(S, in->num, (const char *)data, len, lp_now(L), L->t0, &out);
    if (S->dg_used) lp_punt(L, PT_DIGEST, in->num, S->dgbuf, 8 * S->dg_used);
    if (S->stats[0] != L->seen_assert) {
        L->seen_assert = S->stats[0];
        lp_punt(L, PT_ASSERT, (uint32_t)S->stats[2], NULL, 0);
    }
    if (S->stats[1] != L->seen_passes) {
        L->seen_passes = S->stats[1];
        lp_punt(L, PT_PASSES, in->num, NULL, 0);
    }
    if (n <= 0) { in->ctr[PC_DROP]++; return; }
    uint32_t pos = 0;
    uint64_t now = 0;
    while (pos + 8 <= (uint32_t)n) {
        uint32_t port, ln;
        memcpy(&port, out + pos, 4); memcpy(&ln, out + pos + 4, 4);
        const uint8_t *b = (const uint8_t *)out + pos + 8;
        pos += 8 + ln;
        if ((int32_t)port == L->cpu) { lp_punt(L, PT_CPU, port, b, ln); continue; }
        int idx = port < 512 ? L->map[port] : -1;
        if (idx < 0) { L->sw[SC_NOPORT]++; continue; }
        lport_t *p = &L->ports[idx];
        if (p->eline.delay && !L->nohold) {
            if (!now) now = mono_ns();
            if (dl_push(L, &p->eline, now + p->eline.delay, b, ln)) {
                p->ctr[PC_EHELD]++;
                if (p->ctr[PC_EHELD] > p->ctr[PC_EMAX]) p->ctr[PC_EMAX] = p->ctr[PC_EHELD];
                lp_note_held(L, 1);
            } else {
                p->ctr[PC_EOVF]++; p->ctr[PC_TXD]++;  /* the line is full: the wire drops it */
            }
            continue;
        }
        lp_tx(p, b, ln);
    }
}

static void lp_receive(loop_t *L, lport_t *p, const uint8_t *data, uint32_t len, uint64_t now) {
    p->ctr[PC_RXP]++; p->ctr[PC_RXB] += len;
    if (len < 14) p->ctr[PC_MAL]++;
    if (p->iline.delay && !L->nohold) {
        if (dl_push(L, &p->iline, now + p->iline.delay, data, len)) {
            p->ctr[PC_IHELD]++;
            if (p->ctr[PC_IHELD] > p->ctr[PC_IMAX]) p->ctr[PC_IMAX] = p->ctr[PC_IHELD];
            lp_note_held(L, 1);
        } else {
            p->ctr[PC_IOVF]++;
        }
        return;
    }
    lp_process(L, p, data, len);
}

/* Frames whose delay has passed (all of them when ``all``), in deadline order across
 * ports: egress ones are sent, received ones run through the pipeline. */
static uint32_t lp_release(loop_t *L, uint64_t now, int all) {
    uint32_t count = 0;
    for (;;) {
        lport_t *best = NULL; dline_t *bl = NULL; uint64_t bd = 0;
        for (uint32_t i = 0; i < L->n; i++) {
            lport_t *p = &L->ports[i];
            dline_t *ls[2] = {&p->eline, &p->iline};
            for (int k = 0; k < 2; k++) {
                held_t *h = dl_head(ls[k]);
                if (h && (all || h->due <= now) && (!best || h->due < bd)) {
                    best = p; bl = ls[k]; bd = h->due;
                }
            }
        }
        if (!best) break;
        held_t h = *dl_head(bl);
        dl_pop(bl);
        lp_note_held(L, -1);
        count++;
        if (bl == &best->eline) {
            best->ctr[PC_EHELD]--;
            lp_tx(best, h.data, h.len);
        } else {
            best->ctr[PC_IHELD]--;
            lp_process(L, best, h.data, h.len);
        }
        free(h.data);
    }
    return count;
}
static uint64_t lp_next_due(loop_t *L) {
    uint64_t d = 0;
    for (uint32_t i = 0; i < L->n; i++) {
        held_t *e = dl_head(&L->ports[i].eline), *g = dl_head(&L->ports[i].iline);
        if (e && (!d || e->due < d)) d = e->due;
        if (g && (!d || g->due < d)) d = g->due;
    }
    return d;
}

/* ------------------------------------------------------------------ receive */
static void lp_recv(lport_t *p) {
    uint32_t slot = p->bufsize + 4;
    for (uint32_t i = 0; i < LB; i++) {
        p->riov[i].iov_base = p->rxbuf + (size_t)i * slot + 4;
        p->riov[i].iov_len = p->bufsize;
        memset(&p->rmsg[i].msg_hdr, 0, sizeof p->rmsg[i].msg_hdr);
        p->rmsg[i].msg_hdr.msg_iov = &p->riov[i];
        p->rmsg[i].msg_hdr.msg_iovlen = 1;
        p->rmsg[i].msg_hdr.msg_name = &p->raddr[i];
        p->rmsg[i].msg_hdr.msg_namelen = sizeof p->raddr[i];
        p->rmsg[i].msg_hdr.msg_control = p->rctl[i];
        p->rmsg[i].msg_hdr.msg_controllen = sizeof p->rctl[i];
    }
    int r = recvmmsg(p->fd, p->rmsg, LB, MSG_DONTWAIT, NULL);
    p->nrx = 0;
    if (r <= 0) return;
    for (int i = 0; i < r; i++) {
        struct msghdr *h = &p->rmsg[i].msg_hdr;
        uint8_t *d = p->rxbuf + (size_t)i * slot + 4;
        uint32_t len = p->rmsg[i].msg_len;
        if (len > p->bufsize) len = p->bufsize;
        if (p->vnet) {  /* the socket puts a virtio_net header before every frame */
            if (len < VNET) continue;
            d += VNET; len -= (uint32_t)VNET;
        }
        if (h->msg_namelen >= sizeof(unsigned short) && p->raddr[i].sll_family == AF_PACKET
            && p->raddr[i].sll_pkttype == PACKET_OUTGOING)
            continue;  /* our own transmission (kernels without PACKET_IGNORE_OUTGOING) */
        /* the VLAN tag that receive offload took off goes back after the MAC addresses */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
            if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
            struct tpacket_auxdata a;
            memcpy(&a, CMSG_DATA(c), sizeof a);
            if ((a.tp_status & TP_STATUS_VLAN_VALID) || a.tp_vlan_tci) {
                if (len >= 12) {
                    uint16_t tpid = ((a.tp_status & TP_STATUS_VLAN_TPID_VALID) && a.tp_vlan_tpid)
                                    ? a.tp_vlan_tpid : 0x8100;
                    memmove(d - 4, d, 12);
                    d -= 4;
                    d[12] = tpid >> 8; d[13] = tpid & 0xFF;
                    d[14] = a.tp_vlan_tci >> 8; d[15] = a.tp_vlan_tci & 0xFF;
                    len += 4;
                }
            }
            break;
        }
        /* the frame's start (it may have moved for the tag) */
        p->rbase[p->nrx] = d;
        p->rlen[p->nrx] = len;
        p->nrx++;
    }
}

static struct tpacket2_hdr *ring_frame(lport_t *p, uint32_t i) { return ring_at(p, p->ring, i); }

static int ring_req(lport_t *p, int which, uint32_t fsize, uint32_t bsize, uint32_t bytes,
                    struct tpacket_req *req) {
    uint32_t blocks = bytes / bsize;
    if (blocks < 8) blocks = 8;
    req->tp_block_size = bsize; req->tp_block_nr = blocks; req->tp_frame_size = fsize;
    req->tp_frame_nr = (bsize / fsize) * blocks;
    return setsockopt(p->fd, SOL_PACKET, which, req, sizeof *req);
}
static void ring_unset(lport_t *p) {
    struct tpacket_req req; memset(&req, 0, sizeof req);
    /* the kernel keeps the transmit ring while frames sent from it are still in flight
     * (EBUSY): they are copies, freed within moments; wait up to a second for them */
    for (int k = 0; k < 1000; k++) {
        if (setsockopt(p->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) == 0
            || errno != EBUSY)
            break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req);
    int off = 0;
    setsockopt(p->fd, SOL_PACKET, PACKET_VNET_HDR, &off, sizeof off);
}
/* A receive ring, and with ``tx`` a transmit ring, on an AF_PACKET socket (else the port
 * keeps recvmmsg / sendmmsg). The transmit ring needs the socket's virtio_net header,
 * which must be set before any ring: without a transmit ring the port goes back to a
 * receive ring alone, without the header. */
static void ring_setup(lport_t *p, int tx) {
    struct sockaddr_storage ss; socklen_t sl = sizeof ss;
    if (getsockname(p->fd, (struct sockaddr *)&ss, &sl) != 0 || ss.ss_family != AF_PACKET) return;
    int v = TPACKET_V2;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) != 0) return;
    uint32_t fsize = TPACKET_ALIGN(TPACKET2_HDRLEN) + (uint32_t)VNET + p->bufsize + 16;
    fsize = (fsize + TPACKET_ALIGNMENT - 1) & ~(uint32_t)(TPACKET_ALIGNMENT - 1);
    uint32_t bsize = ((fsize * RING_BLOCK_FRAMES) + 4095) & ~4095u;
    struct tpacket_req rx, txr; memset(&txr, 0, sizeof txr);
    int one = 1;
    int with_tx = tx && setsockopt(p->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) == 0;
    if (ring_req(p, PACKET_RX_RING, fsize, bsize, RING_BYTES, &rx) != 0) { ring_unset(p); return; }
    if (with_tx) {
        /* a frame the kernel cannot send (too short or long) is skipped, not left in the
         * ring where it would stop every frame after it */
        setsockopt(p->fd, SOL_PACKET, PACKET_LOSS, &one, sizeof one);
        if (ring_req(p, PACKET_TX_RING, fsize, bsize, TX_RING_BYTES, &txr) != 0) {
            ring_unset(p);
            with_tx = 0;
            memset(&txr, 0, sizeof txr);
            if (ring_req(p, PACKET_RX_RING, fsize, bsize, RING_BYTES, &rx) != 0) {
                ring_unset(p);
                return;
            }
        }
    }
    size_t rx_len = (size_t)rx.tp_block_size * rx.tp_block_nr;
    size_t len = rx_len + (size_t)txr.tp_block_size * txr.tp_block_nr;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
    if (m == MAP_FAILED) { ring_unset(p); return; }
    p->ring = (uint8_t *)m; p->ring_len = len; p->ring_fsize = fsize; p->ring_bsize = bsize;
    p->ring_fpb = bsize / fsize; p->ring_frames = rx.tp_frame_nr; p->ring_pos = 0;
    if (with_tx) {
        p->tring = p->ring + rx_len; p->tring_frames = txr.tp_frame_nr;
        p->tring_pos = 0; p->tring_pending = 0; p->vnet = 1;
    }
}
/* Give the rings back (the Python loop reads and sends on the plain socket again). */
static void ring_teardown(lport_t *p) {
    if (!p->ring) return;
    if (p->tring) tring_kick(p);
    munmap(p->ring, p->ring_len);
    p->ring = NULL; p->tring = NULL; p->vnet = 0;
    ring_unset(p);
}
/* The ring's slots of the frames just processed go back to the kernel. */
static void ring_release(lport_t *p) {
    for (uint32_t k = 0; k < p->ntaken; k++)
        __atomic_store_n(&ring_frame(p, p->taken[k])->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    p->ntaken = 0;
}
static void ring_recv(lport_t *p) {
    p->nrx = 0;
    while (p->ntaken < RB) {
        struct tpacket2_hdr *h = ring_frame(p, p->ring_pos);
        uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (!(st & TP_STATUS_USER)) break;
        p->taken[p->ntaken++] = p->ring_pos;
        p->ring_pos = (p->ring_pos + 1) % p->ring_frames;
        const struct sockaddr_ll *sll = (const struct sockaddr_ll *)
            ((uint8_t *)h + TPACKET_ALIGN(sizeof(struct tpacket2_hdr)));
        if (sll->sll_pkttype == PACKET_OUTGOING) continue;
        uint8_t *d = (uint8_t *)h + h->tp_mac;
        uint32_t len = h->tp_snaplen;
        if (((st & TP_STATUS_VLAN_VALID) || h->tp_vlan_tci) && len >= 12
            && h->tp_mac >= TPACKET_ALIGN(TPACKET2_HDRLEN)) {
            uint16_t tpid = ((st & TP_STATUS_VLAN_TPID_VALID) && h->tp_vlan_tpid)
                            ? h->tp_vlan_tpid : 0x8100;
            memmove(d - 4, d, 12);
            d -= 4;
            d[12] = tpid >> 8; d[13] = tpid & 0xFF;
            d[14] = h->tp_vlan_tci >> 8; d[15] = h->tp_vlan_tci & 0xFF;
            len += 4;
        }
        p->rbase[p->nrx] = d;
        p->rlen[p->nrx] = len;
        p->nrx++;
    }
    if (p->ntaken == 0 && !p->qdrained) {  /* frames queued before the ring was set up */
        lp_recv(p);
        p->qdrained = p->nrx == 0;  /* from now on every frame goes to the ring */
    }
}
static void lp_pull(lport_t *p) {
    if (p->ring) ring_recv(p); else lp_recv(p);
}

static void lp_run_received(loop_t *L, uint64_t now) {
    for (uint32_t i = 0; i < L->n; i++) {
        lport_t *p = &L->ports[i];
        for (uint32_t k = 0; k < p->nrx; k++)
            lp_receive(L, p, (const uint8_t *)p->rbase[k], p->rlen[k], now);
        p->nrx = 0;
        if (p->ring) ring_release(p);
    }
}

/* ------------------------------------------------------------------ control */
static int lp_enter(loop_t *L) {
    pthread_mutex_lock(&L->m);
    while ((L->want || L->owned) && !L->stop) pthread_cond_wait(&L->cv, &L->m);
    if (L->stop) { pthread_mutex_unlock(&L->m); return 0; }
    L->busy = 1;
    pthread_mutex_unlock(&L->m);
    return 1;
}
static void lp_leave(loop_t *L) {
    pthread_mutex_lock(&L->m);
    L->busy = 0;
    if (L->want) pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->m);
}

static int lp_tx_pending(loop_t *L) {
    for (uint32_t i = 0; i < L->n; i++) if (L->ports[i].tring_pending) return 1;
    return 0;
}

static void *lp_main(void *arg) {
    loop_t *L = (loop_t *)arg;
    struct pollfd *pf = (struct pollfd *)calloc(L->n + 1, sizeof *pf);
    for (uint32_t i = 0; i < L->n; i++) { pf[i].fd = L->ports[i].fd; pf[i].events = POLLIN; }
    pf[L->n].fd = L->wake_fd; pf[L->n].events = POLLIN;
    int busy = 0;  /* the last batch had frames: look again without sleeping */
    while (!L->stop) {
        struct timespec ts, *tsp = NULL;
        uint64_t due = lp_next_due(L);
        if (busy) {
            ts.tv_sec = 0; ts.tv_nsec = 0;
            tsp = &ts;
        } else if (due) {
            uint64_t now = mono_ns();
            uint64_t wait = due > now ? due - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull); ts.tv_nsec = (long)(wait % 1000000000ull);
            tsp = &ts;
        }
        int r;
        if (busy && L->all_rings) {
            /* frames keep coming: look at the rings again without a system call */
            for (uint32_t i = 0; i < L->n; i++) pf[i].revents = POLLIN;
            pf[L->n].revents = 0;
            r = 1;
        } else {
            if (!busy && lp_tx_pending(L)) {  /* frames the kernel could not take yet */
                uint64_t cap = 1000000;  /* 1 ms */
                if (!tsp || (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec > cap) {
                    ts.tv_sec = 0; ts.tv_nsec = (long)cap; tsp = &ts;
                }
            }
            r = ppoll(pf, L->n + 1, tsp, NULL);
        }
        if (r < 0 && errno != EINTR) break;
        if (r > 0 && (pf[L->n].revents & POLLIN)) {
            uint64_t x; ssize_t got = read(L->wake_fd, &x, 8); (void)got;
        }
        if (L->stop) break;
        busy = 0;
        for (uint32_t i = 0; r > 0 && i < L->n; i++)
            if (pf[i].revents & (POLLIN | POLLERR)) {
                lp_pull(&L->ports[i]);
                busy |= L->ports[i].nrx > 0;
            }
        if (!lp_enter(L)) break;  /* stopping: what was received is left to ss_loop_flush */
        uint64_t now = mono_ns();
        lp_release(L, now, 0);
        lp_run_received(L, now);
        lp_flush_all(L);
        L->sw[SC_BATCHES]++;
        lp_leave(L);
    }
    free(pf);
    return NULL;
}

static loop_t *lp_of(void *vs) { return (loop_t *)((state_t *)vs)->loop; }

static void lp_destroy(loop_t *L) {
    for (uint32_t i = 0; i < L->n; i++) {
        lport_t *p = &L->ports[i];
        dline_t *ls[2] = {&p->eline, &p->iline};
        for (int k = 0; k < 2; k++) {
            while (ls[k]->n) { free(dl_head(ls[k])->data); dl_pop(ls[k]); }
            free(ls[k]->q);
        }
        ring_teardown(p);
        free(p->rxbuf); free(p->txbuf);
    }
    free(L->ports); free(L->pq); free(L->pq2);
    if (L->wake_fd >= 0) close(L->wake_fd);
    if (L->notify_fd >= 0) close(L->notify_fd);
    pthread_mutex_destroy(&L->m); pthread_mutex_destroy(&L->pm); pthread_cond_destroy(&L->cv);
    free(L);
}

/* Set up the loop over ``n`` ports (not started): 0, or -1 without memory or eventfds.
 * ``use_ring``: bit 0 a receive ring on AF_PACKET ports, bit 1 also a transmit ring. */
int ss_loop_new(void *vs, uint32_t n, const int *fds, const uint32_t *nums,
                const uint32_t *bufsizes, const uint64_t *edelay, const uint64_t *idelay,
                uint32_t capacity, int32_t cpu_port, double tdf, int needs_clock, uint64_t t0,
                uint64_t *port_ctr, uint64_t *sw_ctr, int use_ring) {
    state_t *S = (state_t *)vs;
    if (S->loop) return -1;
    loop_t *L = (loop_t *)calloc(1, sizeof *L);
    if (!L) return -1;
    L->S = S; L->n = n; L->cpu = cpu_port; L->tdf = tdf; L->needs_clock = needs_clock;
    L->t0 = t0; L->capacity = capacity; L->sw = sw_ctr;
    L->wake_fd = L->notify_fd = -1;
    pthread_mutex_init(&L->m, NULL); pthread_mutex_init(&L->pm, NULL);
    pthread_cond_init(&L->cv, NULL);
    for (int i = 0; i < 512; i++) L->map[i] = -1;
    L->ports = (lport_t *)calloc(n ? n : 1, sizeof(lport_t));
    if (!L->ports) { lp_destroy(L); return -1; }
    for (uint32_t i = 0; i < n; i++) {
        lport_t *p = &L->ports[i];
        p->fd = fds[i]; p->num = nums[i]; p->bufsize = bufsizes[i];
        p->eline.delay = edelay[i]; p->iline.delay = idelay[i];
        p->ctr = port_ctr + (size_t)NPC * i;
        p->rxbuf = (uint8_t *)malloc((size_t)LB * (p->bufsize + 4));
        if (!p->rxbuf) { lp_destroy(L); return -1; }
        if (nums[i] < 512) L->map[nums[i]] = (int16_t)i;
        if (use_ring & 1) ring_setup(p, use_ring & 2);
    }
    L->all_rings = n > 0;
    for (uint32_t i = 0; i < n; i++) L->all_rings &= L->ports[i].ring != NULL;
    L->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    L->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (L->wake_fd < 0 || L->notify_fd < 0) { lp_destroy(L); return -1; }
    L->seen_assert = S->stats[0]; L->seen_passes = S->stats[1];
    S->loop = L;
    return 0;
}
int ss_loop_notify_fd(void *vs) { loop_t *L = lp_of(vs); return L ? L->notify_fd : -1; }

/* How many ports have a receive ring (``tx`` 0) or a transmit ring (``tx`` 1). */
int ss_loop_rings(void *vs, int tx) {
    loop_t *L = lp_of(vs);
    int n = 0;
    for (uint32_t i = 0; L && i < L->n; i++)
        n += (tx ? L->ports[i].tring : L->ports[i].ring) != NULL;
    return n;
}

/* Start the thread: 0, or the error number of pthread_create. */
int ss_loop_start(void *vs) {
    loop_t *L = lp_of(vs);
    if (!L || L->running) return -1;
    L->stop = 0;
    /* the thread takes no signal: SIGTERM, SIGUSR1/2 must reach Python's main thread,
     * whose handlers run only there (and only wake it when they interrupt its wait) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&L->th, NULL, lp_main, L);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) L->running = 1;
    return rc;
}
void ss_loop_pause(void *vs) {
    loop_t *L = lp_of(vs);
    if (!L) return;
    pthread_mutex_lock(&L->m);
    L->want++;
    while (L->busy) pthread_cond_wait(&L->cv, &L->m);
    L->want--;
    L->owned = 1;
    pthread_mutex_unlock(&L->m);
}
void ss_loop_resume(void *vs) {
    loop_t *L = lp_of(vs);
    if (!L) return;
    pthread_mutex_lock(&L->m);
    L->owned = 0;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->m);
}
/* Stop and join the thread (paused or not). */
void ss_loop_stop(void *vs) {
    loop_t *L = lp_of(vs);
    if (!L || !L->running) return;
    pthread_mutex_lock(&L->m);
    L->stop = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->m);
    uint64_t one = 1; ssize_t w = write(L->wake_fd, &one, 8); (void)w;
    pthread_join(L->th, NULL);
    L->running = 0;
}
/* After ss_loop_stop: hold nothing more; received frames still waiting run, held frames
 * leave now (received ones through the pipeline). Returns how many left the lines. */
uint32_t ss_loop_flush(void *vs) {
    loop_t *L = lp_of(vs);
    if (!L || L->running) return 0;
    L->nohold = 1;
    uint64_t now = mono_ns();
    lp_run_received(L, now);
    for (uint32_t i = 0; i < L->n; i++) {  /* what the rings still hold */
        lport_t *p = &L->ports[i];
        if (!p->ring) continue;
        for (int k = 0; k < 1 << 16; k++) {
            ring_recv(p);
            if (!p->ntaken && !p->nrx) break;
            lp_run_received(L, now);
        }
    }
    uint32_t n = lp_release(L, now, 1);
    lp_flush_all(L);
    L->sw[SC_RELEASED] += n;
    return n;
}
/* Run one frame as if received on ``port`` (PacketOut), the thread paused or stopped. */
int ss_loop_inject(void *vs, uint32_t port, const char *frame, uint32_t len) {
    loop_t *L = lp_of(vs);
    if (!L) return -1;
    lport_t fake; memset(&fake, 0, sizeof fake);
    uint64_t junk[NPC] = {0};
    fake.num = port; fake.ctr = junk;
    lport_t *in = (port < 512 && L->map[port] >= 0) ? &L->ports[L->map[port]] : &fake;
    uint64_t drop = in->ctr[PC_DROP];
    lp_process(L, in, (const uint8_t *)frame, len);
    in->ctr[PC_DROP] = drop;  /* a PacketOut is not a received frame */
    lp_flush_all(L);
    return 0;
}
/* The punt records queued so far (type, port, length, bytes; native u32s), valid until
 * the next call. */
uint32_t ss_loop_take(void *vs, char **out) {
    loop_t *L = lp_of(vs);
    *out = NULL;
    if (!L) return 0;
    uint64_t x; ssize_t got = read(L->notify_fd, &x, 8); (void)got;
    pthread_mutex_lock(&L->pm);
    uint8_t *q = L->pq; uint32_t cap = L->pq_cap, n = L->pq_used;
    L->pq = L->pq2; L->pq_cap = L->pq2_cap; L->pq_used = 0;
    L->pq2 = q; L->pq2_cap = cap;
    pthread_mutex_unlock(&L->pm);
    *out = (char *)q;
    return n;
}
/* Stop the thread and free the loop (the sockets stay open: Python owns them). */
void ss_loop_free(void *vs) {
    loop_t *L = lp_of(vs);
    if (!L) return;
    ss_loop_stop(vs);
    lp_destroy(L);
    ((state_t *)vs)->loop = NULL;
}
