// expect: 9:13: table 't': duplicate entry key
#include <core.p4>
control c(inout bit<8> x, inout bit<8> y) {
    action set(bit<8> v) { x = v; }
    table t {
        key = { x : exact; y : exact; }
        actions = { set; }
        const entries = { (1, 2) : set(1); (1, 3) : set(2);
            (1, 2) : set(3); }   // p4c table-entries-error
    }
    apply { t.apply(); }
}
control proto(inout bit<8> x, inout bit<8> y);
package top(proto p);
top(c()) main;
