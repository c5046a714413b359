"""Front end: accepted programs give the expected IR; rejected ones the exact error text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import compile_file, compile_source

P4 = Path(__file__).parent / "p4"
FRONTEND = P4 / "frontend"
REJECTED = P4 / "rejected"


@pytest.fixture(scope="module")
def basic() -> ir.Program:
    return compile_file(FRONTEND / "basic.p4")


@pytest.fixture(scope="module")
def features() -> ir.Program:
    return compile_file(FRONTEND / "features.p4")


def _local(ctl: ir.ControlDecl, name: str) -> Any:
    """The local of ``ctl`` named ``name``, of whatever kind (each test checks what it reads)."""
    return next(
        x
        for x in ctl.locals
        if getattr(x, "name", None) == name
        or getattr(getattr(x, "var", None), "name", None) == name
    )


def test_basic_main_blocks(basic: ir.Program) -> None:
    """main instantiates V1Switch with the six blocks in order, named by their types."""
    assert basic.main.package == "V1Switch"
    assert [i.cp_name for i in basic.main.args] == [
        "MyParser", "MyVerifyChecksum", "MyIngress", "MyEgress", "MyComputeChecksum", "MyDeparser",
    ]
    assert isinstance(basic.main.args[0].type, ir.BlockType)
    assert basic.main.args[0].type.decl is basic.parsers["MyParser"]


def test_basic_errors_and_match_kinds(basic: ir.Program) -> None:
    """core.p4 errors come first, in declaration order; v1model adds range/optional/selector."""
    assert basic.errors[:3] == ["NoError", "PacketTooShort", "NoMatch"]
    assert basic.match_kinds == ["exact", "ternary", "lpm", "range", "optional", "selector"]


def test_basic_table_shape(basic: ir.Program) -> None:
    """The LPM table has its key, actions, size and default action resolved."""
    t = _local(basic.controls["MyIngress"], "ipv4_lpm")
    assert isinstance(t, ir.TableDecl)
    assert [(k.name, k.match_kind, k.expr.type) for k in t.keys] == [
        ("hdr.ipv4.dstAddr", "lpm", ir.BitType(32))
    ]
    assert [a.action.name for a in t.actions] == ["ipv4_forward", "drop", "NoAction"]
    assert t.actions[2].action is basic.actions["NoAction"]
    assert (
        t.size == 1024 and t.default_action is not None and t.default_action.action.name == "drop"
    )


def test_basic_action_params_typedefs_resolved(basic: ir.Program) -> None:
    """typedef'd action parameters have their underlying widths and no direction."""
    a = _local(basic.controls["MyIngress"], "ipv4_forward")
    assert isinstance(a, ir.ActionDecl)
    assert [(p.name, p.type, p.direction) for p in a.cp_params] == [
        ("dstAddr", ir.BitType(48), ""), ("port", ir.BitType(9), ""),
    ]


def test_basic_literal_takes_other_operand_type(basic: ir.Program) -> None:
    """In ttl - 1 the literal is given the type bit<8>."""
    a = _local(basic.controls["MyIngress"], "ipv4_forward")
    stmt = a.body.stmts[3]
    assert isinstance(stmt, ir.Assign)
    rhs = stmt.rhs
    assert isinstance(rhs, ir.Binary) and rhs.op == "-"
    assert isinstance(rhs.right, ir.Const)
    assert rhs.right.type == ir.BitType(8) and rhs.right.value == 1


def test_basic_select_const_folded(basic: ir.Program) -> None:
    """A const in a select case is folded to its value."""
    tr = basic.parsers["MyParser"].states["parse_ethernet"].transition
    keyset = tr.cases[0].keysets[0]
    assert isinstance(keyset, ir.KeysetValue)
    assert keyset.value == 0x800 and tr.cases[0].next_state == "parse_ipv4"
    assert isinstance(tr.cases[1].keysets[0], ir.KeysetDefault)


