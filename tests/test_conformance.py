"""Conformance with p4c on constructs found in its public test programs (our own reproductions).

Each program under tests/p4/conformance/ reproduces one construct that p4c accepts and that
the built-in target once rejected or got wrong; the STF snippets state BMv2's behaviour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch import ir
from softswitch.conformance import (
    Result,
    classify,
    expected_rejections,
    find_programs,
    format_table,
    run_program,
    run_program_in_process,
)
from softswitch.errors import P4Error, UnsupportedError
from softswitch.frontend import compile_file, compile_source
from softswitch.p4info import build_p4info
from softswitch.pipeline import Pipeline
from softswitch.stf import run_stf

CONF = Path(__file__).parent / "p4" / "conformance"


def _stf(program: str, text: str) -> None:
    """Run an STF snippet against a conformance program and require it to pass."""
    result = run_stf(Pipeline.from_file(str(CONF / program)), text, program)
    assert result.passed, result.first_mismatch


def _table(prog: ir.Program, control: str, name: str) -> ir.TableDecl:
    return next(
        t for t in prog.controls[control].locals if isinstance(t, ir.TableDecl) and t.name == name
    )


# ----------------------------------------------------------------------- front end


def test_core_and_v1model_macros() -> None:
    """_CORE_P4_ and _V1_MODEL_P4_ are defined, so code guarded by them compiles and runs."""
    _stf("core_macro.p4", "packet 0 2A 00\nexpect 1 2A 2A $\n")


def test_package_type_arguments() -> None:
    """V1Switch<Headers, Meta>(...) main; binds the package's type parameters explicitly."""
    prog = compile_file(CONF / "package_type_args.p4")
    assert prog.main.package == "V1Switch" and len(prog.main.args) == 6


def test_table_with_empty_parentheses_and_in_header() -> None:
    """`table t() {..}` parses and an `in` header parameter is accepted where the block type says
    inout."""
    _stf("package_type_args.p4", "packet 0 07 00\nexpect 2 07 07 $\n")


def test_package_wrong_type_argument_count() -> None:
    """A package given the wrong number of type arguments is a clean error."""
    text = (
        (CONF / "package_type_args.p4")
        .read_text()
        .replace("V1Switch<Headers, Meta>", "V1Switch<Headers>")
    )
    with pytest.raises(P4Error, match="package 'V1Switch' expects 2 type arguments, got 1"):
        compile_source(text, str(CONF / "x.p4"))


def test_legacy_priority_annotation_ir() -> None:
    """@priority(N) is a BMv2 priority (smaller wins); unannotated entries take their position."""
    t = _table(compile_file(CONF / "legacy_priority.p4"), "ingress", "t")
    assert t.entries is not None
    # BMv2 priorities 3, 2 (position), 1 -> P4Runtime style (larger wins): 1, 2, 3
    assert [e.priority for e in t.entries] == [1, 2, 3]


def test_legacy_priority_annotation_behaviour() -> None:
    """The entry annotated @priority(1) beats the overlapping @priority(3) and positional ones."""
    _stf(
        "legacy_priority.p4",
        "packet 0 0001 00\nexpect 1 0001 01 $\n"
        "packet 0 1001 00\nexpect 1 1001 03 $\n"
        "packet 0 1011 00\nexpect 1 1011 03 $\n",
    )


def test_entry_priority_continues_by_delta() -> None:
    """An entry without `priority =` gets the previous priority minus priority_delta."""
    t = _table(compile_file(CONF / "entry_priorities.p4"), "ingress", "t")
    assert t.entries is not None and [e.priority for e in t.entries] == [100, 90, 95]


def test_entry_priority_behaviour() -> None:
    """Priority 95 beats the derived 90 for a key both entries match."""
    _stf("entry_priorities.p4",
         "packet 0 1001 00\nexpect 1 1001 01 $\npacket 0 1000 00\nexpect 1 1000 03 $\n")


def test_entry_priority_first_entry_required() -> None:
    """As in p4c, the first entry must carry a priority once any entry does."""
    text = (CONF / "entry_priorities.p4").read_text().replace("priority = 100: ", "")
    with pytest.raises(P4Error, match="the first entry of table 't' must have a priority"):
        compile_source(text, str(CONF / "x.p4"))


