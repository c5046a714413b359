"""Table declarations: keys, the actions list, const entries and the other properties.

:class:`TableChecker` is one concern of the checker; it reaches expressions, arguments and
key sets through the shared context (``self.ctx.exprs``, ``self.ctx.keysets``).
"""

from __future__ import annotations

from dataclasses import fields

from softswitch import ir
from softswitch.errors import P4Error
from softswitch.frontend import syntax as s
from softswitch.frontend.exprs import any_subexpr
from softswitch.frontend.scope import Scope
from softswitch.frontend.typeops import type_str
from softswitch.frontend.visitor import Visitor

#: Table properties the built-in target understands (anything else is rejected).
TABLE_PROPERTIES = {
    "key", "actions", "default_action", "entries", "size", "implementation", "counters",
    "meters", "support_timeout", "largest_priority_wins", "priority_delta",
}  # fmt: skip


def same_expr(a: object, b: object) -> bool:
    """Structural equality of two IR expressions (source locations ignored), the test p4c
    applies to arguments that must repeat an earlier binding."""
    if type(a) is not type(b):
        return False
    if isinstance(a, ir.Expr):
        return all(
            same_expr(getattr(a, f.name), getattr(b, f.name))
            for f in fields(a)
            if f.name not in ("loc", "type")
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):  # b: same type as a
        return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, str, bool, float)) or a is None:
        return a == b
    return a is b


#: The names of the table properties that have a syntax class of their own.
_PROPERTY_NAMES: dict[type, str] = {
    s.KeyProperty: "key",
    s.ActionsProperty: "actions",
    s.EntriesProperty: "entries",
}