def test_basic_checksum_call(basic: ir.Program) -> None:
    """update_checksum gets a tuple of the 11 IPv4 fields and the csum16 enum member."""
    stmt = basic.controls["MyComputeChecksum"].body.stmts[0]
    assert isinstance(stmt, ir.CallStmt)
    call = stmt.call
    assert isinstance(call, ir.Call) and call.callee.name == "update_checksum"
    assert isinstance(call.args[1], ir.ListExpr) and len(call.args[1].elems) == 11
    assert isinstance(call.args[3], ir.EnumMember) and call.args[3].member == "csum16"


def test_basic_apply_is_method_call(basic: ir.Program) -> None:
    """t.apply() is a MethodCall on an InstanceRef to the table."""
    if_stmt = basic.controls["MyIngress"].body.stmts[0]
    assert isinstance(if_stmt, ir.If) and isinstance(if_stmt.cond, ir.MethodCall)
    assert if_stmt.cond.method == "isValid"
    assert isinstance(if_stmt.then, ir.Block) and isinstance(if_stmt.then.stmts[0], ir.CallStmt)
    call = if_stmt.then.stmts[0].call
    assert isinstance(call, ir.MethodCall) and call.method == "apply"
    assert isinstance(call.type, ir.TableApplyResultType)
    assert isinstance(call.target, ir.InstanceRef)
    assert call.target.instance.name == "ipv4_lpm"


def test_features_const_entries(features: ir.Program) -> None:
    """const entries keep ranges, masks and don't-cares; a missing priority continues by one."""
    t = _local(features.controls["Ing"], "t_entries")
    e0, e1, e2 = t.entries
    assert isinstance(e0.keysets[1], ir.KeysetRange) and (
        e0.keysets[1].low,
        e0.keysets[1].high,
    ) == (1, 10)
    assert [a.value for a in e0.action.args] == [1, 2] and e0.priority == 10
    assert (
        isinstance(e1.keysets[0], ir.KeysetMask)
        and e1.keysets[0].mask == 0xFF00
        and e1.priority == 5
    )
    assert isinstance(e2.keysets[0], ir.KeysetDefault) and e2.priority == 4
    assert t.entries_const


def test_features_names(features: ir.Program) -> None:
    """@name sets cp_name for actions, keys and instances."""
    ing = features.controls["Ing"]
    assert _local(ing, "fwd").cp_name == "set_port"
    assert _local(ing, "t_exact").keys[0].name == "dst_mac"
    assert _local(ing, "prof").cp_name == ".global_profile"
    assert ir.qualify("Ing", _local(ing, "prof").cp_name) == "global_profile"


def test_features_externs(features: ir.Program) -> None:
    """Extern instances have ExternType with their type arguments and constant args."""
    ing = features.controls["Ing"]
    regs = _local(ing, "regs")
    assert regs.type == ir.ExternType("register", (ir.BitType(32),)) and regs.args[0].value == 1024
    t = _local(ing, "t_exact")
    assert t.counters is _local(ing, "dctr") and t.default_action_const
    assert _local(ing, "t_prof").implementation is _local(ing, "prof")


def test_features_lookahead_and_tuple_select(features: ir.Program) -> None:
    """lookahead<bit<8>>() types as bit<8>; tuple keysets give one keyset per expression."""
    tr = features.parsers["P"].states["start"].transition
    assert tr.select is not None and isinstance(tr.select[1], ir.MethodCall)
    assert tr.select[1].type == ir.BitType(8) and tr.select[1].method == "lookahead"
    mask = tr.cases[0].keysets[1]
    assert isinstance(mask, ir.KeysetMask) and (mask.value, mask.mask) == (0, 0xF0)
    assert len(tr.cases[3].keysets) == 2


def test_features_serializable_enum_and_error(features: ir.Program) -> None:
    """A serializable enum keeps its values; user errors follow core.p4's."""
    proto = features.types["Proto"]
    assert isinstance(proto, ir.EnumType) and proto.values == {"TCP": 6, "UDP": 17}
    assert features.errors[-1] == "BadHops" and len(features.errors) == 8


