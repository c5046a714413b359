// expect: 6:13: '/' could not be evaluated at compile time: at run time only a division by a constant power of two is supported
#include <core.p4>
control c(inout bit<8> a, in bit<8> b) {
    apply {
        a = a / 4;   // a shift: fine
        a = a / b;   // BMv2 cannot divide at run time (p4c div3, compound-assignment)
    }
}
control proto(inout bit<8> a, in bit<8> b);
package top(proto p);
top(c()) main;
