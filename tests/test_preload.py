"""A pipeline loaded ahead (the fork server's) and taken later equals one loaded then.

Each test loads a preload at one moment of a hand-moved clock and takes it seconds later,
beside a pipeline freshly loaded at that later moment, and compares what they do.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from softswitch.device_config import device_config_from_source
from softswitch.p4runtime.server import default_loader
from softswitch.preload import PipelineKey, Preloaded, preloading_loader
from softswitch.stf import run_stf
from tests.fake_clock import FakeRealTime

#: Forwards by ingress port and writes the ingress timestamp (us since the pipeline was
#: built) into the source MAC, so a pipeline that kept its load's time origin shows.
PROGRAM = """\
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers_t { ethernet_t ethernet; }
struct meta_t { }
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(8) seen;
    action drop() { mark_to_drop(standard_metadata); }
    action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; drop; }
        default_action = drop();
    }
    apply {
        bit<32> n;
        seen.read(n, 0);
        seen.write(0, n + 1);
        fwd.apply();
        hdr.ethernet.srcAddr = standard_metadata.ingress_global_timestamp;
        hdr.ethernet.etherType = (bit<16>)n;
    }
}
control MyEgress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
"""
CONFIG = device_config_from_source(PROGRAM, "stamp.p4")
STF = """\
add MyIngress.fwd standard_metadata.ingress_port:1 MyIngress.set_port(port:2)
packet 1 0000000000aa 0000000000bb 0800 00112233
packet 1 0000000000aa 0000000000bb 0800 00112233
packet 3 0000000000aa 0000000000bb 0800 00112233
"""
LOADED_AT_S, TAKEN_AT_S = 1000.0, 1005.0


def _tm(engine: str, clock: FakeRealTime, egress_order: str = "sync") -> dict[str, Any]:
    """The options ``pipeline_options`` gives a switch (its clock: the fake one)."""
    return {"egress_order": egress_order, "queue_depth": 64, "egress_seed": None,
            "clock_ns": clock.now_ns, "engine": engine}


def _key(engine: str, egress_order: str = "sync") -> PipelineKey:
    return PipelineKey.of(_tm(engine, FakeRealTime(), egress_order), 1.0, False)


@pytest.fixture
def clock() -> Iterator[FakeRealTime]:
    yield FakeRealTime(LOADED_AT_S)


@pytest.mark.parametrize("engine", ["python", "c"])
def test_taken_pipeline_acts_as_one_loaded_when_taken(clock: FakeRealTime, engine: str) -> None:
    """Same frames out (timestamps from the taking moment, fresh registers), same P4Info,
    same engine as a pipeline loaded at the moment the preload was taken."""
    key = _key(engine)
    preloaded = Preloaded.load(CONFIG, key, clock.now_ns)
    clock.set(TAKEN_AT_S)
    taken = preloaded.take(CONFIG, key, clock.now_ns, None)
    assert taken is not None
    fresh = default_loader(CONFIG, **_tm(engine, clock))
    assert taken[1] == fresh[1]
    assert taken[0].engine == fresh[0].engine == engine
    results = [run_stf(pipeline, STF) for pipeline, _ in (taken, fresh)]
    assert results[0].outputs == results[1].outputs
    frames = results[0].outputs[2]
    assert len(frames) == 2 and frames[0][6:12] == bytes(6)  # 0 us after it was taken
    assert [f[12:14] for f in frames] == [b"\x00\x00", b"\x00\x01"]  # the register: fresh


def test_preload_is_taken_once_then_loads_afresh(clock: FakeRealTime) -> None:
    """The second push of the same program gets a pipeline of its own (fresh state)."""
    key = _key("python")
    preloaded = Preloaded.load(CONFIG, key, clock.now_ns)
    loads: list[bytes] = []

    def fallback(data: bytes) -> tuple[Any, Any]:
        loads.append(data)
        return default_loader(data, **_tm("python", clock))

    loader = preloading_loader(preloaded, key, clock.now_ns, None, fallback)
    first, _ = loader(CONFIG)
    second, _ = loader(CONFIG)
    assert loads == [CONFIG] and first is not second


@pytest.mark.parametrize("change", [
    {"engine": "c"}, {"egress_order": "fifo"}, {"queue_depth": 32}, {"tdf": 2.0},
    {"trace": True}, {"log_msgs": True},
])
def test_other_options_load_afresh(clock: FakeRealTime, change: dict[str, Any]) -> None:
    """Any pipeline option the preload was not loaded with: the preload stays untouched."""
    preloaded = Preloaded.load(CONFIG, _key("python"), clock.now_ns)
    assert preloaded.take(CONFIG, replace(_key("python"), **change), clock.now_ns, None) is None
    assert preloaded.pipeline is not None


def test_another_program_loads_afresh(clock: FakeRealTime) -> None:
    """Other device-config bytes (the same program bundled under another name) miss."""
    key = _key("python")
    preloaded = Preloaded.load(CONFIG, key, clock.now_ns)
    other = device_config_from_source(PROGRAM, "other.p4")
    assert preloaded.take(other, key, clock.now_ns, None) is None
    assert preloaded.take(CONFIG, key, clock.now_ns, None) is not None


def test_taking_reseeds_the_generators(clock: FakeRealTime) -> None:
    """random() gets new entropy (each forked switch its own sequence) and the random
    egress order the taker's seed, as their constructors would have done."""
    key = _key("python", egress_order="random")
    preloaded = Preloaded.load(CONFIG, key, clock.now_ns)
    assert preloaded.pipeline is not None
    rng = preloaded.pipeline.compiled.namespace["_rng"]
    before = rng.getstate()
    taken = preloaded.take(CONFIG, key, clock.now_ns, 7)
    assert taken is not None
    assert rng.getstate() != before
    assert taken[0]._switch.rng.getstate() == random.Random(7).getstate()


def test_taker_logs_what_the_load_logged(clock: FakeRealTime) -> None:
    """The load's log lines (here: the C engine's) reach the log of the switch taking it."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("softswitch")
    handler, level = Keep(), logger.level
    logger.setLevel(logging.INFO)
    try:
        preloaded = Preloaded.load(CONFIG, _key("c"), clock.now_ns)
        logger.addHandler(handler)
        preloaded.take(CONFIG, _key("c"), clock.now_ns, None)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert any("running on the C engine" in r.getMessage() for r in records), records