def test_v1model_20200408_index_types() -> None:
    """register<T, I>, counter<I> and meter<I> exist when V1MODEL_VERSION >= 20200408."""
    prog = compile_file(CONF / "v1model_20200408.p4")
    insts = {i.name: i.type for i in prog.controls["ingress"].locals if isinstance(i, ir.Instance)}
    assert insts["r"] == ir.ExternType("register", (ir.BitType(16), ir.BitType(3)))
    assert insts["c"] == ir.ExternType("counter", (ir.BitType(3),))
    assert insts["m"] == ir.ExternType("meter", (ir.BitType(3),))


def test_v1model_20200408_register_runs() -> None:
    """A register indexed by bit<3> accumulates across packets."""
    _stf(
        "v1model_20200408.p4",
        "packet 0 05 0003\nexpect 1 05 0003 $\npacket 0 05 0004\nexpect 1 05 0007 $\n",
    )


def test_v1model_default_version_keeps_old_externs() -> None:
    """Without a version define, register<T> keeps its single type parameter."""
    text = (
        (CONF / "v1model_20200408.p4").read_text().replace("#define V1MODEL_VERSION 20200408\n", "")
    )
    with pytest.raises(P4Error, match="extern 'register' expects 1 type arguments, got 2"):
        compile_source(text, str(CONF / "x.p4"))


def test_static_assert_true() -> None:
    """A true static_assert compiles to nothing, as a statement and in a constant."""
    checked = compile_file(CONF / "static_assert.p4").constants["checked"]
    assert isinstance(checked, ir.BoolConst) and checked.value is True
    _stf("static_assert.p4", "packet 0 00\nexpect 1 08 $\n")


def test_static_assert_false() -> None:
    """A false static_assert rejects the program with its message at the call."""
    with pytest.raises(P4Error) as err:
        compile_file(CONF / "static_assert_false.p4")
    assert str(err.value).endswith("static_assert_false.p4:16:9: error: LIMIT is too small")


def _stf_file(program: str, trace: bool = False) -> None:
    """Run the STF file beside a conformance program (optionally with tracing on)."""
    pipe = Pipeline(compile_file(CONF / program), trace=(lambda _t: None) if trace else False)
    stf = CONF / program.replace(".p4", ".stf")
    result = run_stf(pipe, stf.read_text(), stf.name)
    assert result.passed, result.first_mismatch


def test_for_loops_run() -> None:
    """`for` loops (C-style with break/continue, ranges, lists, stacks, return/exit inside) run
    as BMv2 runs them."""
    _stf_file("for_loop.p4")


def test_for_loops_run_traced() -> None:
    """The instrumented (tracing) copy of the generated code runs the loops the same way."""
    _stf_file("for_loop.p4", trace=True)


def test_for_loop_ir_nodes() -> None:
    """The front end lowers loops to ir.For / ir.ForIn with Break and Continue inside."""
    prog = compile_file(CONF / "for_loop.p4")
    ingress = prog.controls["ingress"]
    sum_even = next(
        a for a in ingress.locals if isinstance(a, ir.ActionDecl) and a.name == "sum_even"
    )
    loop = sum_even.body.stmts[1]
    assert isinstance(loop, ir.For) and len(loop.init) == 1 and len(loop.updates) == 1
    kinds = {type(n).__name__ for n in _stmts(loop.body)}
    assert {"Break", "Continue"} <= kinds
    find = next(a for a in ingress.locals if isinstance(a, ir.ActionDecl) and a.name == "find")
    rng = find.body.stmts[0]
    assert isinstance(rng, ir.ForIn) and rng.collection is None and isinstance(rng.high, ir.VarRef)


def _stmts(s: ir.Stmt) -> list[ir.Stmt]:
    out = [s]
    if isinstance(s, ir.Block):
        for x in s.stmts:
            out += _stmts(x)
    elif isinstance(s, ir.If):
        out += _stmts(s.then) + (_stmts(s.else_) if s.else_ is not None else [])
    return out


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("break;", "", None),  # sanity: still compiles without the break
        ("hdr.h.a = 0;\n        for", "hdr.h.a = 0;\n        break;\n        for",
         "'break' outside a loop"),
        ("for (bit<8> x in {hdr.h.n, 8w2, 8w3})", "for (bit<8> x in hdr.h)",
         "cannot iterate over an expression of type hdr_t"),
        ("for (item_t e in hdr.it)", "for (hdr_t e in hdr.it)",
         "loop variable of type hdr_t cannot iterate over item_t\\[3\\]"),
        ("for (int<8> i in -3 .. 2)", "for (bool i in true .. false)",
         "a range loop variable must be bit<W> or int<W>"),
        ("pkt.extract(hdr.h);",
         "pkt.extract(hdr.h);\n        for (bit<8> i = 0; i < 2; i = i + 1) { }",
         "'for' statements are not allowed in a parser"),
    ],
)
def test_for_loop_checks(old: str, new: str, message: str | None) -> None:
    """Misplaced break/continue, bad collections and loops in parsers are clean compile errors."""
    text = (CONF / "for_loop.p4").read_text()
    assert old in text
    text = text.replace(old, new, 1)
    if message is None:
        compile_source(text, str(CONF / "x.p4"))
        return
    with pytest.raises(P4Error, match=message):
        compile_source(text, str(CONF / "x.p4"))


