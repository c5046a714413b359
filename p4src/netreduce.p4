/* netreduce.p4 -- NetReduce-style in-network gradient aggregation over RoCE v2, plus
 * ordinary IPv4 routing with ECMP, for the v1model architecture (BMv2 simple_switch and
 * the testbed's built-in target).
 *
 * Read docs/protocol.md first: it gives the packet formats, the slot state machine and
 * how a controller configures jobs.  In short:
 *   - a worker sends each gradient message as an RDMA WRITE on its own RC connection;
 *     the first packet carries an aggregation tag after the RETH, the others are plain;
 *   - the switch binds the message to slots on the first packet (per connection) and
 *     finds the slot of every later packet from its PSN;
 *   - each slot sums NR_ELEMS int<32> elements (saturating) from every member; the last
 *     contribution releases the result: multicast to every member connection (root), or
 *     one partial aggregate to the parent switch (leaf), which answers with the total;
 *   - the egress rewrites every result replica into a valid packet of the receiving
 *     worker's own connection (addresses, QP, and the PSN and RETH of that connection's
 *     binding of the message, which the ingress wrote: the same whatever order egress
 *     runs packets in);
 *   - a connection's packets count only on its own port, switch packets only on links
 *     between switches, and every register index is checked (docs/protocol.md sec. 9).
 * Configuration is only tables, multicast groups and (unused here) clone sessions:
 * registers hold data-plane state and are never written by the controller. */

#include <core.p4>
#include <v1model.p4>

#include "include/nr_headers.p4"

/* ========================================================================== parser */

parser SwitchParser(packet_in packet,
                    out headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
            0: accept;
            1: accept;
            2: accept;
            3: accept;
            4: accept;
            5: parse_l4;
            default: parse_ipv4_options;
        }
    }

    /* Options are kept as they are (the checksum covers them); only unfragmented packets
     * without options can be aggregation packets. */
    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options, (bit<32>)(((bit<16>)hdr.ipv4.ihl - 5) * 32));
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, IPPROTO_TCP): parse_tcp;
            (0, IPPROTO_UDP): parse_udp_only;
            default: accept;
        }
    }

    state parse_l4 {
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, IPPROTO_TCP): parse_tcp;
            (0, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp_only {
        packet.extract(hdr.udp);
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            ROCE_V2_PORT: parse_bth;
            default: accept;
        }
    }

    /* Aggregation packets have exactly one of two lengths; any other RoCE packet is
     * left as payload and routed like other traffic. */
    state parse_bth {
        packet.extract(hdr.bth);
        transition select(hdr.bth.opcode, hdr.udp.length) {
            (RC_WRITE_FIRST, NR_UDP_LEN_TAGGED): parse_reth;
            (RC_WRITE_ONLY, NR_UDP_LEN_TAGGED): parse_reth;
            (RC_WRITE_MIDDLE, NR_UDP_LEN_PLAIN): parse_nr_data;
            (RC_WRITE_LAST, NR_UDP_LEN_PLAIN): parse_nr_data;
            default: accept;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition select(packet.lookahead<bit<16>>()) {
            NR_MAGIC: parse_nr_tag;
            default: accept;
        }
    }

    state parse_nr_tag {
        packet.extract(hdr.nr_tag);
        transition parse_nr_data;
    }

    state parse_nr_data {
        packet.extract(hdr.nr_data);
        packet.extract(hdr.icrc);
        transition accept;
    }
}

/* ======================================================================= checksums */

/* The IPv4 header checksum covers the options too: one list without, one with them. */
#define NR_IPV4_BASE_FIELDS                                                       \
    hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,         \
    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,   \
    hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr

control SwitchVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { NR_IPV4_BASE_FIELDS },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4_options.isValid(),
            { NR_IPV4_BASE_FIELDS, hdr.ipv4_options.options },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control SwitchComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && !hdr.ipv4_options.isValid(),
            { NR_IPV4_BASE_FIELDS },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4_options.isValid(),
            { NR_IPV4_BASE_FIELDS, hdr.ipv4_options.options },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

/* ================================================================= fault injection */

/* Drops packets on a port with probability threshold / 65536 (65536 = always).  Used
 * once on the ingress port and once on the egress port. */
