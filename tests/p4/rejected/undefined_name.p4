/* Rejected: undefined name. */
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct hdrs_t { h_t h; }
struct meta_t { bit<8> m; }
parser P(packet_in pkt, out hdrs_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control I(inout hdrs_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.m = nosuch;
    }
}
control VC(inout hdrs_t hdr, inout meta_t meta) { apply { } }
control E(inout hdrs_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout hdrs_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in hdrs_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
