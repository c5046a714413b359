// P4_16 1.2.4 loops (p4c forloop-bmv2 and friends): C-style `for` with break/continue,
// `for (T x in a .. b)` ranges, lists and header stacks, loops in actions, functions and
// apply blocks, `return` and `exit` from inside a loop.
#include <core.p4>
#include <v1model.p4>

header hdr_t { bit<8> op; bit<8> n; bit<8> a; bit<8> b; bit<8> c; }
header item_t { bit<8> v; }
struct Headers { hdr_t h; item_t[3] it; }
struct Meta { }

parser prs(packet_in pkt, out Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.it.next);
        pkt.extract(hdr.it.next);
        pkt.extract(hdr.it.next);
        transition accept;
    }
}

// the smallest i with i * m >= x: returns from inside the loop
bit<8> first_multiple(in bit<8> x, in bit<8> m) {
    for (bit<8> i = 1; i < 255; i += 1) {
        if (i * m >= x) {
            return i;
        }
    }
    return 0;
}

control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) {
    action sum_even() {
        hdr.h.a = 0;
        for (bit<8> i = 1; i <= hdr.h.n; i = i + 1) {
            if (i == 10) {
                break;
            }
            if ((i & 1) == 1) {
                continue;  // runs the update first
            }
            hdr.h.a = hdr.h.a + i;
        }
    }
    action find(bit<8> limit) {
        for (bit<8> i in 0 .. limit) {
            hdr.h.b = i;
            if (i == hdr.h.n) {
                hdr.h.c = 0xAA;
                return;  // leaves the action, not only the loop
            }
        }
        hdr.h.c = 0xBB;
    }
    table t {
        key = { hdr.h.op : exact; }
        actions = { sum_even; find; NoAction; }
        const entries = {
            1 : sum_even();
            2 : find(5);
        }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        t.apply();
        if (hdr.h.op == 3) {
            bit<8> count = 0;
            for (bit<8> i in 1 .. hdr.h.n) {
                for (bit<8> j = 0, bit<8> k = 1; j < i; j = j + 1, k = k + 1) {
                    count = count + 1;
                    hdr.h.b = k;
                }
            }
            hdr.h.a = count;
        }
        if (hdr.h.op == 4) {
            bit<8> s = 0;
            for (bit<8> x in {hdr.h.n, 8w2, 8w3}) {
                s = s + x;
            }
            hdr.h.a = s;
            bit<8> total = 0;
            for (item_t e in hdr.it) {
                if (e.isValid()) {
                    total = total + e.v;
                }
                e.v = 0;  // the loop variable is a copy
            }
            hdr.h.b = total;
            hdr.h.c = first_multiple(hdr.h.n, 7);
        }
        if (hdr.h.op == 5) {
            int<8> acc = 0;
            for (int<8> i in -3 .. 2) {
                acc = acc + i;
            }
            hdr.h.a = (bit<8>)acc;
            bit<8> m = 0;
            for (bit<8> i in 5 .. 1) {
                m = m + 1;  // an empty range: never runs
            }
            hdr.h.b = m;
        }
        if (hdr.h.op == 6) {
            for (bit<8> i in 0 .. 3) {
                if (i == hdr.h.n) {
                    hdr.h.a = i;
                    exit;
                }
            }
            hdr.h.a = 0xEE;
        }
    }
}

control vck(inout Headers hdr, inout Meta meta) { apply { } }
control egr(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
control cck(inout Headers hdr, inout Meta meta) { apply { } }
control dep(packet_out pkt, in Headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
