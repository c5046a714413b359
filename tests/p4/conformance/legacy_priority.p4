// @priority(N) on const entries is a BMv2 priority: the smaller number wins; entries
// without it take their 1-based position (p4c's BMv2 back end).
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
        const entries = {
            0x0001 &&& 0x000F : set(1) @priority(3);
            0x1001            : set(2);
            0x1001 &&& 0xF00F : set(3) @priority(1);
        }
    }
    apply { t.apply(); }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
