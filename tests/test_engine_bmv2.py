"""Regression tests: places where the engine must behave exactly as p4c + BMv2 do.

Each test compiles a small v1model program around a 4-element header stack ``hdr.s`` of
32-bit words that follows Ethernet, sends one frame through ``Pipeline.process`` and
compares the output bytes (or the pipeline's state) exactly.
"""

from __future__ import annotations

import logging
import random

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch.engine.externs import csum16, hash_value
from softswitch.engine.runtime import csum16_int, csum16_payload
from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
from softswitch.frontend import compile_source
from softswitch.pipeline import Pipeline

ETH = bytes.fromhex("000000000001000000000002") + b"\x90\x00"

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header w_t { bit<32> v; }
struct headers { ethernet_t eth; w_t[4] s; }
struct metadata { bit<32> m; bit<32> i; }
%(decls)s
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        pk.extract(hdr.s[0]); pk.extract(hdr.s[1]); pk.extract(hdr.s[2]); pk.extract(hdr.s[3]);
        %(parser)s
    }
    %(states)s
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    %(locals)s
    apply { sm.egress_spec = 1; %(body)s }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    %(elocals)s
    apply { %(ebody)s }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.s); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def pipeline(
    body: str = "",
    locals_: str = "",
    decls: str = "",
    parser: str = "transition accept;",
    states: str = "",
    ebody: str = "",
    elocals: str = "",
) -> Pipeline:
    src = TEMPLATE % {
        "body": body,
        "locals": locals_,
        "decls": decls,
        "parser": parser,
        "states": states,
        "ebody": ebody,
        "elocals": elocals,
    }
    return Pipeline(compile_source(src, "t.p4"))


def words(*vals: int) -> bytes:
    return b"".join(v.to_bytes(4, "big") for v in vals)


def run(body: str, data: bytes = bytes(16), **kw: str) -> bytes:
    """The four stack words after one frame went through a program built around ``body``."""
    out = pipeline(body, **kw).process(0, ETH + data)
    assert len(out) == 1 and out[0][0] == 1
    return out[0][1][len(ETH) :]


BUMP_TABLE = """
    action bump() { hdr.s[3].v = hdr.s[3].v + 1; }
    table t { key = { } actions = { bump; } default_action = bump(); }
"""

# ------------------------------------------------------------------ short-circuit


def test_table_in_skipped_and_operand_is_not_applied() -> None:
    """false && t.apply().hit does not apply t (no action runs)."""
    body = "if (hdr.s[0].v == 1 && t.apply().hit) { hdr.s[1].v = 5; }"
    assert run(body, locals_=BUMP_TABLE) == words(0, 0, 0, 0)
    assert run(body, data=words(1, 0, 0, 0), locals_=BUMP_TABLE) == words(1, 0, 0, 1)


def test_table_in_skipped_or_operand_is_not_applied() -> None:
    """true || t.apply().miss does not apply t; false || ... does."""
    body = "if (hdr.s[0].v == 0 || t.apply().miss) { hdr.s[1].v = 5; }"
    assert run(body, locals_=BUMP_TABLE) == words(0, 5, 0, 0)
    assert run(body, data=words(1, 0, 0, 0), locals_=BUMP_TABLE) == words(1, 5, 0, 1)


def test_table_in_unchosen_conditional_branch_is_not_applied() -> None:
    """c ? t.apply().hit : false applies t only when c holds."""
    body = "hdr.s[2].v = (hdr.s[0].v == 1 ? t.apply().miss : false) ? 32w7 : 32w9;"
    assert run(body, locals_=BUMP_TABLE) == words(0, 0, 9, 0)
    assert run(body, data=words(1, 0, 0, 0), locals_=BUMP_TABLE) == words(1, 0, 7, 1)


# ------------------------------------------------------------------ copy-out


def test_copy_out_to_indexed_element_uses_index_before_call() -> None:
    """f(i, s[i].v) with i changed by f writes s[old i] (lvalue evaluated once)."""
    locals_ = "action f(inout bit<32> j, out bit<32> o) { j = j + 1; o = 7; }"
    body = "meta.i = 1; f(meta.i, hdr.s[meta.i].v); hdr.s[3].v = meta.i;"
    assert run(body, locals_=locals_) == words(0, 7, 0, 2)


def test_function_copy_out_to_indexed_element_uses_index_before_call() -> None:
    """A function's out argument s[i].v is located before the call changes i."""
    decls = "bit<32> g(inout bit<32> j, out bit<32> o) { j = j + 1; o = 7; return j; }"
    body = "meta.i = 2; hdr.s[0].v = g(meta.i, hdr.s[meta.i].v);"
    assert run(body, decls=decls) == words(3, 0, 7, 0)


