"""p4c-style STF tests (``packet``/``expect``/``add`` ...) run against :class:`Pipeline`.

STF files are how p4c checks BMv2 on its sample programs; reading them with the semantics of
p4c's ``bmv2stf.py`` lets the same files check the built-in target:

* ``expect PORT HEX`` compares nibble by nibble, ``*`` matches any nibble; the received
  packet may be longer than the expectation unless the expectation ends with ``$``;
  ``expect PORT`` alone accepts any number of packets on that port;
* expectations are compared per port, in order, after all commands ran; every port named in a
  ``packet`` or ``expect`` line is checked (an unexpected packet there fails the test),
  packets to other ports are ignored, as BMv2 drops them for lack of an interface;
* ``add TABLE [PRIORITY] FIELD:VALUE ... ACTION(PARAM:VALUE, ...)``: a larger STF priority
  wins (bmv2stf hands BMv2 ``10000 - PRIORITY``); ternary values take their mask from the
  nibbles written (``0x0a**`` -> ``0x0a00 &&& 0xff00``), lpm values without ``/LEN`` take the
  prefix length from the digits written (``0x0a******`` -> ``/8``);
* ``mc_mgrp_create``, ``mc_node_create``, ``mc_node_associate`` and ``mirroring_add`` are the
  BMv2 CLI commands of the same name.

Bad lines raise :class:`StfError` (``FILE:LINE: error: ...``); unknown directives are
logged and skipped.
"""

from __future__ import annotations

import logging
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from p4schema import P4InfoLookupError, resolve_name
from softswitch.errors import TableError

if TYPE_CHECKING:  # the engine is imported when a command needs it
    from softswitch import ir
    from softswitch.engine.externs import Counter, Register
    from softswitch.engine.pre import PacketReplicationEngine
    from softswitch.engine.tables import ActionCall, FieldMatch, Table

log = logging.getLogger(__name__)

_AUTO_PRIORITY_BASE = 1 << 20  # entries of priority tables added without a priority


