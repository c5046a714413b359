"""P4Info generation: names, ids, widths and shapes as p4c writes them for v1model."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from p4.config.v1 import p4info_pb2

from p4schema import P4InfoIndex, P4InfoLookupError
from softswitch import ir
from softswitch.p4info import (
    P4InfoError,
    build_p4info,
    field_ids,
    jenkins_hash,
    p4info_from_text,
    p4info_to_text,
)

_uid = itertools.count(1)


def _bits(w: int) -> ir.BitType:
    return ir.BitType(w)


def _param(name: str, t: ir.Type, annotations: ir.Annotations | None = None) -> ir.Param:
    return ir.Param(name, t, next(_uid), annotations=annotations or {})


def _action(
    name: str,
    params: Sequence[ir.Param] = (),
    ann: ir.Annotations | None = None,
    body: list[ir.Stmt] | None = None,
) -> ir.ActionDecl:
    cp = str(ann["name"][0]) if ann and "name" in ann else name
    return ir.ActionDecl(name, cp, list(params), ir.Block(body or []), annotations=ann or {})


def _key(
    text: str, width: int, kind: str, ann: ir.Annotations | None = None, t: ir.Type | None = None
) -> ir.TableKey:
    expr = ir.Const(t or _bits(width), ir.NOLOC, 0)
    return ir.TableKey(expr, kind, text, annotations=ann or {})


def _ref(action: ir.ActionDecl, ann: ir.Annotations | None = None) -> ir.ActionRef:
    return ir.ActionRef(action, [], annotations=ann or {})


def _extern_inst(
    name: str, kind: str, args: list[ir.Expr], type_args: Sequence[ir.Type] = (),
    ann: ir.Annotations | None = None
) -> ir.Instance:
    return ir.Instance(
        name, name, ir.ExternType(kind, tuple(type_args)), args, annotations=ann or {}
    )


def _program(
    ingress_locals: list[Any],
    egress_locals: list[Any] | None = None,
    top_actions: dict[str, Any] | None = None,
    types: dict[str, Any] | None = None,
    ingress_body: list[ir.Stmt] | None = None,
) -> ir.Program:
    def control(name: str, locals_: list[Any], body: list[ir.Stmt] | None = None) -> ir.ControlDecl:
        return ir.ControlDecl(name, [], [], locals_, ir.Block(body or []))

    parser = ir.ParserDecl(
        "MyParser", [], [], [], {"start": ir.ParserState("start", [], ir.Transition("accept"))}
    )
    controls = [
        control("MyVerifyChecksum", []),
        control("MyIngress", ingress_locals, ingress_body),
        control("MyEgress", egress_locals or []),
        control("MyComputeChecksum", []),
        control("MyDeparser", []),
    ]
    blocks: list[ir.ParserDecl | ir.ControlDecl] = [parser, *controls]
    args = [ir.Instance(b.name, b.name, ir.BlockType(b), []) for b in blocks]
    return ir.Program(
        source_file="x.p4",
        types=types or {},
        errors=["NoError", "PacketTooShort"],
        match_kinds=["exact", "ternary", "lpm"],
        constants={},
        externs={},
        extern_functions={},
        actions=top_actions or {},
        functions={},
        parsers={"MyParser": parser},
        controls={b.name: b for b in controls},
        instances={},
        main=ir.PackageInstance("V1Switch", "main", args),
    )


def _basic() -> ir.Program:
    no_action = _action("NoAction", ann={"noWarn": ["unused"]})
    drop = _action("drop")
    fwd = _action("ipv4_forward", [_param("dstAddr", _bits(48)), _param("port", _bits(9))])
    unused = _action("unused_action")
    table = ir.TableDecl(
        "ipv4_lpm",
        "ipv4_lpm",
        [_key("hdr.ipv4.dstAddr", 32, "lpm")],
        [_ref(fwd), _ref(drop), _ref(no_action)],
        ir.ActionRef(drop, []),
    )
    return _program([drop, fwd, unused, table], top_actions={"NoAction": no_action})


def test_basic_ids_match_p4c() -> None:
    """Ids of basic.p4's objects equal those p4c generates (jenkins hash + prefix)."""
    p4info = build_p4info(_basic())
    assert [t.preamble.id for t in p4info.tables] == [37375156]
    assert {a.preamble.name: a.preamble.id for a in p4info.actions} == {
        "NoAction": 21257015,
        "MyIngress.drop": 25652968,
        "MyIngress.ipv4_forward": 28792405,
    }