def test_direct_apply_creates_instance() -> None:
    """C.apply() applies a fresh instance named C_inst whose control-plane name is C."""
    prog = compile_file(CONF / "direct_apply.p4")
    insts = [i for i in prog.controls["ingress"].locals if isinstance(i, ir.Instance)]
    assert [(i.name, i.cp_name) for i in insts] == [("inc_inst", "inc")]


def test_direct_apply_runs() -> None:
    """The directly applied control's table runs its default action."""
    _stf("direct_apply.p4", "packet 0 0800\nexpect 1 0801 $\n")


def test_block_constructor_arguments_run() -> None:
    """Controls/parsers passed as constructor arguments are applied per instance (p4c issue1566)."""
    _stf_file("block_ctor_arg.p4")


def test_block_constructor_argument_shares_instance() -> None:
    """Both users of the passed instance count into its one counter, named where it is declared."""
    pipe = Pipeline.from_file(str(CONF / "block_ctor_arg.p4"))
    pipe.process(0, bytes.fromhex("00017F"))
    assert list(pipe.counters) == ["ingress.inc.hits"]
    assert pipe.counters["ingress.inc.hits"].packets[0] == 4
    info = build_p4info(compile_file(CONF / "block_ctor_arg.p4"))
    assert [c.preamble.name for c in info.counters] == ["ingress.inc.hits"]


def test_block_constructor_argument_must_match_prototype() -> None:
    """A control whose apply parameters differ from the constructor parameter's type is rejected."""
    text = (CONF / "block_ctor_arg.p4").read_text().replace(
        "control Inc(inout bit<16> x) {", "control Inc(inout bit<8> x) {"
    ).replace("x = x + 1;", "x = x + 8w1;")
    with pytest.raises(P4Error,
                       match="argument of type Inc does not match parameter 's' of type step_t"):
        compile_source(text, str(CONF / "x.p4"))


def test_block_constructed_in_argument_list_unsupported() -> None:
    """`Twice(Inc()) tw;` (an anonymous instance as argument) is a clean 'not supported'."""
    text = (CONF / "block_ctor_arg.p4").read_text().replace("Twice(inc) tw;", "Twice(Inc()) tw;")
    with pytest.raises(UnsupportedError, match="constructed inside a constructor argument list"):
        compile_source(text, str(CONF / "x.p4"))


def test_compound_assignments_run() -> None:
    """`+=`, `|-|=`, `<<=`, `>>=` (logical and arithmetic), `^=` compute `a = a op b`."""
    _stf("compound_assign.p4", "packet 0 10 03 81 81 0F 80\nexpect 1 13 00 04 40 F0 C0 $\n")


def test_compound_assignment_checks_operands() -> None:
    """A compound shift by a bool is rejected like the plain shift (p4c compound-shift-err)."""
    text = (CONF / "compound_assign.p4").read_text().replace("hdr.h.c <<= 2;", "hdr.h.c <<= true;")
    with pytest.raises(P4Error, match="the shift amount of '<<' must be an unsigned number"):
        compile_source(text, str(CONF / "x.p4"))


def test_division_by_constant_zero_rejected() -> None:
    """`x / 0` and `x % 8w0` on a run-time value are compile errors, as in p4c (div0)."""
    for expr in ("hdr.h.a / 0", "hdr.h.a % 8w0"):
        text = (
            (CONF / "compound_assign.p4").read_text().replace("hdr.h.a += 3;", f"hdr.h.a = {expr};")
        )
        with pytest.raises(P4Error, match="division by zero"):
            compile_source(text, str(CONF / "x.p4"))


def test_default_action_repeats_bound_argument() -> None:
    """A default_action repeating the actions-list binding compiles and runs."""
    _stf("action_bind.p4", "packet 0 01 02\nexpect 1 01 07 $\n")


def test_default_action_with_other_bound_argument_rejected() -> None:
    """A default_action binding another directional argument is rejected (p4c action-bind)."""
    text = (CONF / "action_bind.p4").read_text()
    text = text.replace("default_action = set(hdr.h.b, 7);", "default_action = set(hdr.h.a, 7);")
    with pytest.raises(P4Error,
                       match="argument of 'target' differs from the one bound in the actions list"):
        compile_source(text, str(CONF / "x.p4"))


