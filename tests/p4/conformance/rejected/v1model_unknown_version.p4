// expect: v1model.p4:17:37: unknown V1MODEL_VERSION: supported are 20180101 to 20200408
#define V1MODEL_VERSION 20000101
#include <v1model.p4>
// p4c issue5296_unknown_version: an otherwise complete program
header hdr_t { bit<8> a; }
struct Headers { hdr_t h; }
struct Meta { }
#include "../skeleton.inc"
control ingress(inout Headers hdr, inout Meta meta, inout standard_metadata_t sm) { apply { } }
V1Switch(prs(), vck(), ingress(), egr(), cck(), dep()) main;
