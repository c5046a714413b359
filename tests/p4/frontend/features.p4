/* A v1model program that exercises most front-end features (no particular purpose). */
#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 4
#define TWICE(x) ((x) * 2)

const bit<16> ETH_IPV4 = 16w0x0800;
const int SHIFT = TWICE(2);
const bool DEBUG = true;
typedef bit<48> mac_t;
type bit<9> port_t;

error { BadHops }

enum bit<8> Proto { TCP = 6, UDP = 17 }
enum Color { RED, GREEN }

header eth_t { mac_t dst; mac_t src; bit<16> type; }
header hop_t { bit<1> bos; bit<15> port; }
header opt_t { bit<8> len; varbit<320> data; }
header a_t { bit<8> x; }
header b_t { bit<16> y; }
header_union ab_t { a_t a; b_t b; }

struct digest_t { mac_t src; bit<9> port; }
struct meta_t { bit<8> proto; bit<32> idx; bit<16> h; bit<2> color; bit<8> tmp; int<8> s; }
struct headers_t { eth_t eth; hop_t[MAX_HOPS] hops; opt_t opt; ab_t ab; }

bit<8> add3(in bit<8> a, in bit<8> b) {
    return a + b + 3;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bit<8> n = 0;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type, pkt.lookahead<bit<8>>()) {
            (ETH_IPV4, 0x00 &&& 0xF0): hops;
            (16w0x1234, _): opt;
            (0x8000 .. 0x8fff, default): accept;
            default: reject;
        }
    }
    state hops {
        pkt.extract(hdr.hops.next);
        n = n + 1;
        verify(n < 5, error.BadHops);
        transition select(hdr.hops.last.bos) {
            1: accept;
            default: hops;
        }
    }
    state opt {
        pkt.extract(hdr.opt, (bit<32>)(pkt.lookahead<bit<8>>() << 3));
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(1024) regs;
    counter(64, CounterType.packets_and_bytes) ctr;
    direct_counter(CounterType.packets) dctr;
    meter(32w16, MeterType.bytes) mtr;
    @name(".global_profile") action_profile(128) prof;

    action drop() { mark_to_drop(sm); }
    @name("set_port") action fwd(port_t port, bit<8> v) {
        sm.egress_spec = (bit<9>)port;
        meta.tmp = v |+| 8w250;
    }
    action count_it(inout bit<8> x) { x = x + 1; ctr.count(meta.idx); }

    table t_exact {
        key = { hdr.eth.dst: exact @name("dst_mac"); meta.proto: ternary; }
        actions = { fwd; drop; @defaultonly NoAction; }
        const default_action = drop();
        counters = dctr;
        size = 64;
    }
    table t_entries {
        key = { hdr.eth.type: ternary; meta.proto: range; }
        actions = { fwd; NoAction; }
        const entries = {
            priority = 10: (0x0800, 1 .. 10): fwd(1, 2);
            priority = 5: (0x0800 &&& 0xff00, _): NoAction();
            (_, default): NoAction();
        }
    }
    table t_prof {
        key = { meta.idx: exact; }
        actions = { fwd; count_it(meta.tmp); }
        implementation = prof;
    }

    apply {
        bit<32> v;
        regs.read(v, meta.idx);
        regs.write(meta.idx, v + 1);
        mtr.execute_meter(meta.idx, meta.color);
        hash(meta.h, HashAlgorithm.crc16, 16w0, { hdr.eth.src, hdr.eth.dst }, 32w65536);
        meta.s = -8s3;
        meta.tmp = add3(meta.tmp, hdr.eth.src[7:0]) ^ (bit<8>)(ETH_IPV4 >> SHIFT);
        meta.idx = hdr.eth.dst[15:0] ++ hdr.eth.src[15:0];
        switch (t_exact.apply().action_run) {
            fwd: { meta.tmp = 3; }  // (t_prof is applied below: BMv2 allows no path from a table back to itself)
            drop:
            default: { exit; }
        }
        if (t_entries.apply().hit && !hdr.ab.isValid()) {
            hdr.ab.a.setValid();
            hdr.ab.a.x = DEBUG ? 8w1 : 8w2;
        } else if (t_prof.apply().miss) {
            count_it(meta.tmp);
        }
        switch (meta.proto) {
            6: { meta.tmp = 0; }
            17: { meta.tmp = 1; }
        }
        if (hdr.hops[0].isValid()) {
            hdr.hops.pop_front(1);
        }
        digest<digest_t>(1, { hdr.eth.src, sm.ingress_port });
        clone(CloneType.I2E, 32w5);
        log_msg("proto={}", { meta.proto });
        log_msg("done");
        if (sm.parser_error == error.PacketTooShort) { mark_to_drop(); }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) { truncate(64); }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.eth.isValid(), { hdr.eth.src }, meta.h, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
