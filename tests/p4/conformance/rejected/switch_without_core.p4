// expect: 5:9: a switch on a value needs match_kind 'exact' (declared in core.p4, not included)
control c(inout bit<4> x) {
    apply {
        if (x == 1) { x = 2; }
        switch (x) { 4w3: { x = 0; } }   // p4c issue3613
    }
}
control proto(inout bit<4> x);
package top(proto p);
top(c()) main;