class StfError(Exception):
    """A malformed or inapplicable STF line, reported as ``FILE:LINE: error: message``."""

    def __init__(self, message: str, file: str = "<stf>", line: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: error: {self.message}"


# ------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Packet:
    port: int
    data: bytes


@dataclass(frozen=True)
class Expect:
    port: int
    pattern: str | None  # upper-case hex nibbles, '*' = any; None = any packets on the port
    exact_length: bool = False


@dataclass(frozen=True)
class AddEntry:
    table: str
    priority: int | None
    keys: tuple[tuple[str, str], ...]
    action: str
    args: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SetDefault:
    table: str
    action: str
    args: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class McGroupCreate:
    group: int


@dataclass(frozen=True)
class McNodeCreate:
    rid: int
    ports: tuple[int, ...]


@dataclass(frozen=True)
class McNodeAssociate:
    group: int
    handle: int


@dataclass(frozen=True)
class MirroringAdd:
    session: int
    port: int


@dataclass(frozen=True)
class RegisterWrite:
    register: str
    index: int
    value: int


@dataclass(frozen=True)
class CheckCounter:
    counter: str
    index: int
    kind: str  # "packets" or "bytes"
    op: str
    value: int


@dataclass(frozen=True)
class Wait:
    pass


Command = (
    Packet
    | Expect
    | AddEntry
    | SetDefault
    | McGroupCreate
    | McNodeCreate
    | McNodeAssociate
    | MirroringAdd
    | RegisterWrite
    | CheckCounter
    | Wait
)


@dataclass(frozen=True)
class StfLine:
    """One parsed command and where it came from."""

    command: Command
    file: str
    line: int


# -------------------------------------------------------------------------- parsing

_NUMBER_RE = re.compile(r"^(0x[0-9a-f_]+|0b[01_]+|0o[0-7_]+|[0-9][0-9_]*)$", re.IGNORECASE)


def parse_int(text: str) -> int:
    """A decimal, ``0x``, ``0b`` or ``0o`` number (``_`` separators allowed)."""
    t = text.strip()
    if not _NUMBER_RE.match(t):
        raise ValueError(f"'{text}' is not a number")
    return int(t.replace("_", ""), 0)


def _split_args(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition(":")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"action argument '{part}' is not NAME:VALUE")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def _parse_action_call(text: str) -> tuple[str, tuple[tuple[str, str], ...], str]:
    """``act(a:1, b:2) rest`` -> (name, args, rest)."""
    open_at = text.find("(")
    close_at = text.find(")", open_at + 1)
    if open_at < 0 or close_at < 0:
        raise ValueError("expected an action call ACTION(PARAM:VALUE, ...)")
    name = text[:open_at].strip()
    if not name or " " in name:
        raise ValueError(f"bad action name '{name}'")
    return name, _split_args(text[open_at + 1 : close_at]), text[close_at + 1 :].strip()


def _parse_add(rest: str) -> AddEntry:
    open_at = rest.find("(")
    if open_at < 0:
        raise ValueError("'add' needs an action: add TABLE [PRIORITY] KEY:VALUE ... ACTION(...)")
    head = rest[:open_at].split()
    if len(head) < 2:
        raise ValueError("'add' needs a table name and an action")
    table, words, action_name = head[0], head[1:-1], head[-1]
    priority = None
    if words and re.fullmatch(r"[0-9]+", words[0]):
        priority = int(words[0])
        words = words[1:]
    keys = []
    for word in words:
        name, sep, value = word.partition(":")
        if not sep or not name or not value:
            raise ValueError(f"key '{word}' is not FIELD:VALUE")
        keys.append((name, value))
    _, args, tail = _parse_action_call(action_name + rest[open_at:])
    if tail and not tail.startswith("="):
        raise ValueError(f"unexpected text after the action: '{tail}'")
    return AddEntry(table, priority, tuple(keys), action_name, args)


def _ints(words: list[str], count: int | None, usage: str) -> list[int]:
    if count is not None and len(words) != count:
        raise ValueError(f"usage: {usage}")
    try:
        return [parse_int(w) for w in words]
    except ValueError as err:
        raise ValueError(f"{err}; usage: {usage}") from None


_CHECK_RE = re.compile(
    r"^(?P<name>[\w.$\[\]]+)\s*\(\s*(?P<index>\w+)\s*\)\s*(?:(?P<kind>packets|bytes)\s*)?"
    r"(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>\w+)$"
)
_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _packet_bytes(hexdata: str) -> bytes:
    """Bytes of a ``packet`` line as p4c's STF driver builds them: pairs of digits, and a
    lone last digit (an odd count, as in some p4c samples) is a byte of its own value."""
    data = bytes.fromhex(hexdata[: len(hexdata) - len(hexdata) % 2])
    if len(hexdata) % 2:
        data += bytes([int(hexdata[-1], 16)])
    return data


def _parse_command(first: str, rest: str) -> Command | None:
    """The command a directive line gives (None: a directive we do not know)."""
    parse = _COMMANDS.get(first)
    return None if parse is None else parse(rest, rest.split())


def _parse_packet(rest: str, words: list[str]) -> Command:
    if not words:
        raise ValueError("usage: packet PORT HEX")
    port = _ints(words[:1], 1, "packet PORT HEX")[0]
    hexdata = "".join(words[1:])
    if not re.fullmatch(r"[0-9a-fA-F]*", hexdata):
        raise ValueError(f"packet data must be hex digits: '{hexdata}'")
    return Packet(port, _packet_bytes(hexdata))


def _parse_expect(rest: str, words: list[str]) -> Command:
    if not words:
        raise ValueError("usage: expect PORT [HEX]")
    port = _ints(words[:1], 1, "expect PORT [HEX]")[0]
    pattern = "".join(words[1:]).upper()
    exact = pattern.endswith("$")
    pattern = pattern.rstrip("$")
    if not re.fullmatch(r"[0-9A-F*]*", pattern):
        raise ValueError(f"expected data must be hex digits or '*': '{pattern}'")
    if not pattern and not exact:
        return Expect(port, None)
    return Expect(port, pattern, exact)


def _parse_setdefault(rest: str, words: list[str]) -> Command:
    if not words:
        raise ValueError("usage: setdefault TABLE ACTION(PARAM:VALUE, ...)")
    table = words[0]
    name, args, tail = _parse_action_call(rest.strip()[len(table) :].strip())
    if tail:
        raise ValueError(f"unexpected text after the action: '{tail}'")
    return SetDefault(table, name, args)


def _parse_mc_node_create(rest: str, words: list[str]) -> Command:
    values = _ints(words, None, "mc_node_create RID PORT...")
    if not values:
        raise ValueError("usage: mc_node_create RID PORT...")
    return McNodeCreate(values[0], tuple(values[1:]))


def _parse_register_write(rest: str, words: list[str]) -> Command:
    if len(words) != 3:
        raise ValueError("usage: register_write REGISTER INDEX VALUE")
    index, value = _ints(words[1:], 2, "register_write REGISTER INDEX VALUE")
    return RegisterWrite(words[0], index, value)


def _parse_check_counter(rest: str, words: list[str]) -> Command:
    m = _CHECK_RE.match(rest.strip())
    if not m:
        raise ValueError("usage: check_counter COUNTER(INDEX) [packets|bytes] OP VALUE")
    index, value = _ints([m["index"], m["value"]], 2, "check_counter COUNTER(INDEX) ...")
    return CheckCounter(m["name"], index, m["kind"] or "packets", m["op"], value)


# one parser per directive: (the text after the directive, its words) -> command
_COMMANDS: dict[str, Callable[[str, list[str]], Command]] = {
    "packet": _parse_packet,
    "expect": _parse_expect,
    "add": lambda rest, words: _parse_add(rest),
    "setdefault": _parse_setdefault,
    "mc_mgrp_create": lambda rest, words: McGroupCreate(
        _ints(words, 1, "mc_mgrp_create GROUP")[0]
    ),
    "mc_node_create": _parse_mc_node_create,
    "mc_node_associate": lambda rest, words: McNodeAssociate(
        *_ints(words, 2, "mc_node_associate GROUP NODE_HANDLE")
    ),
    "mirroring_add": lambda rest, words: MirroringAdd(
        *_ints(words, 2, "mirroring_add SESSION PORT")
    ),
    "register_write": _parse_register_write,
    "check_counter": _parse_check_counter,
    "wait": lambda rest, words: Wait(),
}


def parse_stf(text: str, filename: str = "<stf>") -> list[StfLine]:
    """Parse an STF file; unknown directives are logged and skipped."""
    out: list[StfLine] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first, _, rest = line.partition(" ")
        first = first.lower()
        try:
            command = _parse_command(first, rest.strip())
        except ValueError as err:
            raise StfError(str(err), filename, number) from None
        if command is None:
            log.warning("%s:%d: ignoring unknown STF command '%s'", filename, number, first)
            continue
        out.append(StfLine(command, filename, number))
    return out


# ---------------------------------------------------------------------- key values


def _digits_mask(digits: str, bits_per_digit: int) -> tuple[int, int]:
    """Value (``*`` as 0) and mask (1s under written digits) of a wildcarded literal."""
    value = mask = 0
    full_digit = (1 << bits_per_digit) - 1
    for ch in digits:
        if ch == "_":
            continue
        value <<= bits_per_digit
        mask <<= bits_per_digit
        if ch == "*":
            continue
        value |= int(ch, 1 << bits_per_digit)
        mask |= full_digit
    return value, mask


def _wildcard_literal(text: str) -> tuple[int, int, int] | None:
    """(value, mask, digits written without '*') of a 0x/0b/0o literal, or None if decimal."""
    t = text.strip().lower()
    bases = {"0x": 4, "0b": 1, "0o": 3}
    prefix = t[:2]
    if prefix not in bases:
        return None
    digits = t[2:]
    if not digits or not re.fullmatch(r"[0-9a-f*_]+", digits):
        raise ValueError(f"'{text}' is not a number")
    bits = bases[prefix]
    try:
        value, mask = _digits_mask(digits, bits)
    except ValueError:
        raise ValueError(f"'{text}' is not a number") from None
    written = sum(1 for ch in digits if ch not in "*_") * bits
    return value, mask, written


def _key_value(text: str) -> int:
    t = text.strip().lower()
    if t in ("true", "false"):
        return int(t == "true")
    if "*" in t:
        raise ValueError(f"'{text}': wildcards are allowed only in ternary and lpm keys")
    return parse_int(t)


def _check_width(value: int, width: int, what: str) -> int:
    if value < 0 or value >> width:
        raise ValueError(f"{what}: value {value:#x} does not fit in {width} bits")
    return value


def key_match(kind: str, text: str, width: int, name: str) -> FieldMatch | None:
    """The FieldMatch for STF key value ``text`` of a ``kind`` key ``width`` bits wide."""
    from softswitch.engine.tables import FieldMatch

    full = (1 << width) - 1
    t = text.strip()
    if kind == "exact":
        return FieldMatch(_check_width(_key_value(t), width, name))
    if kind in ("optional", "ternary", "range") and t in ("*", "_"):
        return None
    if kind == "optional":
        return FieldMatch(_check_width(_key_value(t), width, name), full)
    if kind == "ternary":
        return _ternary_key(t, width, name)
    if kind == "lpm":
        return _lpm_key(t, width, name)
    if kind == "range":
        return _range_key(t, width, name)
    raise ValueError(f"{name}: match kind '{kind}' cannot be set from STF")


def _value_and(t: str, sep: str, second: Callable[[str], int], literal_part: int,
               whole: int) -> tuple[int, int]:
    """A key's value and its mask or prefix length: ``value SEP second``; else a 0x/0b/0o
    literal with wildcard digits (its value and item ``literal_part`` of
    :func:`_wildcard_literal`); else a value and ``whole``."""
    if sep in t:
        v_text, s_text = t.split(sep, 1)
        return _key_value(v_text), second(s_text)
    lit = _wildcard_literal(t)
    if lit is None:
        return _key_value(t), whole
    return lit[0], lit[literal_part]


def _ternary_key(t: str, width: int, name: str) -> FieldMatch | None:
    """``value &&& mask``, a literal with wildcard digits, or a value (all bits)."""
    from softswitch.engine.tables import FieldMatch

    full = (1 << width) - 1
    value, mask = _value_and(t, "&&&", _key_value, 1, full)
    _check_width(value, width, name)
    mask &= full
    return None if mask == 0 else FieldMatch(value & mask, mask)


def _lpm_key(t: str, width: int, name: str) -> FieldMatch | None:
    """``value/length``, a literal with wildcard digits at its end, or a value (the
    whole width)."""
    from softswitch.engine.tables import FieldMatch

    full = (1 << width) - 1
    value, plen = _value_and(t, "/", parse_int, 2, width)
    _check_width(value, width, name)
    if plen > width:
        raise ValueError(f"{name}: prefix length {plen} is longer than the field ({width})")
    if plen == 0:
        return None
    pmask = full ^ ((1 << (width - plen)) - 1)
    return FieldMatch(value & pmask, prefix_len=plen)


def _range_key(t: str, width: int, name: str) -> FieldMatch:
    """``low->high``, ``low..high`` or one value."""
    from softswitch.engine.tables import FieldMatch

    for sep in ("->", ".."):
        if sep in t:
            lo_text, hi_text = t.split(sep, 1)
            low = _check_width(_key_value(lo_text), width, name)
            high = _check_width(_key_value(hi_text), width, name)
            return FieldMatch(low, high=high)
    value = _check_width(_key_value(t), width, name)
    return FieldMatch(value, high=value)


def _normalise_key_name(name: str) -> str:
    """bmv2stf spellings: ``h$0.f`` -> ``h[0].f``; ``h.valid``/``h.$valid$`` -> ``h.isValid()``."""
    name = re.sub(r"\$(\d+)", r"[\1]", name)
    for suffix in (".$valid$", ".valid"):
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".isValid()"
    return name


# -------------------------------------------------------------------------- running


class _PipelineLike(Protocol):
    tables: dict[str, Table]
    registers: dict[str, Register]
    counters: dict[str, Counter]
    pre: PacketReplicationEngine
    program: ir.Program

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]: ...