def test_struct_in_header_runs() -> None:
    """A struct of bit-vectors in a header: extract, member access, table key, checksum, emit
    (p4c bvec_union-bmv2)."""
    _stf_file("struct_in_header.p4")


def test_struct_in_header_width() -> None:
    """The header's width counts the struct's fields (minSizeInBits as p4c)."""
    prog = compile_file(CONF / "struct_in_header.p4")
    h = prog.types["hdr_t"]
    assert isinstance(h, ir.HeaderType) and h.bit_width == 48


def test_struct_with_varbit_in_header_is_an_error() -> None:
    """A struct that P4_16 does not allow in a header stays an ordinary type error."""
    text = (CONF / "struct_in_header.p4").read_text().replace("bit<7> port;", "varbit<7> port;")
    with pytest.raises(P4Error, match="header field 'row' cannot have type row_t"):
        compile_source(text, str(CONF / "x.p4"))


def test_extract_into_dont_care_and_struct_lookahead() -> None:
    """`extract<T>(_)` skips a header; `lookahead<S>()` of a struct peeks at its fields (p4c
    issue774-4, issue1768)."""
    _stf_file("parser_skip_lookahead.p4")


def test_extract_into_union_of_stack_next() -> None:
    """Extracting into `stack_of_unions.next.member` advances the stack (p4c issue561-6)."""
    _stf_file("union_stack_next.p4")


def test_copy_in_copy_out_of_composite_arguments() -> None:
    """An action writing its inout argument's variable directly loses that write at the copy-out
    (p4c gauntlet_indirect_hdr_assign_1)."""
    _stf_file("copy_in_copy_out.p4")


def test_initialiser_evaluation_order() -> None:
    """A struct initialiser reads a field before a later call modifies it (p4c issue2488)."""
    _stf_file("init_evaluation_order.p4")


def test_nested_slice_indexed_compound_and_ser_enum_mask() -> None:
    """`x[7:4][2:1] = ..`, `s[f(i)].x |= ..` (f runs once) and `E.M &&& 0xF0` entries (p4c
    gauntlet_nested_slice, opassign2, table-entries-ser-enum)."""
    _stf_file("lvalue_forms.p4")


REJECTED = sorted((CONF / "rejected").glob("*.p4"))


@pytest.mark.parametrize("program", REJECTED, ids=[p.stem for p in REJECTED])
def test_rejected_as_by_p4c(program: Path) -> None:
    """Programs that p4c rejects (each reproduces a p4_16_errors case we once accepted) are
    rejected with the location and message named on their first line (`// expect: ...`)."""
    expect = program.read_text().splitlines()[0].removeprefix("// expect: ")
    with pytest.raises(P4Error) as info:
        compile_file(program)
    where = expect if expect.startswith("v1model.p4:") else f"{program.name}:{expect}"
    loc, _, message = where.partition(": ")
    assert str(info.value).endswith(f"/{loc}: error: {message}"), str(info.value)


# ----------------------------------------------------------------------- runner


def test_in_process_runner_outcomes(tmp_path: Path) -> None:
    """--in-process gives the outcomes of the child-process runner: an STF pass, a located
    rejection and a failed expectation."""
    assert run_program_in_process(CONF / "union_stack_next.p4").outcome == "pass"
    rejected = run_program_in_process(CONF / "rejected" / "switch_in_action.p4")
    assert rejected.outcome == "rejected" and rejected.detail.startswith("line 5:9: error: switch")
    prog = tmp_path / "prog.p4"
    prog.write_text((CONF / "union_stack_next.p4").read_text())
    (tmp_path / "prog.stf").write_text("packet 0 01 11 22 33 44\nexpect 1 01 11 2233 44 $\n")
    failed = run_program_in_process(prog)
    assert failed.outcome == "stf-fail" and failed.detail.startswith("FAIL: port 1: expected")


def test_find_programs_skips_fragments_and_other_archs(tmp_path: Path) -> None:
    """Included fragments and programs without v1model.p4 are not test programs."""
    (tmp_path / "frag.p4").write_text("// fragment\n")
    (tmp_path / "a-bmv2.p4").write_text('#include <v1model.p4>\n#include "frag.p4"\n')
    (tmp_path / "b-psa.p4").write_text("#include <psa.p4>\n")
    assert [p.name for p in find_programs(tmp_path)] == ["a-bmv2.p4"]
    assert [p.name for p in find_programs(tmp_path, v1model_only=False)] == [
        "a-bmv2.p4",
        "b-psa.p4",
    ]


