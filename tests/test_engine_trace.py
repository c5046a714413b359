"""Per-packet traces of the instrumented pipeline (``Pipeline(..., trace=...)``)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
from softswitch.engine.trace import PacketTrace
from softswitch.pipeline import Pipeline
from softswitch.ports import MemoryPort
from softswitch.switch import SwitchDataPlane
from softswitch.v1model import TracingV1Switch, V1Switch

P4 = Path(__file__).resolve().parent / "p4"
PROGRAM = str(P4 / "trace.p4")
ETH = bytes.fromhex("ffffffffffff020000000001")
TAGGED = ETH + b"\x88\xb5"
MAC = 0x0A0B0C0D0E0F


def configure(p: Pipeline) -> Pipeline:
    ops = p.tables["TIngress.ops"]
    ops.insert(TableEntry((FieldMatch(1),), ActionCall("TIngress.set_port", (2, MAC))))
    ops.insert(TableEntry((FieldMatch(3),), ActionCall("TIngress.flood", (5,))))
    return p


@pytest.fixture(scope="module")
def traced() -> Pipeline:
    p = configure(Pipeline.from_file(PROGRAM, trace=True))
    p.trace_sink = None
    return p


def trace_of(
    p: Pipeline, frame: bytes, port: int = 1
) -> tuple[list[tuple[int, bytes]], PacketTrace]:
    out = p.process(port, frame)
    assert p.last_trace is not None
    return out, p.last_trace


def test_hit_trace_shows_parser_path_table_action_and_output(traced: Pipeline) -> None:
    """A forwarded packet's block: parser states, headers, table hit with args, transmit."""
    out, tr = trace_of(traced, TAGGED + b"\x01\x00")
    assert [p for p, _ in out] == [2]
    assert tr.lines == [
        "  ingress port=1 NORMAL",
        "    parser: start > parse_tag > accept; extracted hdr.eth, hdr.tag",
        "    table TIngress.ops: hit -> TIngress.set_port(port=2, mac=0x0a0b0c0d0e0f)",
        "    => to egress port 2",
        "  egress port=2 NORMAL",
        "    => transmit port 2, 16 bytes",
        "  result: port 2 (16 B)",
    ]
    assert tr.outputs == [(2, 16)] and tr.drops == []
    assert tr.text().startswith("packet in port 1, 16 bytes\n")


def test_miss_runs_default_and_reports_mark_to_drop(traced: Pipeline) -> None:
    """A miss shows the default action and the drop names mark_to_drop's location."""
    out, tr = trace_of(traced, TAGGED + b"\x09\x00")
    assert out == []
    assert "    table TIngress.ops: miss -> TIngress.drop()" in tr.lines
    assert tr.drops == [
        f"egress_spec == 511 at the end of ingress (mark_to_drop() at {P4 / 'trace.p4'}:28:21)"
    ]
    assert tr.lines[-1] == "  result: dropped (no frame transmitted)"


def test_parser_error_and_log_msg(traced: Pipeline) -> None:
    """A truncated header: the parser rejects with PacketTooShort, log_msg lands in the block."""
    out, tr = trace_of(traced, TAGGED + b"\x01")
    assert out == []
    assert tr.lines[1] == (
        "    parser: start > parse_tag > reject (PacketTooShort); extracted hdr.eth; "
        "parser error PacketTooShort"
    )
    assert "    log_msg: parser error on port 1" in tr.lines
    assert tr.drops[0].endswith("; parser error PacketTooShort")


def test_drop_by_egress_spec_without_mark_to_drop(traced: Pipeline) -> None:
    """egress_spec = 511 written by the program is reported as such."""
    out, tr = trace_of(traced, ETH + b"\x08\x00")
    assert out == []
    assert tr.lines[1] == "    parser: start > accept; extracted hdr.eth"
    assert tr.drops == ["egress_spec == 511 at the end of ingress (set by the program)"]


def test_unknown_multicast_group_is_a_drop_reason(traced: Pipeline) -> None:
    """mcast_grp of a group that does not exist drops with that reason."""
    traced.pre.delete_group(5) if traced.pre.replicas(5) else None
    out, tr = trace_of(traced, TAGGED + b"\x03\x00")
    assert out == []
    assert tr.drops == ["multicast group 5 unknown or empty"]


def test_multicast_copies_each_have_an_egress_pass() -> None:
    """Each replica gets its own egress pass with its rid, then its transmit line."""
    p = configure(Pipeline.from_file(PROGRAM, trace=True))
    p.trace_sink = None
    p.pre.set_group(5, [(1, 7), (2, 8)])
    out, tr = trace_of(p, TAGGED + b"\x03\x00")
    assert [port for port, _ in out] == [1, 2]
    assert tr.lines[3:] == [
        "    => multicast group 5: port 1 rid 7, port 2 rid 8",
        "  egress port=1 REPLICATION rid=7",
        "    => transmit port 1, 16 bytes",
        "  egress port=2 REPLICATION rid=8",
        "    => transmit port 2, 16 bytes",
        "  result: port 1 (16 B), port 2 (16 B)",
    ]


def test_egress_drop(traced: Pipeline) -> None:
    """mark_to_drop in egress is reported as an egress drop."""
    out, tr = trace_of(traced, TAGGED + b"\x01\xee")
    assert out == []
    assert "  egress port=2 NORMAL" in tr.lines
    assert tr.drops[0].startswith("egress_spec == 511 at the end of egress (mark_to_drop()")


