"""A BMv2 JSON config that has exactly the control-plane objects of a P4Info and no
data-plane behaviour (no parsing, no primitives).

``simple_switch_grpc`` needs a JSON next to the P4Info to accept a pipeline; for comparing
P4Runtime status codes only the objects the control plane reaches matter (tables with
their keys and actions, action profiles, counters, meters, registers, digests). This lets
tests/test_p4runtime_bmv2_codes.py run against BMv2 on a machine without p4c. Written from
BMv2's documented JSON format (docs/JSON_format.md of p4lang/behavioral-model).
"""

from __future__ import annotations

import json
from typing import Any

from p4.config.v1 import p4info_pb2

# v1model's standard_metadata as BMv2's simple_switch expects it.
STANDARD_METADATA = [
    ("ingress_port", 9), ("egress_spec", 9), ("egress_port", 9), ("instance_type", 32),
    ("packet_length", 32), ("enq_timestamp", 32), ("enq_qdepth", 19), ("deq_timedelta", 32),
    ("deq_qdepth", 19), ("ingress_global_timestamp", 48), ("egress_global_timestamp", 48),
    ("mcast_grp", 16), ("egress_rid", 16), ("checksum_error", 1), ("parser_error", 32),
    ("priority", 3), ("_padding", 3),
]
MATCH_TYPES = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}


def _padded(fields: list[tuple[str, int]]) -> list[list[Any]]:
    total = sum(w for _n, w in fields)
    out = [[n, w, False] for n, w in fields]
    if total % 8:
        out.append(["_pad", 8 - total % 8, False])
    return out


def _target(name: str) -> list[str]:
    """``hdr.ethernet.etherType`` -> ["ethernet", "etherType"]."""
    parts = name.split(".")
    return [parts[-2], parts[-1]]


def _table_match_type(kinds: list[str]) -> str:
    for kind in ("range", "ternary", "optional"):
        if kind in kinds:
            return "ternary" if kind == "optional" else kind
    return "lpm" if "lpm" in kinds else "exact"


def _learn_lists(
    p4info: p4info_pb2.P4Info,
) -> tuple[list[tuple[str, int]], list[dict[str, Any]]]:
    """One scalar field per digest member and one learn list per digest."""
    scalars: list[tuple[str, int]] = []
    learn_lists = []
    structs = {name: s for name, s in p4info.type_info.structs.items()}
    for i, d in enumerate(p4info.digests, 1):
        struct = structs.get(d.type_spec.struct.name)
        widths = (
            [m.type_spec.bitstring.bit.bitwidth or 8 for m in struct.members] if struct else [8]
        )
        elements = []
        for j, w in enumerate(widths):
            fname = f"learn_{i}_{j}"
            scalars.append((fname, w))
            elements.append({"type": "field", "value": ["scalars", fname]})
        learn_lists.append({"id": i, "name": d.preamble.name, "elements": elements})
    return scalars, learn_lists