def test_basic_shapes() -> None:
    """Table, match field, action refs and params have p4c's names, widths and ids."""
    p4info = build_p4info(_basic())
    table = p4info.tables[0]
    assert table.preamble.name == "MyIngress.ipv4_lpm"
    assert table.preamble.alias == "ipv4_lpm"
    assert table.size == 1024
    mf = table.match_fields[0]
    assert (mf.id, mf.name, mf.bitwidth, mf.match_type) == (
        1,
        "hdr.ipv4.dstAddr",
        32,
        p4info_pb2.MatchField.LPM,
    )
    assert [r.id for r in table.action_refs] == [28792405, 25652968, 21257015]
    assert all(r.scope == p4info_pb2.ActionRef.TABLE_AND_DEFAULT for r in table.action_refs)
    assert [a.preamble.name for a in p4info.actions] == [
        "NoAction",
        "MyIngress.drop",
        "MyIngress.ipv4_forward",
    ]
    fwd = p4info.actions[2]
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "dstAddr", 48), (2, "port", 9)]
    assert list(p4info.actions[0].preamble.annotations) == ['@noWarn("unused")']
    assert p4info.pkg_info.arch == "v1model"


def test_unused_action_left_out() -> None:
    """An action no table references does not appear (p4c removes it)."""
    names = [a.preamble.name for a in build_p4info(_basic()).actions]
    assert "MyIngress.unused_action" not in names


def test_ids_stable_across_runs() -> None:
    """Two builds of the same program give byte-identical P4Info."""
    assert build_p4info(_basic()).SerializeToString() == build_p4info(_basic()).SerializeToString()


def test_jenkins_hash_known_value() -> None:
    """The hash is Bob Jenkins' one-at-a-time hash."""
    assert jenkins_hash("") == 0
    assert jenkins_hash("a") == 0xCA2E9442


def test_id_annotation_honoured() -> None:
    """@id sets the low bits, the prefix is added; a wrong prefix is rejected."""
    a = _action("a", ann={"id": [5]})
    t = ir.TableDecl("t", "t", [], [_ref(a)], None, annotations={"id": ["0x02000007"]})
    p4info = build_p4info(_program([a, t]))
    assert p4info.actions[0].preamble.id == 0x01000005
    assert p4info.tables[0].preamble.id == 0x02000007
    bad = ir.TableDecl("t", "t", [], [_ref(a)], None, annotations={"id": [0x01000007]})
    with pytest.raises(P4InfoError, match="prefix"):
        build_p4info(_program([a, bad]))


def test_name_annotation_and_absolute_name() -> None:
    """@name renames inside the control; a leading dot makes the name absolute."""
    a = _action("a", ann={"name": ["renamed"]})
    b = _action("b", ann={"name": [".global_b"]})
    t = ir.TableDecl("t", "my_table", [], [_ref(a), _ref(b)], None)
    p4info = build_p4info(_program([a, b, t]))
    assert p4info.tables[0].preamble.name == "MyIngress.my_table"
    assert [x.preamble.name for x in p4info.actions] == ["MyIngress.renamed", "global_b"]


def test_hidden_objects_omitted() -> None:
    """@hidden tables and actions are left out of P4Info."""
    a = _action("a", ann={"hidden": []})
    b = _action("b")
    t1 = ir.TableDecl("t1", "t1", [], [_ref(a)], None, annotations={"hidden": []})
    t2 = ir.TableDecl("t2", "t2", [], [_ref(b)], None)
    p4info = build_p4info(_program([a, b, t1, t2]))
    assert [t.preamble.name for t in p4info.tables] == ["MyIngress.t2"]
    assert [x.preamble.name for x in p4info.actions] == ["MyIngress.b"]


