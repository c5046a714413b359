// expect: 4:1: @p4runtime_translation of 'port_b_t': the controller type must be bit<W>, string or a width, not bool
#include <core.p4>
@p4runtime_translation("example.org/port_a", bit<32>) type bit<9> port_a_t;
@p4runtime_translation("example.org/port_b", bool) type bit<9> port_b_t;   // p4c issue2283_2-bmv2
control c(inout port_a_t a, inout port_b_t b) { apply { } }
control proto(inout port_a_t a, inout port_b_t b);
package top(proto p);
top(c()) main;
