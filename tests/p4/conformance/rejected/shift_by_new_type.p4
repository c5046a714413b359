// expect: 5:29: the shift amount of '<<' must be bit<S> or a non-negative constant, not amount_t
#include <core.p4>
type bit<8> amount_t;
control c(inout bit<32> x, in amount_t n) {
    apply { x = x << 2; x = x << n; }   // p4c issue5094-type-bmv2
}
control proto(inout bit<32> x, in amount_t n);
package top(proto p);
top(c()) main;
