// Explicit type arguments on the package, `table t()` and an `in` verify-checksum header.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> a; bit<8> b; }
struct Headers { hdr_t h; }
struct Meta { }

parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control vck(in Headers hdr, inout Meta meta) { apply { } }
control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action copy() { hdr.h.b = hdr.h.a; sm.egress_spec = 2; }
    table t() {
        actions = { copy; }
        const default_action = copy;
    }
    apply { t.apply(); }
}
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) { apply { } }
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch<Headers, Meta>(prs(), vck(), ingress(), egr(), cck(), dep()) main;
