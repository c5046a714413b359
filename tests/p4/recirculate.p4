/* Recirculation and resubmission with preserved field lists.
 * etherType 0x1111: every pass increments hdr.rc.passes; egress recirculates until three
 * passes are done; meta.loops (field list 0) counts passes across recirculations.
 * etherType 0x2222: the first pass resubmits with meta.loops = 7 (field list 0); the
 * resubmitted pass records what it saw and forwards to port 3. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header rc_t {
    bit<8> passes;
    bit<8> loops;
    bit<8> instance;
    bit<8> in_port;
}

struct headers {
    ethernet_t ethernet;
    rc_t       rc;
}

struct metadata {
    @field_list(0) bit<8> loops;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x1111: parse_rc;
            0x2222: parse_rc;
            default: accept;
        }
    }
    state parse_rc {
        packet.extract(hdr.rc);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.rc.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.rc.instance = (bit<8>)standard_metadata.instance_type;
        hdr.rc.in_port = (bit<8>)standard_metadata.ingress_port;
        if (hdr.ethernet.etherType == 0x2222) {
            if (standard_metadata.instance_type == 0) {
                meta.loops = 7;
                resubmit_preserving_field_list(0);
            } else {
                hdr.rc.loops = meta.loops;
                standard_metadata.egress_spec = 3;
            }
            exit;
        }
        hdr.rc.passes = hdr.rc.passes + 1;
        meta.loops = meta.loops + 1;
        standard_metadata.egress_spec = 2;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.rc.isValid() && hdr.ethernet.etherType == 0x1111) {
            hdr.rc.loops = meta.loops;
            if (hdr.rc.passes < 3) {
                recirculate_preserving_field_list(0);
            }
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.rc);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
