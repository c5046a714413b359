/* Differential test program of the C engine (tests/test_cengine.py): one table of each
 * match kind, counters, meters, registers, hashes, a checksum, multicast, wide values and
 * the arithmetic corners (saturation, signed shifts and comparisons, slices, concatenation). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header probe_t {
    bit<8>   op;
    int<16>  a;
    int<16>  b;
    bit<12>  c;
    bit<4>   d;
    bit<96>  wide;
    bit<32>  result;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    probe_t    probe;
}

struct metadata_t {
    bit<32> hash16;
    bit<32> hash32;
    bit<8>  color;
    bit<8>  dcolor;
    bit<16> tag;
    bit<32> hashx;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.type) {
            0x0800: parse_ipv4;
            0x88B0 &&& 0xFFF0: parse_probe;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            0x90 .. 0x9F: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t std) {
    counter(8, CounterType.packets_and_bytes) port_count;
    meter(8, MeterType.packets) port_meter;
    register<bit<32>>(16) last_src;
    register<bit<96>>(4) wide_reg;
    direct_counter(CounterType.packets_and_bytes) exact_count;
    direct_meter<bit<8>>(MeterType.bytes) lpm_meter;

    action drop() { mark_to_drop(std); }
    action fwd(bit<9> port) { std.egress_spec = port; }
    action fwd_tag(bit<9> port, bit<16> tag) { std.egress_spec = port; meta.tag = tag; }
    action set_mac(bit<48> dst) { hdr.ethernet.dst = dst; exact_count.count(); }
    action route(bit<9> port, bit<48> dst) {
        std.egress_spec = port;
        hdr.ethernet.dst = dst;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        lpm_meter.read(meta.dcolor);
    }
    action mcast(bit<16> grp) { std.mcast_grp = grp; }

    table mac_exact {
        key = { hdr.ethernet.dst: exact; std.ingress_port: exact; }
        actions = { set_mac; NoAction; }
        counters = exact_count;
        size = 64;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { route; drop; NoAction; }
        meters = lpm_meter;
        default_action = NoAction();
        size = 64;
    }
    table acl {
        key = { hdr.ethernet.src: ternary; hdr.ethernet.type: ternary; }
        actions = { fwd; fwd_tag; drop; mcast; NoAction; }
        size = 64;
    }
    table ports {
        key = { hdr.probe.c: range; hdr.probe.op: exact; }
        actions = { fwd; mcast; NoAction; }
        size = 64;
    }

    apply {
        std.egress_spec = 1;
        port_count.count((bit<32>)std.ingress_port & 7);
        port_meter.execute_meter((bit<32>)std.ingress_port & 7, meta.color);
        hash(meta.hash16, HashAlgorithm.crc16, 16w0, { hdr.ethernet.src, hdr.ethernet.type }, 32w1024);
        hash(meta.hash32, HashAlgorithm.crc32, 32w7, { hdr.ethernet.dst }, 32w0);
        if (hdr.probe.isValid()) {
            if (hdr.probe.d == 1) {
                hash(meta.hashx, HashAlgorithm.xor16, 32w0, { hdr.probe.wide, hdr.probe.c }, 32w65536);
            } else if (hdr.probe.d == 2) {
                hash(meta.hashx, HashAlgorithm.identity, 32w3, { hdr.probe.a, hdr.ethernet.src }, 32w1000003);
            } else if (hdr.probe.d == 3) {
                hash(meta.hashx, HashAlgorithm.crc32_custom, 32w0, { hdr.probe.op }, 32w0xFFFFFFFF);
            } else {
                hash(meta.hashx, HashAlgorithm.csum16, 32w0, { hdr.probe.b, hdr.ipv4.ttl }, 32w65536);
            }
        }
        last_src.write((bit<32>)hdr.ethernet.src[3:0], hdr.ethernet.src[31:0]);
        mac_exact.apply();
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        }
        switch (acl.apply().action_run) {
            fwd_tag: { hdr.ethernet.type = hdr.ethernet.type ^ meta.tag; }
            drop: { meta.tag = 0xDEAD; }
            default: { }
        }
        if (hdr.probe.isValid()) {
            ports.apply();
            bit<96> w;
            wide_reg.read(w, (bit<32>)hdr.probe.d & 3);
            wide_reg.write((bit<32>)hdr.probe.d & 3, hdr.probe.wide ^ (w << 3));
            if (hdr.probe.op == 0) {
                hdr.probe.result = (bit<16>)(hdr.probe.a |+| hdr.probe.b) ++ 16w0;
            } else if (hdr.probe.op == 1) {
                hdr.probe.result = (bit<32>)(bit<16>)(hdr.probe.a |-| hdr.probe.b);
            } else if (hdr.probe.op == 2) {
                hdr.probe.result = (bit<32>)(bit<16>)(hdr.probe.a >> (bit<8>)hdr.probe.d);
            } else if (hdr.probe.op == 3) {
                hdr.probe.result = hdr.probe.a < hdr.probe.b ? 32w1 : 32w2;
            } else if (hdr.probe.op == 4) {
                hdr.probe.result = hdr.probe.wide[95:64] + hdr.probe.wide[31:0];
                hdr.probe.wide = hdr.probe.wide + (w >> 7);
            } else if (hdr.probe.op == 5) {
                hdr.probe.result = (hdr.probe.c * (bit<12>)hdr.probe.d) ++ hdr.probe.c[11:8] ++ 16w0;
            } else if (hdr.probe.op == 6) {
                hdr.probe.result = meta.hash16 ^ meta.hash32 ^ meta.hashx;
            } else {
                hdr.probe.result = meta.color ++ meta.dcolor ++ meta.tag;
            }
            hdr.probe.c = hdr.probe.c |+| 12w100;
        }
        if (hdr.ethernet.src[0:0] == 1 && std.egress_spec != 511) {
            hdr.ethernet.src = hdr.ethernet.src - 1;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t std) {
    apply {
        if (std.instance_type == 5) {
            hdr.ethernet.type = (bit<16>)std.egress_rid;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.probe);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