control PortLoss(in bit<9> port,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    bit<17> loss_threshold = 0;

    action lossy(bit<17> threshold) {
        loss_threshold = threshold;
    }

    table port_loss {
        key = { port: exact; }
        actions = { lossy; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        if (port_loss.apply().hit) {
            bit<17> r;
            random(r, 17w0, 17w0xFFFF);
            if (r < loss_threshold) {
                meta.drop_reason = DROP_FAULT;
                mark_to_drop(standard_metadata);
            }
        }
    }
}

/* Reorders aggregation packets on a port: a packet picked with probability
 * threshold / 65536 is swapped with the one the port's buffer holds (the held packet
 * continues in its place, the picked one waits; an empty buffer just takes it).  A
 * packet held for max_hold later aggregation packets is swapped out by the next one, so
 * a held packet is overtaken by at most max_hold others, or waits until more traffic
 * comes.  Only aggregation-format packets (fully parsed, fixed size) are held: a swap
 * then exchanges whole packets.  Used once on the ingress port and once on the egress
 * port, each with its own buffers. */
#define NR_HOLD_ELEM(i)                                                           \
    held_data.read(h_word, data_base + i);                                        \
    held_data.write(data_base + i, (bit<32>)hdr.nr_data.e##i);                    \
    hdr.nr_data.e##i = (int<32>)h_word;

control PortReorder(in bit<9> port,
                    inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    counter(NR_PORTS, CounterType.packets) reordered;   /* packets put into the buffer */

    /* The held packet of each port: header fields packed into words, then its elements. */
    register<bit<8>>(NR_PORTS) held_state;    /* 0 empty; else 1 + (RETH valid) * 2 + (tag) * 4 */
    register<bit<8>>(NR_PORTS) held_age;      /* aggregation packets that passed it */
    register<bit<96>>(NR_PORTS) held_eth;
    register<bit<160>>(NR_PORTS) held_ipv4;
    register<bit<64>>(NR_PORTS) held_udp;
    register<bit<96>>(NR_PORTS) held_bth;
    register<bit<128>>(NR_PORTS) held_reth;
    register<bit<128>>(NR_PORTS) held_tag;
    register<bit<32>>(NR_PORTS) held_icrc;
    register<bit<32>>(NR_PORTS * NR_ELEMS) held_data;

    bit<17> reorder_threshold = 0;
    bit<8> reorder_max_hold = 0;

    action reorder(bit<17> threshold, bit<8> max_hold) {
        reorder_threshold = threshold;
        reorder_max_hold = max_hold;
    }

    table port_reorder {
        key = { port: exact; }
        actions = { reorder; NoAction; }
        default_action = NoAction();
        size = NR_PORTS;
    }

    apply {
        bool picked = false;
        if (hdr.nr_data.isValid()) {
            picked = port_reorder.apply().hit;
        }
        if (picked) {
            bit<32> pi = (bit<32>)port;
            bit<8> occupied;
            bit<8> age;
            bit<17> r;
            held_state.read(occupied, pi);
            held_age.read(age, pi);
            random(r, 17w0, 17w0xFFFF);
            if (r < reorder_threshold || (occupied != 0 && age >= reorder_max_hold)) {
                /* Swap the packet with the held one, field by field. */
                bit<8> mine = 1;
                if (hdr.reth.isValid()) { mine = mine | 2; }
                if (hdr.nr_tag.isValid()) { mine = mine | 4; }
                bit<96> h_eth;
                bit<160> h_ipv4;
                bit<64> h_udp;
                bit<96> h_bth;
                bit<128> h_reth;
                bit<128> h_tag;
                bit<32> h_icrc;
                bit<32> h_word;
                held_eth.read(h_eth, pi);
                held_ipv4.read(h_ipv4, pi);
                held_udp.read(h_udp, pi);
                held_bth.read(h_bth, pi);
                held_reth.read(h_reth, pi);
                held_tag.read(h_tag, pi);
                held_icrc.read(h_icrc, pi);
                held_eth.write(pi, hdr.ethernet.dstAddr ++ hdr.ethernet.srcAddr);
                held_ipv4.write(pi, hdr.ipv4.version ++ hdr.ipv4.ihl ++ hdr.ipv4.diffserv
                    ++ hdr.ipv4.totalLen ++ hdr.ipv4.identification ++ hdr.ipv4.flags
                    ++ hdr.ipv4.fragOffset ++ hdr.ipv4.ttl ++ hdr.ipv4.protocol
                    ++ hdr.ipv4.hdrChecksum ++ hdr.ipv4.srcAddr ++ hdr.ipv4.dstAddr);
                held_udp.write(pi, hdr.udp.srcPort ++ hdr.udp.dstPort ++ hdr.udp.length
                    ++ hdr.udp.checksum);
                held_bth.write(pi, hdr.bth.opcode ++ hdr.bth.se ++ hdr.bth.migreq
                    ++ hdr.bth.padcnt ++ hdr.bth.tver ++ hdr.bth.pkey ++ hdr.bth.fecn
                    ++ hdr.bth.becn ++ hdr.bth.resv6 ++ hdr.bth.dqpn ++ hdr.bth.ackreq
                    ++ hdr.bth.resv7 ++ hdr.bth.psn);
                if (hdr.reth.isValid()) {
                    held_reth.write(pi, hdr.reth.va ++ hdr.reth.rkey ++ hdr.reth.dmaLen);
                }
                if (hdr.nr_tag.isValid()) {
                    held_tag.write(pi, hdr.nr_tag.magic ++ hdr.nr_tag.job ++ hdr.nr_tag.msg
                        ++ hdr.nr_tag.slot ++ hdr.nr_tag.npkts ++ hdr.nr_tag.pktIdx
                        ++ hdr.nr_tag.rank ++ hdr.nr_tag.flags ++ hdr.nr_tag.window);
                }
                held_icrc.write(pi, hdr.icrc.icrc);
                bit<32> data_base = pi * NR_ELEMS;
                NR_FOR_EACH_ELEM(NR_HOLD_ELEM)
                held_state.write(pi, mine);
                held_age.write(pi, 0);
                reordered.count(pi);
                if (occupied == 0) {
                    /* Nothing was held: this packet waits, nothing leaves now. */
                    meta.held = 1;
                    mark_to_drop(standard_metadata);
                } else {
                    hdr.ethernet.dstAddr = h_eth[95:48];
                    hdr.ethernet.srcAddr = h_eth[47:0];
                    hdr.ipv4.version = h_ipv4[159:156];
                    hdr.ipv4.ihl = h_ipv4[155:152];
                    hdr.ipv4.diffserv = h_ipv4[151:144];
                    hdr.ipv4.totalLen = h_ipv4[143:128];
                    hdr.ipv4.identification = h_ipv4[127:112];
                    hdr.ipv4.flags = h_ipv4[111:109];
                    hdr.ipv4.fragOffset = h_ipv4[108:96];
                    hdr.ipv4.ttl = h_ipv4[95:88];
                    hdr.ipv4.protocol = h_ipv4[87:80];
                    hdr.ipv4.hdrChecksum = h_ipv4[79:64];
                    hdr.ipv4.srcAddr = h_ipv4[63:32];
                    hdr.ipv4.dstAddr = h_ipv4[31:0];
                    hdr.udp.srcPort = h_udp[63:48];
                    hdr.udp.dstPort = h_udp[47:32];
                    hdr.udp.length = h_udp[31:16];
                    hdr.udp.checksum = h_udp[15:0];
                    hdr.bth.opcode = h_bth[95:88];
                    hdr.bth.se = h_bth[87:87];
                    hdr.bth.migreq = h_bth[86:86];
                    hdr.bth.padcnt = h_bth[85:84];
                    hdr.bth.tver = h_bth[83:80];
                    hdr.bth.pkey = h_bth[79:64];
                    hdr.bth.fecn = h_bth[63:63];
                    hdr.bth.becn = h_bth[62:62];
                    hdr.bth.resv6 = h_bth[61:56];
                    hdr.bth.dqpn = h_bth[55:32];
                    hdr.bth.ackreq = h_bth[31:31];
                    hdr.bth.resv7 = h_bth[30:24];
                    hdr.bth.psn = h_bth[23:0];
                    if ((occupied & 2) != 0) {
                        hdr.reth.setValid();
                        hdr.reth.va = h_reth[127:64];
                        hdr.reth.rkey = h_reth[63:32];
                        hdr.reth.dmaLen = h_reth[31:0];
                    } else {
                        hdr.reth.setInvalid();
                    }
                    if ((occupied & 4) != 0) {
                        hdr.nr_tag.setValid();
                        hdr.nr_tag.magic = h_tag[127:112];
                        hdr.nr_tag.job = h_tag[111:96];
                        hdr.nr_tag.msg = h_tag[95:80];
                        hdr.nr_tag.slot = h_tag[79:64];
                        hdr.nr_tag.npkts = h_tag[63:48];
                        hdr.nr_tag.pktIdx = h_tag[47:32];
                        hdr.nr_tag.rank = h_tag[31:24];
                        hdr.nr_tag.flags = h_tag[23:16];
                        hdr.nr_tag.window = h_tag[15:0];
                    } else {
                        hdr.nr_tag.setInvalid();
                    }
                    hdr.icrc.icrc = h_icrc;
                }
            } else if (occupied != 0 && age != 255) {
                held_age.write(pi, age + 1);
            }
        }
    }
}

/* ====================================================================== forwarding */

/* IPv4 longest-prefix routing; a route may name an ECMP group, whose member is picked
 * by a CRC16 hash of the 5-tuple. */
control Ipv4Forwarding(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) ipv4_lpm_counter;

    action no_route() {
        meta.drop_reason = DROP_NO_ROUTE;
        mark_to_drop(standard_metadata);
    }

    action set_nhop(bit<48> smac, bit<48> dmac, bit<9> port) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action set_ecmp(bit<16> group, bit<16> group_size) {
        meta.fwd.ecmp_group = group;
        hash(meta.fwd.ecmp_member, HashAlgorithm.crc16, 16w0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.fwd.l4_src, meta.fwd.l4_dst },
             group_size);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; set_ecmp; no_route; }
        default_action = no_route();
        counters = ipv4_lpm_counter;
        size = 1024;
    }

    table ecmp_nhop {
        key = {
            meta.fwd.ecmp_group: exact;
            meta.fwd.ecmp_member: exact;
        }
        actions = { set_nhop; no_route; }
        default_action = no_route();
        size = 1024;
    }

    apply {
        if (hdr.tcp.isValid()) {
            meta.fwd.l4_src = hdr.tcp.srcPort;
            meta.fwd.l4_dst = hdr.tcp.dstPort;
        } else if (hdr.udp.isValid()) {
            meta.fwd.l4_src = hdr.udp.srcPort;
            meta.fwd.l4_dst = hdr.udp.dstPort;
        }
        if (hdr.ipv4.ttl <= 1) {
            meta.drop_reason = DROP_TTL;
            mark_to_drop(standard_metadata);
        } else {
            switch (ipv4_lpm.apply().action_run) {
                set_ecmp: { ecmp_nhop.apply(); }
            }
        }
    }
}

