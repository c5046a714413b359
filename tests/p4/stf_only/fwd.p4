/* Minimal forwarder for the STF runner and CLI tests: a ternary table on the destination
 * MAC chooses the egress port; a miss sends to DEFAULT_PORT. */
#include <core.p4>
#include <v1model.p4>
#include "fwd_headers.p4"
#include "fwd_consts.p4"

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t std) {
    action set_port(bit<9> port) {
        std.egress_spec = port;
    }
    action drop() {
        mark_to_drop(std);
    }
    table dmac {
        key = { hdr.ethernet.dstAddr : ternary; }
        actions = { set_port; drop; }
        default_action = set_port(DEFAULT_PORT);
        size = 64;
    }
    apply {
        dmac.apply();
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t std) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
