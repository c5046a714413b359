// expect: 4:1: c1: a parser or control cannot be instantiated at the top level
#include <core.p4>
control inner() { apply { } }
inner() c1;   // p4c issue388
control c() { apply { c1.apply(); } }
control proto();
package top(proto p);
top(c()) main;
