// expect: 6:13: '~' cannot be applied to an operand of type id_t
#include <core.p4>
type bit<16> id_t;
control c(inout id_t n) {
    apply {
        n = ~n;                                 // p4c newtype-err (unary operators)
    }
}
control proto(inout id_t n);
package top(proto p);
top(c()) main;
