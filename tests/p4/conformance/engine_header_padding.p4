// ENGINE: a header whose width is not a multiple of 8 bits (here 17). p4c's BMv2 back end
// pads it to whole bytes, so BMv2 extracts and emits 3 bytes (p4c's table-entries-*-bmv2).
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; bit<1> flag; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply { hdr.h.b = hdr.h.a; sm.egress_spec = 1; }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
