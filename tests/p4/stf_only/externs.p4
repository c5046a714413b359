/* Control-plane objects of every kind, for P4Info tests (not run by STF). */
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct learn_t {
    bit<48> mac;
    bit<9>  port;
}

struct headers_t {
    packet_in_t packet_in;
    ethernet_t  ethernet;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t std) {
    counter(32, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets) dmac_counter;
    meter(16, MeterType.bytes) port_meter;
    register<bit<32>>(64) seen;
    action_selector(HashAlgorithm.crc16, 128, 14) ecmp_selector;

    action learn() {
        digest<learn_t>(1, { hdr.ethernet.srcAddr, std.ingress_port });
    }
    action set_port(bit<9> port) {
        std.egress_spec = port;
    }
    @name("flood") action broadcast() {
        std.mcast_grp = 1;
    }
    table smac {
        key = { hdr.ethernet.srcAddr : exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }
    @id(7) table dmac {
        key = { hdr.ethernet.dstAddr : exact @name("dst"); }
        actions = { set_port; @defaultonly broadcast; }
        default_action = broadcast();
        counters = dmac_counter;
    }
    table ecmp {
        key = {
            hdr.ethernet.etherType : exact;
            hdr.ethernet.srcAddr : selector;
        }
        actions = { set_port; }
        implementation = ecmp_selector;
    }
    apply {
        port_counter.count((bit<32>)std.ingress_port);
        seen.write(0, 1);
        smac.apply();
        dmac.apply();
        ecmp.apply();
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
