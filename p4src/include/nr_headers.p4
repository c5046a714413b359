/* nr_headers.p4 -- constants, header types and metadata of the NetReduce program.
 *
 * Every layout here is documented byte by byte in docs/protocol.md; protocol/netreduce.py is
 * the Python side's one copy (tests/test_protocol_contract.py checks that it matches).
 * Change all three together. */

#ifndef NR_HEADERS_P4
#define NR_HEADERS_P4

/* ---------------------------------------------------------------- compile-time sizes */

/* Elements (signed 32-bit fixed-point values) per aggregation packet.  The default, 252, is
 * the most whose tag and payload fit RoCE's 1024-byte path MTU (1008-byte payloads): the
 * program every run uses (protocol/netreduce.py's PROGRAM_ELEMS; tests/test_protocol_contract.py
 * checks that the two agree).  Smaller sizes (32 -> 128-byte payloads, fast on a software
 * target) are built with a wrapper that defines NR_ELEMS before including netreduce.p4.
 * Every aggregation packet carries exactly NR_ELEMS elements (workers zero-pad). */
#ifndef NR_ELEMS
#define NR_ELEMS 252
#endif
#include "nr_elems.p4"

/* Aggregation slots in the whole switch (shared by all jobs; each has two copies). */
#ifndef NR_SLOTS
#define NR_SLOTS 1024
#endif

/* Job ids are 0 .. NR_JOBS-1 (they index the per-job counters). */
#ifndef NR_JOBS
#define NR_JOBS 64
#endif

/* Aggregation connections (worker QPs and inter-switch links) known to the switch. */
#ifndef NR_CONNS
#define NR_CONNS 1024
#endif

/* Message bindings remembered per connection; a job's credits must not exceed it.
 * The binding search in netreduce.p4 is unrolled for exactly this many. */
#define NR_BIND 4

/* Bitmap positions (ranks) per job at one switch: one bit<32> bitmap. */
#define NR_MAX_RANKS 32

/* The rank the connection table gives to the link from this switch's parent. */
#define NR_RANK_PARENT 255

#define NR_SLOT_COPIES (NR_SLOTS * 2)
#define NR_BINDINGS (NR_CONNS * NR_BIND)
#define NR_DROP_REASONS 32

/* A leaf re-sends a partial aggregate for a slot at most once per this many microseconds
 * (ingress_global_timestamp), however many workers retransmit into it meanwhile. */
#ifndef NR_RESEND_US
#define NR_RESEND_US 10000
#endif

/* Ports with a fault (loss/reorder) state: every bit<9> port number. */
#define NR_PORTS 512

/* ------------------------------------------------------------------------ protocol */

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<8>  IPPROTO_TCP    = 6;
const bit<8>  IPPROTO_UDP    = 17;
const bit<16> ROCE_V2_PORT   = 4791;

/* BTH opcodes of the RC transport used here. */
const bit<8> RC_WRITE_FIRST  = 0x06;
const bit<8> RC_WRITE_MIDDLE = 0x07;
const bit<8> RC_WRITE_LAST   = 0x08;
const bit<8> RC_WRITE_ONLY   = 0x0A;

/* First two bytes of the aggregation tag ("NR"). */
const bit<16> NR_MAGIC = 0x4E52;

/* Aggregation tag flags. */
const bit<8> NR_FLAG_VERSION  = 0x01;  /* which of the slot's two copies */
const bit<8> NR_FLAG_OVERFLOW = 0x02;  /* some element saturated */
const bit<8> NR_FLAG_RESULT   = 0x04;  /* a result (switch -> worker / parent -> child) */
const bit<8> NR_FLAG_SWITCH   = 0x08;  /* inter-switch packet: tag on every packet */
const bit<8> NR_FLAG_PULL     = 0x10;  /* inter-switch: send me the final result you hold */
const bit<8> NR_FLAG_TOTAL    = 0x20;  /* inter-switch, up: the final result, not a partial */

/* Header sizes in bytes, and the exact lengths of aggregation packets. */
#define NR_DATA_BYTES (NR_ELEMS * 4)
#define NR_UDP_LEN_TAGGED (8 + 12 + 16 + 16 + NR_DATA_BYTES + 4)
#define NR_UDP_LEN_PLAIN  (8 + 12 + NR_DATA_BYTES + 4)
#define NR_IP_LEN_TAGGED  (20 + NR_UDP_LEN_TAGGED)
#define NR_IP_LEN_PLAIN   (20 + NR_UDP_LEN_PLAIN)

/* Job roles (job_table). */
const bit<8> NR_ROLE_ROOT = 0;   /* completes and multicasts results to its members */
const bit<8> NR_ROLE_LEAF = 1;   /* completes, sends one partial up, waits for the parent */

/* What the ingress decided to transmit for an aggregation packet (meta.nr.emit). */
const bit<2> NR_EMIT_NONE   = 0;
const bit<2> NR_EMIT_RESULT = 1;   /* result to members (multicast) or one connection */
const bit<2> NR_EMIT_UP     = 2;   /* partial aggregate to the parent */

/* Slot flags register bits. */
const bit<8> NR_SLOT_OVERFLOW = 0x01;
const bit<8> NR_SLOT_FINAL    = 0x02;   /* holds the final (global) result */

/* Drop reasons: index of SwitchIngress.drops / SwitchEgress.drops and, for aggregation
 * reasons, of the per-job counter SwitchIngress.agg.job_drops (job * 16 + reason). */