def test_scopes_const_default_and_size() -> None:
    """@defaultonly/@tableonly scopes, const default action, size and const entries."""
    a = _action("a")
    d = _action("d")
    t = ir.TableDecl(
        "t",
        "t",
        [_key("meta.x", 8, "ternary"), _key("meta.y", 16, "range")],
        [_ref(a, {"tableonly": []}), _ref(d, {"defaultonly": []})],
        ir.ActionRef(d, []),
        default_action_const=True,
        entries=[],
        size=64,
    )
    table = build_p4info(_program([a, d, t])).tables[0]
    assert [r.scope for r in table.action_refs] == [
        p4info_pb2.ActionRef.TABLE_ONLY,
        p4info_pb2.ActionRef.DEFAULT_ONLY,
    ]
    assert list(table.action_refs[1].annotations) == ["@defaultonly"]
    assert table.const_default_action_id == table.action_refs[1].id
    assert table.size == 64 and table.is_const_table and table.has_initial_entries
    assert [m.match_type for m in table.match_fields] == [
        p4info_pb2.MatchField.TERNARY,
        p4info_pb2.MatchField.RANGE,
    ]


def test_field_ids_with_explicit_ids() -> None:
    """Explicit field @ids are kept; the others take their free positions."""
    assert field_ids([None, None, None]) == [1, 2, 3]
    assert field_ids([None, 1, None]) == [2, 1, 3]
    assert field_ids([3, None, None]) == [3, 2, 4]


def test_externs() -> None:
    """Counters, meters, registers, direct resources and action profiles."""
    ct_packets = ir.EnumMember(ir.BitType(32), ir.NOLOC, "packets")
    mt_bytes = ir.EnumMember(ir.BitType(32), ir.NOLOC, "bytes")
    both = ir.EnumMember(ir.BitType(32), ir.NOLOC, "packets_and_bytes")
    c = _extern_inst("c", "counter", [ir.Const(_bits(32), ir.NOLOC, 16), ct_packets])
    m = _extern_inst("m", "meter", [ir.Const(_bits(32), ir.NOLOC, 8), mt_bytes])
    r = _extern_inst("r", "register", [ir.Const(_bits(32), ir.NOLOC, 4)], [_bits(48)])
    dc = _extern_inst("dc", "direct_counter", [both])
    ap = _extern_inst("ap", "action_profile", [ir.Const(_bits(32), ir.NOLOC, 128)])
    a = _action("a")
    t = ir.TableDecl(
        "t", "t", [_key("k", 8, "exact")], [_ref(a)], None, counters=dc, implementation=ap
    )
    p4info = build_p4info(_program([a, c, m, r, dc, ap, t]))
    assert (
        p4info.counters[0].preamble.name,
        p4info.counters[0].size,
        p4info.counters[0].spec.unit,
    ) == ("MyIngress.c", 16, p4info_pb2.CounterSpec.PACKETS)
    assert p4info.counters[0].preamble.id >> 24 == 0x12
    assert (p4info.meters[0].size, p4info.meters[0].spec.unit) == (8, p4info_pb2.MeterSpec.BYTES)
    assert p4info.meters[0].preamble.id >> 24 == 0x14
    reg = p4info.registers[0]
    assert (reg.size, reg.type_spec.bitstring.bit.bitwidth, reg.preamble.id >> 24) == (4, 48, 0x16)
    dcm = p4info.direct_counters[0]
    table = p4info.tables[0]
    assert dcm.direct_table_id == table.preamble.id and dcm.preamble.id >> 24 == 0x13
    assert dcm.spec.unit == p4info_pb2.CounterSpec.BOTH
    assert list(table.direct_resource_ids) == [dcm.preamble.id]
    prof = p4info.action_profiles[0]
    assert prof.preamble.id >> 24 == 0x11 and not prof.with_selector and prof.size == 128
    assert list(prof.table_ids) == [table.preamble.id]
    assert table.implementation_id == prof.preamble.id


def test_digest_and_type_info() -> None:
    """A digest call names the struct type and fills type_info.structs."""
    st = ir.StructType(
        "learn_t", [ir.StructField("mac", _bits(48)), ir.StructField("port", _bits(9))]
    )
    digest_fn = ir.ExternFunctionDecl("digest", ir.VoidType(), [])
    call = ir.Call(
        ir.VoidType(),
        ir.NOLOC,
        digest_fn,
        [ir.Const(_bits(32), ir.NOLOC, 1), ir.Const(st, ir.NOLOC, 0)],
        (st,),
    )
    a = _action("learn", body=[ir.CallStmt(call)])
    t = ir.TableDecl("t", "t", [], [_ref(a)], None)
    p4info = build_p4info(_program([a, t], types={"learn_t": st}))
    digest = p4info.digests[0]
    assert digest.preamble.name == "learn_t" and digest.preamble.id >> 24 == 0x17
    assert digest.type_spec.struct.name == "learn_t"
    members = p4info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("mac", 48),
        ("port", 9),
    ]


