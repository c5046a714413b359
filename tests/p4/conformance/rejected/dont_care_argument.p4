// expect: 5:24: function 'f': '_' can only be passed to an out parameter, not to 'x'
#include <core.p4>
extern void f(in bit<32> x, out bit<32> y);
control c(inout bit<32> v) {
    apply { f(v, _); f(_, v); }   // p4c issue774-1
}
control proto(inout bit<32> v);
package top(proto p);
top(c()) main;
