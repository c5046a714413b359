// Extracting into a member of `stack_of_unions.next` (p4c issue561-6) fills the union at
// nextIndex and advances the stack, as extracting into `stack.next` does.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> kind; }
header one_t { bit<8> v; }
header two_t { bit<16> v; }
header_union u_t { one_t one; two_t two; }
struct Headers { hdr_t h; u_t[2] u; }
struct Meta { }

parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.kind) {
            1: one_two;
            default: two_one;
        }
    }
    state one_two {
        pkt.extract(hdr.u.next.one);
        pkt.extract(hdr.u.next.two);
        transition accept;
    }
    state two_one {
        pkt.extract(hdr.u.next.two);
        pkt.extract(hdr.u.next.one);
        transition accept;
    }
}
control vck(inout Headers hdr, inout Meta meta) { apply { } }
control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.u[1].one.isValid()) { hdr.u[1].one.v = 0xAA; }
        if (hdr.u[1].two.isValid()) { hdr.u[1].two.v = 0xBBBB; }
        sm.egress_spec = 1;
    }
}
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) { apply { } }
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
