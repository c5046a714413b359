"""Typed syntax nodes: the checks read named fields with the original FILE:LINE:COL."""

from __future__ import annotations

import pytest
from lark import Tree

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import compile_source
from softswitch.frontend import syntax as s
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocess import preprocess
from softswitch.frontend.syntax_build import build_syntax

SOURCE = """\
#define TTL_STEP 1
control C(inout bit<8> ttl, inout bit<16> port) {
    apply {
        ttl = ttl - TTL_STEP;
        port[3:0] = (bit<4>) ttl;
        if (ttl == 0) { port = 16w511; } else { port |= 1; }
        for (bit<8> i in 1 .. 3) { ttl = ttl + i; }
        switch (ttl) { 1: { exit; } default: }
    }
}
"""


def _apply_block(source: str) -> s.Block:
    pre = preprocess(source, "syntax.p4")
    tree = build_syntax(parse(pre), pre)
    control = next(c for c in tree.children if isinstance(c, Tree) and c.data == "control_decl")
    return next(c for c in control.children if isinstance(c, s.Block))


def test_statements_and_expressions_are_typed_nodes_with_positions() -> None:
    """Each statement kind and its expressions become dataclasses; locations are those of
    the original source (line and column of the first token)."""
    assign, slice_assign, cond, loop, switch = _apply_block(SOURCE).items
    assert isinstance(assign, s.AssignStmt)
    assert (assign.loc.file, assign.loc.line, assign.loc.col) == ("syntax.p4", 4, 9)
    assert isinstance(assign.lhs, s.NameRef) and assign.lhs.name == "ttl"
    assert isinstance(assign.rhs, s.Binary) and assign.rhs.op == "-"
    assert isinstance(assign.rhs.right, s.IntLit) and assign.rhs.right.text == "1"  # macro expanded
    assert (assign.rhs.loc.line, assign.rhs.loc.col) == (4, 15)

    assert isinstance(slice_assign.lhs, s.Slice)
    assert isinstance(slice_assign.rhs, s.Cast)
    assert isinstance(slice_assign.rhs.type, s.BitTypeRef) and slice_assign.rhs.type.width == "4"

    assert isinstance(cond, s.IfStmt) and isinstance(cond.else_, s.Block)
    (update,) = cond.else_.items
    assert isinstance(update, s.CompoundAssignStmt) and update.op == "|"

    assert isinstance(loop, s.ForInStmt) and loop.name == "i" and loop.collection is None
    assert (loop.name_loc.line, loop.name_loc.col) == (7, 21)

    assert isinstance(switch, s.SwitchStmt)
    first, default = switch.cases
    assert isinstance(first.label, s.IntLit) and isinstance(first.body, s.Block)
    assert isinstance(default.label, s.DefaultLabel) and default.body is None


def test_calls_keep_type_arguments_and_named_arguments() -> None:
    """``f<T>(x, y = e)``: the callee, type arguments and named arguments are fields."""
    block = _apply_block("control C(inout bit<8> a) { apply { f<bit<8>>(a, b = 2); } }\n")
    (stmt,) = block.items
    assert isinstance(stmt, s.CallStmt)
    call = stmt.call
    assert isinstance(call.callee, s.NameRef) and call.callee.name == "f"
    (targ,) = call.type_args
    assert isinstance(targ, s.BitTypeRef) and targ.kind == "bit_type"
    positional, named = call.args.items
    assert isinstance(positional, s.NameRef)
    assert isinstance(named, s.NamedArg) and named.name == "b" and isinstance(named.value, s.IntLit)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x = {a = 1, a = 2};", "syntax.p4:5:21: error: field 'a' initialized twice"),
        (
            "x.b = (bit<8>) true;",
            "syntax.p4:5:15: error: cannot cast an expression of type bool to bit<8>",
        ),
        (
            "for (bit<8> i in x) { }",
            "syntax.p4:5:26: error: cannot iterate over an expression of type S",
        ),
        ("S y = x; y.a = y.c;", "syntax.p4:5:24: error: struct 'S' has no field 'c'"),
    ],
)
def test_errors_point_at_the_node(body: str, message: str) -> None:
    """Messages from checks over syntax nodes keep FILE:LINE:COL of the offending node."""
    source = (
        "struct S { bit<8> a; bit<8> b; }\n"
        "control C(inout S x) {\n"
        "    apply {\n"
        "\n"
        f"        {body}\n"
        "    }\n"
        "}\n"
    )
    with pytest.raises(P4Error) as info:
        compile_source(source, "syntax.p4")
    assert str(info.value) == message


def test_deep_nesting_is_a_located_error_not_a_traceback() -> None:
    """Deeply nested expressions overflow the recursion of the tree walks: that must stay a
    P4 error with a location."""
    depth = 20000
    source = "const bit<8> X = " + "(" * depth + "1" + ")" * depth + ";\n"
    with pytest.raises(P4Error) as info:
        compile_source(source, "deep.p4")
    assert str(info.value).startswith("deep.p4:1:1: error:")
    assert isinstance(info.value.loc, ir.Loc)
