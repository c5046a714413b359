/* Up to two VLAN tags (802.1ad or 802.1Q outer, 802.1Q inner), used by the port tests to
 * show that the program sees the tags that were on the wire: a frame from port 1 with at
 * least one tag goes to port 2 with its outer VID plus one (the inner tag and the rest
 * unchanged); an untagged frame is dropped. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> etherType; }
struct headers_t { ethernet_t ethernet; vlan_t outer; vlan_t inner; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8100: parse_outer;
            0x88a8: parse_outer;
            default: accept;
        }
    }
    state parse_outer {
        pkt.extract(hdr.outer);
        transition select(hdr.outer.etherType) {
            0x8100: parse_inner;
            default: accept;
        }
    }
    state parse_inner { pkt.extract(hdr.inner); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.outer.isValid() && standard_metadata.ingress_port == 1) {
            hdr.outer.vid = hdr.outer.vid + 1;
            standard_metadata.egress_spec = 2;
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.outer); pkt.emit(hdr.inner); }
}
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
