// expect: 3:6: 'type' can only be applied to base types, not tuple<bit<1>>
#include <core.p4>
type tuple<bit<1>> pair_t;   // p4c tuple-newtype
control c() { apply { } }
control proto();
package top(proto p);
top(c()) main;
