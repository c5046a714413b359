// expect: 8:27: table 't': its match kinds do not use priorities, but an entry has one
#include <core.p4>
control c(inout bit<8> x) {
    action set(bit<8> v) { x = v; }
    table t {
        key = { x : exact; }
        actions = { set; }
        const entries = { priority = 10: 3 : set(1); }   // p4c init-entries-error1-bmv2
    }
    apply { t.apply(); }
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
