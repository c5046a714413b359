// expect: 9:24: register 'pairs' holds pair_t values: a register of a struct or header type is not supported on the v1model target (BMv2), its cells are bit strings
#include <core.p4>
#include <v1model.p4>
struct pair_t { bit<8> a; bit<8> b; }
control c(inout pair_t p, inout bit<8> x) {
    register<bit<8>>(4) bytes;
    register<pair_t>(4) pairs;
    apply { bytes.read(x, 1); bytes.write(2, x);   // a register of bit<8> is fine
            pairs.read(p, 0); }                    // p4c issue1777-bmv2
}
control proto(inout pair_t p, inout bit<8> x);
package top(proto p);
top(c()) main;
