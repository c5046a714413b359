"""Compare two P4Infos where the P4Runtime spec fixes their content (test helper).

Compared, entity by entity and matched by fully qualified name: preamble ids, aliases
and annotations (plain and structured); table match fields (id, name, bit width, match
kind, annotations), action references (id, scope, annotations), const default action,
implementation, direct resources, size, const-ness, idle-timeout behaviour; action
parameters (id, name, bit width, annotations); counter/meter/register/digest specs and
sizes; controller packet metadata fields.

Left out, because the spec leaves them to the compiler: ``pkg_info`` (p4c records its
architecture and build details), ``type_info`` (p4c describes only the named types it
chose to), ``initial_default_action`` and ``has_initial_entries`` (informational fields
added in P4Runtime 1.4 that p4c fills and older tools do not), and ``doc`` strings.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict

IGNORED_TOP = ("pkgInfo", "typeInfo")
IGNORED_TABLE = ("initialDefaultAction", "hasInitialEntries")
KINDS = (
    "tables", "actions", "actionProfiles", "counters", "directCounters", "meters",
    "directMeters", "registers", "digests", "controllerPacketMetadata", "valueSets", "externs",
)


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {it.get("preamble", {}).get("name", repr(it)): it for it in items}


def _strip(entity: dict[str, Any], kind: str) -> dict[str, Any]:
    e = dict(entity)
    pre = dict(e.get("preamble", {}))
    pre.pop("doc", None)
    e["preamble"] = pre
    if kind == "tables":
        for key in IGNORED_TABLE:
            e.pop(key, None)
    return e


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k}: only p4c has it: {b[k]!r}")
            elif k not in b:
                out.append(f"{path}.{k}: only the built-in target has it: {a[k]!r}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: built-in {a!r} vs p4c {b!r}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: built-in {a!r} vs p4c {b!r}")


def p4info_differences(ours: Any, p4c: Any) -> list[str]:
    """Human-readable differences between two P4Info messages (empty when equal)."""
    a, b = MessageToDict(ours), MessageToDict(p4c)
    out: list[str] = []
    unknown = sorted((set(a) | set(b)) - set(KINDS) - set(IGNORED_TOP))
    for k in unknown:
        _diff(a.get(k), b.get(k), k, out)
    for kind in KINDS:
        mine, theirs = _by_name(a.get(kind, [])), _by_name(b.get(kind, []))
        for name in sorted(set(mine) - set(theirs)):
            out.append(f"{kind} {name}: only in the built-in target's P4Info")
        for name in sorted(set(theirs) - set(mine)):
            out.append(f"{kind} {name}: only in p4c's P4Info")
        for name in sorted(set(mine) & set(theirs)):
            _diff(_strip(mine[name], kind), _strip(theirs[name], kind), f"{kind} {name}", out)
    return out
