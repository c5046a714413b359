"""Semantics kept by the code generator's fast paths: one bounds check for a run of
register accesses at ``base + constant`` (with the per-access rules when the run does not
fit), and the ``struct`` (un)packing of headers made of whole 8/16/32/64-bit words."""

from __future__ import annotations

from softswitch.frontend import compile_source
from softswitch.pipeline import Pipeline

ETH = bytes.fromhex("000000000001000000000002") + b"\x90\x00"

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header words_t { bit<32> a; bit<32> b; bit<16> c; bit<8> d; bit<8> e; bit<64> f; }
struct headers { ethernet_t eth; words_t w; }
struct metadata { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.w); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(12) r;
    apply {
        sm.egress_spec = 1;
        bit<8> base = (bit<8>)hdr.w.c;
        bit<32> x = 0xEEEEEEEE;
        r.write((bit<32>)base + 0, 1); r.write((bit<32>)base + 1, 2);
        r.write((bit<32>)base + 2, 3); r.write((bit<32>)base + 3, 4);
        bit<32> i = (bit<32>)base;
        r.write(i + 4, hdr.w.a); r.write(i + 5, hdr.w.b); r.write(i + 6, 7);
        r.read(x, i + 0); hdr.w.a = x;
        r.read(x, i + 1); hdr.w.b = x;
        r.read(x, i + 4); hdr.w.f = (bit<64>)x;
        r.read(x, i + 5); hdr.w.f = hdr.w.f + (bit<64>)x;
        r.read(x, i + 9); hdr.w.d = (bit<8>)x;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.w); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _words(a: int, b: int, c: int, d: int, e: int, f: int) -> bytes:
    return (
        a.to_bytes(4, "big") + b.to_bytes(4, "big") + c.to_bytes(2, "big")
        + bytes([d, e]) + f.to_bytes(8, "big")
    )


def _run(payload: bytes) -> bytes:
    pipeline = Pipeline(compile_source(PROGRAM, "t.p4"))
    assert "_rv" in pipeline.source and "unpack_from" in pipeline.source
    out = pipeline.process(0, ETH + payload)
    assert len(out) == 1
    return out[0][1][len(ETH):]


def test_register_run_in_range_uses_every_index() -> None:
    """All indexes of the run in range: reads see the run's own writes."""
    out = _run(_words(0x11, 0x22, 2, 0xD0, 0xE0, 0))
    assert out == _words(1, 2, 2, 0, 0xE0, 0x33)


def test_register_run_partly_out_of_range_keeps_per_access_rules() -> None:
    """Base 7 of a 12-entry register: writes past the end do nothing, reads past it
    leave the destination unchanged, the others still happen."""
    out = _run(_words(0x11, 0x22, 7, 0xD0, 0xE0, 0))
    # writes at 7..11 land (values 1,2,3,4 and a=0x11 at 11); b at 12 is dropped;
    # reads at 7, 8, 11 succeed, 12 and 16 keep x (0x11 from index 11)
    assert out == _words(1, 2, 7, 0x11, 0xE0, 0x11 + 0x11)