def test_features_switch_action_run(features: ir.Program) -> None:
    """A switch on action_run has ActionDecl labels; an empty case falls into the next."""
    sw = next(s for s in features.controls["Ing"].body.stmts if isinstance(s, ir.SwitchStmt))
    assert isinstance(sw.subject.type, ir.ActionRunType)
    label = sw.cases[0].labels[0]
    assert isinstance(label, ir.ActionDecl) and label.name == "fwd"
    assert [getattr(x, "name", x) for x in sw.cases[1].labels] == ["drop", "default"]


def test_literals_and_folding() -> None:
    """Width-prefixed, based and underscored literals fold to masked constants."""
    src = """#include <v1model.p4>
const bit<8> A = 8w0x1_F + 0b1;
const bit<16> B = 16w0o17 << 4;
const int<8> C = -8s1;
const bit<4> D = (bit<4>) 8w0xAB;
const bit<8> E = 8w250 |+| 8w10;
const bit<12> F = 4w0xA ++ 8w0xBC;
const bit<8> G = 1_000;
parser P(packet_in b, out bit<8> h, inout bit<8> m, inout standard_metadata_t s) {
    state start { transition accept; }
}
control C0(inout bit<8> h, inout bit<8> m) { apply { } }
control C1(inout bit<8> h, inout bit<8> m, inout standard_metadata_t s) { apply { } }
control Dp(packet_out b, in bit<8> h) { apply { } }
V1Switch(P(), C0(), C1(), C1(), C0(), Dp()) main;
"""
    p = compile_source(src, "lit.p4")
    # (v1model.p4 adds _v1model_version_known, its static_assert of V1MODEL_VERSION)
    assert {k: v.value for k, v in p.constants.items() if not k.startswith("_")} == {
        "A": 0x20, "B": 0xF0, "C": 0xFF, "D": 0xB, "E": 0xFF, "F": 0xABC, "G": 1000 & 0xFF,
    }
    assert p.constants["C"].type == ir.BitType(8, signed=True)


def test_compile_is_fast_enough() -> None:
    """A repeated compile of a 150-line program takes well under two seconds."""
    import time

    compile_file(FRONTEND / "features.p4")
    start = time.perf_counter()
    compile_file(FRONTEND / "features.p4")
    assert time.perf_counter() - start < 2.0


REJECTED_CASES = {
    "assign_constant": "13:9: error: expression is not assignable",
    "assign_in_param": "11:29: error: cannot assign to in parameter 'x'",
    "bool_condition": "12:13: error: if condition must be a bool, not bit<8>",
    "default_action_not_listed": "15:26: error: default action 'drop' is not in the actions list "
                                 "of table 't'",
    "duplicate_declaration": "7:8: error: duplicate declaration of 'meta_t'",
    "missing_start_state": "7:8: error: parser 'P' has no 'start' state",
    "out_arg_not_lvalue": "13:16: error: method 'read': the argument for out parameter 'result' "
                          "must be assignable",
    "select_width_mismatch": "11:13: error: select key set: value of type bit<8> does not match "
                             "the key type bit<16>",
    "syntax_missing_semicolon": "13:9: error: syntax error: unexpected 'meta', expected ';'",
    "undefined_name": "12:18: error: no declaration named 'nosuch'",
    "unexpected_char": "12:20: error: syntax error: unexpected character '$'",
    "unknown_field": "12:18: error: header 'h_t' has no field 'c'",
    "unknown_match_kind": "12:26: error: unknown match kind 'fuzzy'",
    "unknown_state": "8:30: error: no state named 'parse_h'",
    "unknown_table_property": "14:9: error: unknown table property 'timeout'",
    "value_set": "8:5: error: value_set is not supported by the built-in target",
    "width_mismatch": "12:18: error: operands of '+' have different types: bit<8> and bit<16>",
    "wrong_arg_count": "12:9: error: function 'mark_to_drop': expected 0 or 1 arguments, got 2",
}


@pytest.mark.parametrize("name", sorted(REJECTED_CASES))
def test_rejected(name: str) -> None:
    """Each rejected program fails with the exact FILE:LINE:COL: error: text."""
    path = REJECTED / f"{name}.p4"
    with pytest.raises(P4Error) as info:
        compile_file(path)
    assert str(info.value) == f"{path}:{REJECTED_CASES[name]}"


