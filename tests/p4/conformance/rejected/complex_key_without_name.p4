// expect: 7:17: a complex key expression needs a @name annotation
#include <core.p4>
header h_t { bit<32> a; bit<32> b; }
control c(inout h_t h) {
    action set() { h.b = 1; }
    table t {
        key = { h.a + h.b : exact; h.a & 0xFF : exact; h.b + 1 : exact @name("b1"); }
        actions = { set; }
    }
    apply { t.apply(); }
}
control proto(inout h_t h);
package top(proto p);
top(c()) main;
