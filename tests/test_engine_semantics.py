"""Expression and statement semantics of the code generator, checked on the wire.

Each test compiles a small v1model program whose ingress writes results into a 16-byte
``out_t`` header after Ethernet, sends one frame through ``Pipeline.process`` and compares
the output bytes exactly.
"""

from __future__ import annotations

from softswitch.frontend import compile_source
from softswitch.pipeline import Pipeline

ETH = bytes.fromhex("000000000001000000000002") + b"\x90\x00"

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header out_t { bit<32> a; bit<32> b; bit<32> c; bit<32> d; }
header opt_t { bit<8> x; }
header_union u_t { opt_t o1; out_t o2; }
struct headers { ethernet_t eth; out_t res; opt_t opt; }
struct metadata { bit<32> m; }
%(decls)s
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.res); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    %(locals)s
    apply { sm.egress_spec = 1; %(body)s }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.eth); pk.emit(hdr.res); pk.emit(hdr.opt); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def run(body: str, locals_: str = "", decls: str = "", data: bytes = bytes(16)) -> bytes:
    """Output bytes after Ethernet for one frame through a program built around ``body``."""
    src = TEMPLATE % {"body": body, "locals": locals_, "decls": decls}
    pipeline = Pipeline(compile_source(src, "t.p4"))
    out = pipeline.process(0, ETH + data)
    assert len(out) == 1 and out[0][0] == 1
    return out[0][1][len(ETH) :]


def words(*vals: int) -> bytes:
    return b"".join(v.to_bytes(4, "big") for v in vals)


def test_unsigned_arithmetic_wraps() -> None:
    """+, -, * wrap modulo 2^32; / and % are unsigned."""
    out = run(
        "hdr.res.a = 32w0xFFFFFFFF + 32w2; hdr.res.b = 32w1 - 32w3;"
        "hdr.res.c = 32w0x10000 * 32w0x10001; hdr.res.d = 32w17 / 32w5 + 32w17 % 32w5;"
    )
    assert out == words(1, 0xFFFFFFFE, 0x10000, 3 + 2)


def test_signed_compare_shift_and_saturation() -> None:
    """int<8> compares as signed, >> is arithmetic, |+| and |-| saturate."""
    out = run("""
        int<8> x = -3; int<8> y = 2;
        hdr.res.a = (x < y) ? 32w1 : 32w0;
        hdr.res.b = (bit<32>)(bit<8>)(x >> 1);
        hdr.res.c = (bit<32>)(bit<8>)(8s100 |+| 8s100);
        hdr.res.d = (bit<32>)(8w10 |-| 8w20) + (bit<32>)(bit<8>)(-8s100 |-| 8s100);
    """)
    assert out == words(1, 0xFE, 0x7F, 0x80)


def test_slices_concat_and_casts() -> None:
    """Slice read/write, ++, widening of int<W> sign-extends, narrowing truncates."""
    out = run("""
        hdr.res.a = 0;
        hdr.res.a[15:8] = 8w0xAB;
        hdr.res.b = (bit<32>)(hdr.res.a[15:12] ++ 4w0xC);
        int<8> n = -2;
        hdr.res.c = (bit<32>)(int<32>)n;
        hdr.res.d = (bit<4>)32w0x1234 ++ 28w0;
    """)
    assert out == words(0xAB00, 0xAC, 0xFFFFFFFE, 0x40000000)


def test_shift_by_large_amount_is_zero() -> None:
    """A run-time shift amount >= width gives 0 without building huge ints."""
    out = run(
        "hdr.res.a = 32w1 << hdr.res.b; hdr.res.c = 32w0x80000000 >> hdr.res.b;",
        data=words(0, 1000, 0, 0),
    )
    assert out == words(0, 1000, 0, 0)


def test_function_with_out_parameter_and_return() -> None:
    """Functions return values and copy out their out parameters."""
    decls = """
    bit<32> addmul(in bit<32> x, in bit<32> y, out bit<32> prod) {
        prod = x * y;
        return x + y;
    }"""
    out = run(
        "hdr.res.a = addmul(hdr.res.a, hdr.res.b, hdr.res.c);", decls=decls, data=words(6, 7, 0, 0)
    )
    assert out == words(13, 7, 42, 0)


def test_action_inout_copy_out_happens_on_exit() -> None:
    """An inout argument is written back when exit unwinds through the action."""
    locals_ = """
    action bump_and_exit(inout bit<32> v) { v = v + 1; exit; }
    """
    out = run("bump_and_exit(hdr.res.a); hdr.res.b = 99;", locals_=locals_, data=words(5, 0, 0, 0))
    assert out == words(6, 0, 0, 0)


def test_return_in_action_skips_rest() -> None:
    """return ends only the action; the control continues."""
    locals_ = """
    action first(bit<32> v) { hdr.res.a = v; if (v == 7) { return; } hdr.res.b = v; }
    """
    out = run("first(7); hdr.res.c = 3;", locals_=locals_)
    assert out == words(7, 0, 3, 0)


