// expect: 7:13: '==' cannot be applied to a table application result
#include <core.p4>
action none() { }
control c(inout bool b) {
    table t { actions = { none; } }
    apply {
        b = t.apply() == t.apply();   // p4c issue3846 (tables, action_run, void alike)
    }
}
control proto(inout bool b);
package top(proto p);
top(c()) main;
