// expect: 6:5: conflicting control plane name '.drop_it' (another action has it)
#include <core.p4>
@name(".drop_it") action drop_top() { }
control c(inout bit<8> x) {
    @name(".keep") action keep() { }
    @name(".drop_it") action drop_local() { x = 0; }   // p4c actions-with-duplicate-control-plane-names1, issue1949, multicast
    table t { key = { x : exact; } actions = { keep; drop_local; drop_top; } }
    apply { t.apply(); }
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
