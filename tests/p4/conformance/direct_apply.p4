// `C.apply(args);` applies a control without an explicit instance (p4c instantiates it).
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<16> v; }
struct Headers { hdr_t h; }
struct Meta { }

control inc(inout bit<16> x) {
    action add_one() { x = x + 1; }
    table t {
        actions = { add_one; }
        default_action = add_one;
    }
    apply { t.apply(); }
}

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        inc.apply(hdr.h.v);
        sm.egress_spec = 1;
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
