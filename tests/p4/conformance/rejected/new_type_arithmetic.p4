// expect: 10:17: '+' cannot be applied to a value of type id_t ('type' declares a distinct type: cast it to bit<16> first)
#include <core.p4>
type bit<16> id_t;
control c(inout id_t n, inout bit<16> x) {
    apply {
        id_t m = (id_t) x;                      // explicit casts are fine
        x = (bit<16>) n + 1;
        if (n == m) { n = m; }                  // so are == and assignment of the same type
        n = 5;                                  // and a constant
        x = x + n;                              // p4c newtype-err
    }
}
control proto(inout id_t n, inout bit<16> x);
package top(proto p);
top(c()) main;