class TableChecker(Visitor):
    """Checks one ``table`` declaration at a time into an :class:`ir.TableDecl`; its
    properties are dispatched on their syntax class."""

    def table_decl(self, tree: s.TableDecl, scope: Scope) -> ir.TableDecl:
        """A ``table`` declaration with its properties checked."""
        annos = self.ctx.annotations(tree.annotations)
        name = tree.name
        loc = tree.loc
        table = ir.TableDecl(
            name, self.ctx.cp_name(annos, name), [], [], None, annotations=annos, loc=loc
        )
        seen: set[str] = set()
        # the action list first: default_action and entries refer to it
        order = sorted(tree.properties, key=lambda p: 0 if isinstance(p, s.ActionsProperty) else 1)
        for prop in order:
            pname = prop.name if isinstance(prop, s.SimpleProperty) else _PROPERTY_NAMES[type(prop)]
            if pname in seen:
                raise P4Error(f"duplicate table property '{pname}'", prop.loc)
            seen.add(pname)
            self.visit(prop, scope, table)
        if "actions" not in seen:
            raise P4Error(f"table '{name}' has no 'actions' property", loc)
        self.entry_priorities(table)
        _no_duplicate_entries(table)
        self.implicit_default_action(table, scope, loc)
        return table

    def visit_KeyProperty(self, prop: s.KeyProperty, scope: Scope, table: ir.TableDecl) -> None:
        table.keys = [self.table_key(k, scope) for k in prop.elements]

    def visit_ActionsProperty(
        self, prop: s.ActionsProperty, scope: Scope, table: ir.TableDecl
    ) -> None:
        table.actions = [self.action_item(a, scope, table) for a in prop.items]

    def visit_EntriesProperty(
        self, prop: s.EntriesProperty, scope: Scope, table: ir.TableDecl
    ) -> None:
        table.entries_const = prop.const
        table.entries = [self.table_entry(e, scope, table) for e in prop.entries]

    def implicit_default_action(self, table: ir.TableDecl, scope: Scope, loc: ir.Loc) -> None:
        """A table without ``default_action`` gets ``NoAction``, listed as ``@defaultonly``
        when the program did not list it, as p4c does (it shows in P4Info)."""
        if table.default_action is not None:
            return
        no_action = scope.root().lookup("NoAction")
        if not isinstance(no_action, ir.ActionDecl) or no_action.params:
            return
        if not any(r.action is no_action for r in table.actions):
            table.actions.append(ir.ActionRef(no_action, [], {"defaultonly": []}, loc))
        table.default_action = ir.ActionRef(no_action, [], {}, loc)

    def table_key(self, tree: s.KeyElement, scope: Scope) -> ir.TableKey:
        """``expr : match_kind @name(..);``"""
        expr_tree = tree.expr
        annos = self.ctx.annotations(tree.annotations)
        e = self.ctx.exprs.expr(expr_tree, scope)
        mk = tree.match_kind
        if mk not in self.ctx.match_kinds:
            raise P4Error(f"unknown match kind '{mk}'", tree.match_kind_loc)
        t = ir.strip_newtype(e.type)
        if not isinstance(t, (ir.BitType, ir.BoolType, ir.EnumType, ir.ErrorType)):
            raise P4Error(f"a table key cannot have type {type_str(e.type)}", expr_tree.loc)
        if "name" not in annos and not _nameable_key(e):
            raise P4Error("a complex key expression needs a @name annotation", expr_tree.loc)
        kname = self.ctx.cp_name(annos, self.ctx.source_text(expr_tree))
        return ir.TableKey(e, mk, kname, annos, tree.loc)

    def lookup_action(self, tree: s.NameRef, scope: Scope) -> ir.ActionDecl:
        """An action named in a table."""
        name = tree.name
        target = scope.root().lookup(name) if tree.dotted else scope.lookup(name)
        if target is None:
            raise P4Error(f"no declaration named '{name}'", tree.loc)
        if not isinstance(target, ir.ActionDecl):
            raise P4Error(f"'{name}' is not an action", tree.loc)
        return target

    def action_item(self, tree: s.ActionItem, scope: Scope, table: ir.TableDecl) -> ir.ActionRef:
        """An element of the ``actions`` list; arguments bind the directional parameters."""
        annos = self.ctx.annotations(tree.annotations)
        action = self.lookup_action(tree.action, scope)
        if any(r.action is action for r in table.actions):
            raise P4Error(f"action '{action.name}' appears twice in table '{table.name}'", tree.loc)
        args_tree = tree.args
        directional = [p for p in action.params if p.direction != ""]
        args: list[ir.Expr] = []
        if args_tree is not None:
            bound = self.ctx.exprs.bind_args(
                directional,
                list(args_tree.items),
                scope,
                tree.loc,
                f"action '{action.name}'",
                {},
            )
            args = [a for a in bound if a is not None]
            for a in args:
                if _applies_table(a):
                    raise P4Error(
                        f"action '{action.name}': a table is applied in an argument of the "
                        "actions list",
                        a.loc,
                    )
        elif directional:
            raise P4Error(
                f"action '{action.name}' has directional parameters; give their arguments",
                tree.loc,
            )
        return ir.ActionRef(action, args, annos, tree.loc)

    def action_call_ref(
        self, tree: s.Expr, scope: Scope, table: ir.TableDecl, what: str
    ) -> ir.ActionRef:
        """``a(args)`` of a default_action or an entry: an action of the table, all arguments."""
        loc = tree.loc
        arg_trees: list[s.Arg]
        if isinstance(tree, s.Call) and not tree.type_args:
            callee, arg_trees = tree.callee, list(tree.args.items)
        elif isinstance(tree, s.NameRef):
            callee, arg_trees = tree, []
        else:
            raise P4Error(f"{what} must be an action call", loc)
        if not isinstance(callee, s.NameRef):
            raise P4Error(f"{what} must be an action call", loc)
        action = self.lookup_action(callee, scope)
        listed = next((r for r in table.actions if r.action is action), None)
        if listed is None:
            raise P4Error(
                f"{what} '{action.name}' is not in the actions list of table '{table.name}'", loc
            )
        params = action.params
        n_dir = len(params) - len(action.cp_params)
        if "defaultonly" in listed.annotations and what != "default action":
            raise P4Error(f"{what} '{action.name}' is @defaultonly in table '{table.name}'", loc)
        if "tableonly" in listed.annotations and what == "default action":
            raise P4Error(f"{what} '{action.name}' is @tableonly in table '{table.name}'", loc)
        if len(arg_trees) == len(action.cp_params) and n_dir:
            bound = self.ctx.exprs.bind_args(
                action.cp_params, arg_trees, scope, loc, f"action '{action.name}'", {}
            )
            _constant_action_data(
                bound[-len(action.cp_params) :] if action.cp_params else [], action, loc
            )
            return ir.ActionRef(
                action, list(listed.args) + [a for a in bound if a is not None], {}, loc
            )
        bound = self.ctx.exprs.bind_args(
            params, arg_trees, scope, loc, f"action '{action.name}'", {}
        )
        _constant_action_data(bound[n_dir:], action, loc)
        args = [a for a in bound if a is not None]
        for param, given, in_list in zip(params[:n_dir], args, listed.args, strict=False):
            # p4c: the directional arguments must be those bound in the actions list
            if not same_expr(given, in_list):
                raise P4Error(
                    f"{what} '{action.name}': argument of '{param.name}' differs from the one "
                    f"bound in the actions list of table '{table.name}'",
                    loc,
                )
        return ir.ActionRef(action, args, {}, loc)

    def table_entry(self, tree: s.Entry, scope: Scope, table: ir.TableDecl) -> ir.ConstEntry:
        """One entry of ``entries = { ... }``."""
        loc = tree.loc
        annos = self.ctx.annotations(tree.annotations)
        keyset_tree = tree.keyset
        if not table.keys:
            raise P4Error(f"table '{table.name}' has entries but no key", loc)
        keysets = self.ctx.keysets.keysets(
            keyset_tree, [k.expr.type for k in table.keys], scope, "entry key set"
        )
        for key, ks in zip(table.keys, keysets, strict=True):
            _check_entry_keyset(key, ks)
        ref = self.action_call_ref(tree.action, scope, table, "entry action")
        priority: int | None = None
        if tree.priority is not None:
            priority = self.ctx.exprs.const_int(tree.priority, scope, "entry priority")
            if priority < 0:
                raise P4Error("entry priorities must not be negative", loc)
        return ir.ConstEntry(keysets, ref, priority, annos, loc)

    def entry_priorities(self, table: ir.TableDecl) -> None:
        """Give every entry a priority when any entry names one, as p4c does.

        ``priority = N:`` entries follow the P4_16 rules: the first entry must have a
        priority and an entry without one continues from the previous entry by
        ``priority_delta`` (down when the largest priority wins, up otherwise). The legacy
        ``@priority(N)`` annotation is a BMv2 priority (smaller wins); p4c's BMv2 back end
        gives the other entries their 1-based position, and we translate both into the
        table's own convention.
        """
        entries = table.entries or []
        given = next(
            (e for e in entries if e.priority is not None or e.annotations.get("priority")), None
        )
        if given is not None and all(k.match_kind in ("exact", "lpm") for k in table.keys):
            raise P4Error(
                f"table '{table.name}': its match kinds do not use priorities, but an entry "
                "has one",
                given.loc,
            )
        if any(e.priority is not None for e in entries):
            _explicit_priorities(table, entries)
        elif any(e.annotations.get("priority") for e in entries):
            _legacy_priorities(table, entries)

    def visit_SimpleProperty(
        self, prop: s.SimpleProperty, scope: Scope, table: ir.TableDecl
    ) -> None:
        """``name = value;`` table properties."""
        pname, loc = prop.name, prop.loc
        value_tree = prop.value
        if pname not in TABLE_PROPERTIES:
            raise P4Error(f"unknown table property '{pname}'", loc)
        if pname == "default_action":
            table.default_action = self.action_call_ref(value_tree, scope, table, "default action")
            table.default_action_const = prop.const
        elif pname == "size":
            size = self.ctx.exprs.const_int(value_tree, scope, "table size")
            if size < 0:
                raise P4Error("table size must not be negative", loc)
            table.size = size
        elif pname in ("implementation", "counters", "meters"):
            inst = self.property_instance(value_tree, scope, table, pname)
            setattr(table, pname, inst)
        elif pname in ("support_timeout", "largest_priority_wins"):
            v = self.ctx.exprs.expr(value_tree, scope)
            if not isinstance(v, ir.BoolConst):
                raise P4Error(f"table property '{pname}' must be true or false", loc)
            setattr(table, pname, v.value)
        else:
            table.properties[pname] = self.ctx.exprs.expr(value_tree, scope)

    def property_instance(
        self, tree: s.Expr, scope: Scope, table: ir.TableDecl, pname: str
    ) -> ir.Instance:
        """The extern instance named (or constructed inline) by a table property."""
        expected = {
            "implementation": ("action_profile", "action_selector"),
            "counters": ("direct_counter",),
            "meters": ("direct_meter",),
        }[pname]
        loc = tree.loc
        if isinstance(tree, s.CtorCall):
            inst = self.ctx.ctors.construct(tree, scope, f"{table.name}_{pname}", {}, loc)
        else:
            e = self.ctx.exprs.expr(tree, scope)
            if not isinstance(e, ir.InstanceRef) or not isinstance(e.instance, ir.Instance):
                raise P4Error(f"table property '{pname}' must name an extern instance", loc)
            inst = e.instance
        t = inst.type
        if not isinstance(t, ir.ExternType) or t.name not in expected:
            raise P4Error(
                f"table property '{pname}' needs an instance of {' or '.join(expected)}, "
                f"not {type_str(t)}",
                loc,
            )
        return inst


