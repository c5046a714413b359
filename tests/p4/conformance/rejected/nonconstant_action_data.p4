// expect: 8:38: action 'set': action data arguments must be compile-time constants
#include <core.p4>
control c(inout bit<8> x, in bit<8> y) {
    action set(bit<8> v) { x = v; }
    table t {
        key = { x : exact; }
        actions = { set; }
        default_action = set((bit<8>)y);   // p4c issue473
    }
    apply { t.apply(); }
}
control proto(inout bit<8> x, in bit<8> y);
package top(proto p);
top(c()) main;
