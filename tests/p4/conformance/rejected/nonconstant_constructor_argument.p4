// expect: 5:11: constructor of 'inner': the argument of 'y' must be a compile-time constant
#include <core.p4>
control inner()(bit<8> y) { apply { } }
control c(in bit<8> z) {
    inner(z) i1;   // p4c persistent_e
    apply { i1.apply(); }
}
control proto(in bit<8> z);
package top(proto p);
top(c()) main;
