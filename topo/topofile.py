"""Topology files: the YAML/JSON description of a testbed network (docs/topology.md).

A file lists switches (role, target, program, device options), hosts (GPUs, data-server
role, intra-host bandwidth), switch-to-switch links (rate, delay, loss, queue) and, optionally,
aggregation jobs. Rates and delays carry units (``bw: 100G``, ``delay: 2us``; a bare rate
number is Mbit/s) and are read by :mod:`vtime.units` only.
Files may declare ``params`` (with defaults and bounds) and repeat list entries with
``foreach``/``when`` and ``{expression}`` templates, so one file describes a family of
networks (``spineleaf.yaml`` with ``spines``, ``leaves``, ``hosts``).

:func:`load_spec` reads a file, checks it against :data:`FILE_SCHEMA` (jsonschema), expands
the templates, checks every expanded entry against its own schema and the graph rules (names
unique, links between known switches, ports free), and returns a :class:`TopologySpec`.
Every problem is a :class:`TopologySpecError` whose message names the file, the path inside
it (``switches[2].role``, with the YAML line when known) and the bad value. Nothing here
needs Mininet or root: the simulator reads the same files.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from topo.errors import TopologyError
from vtime import UnitError, parse_delay, parse_rate

FORMAT_VERSION = 1
FILES_DIR = Path(__file__).resolve().parent / "files"
ROLES = ("leaf", "aggregation", "spine", "core")  # bottom to top
HOST_ROLES = ("worker", "data")
TARGETS = ("softswitch", "bmv2")
PARAM_TYPES = ("rate", "delay")  # parameters read with units (vtime.units)


class TopologySpecError(TopologyError):
    """A topology file that cannot be read or does not describe a valid network."""


# --------------------------------------------------------------------------- schema

_TEMPLATE = {"type": "string", "pattern": r"\{.*\}"}


def _or_template(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, _TEMPLATE]}


def _is_rate(value: object) -> bool:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        parse_rate(value, "")  # raises UnitError: _describe shows its message
    return True


def _is_delay(value: object) -> bool:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        parse_delay(value, "")
    return True


#: ``format: rate`` / ``format: delay`` in the schemas below: strings (and delays' numbers)
#: the units parser accepts. Built once, never changed.
FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("rate", raises=UnitError)(_is_rate)
FORMATS.checks("delay", raises=UnitError)(_is_delay)

_NAME = {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9]*$", "maxLength": 10}
_PORT = {"type": "integer", "minimum": 1, "maximum": 510}
#: A rate: a number (Mbit/s) or a string with units (``100G``, ``500k``, ``150GB/s``).
_RATE = {"type": ["number", "string", "null"], "exclusiveMinimum": 0, "format": "rate",
         "description": "bits/s with k, M, G or T (100G, 500k), B/s for bytes (150GB/s); a "
                        "bare number is Mbit/s; null: unshaped"}
#: A delay: a string with units (``2us``, ``1.5ms``), or 0.
_DELAY = {"type": ["string", "number", "null"], "format": "delay",
          "description": "a delay with ns, us, ms or s (2us, 1.5ms); only 0 may be bare"}
_LINK_SHAPE: dict[str, dict[str, Any]] = {
    "bw": _RATE,
    "delay": _DELAY,
    "loss": {"type": ["number", "null"], "minimum": 0, "maximum": 100},
    "queue": {"type": ["integer", "null"], "minimum": 1, "maximum": 100000},
}
_SWITCH_OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "device_id": {"type": "integer", "minimum": 0, "maximum": 4095},
        "cpu_port": {"type": ["integer", "null"], "minimum": 1, "maximum": 510},
        "grpc_port": {"type": "integer", "minimum": 1024, "maximum": 65535},
    },
}

#: Where a node runs with ``make run servers=A,B``: an index into those servers or one of
#: their names (topo.cluster); ignored on one machine.
_SERVER: dict[str, Any] = {"anyOf": [{"type": "integer", "minimum": 0},
                                     {"type": "string", "minLength": 1}, {"type": "null"}]}

#: Concrete entries (after template expansion).
SWITCH_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name", "role"],
    "properties": {
        "name": _NAME, "role": {"enum": list(ROLES)},
        "target": {"enum": [*TARGETS, None]},
        "program": {"type": ["string", "null"], "minLength": 1},
        "options": _SWITCH_OPTIONS,
        "server": _SERVER,
    },
}
HOST_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name", "switch"],
    "properties": {
        "name": _NAME, "switch": _NAME, "port": _PORT,
        "gpus": {"type": "integer", "minimum": 0, "maximum": 1024},
        "role": {"enum": list(HOST_ROLES)},
        "intra_bw": _RATE,
        "link": {"type": "object", "additionalProperties": False, "properties": _LINK_SHAPE},
        "server": _SERVER,
    },
}
LINK_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["a", "b"],
    "properties": {"a": _NAME, "b": _NAME, "a_port": _PORT, "b_port": _PORT, **_LINK_SHAPE},
}
JOB_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"},
        "hosts": {"anyOf": [{"const": "all"},
                            {"type": "array", "items": _NAME, "minItems": 1}]},
        "root": {"type": ["string", "null"]},
        "credits": {"type": "integer", "minimum": 1},
        "slots": {"type": "integer", "minimum": 1},
        "msg_pkts": {"type": ["integer", "null"], "minimum": 1},
    },
}
_ENTRY_SCHEMAS = {"switches": SWITCH_SCHEMA, "hosts": HOST_SCHEMA, "links": LINK_SCHEMA,
                  "jobs": JOB_SCHEMA}


def _raw_entry(schema: dict[str, Any]) -> dict[str, Any]:
    """The file-level schema of a list entry: every field may be a ``{template}``, and an
    entry may carry ``foreach`` and ``when``."""
    props = {k: _or_template(v) if k not in ("options", "link") else v
             for k, v in schema["properties"].items()}
    if "options" in props:
        props["options"] = {**_SWITCH_OPTIONS, "properties": {
            k: _or_template(v) for k, v in _SWITCH_OPTIONS["properties"].items()}}
    if "link" in props:
        props["link"] = {"type": "object", "additionalProperties": False,
                         "properties": {k: _or_template(v) for k, v in _LINK_SHAPE.items()}}
    props["foreach"] = {"type": "object", "minProperties": 1,
                        "propertyNames": {"pattern": r"^[a-z_][a-z0-9_]*$"},
                        "additionalProperties": {"type": ["string", "integer", "array"]}}
    props["when"] = {"type": ["string", "boolean"]}
    return {"type": "object", "additionalProperties": False, "required": schema["required"],
            "properties": props}


#: The whole file, before template expansion.
FILE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False, "required": ["schema", "switches"],
    "properties": {
        "schema": {"const": FORMAT_VERSION},
        "kind": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"},
        "description": {"type": "string"},
        "target": {"enum": [*TARGETS, None]},
        "program": {"type": ["string", "null"]},
        "params": {
            "type": "object",
            "propertyNames": {"pattern": r"^[a-z_][a-z0-9_]*$"},
            "additionalProperties": {
                "type": "object", "additionalProperties": False, "required": ["default"],
                "properties": {"default": {"type": ["integer", "number", "string", "boolean",
                                                   "null"]},
                               "type": {"enum": list(PARAM_TYPES)},
                               "min": {"type": "number"}, "max": {"type": "number"},
                               "help": {"type": "string"}},
            },
        },
        "defaults": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "host_link": {"type": "object", "additionalProperties": False,
                              "properties": {k: _or_template(v) for k, v in _LINK_SHAPE.items()}},
                "fabric_link": {"type": "object", "additionalProperties": False,
                                "properties": {k: _or_template(v)
                                               for k, v in _LINK_SHAPE.items()}},
                "gpus": _or_template({"type": "integer", "minimum": 0, "maximum": 1024}),
                "intra_bw": _or_template(_RATE),
                "cpu_port": _or_template({"type": ["integer", "null"], "minimum": 1,
                                          "maximum": 510}),
            },
        },
        **{key: {"type": "array", "items": _raw_entry(schema)}
           for key, schema in _ENTRY_SCHEMAS.items()},
    },
}


# --------------------------------------------------------------------------- the result

@dataclass(frozen=True)
class LinkShapeSpec:
    """Emulated rate (bits/s, None = unshaped), delay (seconds) and loss (percent) (both
    need netem), queue (packets, None = default)."""

    bw_bps: float | None = None
    delay_s: float | None = None
    loss: float | None = None
    queue: int | None = None


@dataclass(frozen=True)
class SwitchSpec:
    name: str
    role: str
    target: str | None = None
    program: str | None = None
    device_id: int | None = None
    cpu_port: int | None = None
    grpc_port: int | None = None
    own_cpu_port: bool = False  # cpu_port came from the switch's options, not the defaults
    server: int | str | None = None  # make run servers=...: an index or a name (topo.cluster)
    where: str = ""
    at: str = ""  # "file:line" of the entry


@dataclass(frozen=True)
class HostSpec:
    name: str
    switch: str
    gpus: int
    role: str = "worker"
    port: int | None = None
    link: LinkShapeSpec = LinkShapeSpec()
    intra_bw_bps: float | None = None  # bits/s between its GPUs; None: the workload default
    server: int | str | None = None  # make run servers=...: an index or a name (topo.cluster)
    where: str = ""
    at: str = ""


@dataclass(frozen=True)
class LinkSpec:
    a: str
    b: str
    a_port: int | None = None
    b_port: int | None = None
    shape: LinkShapeSpec = LinkShapeSpec()
    where: str = ""
    at: str = ""


@dataclass(frozen=True)
class JobSpec:
    """An aggregation job the file asks for (``make run`` creates the first)."""

    name: str
    hosts: tuple[str, ...] | None = None  # None: every worker host
    root: str | None = None
    credits: int | None = None
    slots: int | None = None
    msg_pkts: int | None = None


@dataclass(frozen=True)
class TopologySpec:
    """A topology file, parameters applied and templates expanded."""

    source: str
    kind: str
    switches: tuple[SwitchSpec, ...]
    hosts: tuple[HostSpec, ...]
    links: tuple[LinkSpec, ...]
    jobs: tuple[JobSpec, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    target: str | None = None
    program: str | None = None
    cpu_port: int | None = 255
    description: str = ""

    def switch(self, name: str) -> SwitchSpec:
        for sw in self.switches:
            if sw.name == name:
                return sw
        raise KeyError(name)

    def shapes(self) -> list[LinkShapeSpec]:
        """Every distinct link shape (hosts' and fabric links')."""
        return list(dict.fromkeys([h.link for h in self.hosts] + [ln.shape for ln in self.links]))


# --------------------------------------------------------------------------- expressions

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "int": int, "float": float,
                                         "ceil": math.ceil, "floor": math.floor}


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    """Evaluates a template expression: numbers, strings, None/True/False, parameter and
    loop names, arithmetic, comparisons, ``and``/``or``/``not``, ``x if c else y`` and
    ``min max int float ceil floor``. Anything else is refused (no attribute access, no
    arbitrary calls). Raises ValueError with the reason."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"bad expression {text!r}: {exc.msg}") from None

    try:
        return _ev(tree.body, text, env)
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise ValueError(f"cannot evaluate {text!r}: {exc}") from None


