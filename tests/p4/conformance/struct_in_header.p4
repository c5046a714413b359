// P4_16 allows a struct of bit-vectors inside a header (p4c flattens it); the built-in
// target's IR keeps headers flat, so this is reported as not supported.
#include <core.p4>
#include <v1model.p4>

struct pair_t { bit<4> hi; bit<4> lo; }
header hdr_t { bit<8> a; pair_t b; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
