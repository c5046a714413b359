// expect: 4:11: parameter 'x': a parameter of type X cannot have a direction
#include <core.p4>
extern X { X(); }
control c(in X x) { apply { } }   // p4c extern.p4
control proto(in X x);
package top(proto p);
top(c()) main;
