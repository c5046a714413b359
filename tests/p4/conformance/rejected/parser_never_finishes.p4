// expect: 3:8: parser 'p' never reaches the accept or reject state
#include <core.p4>
parser p(packet_in b) {   // p4c issue2373
    state start { transition loop1; }
    state loop1 { transition loop2; }
    state loop2 { transition loop1; }
}
parser proto(packet_in b);
package top(proto p);
top(p()) main;
