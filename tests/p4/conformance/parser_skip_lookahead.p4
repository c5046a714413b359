// Parser forms p4c's samples use (issue774-4, issue1768): `extract<T>(_)` reads a header
// and drops it; `lookahead<S>()` of a struct of bit-vectors peeks at its fields in order
// (too few bytes: PacketTooShort, as for a header).
#include <core.p4>
#include <v1model.p4>

header skip_t { bit<16> x; }
header hdr_t { bit<8> a; bit<8> b; }
struct peek_t { bit<4> hi; bool flag; bit<3> lo; bit<8> next; }
struct Headers { hdr_t h; }
struct Meta { bit<8> peeked; }

parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract<skip_t>(_);
        peek_t p = pkt.lookahead<peek_t>();
        meta.peeked = (bit<8>)p.hi + (p.flag ? 8w0x10 : 8w0) + (bit<8>)p.lo;
        pkt.extract(hdr.h);
        transition accept;
    }
}
control vck(inout Headers hdr, inout Meta meta) { apply { } }
control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error != error.NoError) {
            mark_to_drop(sm);
            return;
        }
        hdr.h.b = meta.peeked;
        sm.egress_spec = 1;
    }
}
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) { apply { } }
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