_KEYSETS = {
    "exact": (ir.KeysetValue, ir.KeysetDefault),
    "optional": (ir.KeysetValue, ir.KeysetDefault),
    "lpm": (ir.KeysetValue, ir.KeysetMask, ir.KeysetDefault),
    "ternary": (ir.KeysetValue, ir.KeysetMask, ir.KeysetDefault),
    "range": (ir.KeysetValue, ir.KeysetRange, ir.KeysetDefault),
}


def _check_entry_keyset(key: ir.TableKey, ks: ir.Keyset) -> None:
    """An entry's keyset must suit the key's match kind (p4c: an LPM mask is a prefix,
    an optional key takes a value or ``_``, not a mask)."""
    allowed = _KEYSETS.get(key.match_kind)
    if allowed is None:
        return
    if not isinstance(ks, allowed):
        what = {ir.KeysetMask: "a mask", ir.KeysetRange: "a range", ir.KeysetDefault: "'_'"}.get(
            type(ks), "this"
        )
        raise P4Error(
            f"{what} is not a valid key set for the {key.match_kind} key '{key.name}'", ks.loc
        )
    if isinstance(ks, ir.KeysetMask) and key.match_kind == "lpm":
        t = ir.strip_newtype(key.expr.type)
        width = t.width if isinstance(t, ir.BitType) else 1
        full = (1 << width) - 1
        mask = ks.mask & full
        plen = bin(mask).count("1")
        if mask != full ^ ((1 << (width - plen)) - 1):
            raise P4Error(
                f"{ks.value} &&& {ks.mask}: invalid mask for the lpm key '{key.name}' "
                "(not a prefix)",
                ks.loc,
            )


