// expect: 4:20: declaration of 'x' shadows a parameter 'x'
#include <core.p4>
control c(inout bit<8> x) {
    apply { bit<8> x = 1; }   // p4c issue2544_shadowing1: an error, not a warning
}
control proto(inout bit<8> x);
package top(proto p);
top(c()) main;