def _ev(node: ast.AST, text: str, env: Mapping[str, Any]) -> Any:
    """The value of one node of template expression ``text``."""

    def ev(child: ast.AST) -> Any:
        return _ev(child, text, env)

    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | None):
        return node.value
    if isinstance(node, ast.Name):
        return _name(node.id, text, env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
        return _unary(node.op, ev(node.operand))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
        return _CMPOPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
    if isinstance(node, ast.BoolOp):
        values = [ev(v) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        return ev(node.body) if ev(node.test) else ev(node.orelse)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS and not node.keywords):
        return _FUNCS[node.func.id](*[ev(a) for a in node.args])
    raise ValueError(f"unsupported expression {ast.unparse(node)!r} in {text!r}")


def _name(name: str, text: str, env: Mapping[str, Any]) -> Any:
    """A parameter or loop name, or True/False/None."""
    if name in env:
        return env[name]
    if name in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[name]
    raise ValueError(f"unknown name {name!r} in {text!r} (known: "
                     f"{', '.join(sorted(env)) or 'none'})")


def _unary(op: ast.unaryop, value: Any) -> Any:
    if isinstance(op, ast.USub):
        return -value
    return value if isinstance(op, ast.UAdd) else not value


_PIECE = re.compile(r"\{([^{}]*)\}")


def expand_value(value: Any, env: Mapping[str, Any]) -> Any:
    """A string that is one ``{expr}`` becomes the expression's value (any type); a string
    with ``{expr}`` pieces inside text becomes text; lists and objects are expanded item by
    item; anything else is returned as is."""
    if isinstance(value, str):
        whole = _PIECE.fullmatch(value)
        if whole:
            return evaluate(whole.group(1), env)
        return _PIECE.sub(lambda m: _fmt(evaluate(m.group(1), env)), value)
    if isinstance(value, list):
        return [expand_value(v, env) for v in value]
    if isinstance(value, dict):
        return {k: expand_value(v, env) for k, v in value.items()}
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _range(spec: Any, env: Mapping[str, Any]) -> list[Any]:
    """``"A..B"`` (inclusive, expressions allowed), an integer expression N (1..N), or a list."""
    if isinstance(spec, list):
        return [expand_value(v, env) for v in spec]
    if isinstance(spec, int) and not isinstance(spec, bool):
        return list(range(1, spec + 1))
    text = str(spec)
    if ".." in text:
        low, _, high = text.partition("..")
        a, b = evaluate(low.strip(" {}"), env), evaluate(high.strip(" {}"), env)
    else:
        a, b = 1, evaluate(text.strip(" {}"), env)
    for v in (a, b):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"range {text!r}: bounds must be integers, got {v!r}")
    return list(range(a, b + 1))


