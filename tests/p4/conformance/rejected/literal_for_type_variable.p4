// expect: 5:23: function 'f': could not infer a width for the argument of 'x'
#include <core.p4>
extern void f<T>(in T x);
control c() {
    apply { f(8w5); f(5); }   // p4c issue764, issue584
}
control proto();
package top(proto p);
top(c()) main;
