// expect: 5:23: function 'f': parameter 'data' of type string cannot have a direction
#include <core.p4>
extern void f<T>(in T data);
control c() {
    apply { f(8w1); f("text"); }   // T = string with a direction (p4c string-e2)
}
control proto();
package top(proto p);
top(c()) main;