def test_controller_header() -> None:
    """@controller_header headers become controller_packet_metadata named by the annotation."""
    h = ir.HeaderType(
        "packet_in_header_t",
        [
            ir.StructField("ingress_port", _bits(9)),
            ir.StructField("_pad", _bits(7)),
        ],
        annotations={"controller_header": ["packet_in"]},
    )
    p4info = build_p4info(_program([], types={"packet_in_header_t": h}))
    cpm = p4info.controller_packet_metadata[0]
    assert cpm.preamble.name == "packet_in" and cpm.preamble.alias == "packet_in"
    assert cpm.preamble.id == (0x04 << 24) | (jenkins_hash("packet_in_header_t") & 0xFFFFFF)
    assert [(m.id, m.name, m.bitwidth) for m in cpm.metadata] == [
        (1, "ingress_port", 9),
        (2, "_pad", 7),
    ]


def test_newtype_and_serializable_enum_keys() -> None:
    """New types give type_name and new_types; serializable enums give their width."""
    port_t = ir.NewType("PortId_t", _bits(9))
    enum = ir.EnumType("Kind", ["A", "B"], _bits(8), {"A": 1, "B": 2})
    a = _action("a", [_param("p", port_t)])
    t = ir.TableDecl(
        "t",
        "t",
        [_key("m.port", 0, "exact", t=port_t), _key("m.kind", 0, "exact", t=enum)],
        [_ref(a)],
        None,
    )
    p4info = build_p4info(_program([a, t]))
    mfs = p4info.tables[0].match_fields
    assert (mfs[0].bitwidth, mfs[0].type_name.name) == (9, "PortId_t")
    assert mfs[1].bitwidth == 8
    assert p4info.type_info.new_types["PortId_t"].original_type.bitstring.bit.bitwidth == 9
    ser = p4info.type_info.serializable_enums["Kind"]
    assert [(m.name, m.value) for m in ser.members] == [("A", b"\x01"), ("B", b"\x02")]
    assert p4info.actions[0].params[0].type_name.name == "PortId_t"


def test_alias_is_shortest_unique_suffix() -> None:
    """Objects with the same local name in two controls keep qualified aliases."""
    a1, a2 = _action("set"), _action("set")
    t1 = ir.TableDecl("t", "t", [], [_ref(a1)], None)
    t2 = ir.TableDecl("t", "t", [], [_ref(a2)], None)
    p4info = build_p4info(_program([a1, t1], egress_locals=[a2, t2]))
    assert [t.preamble.alias for t in p4info.tables] == ["MyIngress.t", "MyEgress.t"]


def test_text_round_trip(tmp_path: Path) -> None:
    """Text format written and read back gives the same message."""
    p4info = build_p4info(_basic())
    text = p4info_to_text(p4info)
    assert 'name: "MyIngress.ipv4_lpm"' in text
    assert p4info_from_text(text) == p4info


def test_text_parse_error() -> None:
    """A malformed text file raises P4InfoError, not a protobuf exception."""
    with pytest.raises(P4InfoError, match="not a valid P4Info"):
        p4info_from_text("tables { nonsense")


def test_index_finds_by_suffix_and_suggests() -> None:
    """The name index finds by full name or suffix and suggests on a miss."""
    index = P4InfoIndex(build_p4info(_basic()))
    assert index.table("ipv4_lpm").preamble.name == "MyIngress.ipv4_lpm"
    assert index.table("MyIngress.ipv4_lpm").preamble.id == 37375156
    assert index.action("drop").preamble.id == 25652968
    with pytest.raises(
        P4InfoLookupError, match=r"no table named 'ipv4_lmp'. Did you mean 'MyIngress.ipv4_lpm'\?"
    ):
        index.table("ipv4_lmp")
    assert index.by_id(21257015).preamble.name == "NoAction"


def test_index_ambiguous_suffix() -> None:
    """A suffix shared by two objects is reported as ambiguous."""
    a1, a2 = _action("set"), _action("set")
    t1 = ir.TableDecl("t", "t", [], [_ref(a1)], None)
    t2 = ir.TableDecl("t", "t", [], [_ref(a2)], None)
    index = P4InfoIndex(build_p4info(_program([a1, t1], egress_locals=[a2, t2])))
    with pytest.raises(P4InfoLookupError, match="ambiguous"):
        index.table("t")


