// With V1MODEL_VERSION >= 20200408 counter, meter and register take their index type
// as a type parameter, as in p4c's v1model.p4.
#include <core.p4>
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

header hdr_t { bit<8> idx; bit<16> val; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    register<bit<16>, bit<3>>(8) r;
    counter<bit<3>>(8, CounterType.packets) c;
    meter<bit<3>>(8, MeterType.bytes) m;
    apply {
        bit<16> old;
        r.read(old, hdr.h.idx[2:0]);
        r.write(hdr.h.idx[2:0], old + hdr.h.val);
        hdr.h.val = old + hdr.h.val;
        c.count(hdr.h.idx[2:0]);
        bit<2> colour;
        m.execute_meter(hdr.h.idx[2:0], colour);
        sm.egress_spec = 1;
    }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
