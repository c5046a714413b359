"""The one IR walker (softswitch/ir_walk.py) against the three it replaced: the code
generator's walk, its innermost-first index search and the P4Info builder's expression walk
visit the same nodes in the same order as before over real programs (the latter two still
leave struct initialisers out, as they did)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from softswitch import ir
from softswitch.frontend import compile_file
from softswitch.ir_walk import (
    NOT_CHILDREN,
    child_slots,
    children,
    walk,
    walk_in_order,
    walk_innermost_first,
)

P4 = Path(__file__).resolve().parent / "p4"
PROGRAMS = [
    P4 / "calculator.p4",
    P4 / "source_routing.p4",
    P4 / "counters_registers.p4",
    P4 / "cengine_fuzz.p4",
    P4 / "conformance" / "for_loop.p4",
    P4 / "conformance" / "lvalue_forms.p4",
    Path(__file__).resolve().parents[1] / "p4src" / "netreduce.p4",
]
NODES = (ir.Expr, ir.Stmt, ir.SwitchCase)


# The walkers as they were before they shared ir_walk (their own lists of skipped fields).


def _old_engine_walk(node: object) -> Iterator[object]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(reversed(n))
            continue
        if isinstance(n, dict):
            stack.extend(n.values())
            continue
        if not isinstance(n, NODES):
            continue
        yield n
        for f in dataclasses.fields(cast(Any, n)):
            if f.name in ("type", "var", "callee", "instance", "loc"):
                continue
            v = getattr(n, f.name)
            if isinstance(v, (*NODES, list, dict)):
                stack.append(v)


def _old_innermost_first(n: object, found: list[ir.Expr]) -> None:
    if isinstance(n, list):
        for x in n:
            _old_innermost_first(x, found)
        return
    if not isinstance(n, ir.Expr):
        return
    for f in dataclasses.fields(n):
        if f.name in ("type", "loc", "callee", "var", "instance"):
            continue
        _old_innermost_first(getattr(n, f.name), found)
    found.append(n)


def _old_p4info_walk(node: object) -> Iterator[object]:
    if node is None:
        return
    if isinstance(node, (list, tuple)):
        for item in node:
            yield from _old_p4info_walk(item)
        return
    if isinstance(node, ir.Expr):
        yield node
    if not isinstance(node, NODES):
        return
    for name in getattr(node, "__dataclass_fields__", {}):
        if name in ("type", "loc", "var", "callee", "instance", "table"):
            continue
        child = getattr(node, name)
        if isinstance(child, (*NODES, list, tuple)):
            yield from _old_p4info_walk(child)


def _bodies(program: ir.Program) -> list[object]:
    """Every statement body of the program: actions, functions, controls, parser states."""
    out: list[object] = [a.body for a in program.actions.values()]
    out += [f.body for f in program.functions.values()]
    for c in program.controls.values():
        out.append(c.body)
        out += [x.body for x in c.locals if isinstance(x, (ir.ActionDecl, ir.FunctionDecl))]
    for p in program.parsers.values():
        out += [s.stmts for s in p.states.values()]
    return out


def _has_struct_init(body: object) -> bool:
    return any(isinstance(n, ir.StructInit) for n in walk(body))


@pytest.fixture(scope="module", params=PROGRAMS, ids=lambda p: p.name)
def bodies(request: pytest.FixtureRequest) -> list[object]:
    return _bodies(compile_file(request.param))


def test_engine_walk_visits_what_it_did(bodies: list[object]) -> None:
    """Same nodes, same order as the code generator's own walk."""
    assert any(list(walk(b)) for b in bodies)
    for b in bodies:
        assert [id(n) for n in walk(b)] == [id(n) for n in _old_engine_walk(b)]


def test_innermost_first_visits_what_it_did(bodies: list[object]) -> None:
    """The index search's post-order, on the expressions it is given, struct initialisers
    left out as it always did."""
    for b in bodies:
        for s in walk(b):
            if not isinstance(s, ir.Assign):
                continue
            old: list[ir.Expr] = []
            _old_innermost_first([s.lhs, s.rhs], old)
            new = walk_innermost_first([s.lhs, s.rhs], struct_init_fields=False)
            assert [id(n) for n in new] == [id(n) for n in old]


