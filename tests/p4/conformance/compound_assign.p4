// Compound assignments `a op= b` (P4_16 1.2.5; p4c accepts them): `a = a op b`.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; int<8> f; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.a += 3;
        hdr.h.b |-|= 5;
        hdr.h.c <<= 2;
        hdr.h.d >>= 1;
        hdr.h.e ^= 0xFF;
        hdr.h.f >>= 1;
        sm.egress_spec = 1;
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
