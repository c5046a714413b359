// Parsers and controls passed as constructor arguments (p4c issue1566-bmv2): one instance
// shared by two users (its counter is one object, named where it is declared), a
// parameter passed on to a nested instance, and a sub-parser handed to a parser.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<16> x; bit<8> y; }
struct Headers { hdr_t h; }
struct Meta { }

parser sub_t(packet_in pkt, out hdr_t h);
parser GetH(packet_in pkt, out hdr_t h) {
    state start {
        pkt.extract(h);
        transition accept;
    }
}
parser Outer(packet_in pkt, out hdr_t h)(sub_t inner) {
    state start {
        inner.apply(pkt, h);
        transition accept;
    }
}
parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    GetH() g;
    Outer(g) o;
    state start {
        o.apply(pkt, hdr.h);
        transition accept;
    }
}

control step_t(inout bit<16> x);
control Inc(inout bit<16> x) {
    counter(8, CounterType.packets) hits;
    apply {
        x = x + 1;
        hits.count(0);
    }
}
control Twice(inout bit<16> x)(step_t s) {
    apply {
        s.apply(x);
        s.apply(x);
    }
}
control Pass(inout bit<16> x)(step_t s) {
    Twice(s) tw;
    apply {
        x = x << 4;
        tw.apply(x);
    }
}

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    Inc() inc;
    Twice(inc) tw;
    Pass(inc) ps;
    apply {
        tw.apply(hdr.h.x);
        ps.apply(hdr.h.x);
        sm.egress_spec = 1;
    }
}

control vck(inout Headers hdr, inout Meta meta) { apply { } }
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) { apply { } }
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