@dataclass
class StfResult:
    """Outcome of one STF run: every mismatch (first one first) and the packets seen."""

    mismatches: list[str] = field(default_factory=list)
    outputs: dict[int, list[bytes]] = field(default_factory=dict)
    packets_sent: int = 0
    expectations: int = 0

    @property
    def passed(self) -> bool:
        return not self.mismatches

    @property
    def first_mismatch(self) -> str | None:
        return self.mismatches[0] if self.mismatches else None


def compare_packet(pattern: str, exact_length: bool, received: bytes) -> str | None:
    """Why ``received`` does not match the expectation, or None when it does."""
    got = received.hex().upper()
    if len(got) < len(pattern):
        return f"packet too short ({len(received)} bytes)"
    if exact_length and len(got) != len(pattern):
        return f"packet longer than expected ({len(received)} bytes, expected {len(pattern) // 2})"
    for i, ch in enumerate(pattern):
        if ch != "*" and ch != got[i]:
            return f"differs at nibble {i}"
    return None


class StfRunner:
    """Applies parsed STF commands to a pipeline and checks the expectations."""

    def __init__(
        self,
        pipeline: _PipelineLike,
        action_params: dict[str, list[tuple[str, int]]] | None = None,
    ) -> None:
        """``action_params`` (action -> [(param, width)]) defaults to the program's P4Info."""
        self.pipeline = pipeline
        self._action_params = action_params
        self._auto_priority: dict[str, int] = {}

    # -------------------------------------------------------------- names

    def _params_of(self, action: str) -> list[tuple[str, int]]:
        if self._action_params is None:
            from softswitch.p4info import build_p4info

            p4info = build_p4info(self.pipeline.program)
            self._action_params = {
                a.preamble.name: [(p.name, p.bitwidth) for p in a.params] for a in p4info.actions
            }
        try:
            return self._action_params[action]
        except KeyError:
            raise ValueError(f"action '{action}' is not visible to the control plane") from None

    def _table(self, name: str) -> Table:
        full = resolve_name(name, list(self.pipeline.tables), "table", plain_suffix=True)
        return self.pipeline.tables[full]

    def _action_call(
        self, table: Table, name: str, args: tuple[tuple[str, str], ...]
    ) -> ActionCall:
        from softswitch.engine.tables import ActionCall

        action = resolve_name(name, list(table.action_names), "action", plain_suffix=True)
        params = self._params_of(action)
        given = dict(args)
        unknown = [k for k in given if k not in {p for p, _ in params}]
        if unknown:
            names = ", ".join(p for p, _ in params) or "none"
            raise ValueError(f"action {action} has no parameter '{unknown[0]}' (params: {names})")
        values = []
        for pname, width in params:
            if pname not in given:
                raise ValueError(f"action {action}: missing parameter '{pname}'")
            try:
                value = _key_value(given[pname])
            except ValueError as err:
                raise ValueError(f"action {action}, parameter {pname}: {err}") from None
            values.append(_check_width(value, width, f"action {action}, parameter {pname}"))
        return ActionCall(action, tuple(values))

    # ------------------------------------------------------------ commands

    def _add(self, cmd: AddEntry) -> None:
        from softswitch.engine.tables import TableEntry

        table = self._table(cmd.table)
        keys = table.keys
        names = [k.name for k in keys]
        matches: list[FieldMatch | None] = [None] * len(keys)
        for raw_name, value in cmd.keys:
            key_name = _normalise_key_name(raw_name)
            what = f"key field of table {table.name}"
            full = resolve_name(key_name, names, what, plain_suffix=True)
            index = names.index(full)
            kf = keys[index]
            kind = getattr(kf.match_kind, "value", kf.match_kind)
            matches[index] = key_match(kind, value, kf.width, full)
        for kf, fm in zip(keys, matches, strict=True):
            kind = getattr(kf.match_kind, "value", kf.match_kind)
            if fm is None and kind == "exact":
                raise ValueError(f"table {table.name}: no value for exact key {kf.name}")
        action = self._action_call(table, cmd.action, cmd.args)
        priority = 0
        if getattr(table, "requires_priority", False):
            if cmd.priority is not None:
                priority = cmd.priority + 1  # STF 0 is valid; P4Runtime needs > 0
            else:
                count = self._auto_priority.get(table.name, 0)
                self._auto_priority[table.name] = count + 1
                priority = _AUTO_PRIORITY_BASE - count  # first added wins
        entry = TableEntry(tuple(matches), action, priority=priority)
        table.insert(entry)

    def apply(
        self,
        item: StfLine,
        result: StfResult,
        expected: dict[int, list[Expect]],
        checked_ports: set[int],
    ) -> None:
        """Run one command (packets are processed at once)."""
        cmd = item.command
        try:
            if isinstance(cmd, Packet):
                checked_ports.add(cmd.port)
                result.packets_sent += 1
                for port, frame in self.pipeline.process(cmd.port, cmd.data):
                    result.outputs.setdefault(port, []).append(frame)
            elif isinstance(cmd, Expect):
                checked_ports.add(cmd.port)
                expected.setdefault(cmd.port, []).append(cmd)
                result.expectations += 1
            elif isinstance(cmd, CheckCounter):
                self._check_counter(cmd, item, result)
            else:
                self._configure(cmd)
        except (ValueError, P4InfoLookupError, TableError) as err:
            text = err.message if isinstance(err, TableError) else str(err)
            raise StfError(text, item.file, item.line) from None

    def _configure(self, cmd: Command) -> None:
        """A control-plane command: table entries and defaults, multicast, mirroring,
        register writes."""
        if isinstance(cmd, AddEntry):
            self._add(cmd)
        elif isinstance(cmd, SetDefault):
            table = self._table(cmd.table)
            table.set_default(self._action_call(table, cmd.action, cmd.args))
        elif isinstance(cmd, McGroupCreate):
            self.pipeline.pre.mc_mgrp_create(cmd.group)
        elif isinstance(cmd, McNodeCreate):
            self.pipeline.pre.mc_node_create(cmd.rid, list(cmd.ports))
        elif isinstance(cmd, McNodeAssociate):
            self.pipeline.pre.mc_node_associate(cmd.group, cmd.handle)
        elif isinstance(cmd, MirroringAdd):
            self.pipeline.pre.set_clone_session(cmd.session, cmd.port)
        elif isinstance(cmd, RegisterWrite):
            full = resolve_name(
                cmd.register, list(self.pipeline.registers), "register", plain_suffix=True
            )
            self.pipeline.registers[full].write(cmd.index, cmd.value)

    def _check_counter(self, cmd: CheckCounter, item: StfLine, result: StfResult) -> None:
        full = resolve_name(
            cmd.counter, list(self.pipeline.counters), "counter", plain_suffix=True
        )
        counter = self.pipeline.counters[full]
        values = counter.packets if cmd.kind == "packets" else counter.bytes
        if not 0 <= cmd.index < len(values):
            raise ValueError(f"counter {full} has no index {cmd.index}")
        actual = values[cmd.index]
        if not _OPS[cmd.op](actual, cmd.value):
            result.mismatches.append(
                f"{item.file}:{item.line}: counter {full}[{cmd.index}] {cmd.kind} is {actual}, "
                f"expected {cmd.op} {cmd.value}"
            )

    def run(self, lines: list[StfLine]) -> StfResult:
        """Run every command, then compare the expectations port by port."""
        result = StfResult()
        expected: dict[int, list[Expect]] = {}
        checked: set[int] = set()
        for item in lines:
            self.apply(item, result, expected, checked)
        for port in sorted(checked):
            wants = expected.get(port, [])
            if any(w.pattern is None for w in wants):
                continue  # 'expect PORT' alone: anything goes on that port
            got = result.outputs.get(port, [])
            for i, want in enumerate(wants):
                assert want.pattern is not None
                if i >= len(got):
                    result.mismatches.append(
                        f"port {port}: expected {want.pattern}{'$' if want.exact_length else ''}"
                        f" got nothing (packet {i} of {len(wants)} expected)"
                    )
                    break
                why = compare_packet(want.pattern, want.exact_length, got[i])
                if why is not None:
                    result.mismatches.append(
                        f"port {port}: expected {want.pattern} got {got[i].hex().upper()} ({why})"
                    )
            for extra in got[len(wants) :]:
                result.mismatches.append(
                    f"port {port}: unexpected packet {extra.hex().upper()} "
                    f"({len(got)} received, {len(wants)} expected)"
                )
        return result


def run_stf(pipeline: _PipelineLike, text: str, filename: str = "<stf>") -> StfResult:
    """Parse and run an STF text against ``pipeline``."""
    return StfRunner(pipeline).run(parse_stf(text, filename))


def run_stf_file(pipeline: _PipelineLike, path: str | Path) -> StfResult:
    """Parse and run the STF file at ``path`` against ``pipeline``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise StfError(f"cannot read STF file: {err.strerror}", str(p), 0) from None
    return run_stf(pipeline, text, str(p))
