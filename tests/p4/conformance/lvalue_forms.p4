// Assignment targets and key sets from p4c's samples: a slice of a slice as a target
// (gauntlet_nested_slice), a compound assignment whose target indexes a stack by a call
// (opassign2: the call runs once) and a masked entry of a serializable-enum key
// (table-entries-ser-enum: the mask is a plain number).
#include <core.p4>
#include <v1model.p4>

enum bit<8> kind_t { LOW = 0x05, HIGH = 0xA0 }
header hdr_t { bit<8> a; kind_t k; bit<8> i; bit<8> r; }
header elem_t { bit<8> x; }
struct Headers { hdr_t h; elem_t[4] e; }
struct Meta { }

parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.e.next);
        pkt.extract(hdr.e.next);
        pkt.extract(hdr.e.next);
        pkt.extract(hdr.e.next);
        transition accept;
    }
}
control vck(inout Headers hdr, inout Meta meta) { apply { } }

bit<8> post_incr(inout bit<8> v) {
    bit<8> old = v;
    v = v + 1;
    return old;
}

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action set_r(bit<8> r) { hdr.h.r = r; }
    table by_kind {
        key = { hdr.h.k : ternary; }
        actions = { set_r; NoAction; }
        const entries = {
            kind_t.HIGH &&& 0xF0 : set_r(1);
            kind_t.LOW &&& 0x0F : set_r(2);
        }
        default_action = set_r(3);
    }
    apply {
        hdr.h.a[7:4][2:1] = 2w0;                  // bits 6:5 of a
        hdr.e[post_incr(hdr.h.i) & 3].x |= 0x80;  // i read and bumped once
        by_kind.apply();
        sm.egress_spec = 1;
    }
}
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) { apply { } }
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