def _constant_action_data(args: list[ir.Expr | None], action: ir.ActionDecl, loc: ir.Loc) -> None:
    """Action data given in a program (default action, entries) must be known at compile time."""
    for a in args:
        if a is not None and not isinstance(
            a, (ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember)
        ):
            raise P4Error(
                f"action '{action.name}': action data arguments must be compile-time constants",
                a.loc,
            )


def _nameable_key(e: ir.Expr) -> bool:
    """Whether a key expression has a name of its own for P4Info, as p4c's key names:
    a variable, field, stack element, slice, ``&`` of those or ``isValid()``."""
    if isinstance(e, (ir.VarRef, ir.Const, ir.BoolConst, ir.EnumMember, ir.ErrorMember)):
        return True
    if isinstance(e, (ir.Member, ir.Slice)):
        return _nameable_key(e.base)
    if isinstance(e, ir.Index):
        return _nameable_key(e.index) and _nameable_key(e.base)
    if isinstance(e, ir.Binary) and e.op == "&":
        return _nameable_key(e.left) and _nameable_key(e.right)
    if isinstance(e, ir.MethodCall) and e.method == "isValid" and not e.args:
        return _nameable_key(e.target)
    return False


def _no_duplicate_entries(table: ir.TableDecl) -> None:
    """Two entries of an exact-match table with the same key (p4c: "Duplicate entry keys")."""
    if not table.entries or not all(k.match_kind == "exact" for k in table.keys):
        return
    seen: set[tuple[object, ...]] = set()
    for e in table.entries:
        key = tuple(ks.value if isinstance(ks, ir.KeysetValue) else "_" for ks in e.keysets)
        if key in seen:
            raise P4Error(f"table '{table.name}': duplicate entry key", e.loc)
        seen.add(key)


def _applies_table(e: ir.Expr) -> bool:
    """Whether evaluating ``e`` applies a table."""
    return any_subexpr(
        e, lambda n: isinstance(n, ir.MethodCall) and isinstance(n.type, ir.TableApplyResultType)
    )


def _explicit_priorities(table: ir.TableDecl, entries: list[ir.ConstEntry]) -> None:
    """``priority = N:``: the first entry has one, the others continue from the previous
    entry by ``priority_delta``."""
    delta = 1
    if "priority_delta" in table.properties:
        d = table.properties["priority_delta"]
        if not isinstance(d, ir.Const) or d.value <= 0:
            raise P4Error("table property 'priority_delta' must be a positive constant", d.loc)
        delta = d.value
    if entries[0].priority is None:
        raise P4Error(
            f"the first entry of table '{table.name}' must have a priority", entries[0].loc
        )
    current = 0
    for e in entries:
        if e.priority is None:
            e.priority = current
        if e.priority < 0:
            raise P4Error(f"priorities of table '{table.name}' run below zero", e.loc)
        current = e.priority - delta if table.largest_priority_wins else e.priority + delta


def _legacy_priorities(table: ir.TableDecl, entries: list[ir.ConstEntry]) -> None:
    """``@priority(N)``: BMv2 priorities (smaller wins), the other entries their 1-based
    position, translated into the table's own convention."""
    bmv2: list[int] = []
    for i, e in enumerate(entries):
        anno = e.annotations.get("priority")
        if anno:
            if len(anno) != 1 or not isinstance(anno[0], int):
                raise P4Error("@priority needs one integer", e.loc)
            bmv2.append(int(anno[0]))
        else:
            bmv2.append(i + 1)
    top = max(bmv2) + 1
    for e, b in zip(entries, bmv2, strict=True):
        e.priority = top - b if table.largest_priority_wins else b
