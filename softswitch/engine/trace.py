"""Per-packet tracing: what BMv2's event log shows, as one compact block per packet.

The code generator emits calls on a :class:`PacketTracer` only when a program is compiled
with ``trace=True`` (the instrumented variant); the normal code contains none of them, so
the hot path pays nothing. The architecture (:class:`softswitch.v1model.TracingV1Switch`)
adds the pass boundaries and the fate of each copy (transmit, drop and why).

A trace reads like::

    packet in port 1, 98 bytes
      ingress port=1 NORMAL
        parser: start > parse_ethernet > parse_ipv4 > accept; extracted hdr.ethernet, hdr.ipv4
        table MyIngress.ipv4_lpm: hit -> MyIngress.ipv4_forward(dstAddr=0x202, port=2)
        => to egress port 2
      egress port=2 NORMAL
        => transmit port 2, 98 bytes
      result: port 2 (98 B)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

INSTANCE_TYPES = {
    0: "NORMAL",
    1: "INGRESS_CLONE",
    2: "EGRESS_CLONE",
    3: "COALESCED",
    4: "RECIRC",
    5: "REPLICATION",
    6: "RESUBMIT",
}


@dataclass
class PacketTrace:
    """The trace of one received frame: its event lines, outputs and drop reasons."""

    port: int
    length: int
    lines: list[str] = field(default_factory=list)
    outputs: list[tuple[int, int]] = field(default_factory=list)  # (port, bytes)
    drops: list[str] = field(default_factory=list)  # why each dropped copy was dropped

    def text(self) -> str:
        """The block as logged: a header line and the indented events."""
        return "\n".join([f"packet in port {self.port}, {self.length} bytes", *self.lines])

    def __str__(self) -> str:
        return self.text()


def format_value(value: int, width: int = 0) -> str:
    """Narrow fields (ports, flags) in decimal, wide ones (addresses, keys) in hex."""
    if width > 16:
        return f"0x{value:0{(width + 3) // 4}x}"
    return hex(value) if not width and value >= 1024 else str(value)


class PacketTracer:
    """Collects the events of the packet being processed (one per pipeline; packets are
    processed one at a time under the switch lock)."""

    def __init__(
        self, error_names: Sequence[str], action_params: dict[str, list[tuple[str, int]]]
    ) -> None:
        self.error_names = list(error_names)
        self.action_params = action_params
        self.trace: PacketTrace | None = None
        self._states: list[str] = []
        self._extracted: list[str] = []
        self._depth = 2
        self.pass_notes: list[str] = []  # drop-relevant calls of the current pass

    # ------------------------------------------------------------------ architecture
    def begin(self, port: int, length: int) -> None:
        self.trace = PacketTrace(port, length)
        self._states = []
        self._extracted = []
        self.pass_notes = []

    def end(self) -> PacketTrace:
        trace = self.trace if self.trace is not None else PacketTrace(0, 0)
        if trace.outputs:
            outs = ", ".join(f"port {p} ({n} B)" for p, n in trace.outputs)
            trace.lines.append(f"  result: {outs}")
        else:
            trace.lines.append("  result: dropped (no frame transmitted)")
        self.trace = None
        return trace

    def begin_pass(self, kind: str, port: int, instance_type: int, extra: str = "") -> None:
        """A new ingress or egress pass of the packet or one of its copies."""
        itype = INSTANCE_TYPES.get(instance_type, str(instance_type))
        self._line(f"{kind} port={port} {itype}{extra}", depth=1)
        self.pass_notes = []

    def decision(self, text: str) -> None:
        """What the architecture did after a pass (``=> ...``)."""
        self._line(f"=> {text}")

    def drop(self, reason: str) -> None:
        if self.trace is not None:
            self.trace.drops.append(reason)
        self._line(f"=> drop: {reason}")

    def output(self, port: int, nbytes: int) -> None:
        if self.trace is not None:
            self.trace.outputs.append((port, nbytes))
        self._line(f"=> transmit port {port}, {nbytes} bytes")

    # ------------------------------------------------------------------ generated code
    def state(self, name: str) -> None:
        """The parser entered state ``name``."""
        self._states.append(name)

    def extract(self, what: str) -> None:
        self._extracted.append(what)

    def parser_end(self, code: int) -> int:
        """End of the parser with error ``code`` (returned, so the call can wrap it)."""
        path = " > ".join(self._states) if self._states else "(no state)"
        err = self.error_name(code)
        path += " > accept" if code == 0 or err == "NoError" else f" > reject ({err})"
        text = f"parser: {path}"
        if self._extracted:
            text += "; extracted " + ", ".join(self._extracted)
        else:
            text += "; nothing extracted"
        if code != 0 and err != "NoError":
            text += f"; parser error {err}"
        self._line(text)
        self._states = []
        self._extracted = []
        return code

    def block(self, role: str) -> None:
        """A control block the architecture invoked (not logged for the usual empty ones)."""
        del role

    def table(self, name: str, hit: bool, action: Any) -> None:
        self._line(
            f"table {name}: {'hit' if hit else 'miss'} -> {self._call(action.name, action.args)}"
        )

    def action(self, name: str, args: tuple[int, ...]) -> None:
        self._line(f"action {self._call(name, args)}")

    def note(self, text: str) -> None:
        """A call that matters for the packet's fate (mark_to_drop, exit, clone, ...)."""
        self.pass_notes.append(text)
        self._line(text)

    def log_msg(self, fmt: str, values: tuple[int, ...]) -> None:
        """``log_msg`` output, kept inside the packet's block."""
        parts = fmt.split("{}")
        text = parts[0]
        for i, rest in enumerate(parts[1:]):
            text += (str(values[i]) if i < len(values) else "{}") + rest
        self._line(f"log_msg: {text}")

    # ------------------------------------------------------------------ helpers
    def error_name(self, code: int) -> str:
        if 0 <= code < len(self.error_names):
            return self.error_names[code]
        return str(code)

    def _call(self, name: str, args: tuple[int, ...]) -> str:
        names = self.action_params.get(name, [])
        parts = []
        for i, v in enumerate(args):
            label, width = names[i] if i < len(names) else (f"arg{i}", 0)
            parts.append(f"{label}={format_value(v, width)}")
        return f"{name}({', '.join(parts)})"

    def _line(self, text: str, depth: int | None = None) -> None:
        if self.trace is None:  # code run outside process() (tests calling blocks)
            return
        d = self._depth if depth is None else depth
        self.trace.lines.append("  " * d + text)