# ------------------------------------------------------------------ stack bounds


def test_out_of_range_stack_write_is_a_no_op() -> None:
    """hs[i] = ... with i >= size changes nothing."""
    assert run("meta.i = 4; hdr.s[meta.i].v = 5;", data=words(1, 2, 3, 4)) == words(1, 2, 3, 4)


def test_out_of_range_stack_read_assigns_undefined_zero() -> None:
    """x = hs[i].v + 1 with i out of range stores 0 (p4c's undefined value), not 1."""
    out = run("meta.i = 9; hdr.s[0].v = hdr.s[meta.i].v + 1;", data=words(1, 2, 3, 4))
    assert out == words(0, 2, 3, 4)


def test_out_of_range_stack_in_condition_takes_else() -> None:
    """if (hs[i].v == 0) with i out of range runs the else branch."""
    body = "meta.i = 4; if (hdr.s[meta.i].v == 0) { hdr.s[0].v = 1; } else { hdr.s[0].v = 2; }"
    assert run(body) == words(2, 0, 0, 0)


def test_out_of_range_stack_in_call_skips_the_call() -> None:
    """An action call with an out-of-range hs[i] argument does not run at all."""
    locals_ = "action a(bit<32> x) { hdr.s[1].v = 99; hdr.s[2].v = x; }"
    assert run("meta.i = 5; a(hdr.s[meta.i].v);", locals_=locals_) == words(0, 0, 0, 0)
    assert run("meta.i = 3; a(hdr.s[meta.i].v);", locals_=locals_, data=words(0, 0, 0, 4)) == (
        words(0, 99, 4, 4)
    )


def test_in_range_run_time_index_reads_and_writes_element() -> None:
    """hs[i] with i in range reads and writes element i (index evaluated once)."""
    body = "meta.i = 1; hdr.s[meta.i + 1].v = hdr.s[meta.i].v + 10;"
    assert run(body, data=words(1, 2, 3, 4)) == words(1, 2, 12, 4)


def test_parser_out_of_range_index_is_stack_out_of_bounds() -> None:
    """In a parser hs[i] with i out of range stops parsing with StackOutOfBounds."""
    p = pipeline(
        parser="transition select(hdr.s[0].v) { 9: bad; default: accept; }",
        states="state bad { hdr.s[hdr.s[0].v].v = 1; transition accept; }",
        body="if (sm.parser_error == error.StackOutOfBounds) { hdr.s[1].v = 77; }",
    )
    out = p.process(0, ETH + words(9, 0, 0, 0))
    assert out == [(1, ETH + words(9, 77, 0, 0))]


# ------------------------------------------------------------------ digest


DIGEST_DECLS = "struct dig_t { bit<32> m; bit<48> src; }"


def test_digest_reports_field_values_at_end_of_ingress() -> None:
    """BMv2 reads digest fields after ingress: later writes are seen."""
    p = pipeline(
        "meta.m = 1; digest<dig_t>(1, {meta.m, hdr.eth.src}); meta.m = 2; hdr.eth.src = 3;",
        decls=DIGEST_DECLS,
    )
    p.process(0, ETH + bytes(16))
    assert p.drain_digests() == [("dig_t", (2, 3))]


def test_digest_last_call_wins_and_exit_keeps_it() -> None:
    """Of two digest calls only the last is sent, with values as at exit."""
    p = pipeline(
        "digest<dig_t>(1, {meta.m, hdr.eth.src}); meta.m = 5;"
        " digest<dig_t>(2, {meta.m + 1, hdr.eth.dst}); meta.m = 6; exit;",
        decls=DIGEST_DECLS,
    )
    p.process(0, ETH + bytes(16))
    assert p.drain_digests() == [("dig_t", (6, 1))]


# ------------------------------------------------------------------ assert


def test_failed_assert_drops_counts_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    """assert(false) drops the packet, counts it and logs an error (BMv2 would abort)."""
    p = pipeline("assert(hdr.s[0].v == 0); hdr.s[1].v = 1;")
    with caplog.at_level(logging.ERROR, logger="softswitch"):
        assert p.process(0, ETH + words(3, 0, 0, 0)) == []
    assert p.assertion_failures == 1
    assert any("assert" in r.getMessage() for r in caplog.records)
    assert p.process(0, ETH + bytes(16)) == [(1, ETH + words(0, 1, 0, 0))]
    assert p.assertion_failures == 1