# ------------------------------------------------------------------------ device config

from softswitch import frontend  # noqa: E402
from softswitch.device_config import (  # noqa: E402
    DeviceConfig,
    DeviceConfigError,
    device_config_from_source,
    load_device_config,
    make_device_config,
    parse_device_config,
)
from softswitch.errors import P4Error  # noqa: E402

STF_ONLY = Path(__file__).resolve().parent / "p4" / "stf_only"
needs_frontend = pytest.mark.skipif(
    not hasattr(frontend, "compile_file"), reason="front end not available yet"
)


def test_device_config_bundles_user_includes() -> None:
    """The bundle holds the main file and its user includes (-I too), not p4include files."""
    data = make_device_config(STF_ONLY / "fwd.p4", [STF_ONLY / "inc"])
    config = parse_device_config(data)
    assert isinstance(config, DeviceConfig) and config.main == "fwd.p4"
    assert sorted(config.files) == ["fwd.p4", "fwd_headers.p4", "inc/fwd_consts.p4"]
    assert config.include_dirs == ("inc",)
    assert config.files["fwd.p4"] == (STF_ONLY / "fwd.p4").read_text()


def test_device_config_plain_source_passthrough() -> None:
    """Plain P4 text is recognised as source, not as a bundle."""
    text = "#include <v1model.p4>\nheader h_t { bit<8> f; }\n"
    assert parse_device_config(text.encode()) == text


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "device config is empty"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b'{"pipelines": [], "header_types": []}', "looks like BMv2 JSON"),
        (b'{"format": "softswitch-device-config", "version": 9}', "version 9 is not supported"),
        (
            b'{"format": "softswitch-device-config", "version": 1, "main": "../x.p4", "files": {}}',
            "must be a relative path",
        ),
    ],
)
def test_device_config_bad_data(data: bytes, message: str) -> None:
    """Bad device configs raise DeviceConfigError with a clear message."""
    with pytest.raises(DeviceConfigError, match=message):
        parse_device_config(data)


def test_device_config_from_source_round_trip() -> None:
    """A single-file bundle built from text parses back to the same text."""
    config = parse_device_config(device_config_from_source("// x\n", "a/b/prog.p4"))
    assert isinstance(config, DeviceConfig)
    assert config.main == "prog.p4" and config.files == {"prog.p4": "// x\n"}


@needs_frontend
def test_device_config_recompiles_elsewhere(tmp_path: Path) -> None:
    """A bundle compiles to the same P4Info as the original files."""
    original = frontend.compile_file(str(STF_ONLY / "fwd.p4"), [str(STF_ONLY / "inc")])
    data = make_device_config(STF_ONLY / "fwd.p4", [STF_ONLY / "inc"])
    reloaded = load_device_config(data)
    assert build_p4info(reloaded) == build_p4info(original)


@needs_frontend
def test_device_config_accepts_plain_source() -> None:
    """A single-file program's plain source is a valid device config."""
    text = (STF_ONLY / "fwd.p4").read_text()
    text = text.replace('#include "fwd_headers.p4"', (STF_ONLY / "fwd_headers.p4").read_text())
    text = text.replace('#include "fwd_consts.p4"', "const bit<9> DEFAULT_PORT = 9w3;")
    p4info = build_p4info(load_device_config(text.encode()))
    assert [t.preamble.name for t in p4info.tables] == ["MyIngress.dmac"]


@needs_frontend
def test_device_config_compile_error_names_bundle_file() -> None:
    """Compile errors in a bundle point at the bundle's file name, not a temp path."""
    data = device_config_from_source("control c() { apply { x = 1; } }\n", "bad.p4")
    with pytest.raises(P4Error) as info:
        load_device_config(data)
    assert str(info.value).startswith("bad.p4:")


