"""The illegal P4Runtime request catalogue has one home, reliability/illegal.py: the
conformance table (tests/p4runtime_illegal.py) builds its requests with the catalogue's
builders and ids, and the campaign's requests, built from the same builders, are each
refused by this switch running netreduce.p4."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

import reliability.illegal as catalogue
from controller.schema import ControlPlaneSchema
from softswitch.device_config import make_device_config
from softswitch.p4runtime.server import default_loader
from tests import p4runtime_illegal as table
from tests.p4runtime_illegal import Target, our_server

NETREDUCE = Path(__file__).resolve().parents[1] / "p4src" / "netreduce.p4"
BUILDERS = (
    "table_entry", "exact", "lpm", "ternary", "range_match", "default_entry", "indirect_entry",
    "profile_member", "profile_group", "with_type", "counter_entry", "direct_counter_entry",
    "meter_entry", "register_entry", "multicast_group", "clone_session", "digest_entry",
)


def test_the_conformance_table_uses_the_catalogue() -> None:
    """Every builder and bad id the table uses is the catalogue's own object, and the
    table defines none of its own under the old names."""
    for name in BUILDERS:
        if hasattr(table, name):
            assert getattr(table, name) is getattr(catalogue, name), name
    for name in ("BAD_TABLE_ID", "BAD_ACTION_ID", "BAD_COUNTER_ID", "BAD_METER_ID"):
        assert getattr(table, name) == getattr(catalogue, name)
    for old in ("mcast", "clone", "digest", "register", "group", "BAD_TABLE", "BAD_ACTION"):
        assert not hasattr(table, old), f"tests/p4runtime_illegal.py defines {old} again"


def test_builders_make_the_requests_they_name() -> None:
    """Parameters keep their ids, a default entry is a MODIFY flagged as the default, a
    multicast delete carries no replicas, counter data is optional."""
    u = catalogue.table_entry(7, [catalogue.lpm(1, b"\x0a", 8)], 3, [(2, b"\x01")])
    te = u.entity.table_entry
    assert (u.type, te.table_id, te.match[0].lpm.prefix_len) == (u.INSERT, 7, 8)
    assert [(p.param_id, p.value) for p in te.action.action.params] == [(2, b"\x01")]
    d = catalogue.default_entry(7, 3)
    assert d.type == d.MODIFY and d.entity.table_entry.is_default_action
    m = catalogue.multicast_group(4000, (), catalogue.Update.DELETE)
    assert not m.entity.packet_replication_engine_entry.multicast_group_entry.replicas
    assert not catalogue.counter_entry(1, 0, packets=None).entity.counter_entry.HasField("data")


@pytest.fixture(scope="module")
def netreduce() -> tuple[ControlPlaneSchema, bytes]:
    dc = make_device_config(NETREDUCE)
    _pipeline, p4info = default_loader(dc)
    return ControlPlaneSchema(p4info), dc


def test_campaign_writes_are_one_wrong_thing_each(
        netreduce: tuple[ControlPlaneSchema, bytes]) -> None:
    """Ten distinct writes, in the campaign's order; the LPM ones are too wide or too long
    for ipv4_lpm's 32-bit field."""
    schema, _dc = netreduce
    writes = catalogue.campaign_writes(schema)
    names = [n for n, _u in writes]
    assert len(names) == len(set(names)) == 10
    assert names[0] == "insert into a table id the P4Info lacks"
    assert writes[0][1].entity.table_entry.table_id == catalogue.BAD_TABLE_ID
    lpm_of = {n: u.entity.table_entry.match[0].lpm for n, u in writes[1:3]}
    assert len(lpm_of["LPM key wider than its 32-bit field"].value) == 5
    assert lpm_of["LPM prefix length 40 on a 32-bit field"].prefix_len == 40


def test_our_switch_refuses_every_campaign_write(
        netreduce: tuple[ControlPlaneSchema, bytes]) -> None:
    """Each campaign write is refused by this switch running netreduce.p4."""
    schema, dc = netreduce
    with our_server() as address:
        target = Target(address, schema.p4info, dc)
        try:
            target.push_pipeline()
            for name, u in catalogue.campaign_writes(schema):
                with pytest.raises(grpc.RpcError):
                    target.write([u])
                    pytest.fail(f"accepted: {name}")
        finally:
            target.close()
