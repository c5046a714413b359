// ENGINE: a varbit field inside the field list of update_checksum (IPv4 options; p4c's
// checksum1-bmv2 and checksum-l4-bmv2). BMv2 includes the varbit's current bytes.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> len; bit<16> csum; varbit<32> opts; }
struct Headers { hdr_t h; }
struct Meta { }

parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h, (bit<32>)(pkt.lookahead<bit<8>>() * 8));
        transition accept;
    }
}
control vck(inout Headers hdr, inout Meta meta) { apply { } }
control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) {
    apply {
        update_checksum(hdr.h.isValid(), { hdr.h.len, hdr.h.opts }, hdr.h.csum, HashAlgorithm.csum16);
    }
}
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
