// A false static_assert rejects the program with its message.
#include <core.p4>
#include <v1model.p4>

const bit<8> LIMIT = 8;
const bool checked = static_assert(LIMIT == 8, "LIMIT changed");

header hdr_t { bit<8> a; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        static_assert(LIMIT > 9, "LIMIT is too small");
        hdr.h.a = LIMIT;
        sm.egress_spec = 1;
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
