"""The BMv2-like traffic manager of the built-in target (``egress_order`` fifo/random).

The synchronous default runs each replica's egress right after ingress in replica order;
the queued modes put packets in per-port queues (tail drop at the depth, 64 by default as
BMv2) and fill the queueing metadata. The random mode must produce orders the synchronous
mode never can, reproducibly for a seed.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from softswitch.engine.trace import PacketTrace
from softswitch.frontend import compile_source
from softswitch.pipeline import Pipeline
from softswitch.ports import MemoryPort
from softswitch.switch import SwitchDataPlane, _UsageError, parse_args
from softswitch.traffic_manager import BMV2_QUEUE_DEPTH

P4 = Path(__file__).parent / "p4"
MCAST = 0x88B5  # EtherType the program multicasts to group 1

SOURCE = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header q_t {
    bit<32> id; bit<32> seen; bit<32> enq_ts; bit<32> enq_qdepth;
    bit<32> deq_td; bit<32> deq_qdepth; bit<48> igts; bit<48> egts;
}
struct headers { eth_t eth; q_t q; }
struct metadata { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.q); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.eth.etype == 0x88b5) { sm.mcast_grp = 1; }
        else { sm.egress_spec = (bit<9>) hdr.eth.dst[7:0]; }
        hdr.q.igts = sm.ingress_global_timestamp;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(1) last;   // the egress port of the previous egress pass
    apply {
        bit<32> prev;
        last.read(prev, 0);
        hdr.q.seen = prev;
        last.write(0, (bit<32>) sm.egress_port);
        hdr.q.enq_ts = sm.enq_timestamp;
        hdr.q.enq_qdepth = (bit<32>) sm.enq_qdepth;
        hdr.q.deq_td = sm.deq_timedelta;
        hdr.q.deq_qdepth = (bit<32>) sm.deq_qdepth;
        hdr.q.egts = sm.egress_global_timestamp;
    }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.q); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
PROGRAM = compile_source(SOURCE, "tm.p4")
Q_FIELDS = ("id", "seen", "enq_ts", "enq_qdepth", "deq_td", "deq_qdepth", "igts", "egts")
Q_WIDTHS = (4, 4, 4, 4, 4, 4, 6, 6)


def frame(ident: int, port: int = 1, etype: int = 0x0800) -> bytes:
    eth = port.to_bytes(6, "big") + bytes.fromhex("00000000000a") + etype.to_bytes(2, "big")
    return eth + ident.to_bytes(4, "big") + bytes(sum(Q_WIDTHS) - 4)


def fields(data: bytes) -> dict[str, int]:
    out, pos = {}, 14
    for name, width in zip(Q_FIELDS, Q_WIDTHS, strict=True):
        out[name] = int.from_bytes(data[pos : pos + width], "big")
        pos += width
    return out


def mcast_pipeline(**tm: object) -> Pipeline:
    p = Pipeline(PROGRAM, clock_ns=lambda: 0, **tm)  # type: ignore[arg-type]
    p.pre.set_group(1, [(1, 0), (2, 0)])
    return p


def run_multicast(p: Pipeline, n: int) -> list[tuple[int, dict[str, int]]]:
    out = []
    for i in range(n):
        out += p.process(3, frame(i, etype=MCAST))
    out += p.transmit()
    return [(port, fields(data)) for port, data in out]


def test_sync_mode_runs_replicas_in_replica_order() -> None:
    """Synchronous egress: the port-2 replica always runs right after the port-1 replica
    of the same packet, so it always sees 1 in the register."""
    outs = run_multicast(mcast_pipeline(), 30)
    assert [port for port, _ in outs] == [1, 2] * 30
    assert {f["seen"] for port, f in outs if port == 2} == {1}
    assert {f["seen"] for port, f in outs if port == 1} == {0, 2}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_egress_order_gives_outcomes_sync_never_does(seed: int) -> None:
    """Random egress order: port 2's replica sometimes runs egress before port 1's (it
    then sees something other than 1), every replica still leaves exactly once, and
    per port the packets keep their order (one FIFO queue per port)."""
    outs = run_multicast(mcast_pipeline(egress_order="random", egress_seed=seed), 30)
    for port in (1, 2):
        assert [f["id"] for p, f in outs if p == port] == list(range(30))
    seen_on_2 = [f["seen"] for port, f in outs if port == 2]
    assert any(s != 1 for s in seen_on_2), "no reordering in 30 multicasts"
    # port-1 egress after port-2 egress of the same packet or a later one: also impossible
    # in sync mode, where port 1 always follows a port-2 pass of the previous packet
    assert [port for port, _ in outs] != [1, 2] * 30


def test_random_egress_order_is_reproducible_for_a_seed() -> None:
    a = run_multicast(mcast_pipeline(egress_order="random", egress_seed=7), 20)
    b = run_multicast(mcast_pipeline(egress_order="random", egress_seed=7), 20)
    c = run_multicast(mcast_pipeline(egress_order="random", egress_seed=8), 20)
    assert a == b
    assert a != c


def test_random_mode_lets_later_ingress_overtake_earlier_egress() -> None:
    """Packets may stay queued across received frames (BMv2's egress threads lag the
    ingress thread): some process() call returns frames of an earlier packet."""
    p = Pipeline(PROGRAM, egress_order="random", egress_seed=4)
    late, sent = [], []
    for i in range(40):
        ids = [fields(d)["id"] for _, d in p.process(3, frame(i, port=1))]
        late += [x for x in ids if x != i]
        sent += ids
    sent += [fields(d)["id"] for _, d in p.transmit()]
    assert late, "every packet left during its own process() call"
    assert sent == list(range(40))  # one queue: FIFO, nothing lost
    assert p.pending == 0


def test_fifo_queue_metadata_and_timestamps() -> None:
    """Queue depth at enqueue/dequeue and the timestamps, in µs since start, as BMv2's
    simple_switch fills them."""
    now = [0]
    p = Pipeline(PROGRAM, egress_order="fifo", clock_ns=lambda: now[0])
    for i in range(3):
        now[0] = (i + 1) * 1_000_000  # 1, 2, 3 ms
        p.receive(3, frame(i, port=1))
    assert p.pending == 3 and p.queue_lengths() == {1: 3}
    now[0] = 10_000_000
    outs = [fields(d) for _, d in p.transmit()]
    assert [f["id"] for f in outs] == [0, 1, 2]
    assert [f["enq_qdepth"] for f in outs] == [0, 1, 2]
    assert [f["deq_qdepth"] for f in outs] == [2, 1, 0]
    assert [f["igts"] for f in outs] == [1000, 2000, 3000]
    assert [f["enq_ts"] for f in outs] == [1000, 2000, 3000]
    assert [f["deq_td"] for f in outs] == [9000, 8000, 7000]
    assert [f["egts"] for f in outs] == [10000] * 3
    assert p.pending == 0 and p.queue_lengths() == {}


def test_sync_mode_queue_metadata_is_an_empty_queue() -> None:
    now = [5_000_000]
    p = Pipeline(PROGRAM, clock_ns=lambda: now[0])
    now[0] = 7_000_000
    (_, data), = p.process(3, frame(9, port=2))
    f = fields(data)
    assert (f["enq_qdepth"], f["deq_qdepth"], f["deq_td"]) == (0, 0, 0)
    assert f["enq_ts"] == f["igts"] == f["egts"] == 2000


def test_queue_overflow_tail_drops_at_bmv2_depth() -> None:
    """70 frames to one port before its egress runs: BMv2's 64-packet queue keeps the
    first 64 and drops the last 6."""
    p = Pipeline(PROGRAM, egress_order="fifo")
    for i in range(70):
        p.receive(3, frame(i, port=4))
    assert p.pending == BMV2_QUEUE_DEPTH == 64
    assert p.queue_drops == {4: 6}
    outs = p.transmit()
    assert [fields(d)["id"] for _, d in outs] == list(range(64))
    assert {port for port, _ in outs} == {4}


def test_multicast_burst_overflows_a_small_queue() -> None:
    """One packet whose replicas exceed a port's queue: tail drop in the queued modes,
    while sync mode (no queues) sends them all."""
    replicas = [(1, rid) for rid in range(10)] + [(2, 0)]
    sync = Pipeline(PROGRAM)
    sync.pre.set_group(1, replicas)
    assert len(sync.process(3, frame(0, etype=MCAST))) == 11
    for order in ("fifo", "random"):
        p = Pipeline(PROGRAM, egress_order=order, queue_depth=4, egress_seed=1)
        p.pre.set_group(1, replicas)
        outs = p.process(3, frame(0, etype=MCAST)) + p.transmit()
        assert sorted(port for port, _ in outs) == [1, 1, 1, 1, 2]
        assert p.queue_drops == {1: 6}


def test_per_port_queue_depth() -> None:
    p = Pipeline(PROGRAM, egress_order="fifo")
    p.set_queue_depth(2, port=5)
    for i in range(4):
        p.receive(3, frame(i, port=5))
        p.receive(3, frame(i, port=6))
    assert p.queue_lengths() == {5: 2, 6: 4}
    assert p.queue_drops == {5: 2}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"egress_order": "lifo"}, "egress_order 'lifo': choose from sync, fifo, random"),
        ({"egress_order": "fifo", "queue_depth": 0}, "queue_depth 0: must be in 1.."),
        ({"egress_order": "random", "egress_seed": "x"}, "seed 'x': must be an integer"),
    ],
)
def test_bad_tm_options_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pipeline(PROGRAM, **kwargs)  # type: ignore[arg-type]


def test_sync_pipeline_has_no_queue_operations() -> None:
    p = Pipeline(PROGRAM)
    assert p.pending == 0 and p.transmit() == [] and not p.queued
    with pytest.raises(ValueError, match="receive\\(\\) needs egress_order 'fifo' or 'random'"):
        p.receive(1, frame(0))


STF_PROGRAMS = sorted(p.stem for p in P4.glob("*.stf") if (P4 / f"{p.stem}.p4").exists())


@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_fifo_mode_passes_sample_stf(name: str) -> None:
    """With queues drained after every frame, the fifo mode transmits exactly what the
    synchronous mode does (clones, recirculation, resubmit, multicast included)."""
    from softswitch.stf import run_stf_file

    pipeline = Pipeline.from_file(str(P4 / f"{name}.p4"), egress_order="fifo")
    result = run_stf_file(pipeline, P4 / f"{name}.stf")
    assert result.passed, result.first_mismatch


def test_traced_random_pipeline_records_queue_drops() -> None:
    traces: list[PacketTrace] = []
    p = Pipeline(PROGRAM, egress_order="fifo", queue_depth=1, trace=traces.append)
    p.pre.set_group(1, [(1, 0), (1, 1)])
    out = p.process(3, frame(0, etype=MCAST))
    assert len(out) == 1
    text = "\n".join(traces[-1].lines)
    assert "drop: egress queue of port 1 full (tail drop)" in text


def test_cli_options() -> None:
    opts = parse_args(["--no-p4", "--egress-order", "random", "--seed", "9", "--queue-depth", "16"])
    assert (opts.egress_order, opts.seed, opts.queue_depth) == ("random", 9, 16)
    assert parse_args(["--no-p4"]).egress_order == "sync"
    for argv, msg in [
        (["--egress-order", "x"], "--egress-order x: choose from sync, fifo, random"),
        (["--egress-order", "random", "--seed", "a"], "--seed a: not an integer"),
        (["--seed", "3"], "--seed 3: only meaningful with --egress-order random"),
        (["--queue-depth", "0"], "--queue-depth 0: must be in 1.."),
    ]:
        with pytest.raises(_UsageError, match=msg):
            parse_args(["--no-p4", *argv])


def test_switch_loop_transmits_queued_packets_when_idle() -> None:
    """In the switch process, packets left in the queues leave once input is idle."""
    p = Pipeline(PROGRAM, egress_order="random", egress_seed=3)
    p.pre.set_group(1, [(1, 0), (2, 0)])
    ports = [MemoryPort(1), MemoryPort(2), MemoryPort(3)]
    sw = SwitchDataPlane(ports, p)
    t = threading.Thread(target=sw.run, daemon=True)
    t.start()
    try:
        for i in range(10):
            ports[2].inject(frame(i, etype=MCAST))
        got1 = [fields(f)["id"] for f in _receive_n(ports[0], 10)]
        got2 = [fields(f)["id"] for f in _receive_n(ports[1], 10)]
    finally:
        sw.stop()
        t.join(5)
        sw.close()
    assert got1 == got2 == list(range(10))
    assert ports[2].counters.dropped == 0


def _receive_n(port: MemoryPort, n: int) -> list[bytes]:
    out: list[bytes] = []
    while len(out) < n:
        f = port.receive(5.0)
        assert f is not None, f"port {port.number}: only {len(out)} of {n} frames"
        out.append(f)
    return out


def test_pipelines_installed_over_p4runtime_keep_the_egress_order() -> None:
    """SetForwardingPipelineConfig builds its pipeline with the switch's --egress-order."""
    import functools

    from softswitch.p4runtime.server import default_loader

    loader = functools.partial(default_loader, egress_order="random", egress_seed=5)
    pipeline, p4info = loader(SOURCE.encode())
    assert pipeline.queued and pipeline.egress_order == "random"
    assert p4info.registers[0].preamble.name == "E.last"


def test_grpc_address_may_be_a_unix_socket() -> None:
    assert parse_args(["--no-p4", "--grpc-server-addr", "unix:/tmp/x.sock"]).grpc_addr == (
        "unix:/tmp/x.sock"
    )
    with pytest.raises(_UsageError, match="expected unix:PATH"):
        parse_args(["--no-p4", "--grpc-server-addr", "unix:"])