def _expand_entries(entries: Sequence[Any], env: Mapping[str, Any], where: str,
                    source: str, node: yaml.Node | None
                    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Yields (file:line, place, concrete entry) for each list entry, repeated over its
    ``foreach`` (the first variable outermost) and kept only where its ``when`` holds."""
    for i, raw in enumerate(entries):
        place = f"{where}[{i}]"
        line = _line(node, [where, i])
        at = f"{source}:{line}" if line else source
        loops = raw.get("foreach", {})
        body = {k: v for k, v in raw.items() if k not in ("foreach", "when")}

        def combos(names: list[str], scope: dict[str, Any], place: str = place,
                   loops: Mapping[str, Any] = loops, at: str = at) -> Iterator[dict[str, Any]]:
            if not names:
                yield scope
                return
            name = names[0]
            try:
                values = _range(loops[name], scope)
            except ValueError as exc:
                raise TopologySpecError(f"{at}: {place}.foreach.{name}: {exc}") from None
            for v in values:
                yield from combos(names[1:], {**scope, name: v})

        for scope in combos(list(loops), dict(env)):
            label = place
            if loops:
                label += " (" + ", ".join(f"{n}={scope[n]}" for n in loops) + ")"
            try:
                if "when" in raw and not (raw["when"] if isinstance(raw["when"], bool)
                                          else evaluate(str(raw["when"]).strip("{}"), scope)):
                    continue
                yield at, label, expand_value(body, scope)
            except ValueError as exc:
                raise TopologySpecError(f"{at}: {label}: {exc}") from None


# --------------------------------------------------------------------------- loading

def builtin_files() -> dict[str, Path]:
    """The topology files shipped with the project, by name (``spineleaf`` → spineleaf.yaml)."""
    return {p.stem: p for p in sorted(FILES_DIR.glob("*.yaml"))}


def resolve(name_or_path: str | Path) -> Path:
    """A shipped topology's file by name, or the given path."""
    text = str(name_or_path)
    shipped = builtin_files()
    if text in shipped:
        return shipped[text]
    path = Path(text)
    if path.is_file():
        return path
    raise TopologySpecError(
        f"topology {text!r}: no such file, and not a shipped topology "
        f"({', '.join(shipped)})")


def _read(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologySpecError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text), None
        except json.JSONDecodeError as exc:
            raise TopologySpecError(
                f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}"
            ) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TopologySpecError(f"{path}{at}: not YAML: {problem}") from None
    return data, node


