// `priority = N:` entries; an entry without a priority continues from the previous one
// by priority_delta (downwards, as the largest priority wins).
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<16> k; bit<8> res; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action set(bit<8> v) { hdr.h.res = v; sm.egress_spec = 1; }
    table t {
        key = { hdr.h.k : ternary; }
        actions = { set; NoAction; }
        priority_delta = 10;
        entries = {
            priority = 100: 0x0001 &&& 0x000F : set(1);
            0x1001 : set(2);
            priority = 95: 0x1000 &&& 0xF000 : set(3);
        }
    }
    apply { t.apply(); }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
