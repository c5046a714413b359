// A struct of bit-vectors as a header field (p4c bvec_union-bmv2): the struct's fields lie
// in place on the wire; member access, struct copies, a table key, a checksum over the
// header and emit all see that layout.
#include <core.p4>
#include <v1model.p4>

struct alt_t { bit<1> valid; bit<7> port; }
struct row_t { alt_t a0; alt_t a1; }
header hdr_t { bit<8> tag; row_t row; bit<4> lo; bit<4> hi; bit<16> sum; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action swap() {
        alt_t tmp = hdr.h.row.a0;
        hdr.h.row.a0 = hdr.h.row.a1;
        hdr.h.row.a1 = tmp;
    }
    table t {
        key = { hdr.h.row.a0.port : exact; }
        actions = { swap; NoAction; }
        const entries = { 5 : swap(); }
        default_action = NoAction();
    }
    apply {
        t.apply();
        hdr.h.lo = hdr.h.row.a1.port[3:0];
        sm.egress_spec = (bit<9>)hdr.h.row.a0.port;
    }
}
control cck2(inout Headers hdr, inout Meta meta) {
    apply {
        update_checksum(hdr.h.isValid(), { hdr.h.tag, hdr.h.row, hdr.h.lo, hdr.h.hi },
                        hdr.h.sum, HashAlgorithm.csum16);
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck2(), dep()) main;