def _line(node: yaml.Node | None, path: Sequence[Any]) -> int | None:
    """The 1-based line of ``path`` (keys and indices) in the composed YAML ``node``."""
    for key in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        if node is None:
            return None
    return node.start_mark.line + 1 if node is not None else None


def _path_text(path: Sequence[Any]) -> str:
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out or "(top level)"


def _schema_error(source: str, error: jsonschema.ValidationError, node: yaml.Node | None,
                  prefix: str = "") -> TopologySpecError:
    best = _unwrap(error)
    path = list(best.absolute_path)
    line = _line(node, path) if not prefix else None
    if prefix:
        place = prefix + ("." + _path_text(path) if path else "")
    else:
        place = _path_text(path)
    where = f"{source}:{line}" if line else source
    return TopologySpecError(f"{where}: {place}: {_describe(best)}")


def _unwrap(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The error of the value's own schema where a field may also be a ``{template}``
    (``anyOf: [schema, template]``): "not one of ..." rather than "not a template"."""
    while error.validator == "anyOf" and error.context:
        own = [e for e in error.context if e.schema_path and e.schema_path[0] == 0]
        if not own:
            break
        error = jsonschema.exceptions.best_match(own)
    return error


def _describe(error: jsonschema.ValidationError) -> str:
    value = error.instance
    if error.validator == "additionalProperties":
        return error.message
    if error.validator == "required":
        return error.message
    if error.validator == "enum":
        return f"{value!r} is not one of {', '.join(repr(v) for v in error.validator_value)}"
    if error.validator == "anyOf":
        return f"unexpected value {value!r}"
    if error.validator == "format" and error.cause is not None:
        return str(error.cause)
    return f"{error.message} (got {value!r})" if repr(value) not in error.message else error.message


def _check(source: str, schema: dict[str, Any], instance: Any, node: yaml.Node | None,
           prefix: str = "") -> None:
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        raise _schema_error(source, errors[0], node, prefix)


def _params(source: str, declared: Mapping[str, Any], given: Mapping[str, Any],
            node: yaml.Node | None) -> dict[str, Any]:
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise TopologySpecError(
            f"{source}: params: no parameter {unknown[0]!r} (this file has: "
            f"{', '.join(sorted(declared)) or 'none'})")
    out = {}
    for name, decl in declared.items():
        value = given.get(name, decl["default"])
        default = decl["default"]
        if "type" in decl:
            line = _line(node, ["params", name])
            at = f":{line}" if line and name not in given else ""
            value = _typed(f"{source}{at}", name, value, decl["type"])
        elif name in given and default is not None and value is not None:
            value = _coerce(source, name, value, type(default))
        if isinstance(value, int | float) and not isinstance(value, bool):
            low, high = decl.get("min"), decl.get("max")
            if (low is not None and value < low) or (high is not None and value > high):
                bounds = (
                    f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
                )
                line = _line(node, ["params", name])
                at = f":{line}" if line and name not in given else ""
                raise TopologySpecError(f"{source}{at}: params.{name}: {value!r} is outside "
                                        f"{bounds}")
        out[name] = value
    return out


def _typed(where: str, name: str, value: Any, kind: str) -> Any:
    """A ``type: rate`` parameter's value as a number of Mbit/s (what a bare number means in
    the file, so ``"{bw}"`` and arithmetic on it keep the rate); a ``type: delay`` one checked
    and kept as written. None stays None (unshaped, no delay)."""
    if value is None:
        return None
    try:
        if kind == "rate":
            return parse_rate(value, f"params.{name}") / 1e6
        parse_delay(value, f"params.{name}")
    except UnitError as exc:
        raise TopologySpecError(f"{where}: {exc}") from None
    return value


def _coerce(source: str, name: str, value: Any, kind: type) -> Any:
    if isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool):
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            if kind is bool:
                if value.lower() in ("true", "yes", "1", "on"):
                    return True
                if value.lower() in ("false", "no", "0", "off"):
                    return False
                raise ValueError(value)
            return kind(value)
        except ValueError:
            pass
    raise TopologySpecError(f"{source}: params.{name}: expected {kind.__name__}, got {value!r}")


def _rate(value: Any) -> float | None:
    """Bits/s of a checked (schema ``format: rate``) field value; None stays None."""
    return None if value is None else parse_rate(value)


def _shape(data: Mapping[str, Any], base: LinkShapeSpec) -> LinkShapeSpec:
    """A link's shape from its checked fields; a field it does not set comes from ``base``
    (null sets "none")."""
    return LinkShapeSpec(
        bw_bps=_rate(data["bw"]) if "bw" in data else base.bw_bps,
        delay_s=(None if data["delay"] is None else parse_delay(data["delay"]))
        if "delay" in data else base.delay_s,
        loss=float(data["loss"]) if data.get("loss") is not None else (
            None if "loss" in data else base.loss),
        queue=data["queue"] if "queue" in data else base.queue,
    )


def _at(source: str, node: yaml.Node | None, path: Sequence[Any]) -> str:
    """``file:line`` of ``path`` in the file when known, else the file."""
    line = _line(node, path)
    return f"{source}:{line}" if line else source


def load_spec(path: str | Path, params: Mapping[str, Any] | None = None) -> TopologySpec:
    """Reads, validates and expands a topology file (see the module docstring)."""
    src = Path(path)
    source = str(src)
    data, node = _read(src)
    if not isinstance(data, dict):
        raise TopologySpecError(f"{source}: expected a mapping at the top level, got "
                                f"{type(data).__name__}")
    _check(source, FILE_SCHEMA, data, node)
    env = _params(source, data.get("params", {}), dict(params or {}), node)
    defaults = data.get("defaults", {})
    try:
        host_link = expand_value(defaults.get("host_link", {}), env)
        fabric_link = expand_value(defaults.get("fabric_link", {}), env)
        gpus_default = expand_value(defaults.get("gpus", 1), env)
        cpu_port = expand_value(defaults.get("cpu_port", 255), env)
        intra_default = expand_value(defaults.get("intra_bw"), env)
    except ValueError as exc:
        raise TopologySpecError(f"{source}: defaults: {exc}") from None
    shape_schema = {"type": "object", "properties": _LINK_SHAPE}
    for key, value in (("host_link", host_link), ("fabric_link", fabric_link)):
        _check(_at(source, node, ["defaults", key]), shape_schema, value, None,
               f"defaults.{key}")
    _check(_at(source, node, ["defaults", "gpus"]),
           {"type": "integer", "minimum": 0, "maximum": 1024}, gpus_default, None,
           "defaults.gpus")
    _check(_at(source, node, ["defaults", "cpu_port"]),
           {"type": ["integer", "null"], "minimum": 1, "maximum": 510}, cpu_port, None,
           "defaults.cpu_port")
    _check(_at(source, node, ["defaults", "intra_bw"]), _RATE, intra_default, None,
           "defaults.intra_bw")
    host_default = _shape(host_link, LinkShapeSpec())
    fabric_default = _shape(fabric_link, host_default)

    expanded: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for key, schema in _ENTRY_SCHEMAS.items():
        items = []
        for at, place, entry in _expand_entries(data.get(key, []), env, key, source, node):
            _check(at, schema, entry, None, place)
            items.append((at, place, entry))
        expanded[key] = items

    switches = []
    for at, place, sw in expanded["switches"]:
        opts = sw.get("options", {})
        switches.append(SwitchSpec(
            name=sw["name"], role=sw["role"], target=sw.get("target"), program=sw.get("program"),
            device_id=opts.get("device_id"), cpu_port=opts.get("cpu_port", cpu_port),
            grpc_port=opts.get("grpc_port"), own_cpu_port="cpu_port" in opts,
            server=sw.get("server"), where=place, at=at))
    hosts = [
        HostSpec(name=h["name"], switch=h["switch"], gpus=h.get("gpus", gpus_default),
                 role=h.get("role", "worker"), port=h.get("port"),
                 link=_shape(h.get("link", {}), host_default),
                 intra_bw_bps=_rate(h.get("intra_bw", intra_default)),
                 server=h.get("server"), where=place, at=at)
        for at, place, h in expanded["hosts"]
    ]
    links = [
        LinkSpec(a=ln["a"], b=ln["b"], a_port=ln.get("a_port"), b_port=ln.get("b_port"),
                 shape=_shape(ln, fabric_default), where=place, at=at)
        for at, place, ln in expanded["links"]
    ]
    jobs = [
        JobSpec(name=j["name"], hosts=None if j.get("hosts", "all") == "all" else tuple(j["hosts"]),
                root=j.get("root"), credits=j.get("credits"), slots=j.get("slots"),
                msg_pkts=j.get("msg_pkts"))
        for _at, _place, j in expanded["jobs"]
    ]
    spec = TopologySpec(
        source=source, kind=data.get("kind", src.stem), switches=tuple(switches),
        hosts=tuple(hosts), links=tuple(links), jobs=tuple(jobs), params=env,
        target=data.get("target"), program=data.get("program"), cpu_port=cpu_port,
        description=data.get("description", ""),
    )
    check_graph(spec)
    return spec


def check_graph(spec: TopologySpec) -> None:
    """The rules the schema cannot say: unique names, hosts on leaves, links between known
    switches, ports used once, every switch reachable, jobs naming known hosts/switches."""
    src = spec.source
    seen = _unique_names(spec)
    if not spec.switches:
        raise TopologySpecError(f"{src}: switches: a topology needs at least one switch")
    roles = {s.name: s.role for s in spec.switches}
    _unique_device_ids(spec)
    _one_target_and_program(spec)
    ports = _Ports(src)
    _check_hosts(spec, roles, ports)
    _check_links(spec, roles, seen, ports)
    hosts = {h.name for h in spec.hosts}
    for i, job in enumerate(spec.jobs):
        for name in job.hosts or ():
            if name not in hosts:
                raise TopologySpecError(f"{src}: jobs[{i}].hosts: unknown host {name!r}")
        if job.root is not None and job.root not in roles:
            raise TopologySpecError(f"{src}: jobs[{i}].root: unknown switch {job.root!r}")
    if not spec.hosts:
        raise TopologySpecError(f"{src}: hosts: a topology needs at least one host")


def _unique_names(spec: TopologySpec) -> dict[str, str]:
    """Switch and host names are unique; returns where each is declared."""
    seen: dict[str, str] = {}
    named: list[SwitchSpec | HostSpec] = [*spec.switches, *spec.hosts]
    for entry in named:
        if entry.name in seen:
            raise TopologySpecError(f"{entry.at or spec.source}: {entry.where}.name: "
                                    f"{entry.name!r} is already used by {seen[entry.name]}")
        seen[entry.name] = entry.where
    return seen


def _unique_device_ids(spec: TopologySpec) -> None:
    ids: dict[int, str] = {}
    for s in spec.switches:
        if s.device_id is not None:
            if s.device_id in ids:
                raise TopologySpecError(f"{s.at or spec.source}: {s.where}.options.device_id: "
                                        f"{s.device_id} is already used by {ids[s.device_id]}")
            ids[s.device_id] = s.where


def _one_target_and_program(spec: TopologySpec) -> None:
    """Every switch of a run uses one target and runs one program."""
    src = spec.source
    targets = {s.target for s in spec.switches if s.target is not None}
    if len(targets) > 1:
        odd = next(
            s for s in spec.switches if s.target is not None and s.target != sorted(targets)[0]
        )
        raise TopologySpecError(f"{odd.at or src}: {odd.where}.target: {odd.target!r}: every "
                                "switch of a run uses one target (mixed targets are not "
                                "supported)")
    programs = {s.program for s in spec.switches if s.program is not None}
    if len(programs) > 1:
        odd = next(
            s for s in spec.switches if s.program is not None and s.program != sorted(programs)[0]
        )
        raise TopologySpecError(f"{odd.at or src}: {odd.where}.program: {odd.program!r}: every "
                                "switch of a run runs one program (per-switch programs are not "
                                "supported)")


class _Ports:
    """The switch ports taken so far: each by one host or link end."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.used: dict[tuple[str, int], str] = {}

    def take(self, node: str, port: int | None, where: str, at: str) -> None:
        if port is None:
            return
        if (node, port) in self.used:
            raise TopologySpecError(f"{at or self.source}: {where}: port {port} of {node} is "
                                    f"already used by {self.used[(node, port)]}")
        self.used[(node, port)] = where


