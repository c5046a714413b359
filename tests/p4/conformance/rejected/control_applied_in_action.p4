// expect: 7:9: a parser or control cannot be applied inside an action
#include <core.p4>
control sub() { apply { } }
control c() {
    sub() s;
    action a() {
        s.apply();   // p4c issue2597
    }
    apply { a(); }
}
control proto();
package top(proto p);
top(c()) main;
