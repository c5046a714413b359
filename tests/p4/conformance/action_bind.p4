// An action with a directional parameter bound in the actions list; a default_action that
// names all arguments must repeat that binding (p4c rejects another one).
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action set(inout bit<8> target, bit<8> v) { target = v; }
    table t {
        actions = { set(hdr.h.b); }
        default_action = set(hdr.h.b, 7);
    }
    apply { t.apply(); sm.egress_spec = 1; }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
