"""The v1model primitives the code generator cannot know about: drop, clone, resubmit,
recirculate, truncate, digest, and the checksum externs that report into
``standard_metadata.checksum_error``.

Each one only records a request in the packet's context (BMv2's per-packet "registers");
:class:`softswitch.v1model.switch.V1Switch` acts on it after the control returns. Facts
from BMv2 (simple_switch primitives):

* ``mark_to_drop``: ``egress_spec = 511`` (the drop port) and ``mcast_grp = 0``.
* ``clone(type, session)``: p4c emits ``clone_ingress_pkt_to_egress`` or
  ``clone_egress_pkt_to_egress`` by the *type* value, but both BMv2 primitives store the
  same request (session id | 0x8000, field list); what happens depends only on where it is
  acted upon: after ingress an ingress clone, after egress an egress clone. The type must
  be a compile-time constant (as in p4c).
* ``resubmit``/``recirculate`` without a field list store -1 ("no field list"); with one,
  its index.
* ``verify_checksum`` sets ``checksum_error``; ``update_checksum`` writes only when the
  condition holds.
* ``digest``: BMv2's ``generate_digest`` only records the field-list id; the learning
  engine reads the fields' values after the ingress control has finished (last call
  wins). The ingress control therefore notes which call ran and builds the message at
  its end from the fields' final values (computed values are taken at call time, as the
  temporaries p4c would create; :mod:`softswitch.v1model.blocks` writes that end). Digests
  outside ingress are never delivered by BMv2.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from softswitch import ir
from softswitch.engine.bits import mask
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.codegen_types import scalar_width
from softswitch.engine.codegen_walk import given
from softswitch.engine.target import Primitive
from softswitch.errors import P4Error

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext

DROP_PORT = 511

# field values that can be read again at the end of ingress: a path of attributes (or a
# bool of one) or a literal
_READ_LATE = re.compile(r"^(\(1 if [A-Za-z_][\w.]* else 0\)|[A-Za-z_][\w.]*|\d+)$")


def _arg(ctx: GenContext, e: ir.Call, i: int, sc: Scope, em: Emitter) -> str:
    return ctx.exprs.expr(given(e.args[i]), sc, em)


def _mark_to_drop(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
    if e.args:
        sm = _arg(ctx, e, 0, sc, em)
    elif sc.arch is not None and sc.arch.sm is not None:
        sm = sc.arch.sm
    else:
        raise P4Error("mark_to_drop() needs standard_metadata in scope", e.loc)
    if ctx.trace:
        em.line(f"_tr.note({f'mark_to_drop() at {e.loc}'!r})")
    em.line(f"{sm}.egress_spec = {DROP_PORT}")
    em.line(f"{sm}.mcast_grp = 0")


def _clone_type_constant(e: ir.Call) -> None:
    if not isinstance(e.args[0], (ir.EnumMember, ir.Const)):
        raise P4Error(f"{e.callee.name}: the clone type must be a constant on this target", e.loc)


def _clone(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
    _clone_type_constant(e)
    em.line(f"_ctx.clone_session = {_arg(ctx, e, 1, sc, em)}")
    em.line("_ctx.clone_fl = None")


def _clone_preserving_field_list(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
    _clone_type_constant(e)
    em.line(f"_ctx.clone_session = {_arg(ctx, e, 1, sc, em)}")
    em.line(f"_ctx.clone_fl = {_arg(ctx, e, 2, sc, em)}")


def _field_list_request(attr: str, with_list: bool) -> Primitive:
    """A resubmit/recirculate primitive: store the field-list index (-1: none)."""

    def emit(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
        value = _arg(ctx, e, 0, sc, em) if with_list else "-1"
        em.line(f"_ctx.{attr} = {value}")

    return emit


def _truncate(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
    em.line(f"_ctx.truncate = {_arg(ctx, e, 0, sc, em)}")


def _checksum(update: bool, with_payload: bool) -> Primitive:
    """``verify_checksum*`` (a mismatch sets ``checksum_error``) or ``update_checksum*``
    (writes the checksum field when the condition holds)."""

    def emit(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
        a = e.args
        cond = _arg(ctx, e, 0, sc, em)
        with em.block(f"if {cond}:"):
            h = ctx.externs.hash_of(given(a[3]), given(a[1]), with_payload, sc, em, cond)
            w = scalar_width(given(a[2]).type)
            if update:
                ctx.externs.write_out(a[2], f"({h} & {mask(w):#x})", sc, em)
                return
            with em.block(f"if ({h} & {mask(w):#x}) != {_arg(ctx, e, 2, sc, em)}:"):
                em.line("_ctx.checksum_error = 1")

    return emit


def _digest(ctx: GenContext, e: ir.Call, sc: Scope, em: Emitter) -> None:
    data = e.args[1]
    assert data is not None
    t = ir.strip_newtype(e.type_args[0] if e.type_args else data.type)
    name = getattr(t, "name", "digest")
    ann = getattr(t, "annotations", {}).get("name")
    if ann:
        name = str(ann[0]).strip('"')
        name = name[1:] if name.startswith(".") else name
    data = _unwrap_struct_init(data)
    fields = ctx.exprs.flat_fields(data, sc, em)
    sites = sc.arch.digest_sites if sc.arch is not None else None
    if sites is None:  # not in the ingress control itself: call-time values
        vals = "".join(f"{v}, " for v, _, _ in fields)
        em.line(f"_ctx.digest = ({name!r}, ({vals}))")
        return
    late = []
    for v, _, _ in fields:
        if not _READ_LATE.match(v):
            tmp = ctx.tmp("dv")
            em.line(f"{tmp} = {v}")
            v = tmp
        late.append(v)
    sites.append((name, "".join(f"{v}, " for v in late)))
    em.line(f"_dg = {len(sites)}")


def _unwrap_struct_init(e: ir.Expr) -> ir.Expr:
    """``{a, b}`` typed as a struct: its component expressions (p4c builds the field list
    from them, so the fields themselves are read, not a copy)."""
    if isinstance(e, ir.StructInit):
        t = ir.strip_newtype(e.type)
        order = [f.name for f in getattr(t, "fields", [])]
        if set(order) == set(e.fields):
            elems = [_unwrap_struct_init(e.fields[n]) for n in order]
            return ir.ListExpr(ir.TupleType(tuple(x.type for x in elems)), e.loc, elems)
    return e


PRIMITIVES: dict[str, Primitive] = {
    "mark_to_drop": _mark_to_drop,
    "clone": _clone,
    "clone3": _clone,
    "clone_preserving_field_list": _clone_preserving_field_list,
    "resubmit": _field_list_request("resubmit_fl", with_list=False),
    "resubmit_preserving_field_list": _field_list_request("resubmit_fl", with_list=True),
    "recirculate": _field_list_request("recirculate_fl", with_list=False),
    "recirculate_preserving_field_list": _field_list_request("recirculate_fl", with_list=True),
    "truncate": _truncate,
    "verify_checksum": _checksum(update=False, with_payload=False),
    "verify_checksum_with_payload": _checksum(update=False, with_payload=True),
    "update_checksum": _checksum(update=True, with_payload=False),
    "update_checksum_with_payload": _checksum(update=True, with_payload=True),
    "digest": _digest,
}
