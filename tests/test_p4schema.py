"""The shared P4Info index (p4schema): names, aliases, ids, members and the errors of a miss."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from p4schema import P4InfoIndex, P4InfoLookupError, resolve_name

P4INFO = """
tables {
  preamble { id: 33554433 name: "MyIngress.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "hdr.ipv4.dstAddr" bitwidth: 32 match_type: LPM }
  match_fields { id: 2 name: "meta.vrf" bitwidth: 8 match_type: EXACT }
  action_refs { id: 16777217 }
  size: 1024
}
tables {
  preamble { id: 33554434 name: "MyIngress.s1.t" alias: "s1.t" }
  action_refs { id: 16777218 }
}
tables {
  preamble { id: 33554435 name: "MyIngress.s2.t" alias: "s2.t" }
  action_refs { id: 16777218 }
}
actions {
  preamble { id: 16777217 name: "MyIngress.set_nhop" alias: "set_nhop" }
  params { id: 1 name: "dstAddr" bitwidth: 48 }
  params { id: 2 name: "port" bitwidth: 9 }
}
actions { preamble { id: 16777218 name: "NoAction" alias: "NoAction" } }
counters { preamble { id: 302000001 name: "MyIngress.rx" alias: "rx" } size: 8 }
meters { preamble { id: 335544321 name: "MyIngress.police" alias: "police" } size: 4 }
registers { preamble { id: 369098753 name: "MyIngress.slots" alias: "slots" } size: 16 }
digests { preamble { id: 385875969 name: "learn_t" alias: "learn_t" } }
value_sets { preamble { id: 50331649 name: "MyParser.pvs" alias: "pvs" } size: 4 }
controller_packet_metadata {
  preamble { id: 67146229 name: "packet_in" alias: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 }
}
"""


@pytest.fixture
def index() -> P4InfoIndex:
    return P4InfoIndex(text_format.Parse(P4INFO, p4info_pb2.P4Info()))


def test_by_full_name_suffix_and_id(index: P4InfoIndex) -> None:
    """Full name, unique dot-suffix and id all find the same object, for every kind."""
    assert index.table("MyIngress.ipv4_lpm").preamble.id == 33554433
    assert index.table(33554433).preamble.name == "MyIngress.ipv4_lpm"
    assert index.action("set_nhop").preamble.id == 16777217
    assert index.counter("rx").size == 8
    assert index.meter("MyIngress.police").size == 4
    assert index.register(369098753).preamble.name == "MyIngress.slots"
    assert index.digest("learn_t").preamble.id == 385875969
    assert index.value_set("pvs").size == 4
    assert index.packet_metadata("packet_in").preamble.id == 67146229
    assert index.by_id(16777218).preamble.name == "NoAction"
    assert index.find("value_set", "MyParser.pvs").preamble.id == 50331649
    assert index.names("tables") == ["MyIngress.ipv4_lpm", "MyIngress.s1.t", "MyIngress.s2.t"]


def test_by_alias(index: P4InfoIndex) -> None:
    """The preamble's alias finds its object, also when it is not a suffix of the name."""
    p4info = text_format.Parse(P4INFO, p4info_pb2.P4Info())
    p4info.registers[0].preamble.alias = "aggregation_slots"
    assert P4InfoIndex(p4info).register("aggregation_slots").preamble.name == "MyIngress.slots"
    assert index.table("s1.t").preamble.id == 33554434


def test_ambiguous_short_name_names_both(index: P4InfoIndex) -> None:
    """A short name two objects share is an error listing both, never a silent pick."""
    with pytest.raises(P4InfoLookupError, match="table name 't' is ambiguous: "
                       "MyIngress.s1.t, MyIngress.s2.t"):
        index.table("t")


def test_alias_that_is_another_objects_suffix_is_ambiguous() -> None:
    """A hand-written alias that is also another object's suffix fits both: ambiguous."""
    p4info = text_format.Parse(P4INFO, p4info_pb2.P4Info())
    p4info.counters.add().preamble.MergeFrom(
        p4info_pb2.Preamble(id=302000002, name="MyEgress.tx", alias="rx")
    )
    with pytest.raises(P4InfoLookupError, match="ambiguous: MyEgress.tx, MyIngress.rx"):
        P4InfoIndex(p4info).counter("rx")


def test_unknown_name_and_id_say_what_was_missed(index: P4InfoIndex) -> None:
    """A miss names the kind and the value, with the closest name when there is one."""
    with pytest.raises(
        P4InfoLookupError, match=r"^no table named 'ipv4_lmp'. Did you mean 'MyIngress.ipv4_lpm'\?$"
    ) as info:
        index.table("ipv4_lmp")
    assert (info.value.kind, info.value.key) == ("table", "ipv4_lmp")
    with pytest.raises(P4InfoLookupError, match=r"^no meter with id 7 \(0x7\)$"):
        index.meter(7)
    none = r"^no direct meter named 'x' \(the P4Info has none\)$"
    with pytest.raises(P4InfoLookupError, match=none):
        index.direct_meter("x")
    with pytest.raises(P4InfoLookupError, match=r"no P4Info object has id 5 \(0x5\)"):
        index.by_id(5)
    with pytest.raises(ValueError, match="unknown P4Info object kind 'tabel'"):
        index.find("tabel", "ipv4_lpm")
    assert index.tables.get("nothing") is None


def test_members_by_name_suffix_and_id(index: P4InfoIndex) -> None:
    """Match fields, parameters and header metadata by id, name or suffix; misses list them."""
    table = index.table("ipv4_lpm")
    assert P4InfoIndex.match_field(table, "dstAddr").id == 1
    assert P4InfoIndex.match_field(table, 2).name == "meta.vrf"
    action = index.action("set_nhop")
    assert P4InfoIndex.param(action, "port").id == 2
    assert P4InfoIndex.metadata(index.packet_metadata("packet_in"), 1).name == "ingress_port"
    with pytest.raises(P4InfoLookupError, match=r"action 'MyIngress.set_nhop' has no parameter "
                       r"named 'prt'. Did you mean 'port'\?"):
        P4InfoIndex.param(action, "prt")
    with pytest.raises(P4InfoLookupError, match=r"has no match field with id 9$"):
        P4InfoIndex.match_field(table, 9)
    assert index.table_actions(table) == ["MyIngress.set_nhop"]


def test_resolve_name_plain_suffix_only_when_asked() -> None:
    """STF key names may be a plain (non-dot) suffix; the index never accepts one."""
    names = ["hdr.ethernet.dstAddr"]
    assert resolve_name("Addr", names, "key field", plain_suffix=True) == names[0]
    assert resolve_name("ethernet.dstAddr", names, "key field") == names[0]
    with pytest.raises(P4InfoLookupError, match="no key field named 'Addr'"):
        resolve_name("Addr", names, "key field")
