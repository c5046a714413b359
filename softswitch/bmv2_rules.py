"""Restrictions of p4c's BMv2 back end that the built-in target enforces too.

BMv2's JSON describes a control as a graph: every table (and conditional) names the node
that follows it, per action or per hit/miss. p4c's BMv2 back end builds that graph from
the control body after its mid end, where each run of consecutive plain statements
(assignments, extern and action calls) becomes a synthesized one-action table, and
refuses two shapes it cannot express:

* a table applied in several places whose successors differ (the JSON has one successor
  list per table): "table T has multiple successors";
* a path from a table back to itself (e.g. ``t.apply(); t.apply();``).

:func:`check_bmv2_control_flow` rebuilds that graph for the ingress and egress controls
(sub-controls inlined, as p4c does) and raises :class:`~softswitch.errors.P4Error` at the
table's declaration with p4c's reason. It is a model of p4c's mid end, not a copy of it:
mid-end rewrites that delete whole statement runs (dead local variables, constant
conditions) are not modelled, so a program at that edge may be judged differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from softswitch import ir
from softswitch.errors import P4Error

_INGRESS, _EGRESS = 2, 3  # v1model main arguments converted to BMv2 control graphs


@dataclass(eq=False)
class _Node:
    kind: str  # "entry", "exit", "table", "cond", "action"
    table: tuple[str, ir.TableDecl] | None = None  # (qualified name, declaration)
    succ: list[_Node] = field(default_factory=list)


_Live = list[_Node]  # nodes whose (one) pending edge goes to the next node


class _Builder:
    """The control-flow graph of one control body, p4c BMv2 style."""

    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.exit = self._node("exit")
        self._run: _Node | None = None  # the synthesized action being filled

    def _node(self, kind: str, table: tuple[str, ir.TableDecl] | None = None) -> _Node:
        n = _Node(kind, table)
        self.nodes.append(n)
        return n

    def _to(self, live: _Live, node: _Node) -> None:
        for pred in live:
            pred.succ.append(node)

    def block(self, stmts: list[ir.Stmt], live: _Live, prefix: str) -> _Live:
        for s in stmts:
            live = self.stmt(s, live, prefix)
        return live

    def stmt(self, s: ir.Stmt, live: _Live, prefix: str) -> _Live:  # noqa: C901, PLR0911, PLR0912
        if isinstance(s, ir.Block):
            return self.block(s.stmts, live, prefix)
        if isinstance(s, ir.Empty) or (isinstance(s, ir.VarDecl) and s.init is None):
            return live
        if isinstance(s, ir.Exit | ir.Return):
            self._run = None
            self._to(live, self.exit)
            return []
        if isinstance(s, ir.CallStmt):
            applied = _applied(s.call)
            if isinstance(applied, ir.TableDecl):
                return self._table(applied, prefix, live, 1)
            if isinstance(applied, ir.Instance):
                return self._inline(applied, live, prefix)
        if isinstance(s, ir.If):
            return self._if(s, live, prefix)
        if isinstance(s, ir.SwitchStmt):
            return self._switch(s, live, prefix)
        if isinstance(s, ir.For | ir.ForIn):
            body = s.body
            return self.stmt(body, live, prefix)
        # a plain statement; one whose expression applies tables (``h = t.apply().hit``)
        # becomes the table(s) with a hit and a miss edge, then the assignment
        tables = list(_tables_in(s, prefix))
        for name_decl in tables:
            live = self._table(name_decl[1], name_decl[0], live, 2, qualified=True)
        if self._run is None or tables:
            run = self._node("action")
            self._to(live, run)
            self._run = run
            return [run]
        return live

    def _table(
        self, decl: ir.TableDecl, prefix: str, live: _Live, edges: int, qualified: bool = False
    ) -> _Live:
        self._run = None
        name = prefix if qualified else ir.qualify(prefix, decl.cp_name)
        node = self._node("table", (name, decl))
        self._to(live, node)
        return [node] * edges

    def _inline(self, inst: ir.Instance, live: _Live, prefix: str) -> _Live:
        decl = getattr(inst.type, "decl", None)
        if not isinstance(decl, ir.ControlDecl):
            return live
        self._run = None
        inner = ir.qualify(prefix, inst.cp_name)
        saved_exit = self.exit
        # ``return`` in the callee ends the callee only
        self.exit = self._node("action")
        after = self.block(decl.body.stmts, live, inner)
        ret, self.exit = self.exit, saved_exit
        self._run = None
        return [*after, ret] if any(ret in n.succ for n in self.nodes) else after

    def _if(self, s: ir.If, live: _Live, prefix: str) -> _Live:
        self._run = None
        hit = _hit_test(s.cond)
        if hit is not None:
            decl = hit[0]
            node = self._node("table", (ir.qualify(prefix, decl.cp_name), decl))
        else:
            if _empty(s.then) and (s.else_ is None or _empty(s.else_)):
                return live  # p4c's SimplifyControlFlow removes it
            for name, decl in _tables_in(s, prefix, cond_only=True):
                live = self._table(decl, name, live, 2, qualified=True)
            node = self._node("cond")
        self._to(live, node)
        self._run = None
        out = self.stmt(s.then, [node], prefix)
        self._run = None
        out += self.stmt(s.else_, [node], prefix) if s.else_ is not None else [node]
        self._run = None
        return out

    def _switch(self, s: ir.SwitchStmt, live: _Live, prefix: str) -> _Live:
        self._run = None
        decl = _applied(s.subject.base) if isinstance(s.subject, ir.Member) else None
        if not isinstance(decl, ir.TableDecl):
            node = self._node("cond")
        else:
            node = self._node("table", (ir.qualify(prefix, decl.cp_name), decl))
        self._to(live, node)
        out: _Live = [node]  # no label matches
        pending = 0
        for case in s.cases:
            pending += 1
            if case.body is None:
                continue  # falls through to the next case's body
            self._run = None
            out += self.stmt(case.body, [node] * pending, prefix)
            pending = 0
        self._run = None
        return out


def _applied(e: ir.Expr | None) -> ir.TableDecl | ir.Instance | None:
    """The table or sub-control an ``x.apply(...)`` call applies."""
    if (
        isinstance(e, ir.MethodCall)
        and e.method == "apply"
        and isinstance(e.target, ir.InstanceRef)
    ):
        return e.target.instance
    return None


def _hit_test(cond: ir.Expr) -> tuple[ir.TableDecl, bool] | None:
    """``t.apply().hit``, ``.miss``, ``!t.apply().hit``: (table, edge taken on hit)."""
    positive = True
    while isinstance(cond, ir.Unary) and cond.op == "!":
        positive = not positive
        cond = cond.operand
    if isinstance(cond, ir.Member) and cond.name in ("hit", "miss"):
        decl = _applied(cond.base)
        if isinstance(decl, ir.TableDecl):
            return decl, positive == (cond.name == "hit")
    return None


def _empty(s: ir.Stmt) -> bool:
    if isinstance(s, ir.Block):
        return all(_empty(x) for x in s.stmts)
    return isinstance(s, ir.Empty)


def _tables_in(
    obj: object, prefix: str, cond_only: bool = False
) -> Iterator[tuple[str, ir.TableDecl]]:
    """Tables applied inside the expressions of a statement (not in nested statements)."""
    if isinstance(obj, ir.If):
        roots: list[object] = [obj.cond]
    elif cond_only:
        roots = []
    else:
        roots = [
            getattr(obj, name) for name in ("lhs", "rhs", "call", "init") if hasattr(obj, name)
        ]
    stack = list(roots)
    while stack:
        e = stack.pop()
        if isinstance(e, ir.MethodCall):
            decl = _applied(e)
            if isinstance(decl, ir.TableDecl):
                yield ir.qualify(prefix, decl.cp_name), decl
        if isinstance(e, ir.Expr):
            for v in vars(e).values():
                if isinstance(v, ir.Expr):
                    stack.append(v)
                elif isinstance(v, list):
                    stack.extend(x for x in v if isinstance(x, ir.Expr))


def _check_graph(b: _Builder, control: str) -> None:
    _check_no_table_cycle(b)
    _check_one_successor(b, control)


def _check_no_table_cycle(b: _Builder) -> None:
    """No path from a table back to itself (p4c: depth-first search from every node)."""
    visited: set[int] = set()

    def dfs(n: _Node, stack: set[str]) -> None:
        key = n.table[0] if n.table is not None else None
        if key is not None and key in stack:
            assert n.table is not None
            raise P4Error(
                "Program can not be implemented on this target since it contains a path "
                f"from table {n.table[0]} back to itself (p4c's BMv2 back end)",
                n.table[1].loc,
            )
        if id(n) in visited:
            return
        if key is not None:
            stack = stack | {key}
        for s in n.succ:
            dfs(s, stack)
        visited.add(id(n))

    for n in b.nodes:
        dfs(n, set())


def _check_one_successor(b: _Builder, control: str) -> None:
    """Every place a table is applied continues the same way (BMv2's JSON gives a table
    one successor per action/hit/miss)."""
    by_table: dict[str, list[_Node]] = {}
    for n in b.nodes:
        if n.table is not None:
            by_table.setdefault(n.table[0], []).append(n)
    for nodes in by_table.values():
        first = nodes[0]
        for other in nodes[1:]:
            if not _same(first.succ, other.succ):
                assert other.table is not None
                raise P4Error(
                    "Program is not supported by this target, because table "
                    f"{other.table[0]} has multiple successors (it is applied in several "
                    f"places of {control} that continue differently; BMv2's JSON gives a "
                    "table one successor per action/hit/miss, so p4c's BMv2 back end "
                    "refuses this)",
                    other.table[1].loc,
                )


def _same(a: list[_Node], b: list[_Node]) -> bool:
    """p4c's EdgeSet::checkSame: as many edges, and each destination found in the other
    (a table node matches any node of the same table, by qualified name: two
    instances of a sub-control have distinct tables)."""
    if len(a) != len(b):
        return False

    def found(n: _Node, among: list[_Node]) -> bool:
        return any(
            m is n or (m.table is not None and n.table is not None and m.table[0] == n.table[0])
            for m in among
        )

    return all(found(n, b) for n in a) and all(found(n, a) for n in b)


def check_bmv2_control_flow(program: ir.Program) -> None:
    """Raise P4Error where p4c's BMv2 back end refuses the ingress/egress control flow."""
    args = program.main.args
    if program.main.package != "V1Switch" or len(args) <= _EGRESS:
        return
    for index in (_INGRESS, _EGRESS):
        inst = args[index]
        decl = getattr(inst.type, "decl", None)
        if not isinstance(decl, ir.ControlDecl):
            continue
        b = _Builder()
        entry = b._node("entry")  # noqa: SLF001
        last = b.block(decl.body.stmts, [entry], inst.name)
        b._to(last, b.exit)  # noqa: SLF001
        _check_graph(b, inst.name)
