// expect: 5:19: method 'extract': the argument must be a header, not bit<32>
#include <core.p4>
parser p(packet_in b, out bit<32> x) {
    state start {
        b.extract(x);   // p4c extract.p4 (and extract1: a size for a header without varbit)
        transition accept;
    }
}
parser proto(packet_in b, out bit<32> x);
package top(proto p);
top(p()) main;
