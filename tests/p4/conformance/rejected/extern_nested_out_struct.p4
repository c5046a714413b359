// expect: 8:27: extern function 'fill': the argument for inout parameter 'v' is a struct (outer_t) holding structs or headers, which the BMv2 back end cannot pass
#include <core.p4>
header h_t { bit<8> f; }
struct flat_t { bit<8> a; bit<8> b; }
struct outer_t { h_t h; }
extern void fill<T>(inout T v);
control c(inout outer_t o, inout flat_t s) {
    apply { fill(s);      fill(o); }   // a flat struct is fine; p4c issue2545
}
control proto(inout outer_t o, inout flat_t s);
package top(proto p);
top(c()) main;
