// expect: 5:14: action data parameter 's' has type pair_t; it must be bit<>, int<>, bool, a type of those or a serializable enum
#include <core.p4>
struct pair_t { bit<8> a; bit<8> b; }
control c(inout pair_t p) {
    action a(pair_t s) { p = s; }   // action data must be bit/int/bool/serializable enum (p4c issue532)
    table t { key = { p.a : exact; } actions = { a; } }
    apply { t.apply(); }
}
control proto(inout pair_t p);
package top(proto p);
top(c()) main;
