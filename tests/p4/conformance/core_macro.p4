// p4c's core.p4 defines _CORE_P4_ (and v1model.p4 _V1_MODEL_P4_); programs test them.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; }
struct Headers { hdr_t h; }
struct Meta { }

#include "skeleton.inc"

#if defined(_CORE_P4_) && defined(_V1_MODEL_P4_)
control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    apply { hdr.h.b = hdr.h.a; sm.egress_spec = 1; }
}
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
#endif