def test_rejected_dir_fully_covered() -> None:
    """Every program under tests/p4/rejected has an expected message."""
    assert {p.stem for p in REJECTED.glob("*.p4")} == set(REJECTED_CASES)


def test_error_in_included_file_points_there(tmp_path: Path) -> None:
    """An error inside an included file is reported at that file's line."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "bad.p4").write_text("// line 1\nconst bit<8> X = nosuch;\n")
    main = tmp_path / "main.p4"
    main.write_text('#include <core.p4>\n#include "bad.p4"\n')
    with pytest.raises(P4Error) as info:
        compile_file(main, [inc])
    assert str(info.value) == f"{inc / 'bad.p4'}:2:18: error: no declaration named 'nosuch'"


def test_missing_main() -> None:
    """A program without main is rejected."""
    with pytest.raises(P4Error, match="no 'main' package instance"):
        compile_source("#include <core.p4>\n", "m.p4")


@pytest.mark.parametrize(
    ("snippet", "col"),
    [
        ("const bit<12301923123132> big = 0;", 7),
        ("const int<4096> big = 0;", 7),
        ("const bit<8> big = 99999999w1;", 20),
        ("const int big = 1985245330 << 903012108;", 17),
        ("const bit<2000> a = 0; const bit<100> b = 0; const bool big = (a ++ b) == 0;", 64),
    ],
)
def test_absurd_widths_are_refused_with_a_location(snippet: str, col: int) -> None:
    """Widths beyond 2048 bits are refused before anything that large is built (p4c width_e,
    issue2496)."""
    with pytest.raises(P4Error, match=rf"^x\.p4:1:{col}: error: .*at most 2048 bits are supported"):
        compile_source(snippet, "x.p4")


def test_wide_constant_shift_of_a_fixed_width_value_folds_to_zero() -> None:
    """`8w1 << 903012108` is 0 (every bit shifted out), computed without a huge intermediate."""
    from softswitch.frontend.folding import fold_binary

    one = ir.Const(ir.BitType(8), ir.NOLOC, 1)
    far = ir.Const(ir.IntLitType(), ir.NOLOC, 903012108)
    z = fold_binary("<<", one, far, ir.NOLOC)
    assert isinstance(z, ir.Const) and z.value == 0


def test_missing_include_has_a_location(tmp_path: Path) -> None:
    """A missing #include file is reported at the directive, also inside an included file."""
    (tmp_path / "sub.p4").write_text('const bit<8> X = 1;\n   #include "gone.p4"\n')
    main = tmp_path / "main.p4"
    main.write_text('#include <core.p4>\n#include "sub.p4"\n')
    with pytest.raises(P4Error, match=r"sub\.p4:2:13: error: cannot find include file 'gone\.p4'"):
        compile_file(main)
    main.write_text('#include <core.p4>\n\n  #include "nope.p4"\n')
    with pytest.raises(P4Error, match=r"main\.p4:3:12: error: cannot find include file 'nope\.p4'"):
        compile_file(main)


def test_a_compile_leaves_the_cyclic_collector_as_it_found_it(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector is paused during a compile (a speed-up, docs/benchmarks.md) and on again
    afterwards, also after a program with an error; a caller that had it off keeps it off."""
    import gc

    import softswitch.frontend as frontend

    during = []
    build = frontend.build_syntax

    def watched(*args: Any) -> Any:
        during.append(gc.isenabled())
        return build(*args)

    monkeypatch.setattr(frontend, "build_syntax", watched)
    program = FRONTEND / "basic.p4"
    assert gc.isenabled()
    compile_file(program)
    assert during == [False] and gc.isenabled()
    with pytest.raises(P4Error):
        compile_source("control C() { apply { x = ; } }")
    assert gc.isenabled()
    gc.disable()
    try:
        compile_file(program)
        assert not gc.isenabled()
    finally:
        gc.enable()