def _check_hosts(spec: TopologySpec, roles: dict[str, str], ports: _Ports) -> None:
    """Hosts attach to known leaf switches; data servers run no workers."""
    src = spec.source
    for h in spec.hosts:
        if h.switch not in roles:
            raise TopologySpecError(f"{h.at or src}: {h.where}.switch: unknown switch {h.switch!r}")
        if roles[h.switch] != "leaf":
            raise TopologySpecError(f"{h.at or src}: {h.where}.switch: hosts attach to leaf "
                                    f"switches; {h.switch!r} is a {roles[h.switch]}")
        if h.role == "data" and h.gpus:
            raise TopologySpecError(f"{h.at or src}: {h.where}.gpus: a data server runs no "
                                    f"workers, got {h.gpus}")
        ports.take(h.switch, h.port, f"{h.where}.port", h.at)


def _check_links(
    spec: TopologySpec, roles: dict[str, str], seen: dict[str, str], ports: _Ports
) -> None:
    """Links join two distinct known switches, and every switch is reachable."""
    import networkx as nx

    src = spec.source
    graph = nx.MultiGraph()
    graph.add_nodes_from(roles)
    for ln in spec.links:
        for end, port_key in ((ln.a, "a"), (ln.b, "b")):
            if end not in roles:
                what = "a host" if end in seen else "unknown"
                raise TopologySpecError(f"{ln.at or src}: {ln.where}.{port_key}: {what} switch "
                                        f"{end!r} (links join switches; a host's link is in its "
                                        "entry)")
        if ln.a == ln.b:
            raise TopologySpecError(f"{ln.at or src}: {ln.where}: a link from {ln.a!r} to itself")
        ports.take(ln.a, ln.a_port, f"{ln.where}.a_port", ln.at)
        ports.take(ln.b, ln.b_port, f"{ln.where}.b_port", ln.at)
        graph.add_edge(ln.a, ln.b)
    if not nx.is_connected(graph):
        parts = sorted((sorted(c) for c in nx.connected_components(graph)), key=len)
        raise TopologySpecError(f"{src}: links: switches {', '.join(parts[0])} are not connected "
                                "to the rest of the fabric")
