/* Parser errors on BMv2's v1model: parsing stops, standard_metadata.parser_error holds
 * the error, the packet still runs ingress and the unparsed bytes stay as payload.
 * Ingress prepends a report header (error number, ingress port) and sends everything to
 * port 1. Errors: PacketTooShort (short frames), NoMatch (select without default),
 * a custom error from verify(), and an explicit transition to reject (no error). */
#include <core.p4>
#include <v1model.p4>

error { BadLength }

header report_t {
    bit<8> code;
    bit<8> valid_mask;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header tlv_t {
    bit<8> kind;
    bit<8> len;
}

struct headers {
    report_t   report;
    ethernet_t ethernet;
    tlv_t      tlv;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88B5: parse_tlv;
            0x0800: accept;
            0x0BAD: reject;
        }
    }
    state parse_tlv {
        packet.extract(hdr.tlv);
        verify(hdr.tlv.len >= 2, error.BadLength);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.report.setValid();
        if (standard_metadata.parser_error == error.NoError) {
            hdr.report.code = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.report.code = 1;
        } else if (standard_metadata.parser_error == error.NoMatch) {
            hdr.report.code = 2;
        } else if (standard_metadata.parser_error == error.BadLength) {
            hdr.report.code = 3;
        } else {
            hdr.report.code = 0xFF;
        }
        hdr.report.valid_mask = (hdr.ethernet.isValid() ? 8w1 : 8w0)
                                | (hdr.tlv.isValid() ? 8w2 : 8w0);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.report);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.tlv);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
