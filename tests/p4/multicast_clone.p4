/* Multicast through the PRE, ingress-to-egress and egress-to-egress clones. Egress
 * stamps every copy's source MAC with instance_type (16 bits), egress_rid (16 bits) and
 * egress_port (16 bits) so that each copy is recognisable on the wire; clones also carry
 * the metadata field list 1 (meta.tag) into the destination MAC's last byte. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers {
    ethernet_t ethernet;
}

struct metadata {
    @field_list(1) bit<8>  tag;
    @field_list(1) bit<32> e2e_session;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action multicast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    action forward_and_clone(bit<9> port, bit<32> session) {
        standard_metadata.egress_spec = port;
        meta.tag = 0xAB;
        clone_preserving_field_list(CloneType.I2E, session, 1);
    }
    action forward_and_e2e(bit<9> port, bit<32> session) {
        standard_metadata.egress_spec = port;
        meta.tag = 0xCD;
        meta.e2e_session = session;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table fwd {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; multicast; forward_and_clone; forward_and_e2e; drop; }
        default_action = drop();
    }
    apply {
        fwd.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.ethernet.srcAddr = (bit<16>)standard_metadata.instance_type
                               ++ standard_metadata.egress_rid
                               ++ (bit<16>)standard_metadata.egress_port;
        if (standard_metadata.instance_type != 0 && standard_metadata.instance_type != 5) {
            hdr.ethernet.dstAddr[7:0] = meta.tag;
        }
        if (standard_metadata.instance_type == 0 && meta.e2e_session != 0) {
            clone_preserving_field_list(CloneType.E2E, meta.e2e_session, 1);
            mark_to_drop(standard_metadata);
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