def test_in_order_visits_what_p4info_did(bodies: list[object]) -> None:
    """The P4Info builder's source order, struct initialisers left out as it always did;
    with them the walk only adds nodes."""
    for b in bodies:
        old = [id(n) for n in _old_p4info_walk(b)]
        new = [id(n) for n in walk_in_order(b, struct_init_fields=False) if isinstance(n, ir.Expr)]
        assert new == old
        every = {id(n) for n in walk_in_order(b)}
        assert set(old) <= every
        if not _has_struct_init(b):
            assert {id(n) for n in walk_in_order(b) if isinstance(n, ir.Expr)} == set(old)


def _struct_init() -> tuple[ir.Assign, ir.Index]:
    """``s = {f = hs[i]}``: a dynamic index inside a struct initialiser."""
    loc = ir.Loc("t.p4", 1, 1)
    bit8 = ir.BitType(8)
    i = ir.VarRef(bit8, loc, ir.Variable("i", bit8, 1))
    hs = ir.VarRef(bit8, loc, ir.Variable("hs", bit8, 2))
    idx = ir.Index(bit8, loc, hs, i)
    init = ir.StructInit(bit8, loc, {"f": idx})
    lhs = ir.VarRef(bit8, loc, ir.Variable("s", bit8, 3))
    return ir.Assign(lhs, init, loc), idx


def test_struct_initialisers_are_children_unless_left_out() -> None:
    """A struct initialiser's values are its children (the code generator's walk always
    went there); the index search and the P4Info walk leave them out, as they did."""
    stmt, idx = _struct_init()
    for w in (walk, walk_in_order, walk_innermost_first):
        assert any(n is idx for n in w(stmt)), w.__name__
    for w in (walk_in_order, walk_innermost_first):
        assert not any(n is idx for n in w(stmt, struct_init_fields=False)), w.__name__
    assert children(stmt.rhs) == [idx]
    assert children(stmt.rhs, struct_init_fields=False) == []


def test_children_skip_references_and_positions() -> None:
    """Types, variables, callees, instances and locations are not sub-trees."""
    stmt, idx = _struct_init()
    assert children(idx) == [idx.base, idx.index]
    assert children(idx.base) == []  # a VarRef's variable is a reference
    assert child_slots("not a node") == []
    assert {"type", "loc", "var", "callee", "instance"} == NOT_CHILDREN


def _routing_with_a_runtime_index(tmp_path: Path) -> Path:
    """tests/p4/source_routing.p4 reading its stack at the ingress port's number."""
    src = (P4 / "source_routing.p4").read_text()
    old = "standard_metadata.egress_spec = (bit<9>)hdr.srcRoutes[0].port;"
    assert old in src
    path = tmp_path / "runtime_index.p4"
    path.write_text(src.replace(old, "bit<32> i = (bit<32>)standard_metadata.ingress_port;\n"
                                     "        standard_metadata.egress_spec = "
                                     "(bit<9>)hdr.srcRoutes[i].port;"))
    return path


def test_programs_with_run_time_stack_indexes_are_told_apart(tmp_path: Path) -> None:
    """The code generators search statements for hs[i] only in programs that have one:
    netreduce.p4 and constant indexes have none; a run-time index anywhere is found, and
    either way the generated Python and C are what the search everywhere gave."""
    from softswitch.cengine import cgen_core
    from softswitch.cengine.v1c import generate
    from softswitch.engine import codegen_context
    from softswitch.engine.codegen import compile_program
    from softswitch.engine.codegen_walk import has_dynamic_indexes
    from softswitch.v1model import V1MODEL

    netreduce = compile_file(str(PROGRAMS[-1]))
    constant = compile_file(str(P4 / "source_routing.p4"))
    runtime = compile_file(str(_routing_with_a_runtime_index(tmp_path)))
    assert not has_dynamic_indexes(netreduce) and not has_dynamic_indexes(constant)
    assert has_dynamic_indexes(runtime)

    def sources(program: ir.Program) -> tuple[str, str]:
        compiled = compile_program(program, V1MODEL, log_enabled=False, trace=False)
        return compiled.source, generate(program, compiled)[0]

    for program in (constant, runtime):
        found = sources(program)
        with pytest.MonkeyPatch.context() as mp:
            for module in (codegen_context, cgen_core):
                mp.setattr(module, "has_dynamic_indexes", lambda _p: True)
            assert sources(program) == found
    # and the check decides: told "none" wrongly, both generators leave the index unguarded
    found = sources(runtime)
    with pytest.MonkeyPatch.context() as mp:
        for module in (codegen_context, cgen_core):
            mp.setattr(module, "has_dynamic_indexes", lambda _p: False)
        unguarded = sources(runtime)
    assert unguarded[0] != found[0] and unguarded[1] != found[1]
