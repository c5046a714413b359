"""What v1model adds around the functions of its blocks: which parameter is
``standard_metadata`` (for ``mark_to_drop()``), the digest message built at the end of
ingress from the fields' final values (see :mod:`softswitch.v1model.primitives`), and one
copy function per ``@field_list(N)`` of the user metadata (what resubmit, recirculate and
clone preserve)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_types import attr, is_composite
from softswitch.errors import P4Error

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext

log = logging.getLogger(__name__)


@dataclass
class V1BlockState:
    """v1model's state of one top-level block function (``Scope.arch``)."""

    sm: str | None  # the standard_metadata parameter's Python name
    # (digest name, field values) per digest call site of the ingress control, read at its
    # end (BMv2 learns there); None where the values must be taken at call time
    digest_sites: list[tuple[str, str]] | None


def begin_block(
    ctx: GenContext, role: str, decl: ir.ParserDecl | ir.ControlDecl, sc: Scope, em: Emitter
) -> None:
    """Find ``standard_metadata``; in ingress, start recording digest call sites."""
    sm = None
    for p in decl.params:
        t = ir.strip_newtype(p.type)
        if isinstance(t, ir.StructType) and t.name == "standard_metadata_t":
            sm = sc.env[p]
    sc.arch = V1BlockState(sm, None)
    if role == "ingress":
        sc.arch.digest_sites = []
        em.line("_dg = 0")


def end_block(ctx: GenContext, role: str, sc: Scope, em: Emitter) -> None:
    """At the end of ingress: the digest of the last digest call that ran, from the
    fields' final values."""
    state = sc.arch
    if state is None or not state.digest_sites:
        return
    with em.block("if _dg:"):
        for k, (dname, vals) in enumerate(state.digest_sites, 1):
            kw = "if" if k == 1 else "elif"
            with em.block(f"{kw} _dg == {k}:"):
                em.line(f"_ctx.digest = ({dname!r}, ({vals}))")


def field_list_copiers(ctx: GenContext) -> None:
    """``@field_list(N)`` fields of the user metadata (the parser's third parameter) ->
    one copy function ``fl_copy_N(d, s)`` per N (its name in ``ctx.field_list_names``; the
    function in ``CompiledProgram.field_lists`` once compiled)."""
    parser_params = ctx.out.block_params.get("parser", [])
    if len(parser_params) < 3:
        return
    lists: dict[int, list[str]] = {}

    def visit(t: ir.Type, prefix: str) -> None:
        t = ir.strip_newtype(t)
        if not isinstance(t, ir.StructType):
            return
        for f in t.fields:
            path = f"{prefix}.{attr(f.name)}"
            for v in f.annotations.get("field_list", []):
                idx = _annotation_int(ctx, v)
                if idx is None:
                    log.warning("ignoring @field_list(%r) on %s", v, f.name)
                    continue
                stmt = f"d{path}._set(s{path})" if is_composite(f.type) else f"d{path} = s{path}"
                lists.setdefault(idx, []).append(stmt)
            if isinstance(ir.strip_newtype(f.type), ir.StructType) and (
                "field_list" not in f.annotations
            ):
                visit(f.type, path)

    visit(parser_params[2].type, "")
    for idx, stmts in sorted(lists.items()):
        name = f"fl_copy_{idx}"
        ctx.functions.append("\n".join([f"def {name}(d, s):"] + ["    " + s for s in stmts]))
        ctx.field_list_names[idx] = name


def _annotation_int(ctx: GenContext, v: object) -> int | None:
    """The list number of ``@field_list(v)``: an integer, a constant expression or a
    member of a serializable enum; None when it is none of these."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, ir.Expr):
        try:
            return int(ctx.exprs.const_value(v))
        except (P4Error, TypeError, ValueError):
            return None
    text = str(v).strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    if "." in text:  # Enum.member of a serializable enum
        ename, member = text.rsplit(".", 1)
        t = ctx.program.types.get(ename.strip())
        if isinstance(t, ir.EnumType) and member.strip() in t.values:
            return t.values[member.strip()]
    return None
