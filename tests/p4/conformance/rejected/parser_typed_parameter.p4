// expect: 4:10: parameter 'q' cannot have the parser/control type inner_t
#include <core.p4>
parser inner_t();
parser p(inner_t q) {   // p4c parser-arg: only constructor parameters may be parsers
    state start { transition accept; }
}
parser proto(inner_t q);
package top(proto p);
top(p()) main;
