"""Parsers: the states of a parser as nested code when it is loop-free and small (each
state inlined where it is entered), else as a state machine with a loop guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_expr import strip
from softswitch.engine.codegen_types import scalar_width
from softswitch.engine.codegen_walk import parser_state_order
from softswitch.errors import P4Error, UnsupportedError

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext

PARSER_LOOP_LIMIT = 10000  # state transitions through back edges before ParserTimeout
PARSER_TREE_LIMIT = 64  # states (counted along every path) up to which a loop-free parser
# is generated as nested code instead of a state machine


class ParserGen:
    """A parser's states and transitions (``select`` cases as ``if``/``elif`` chains)."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    def gen_parser_body(self, decl: ir.ParserDecl, sc: Scope, em: Emitter) -> None:
        order, missing = parser_state_order(decl)
        if missing is not None:
            raise P4Error(f"parser {decl.name} has no state {missing}", decl.loc)
        index = {s: i for i, s in enumerate(order)}
        noerr = self.ctx.err_code("NoError")
        if _tree_size(decl, "start", 0) <= PARSER_TREE_LIMIT:
            self._parser_tree(decl, "start", noerr, sc, em)
            return
        stv, itv = self.ctx.tmp("st"), self.ctx.tmp("it")
        em.line(f"{stv} = 0")
        em.line(f"{itv} = 0")
        with em.block("while True:"):
            for i, s in enumerate(order):
                with em.block(f"if {stv} == {i}:"):
                    state = decl.states[s]
                    if self.ctx.trace:
                        em.line(f"_tr.state({s!r})")
                    self.ctx.stmts.stmts(state.stmts, sc, em)
                    self._transition(state.transition, i, index, stv, itv, noerr, sc, em)

    def _parser_tree(
        self, decl: ir.ParserDecl, name: str, noerr: int, sc: Scope, em: Emitter
    ) -> None:
        """An acyclic parser as nested code: each state inlined where it is entered, so no
        state variable is dispatched per state (``accept`` falls through to the end)."""
        if name == "accept":
            return
        if name == "reject":
            em.line(f"raise _ParserReject({noerr})")
            return
        state = decl.states[name]
        if self.ctx.trace:
            em.line(f"_tr.state({name!r})")
        self.ctx.stmts.stmts(state.stmts, sc, em)
        tr = state.transition
        if tr.select is None:
            self._parser_tree(decl, tr.next_state or "reject", noerr, sc, em)
            return
        cases = self._select_cases(tr, sc, em)
        first = True
        for conds, target in cases:
            if conds is None:  # default
                if first:
                    self._parser_tree(decl, target, noerr, sc, em)
                else:
                    with em.block("else:"):
                        self._parser_tree(decl, target, noerr, sc, em)
                return
            with em.block(f"{'if' if first else 'elif'} {conds}:"):
                self._parser_tree(decl, target, noerr, sc, em)
            first = False
        # no case matched: BMv2 ends parsing there as at an explicit reject (p4c's BMv2 JSON
        # has no default transition, and a missing one ends the parser without an error)
        if first:
            self._parser_tree(decl, "reject", noerr, sc, em)
        else:
            with em.block("else:"):
                self._parser_tree(decl, "reject", noerr, sc, em)

    def _select_cases(
        self, tr: ir.Transition, sc: Scope, em: Emitter
    ) -> list[tuple[str | None, str]]:
        """``(condition or None for a default, next state)`` of a select, in order, up to
        the first default; the select keys are evaluated once, into temporaries."""
        keys = []
        widths = []
        for x in tr.select or []:
            k = self.ctx.tmp("k")
            em.line(f"{k} = {self.ctx.exprs.expr(x, sc, em)}")
            keys.append(k)
            t = strip(x.type)
            widths.append(scalar_width(t) if not isinstance(t, ir.IntLitType) else None)
        out: list[tuple[str | None, str]] = []
        for case in tr.cases:
            conds = []
            for k, w, ks in zip(keys, widths, case.keysets, strict=False):
                match = _KEYSET_MATCH.get(type(ks))
                if match is None:
                    raise UnsupportedError(f"select keyset {type(ks).__name__}", case.loc)
                cond = match(k, ks, (1 << w) - 1 if w else -1)
                if cond is not None:
                    conds.append(cond)
            if not conds:
                out.append((None, case.next_state))
                break
            out.append((" and ".join(conds), case.next_state))
        return out

    def _goto(
        self,
        target: str,
        here: int,
        index: dict[str, int],
        stv: str,
        itv: str,
        noerr: int,
        em: Emitter,
    ) -> None:
        if target == "accept":
            em.line("break")
        elif target == "reject":
            em.line(f"raise _ParserReject({noerr})")
        else:
            j = index[target]
            em.line(f"{stv} = {j}")
            if j <= here:
                em.line(f"{itv} += 1")
                with em.block(f"if {itv} > {PARSER_LOOP_LIMIT}:"):
                    em.line(f"raise _ParserReject({self.ctx.err_code('ParserTimeout')})")
                em.line("continue")

    def _transition(
        self,
        tr: ir.Transition,
        here: int,
        index: dict[str, int],
        stv: str,
        itv: str,
        noerr: int,
        sc: Scope,
        em: Emitter,
    ) -> None:
        if tr.select is None:
            self._goto(tr.next_state or "reject", here, index, stv, itv, noerr, em)
            return
        first = True
        for conds, target in self._select_cases(tr, sc, em):
            if conds is None:
                if first:
                    self._goto(target, here, index, stv, itv, noerr, em)
                else:
                    with em.block("else:"):
                        self._goto(target, here, index, stv, itv, noerr, em)
                return
            with em.block(f"{'if' if first else 'elif'} {conds}:"):
                self._goto(target, here, index, stv, itv, noerr, em)
            first = False
        # no case matched: as an explicit reject on BMv2 (see _parser_tree)
        if first:
            self._goto("reject", here, index, stv, itv, noerr, em)
        else:
            with em.block("else:"):
                self._goto("reject", here, index, stv, itv, noerr, em)


def _tree_size(decl: ir.ParserDecl, name: str, depth: int) -> int:
    """States emitted when ``name`` is inlined along every path (a large number for a
    parser with a loop or too deep a nesting, which then stays a state machine)."""
    if name in ("accept", "reject"):
        return 0
    if depth > 12 or name not in decl.states:
        return PARSER_TREE_LIMIT + 1
    tr = decl.states[name].transition
    nexts = [tr.next_state or "reject"] if tr.select is None else [c.next_state for c in tr.cases]
    total = 1
    for n in nexts:
        total += _tree_size(decl, n, depth + 1)
        if total > PARSER_TREE_LIMIT:
            break
    return total


# keyset class -> (key temporary, keyset, mask of the key's width) -> Python condition, or
# None for a keyset that matches everything
_KEYSET_MATCH: dict[type, Callable[[str, Any, int], str | None]] = {
    ir.KeysetDefault: lambda k, ks, m: None,
    ir.KeysetValue: lambda k, ks, m: f"{k} == {ks.value & m}",
    ir.KeysetMask: lambda k, ks, m: f"({k} & {ks.mask & m}) == {ks.value & ks.mask & m}",
    ir.KeysetRange: lambda k, ks, m: f"{ks.low & m} <= {k} <= {ks.high & m}",
}