@needs_frontend
def test_fwd_program_p4info() -> None:
    """P4Info of tests/p4/stf_only/fwd.p4 compiled by our front end."""
    program = frontend.compile_file(str(STF_ONLY / "fwd.p4"), [str(STF_ONLY / "inc")])
    p4info = build_p4info(program)
    table = P4InfoIndex(p4info).table("dmac")
    assert table.size == 64
    assert [(m.name, m.bitwidth, m.match_type) for m in table.match_fields] == [
        ("hdr.ethernet.dstAddr", 48, p4info_pb2.MatchField.TERNARY)
    ]
    assert [a.preamble.name for a in p4info.actions] == ["MyIngress.set_port", "MyIngress.drop"]
    assert [(p.name, p.bitwidth) for p in p4info.actions[0].params] == [("port", 9)]


def test_sub_control_objects_are_qualified_by_instance() -> None:
    """Tables and actions of a sub-control instance carry the instance path (p4c inlining)."""
    a = _action("a")
    t = ir.TableDecl("t", "t", [], [_ref(a)], None)
    sub = ir.ControlDecl("Sub", [], [], [a, t], ir.Block([]))
    inst1 = ir.Instance("s1", "s1", ir.BlockType(sub), [])
    inst2 = ir.Instance("s2", "s2", ir.BlockType(sub), [])
    p4info = build_p4info(_program([inst1, inst2]))
    assert [x.preamble.name for x in p4info.tables] == ["MyIngress.s1.t", "MyIngress.s2.t"]
    assert [x.preamble.name for x in p4info.actions] == ["MyIngress.s1.a", "MyIngress.s2.a"]
    assert [x.preamble.alias for x in p4info.tables] == ["s1.t", "s2.t"]


@needs_frontend
def test_externs_program_p4info() -> None:
    """Every kind of control-plane object from tests/p4/stf_only/externs.p4."""
    p4info = build_p4info(frontend.compile_file(str(STF_ONLY / "externs.p4")))
    index = P4InfoIndex(p4info)
    dmac = index.table("dmac")
    assert dmac.preamble.id == 0x02000007
    assert [m.name for m in dmac.match_fields] == ["dst"]
    assert dmac.action_refs[1].scope == p4info_pb2.ActionRef.DEFAULT_ONLY
    assert index.action("flood").preamble.name == "MyIngress.flood"
    counter = index.find("direct_counter", "dmac_counter")
    assert list(dmac.direct_resource_ids) == [counter.preamble.id]
    assert counter.direct_table_id == dmac.preamble.id
    ecmp = index.table("ecmp")
    assert [m.name for m in ecmp.match_fields] == ["hdr.ethernet.etherType"]  # no selector
    selector = index.find("action_profile", "ecmp_selector")
    assert selector.with_selector and selector.size == 128
    assert ecmp.implementation_id == selector.preamble.id
    assert list(selector.table_ids) == [ecmp.preamble.id]
    assert index.counter("port_counter").spec.unit == p4info_pb2.CounterSpec.BOTH
    assert index.find("meter", "port_meter").size == 16
    assert index.register("seen").type_spec.bitstring.bit.bitwidth == 32
    assert index.find("digest", "learn_t").type_spec.struct.name == "learn_t"
    cpm = index.find("controller_packet_metadata", "packet_in")
    assert [(m.name, m.bitwidth) for m in cpm.metadata] == [("ingress_port", 9), ("_pad", 7)]


MIXED_CALLS = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> d; bit<48> s; bit<16> t; }
struct H { eth_t eth; }
struct M { bit<8> v; }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition accept; } }
control VC(inout H h, inout M m) { apply {} }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    action a(bit<8> x) { m.v = x; }
    action b(bit<9> port) { sm.egress_spec = port; }
    table t { key = { h.eth.d: exact; } actions = { a; NoAction; } default_action = NoAction(); }
    apply { t.apply(); a(3); b(1); }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout M m) { apply {} }
control D(packet_out p, in H h) { apply { p.emit(h.eth); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
"""


def test_directly_called_action_is_listed_without_parameters(tmp_path: Path) -> None:
    """As p4c 1.2.5 writes it: an action only called from an apply block is listed (ids stay
    stable) but without parameters, since its arguments are bound at the call; an action a
    table references keeps its parameters even where it is also called directly."""
    from softswitch.frontend import compile_file

    src = tmp_path / "mixed.p4"
    src.write_text(MIXED_CALLS)
    actions = {a.preamble.name: a for a in build_p4info(compile_file(src)).actions}
    assert [(p.name, p.bitwidth) for p in actions["I.a"].params] == [("x", 8)]
    assert "I.b" in actions and not actions["I.b"].params
