/* Counters, registers, a direct counter and hashing. Frames of etherType 0x9000 carry a
 * stats_t header that the switch fills in: the per-port packet count kept in a register,
 * a crc16 hash of the MAC addresses and a saturating sum. Every packet is counted per
 * ingress port in an indexed counter; the forwarding table has a direct counter. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header stats_t {
    bit<32> pkt_count;
    bit<16> hash16;
    bit<8>  sat;
    bit<8>  flags;
}

struct headers {
    ethernet_t ethernet;
    stats_t    stats;
}

struct metadata {
    bit<32> count;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x9000: parse_stats;
            default: accept;
        }
    }
    state parse_stats {
        packet.extract(hdr.stats);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_counter;
    register<bit<32>>(512) pkt_reg;
    direct_counter(CounterType.packets) fwd_counter;

    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { forward; drop; }
        default_action = drop();
        counters = fwd_counter;
    }

    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        pkt_reg.read(meta.count, (bit<32>)standard_metadata.ingress_port);
        meta.count = meta.count + 1;
        pkt_reg.write((bit<32>)standard_metadata.ingress_port, meta.count);
        if (hdr.stats.isValid()) {
            hdr.stats.pkt_count = meta.count;
            hash(hdr.stats.hash16, HashAlgorithm.crc16, (bit<16>)0,
                 { hdr.ethernet.dstAddr, hdr.ethernet.srcAddr }, (bit<32>)65536);
            hdr.stats.sat = hdr.stats.sat |+| 8w0xF0;
        }
        // fwd is applied in one place only: BMv2's JSON gives a table one successor per
        // hit/miss, so p4c's BMv2 back end refuses a table applied in two places that
        // continue differently ("table MyIngress.fwd has multiple successors")
        if (fwd.apply().hit) {
            if (hdr.stats.isValid()) { hdr.stats.flags = 1; }
        } else {
            if (hdr.stats.isValid()) { hdr.stats.flags = 2; }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.stats);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
