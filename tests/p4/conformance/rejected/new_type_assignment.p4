// expect: 6:13: assignment: an expression of type bit<16> needs an explicit cast to id_t ('type' declares a distinct type)
#include <core.p4>
type bit<16> id_t;
control c(inout id_t n, inout bit<16> x) {
    apply {
        n = x;                                  // p4c newtype-err
    }
}
control proto(inout id_t n, inout bit<16> x);
package top(proto p);
top(c()) main;
