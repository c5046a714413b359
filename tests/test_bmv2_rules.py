"""The built-in target refuses the control flow p4c's BMv2 back end refuses, with its reason.

Each case is a v1model ingress body; where p4c is installed the same sources go through
``p4c --target bmv2`` and both verdicts (and the reason) must agree.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from softswitch.errors import P4Error
from softswitch.frontend import compile_source

TEMPLATE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers { h_t h; }
struct meta_t { bit<8> m; }
parser P(packet_in pk, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control Sub(inout headers hdr, inout standard_metadata_t sm) {
    action set(bit<9> p) { sm.egress_spec = p; }
    table s { key = { hdr.h.b: exact; } actions = { set; NoAction; } }
    apply { s.apply(); }
}
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set(bit<9> p) { sm.egress_spec = p; }
    action other() { hdr.h.b = 1; }
    table t { key = { hdr.h.a: exact; } actions = { set; other; NoAction; } }
    table u { key = { hdr.h.b: exact; } actions = { set; NoAction; } }
    Sub() sub1;
    Sub() sub2;
    apply {
%s
    }
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
TABLE_LINE = TEMPLATE.splitlines().index("    table t { key = { hdr.h.a: exact; } actions = { "
                                         "set; other; NoAction; } }") + 1
SUCCESSORS = "Program is not supported by this target, because table I.t has multiple successors"
SELF_PATH = ("Program can not be implemented on this target since it contains a path from table "
             "I.t back to itself")

CASES: dict[str, tuple[str, str | None]] = {
    # the table is applied in two branches that continue differently
    "two_branches_differ": (
        "if (hdr.h.a == 0) { t.apply(); hdr.h.b = 1; } else { t.apply(); hdr.h.b = 2; }",
        SUCCESSORS,
    ),
    # counters_registers.p4 before its fix: hit/miss successors in one place, plain in the other
    "hit_and_plain": (
        "if (hdr.h.isValid()) { if (t.apply().hit) { hdr.h.b = 1; } else { hdr.h.b = 2; } }"
        " else { t.apply(); }",
        SUCCESSORS,
    ),
    "applied_twice_in_sequence": ("t.apply(); t.apply();", SELF_PATH),
    "applied_after_itself_via_switch": (
        "switch (t.apply().action_run) { set: { u.apply(); } }\n"
        "        if (hdr.h.a == 1) { t.apply(); }",
        SELF_PATH,
    ),
    # accepted: both places continue with the same node
    "two_branches_same_continuation": (
        "if (hdr.h.a == 0) { t.apply(); } else { t.apply(); }\n        hdr.h.b = 3;",
        None,
    ),
    "both_branches_end": ("if (hdr.h.a == 0) { t.apply(); } else { hdr.h.b = 1; t.apply(); }",
                          None),
    "applied_once_hit_miss": (
        "if (t.apply().hit) { hdr.h.b = 1; } else { u.apply(); }",
        None,
    ),
    "switch_action_run": (
        "switch (t.apply().action_run) { set: { u.apply(); } other: { hdr.h.b = 2; } }",
        None,
    ),
    "two_instances_of_a_sub_control": ("sub1.apply(hdr, sm); sub2.apply(hdr, sm);", None),
}


def source(body: str) -> str:
    return TEMPLATE % f"        {body}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_builtin_verdict(name: str) -> None:
    body, reason = CASES[name]
    if reason is None:
        compile_source(source(body), "c.p4")
        return
    with pytest.raises(P4Error) as info:
        compile_source(source(body), "c.p4")
    assert str(info.value).startswith(f"c.p4:{TABLE_LINE}:5: error: {reason}")


def test_counters_registers_as_it_was_is_refused() -> None:
    """The issue's case: the fwd table applied under a hit test and on its own."""
    text = (Path(__file__).parent / "p4" / "counters_registers.p4").read_text()
    start = text.index("        if (fwd.apply().hit) {")
    end = text.index("\n    }\n}", start)
    old = text[:start] + (
        "        if (hdr.stats.isValid()) {\n"
        "            if (fwd.apply().hit) { hdr.stats.flags = 1; } else { hdr.stats.flags = 2; }\n"
        "        } else {\n            fwd.apply();\n        }"
    ) + text[end:]
    with pytest.raises(P4Error, match="table MyIngress.fwd has multiple successors"):
        compile_source(old, "counters_registers.p4")


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not installed on this machine")
@pytest.mark.parametrize("name", sorted(CASES))
def test_p4c_gives_the_same_verdict(name: str, tmp_path: Path) -> None:
    body, reason = CASES[name]
    prog = tmp_path / "c.p4"
    prog.write_text(source(body))
    proc = subprocess.run(
        ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), str(prog)],
        capture_output=True, text=True, timeout=300,
    )
    if reason is None:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0
        assert reason in proc.stderr, proc.stderr