# ------------------------------------------------------------------ clone


def test_clone_e2e_called_in_ingress_acts_as_ingress_clone() -> None:
    """clone(E2E, s) in ingress is handled after ingress (instance_type 1), as BMv2 does."""
    p = pipeline(
        "clone(CloneType.E2E, 32w0x8005);",
        ebody="hdr.s[0].v = sm.instance_type; hdr.s[1].v = (bit<32>)sm.egress_port;",
    )
    p.pre.set_clone_session(5, [(6, 0)])
    out = p.process(0, ETH + bytes(16))
    assert sorted(out) == [(1, ETH + words(0, 1, 0, 0)), (6, ETH + words(1, 6, 0, 0))]


def test_clone_i2e_called_in_egress_acts_as_egress_clone() -> None:
    """clone(I2E, s) in egress makes an egress clone (instance_type 2)."""
    p = pipeline(
        ebody="if (sm.instance_type == 0) { clone(CloneType.I2E, 32w5); }"
        " hdr.s[0].v = sm.instance_type;"
    )
    p.pre.set_clone_session(5, [(6, 0)])
    out = p.process(0, ETH + bytes(16))
    assert sorted(out) == [(1, ETH + words(0, 0, 0, 0)), (6, ETH + words(2, 0, 0, 0))]


# ------------------------------------------------------------------ counters


def test_counters_count_received_length_not_modified_length() -> None:
    """Indexed and direct counters add the frame length as received (BMv2 ingress_length),
    in ingress and in egress, even after headers were removed."""
    locals_ = """
    counter(4, CounterType.packets_and_bytes) c;
    direct_counter(CounterType.packets_and_bytes) dc;
    action nop() { }
    table t { key = { hdr.eth.etype: exact; } actions = { nop; } counters = dc; }
    """
    p = pipeline(
        "hdr.s[3].setInvalid(); hdr.s[2].setInvalid(); c.count(0); t.apply();",
        locals_=locals_,
        elocals="counter(4, CounterType.bytes) ec;",
        ebody="ec.count(1);",
    )
    p.tables["I.t"].insert(TableEntry((FieldMatch(0x9000),), ActionCall("I.nop", ())))
    frame = ETH + bytes(16) + b"payload"
    out = p.process(0, frame)
    assert out == [(1, ETH + bytes(8) + b"payload")]
    assert (p.counters["I.c"].packets[0], p.counters["I.c"].bytes[0]) == (1, len(frame))
    assert p.counters["E.ec"].bytes[1] == len(frame)
    entry = p.tables["I.t"].entries()[0]
    assert (entry.packets, entry.bytes) == (1, len(frame))


# ------------------------------------------------------------------ checksums


def test_csum16_on_integers_matches_byte_definition() -> None:
    """The integer form of csum16 the generated code uses equals RFC 1071 on bytes."""
    rng = random.Random(7)
    for n in [*range(0, 24), 1500]:
        for _ in range(50):
            data = bytes(rng.choice((0, 255, rng.randrange(256))) for _ in range(n))
            assert csum16_int(int.from_bytes(data, "big"), n) == csum16(data)
            k = rng.randrange(0, n + 1)
            assert csum16_payload(int.from_bytes(data[:k], "big"), k, data[k:]) == csum16(data)


UDP_CSUM = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t { bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id;
                bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum;
                bit<32> src; bit<32> dst; }
header udp_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> csum; }
struct headers { ethernet_t eth; ipv4_t ip; udp_t udp; }
struct metadata { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.ip); pk.extract(hdr.udp); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; hdr.udp.sport = 7; hdr.ip.ttl = hdr.ip.ttl - 1; }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ip.isValid(), { hdr.ip.version, hdr.ip.ihl, hdr.ip.tos, hdr.ip.len,
            hdr.ip.id, hdr.ip.flags, hdr.ip.frag, hdr.ip.ttl, hdr.ip.proto, hdr.ip.src,
            hdr.ip.dst }, hdr.ip.csum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid(), { hdr.ip.src, hdr.ip.dst, 8w0,
            hdr.ip.proto, hdr.udp.len, hdr.udp.sport, hdr.udp.dport, hdr.udp.len },
            hdr.udp.csum, HashAlgorithm.csum16);
    }
}
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.eth); pk.emit(hdr.ip); pk.emit(hdr.udp); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


