// expect: 9:13: 17 &&& 225: invalid mask for the lpm key 'x' (not a prefix)
#include <core.p4>
control c(inout bit<8> x) {
    action set(bit<8> v) { x = v; }
    table t {
        key = { x : lpm; }
        actions = { set; }
        const entries = { 16 &&& 0xF0 : set(1);
            17 &&& 0xE1 : set(2); }   // p4c table-entries-lpm-2 (optional-2: no masks at all)
    }
    apply { t.apply(); }
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
