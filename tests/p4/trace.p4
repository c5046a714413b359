/* A small program whose packets take every kind of path a trace reports: parser states
 * and a parser error, a table hit and miss with action arguments, mark_to_drop in
 * ingress and in egress, a drop by egress_spec = 511, multicast and log_msg. */
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<8> op; bit<8> arg; }
struct headers_t { eth_t eth; tag_t tag; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x88b5: parse_tag;
            default: accept;
        }
    }
    state parse_tag { pkt.extract(hdr.tag); transition accept; }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port, bit<48> mac) { sm.egress_spec = port; hdr.eth.dst = mac; }
    action drop() { mark_to_drop(sm); }
    action flood(bit<16> grp) { sm.mcast_grp = grp; }
    table ops {
        key = { hdr.tag.op: exact; }
        actions = { set_port; drop; flood; NoAction; }
        default_action = drop();
        size = 16;
    }
    apply {
        if (sm.parser_error != error.NoError) {
            log_msg("parser error on port {}", {sm.ingress_port});
            mark_to_drop(sm);
        } else if (hdr.tag.isValid()) {
            ops.apply();
        } else {
            sm.egress_spec = 511;
        }
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.tag.arg == 0xEE) { mark_to_drop(sm); }
    }
}

control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.tag); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