@pytest.mark.parametrize("payload", [b"", b"x", b"odd", b"even", bytes(range(255)) * 5])
def test_ipv4_and_udp_checksums_match_scapy(payload: bytes) -> None:
    """update_checksum and update_checksum_with_payload (csum16) give scapy's checksums."""
    p = Pipeline(compile_source(UDP_CSUM, "udp.p4"))
    sent = Ether() / IP(src="10.0.0.1", dst="10.0.0.2", ttl=9) / UDP(sport=1, dport=2) / payload
    out = p.process(0, bytes(sent))
    expected = Ether(bytes(sent))
    expected[IP].ttl = 8
    expected[UDP].sport = 7
    del expected[IP].chksum, expected[UDP].chksum
    assert out == [(1, bytes(expected))]


def test_hash_with_constant_algorithm_matches_definition() -> None:
    """hash() = base + h(field bytes) % max (max 0: base), per algorithm, as BMv2."""
    body = (
        "hash(hdr.s[0].v, HashAlgorithm.crc16, 32w5, {hdr.eth.src, hdr.s[1].v}, 32w1000);"
        "hash(hdr.s[2].v, HashAlgorithm.crc32, 32w0, {hdr.eth.src}, 32w0xffffffff);"
        "hash(hdr.s[3].v, HashAlgorithm.csum16, 32w9, {hdr.eth.src}, 32w0);"
    )
    src = bytes.fromhex("000000000002")
    out = run(body, data=words(0, 0x01020304, 0, 0))
    expected_0 = 5 + hash_value("crc16", src + bytes.fromhex("01020304")) % 1000
    expected_2 = hash_value("crc32", src) % 0xFFFFFFFF
    assert out == words(expected_0, 0x01020304, expected_2, 9)


# ------------------------------------------------------------------ header layout

MINI = """
#include <core.p4>
#include <v1model.p4>
%(types)s
struct headers { h_t h; }
struct metadata { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { %(extract)s transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; %(body)s }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { %(checksum)s } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def mini(types: str, extract: str, body: str = "", checksum: str = "") -> Pipeline:
    src = MINI % {"types": types, "extract": extract, "body": body, "checksum": checksum}
    return Pipeline(compile_source(src, "mini.p4"))


def test_header_not_whole_bytes_is_padded_like_p4c() -> None:
    """A 12-bit header is extracted and emitted as 2 bytes; the pad bits travel along."""
    p = mini("header h_t { bit<4> a; bit<8> b; }", "pk.extract(hdr.h);", "hdr.h.b = 8w0xee;")
    assert p.process(0, bytes.fromhex("5a7f33")) == [(1, bytes.fromhex("5eef33"))]


def test_varbit_field_in_checksum_field_list_uses_its_current_bytes() -> None:
    """update_checksum over {x, varbit} sums x and the varbit's extracted bytes."""
    p = mini(
        "header h_t { bit<8> n; bit<16> c; varbit<24> v; }",
        "pk.extract(hdr.h, (bit<32>)(pk.lookahead<bit<8>>() * 8));",
        checksum="update_checksum(hdr.h.isValid(), { hdr.h.n, hdr.h.v }, hdr.h.c,"
        " HashAlgorithm.csum16);",
    )
    frame = bytes.fromhex("03 0000 0a0b0c ff")
    expected = csum16(bytes.fromhex("03 0a0b0c"))
    assert p.process(0, frame) == [
        (1, bytes.fromhex("03") + expected.to_bytes(2, "big") + frame[3:])
    ]


# ------------------------------------------------------------------ registers

REG = "register<bit<32>>(4) r;"


def test_register_read_out_of_range_leaves_destination() -> None:
    """r.read(x, i) with i >= size leaves x unchanged (BMv2's register_read)."""
    body = "hdr.s[1].v = 9; r.read(hdr.s[1].v, hdr.s[0].v);"
    assert run(body, data=words(7, 0, 0, 0), locals_=REG) == words(7, 9, 0, 0)


def test_register_write_out_of_range_is_ignored() -> None:
    """r.write(i, v) with i >= size changes no cell."""
    p = pipeline("r.write(hdr.s[0].v, 5);", locals_=REG)
    p.process(0, ETH + words(4, 0, 0, 0))
    assert p.registers["I.r"].values == [0, 0, 0, 0]


def test_register_read_by_control_plane_out_of_range_raises() -> None:
    """Register.read (control plane) out of range is TableError OUT_OF_RANGE, not 0."""
    from softswitch.errors import TableError

    p = pipeline("r.write(0, 3);", locals_=REG)
    p.process(0, ETH + words(0, 0, 0, 0))
    assert p.registers["I.r"].read(0) == 3
    with pytest.raises(TableError) as err:
        p.registers["I.r"].read(4)
    assert err.value.code == "OUT_OF_RANGE"