def test_switch_on_action_run_and_const_entries() -> None:
    """switch (t.apply().action_run) picks the case of the action that ran."""
    locals_ = """
    action a1() { hdr.res.a = 1; }
    action a2() { hdr.res.a = 2; }
    table t {
        key = { hdr.res.d: exact; }
        actions = { a1; a2; }
        default_action = a1();
        const entries = { 5: a2(); }
    }
    """
    body = "switch (t.apply().action_run) { a1: { hdr.res.b = 10; } a2: { hdr.res.b = 20; } }"
    assert run(body, locals_=locals_, data=words(0, 0, 0, 5)) == words(2, 20, 0, 5)
    assert run(body, locals_=locals_, data=words(0, 0, 0, 6)) == words(1, 10, 0, 6)


def test_ternary_const_entries_first_wins() -> None:
    """Const ternary entries without priorities match in textual order."""
    locals_ = """
    action set(bit<32> v) { hdr.res.a = v; }
    table t {
        key = { hdr.res.d: ternary; }
        actions = { set; NoAction; }
        const entries = {
            32w0x10 &&& 32w0xF0: set(1);
            32w0x12 &&& 32w0xFF: set(2);
            _: set(3);
        }
    }
    """
    assert run("t.apply();", locals_=locals_, data=words(0, 0, 0, 0x12)) == words(1, 0, 0, 0x12)
    assert run("t.apply();", locals_=locals_, data=words(0, 0, 0, 0x22)) == words(3, 0, 0, 0x22)


def test_set_valid_zeroes_and_emits_new_header() -> None:
    """setValid on an invalid header zeroes it; the deparser then emits it."""
    out = run("hdr.opt.setValid(); hdr.opt.x = hdr.opt.x + 1;")
    assert out == bytes(16) + b"\x01"


def test_set_invalid_removes_header() -> None:
    """setInvalid drops the header from the output."""
    out = run("hdr.res.setInvalid();")
    assert out == b""  # its bytes were consumed by the parser, so nothing of it remains


def test_header_union_one_member_valid() -> None:
    """Making one union member valid invalidates the other."""
    locals_ = "u_t u;"
    out = run(
        """
        u.o2.setValid(); u.o1.setValid();
        hdr.res.a = u.o2.isValid() ? 32w1 : 32w0;
        hdr.res.b = u.o1.isValid() ? 32w1 : 32w0;
        hdr.res.c = u.isValid() ? 32w1 : 32w0;
    """,
        locals_=locals_,
    )
    assert out == words(0, 1, 1, 0)


def test_struct_and_header_assignment_copies_value() -> None:
    """Assigning a header copies its value; later writes do not alias."""
    locals_ = "out_t tmp;"
    out = run(
        "tmp = hdr.res; tmp.a = 9; hdr.res.b = tmp.a; hdr.res.c = tmp.d;",
        locals_=locals_,
        data=words(1, 2, 3, 4),
    )
    assert out == words(1, 9, 4, 4)


def test_sub_control_exit_ends_ingress() -> None:
    """exit inside a sub-control ends the whole ingress control."""
    decls = """
    control Sub(inout out_t o) { apply { o.a = 1; exit; } }
    """
    out = run("sub.apply(hdr.res); hdr.res.b = 2;", locals_="Sub() sub;", decls=decls)
    assert out == words(1, 0, 0, 0)


def test_register_read_write_and_digest() -> None:
    """Registers persist across packets; digest values are queued for the control plane."""
    src = TEMPLATE % {
        "decls": "struct dig_t { bit<32> a; bit<48> src; }",
        "locals": "register<bit<32>>(4) r;",
        "body": "bit<32> v; r.read(v, 1); v = v + hdr.res.a; r.write(1, v); hdr.res.b = v;"
        " digest<dig_t>(1, {v, hdr.eth.src});",
    }
    p = Pipeline(compile_source(src, "t.p4"))
    p.process(0, ETH + words(5, 0, 0, 0))
    out = p.process(0, ETH + words(6, 0, 0, 0))
    assert out[0][1][len(ETH) :] == words(6, 11, 0, 0)
    assert p.registers["I.r"].values[1] == 11
    assert p.drain_digests() == [("dig_t", (5, 2)), ("dig_t", (11, 2))]
    assert p.drain_digests() == []


def test_direct_counter_count_and_direct_meter_read_in_an_action() -> None:
    """``dc.count()`` and ``dm.read(x)`` inside a table's action compile (they once failed
    with "instance dc is not a value"); the counter counts each hit once."""
    from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry

    src = TEMPLATE % {
        "decls": "",
        "locals": "direct_counter(CounterType.packets) dc;"
        " direct_meter<bit<32>>(MeterType.bytes) dm;"
        " action hit() { dc.count(); dm.read(hdr.res.c); hdr.res.b = 7; }"
        " table t { key = { hdr.res.a: exact; } actions = { hit; NoAction; }"
        " counters = dc; meters = dm; }",
        "body": "t.apply();",
    }
    p = Pipeline(compile_source(src, "t.p4"))
    p.tables["I.t"].insert(TableEntry((FieldMatch(5),), ActionCall("I.hit", ())))
    out = p.process(0, ETH + words(5, 0, 9, 0))
    assert out[0][1][len(ETH) :] == words(5, 7, 0, 0)
    assert [e.packets for e in p.tables["I.t"].entries()] == [1]
