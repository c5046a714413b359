"""Extern object instances: the run-time object (register, counter, meter, action profile
or selector) that one instance declaration becomes, bound to a module global."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from softswitch import ir
from softswitch.engine.codegen_types import scalar_width
from softswitch.engine.externs import Counter, Meter, Register
from softswitch.engine.tables import ActionProfile, ActionSelector
from softswitch.errors import UnsupportedError

if TYPE_CHECKING:
    from softswitch.engine.codegen_context import GenContext


def enum_name(e: ir.Expr, default: str) -> str:
    """The member named by ``e`` (a constructor argument such as ``CounterType.packets``)."""
    if isinstance(e, ir.EnumMember):
        return e.member
    return default


class InstanceGen:
    """Creates the object of an extern instance by its extern's name (``new_<extern>``)."""

    def __init__(self, ctx: GenContext) -> None:
        self.ctx = ctx

    def make_extern(self, inst: ir.Instance, path: str) -> str | None:
        """Create the run-time object of an extern instance; its module-level name (None
        for an extern whose state lives elsewhere, such as a table's direct counter)."""
        t = inst.type
        if not isinstance(t, ir.ExternType):
            return None
        name = ir.qualify(path, inst.cp_name)
        args = [self.ctx.exprs.const_value(a) for a in inst.args]
        kind = t.name
        if kind in ("direct_counter", "direct_meter"):
            return None  # attached to their table, see TableGen.make_table
        make = getattr(self, "new_" + kind, None)
        if make is None:
            raise UnsupportedError(f"extern {kind}", inst.loc)
        obj = make(name, t, inst, args)
        return self.ctx.add_global(kind, obj)

    def new_register(
        self, name: str, t: ir.ExternType, inst: ir.Instance, args: list[Any]
    ) -> Register:
        width = scalar_width(t.type_args[0]) if t.type_args else 32
        obj = Register(name, int(args[0]), width)
        self.ctx.out.registers[name] = obj
        return obj

    def new_counter(
        self, name: str, t: ir.ExternType, inst: ir.Instance, args: list[Any]
    ) -> Counter:
        obj = Counter(name, int(args[0]), enum_name(inst.args[1], "packets_and_bytes"))
        self.ctx.out.counters[name] = obj
        return obj

    def new_meter(self, name: str, t: ir.ExternType, inst: ir.Instance, args: list[Any]) -> Meter:
        obj = Meter(name, int(args[0]), enum_name(inst.args[1], "bytes"))
        self.ctx.out.meters[name] = obj
        return obj

    def new_action_profile(
        self, name: str, t: ir.ExternType, inst: ir.Instance, args: list[Any]
    ) -> ActionProfile:
        obj = ActionProfile(name, int(args[0]))
        self.ctx.out.action_profiles[name] = obj
        return obj

    def new_action_selector(
        self, name: str, t: ir.ExternType, inst: ir.Instance, args: list[Any]
    ) -> ActionSelector:
        algo = enum_name(inst.args[0], "crc16")
        obj = ActionSelector(name, int(args[1]), algo, int(args[2]) if len(args) > 2 else 0)
        self.ctx.out.action_profiles[name] = obj
        return obj
