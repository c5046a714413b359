// Struct initialisers are evaluated left to right (p4c issue2488): a field read
// before a call that modifies it keeps the value it had before the call.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; bit<8> c; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return 8w0x40;
}
struct pair_t { bit<8> first; bit<8> second; }

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        pair_t p = { hdr.h.a, bump(hdr.h.a) };
        pair_t q = { first = hdr.h.a, second = bump(hdr.h.a) };
        hdr.h.b = p.first + p.second;   // old a + 0x40
        hdr.h.c = q.first;              // a after the first bump
        sm.egress_spec = 1;
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
