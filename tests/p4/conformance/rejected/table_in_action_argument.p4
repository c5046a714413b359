// expect: 9:25: action 'set': a table is applied in an argument of the actions list
#include <core.p4>
control c(inout bit<8> x) {
    action none() { }
    table t0 { actions = { none; } }
    action set(in bool b) { x = b ? 8w1 : 8w2; }
    table t1 {
        key = { x : exact; }
        actions = { set(t0.apply().hit); }   // p4c issue2835-bmv2
    }
    apply { t1.apply(); }
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