@pytest.mark.parametrize(
    ("rc", "stderr", "ran_stf", "outcome"),
    [
        (0, "", True, "pass"),
        (1, "FAIL: port 0: expected 00 got nothing", True, "stf-fail"),
        (1, "t.stf:3: error: unknown table 'x'", True, "stf-error"),
        (1, "p.p4:1:2: error: value_set is not supported by the built-in target", False,
         "unsupported"),
        (1, "p.p4:1:2: error: no type named 'X'", False, "rejected"),
        (1, "Traceback (most recent call last):\n  ...\nKeyError: 'x'", True, "crash"),
    ],
)
def test_classify_outcomes(rc: int, stderr: str, ran_stf: bool, outcome: str) -> None:
    """A child's exit status and stderr map to one outcome."""
    assert classify(rc, "PASS: t.stf\n" if rc == 0 else "", stderr, ran_stf)[0] == outcome


def test_run_program_with_stf(tmp_path: Path) -> None:
    """A program with an STF file beside it is compiled and its test run in a child process."""
    prog = tmp_path / "core_macro.p4"
    prog.write_text((CONF / "core_macro.p4").read_text())
    (tmp_path / "skeleton.inc").write_text((CONF / "skeleton.inc").read_text())
    (tmp_path / "core_macro.stf").write_text("packet 0 2A 00\nexpect 1 2A 2A $\n")
    result = run_program(prog, timeout=60)
    assert (result.outcome, result.stf) == ("pass", tmp_path / "core_macro.stf")


def test_expected_rejections_and_table() -> None:
    """In --errors mode a clean rejection passes and an accepted program fails; totals are shown."""
    rs = [
        Result(Path("bad1.p4"), None, "rejected", "line 3:1: error: x"),
        Result(Path("bad2.p4"), None, "pass"),
    ]
    out = expected_rejections(rs)
    assert [r.outcome for r in out] == ["pass", "rejected"]
    table = format_table(out)
    assert "bad2.p4" in table and "accepted a program that p4c rejects" in table
    assert table.splitlines()[-1].strip() == "pass 1, rejected 1"
    summary = format_table(out, expect_errors=True).splitlines()[-2]
    assert summary == "2 programs that p4c rejects: 1 rejected cleanly"


def test_implicit_default_action_is_defaultonly_noaction() -> None:
    """A table without default_action gets NoAction, listed @defaultonly in P4Info as by p4c."""
    from p4.config.v1 import p4info_pb2

    from softswitch.p4info import build_p4info

    text = (
        (CONF / "legacy_priority.p4")
        .read_text()
        .replace("actions = { set; NoAction; }", "actions = { set; }")
    )
    prog = compile_source(text, str(CONF / "x.p4"))
    t = _table(prog, "ingress", "t")
    assert t.default_action is not None and t.default_action.action is prog.actions["NoAction"]
    assert [(r.action.name, r.annotations) for r in t.actions] == [
        ("set", {}),
        ("NoAction", {"defaultonly": []}),
    ]
    table = build_p4info(prog).tables[0]
    assert [(r.scope, list(r.annotations)) for r in table.action_refs] == [
        (p4info_pb2.ActionRef.TABLE_AND_DEFAULT, []),
        (p4info_pb2.ActionRef.DEFAULT_ONLY, ["@defaultonly"]),
    ]


def test_bit_width_accepts_any_integer_literal() -> None:
    """A type width may be written as a sized literal (bit<8w8>) without crashing."""
    text = (CONF / "core_macro.p4").read_text().replace("bit<8> a;", "bit<8w8> a;")
    prog = compile_source(text, str(CONF / "x.p4"))
    assert prog.types["hdr_t"].fields[0].type == ir.BitType(8)  # type: ignore[attr-defined]


# ----------------------------------------------------------------- engine behaviour
# Engine failures first seen on p4c's samples (docs/conformance.md), now implemented.


def test_engine_header_padding() -> None:
    """A 17-bit header is extracted and emitted as 3 bytes, as BMv2 does after p4c pads it."""
    _stf("engine_header_padding.p4", (CONF / "engine_header_padding.stf").read_text())


def test_engine_varbit_checksum() -> None:
    """update_checksum over a list holding a varbit field covers the varbit's bytes."""
    _stf("engine_varbit_checksum.p4", (CONF / "engine_varbit_checksum.stf").read_text())
