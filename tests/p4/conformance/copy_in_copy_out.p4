// Copy-in/copy-out of a header or struct argument (p4c gauntlet_indirect_hdr_assign_1):
// an action that writes the control's parameter `hdr` directly while `hdr` is also its
// inout argument ends with the copy-out, which overwrites the direct write.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action direct_write(inout Headers val) {
        hdr.h.a = 0xEE;          // lost: the copy-out of val restores a
        val.h.b = 0x77;          // kept
    }
    action twice(inout hdr_t x, inout hdr_t y) {
        x.b = 1;
        y.b = 2;                 // copied out last: wins
    }
    apply {
        direct_write(hdr);
        if (hdr.h.b == 0x77) {
            twice(hdr.h, hdr.h);
        }
        sm.egress_spec = 1;
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
