// expect: 5:9: switch statements in actions are not supported on the v1model target (BMv2)
#include <core.p4>
control c(inout bit<8> x) {
    action a() {
        switch (x) { 1: { x = 2; } }   // p4c issue3299 (BMv2 back end)
    }
    apply { a(); }
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
