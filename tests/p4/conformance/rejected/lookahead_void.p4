// expect: 5:9: method 'lookahead': illegal type argument void
#include <core.p4>
parser p(packet_in b) {
    state start {
        b.lookahead<void>();   // p4c issue4146
        transition accept;
    }
}
parser proto(packet_in b);
package top(proto p);
top(p()) main;
