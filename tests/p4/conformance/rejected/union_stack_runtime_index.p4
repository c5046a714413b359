// expect: 9:21: a header union stack needs a constant index on the v1model target (BMv2)
#include <core.p4>
header a_t { bit<8> v; }
header b_t { bit<16> v; }
header_union u_t { a_t a; b_t b; }
struct hs_t { u_t[2] u; a_t idx; }
parser p(packet_in pkt, out hs_t hs) {
    state start {
        pkt.extract(hs.u[hs.idx.v].a);   // p4c issue5703_header_union_stack
        transition accept;
    }
}
parser proto(packet_in pkt, out hs_t hs);
package top(proto p);
top(p()) main;