def _tables(p4info: p4info_pb2.P4Info) -> list[dict[str, Any]]:
    """The tables in P4Info order, each next to the following one, with their actions,
    direct resources, action profile or default entry."""
    action_names = {a.preamble.id: a.preamble.name for a in p4info.actions}
    action_index = {a.preamble.id: i for i, a in enumerate(p4info.actions)}
    params = {a.preamble.id: len(a.params) for a in p4info.actions}
    profiles = {p.preamble.id: p for p in p4info.action_profiles}
    direct_counters = {c.direct_table_id: c for c in p4info.direct_counters}
    direct_meters = {m.direct_table_id: m for m in p4info.direct_meters}

    tables: list[dict[str, Any]] = []
    names = [t.preamble.name for t in p4info.tables]
    for i, t in enumerate(p4info.tables):
        nxt = names[i + 1] if i + 1 < len(names) else None
        kinds = [MATCH_TYPES.get(mf.match_type, "exact") for mf in t.match_fields]
        key = [{"match_type": kind, "name": mf.name, "target": _target(mf.name), "mask": None}
               for mf, kind in zip(t.match_fields, kinds, strict=True)]
        refs = [r.id for r in t.action_refs]
        table = {
            "name": t.preamble.name, "id": i, "key": key,
            "match_type": _table_match_type(kinds),
            "type": "simple", "max_size": t.size or 1024,
            "with_counters": t.preamble.id in direct_counters, "support_timeout": False,
            "direct_meters": direct_meters[t.preamble.id].preamble.name
            if t.preamble.id in direct_meters else None,
            "action_ids": [action_index[r] for r in refs],
            "actions": [action_names[r] for r in refs],
            "base_default_next": nxt,
            "next_tables": {action_names[r]: nxt for r in refs},
        }
        prof = profiles.get(t.implementation_id)
        if prof is not None:
            table["type"] = "indirect_ws" if prof.with_selector else "indirect"
            table["action_profile"] = prof.preamble.name
        else:
            default = t.const_default_action_id or next(
                (r.id for r in t.action_refs
                 if r.scope != p4info_pb2.ActionRef.TABLE_ONLY and params[r.id] == 0), refs[0])
            const = bool(t.const_default_action_id)
            table["default_entry"] = {
                "action_id": action_index[default], "action_const": const,
                "action_data": ["0x0"] * params[default], "action_entry_const": const,
            }
        tables.append(table)
    return tables


def bmv2_json(p4info: p4info_pb2.P4Info, program: str = "program.p4") -> bytes:
    """The JSON bytes (see the module docstring)."""
    headers: dict[str, dict[str, int]] = {}
    for t in p4info.tables:
        for mf in t.match_fields:
            hdr, fld = _target(mf.name)
            if hdr != "standard_metadata":
                headers.setdefault(hdr, {})[fld] = mf.bitwidth
    scalars, learn_lists = _learn_lists(p4info)
    if not scalars:
        scalars.append(("unused", 8))
    header_types = [
        {"name": "scalars_0", "id": 0, "fields": _padded(scalars)},
        {"name": "standard_metadata", "id": 1,
         "fields": [[n, w, False] for n, w in STANDARD_METADATA]},
    ]
    header_list = [
        {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True, "pi_omit": True},
        {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata", "metadata": True,
         "pi_omit": True},
    ]
    for k, (hdr, fields) in enumerate(sorted(headers.items()), 2):
        header_types.append({"name": f"{hdr}_t", "id": k,
                             "fields": _padded(sorted(fields.items()))})
        header_list.append({"name": hdr, "id": k, "header_type": f"{hdr}_t", "metadata": True,
                            "pi_omit": True})

    actions = [
        {"name": a.preamble.name, "id": i,
         "runtime_data": [{"name": p.name, "bitwidth": p.bitwidth} for p in a.params],
         "primitives": []}
        for i, a in enumerate(p4info.actions)
    ]
    tables = _tables(p4info)

    first_field = next(
        ({"type": "field", "value": k["target"]} for tb in tables for k in tb["key"]),
        {"type": "field", "value": ["standard_metadata", "ingress_port"]},
    )
    action_profiles = []
    for i, prof in enumerate(p4info.action_profiles):
        ap = {"name": prof.preamble.name, "id": i, "max_size": prof.size or 128}
        if prof.with_selector:
            ap["selector"] = {"algo": "crc16", "input": [first_field]}
        action_profiles.append(ap)

    counters = [{"name": c.preamble.name, "id": i, "size": c.size, "is_direct": False}
                for i, c in enumerate(p4info.counters)]
    counters += [{"name": c.preamble.name, "id": len(counters) + i, "size": 0, "is_direct": True,
                  "binding": next(t.preamble.name for t in p4info.tables
                                  if t.preamble.id == c.direct_table_id)}
                 for i, c in enumerate(p4info.direct_counters)]
    meters = [{"name": m.preamble.name, "id": i, "is_direct": False, "size": m.size,
               "rate_count": 2,
               "type": "packets" if m.spec.unit == p4info_pb2.MeterSpec.PACKETS else "bytes"}
              for i, m in enumerate(p4info.meters)]
    registers = [{"name": r.preamble.name, "id": i, "size": r.size,
                  "bitwidth": r.type_spec.bitstring.bit.bitwidth or 32}
                 for i, r in enumerate(p4info.registers)]
    doc = {
        "header_types": header_types,
        "headers": header_list,
        "header_stacks": [],
        "header_union_types": [],
        "header_unions": [],
        "header_union_stacks": [],
        "field_lists": [],
        "errors": [
            ["NoError", 0],
            ["PacketTooShort", 1],
            ["NoMatch", 2],
            ["StackOutOfBounds", 3],
            ["HeaderTooShort", 4],
            ["ParserTimeout", 5],
            ["ParserInvalidArgument", 6],
        ],
        "enums": [],
        "parsers": [
            {
                "name": "parser",
                "id": 0,
                "init_state": "start",
                "parse_states": [
                    {
                        "name": "start",
                        "id": 0,
                        "parser_ops": [],
                        "transition_key": [],
                        "transitions": [
                            {"type": "default", "value": None, "mask": None, "next_state": None}
                        ],
                    }
                ],
            }
        ],
        "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": [], "primitives": []}],
        "meter_arrays": meters,
        "counter_arrays": counters,
        "register_arrays": registers,
        "calculations": [],
        "learn_lists": learn_lists,
        "actions": actions,
        "pipelines": [
            {
                "name": "ingress",
                "id": 0,
                "init_table": tables[0]["name"] if tables else None,
                "tables": tables,
                "action_profiles": action_profiles,
                "conditionals": [],
                "action_calls": [],
            },
            {
                "name": "egress",
                "id": 1,
                "init_table": None,
                "tables": [],
                "action_profiles": [],
                "action_calls": [],
                "conditionals": [],
            },
        ],
        "checksums": [],
        "force_arith": [],
        "extern_instances": [],
        "field_aliases": [],
        "program": program,
        "__meta__": {"version": [2, 23], "compiler": "tests/bmv2_json.py"},
    }
    return json.dumps(doc, indent=1).encode()