const bit<8> DROP_NONE          = 0;
const bit<8> DROP_UNKNOWN_JOB   = 1;
const bit<8> DROP_NON_MEMBER    = 2;
const bit<8> DROP_MALFORMED     = 3;
const bit<8> DROP_OUT_OF_RANGE  = 4;
const bit<8> DROP_CREDIT        = 5;
const bit<8> DROP_STALE         = 6;
const bit<8> DROP_UNBOUND       = 7;
const bit<8> DROP_NO_REWRITE    = 8;
const bit<8> DROP_FAULT         = 9;
const bit<8> DROP_ARP           = 10;
const bit<8> DROP_NOT_IPV4      = 11;
const bit<8> DROP_TTL           = 12;
const bit<8> DROP_NO_ROUTE      = 13;
const bit<8> DROP_BAD_CHECKSUM  = 14;
const bit<8> DROP_WRONG_PORT    = 15;  /* a connection's packet on another port (spoofed) */
const bit<8> DROP_FORGED_SWITCH = 16;  /* SWITCH flag on a worker connection, or not on a link */
const bit<8> DROP_STALE_RESULT  = 17;  /* egress: the receiver's binding moved on; not sent */
const bit<8> DROP_REPEAT_RESULT = 18;  /* a parent's result for a copy already final */
const bit<8> DROP_BAD_INDEX     = 19;  /* a register index outside its array */

/* ------------------------------------------------------------------------- headers */

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

/* IPv4 options (IHL > 5): carried and covered by the checksum, never interpreted. */
header ipv4_options_t {
    varbit<320> options;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* RoCE v2 Base Transport Header (12 bytes). */
header bth_t {
    bit<8>  opcode;
    bit<1>  se;
    bit<1>  migreq;
    bit<2>  padcnt;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dqpn;
    bit<1>  ackreq;
    bit<7>  resv7;      /* bit 0 (value 1) marks a saturated result packet */
    bit<24> psn;
}

/* RDMA Extended Transport Header (16 bytes), on WRITE First / Only. */
header reth_t {
    bit<64> va;
    bit<32> rkey;
    bit<32> dmaLen;
}

/* The testbed's aggregation tag (16 bytes), after the RETH of a message's first packet
 * and of every inter-switch packet. */
header nr_tag_t {
    bit<16> magic;      /* NR_MAGIC */
    bit<16> job;        /* job id */
    bit<16> msg;        /* message sequence number within the job (wraps) */
    bit<16> slot;       /* first slot of the message, relative to the job's slot base */
    bit<16> npkts;      /* packets in the message (>= 1) */
    bit<16> pktIdx;     /* index of this packet in the message (0 on worker packets) */
    bit<8>  rank;       /* informational: sender's bitmap position / result's target */
    bit<8>  flags;      /* NR_FLAG_* */
    bit<16> window;     /* worker: messages it keeps in flight; result: the job's credits */
}

#define NR_ELEM_FIELD(i) int<32> e##i;
/* The payload: NR_ELEMS signed 32-bit fixed-point elements. */
header nr_data_t {
    NR_FOR_EACH_ELEM(NR_ELEM_FIELD)
}

/* RoCE invariant CRC trailer: carried, never computed (see docs/protocol.md). */
header icrc_t {
    bit<32> icrc;
}

struct headers_t {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    ipv4_options_t ipv4_options;
    tcp_t      tcp;
    udp_t      udp;
    bth_t      bth;
    reth_t     reth;
    nr_tag_t   nr_tag;
    nr_data_t  nr_data;
    icrc_t     icrc;
}

/* ------------------------------------------------------------------------ metadata */

/* What the aggregation control works out for one packet; carried to the egress (and
 * into every multicast replica) because the egress rewrites the results. */
struct nr_meta_t {
    /* from the connection table */
    bit<16> job;
    bit<16> conn;
    bit<8>  rank;
    bit<9>  result_port;
    bit<9>  in_port;        /* the only port this connection's packets may arrive on */
    bit<1>  fabric;         /* an inter-switch link (its packets carry SWITCH) */
    bit<1>  handled;        /* the aggregation control took the packet */
    /* from the job table */
    bit<32> slot_base;
    bit<16> slot_count;
    bit<8>  expected;
    bit<32> members;
    bit<16> credits;
    bit<8>  role;
    bit<16> mcast_grp;
    bit<9>  upstream_port;
    /* where the packet belongs */
    bit<16> msg;
    bit<16> slot_first;
    bit<16> npkts;
    bit<16> pkt_idx;
    bit<1>  ver;
    bit<1>  tag_overflow;
    bit<1>  from_switch;
    bit<1>  pull;           /* the tag has PULL: asks for a final result, adds nothing */
    bit<1>  total;          /* the tag has TOTAL: a child's final result */
    bit<32> g;              /* slot copy: 2 * slot + version */
    /* verdict */
    bit<2>  emit;           /* NR_EMIT_* */
    bit<1>  to_group;       /* emitted to the job's multicast group */
    bit<8>  target;         /* rank whose connection receives it, or NR_RANK_PARENT */
    bit<1>  out_overflow;
    bit<8>  out_flags;      /* NR_FLAG_PULL or NR_FLAG_TOTAL on an inter-switch packet */
}

struct fwd_meta_t {
    bit<16> l4_src;
    bit<16> l4_dst;
    bit<16> ecmp_group;
    bit<16> ecmp_member;
}

struct metadata_t {
    nr_meta_t  nr;
    fwd_meta_t fwd;
    bit<8>     drop_reason;     /* DROP_* once the packet is dropped */
    bit<1>     held;            /* fault injection: the packet waits in a reorder buffer */
}

#endif  /* NR_HEADERS_P4 */