def test_traced_outputs_equal_plain_outputs() -> None:
    """The instrumented code forwards byte-exactly as the normal code."""
    plain = configure(Pipeline.from_file(PROGRAM))
    traced = configure(Pipeline.from_file(PROGRAM, trace=lambda t: None))
    for p in (plain, traced):
        p.pre.set_group(5, [(1, 7), (2, 8)])
    frames = [TAGGED + bytes([op, arg]) + b"xyz" for op in range(5) for arg in (0, 0xEE)]
    frames += [ETH + b"\x08\x00", TAGGED + b"\x01", b"", b"\x00" * 13]
    for f in frames:
        assert traced.process(1, f) == plain.process(1, f)


def test_plain_pipeline_has_no_trace_code() -> None:
    """Without trace the generated code contains no tracer calls (the hot path pays nothing)."""
    plain = Pipeline.from_file(PROGRAM, engine="python")  # the Python engine's own code
    assert "_tr." not in plain.source
    assert type(plain._switch) is V1Switch  # noqa: SLF001
    assert not plain.tracing and plain.last_trace is None
    traced = Pipeline.from_file(PROGRAM, trace=True)
    assert "_tr.table(" in traced.source
    assert isinstance(traced._switch, TracingV1Switch)  # noqa: SLF001


def test_callback_gets_one_trace_per_packet() -> None:
    """trace=callable receives one PacketTrace per processed frame."""
    seen: list[PacketTrace] = []
    p = configure(Pipeline.from_file(PROGRAM, trace=seen.append))
    p.process(1, TAGGED + b"\x01\x00")
    p.process(3, TAGGED + b"\x09\x00")
    assert [(t.port, t.outputs) for t in seen] == [(1, [(2, 16)]), (3, [])]


def test_default_sink_logs_one_debug_record(caplog: pytest.LogCaptureFixture) -> None:
    """trace=True logs each block as one DEBUG record on softswitch.trace."""
    p = configure(Pipeline.from_file(PROGRAM, trace=True))
    with caplog.at_level(logging.DEBUG, logger="softswitch.trace"):
        p.process(1, TAGGED + b"\x01\x00")
    recs = [r for r in caplog.records if r.name == "softswitch.trace"]
    assert len(recs) == 1
    assert "table TIngress.ops: hit" in recs[0].getMessage()


def test_ipv4_program_trace_and_checksum_error() -> None:
    """ipv4_forward.p4: a bad IPv4 checksum is shown after the parser line."""
    p = Pipeline.from_file(str(P4 / "ipv4_forward.p4"), trace=True)
    p.trace_sink = None
    ip = bytes.fromhex("450000140001000040110000" + "0a000101" + "0a000202")  # checksum 0
    out, tr = trace_of(p, ETH + b"\x08\x00" + ip)
    assert out == []
    assert tr.lines[1] == (
        "    parser: start > parse_ethernet > parse_ipv4 > accept; extracted hdr.ethernet, hdr.ipv4"
    )
    assert tr.lines[2] == "    => checksum_error = 1 (verify_checksum failed)"
    assert "    action MyIngress.drop()" in tr.lines


def test_switch_logs_trace_with_its_packet_line(caplog: pytest.LogCaptureFixture) -> None:
    """In the switch loop at DEBUG, one record holds the packet line and its trace."""
    p = configure(Pipeline.from_file(PROGRAM, trace=True))
    ports = [MemoryPort(1), MemoryPort(2)]
    sw = SwitchDataPlane(ports, p)
    assert p.trace_sink is None  # the switch logs the block itself
    with caplog.at_level(logging.DEBUG, logger="softswitch.switch"):
        t = threading.Thread(target=sw.run, daemon=True)
        t.start()
        try:
            ports[0].inject(TAGGED + b"\x01\x00")
            assert ports[1].receive(5.0) is not None
        finally:
            sw.stop()
            t.join(5)
            sw.close()
    msgs = [r.getMessage() for r in caplog.records if r.name == "softswitch.switch"]
    block = next(m for m in msgs if m.startswith("port 1 in 16 bytes"))
    assert "\n    table TIngress.ops: hit -> TIngress.set_port(port=2, mac=0x0a0b0c0d0e0f)" in block
    assert block.endswith("  result: port 2 (16 B)")


STF_PROGRAMS = sorted(p.stem for p in P4.glob("*.stf") if (P4 / f"{p.stem}.p4").exists())


@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_traced_pipeline_passes_sample_stf(name: str) -> None:
    """The instrumented variant of every sample program passes its STF file, tracing each
    packet (clones, recirculation, resubmit, parser errors included)."""
    from softswitch.stf import run_stf_file

    traces: list[PacketTrace] = []
    pipeline = Pipeline.from_file(str(P4 / f"{name}.p4"), trace=traces.append)
    result = run_stf_file(pipeline, P4 / f"{name}.stf")
    assert result.passed, result.first_mismatch
    assert traces and all(t.lines[-1].startswith("  result: ") for t in traces)


def test_trace_names_ingress_and_egress_clones() -> None:
    """The multicast/clone sample's traces say which pass requested a clone and where to."""
    from softswitch.stf import run_stf_file

    traces: list[PacketTrace] = []
    pipeline = Pipeline.from_file(str(P4 / "multicast_clone.p4"), trace=traces.append)
    assert run_stf_file(pipeline, P4 / "multicast_clone.stf").passed
    text = "\n".join("\n".join(t.lines) for t in traces)
    assert "ingress clone to session " in text and "egress clone to session " in text
    assert "-> port(s) " in text
