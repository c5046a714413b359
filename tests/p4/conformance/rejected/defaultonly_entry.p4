// expect: 9:31: entry action 'only_default' is @defaultonly in table 't'
#include <core.p4>
control c(inout bit<8> x) {
    action only_default() { x = 1; }
    action other() { x = 2; }
    table t {
        key = { x : exact; }
        actions = { other; @defaultonly only_default; }
        const entries = { 3 : only_default(); }   // p4c issue1580
        default_action = only_default();
    }
    apply { t.apply(); }
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
