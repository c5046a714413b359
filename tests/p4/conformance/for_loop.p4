// P4_16 1.2.4 `for` loops parse, but the built-in target (its IR) has no loops yet.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> n; bit<8> sum; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
            hdr.h.sum = hdr.h.sum + i;
        }
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
