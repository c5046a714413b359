"""The v1model primitives the code generator cannot know about: drop, clone, resubmit,
recirculate, truncate.

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
"""

from __future__ import annotations

from typing import Any

from softswitch import ir
from softswitch.engine.codegen_emit import Emitter, Scope
from softswitch.engine.target import Primitive, TargetSpec
from softswitch.errors import P4Error

DROP_PORT = 511

# V1Switch(parser, verifyChecksum, ingress, egress, computeChecksum, deparser)
ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")


def _arg(gen: Any, e: ir.Call, i: int, sc: Scope, em: Emitter) -> str:
    return str(gen.expr(e.args[i], sc, em))


def _mark_to_drop(gen: Any, e: ir.Call, sc: Scope, em: Emitter) -> None:
    if e.args:
        sm = _arg(gen, e, 0, sc, em)
    elif sc.sm is not None:
        sm = sc.sm
    else:
        raise P4Error("mark_to_drop() needs standard_metadata in scope", e.loc)
    if gen.trace:
        em.line(f"_tr.note({f'mark_to_drop() at {e.loc}'!r})")
    em.line(f"{sm}.egress_spec = {DROP_PORT}")
    em.line(f"{sm}.mcast_grp = 0")


def _clone_type_constant(e: ir.Call) -> None:
    if not isinstance(e.args[0], (ir.EnumMember, ir.Const)):
        raise P4Error(f"{e.callee.name}: the clone type must be a constant on this target", e.loc)


def _clone(gen: Any, e: ir.Call, sc: Scope, em: Emitter) -> None:
    _clone_type_constant(e)
    em.line(f"_ctx.clone_session = {_arg(gen, e, 1, sc, em)}")
    em.line("_ctx.clone_fl = None")


def _clone_preserving_field_list(gen: Any, e: ir.Call, sc: Scope, em: Emitter) -> None:
    _clone_type_constant(e)
    em.line(f"_ctx.clone_session = {_arg(gen, e, 1, sc, em)}")
    em.line(f"_ctx.clone_fl = {_arg(gen, e, 2, sc, em)}")


def _field_list_request(attr: str, with_list: bool) -> Primitive:
    """A resubmit/recirculate primitive: store the field-list index (-1: none)."""

    def emit(gen: Any, e: ir.Call, sc: Scope, em: Emitter) -> None:
        value = _arg(gen, e, 0, sc, em) if with_list else "-1"
        em.line(f"_ctx.{attr} = {value}")

    return emit


def _truncate(gen: Any, e: ir.Call, sc: Scope, em: Emitter) -> None:
    em.line(f"_ctx.truncate = {_arg(gen, e, 0, sc, em)}")


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
}

V1MODEL = TargetSpec(name="v1model", roles=ROLES, primitives=PRIMITIVES)
