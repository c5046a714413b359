/* One of every P4Runtime entity kind, for the status-code comparison with BMv2
 * (tests/test_p4runtime_bmv2_codes.py): exact, LPM, ternary+range (direct counter),
 * const-default and keyless tables, an action selector, a counter, a meter, a register,
 * a digest, and actions restricted to entries (@tableonly) or defaults (@defaultonly). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers_t { ethernet_t ethernet; }
struct learn_t { bit<48> srcAddr; bit<9> port; }
struct meta_t { bit<32> color; bit<32> value; }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(8, CounterType.packets_and_bytes) ctr;
    meter(4, MeterType.bytes) mtr;
    register<bit<32>>(8) reg;
    direct_counter(CounterType.packets_and_bytes) acl_counter;
    action_selector(HashAlgorithm.crc16, 32w16, 32w14) sel;

    action drop() { mark_to_drop(standard_metadata); }
    action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
    action set_both(bit<9> port, bit<16> tag) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.etherType = tag;
    }
    action only_in_table() { standard_metadata.egress_spec = 1; }
    action only_default() { standard_metadata.egress_spec = 2; }
    action acl_drop() { mark_to_drop(standard_metadata); }
    action acl_pass() { }

    table t_exact {
        key = {
            hdr.ethernet.etherType: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { set_port; set_both; drop; @tableonly only_in_table; @defaultonly only_default; }
        default_action = drop();
        size = 64;
    }
    table t_lpm {
        key = { hdr.ethernet.dstAddr: lpm; }
        actions = { set_port; drop; }
        default_action = drop();
        size = 64;
    }
    table t_acl {
        key = {
            hdr.ethernet.srcAddr: ternary;
            hdr.ethernet.etherType: range;
        }
        actions = { acl_drop; acl_pass; }
        default_action = acl_pass();
        counters = acl_counter;
        size = 64;
    }
    table t_const_default {
        key = { standard_metadata.ingress_port: exact; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        size = 16;
    }
    table t_keyless {
        actions = { drop; NoAction; }
        default_action = NoAction();
    }
    table t_indirect {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ethernet.srcAddr: selector;
        }
        actions = { set_port; drop; }
        implementation = sel;
        size = 16;
    }
    apply {
        t_exact.apply();
        t_lpm.apply();
        t_acl.apply();
        t_const_default.apply();
        t_keyless.apply();
        t_indirect.apply();
        ctr.count(0);
        mtr.execute_meter<bit<32>>(0, meta.color);
        reg.read(meta.value, 0);
        reg.write(1, meta.value);
        digest<learn_t>(1, {hdr.ethernet.srcAddr, standard_metadata.ingress_port});
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
