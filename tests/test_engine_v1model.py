"""v1model architecture behaviour of Pipeline.process, PTF style with scapy frames."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether, raw

from bench.pipeline_rate import bench_pipeline
from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
from softswitch.pipeline import Pipeline

P4_DIR = Path(__file__).resolve().parent / "p4"


@pytest.fixture(scope="module")
def ipv4() -> Pipeline:
    p = Pipeline.from_file(str(P4_DIR / "ipv4_forward.p4"))
    p.tables["MyIngress.ipv4_lpm"].insert(
        TableEntry(
            (FieldMatch(0x0A000200, prefix_len=24),),
            ActionCall("MyIngress.ipv4_forward", (0x001122334455, 3)),
        )
    )
    return p


def frame(dst: str = "10.0.2.2", ttl: int = 64) -> bytes:
    data: bytes = raw(
        Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02")
        / IP(src="10.0.1.1", dst=dst, ttl=ttl)
        / UDP(sport=1, dport=2)
        / b"payload"
    )
    return data


def test_forward_rewrites_macs_ttl_and_checksum(ipv4: Pipeline) -> None:
    """The LPM hit rewrites MACs, decrements TTL and recomputes the IPv4 checksum."""
    expected = raw(
        Ether(dst="00:11:22:33:44:55", src="00:00:00:00:00:01")
        / IP(src="10.0.1.1", dst="10.0.2.2", ttl=63)
        / UDP(sport=1, dport=2)
        / b"payload"
    )
    assert ipv4.process(1, frame()) == [(3, expected)]


def test_lpm_miss_drops(ipv4: Pipeline) -> None:
    """A miss runs the default action drop()."""
    assert ipv4.process(1, frame(dst="192.168.0.1")) == []


def test_garbage_frames_never_raise(ipv4: Pipeline) -> None:
    """Short and random frames are handled (dropped or forwarded), never raised."""
    rng = random.Random(1234)
    for n in list(range(0, 40)) + [60, 200, 1500]:
        data = bytes(rng.getrandbits(8) for _ in range(n))
        assert isinstance(ipv4.process(rng.randrange(0, 511), data), list)


def test_direct_counters_follow_hits(ipv4: Pipeline) -> None:
    """The table's entries keep hit counts only when the table has a direct counter."""
    entry = ipv4.tables["MyIngress.ipv4_lpm"].entries()[0]
    assert entry.packets == 0  # ipv4_lpm has no direct counter


def test_resubmit_preserves_field_list_and_resets_port() -> None:
    """A resubmitted packet sees instance_type 6, its field list, and ingress_port 0."""
    p = Pipeline.from_file(str(P4_DIR / "recirculate.p4"))
    f = bytes.fromhex("000000000001000000000002222200000000") + b"xy"
    assert p.process(5, f) == [(3, bytes.fromhex("000000000001000000000002222200070600") + b"xy")]


def test_recirculated_packet_reenters_with_deparsed_bytes() -> None:
    """Each recirculation re-parses what egress deparsed (pass count grows to 3)."""
    p = Pipeline.from_file(str(P4_DIR / "recirculate.p4"))
    f = bytes.fromhex("000000000001000000000002111100000000")
    out = p.process(1, f)
    assert out == [(2, bytes.fromhex("000000000001000000000002111103030400"))]


def test_clone_session_truncation() -> None:
    """A clone session's packet length cuts the clone, not the original."""
    src = (P4_DIR / "multicast_clone.p4").read_text().replace("CloneType.E2E", "CloneType.I2E")
    from softswitch.frontend import compile_source

    p = Pipeline(compile_source(src, str(P4_DIR / "multicast_clone.p4")))
    p.tables["MyIngress.fwd"].insert(
        TableEntry((FieldMatch(2),), ActionCall("MyIngress.forward_and_clone", (3, 100)))
    )
    p.pre.set_clone_session(100, [(6, 0)], truncate=8)
    f = bytes.fromhex("0000000000020000000000090800") + b"data"
    out = p.process(1, f)
    assert out == [
        (6, bytes.fromhex("0000000000ab0001")),
        (3, bytes.fromhex("0000000000020000000000030800") + b"data"),
    ]


def test_multicast_to_unknown_group_sends_nothing() -> None:
    """mcast_grp set to a group the PRE does not know: no copies, original discarded."""
    src = (P4_DIR / "multicast_clone.p4").read_text().replace("CloneType.E2E", "CloneType.I2E")
    from softswitch.frontend import compile_source

    p = Pipeline(compile_source(src, "mc.p4"))
    p.tables["MyIngress.fwd"].insert(
        TableEntry((FieldMatch(1),), ActionCall("MyIngress.multicast", (9,)))
    )
    assert p.process(1, bytes.fromhex("0000000000010000000000090800")) == []


def test_bench_reports_a_rate(ipv4: Pipeline) -> None:
    """bench_pipeline returns packets per second for the given frames."""
    assert bench_pipeline(ipv4, [(1, frame())], seconds=0.05) > 0


def test_engine_compiles_v1model_primitives_only_through_the_target() -> None:
    """mark_to_drop is v1model's: the engine without that target refuses it at its source
    location, and the v1model target's primitive writes the drop port."""
    from softswitch.engine.codegen import compile_program
    from softswitch.engine.target import TargetSpec
    from softswitch.errors import UnsupportedError
    from softswitch.frontend import compile_file
    from softswitch.v1model import V1MODEL

    program = compile_file(str(P4_DIR / "ipv4_forward.p4"))
    no_checksums = {k: v for k, v in V1MODEL.primitives.items() if "checksum" not in k}
    bare = TargetSpec(name="bare", roles=V1MODEL.roles, primitives=no_checksums)
    with pytest.raises(UnsupportedError, match=r"ipv4_forward\.p4:\d+:\d+.*verify_checksum"):
        compile_program(program, bare)
    bare = TargetSpec(name="bare", roles=V1MODEL.roles)
    with pytest.raises(UnsupportedError, match=r"ipv4_forward\.p4:\d+:\d+"):
        compile_program(program, bare)
    compiled = compile_program(program, V1MODEL)
    assert ".egress_spec = 511" in compiled.source
    assert "_ctx.checksum_error = 1" in compiled.source


def test_digest_and_field_lists_come_from_the_v1model_target() -> None:
    """Digests read at the end of ingress and @field_list copy functions are v1model's
    block hooks: with its primitives but without them the engine adds neither."""
    from softswitch.engine.codegen import compile_program
    from softswitch.engine.target import TargetSpec
    from softswitch.frontend import compile_file
    from softswitch.v1model import V1MODEL

    digest = compile_file(str(P4_DIR / "p4rt_codes.p4"))
    lists = compile_file(str(P4_DIR / "multicast_clone.p4"))
    full = [compile_program(p, V1MODEL) for p in (digest, lists)]
    assert "_dg = 0" in full[0].source and "if _dg == 1:" in full[0].source
    assert "def fl_copy_1(d, s):" in full[1].source and 1 in full[1].field_lists
    no_hooks = TargetSpec(name="bare", roles=V1MODEL.roles, primitives=V1MODEL.primitives)
    bare = [compile_program(p, no_hooks) for p in (digest, lists)]
    assert "_dg" not in bare[0].source and "_ctx.digest = (" in bare[0].source
    assert "fl_copy_" not in bare[1].source and not bare[1].field_lists