/* ============================================================ aggregation: ingress */

/* Message bindings, per connection: index conn * NR_BIND + msg % NR_BIND.  Written by the
 * ingress when a worker's first packet opens a message; read by the ingress (to place the
 * message's later packets) and by the egress (every result for that connection takes its
 * PSN and RETH from here).  They are declared at the top level so that both controls use
 * the same arrays: a result replica then reads what the ingress wrote before the slot
 * could complete, whatever order the egress runs replicas and other packets in. */
register<bit<24>>(NR_BINDINGS) bind_psn;     /* PSN of the first packet */
register<bit<16>>(NR_BINDINGS) bind_npkts;   /* 0 = unused */
register<bit<16>>(NR_BINDINGS) bind_slot;
register<bit<16>>(NR_BINDINGS) bind_msg;
register<bit<1>>(NR_BINDINGS) bind_ver;
register<bit<64>>(NR_BINDINGS) bind_va;      /* the first packet's RETH */
register<bit<32>>(NR_BINDINGS) bind_rkey;
register<bit<32>>(NR_BINDINGS) bind_dma_len;
/* 1 while a binding still holds one of the connection's credits (it is "settled" when the
 * worker has moved a whole window past it, see NR_SETTLE_BINDING). */
register<bit<1>>(NR_BINDINGS) bind_open;

/* What the ingress does with a slot copy's sums once it has decided (sums_op): the
 * program's own bookkeeping, not protocol constants. */
#define NR_SUMS_KEEP  0
#define NR_SUMS_LOAD  1   /* the stored sums into the packet (a result resent) */
#define NR_SUMS_STORE 2   /* the packet's elements become the sums */

/* Per-element work, expanded for every element by NR_FOR_EACH_ELEM (nr_elems.p4). */

/* Add the packet's element into the slot with saturation, note an overflow, and leave
 * the running sum in the packet.  (The first contribution to a fresh slot copy only
 * stores its elements, NR_STORE below: two unrolled loops rather than one with a branch
 * per element, which saves a software target work on every element.) */
