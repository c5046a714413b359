// expect: 3:1: function 'max' does not return a value on all paths
#include <core.p4>
bit<16> max(in bit<16> a, in bit<16> b) {   // p4c function_e1
    if (a > b) {
        return a;
    }
}
control c(out bit<16> r) { apply { r = max(1, 2); } }
control proto(out bit<16> r);
package top(proto p);
top(c()) main;
