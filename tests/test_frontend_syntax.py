"""Typed syntax nodes: the checks read named fields with the original FILE:LINE:COL."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


def _program(source: str) -> s.Program:
    pre = preprocess(source, "syntax.p4")
    return build_syntax(parse(pre), pre)


def _apply_block(source: str) -> s.Block:
    control = next(d for d in _program(source).decls if isinstance(d, s.ControlDecl))
    return control.body


def _at(node: s.Node | ir.Loc) -> tuple[int, int]:
    loc = node if isinstance(node, ir.Loc) else node.loc
    return (loc.line, loc.col)


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

    assert isinstance(slice_assign, s.AssignStmt) and isinstance(slice_assign.lhs, s.Slice)
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


#: The modules that read lark's trees and tokens; every other front-end module reads only
#: the typed syntax nodes.
_LARK_READERS = {"parser.py", "syntax_build.py"}
_FRONTEND = Path(s.__file__).parent


def _lark_uses(path: Path) -> list[str]:
    """Where a module imports lark or reads ``.children`` / ``.data`` / ``.meta``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lark":
            found.append(f"{path.name}:{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Import) and any(a.name.startswith("lark") for a in node.names):
            found.append(f"{path.name}:{node.lineno}: import lark")
        elif isinstance(node, ast.Attribute) and node.attr in ("children", "meta"):
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return found


def test_only_the_parser_and_the_syntax_builder_touch_lark_trees() -> None:
    """The checks read typed nodes, never lark trees by position."""
    modules = sorted(p for p in _FRONTEND.glob("*.py") if p.name not in _LARK_READERS)
    assert {p.name for p in modules} >= {"check.py", "stmts.py", "exprs.py", "tables.py"}
    uses = [u for p in modules for u in _lark_uses(p)]
    assert uses == []


def test_the_lark_scan_sees_a_position_read(tmp_path: Path) -> None:
    """The scan above would catch the pattern it forbids."""
    bad = tmp_path / "bad.py"
    bad.write_text("from lark import Tree\n\ndef f(t):\n    return t.children[0]\n")
    assert _lark_uses(bad) == ["bad.py:1: from lark import", "bad.py:4: .children"]


DECLS = """\
error { NoMatch, BadThing }
match_kind { exact }
typedef bit<9> port_t;
@brief("x") header eth_t { bit<48> dst; @name("et") bit<16> type; }
enum bit<8> Proto { TCP = 6, UDP = 17 }
extern Counter<T> { Counter(bit<32> n); void count<I>(in I index); }
const bit<8> LIMIT = 3;
parser P(in bit<8> x, out eth_t h) {
    bit<8> tmp;
    state start {
        transition select(h.type) { 0x800 &&& 0xF00: accept; (default): reject; }
    }
}
control C(inout eth_t h)(bit<8> size) {
    action set(bit<9> port) { h.dst = (bit<48>) port; }
    table t {
        key = { h.dst: exact @name("dst"); }
        actions = { set; @defaultonly NoAction; }
        const entries = { priority = 1: 48w1 : set(2); }
        size = 16;
    }
    apply { t.apply(); }
}
"""


def test_declarations_are_typed_nodes_with_positions() -> None:
    """Each declaration kind becomes a dataclass with named fields and its source position."""
    errs, mks, typedef, eth, proto, counter, limit, parser, control = _program(DECLS).decls
    assert isinstance(errs, s.ErrorDecl)
    assert [m.name for m in errs.members] == ["NoMatch", "BadThing"]
    assert _at(errs.members[1]) == (1, 18)
    assert isinstance(mks, s.MatchKindDecl) and mks.members[0].name == "exact"
    assert isinstance(typedef, s.TypedefDecl) and typedef.name == "port_t"
    assert isinstance(typedef.type, s.BitTypeRef) and _at(typedef.name_loc) == (3, 16)

    assert isinstance(eth, s.HeaderDecl) and eth.name == "eth_t" and _at(eth.name_loc) == (4, 20)
    assert [(a.name, a.body) for a in eth.annotations] == [("brief", '"x"')]
    dst, etype = eth.fields
    assert dst.name == "dst" and _at(dst) == (4, 28)
    assert etype.name == "type" and etype.annotations[0].name == "name"

    assert isinstance(proto, s.SerEnumDecl) and [m.name for m in proto.members] == ["TCP", "UDP"]
    assert isinstance(proto.members[1].value, s.IntLit) and _at(proto.members[1]) == (5, 30)

    assert isinstance(counter, s.ExternObjDecl) and [t.name for t in counter.type_params] == ["T"]
    ctor, count = counter.members
    assert isinstance(ctor, s.CtorProto) and ctor.params[0].name == "n"
    assert isinstance(count, s.MethodProto) and count.name == "count" and _at(count) == (6, 41)
    (index,) = count.params
    assert index.direction == "in" and isinstance(index.type, s.TypeName) and index.type.name == "I"

    assert isinstance(limit, s.ConstDecl) and isinstance(limit.value, s.IntLit)

    assert isinstance(parser, s.ParserDecl) and parser.ctor_params is None
    (tmp,) = parser.locals
    assert isinstance(tmp, s.VariableDecl) and tmp.init is None and _at(tmp) == (9, 5)
    (start,) = parser.states
    assert start.name == "start" and _at(start.name_loc) == (10, 11)
    select = start.transition
    assert isinstance(select, s.SelectTransition)
    mask, default = select.cases
    assert isinstance(mask.keyset, s.MaskKeyset) and mask.next_state == "accept"
    assert _at(mask.next_loc) == (11, 54)
    assert isinstance(default.keyset, s.TupleKeyset)
    assert isinstance(default.keyset.items[0], s.DefaultKeyset)

    assert isinstance(control, s.ControlDecl) and [p.name for p in control.ctor_params or ()] == [
        "size"
    ]
    action, table = control.locals
    assert isinstance(action, s.ActionDecl) and action.params[0].direction == ""
    assert isinstance(table, s.TableDecl) and _at(table.name_loc) == (16, 11)
    key, actions, entries, size = table.properties
    assert isinstance(key, s.KeyProperty) and key.elements[0].match_kind == "exact"
    assert key.elements[0].annotations[0].body == '"dst"'
    assert isinstance(actions, s.ActionsProperty)
    assert [i.action.name for i in actions.items] == ["set", "NoAction"]
    assert actions.items[1].annotations[0].name == "defaultonly"
    assert isinstance(entries, s.EntriesProperty) and entries.const
    (entry,) = entries.entries
    assert isinstance(entry.priority, s.IntLit) and isinstance(entry.action, s.Call)
    assert _at(entry) == (19, 27)
    assert isinstance(size, s.SimpleProperty) and size.name == "size" and not size.const


def test_for_loop_declaration_is_a_variable_declaration() -> None:
    """``for (T x = e; ...)``: the initialiser is the same node as a local declaration."""
    block = _apply_block(
        "control C(inout bit<8> a) { apply { for (bit<8> i = 0; i < 4; i = i + 1) { a = i; } } }\n"
    )
    (loop,) = block.items
    assert isinstance(loop, s.ForStmt)
    (init,) = loop.init
    assert isinstance(init, s.VariableDecl) and init.name == "i" and _at(init.name_loc) == (1, 49)


def test_checker_concerns_are_separate_visitors() -> None:
    """The checker is one visitor per concern around one shared context: none inherits from
    another, and each dispatches on the syntax node's class."""
    from softswitch.frontend.check import Checker
    from softswitch.frontend.visitor import Visitor

    pre = preprocess("", "empty.p4")
    ctx = Checker(pre, "empty.p4").ctx
    concerns = [ctx.typing, ctx.exprs, ctx.stmts, ctx.keysets, ctx.decls, ctx.ctors, ctx.tables]
    concerns.append(ctx.bmv2)
    for visitor in concerns:
        assert type(visitor).__mro__ == (type(visitor), Visitor, object)
        assert visitor.ctx is ctx
    assert len({type(v) for v in concerns}) == len(concerns)
    block = _apply_block("control C(inout bit<8> a) { apply { a = 1; } }\n")
    with pytest.raises(TypeError, match="DeclChecker cannot visit AssignStmt"):
        ctx.decls.visit(block.items[0], ctx.top)
