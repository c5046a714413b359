"""Whole-payload register runs (softswitch/engine/codegen_vector.py): element-wise code over
a 128-field header runs as array operations with the results of element-by-element code.

Each program has a 128-element ``int<32>`` payload header after a control header that
gives the register base, and unrolls one template per element, as netreduce.p4's
``NR_FOR_EACH_ELEM`` does. The expected bytes come from a plain Python model of the same
statements run element after element.
"""

from __future__ import annotations

import pytest

from softswitch.engine.codegen_vector import MIN_ELEMENTS
from softswitch.frontend import compile_source
from softswitch.pipeline import Pipeline

N = 128
ETH = bytes.fromhex("000000000001000000000002") + b"\x90\x00"
I32_MIN, I32_MAX = -(2**31), 2**31 - 1

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ctl_t { bit<32> base; bit<32> flag; bit<32> last; }
header vec_t { %(fields)s }
struct headers { ethernet_t eth; ctl_t ctl; vec_t v; }
struct metadata { bit<32> m; }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.ctl); pk.extract(hdr.v); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(1024) r;
    apply {
        sm.egress_spec = 1;
        bit<32> base = hdr.ctl.base;
        bit<32> old;
        int<32> sum;
        bit<32> ovf = 0;
        %(body)s
        hdr.ctl.flag = ovf;
        hdr.ctl.last = old;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.eth); pk.emit(hdr.ctl); pk.emit(hdr.v); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""

# Saturating accumulate, as netreduce.p4's NR_ACCUMULATE.
ACCUMULATE = """
    r.read(old, base + {i});
    sum = (int<32>)old |+| hdr.v.e{i};
    if (sum != (int<32>)old + hdr.v.e{i}) {{ ovf = 1; }}
    r.write(base + {i}, (bit<32>)sum);
    hdr.v.e{i} = sum;
"""

# Element i reads the cell element i+1 writes: the elements see each other, so the run
# must stay element by element (each reads the cell before its neighbour changes it).
NEIGHBOUR = """
    r.read(old, base + {j});
    r.write(base + {i}, old + 1);
    hdr.v.e{i} = (int<32>)old;
"""


def build(template: str, engine: str | None = None) -> Pipeline:
    fields = " ".join(f"int<32> e{i};" for i in range(N))
    body = "".join(template.format(i=i, j=i + 1) for i in range(N))
    program = compile_source(PROGRAM % {"fields": fields, "body": body}, "vec.p4")
    return Pipeline(program, engine=engine)


def frame(base: int, values: list[int]) -> bytes:
    ctl = base.to_bytes(4, "big") + bytes(8)
    return ETH + ctl + b"".join((v & 0xFFFFFFFF).to_bytes(4, "big") for v in values)


def parse(out: bytes) -> tuple[int, int, list[int]]:
    body = out[len(ETH):]
    flag, last = int.from_bytes(body[4:8], "big"), int.from_bytes(body[8:12], "big")
    vals = [int.from_bytes(body[12 + 4 * i: 16 + 4 * i], "big", signed=True) for i in range(N)]
    return flag, last, vals


def test_accumulate_runs_as_arrays_and_matches_elementwise_model() -> None:
    """Saturating sums, the overflow flag and the last element's locals are those of the
    element-by-element statements, over two packets into the same cells."""
    assert N >= MIN_ELEMENTS
    p = build(ACCUMULATE)
    assert "_vec_array(" in p.compiled.source  # the array path was taken
    cells = [0] * 1024
    base = 100
    packets = [
        [(i * 7919) % 2000 - 1000 for i in range(N)],
        [I32_MAX - 3 if i % 3 == 0 else (I32_MIN + 2 if i % 3 == 1 else i) for i in range(N)],
    ]
    for values in packets:
        out = p.process(0, frame(base, values))
        flag, last_old, sums = 0, 0, []
        for i, v in enumerate(values):
            old = cells[base + i]
            signed_old = old - (1 << 32) if old >> 31 else old
            s = max(I32_MIN, min(I32_MAX, signed_old + v))
            if s != ((signed_old + v + 2**31) % 2**32) - 2**31:
                flag = 1
            cells[base + i] = s & 0xFFFFFFFF
            sums.append(s)
            last_old = old
        assert parse(out[0][1]) == (flag, last_old, sums)
    assert p.registers["I.r"].values == cells


def test_elements_that_see_each_other_stay_elementwise() -> None:
    """A template whose element reads the cell the next element writes is not turned into
    arrays, and gives the sequential result."""
    p = build(NEIGHBOUR)
    assert "_vec_array(" not in p.compiled.source
    cells = list(range(1024))
    p.registers["I.r"].values = list(cells)
    base = 10
    out = p.process(0, frame(base, [0] * N))
    expected = []
    for i in range(N):
        old = cells[base + i + 1]
        cells[base + i] = (old + 1) & 0xFFFFFFFF
        expected.append(old)
    flag, last, vals = parse(out[0][1])
    assert (flag, last, vals) == (0, expected[-1], expected)


@pytest.mark.parametrize("base", [1024 - N + 1, 2000])
def test_out_of_range_base_takes_elementwise_path(base: int) -> None:
    """A base that puts some cells out of range skips the array path: in-range cells are
    summed, out-of-range reads leave the destination unchanged (BMv2's rule)."""
    p = build(ACCUMULATE)
    out = p.process(0, frame(base, [5] * N))
    _, _, vals = parse(out[0][1])
    inside = max(0, 1024 - base)
    assert vals[:inside] == [5] * inside
    assert all(v == 5 for v in vals)  # out of range: old stays 0 -> sum is the element
    assert p.registers["I.r"].values[base:] == [5] * inside


def test_register_indexes_share_one_local() -> None:
    """The element-by-element fallback of a run (and any register access with a computed
    index) evaluates its index into one shared local, not a numbered one per access: a
    numbered temporary per access gave netreduce.p4's ingress at E = 256 some 2,000 locals,
    a frame larger than CPython's 16 KiB data-stack chunk, which then cost an mmap and a
    munmap on every packet (issue 13)."""
    pipe = build(ACCUMULATE, engine="python")  # the Python engine's generated function
    names = pipe._switch.ingress.__code__.co_varnames  # noqa: SLF001
    index_temps = [n for n in names if n.startswith("_ri")]
    assert index_temps == ["_ri"]
    assert len(names) < 2 * N  # the saturation temporaries, one per element, remain