def port_pair_json() -> bytes:
    """A BMv2 JSON that forwards every frame received on port 1 to port 2 and back, untouched
    (no header is parsed, so the whole frame is payload): a two-host rack's switch on a
    machine without p4c. One conditional on ``ingress_port`` picks one of two keyless tables
    whose constant default action sets ``egress_spec``."""
    doc = json.loads(bmv2_json(p4info_pb2.P4Info(), "port_pair.p4"))

    def action(port: int, index: int) -> dict[str, Any]:
        return {"name": f"to{port}", "id": index, "runtime_data": [], "primitives": [
            {"op": "assign", "parameters": [
                {"type": "field", "value": ["standard_metadata", "egress_spec"]},
                {"type": "hexstr", "value": f"0x{port:04x}"}]}]}

    def table(port: int, index: int) -> dict[str, Any]:
        return {"name": f"t_to{port}", "id": index, "key": [], "match_type": "exact",
                "type": "simple", "max_size": 1, "with_counters": False,
                "support_timeout": False, "direct_meters": None, "action_ids": [index],
                "actions": [f"to{port}"], "base_default_next": None,
                "next_tables": {f"to{port}": None},
                "default_entry": {"action_id": index, "action_const": True, "action_data": [],
                                  "action_entry_const": True}}

    doc["actions"] = [action(2, 0), action(1, 1)]
    ingress = doc["pipelines"][0]
    ingress["tables"] = [table(2, 0), table(1, 1)]
    ingress["init_table"] = "from_port1"
    ingress["conditionals"] = [{
        "name": "from_port1", "id": 0,
        "expression": {"type": "expression", "value": {
            "op": "==", "left": {"type": "field", "value": ["standard_metadata", "ingress_port"]},
            "right": {"type": "hexstr", "value": "0x0001"}}},
        "true_next": "t_to2", "false_next": "t_to1"}]
    return json.dumps(doc, indent=1).encode()