#define NR_ACCUMULATE(i)                                                          \
    slot_sums.read(old_sum, elem_base + i);                                       \
    new_sum = (int<32>)old_sum |+| hdr.nr_data.e##i;                              \
    if (new_sum != (int<32>)old_sum + hdr.nr_data.e##i) { overflow = 1; }        \
    slot_sums.write(elem_base + i, (bit<32>)new_sum);                             \
    hdr.nr_data.e##i = new_sum;

/* Put the slot's stored sum into the packet (resending a result). */
#define NR_LOAD(i)                                                                \
    slot_sums.read(old_sum, elem_base + i);                                       \
    hdr.nr_data.e##i = (int<32>)old_sum;

/* Store the packet's elements as the slot's sum (the parent's total, or the first
 * contribution to a fresh slot copy). */
#define NR_STORE(i)                                                               \
    slot_sums.write(elem_base + i, (bit<32>)hdr.nr_data.e##i);

/* Look for the binding whose PSN range holds this packet; offset 0 is the tagged
 * first packet, so a plain packet must be at offset 1 .. npkts-1. */
#define NR_TRY_BINDING(b)                                                         \
    bind_npkts.read(b_npkts, bind_base + b);                                      \
    bind_psn.read(b_psn, bind_base + b);                                          \
    if (!found && b_npkts != 0 && hdr.bth.psn - b_psn != 0                        \
            && hdr.bth.psn - b_psn < (bit<24>)b_npkts) {                          \
        found = true;                                                             \
        meta.nr.pkt_idx = (bit<16>)(hdr.bth.psn - b_psn);                         \
        meta.nr.npkts = b_npkts;                                                  \
        bind_slot.read(meta.nr.slot_first, bind_base + b);                        \
        bind_msg.read(meta.nr.msg, bind_base + b);                                \
        bind_ver.read(meta.nr.ver, bind_base + b);                                \
    }

/* Credits in use on a connection: its bindings still open.  A binding closes when its
 * message is done here, or when the worker opens a message a whole window (the one its tag
 * declares) newer: it opens message m only with the results and ACKs of every message up to
 * m - window (docs/workloads.md), so those are over for it.  The second way matters after a
 * switch restart: a worker whose ACK died with the old switch sends an old message again,
 * the new switch binds it, and the other workers, who have its result, never send it again;
 * it could never be done here, and with every credit held so, the connection could open no
 * message.  A tag without a window (0) closes nothing the second way.  Only open bindings
 * are read further (a first packet reads one register per closed binding). */
#define NR_COUNT_BINDING(b)                                                       \
    bind_open.read(s_open, bind_base + b);                                        \
    if (s_open == 1) {                                                            \
        bind_npkts.read(s_npkts, bind_base + b);                                  \
        bind_msg.read(s_msg_b, bind_base + b);                                    \
        bind_slot.read(s_slot, bind_base + b);                                    \
        bind_ver.read(s_ver, bind_base + b);                                      \
        s_age = meta.nr.msg - s_msg_b;                                            \
        s_g = (meta.nr.slot_base + (bit<32>)s_slot) * 2 + (bit<32>)s_ver;        \
        s_progress = 0;                                                           \
        if (s_g < NR_SLOT_COPIES) {                                               \
            msg_progress.read(s_progress, s_g);                                   \
        }                                                                         \
        if (s_progress == meta.nr.job ++ s_msg_b ++ s_npkts                       \
                || (hdr.nr_tag.window != 0 && (s_age & 0x8000) == 0               \
                    && s_age >= hdr.nr_tag.window)) {                             \
            bind_open.write(bind_base + b, 0);                                    \
        } else {                                                                  \
            in_use = in_use + 1;                                                  \
        }                                                                         \
    }

control AggregationIngress(inout headers_t hdr,
                           inout metadata_t meta,
                           inout standard_metadata_t standard_metadata) {
    /* Statistics, indexed by job id (job_drops: job * NR_DROP_REASONS + reason). */
    counter(NR_JOBS, CounterType.packets) contributions;
    counter(NR_JOBS, CounterType.packets) duplicates;
    counter(NR_JOBS, CounterType.packets) completions;
    counter(NR_JOBS * NR_DROP_REASONS, CounterType.packets) job_drops;
    direct_counter(CounterType.packets_and_bytes) conn_table_counter;
    direct_counter(CounterType.packets_and_bytes) job_table_counter;

    /* Slot state, indexed by slot copy g = 2 * slot + version. */
    register<bit<16>>(NR_SLOT_COPIES) slot_job;       /* job that last used the copy */
    register<bit<16>>(NR_SLOT_COPIES) slot_msg;       /* message it holds */
    register<bit<32>>(NR_SLOT_COPIES) slot_bitmap;    /* ranks that contributed */
    register<bit<8>>(NR_SLOT_COPIES) slot_filled;     /* how many contributed */
    register<bit<8>>(NR_SLOT_COPIES) slot_flags;      /* NR_SLOT_* */
    register<bit<48>>(NR_SLOT_COPIES) slot_sent_at;   /* leaf: when the partial last went up */
    register<bit<32>>(NR_SLOT_COPIES * NR_ELEMS) slot_sums;  /* g * NR_ELEMS + element */
    /* Final slots of a message, at the copy of its first slot: job ++ msg ++ count. */
    register<bit<48>>(NR_SLOT_COPIES) msg_progress;

    /* Per connection: messages started. */
    register<bit<16>>(NR_CONNS) conn_started;

    /* Per job: messages whose every slot holds its final result at this switch. */
    register<bit<16>>(NR_JOBS) job_done;

    action drop_packet(bit<8> reason) {
        meta.drop_reason = reason;
        mark_to_drop(standard_metadata);
    }

    /* An aggregation connection: a worker's QP (rank = its bitmap position), a child
     * switch's uplink (rank = its bitmap position) or the parent's downlink
     * (rank = NR_RANK_PARENT).  result_port: where results for this connection leave;
     * in_port: the only port its packets may arrive on; fabric: 1 for the links between
     * switches (their packets, and only theirs, carry the SWITCH flag). */
    action set_conn(bit<16> job, bit<16> conn, bit<8> rank, bit<9> result_port,
                    bit<9> in_port, bit<1> fabric) {
        meta.nr.job = job;
        meta.nr.conn = conn;
        meta.nr.rank = rank;
        meta.nr.result_port = result_port;
        meta.nr.in_port = in_port;
        meta.nr.fabric = fabric;
    }

    table conn_table {
        key = {
            hdr.ipv4.srcAddr: exact;
            hdr.ipv4.dstAddr: exact;
            hdr.bth.dqpn: exact;
        }
        actions = { set_conn; NoAction; }
        default_action = NoAction();
        counters = conn_table_counter;
        size = NR_CONNS;
    }

    action set_job(bit<32> slot_base, bit<16> slot_count, bit<8> expected,
                   bit<32> members, bit<16> credits, bit<8> role,
                   bit<16> mcast_grp, bit<9> upstream_port) {
        meta.nr.slot_base = slot_base;
        meta.nr.slot_count = slot_count;
        meta.nr.expected = expected;
        meta.nr.members = members;
        meta.nr.credits = credits;
        meta.nr.role = role;
        meta.nr.mcast_grp = mcast_grp;
        meta.nr.upstream_port = upstream_port;
    }

    table job_table {
        key = { meta.nr.job: exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction();
        counters = job_table_counter;
        size = NR_JOBS;
    }

    /* The three ways a result or partial leaves. */
    action emit_to_group() {
        meta.nr.emit = NR_EMIT_RESULT;
        meta.nr.to_group = 1;
        standard_metadata.mcast_grp = meta.nr.mcast_grp;
    }

    action emit_to_conn() {
        meta.nr.emit = NR_EMIT_RESULT;
        meta.nr.target = meta.nr.rank;
        standard_metadata.egress_spec = meta.nr.result_port;
    }

    action emit_up() {
        meta.nr.emit = NR_EMIT_UP;
        meta.nr.target = NR_RANK_PARENT;
        standard_metadata.egress_spec = meta.nr.upstream_port;
    }

    apply {
        if (!conn_table.apply().hit) {
            if (hdr.nr_tag.isValid()) {
                /* Tagged, but from a connection nobody configured. */
                meta.nr.handled = 1;
                meta.nr.job = hdr.nr_tag.job;
                drop_packet(DROP_NON_MEMBER);
            }
            /* Otherwise ordinary RoCE traffic: the caller routes it. */
        } else {
            meta.nr.handled = 1;

            /* ---- 1. the job, and whether this packet may speak for this connection */
            if (meta.nr.job >= NR_JOBS || meta.nr.conn >= NR_CONNS) {
                drop_packet(DROP_BAD_INDEX);
            } else if (standard_metadata.ingress_port != meta.nr.in_port) {
                /* Someone else's addresses and QP: a connection lives on one port. */
                drop_packet(DROP_WRONG_PORT);
            } else if (!job_table.apply().hit) {
                drop_packet(DROP_UNKNOWN_JOB);
            } else if (hdr.nr_tag.isValid() && hdr.nr_tag.job != meta.nr.job) {
                drop_packet(DROP_MALFORMED);
            } else if (hdr.nr_tag.isValid()
                       && ((hdr.nr_tag.flags & NR_FLAG_SWITCH) != 0) != (meta.nr.fabric == 1)) {
                /* Only links between switches carry switch packets, and only those. */
                drop_packet(DROP_FORGED_SWITCH);
            } else if (!hdr.nr_tag.isValid() && meta.nr.fabric == 1) {
                drop_packet(DROP_FORGED_SWITCH);
            } else if (meta.nr.rank == NR_RANK_PARENT) {
                if (meta.nr.role != NR_ROLE_LEAF) {
                    drop_packet(DROP_NON_MEMBER);
                }
            } else if (meta.nr.rank >= NR_MAX_RANKS
                       || (meta.nr.members & ((bit<32>)1 << meta.nr.rank)) == 0) {
                drop_packet(DROP_NON_MEMBER);
            }

            /* ---- 2. which message, packet and slot */
            if (meta.drop_reason == DROP_NONE) {
                if (hdr.nr_tag.isValid()) {
                    meta.nr.msg = hdr.nr_tag.msg;
                    meta.nr.slot_first = hdr.nr_tag.slot;
                    meta.nr.npkts = hdr.nr_tag.npkts;
                    meta.nr.pkt_idx = hdr.nr_tag.pktIdx;
                    if ((hdr.nr_tag.flags & NR_FLAG_VERSION) != 0) {
                        meta.nr.ver = 1;
                    }
                    if ((hdr.nr_tag.flags & NR_FLAG_OVERFLOW) != 0) {
                        meta.nr.tag_overflow = 1;
                    }
                    if ((hdr.nr_tag.flags & NR_FLAG_PULL) != 0) {
                        meta.nr.pull = 1;
                    }
                    if ((hdr.nr_tag.flags & NR_FLAG_TOTAL) != 0) {
                        meta.nr.total = 1;
                    }
                    meta.nr.from_switch = meta.nr.fabric;
                    bool is_result = (hdr.nr_tag.flags & NR_FLAG_RESULT) != 0;
                    bool from_parent = meta.nr.rank == NR_RANK_PARENT;
                    /* PULL and TOTAL only between switches: PULL either way, TOTAL up
                     * (a child's answer to a pull), never both. */
                    bool recovery = meta.nr.pull == 1 || meta.nr.total == 1;
                    if (meta.nr.npkts == 0 || meta.nr.pkt_idx >= meta.nr.npkts
                            || (meta.nr.from_switch == 0 && meta.nr.pkt_idx != 0)
                            || (from_parent && (!is_result || meta.nr.fabric == 0))
                            || (!from_parent && is_result)
                            || (meta.nr.from_switch == 0 && recovery)
                            || (from_parent && meta.nr.total == 1)
                            || (meta.nr.pull == 1 && meta.nr.total == 1)) {
                        drop_packet(DROP_MALFORMED);
                    } else if ((bit<32>)meta.nr.slot_first + (bit<32>)meta.nr.npkts
                               > (bit<32>)meta.nr.slot_count) {
                        drop_packet(DROP_OUT_OF_RANGE);
                    } else if (meta.nr.from_switch == 0) {
                        /* A worker's first packet binds its message to this connection. */
                        bit<32> bi = (bit<32>)meta.nr.conn * NR_BIND
                                     + (bit<32>)(meta.nr.msg & (NR_BIND - 1));
                        bit<16> known_npkts;
                        bit<16> known_msg;
                        bit<24> known_psn;
                        bind_npkts.read(known_npkts, bi);
                        bind_msg.read(known_msg, bi);
                        bind_psn.read(known_psn, bi);
                        bool bound = known_npkts != 0;
                        if (bound && known_msg == meta.nr.msg && known_psn == hdr.bth.psn) {
                            /* A retransmission of the bound message: no new credit. */
                        } else if (bound && ((meta.nr.msg - known_msg) & 0x8000) != 0) {
                            /* Older than the message bound here (serial-number order):
                             * a late copy, which must neither take a credit nor
                             * overwrite the newer binding. */
                            drop_packet(DROP_STALE);
                        } else if (bound && known_msg == meta.nr.msg) {
                            /* The same message with another PSN: not from this sender. */
                            drop_packet(DROP_MALFORMED);
                        } else {
                            /* A new message: it needs one of the job's credits, i.e. fewer
                             * open bindings on this connection than the limit
                             * (NR_COUNT_BINDING).  The limit is the job's credits, or the
                             * window the worker says it uses if that is larger (up to
                             * NR_BIND): after `credits set` lowers the limit, messages a
                             * worker sent before it learnt the new value (from a result)
                             * still pass. */
                            bit<16> limit = meta.nr.credits;
                            bit<16> echo = hdr.nr_tag.window;
                            if (echo > NR_BIND) {
                                echo = NR_BIND;
                            }
                            if (echo > limit) {
                                limit = echo;
                            }
                            bit<16> started;  /* statistics only (registers read out) */
                            conn_started.read(started, (bit<32>)meta.nr.conn);
                            bit<32> bind_base = (bit<32>)meta.nr.conn * NR_BIND;
                            bit<16> in_use = 0;
                            bit<16> s_npkts;
                            bit<16> s_msg_b;
                            bit<1> s_open;
                            bit<16> s_age;
                            bit<16> s_slot;
                            bit<1> s_ver;
                            bit<32> s_g;
                            bit<48> s_progress;
                            NR_COUNT_BINDING(0)
                            NR_COUNT_BINDING(1)
                            NR_COUNT_BINDING(2)
                            NR_COUNT_BINDING(3)
                            if (in_use >= limit) {
                                drop_packet(DROP_CREDIT);
                            } else {
                                conn_started.write((bit<32>)meta.nr.conn, started + 1);
                                bind_open.write(bi, 1);
                                bind_psn.write(bi, hdr.bth.psn);
                                bind_npkts.write(bi, meta.nr.npkts);
                                bind_slot.write(bi, meta.nr.slot_first);
                                bind_msg.write(bi, meta.nr.msg);
                                bind_ver.write(bi, meta.nr.ver);
                                /* Always true here (the parser reads a tag only after a
                                 * RETH); the check lets p4c see that it is. */
                                if (hdr.reth.isValid()) {
                                    bind_va.write(bi, hdr.reth.va);
                                    bind_rkey.write(bi, hdr.reth.rkey);
                                    bind_dma_len.write(bi, hdr.reth.dmaLen);
                                }
                            }
                        }
                    }
                } else {
                    /* A later packet: find its message from the PSN. */
                    bit<32> bind_base = (bit<32>)meta.nr.conn * NR_BIND;
                    bit<16> b_npkts;
                    bit<24> b_psn;
                    bool found = false;
                    NR_TRY_BINDING(0)
                    NR_TRY_BINDING(1)
                    NR_TRY_BINDING(2)
                    NR_TRY_BINDING(3)
                    if (!found) {
                        drop_packet(DROP_UNBOUND);
                    }
                }
            }

            /* ---- 3. the slot: add, detect duplicates, complete */
            bit<32> first_slot = meta.nr.slot_base + (bit<32>)meta.nr.slot_first;
            if (meta.drop_reason == DROP_NONE
                    && (meta.nr.slot_base >= NR_SLOTS
                        || first_slot + (bit<32>)meta.nr.npkts > NR_SLOTS)) {
                /* The job's range runs past the switch's slots: never index outside the
                 * arrays (release builds of BMv2 do not check). */
                drop_packet(DROP_BAD_INDEX);
            }
            if (meta.drop_reason == DROP_NONE) {
                bit<32> g_first = first_slot * 2 + (bit<32>)meta.nr.ver;
                meta.nr.g = (first_slot + (bit<32>)meta.nr.pkt_idx) * 2 + (bit<32>)meta.nr.ver;
                bit<32> elem_base = meta.nr.g * NR_ELEMS;

                bit<16> s_job;
                bit<16> s_msg;
                bit<32> s_bitmap;
                bit<8> s_count;
                bit<8> s_flags;
                bit<16> o_job;
                bit<8> o_count;
                slot_job.read(s_job, meta.nr.g);
                slot_msg.read(s_msg, meta.nr.g);
                slot_bitmap.read(s_bitmap, meta.nr.g);
                slot_filled.read(s_count, meta.nr.g);
                slot_flags.read(s_flags, meta.nr.g);
                slot_job.read(o_job, meta.nr.g ^ 1);
                slot_filled.read(o_count, meta.nr.g ^ 1);
                bit<16> o_msg;
                slot_msg.read(o_msg, meta.nr.g ^ 1);
                bit<16> o_age = meta.nr.msg - o_msg;

                bit<32> old_sum;
                int<32> new_sum;
                bit<1> overflow = 0;
                bool final_now = false;
                /* What happens to the slot's sums, done once after the decision below:
                 * one copy of each per-element loop keeps the program small (compile time
                 * grows with every expansion of NR_FOR_EACH_ELEM). */
                bit<2> sums_op = NR_SUMS_KEEP;
                bit<48> now = standard_metadata.ingress_global_timestamp;

                if (meta.nr.rank == NR_RANK_PARENT && meta.nr.pull == 1) {
                    /* The parent restarted and lost a total that reached us (and maybe
                     * not our sibling): send it the final result we hold, marked TOTAL.
                     * Nothing else here answers a pull; it changes no state. */
                    if (s_job == meta.nr.job && s_msg == meta.nr.msg
                            && (s_flags & NR_SLOT_FINAL) != 0) {
                        sums_op = NR_SUMS_LOAD;
                        if ((s_flags & NR_SLOT_OVERFLOW) != 0) {
                            meta.nr.out_overflow = 1;
                        }
                        meta.nr.out_flags = NR_FLAG_TOTAL;
                        emit_up();
                    } else {
                        mark_to_drop(standard_metadata);
                    }
                } else if (meta.nr.rank == NR_RANK_PARENT) {
                    /* The parent's total for a slot whose partial we sent up, or (after we
                     * restarted) for a slot filling again with the retransmissions of
                     * workers that missed the result: the total is the message's, so it
                     * completes the copy whoever is still missing. */
                    if (s_job != meta.nr.job || s_msg != meta.nr.msg) {
                        drop_packet(DROP_STALE);
                    } else if ((s_flags & NR_SLOT_FINAL) != 0) {
                        /* Already final and multicast: a repeated answer (we sent the
                         * partial again).  Workers missing the result fetch it with a
                         * retransmission; multicasting again would only amplify. */
                        drop_packet(DROP_REPEAT_RESULT);
                    } else {
                        sums_op = NR_SUMS_STORE;
                        final_now = true;
                        s_flags = NR_SLOT_FINAL;
                        if (meta.nr.tag_overflow == 1) {
                            s_flags = s_flags | NR_SLOT_OVERFLOW;
                        }
                        slot_flags.write(meta.nr.g, s_flags);
                        if (s_count != meta.nr.expected) {
                            /* later duplicates get this result, never add to it */
                            slot_bitmap.write(meta.nr.g, meta.nr.members);
                            slot_filled.write(meta.nr.g, meta.nr.expected);
                        }
                        meta.nr.out_overflow = meta.nr.tag_overflow;
                        emit_to_group();
                    }
                } else {
                    bool fresh = s_job != meta.nr.job || s_msg != meta.nr.msg;
                    bit<32> my_bit = (bit<32>)1 << meta.nr.rank;
                    bool complete = !fresh && s_count == meta.nr.expected;
                    bool have_final = complete && (meta.nr.role == NR_ROLE_ROOT
                                                   || (s_flags & NR_SLOT_FINAL) != 0);
                    if (fresh && s_job == meta.nr.job
                            && ((meta.nr.msg - s_msg) & 0x8000) != 0) {
                        /* Older than the message the copy now holds. */
                        drop_packet(DROP_STALE);
                    } else if (meta.nr.pull == 1 && !have_final) {
                        /* A child asks for a final result we do not hold (yet): its
                         * workers' retransmissions and our own completion answer it. */
                        mark_to_drop(standard_metadata);
                    } else if (meta.nr.total == 1) {
                        /* A child's final result, answering our pull after we restarted:
                         * the message's total, whatever this copy holds of it. */
                        if (have_final) {
                            mark_to_drop(standard_metadata);
                        } else {
                            sums_op = NR_SUMS_STORE;
                            s_flags = NR_SLOT_FINAL;
                            if (meta.nr.tag_overflow == 1) {
                                s_flags = s_flags | NR_SLOT_OVERFLOW;
                            }
                            meta.nr.out_overflow = meta.nr.tag_overflow;
                            final_now = true;
                            emit_to_group();
                            slot_job.write(meta.nr.g, meta.nr.job);
                            slot_msg.write(meta.nr.g, meta.nr.msg);
                            slot_bitmap.write(meta.nr.g, meta.nr.members);
                            slot_filled.write(meta.nr.g, meta.nr.expected);
                            slot_flags.write(meta.nr.g, s_flags);
                        }
                    } else if (meta.nr.pull == 1) {
                        /* A child that restarted asks for a final result we hold. */
                        sums_op = NR_SUMS_LOAD;
                        if ((s_flags & NR_SLOT_OVERFLOW) != 0) {
                            meta.nr.out_overflow = 1;
                        }
                        emit_to_conn();
                    } else if (fresh && o_job == meta.nr.job && o_count != 0
                               && o_count != meta.nr.expected
                               && ((o_age & 0x8000) != 0 || o_age < meta.nr.credits)) {
                        /* The other copy holds a message less than the credits older
                         * (or a newer one) that is still filling.  One at least a whole
                         * window older is over for every worker that sends this one:
                         * left filling only by a switch restart (NR_SETTLE_BINDING). */
                        drop_packet(DROP_CREDIT);
                    } else if (!fresh && (s_bitmap & my_bit) != 0) {
                        duplicates.count((bit<32>)meta.nr.job);
                        if (s_count == meta.nr.expected
                                && (meta.nr.role == NR_ROLE_ROOT
                                    || (s_flags & NR_SLOT_FINAL) != 0)) {
                            /* The final result, again, to this connection only. */
                            sums_op = NR_SUMS_LOAD;
                            if ((s_flags & NR_SLOT_OVERFLOW) != 0) {
                                meta.nr.out_overflow = 1;
                            }
                            emit_to_conn();
                        } else {
                            /* Not final here: a leaf's complete copy waiting for its parent
                             * (our partial may have been lost), or a copy still filling
                             * (after a restart here the missing members may never send
                             * again).  Either sends one packet per NR_RESEND_US however many
                             * members retransmit: the partial again, or a pull that a child
                             * (or our parent) holding the message's final result answers.
                             * Children are pulled when a child waits, the parent when a
                             * worker does; a pull changes nothing where it lands. */
                            bit<48> sent_at;
                            slot_sent_at.read(sent_at, meta.nr.g);
                            if (now - sent_at < NR_RESEND_US) {
                                mark_to_drop(standard_metadata);
                            } else if (s_count == meta.nr.expected) {
                                slot_sent_at.write(meta.nr.g, now);
                                sums_op = NR_SUMS_LOAD;
                                if ((s_flags & NR_SLOT_OVERFLOW) != 0) {
                                    meta.nr.out_overflow = 1;
                                }
                                emit_up();
                            } else if (meta.nr.from_switch == 1
                                       || meta.nr.role == NR_ROLE_LEAF) {
                                slot_sent_at.write(meta.nr.g, now);
                                meta.nr.out_flags = NR_FLAG_PULL;
                                if (meta.nr.from_switch == 1) {
                                    emit_to_group();
                                } else {
                                    emit_up();
                                }
                            } else {
                                mark_to_drop(standard_metadata);  /* a root's workers only */
                            }
                        }
                    } else {
                        contributions.count((bit<32>)meta.nr.job);
                        if (fresh) {
                            s_bitmap = 0;
                            s_count = 0;
                            s_flags = 0;
                            sums_op = NR_SUMS_STORE;
                        } else {
                            NR_FOR_EACH_ELEM(NR_ACCUMULATE)
                        }
                        s_bitmap = s_bitmap | my_bit;
                        s_count = s_count + 1;
                        if (overflow == 1 || meta.nr.tag_overflow == 1) {
                            s_flags = s_flags | NR_SLOT_OVERFLOW;
                        }
                        if (s_count == meta.nr.expected) {
                            completions.count((bit<32>)meta.nr.job);
                            if ((s_flags & NR_SLOT_OVERFLOW) != 0) {
                                meta.nr.out_overflow = 1;
                            }
                            if (meta.nr.role == NR_ROLE_ROOT) {
                                s_flags = s_flags | NR_SLOT_FINAL;
                                final_now = true;
                                emit_to_group();
                            } else {
                                slot_sent_at.write(meta.nr.g, now);
                                emit_up();
                            }
                        } else {
                            /* Absorbed: results read PSN and RETH from the bindings. */
                            mark_to_drop(standard_metadata);
                        }
                        slot_job.write(meta.nr.g, meta.nr.job);
                        slot_msg.write(meta.nr.g, meta.nr.msg);
                        slot_bitmap.write(meta.nr.g, s_bitmap);
                        slot_filled.write(meta.nr.g, s_count);
                        slot_flags.write(meta.nr.g, s_flags);
                    }
                }

                if (sums_op == NR_SUMS_STORE) {
                    NR_FOR_EACH_ELEM(NR_STORE)
                } else if (sums_op == NR_SUMS_LOAD) {
                    NR_FOR_EACH_ELEM(NR_LOAD)
                }

                /* A message is done (its credit returns) when all its slots are final. */
                if (final_now) {
                    bit<48> progress;
                    msg_progress.read(progress, g_first);
                    if (progress[47:32] != meta.nr.job || progress[31:16] != meta.nr.msg) {
                        progress = meta.nr.job ++ meta.nr.msg ++ 16w0;
                    }
                    progress = progress + 1;
                    msg_progress.write(g_first, progress);
                    if (progress[15:0] == meta.nr.npkts) {
                        bit<16> done_msgs;
                        job_done.read(done_msgs, (bit<32>)meta.nr.job);
                        job_done.write((bit<32>)meta.nr.job, done_msgs + 1);
                    }
                }
            }
        }

        if (meta.drop_reason != DROP_NONE && meta.nr.job < NR_JOBS) {
            job_drops.count((bit<32>)meta.nr.job * NR_DROP_REASONS
                            + (bit<32>)meta.drop_reason);
        }
    }
}

/* ============================================================= aggregation: egress */

/* Addresses of the connection (or inter-switch link) a result or partial goes out on. */
#define NR_SET_ADDRESSES                                                          \
    hdr.ethernet.srcAddr = smac;                                                  \
    hdr.ethernet.dstAddr = dmac;                                                  \
    hdr.ipv4.srcAddr = sip;                                                       \
    hdr.ipv4.dstAddr = dip;                                                       \
    hdr.udp.srcPort = sport;                                                      \
    hdr.bth.dqpn = dqpn;

control AggregationEgress(inout headers_t hdr,
                          inout metadata_t meta,
                          inout standard_metadata_t standard_metadata) {
    counter(NR_JOBS, CounterType.packets) results_sent;
    counter(NR_JOBS, CounterType.packets) partials_sent;
    counter(NR_JOBS, CounterType.packets) pulls_sent;   /* PULL, and TOTAL answering one */

    bit<16> target_conn = 0;
    bit<8> tag_flags = 0;   /* VERSION and OVERFLOW of the packet's slot copy */

    /* A worker connection: the receiver's view of the connection of rank `target`
     * (conn: that connection's index, whose bindings give the result's PSN and RETH). */
    action to_worker(bit<48> smac, bit<48> dmac, bit<32> sip, bit<32> dip,
                     bit<16> sport, bit<24> dqpn, bit<16> conn) {
        NR_SET_ADDRESSES
        target_conn = conn;
    }

    /* A link to a parent or child switch. */
    action to_switch(bit<48> smac, bit<48> dmac, bit<32> sip, bit<32> dip,
                     bit<16> sport, bit<24> dqpn) {
        NR_SET_ADDRESSES
    }

    table result_rewrite {
        key = {
            meta.nr.job: exact;
            meta.nr.target: exact;
        }
        actions = { to_worker; to_switch; NoAction; }
        default_action = NoAction();
        size = NR_CONNS;
    }

    action fill_tag(bit<16> pkt_idx, bit<8> flags) {
        hdr.nr_tag.setValid();
        hdr.nr_tag.magic = NR_MAGIC;
        hdr.nr_tag.job = meta.nr.job;
        hdr.nr_tag.msg = meta.nr.msg;
        hdr.nr_tag.slot = meta.nr.slot_first;
        hdr.nr_tag.npkts = meta.nr.npkts;
        hdr.nr_tag.pktIdx = pkt_idx;
        hdr.nr_tag.rank = meta.nr.target;
        hdr.nr_tag.flags = flags | tag_flags;
        hdr.nr_tag.window = meta.nr.credits;   /* workers learn the job's credits */
    }

    /* Header fields every emitted aggregation packet shares. */
    action common_fields() {
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;     /* don't fragment */
        hdr.ipv4.fragOffset = 0;
        hdr.ipv4.ttl = 64;
        hdr.udp.dstPort = ROCE_V2_PORT;
        hdr.udp.checksum = 0;   /* RoCE v2 sends a zero UDP checksum */
        hdr.bth.se = 0;
        hdr.bth.migreq = 0;
        hdr.bth.padcnt = 0;
        hdr.bth.tver = 0;
        hdr.bth.pkey = 0xFFFF;
        hdr.bth.fecn = 0;
        hdr.bth.becn = 0;
        hdr.bth.resv6 = 0;
        hdr.bth.resv7 = 6w0 ++ meta.nr.out_overflow;
        hdr.icrc.icrc = 0;      /* not computable here; receivers ignore it */
    }

    apply {
        if (meta.nr.emit != NR_EMIT_NONE) {
            if (meta.nr.ver == 1) {
                tag_flags = NR_FLAG_VERSION;
            }
            if (meta.nr.out_overflow == 1) {
                tag_flags = tag_flags | NR_FLAG_OVERFLOW;
            }
            if (meta.nr.to_group == 1) {
                meta.nr.target = (bit<8>)standard_metadata.egress_rid;
            }
            switch (result_rewrite.apply().action_run) {
                to_worker: {
                    /* Packet pkt_idx of the message, as the receiver expects it: the PSN
                     * and RETH come from the target connection's binding of this message,
                     * which the ingress wrote before the slot could complete. */
                    bit<32> bi = (bit<32>)target_conn * NR_BIND
                                 + (bit<32>)(meta.nr.msg & (NR_BIND - 1));
                    bit<16> b_msg = 0;
                    bit<16> b_npkts = 0;
                    bit<24> b_psn = 0;
                    if (target_conn < NR_CONNS) {
                        bind_msg.read(b_msg, bi);
                        bind_npkts.read(b_npkts, bi);
                        bind_psn.read(b_psn, bi);
                    }
                    if (meta.nr.out_flags != 0) {
                        /* A pull multicast to the children: workers get no copy. */
                        mark_to_drop(standard_metadata);
                    } else if (target_conn >= NR_CONNS || b_msg != meta.nr.msg
                            || b_npkts != meta.nr.npkts) {
                        /* The receiver's connection no longer holds this message (only a
                         * host breaking the credit rule can get here): never send a
                         * result with another message's PSN. */
                        meta.drop_reason = DROP_STALE_RESULT;
                        mark_to_drop(standard_metadata);
                    } else {
                        bool first = meta.nr.pkt_idx == 0;
                        bool last = meta.nr.pkt_idx + 1 == meta.nr.npkts;
                        common_fields();
                        hdr.bth.psn = b_psn + (bit<24>)meta.nr.pkt_idx;
                        if (first && last) {
                            hdr.bth.opcode = RC_WRITE_ONLY;
                        } else if (first) {
                            hdr.bth.opcode = RC_WRITE_FIRST;
                        } else if (last) {
                            hdr.bth.opcode = RC_WRITE_LAST;
                        } else {
                            hdr.bth.opcode = RC_WRITE_MIDDLE;
                        }
                        if (last) {
                            hdr.bth.ackreq = 1;
                        } else {
                            hdr.bth.ackreq = 0;
                        }
                        if (first) {
                            hdr.reth.setValid();
                            bind_va.read(hdr.reth.va, bi);
                            bind_rkey.read(hdr.reth.rkey, bi);
                            bind_dma_len.read(hdr.reth.dmaLen, bi);
                            fill_tag(0, NR_FLAG_RESULT);
                            hdr.ipv4.totalLen = NR_IP_LEN_TAGGED;
                            hdr.udp.length = NR_UDP_LEN_TAGGED;
                        } else {
                            hdr.reth.setInvalid();
                            hdr.nr_tag.setInvalid();
                            hdr.ipv4.totalLen = NR_IP_LEN_PLAIN;
                            hdr.udp.length = NR_UDP_LEN_PLAIN;
                        }
                        results_sent.count((bit<32>)meta.nr.job);
                    }
                }
                to_switch: {
                    /* Inter-switch packets are WRITE Only with the tag on every packet. */
                    common_fields();
                    hdr.bth.opcode = RC_WRITE_ONLY;
                    hdr.bth.ackreq = 0;
                    hdr.bth.psn = (bit<24>)meta.nr.pkt_idx;
                    hdr.reth.setValid();
                    hdr.reth.va = 0;
                    hdr.reth.rkey = 0;
                    hdr.reth.dmaLen = 16 + NR_DATA_BYTES;
                    if (meta.nr.emit == NR_EMIT_RESULT) {
                        fill_tag(meta.nr.pkt_idx,
                                 NR_FLAG_SWITCH | NR_FLAG_RESULT | meta.nr.out_flags);
                    } else {
                        fill_tag(meta.nr.pkt_idx, NR_FLAG_SWITCH | meta.nr.out_flags);
                    }
                    if (meta.nr.out_flags != 0) {
                        pulls_sent.count((bit<32>)meta.nr.job);
                    } else if (meta.nr.emit == NR_EMIT_RESULT) {
                        results_sent.count((bit<32>)meta.nr.job);
                    } else {
                        partials_sent.count((bit<32>)meta.nr.job);
                    }
                    hdr.ipv4.totalLen = NR_IP_LEN_TAGGED;
                    hdr.udp.length = NR_UDP_LEN_TAGGED;
                }
                default: {
                    meta.drop_reason = DROP_NO_REWRITE;
                    mark_to_drop(standard_metadata);
                }
            }
        }
    }
}

/* ===================================================================== the switch */

control SwitchIngress(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    counter(NR_PORTS, CounterType.packets_and_bytes) port_rx;
    counter(NR_DROP_REASONS, CounterType.packets) drops;

    PortLoss() loss;
    PortReorder() reorder;
    AggregationIngress() agg;
    Ipv4Forwarding() fwd;

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        loss.apply(standard_metadata.ingress_port, meta, standard_metadata);
        if (meta.drop_reason == DROP_NONE && standard_metadata.checksum_error == 0) {
            reorder.apply(standard_metadata.ingress_port, hdr, meta, standard_metadata);
        }
        if (meta.drop_reason == DROP_NONE && meta.held == 0) {
            if (hdr.arp.isValid()) {
                /* Hosts use static ARP entries (docs/protocol.md). */
                meta.drop_reason = DROP_ARP;
                mark_to_drop(standard_metadata);
            } else if (!hdr.ipv4.isValid()) {
                meta.drop_reason = DROP_NOT_IPV4;
                mark_to_drop(standard_metadata);
            } else if (standard_metadata.checksum_error == 1) {
                meta.drop_reason = DROP_BAD_CHECKSUM;
                mark_to_drop(standard_metadata);
            } else {
                if (hdr.nr_data.isValid()) {
                    agg.apply(hdr, meta, standard_metadata);
                }
                if (meta.nr.handled == 0) {
                    fwd.apply(hdr, meta, standard_metadata);
                }
            }
        }
        if (meta.drop_reason != DROP_NONE) {
            drops.count((bit<32>)meta.drop_reason);
        }
    }
}

control SwitchEgress(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    counter(NR_PORTS, CounterType.packets_and_bytes) port_tx;
    counter(NR_DROP_REASONS, CounterType.packets) drops;

    AggregationEgress() agg;
    PortLoss() loss;
    PortReorder() reorder;

    apply {
        agg.apply(hdr, meta, standard_metadata);
        if (meta.drop_reason == DROP_NONE) {
            loss.apply(standard_metadata.egress_port, meta, standard_metadata);
        }
        if (meta.drop_reason == DROP_NONE) {
            reorder.apply(standard_metadata.egress_port, hdr, meta, standard_metadata);
        }
        if (meta.drop_reason != DROP_NONE) {
            drops.count((bit<32>)meta.drop_reason);
        } else if (meta.held == 0) {
            port_tx.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

control SwitchDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.reth);
        packet.emit(hdr.nr_tag);
        packet.emit(hdr.nr_data);
        packet.emit(hdr.icrc);
    }
}

V1Switch(SwitchParser(),
         SwitchVerifyChecksum(),
         SwitchIngress(),
         SwitchEgress(),
         SwitchComputeChecksum(),
         SwitchDeparser()) main;
