"""Pieces of the in-network performance work that need no network: the transport's adaptive
timeout and congestion window (workloads/roce.py) and the matrix driver's plan
(experiment/matrix.py)."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from experiment.matrix import (
    MatrixError,
    MatrixSpec,
    cells_of,
    ideal_ratio,
    program_for,
    spec_from_args,
)
from softswitch import ir
from softswitch.frontend import compile_file
from workloads.roce import (
    AETH,
    BTH_LEN,
    INITIAL_RTO,
    KEPT_AFTER_TIMEOUTS,
    LINE_RATE,
    SLOW_START,
    Requester,
    Responder,
    RoceEndpoint,
    ack_packet,
    parse_bth,
    write_packets,
)


class _FakeEndpoint:
    """What a Requester needs of its endpoint: the lock, a wake-up and sends."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.closed = False
        self.sent: list[bytes] = []
        self.initial_rto = INITIAL_RTO

    def wake(self) -> None:
        pass

    def send_raw(self, ip: str, datagram: bytes) -> bool:
        self.sent.append(datagram)
        return True

    def send_many(self, ip: str, datagrams: list[bytes]) -> int:
        self.sent.extend(datagrams)
        return len(datagrams)


def _as_endpoint(fake: _FakeEndpoint) -> RoceEndpoint:
    """The fake where a RoceEndpoint is expected: Requester and Responder use only what it
    has (workloads.roce types their endpoint as the concrete class)."""
    return cast(RoceEndpoint, fake)


def _fake_endpoint() -> RoceEndpoint:
    return _as_endpoint(_FakeEndpoint())


def _fake(peer: Requester | Responder) -> _FakeEndpoint:
    """The fake endpoint a requester or responder was made with."""
    assert isinstance(peer.ep, _FakeEndpoint)
    return peer.ep


def _deadline(req: Requester) -> float:
    """When the requester's timer fires next (it must be running)."""
    deadline = req.next_deadline()
    assert deadline is not None
    return deadline


def _requester(window: int = 64, min_cwnd: int | None = None, rto: float = 0.01,
               start: str = SLOW_START) -> Requester:
    return Requester(_fake_endpoint(), 0x100, 0x201, "10.0.0.2", 0, window, rto, 2.0, 30.0,
                     min_cwnd, start=start)


def _post(req: Requester, npkts: int) -> None:
    req.post(lambda psn: write_packets(0x201, psn, [bytes(16)] * npkts, 0, 1))


def _ack(req: Requester, psn: int, nak: bool = False) -> None:
    pkt = ack_packet(0x100, psn, 0, nak=nak)
    (aeth,) = AETH.unpack_from(pkt, BTH_LEN)
    req.on_ack(parse_bth(pkt), aeth >> 24)


def test_timeout_adapts_to_measured_round_trips() -> None:
    """A 200 ms round trip raises the timeout above it (srtt + 4 rttvar), not 10 ms."""
    req = _requester()
    assert req.current_rto == pytest.approx(INITIAL_RTO)  # RFC 6298: 1 s before any sample
    _post(req, 1)
    req.transmit(time.monotonic() - 0.2)
    _ack(req, 0)
    assert req.stats.rtt_samples == 1
    assert 0.55 < req.current_rto < 0.7
    assert 0.2 <= req.stats.rtt_min < 0.3  # the smallest sample: the only one


def test_congestion_window_slow_starts_from_min_cwnd() -> None:
    """Only min_cwnd packets go out first; each ACKed packet lets one more go (slow start)."""
    req = _requester(min_cwnd=4)
    _post(req, 64)
    req.transmit(time.monotonic())
    assert req.stats.packets_sent == 4
    _ack(req, 3)
    req.transmit(time.monotonic())
    assert req.cwnd == 8 and req.stats.packets_sent == 12


def test_nak_halves_and_timeout_resets_the_window() -> None:
    """A NAK halves the window once per loss event; a timeout drops it to min_cwnd."""
    req = _requester(min_cwnd=4)
    _post(req, 64)
    req.transmit(time.monotonic())
    for psn in (3, 11, 27):  # slow start to 32
        _ack(req, psn)
        req.transmit(time.monotonic())
    assert req.cwnd == 32
    _ack(req, 30, nak=True)
    _ack(req, 30, nak=True)  # the same loss event: no second cut
    assert req.cwnd == 16 and req.stats.cwnd_cuts == 1
    req.transmit(time.monotonic())
    req.poll_timer(time.monotonic() + 10.0)
    assert req.cwnd == 4 and req.stats.timeouts == 1


def test_a_line_rate_start_sends_the_whole_window_and_still_backs_off() -> None:
    """start LINE_RATE (RoCE NICs, ns-3): the whole window goes out before any ACK, and loss
    cuts it as in slow start: a NAK halves it, a timeout drops it to min_cwnd, from which it
    slow-starts again."""
    req = _requester(window=64, min_cwnd=4, start=LINE_RATE)
    _post(req, 128)
    req.transmit(time.monotonic())
    assert req.cwnd == 64 and req.stats.packets_sent == 64
    _ack(req, 10, nak=True)
    assert req.cwnd == 32 and req.stats.cwnd_cuts == 1
    req.transmit(time.monotonic())
    req.poll_timer(time.monotonic() + 10.0)
    assert req.cwnd == 4 and req.stats.timeouts == 1


def test_an_unknown_window_start_is_refused() -> None:
    with pytest.raises(ValueError, match="start must be one of slow, line, got 'fast'"):
        _requester(min_cwnd=4, start="fast")


def test_without_min_cwnd_the_window_is_fixed() -> None:
    """Plain go-back-N (no min_cwnd): the whole window goes out at once."""
    req = _requester(window=16)
    _post(req, 64)
    req.transmit(time.monotonic())
    assert req.stats.packets_sent == 16


def test_program_for_64_elements_compiles(tmp_path: Path) -> None:
    """The NR_ELEMS = 64 wrapper compiles to a program whose aggregation header has 64
    elements; 252 (the source's default) is netreduce.p4 itself."""
    assert program_for(252, tmp_path).name == "netreduce.p4"
    program = compile_file(str(program_for(64, tmp_path)))
    data = program.types["nr_data_t"]
    assert isinstance(data, ir.HeaderType) and len(data.fields) == 64


def test_cells_run_sizes_then_models() -> None:
    """All-reduce cells (size by size, every algorithm) come before the replays."""
    spec = MatrixSpec(algos=("ring", "innetwork"), sizes=(10, 20), models=("resnet50",))
    assert cells_of(spec) == [("allreduce", "ring", 10), ("allreduce", "innetwork", 10),
                              ("allreduce", "ring", 20), ("allreduce", "innetwork", 20),
                              ("replay", "ring", "resnet50"), ("replay", "innetwork", "resnet50")]
    assert spec.workers == 8 and ideal_ratio(8) == pytest.approx(1.75)


@pytest.mark.parametrize("changes, message", [
    ({"algos": ("ring", "allgather")}, "unknown algorithm"),
    ({"elems": 50}, "elems \\(NR_ELEMS\\) must be"),
    ({"models": ("bert",)}, "unknown model"),
])
def test_bad_spec_is_refused(changes: dict[str, Any], message: str) -> None:
    """An unknown algorithm, model or element count is a MatrixError naming it."""
    with pytest.raises(MatrixError, match=message):
        MatrixSpec(**changes)


def test_spec_from_command_line() -> None:
    """The CLI's comma lists become the spec's tuples; an empty model list means none."""
    from experiment.__main__ import build_parser

    args = build_parser().parse_args(["matrix", "--algos", "ring,innetwork-hier", "--sizes",
                                      "1000,2000", "--models", "", "--bw", "2"])
    spec = spec_from_args(args)
    assert spec.algos == ("ring", "innetwork-hier") and spec.sizes == (1000, 2000)
    assert spec.models == () and spec.bw_mbit == 2.0 and spec.elems == 252
    assert isinstance(args, argparse.Namespace)
    args = build_parser().parse_args(["matrix", "--bw", "10M", "--intra-bw", "150GB/s"])
    spec = spec_from_args(args)
    assert (spec.bw_mbit, spec.intra_bw_bps) == (10.0, 1.2e12)


def test_hierarchical_intra_host_rate_has_units(capsys: pytest.CaptureFixture[str]) -> None:
    """--intra-bw is a rate like every other (bits/s; 150GB/s counts bytes) and the modelled
    intra-host link gets bytes/s; the hierarchical matrix cells pass the host's recorded
    rate on; a bad value is a usage error naming the option."""
    from experiment.session import intra_bw_argv
    from workloads.__main__ import DEFAULT_INTRA_BW_BPS, build_parser, intra_host

    parse = build_parser().parse_args
    base = ["allreduce", "--algo", "innetwork", "--hierarchical", "--size", "8"]
    assert intra_host(parse(base)).bandwidth == 150e9 == DEFAULT_INTRA_BW_BPS / 8
    assert intra_host(parse([*base, "--intra-bw", "1.2T"])).bandwidth == 150e9
    assert intra_host(parse([*base, "--intra-bw", "80GB/s"])).bandwidth == 80e9
    with pytest.raises(SystemExit):
        parse([*base, "--intra-bw", "150X"])
    assert "argument --intra-bw: '150X' is not a rate" in capsys.readouterr().err
    argv = intra_bw_argv("innetwork-hier", 1.2e12)
    assert argv == ["--intra-bw", "1200000000000bit/s"]
    assert intra_host(parse([*base, *argv])).bandwidth == 150e9
    assert intra_bw_argv("innetwork-hier", None) == [] == intra_bw_argv("innetwork", 1e12)


def test_results_keep_a_slow_switchs_window_from_timing_out() -> None:
    """BMv2 on a loaded machine released results far slower than the link: the ACK at a
    message's end came after the timer, which fired again and again with nothing lost.
    A result at a position this requester sent restarts the timer; one beyond a probe
    makes the timeout spurious and nothing more is resent."""
    req = _requester(min_cwnd=16)
    _post(req, 8)
    t0 = time.monotonic()
    req.transmit(t0)
    first_deadline = _deadline(req)
    req.note_arrived(0, t0 + 0.5)  # the result at position 0 exists: our packet 0 arrived
    assert _deadline(req) > first_deadline
    req.poll_timer(_deadline(req) + 0.001)  # slow switch: the timer fires anyway
    assert req.stats.timeouts == 1 and req.stats.lone_timeouts == 0
    req.transmit(time.monotonic())
    sent_after_probe = req.stats.packets_sent
    req.note_arrived(3, time.monotonic())  # beyond the probe: the originals were only late
    assert req.stats.spurious_timeouts == 1
    req.transmit(time.monotonic())
    assert req.stats.packets_sent == sent_after_probe  # nothing resent after the evidence
    _post(req, 4)  # and the window is open again: new packets go out (a probe allows none)
    req.transmit(time.monotonic())
    assert req.stats.packets_sent == sent_after_probe + 4
    req.note_arrived(0x800000, time.monotonic())  # not a position in flight: ignored
    assert req.stats.spurious_timeouts == 1


def test_a_timeout_with_one_packet_in_flight_is_lone() -> None:
    """With one packet in flight the probe is that packet: delay and loss look the same."""
    req = _requester(min_cwnd=1)
    _post(req, 1)
    req.transmit(time.monotonic())
    req.poll_timer(_deadline(req) + 0.001)
    assert req.stats.timeouts == req.stats.lone_timeouts == 1


def _psns(datagrams: list[bytes]) -> list[int]:
    return [parse_bth(d).psn for d in datagrams]


def test_results_mode_resends_what_a_restarted_switch_needs() -> None:
    """In-network (track_results): the peer's ACK does not mean our own result arrived. A
    timeout resends the first packet of the message holding the oldest position without a
    result or ACK (a restarted switch cannot place later packets without it) and our
    acknowledged packets from there (positions whose result is missing need them; the switch
    counts a message done only when all its packets are final); nothing older is kept."""
    req = Requester(_fake_endpoint(), 0x100, 0x201, "10.0.0.2", 0, 64, 0.01, 2.0, 30.0, None,
                    track_results=True)
    _post(req, 4)  # message 0: positions 0-3
    _post(req, 4)  # message 1: positions 4-7
    req.transmit(time.monotonic())
    for psn in range(5):
        req.note_arrived(psn, time.monotonic())  # our results 0-4 arrived
    _ack(req, 6)  # the peer has 0-6
    assert len(req._kept) == 3  # positions 4-6: message 1's first packet, then 5 and 6
    ep = _fake(req)
    for _ in range(KEPT_AFTER_TIMEOUTS):  # an ordinary loss: the probe alone
        ep.sent.clear()
        req.poll_timer(_deadline(req) + 0.001)
        req.transmit(time.monotonic())
        assert _psns(ep.sent) == [7]
    ep.sent.clear()
    req.poll_timer(_deadline(req) + 0.001)
    req.transmit(time.monotonic())
    # timeouts in a row: 4 (binds message 1), 5 and 6 (acknowledged, our results missing),
    # then the probe 7
    assert _psns(ep.sent) == [4, 5, 6, 7]
    _ack(req, 4)  # an old ACK: still 4-6 kept
    req.note_arrived(5, time.monotonic())
    ep.sent.clear()
    req.poll_timer(_deadline(req) + 0.001)
    # the whole message from its first packet (the switch counts it done only when every
    # packet is final there): 4, 5 (result now here) and 6 kept, then the probe 7
    assert _psns(ep.sent)[:3] == [4, 5, 6]
    for psn in (6, 7):
        req.note_arrived(psn, time.monotonic())
    _ack(req, 7)
    assert len(req._kept) == 0 and req.next_deadline() is None
    # everything acknowledged but our last result missing: a timer still runs, and resends
    _post(req, 2)  # message 2: positions 8-9
    req.transmit(time.monotonic())
    _ack(req, 9)
    req.note_arrived(8, time.monotonic())
    assert req.next_deadline() is not None
    for _ in range(KEPT_AFTER_TIMEOUTS):
        req.poll_timer(_deadline(req) + 0.001)
    ep.sent.clear()
    req.poll_timer(_deadline(req) + 0.001)
    assert _psns(ep.sent) == [8, 9]
    req.note_arrived(9, time.monotonic())
    assert req.next_deadline() is None


def test_plain_requester_keeps_nothing_acknowledged() -> None:
    """Without track_results (ring, torus) an ACK frees the packets, as RoCE does."""
    req = _requester()
    _post(req, 4)
    req.transmit(time.monotonic())
    _ack(req, 3)
    assert len(req._kept) == 0 and req.next_deadline() is None


def test_a_stuck_worker_sends_its_ack_again() -> None:
    """An ACK lost with a switch that restarted cannot be fetched by the peer's
    retransmission (the new switch has no result to answer it with). The aggregation
    channel sends its responder's cumulative ACK again whenever its own transfer times out."""
    ep = _FakeEndpoint()
    resp = Responder(_as_endpoint(ep), 0x301, 0x100, "10.0.0.1", 0, ack_every=16)
    for psn in range(3):
        resp.on_write(parse_bth(write_packets(0x301, psn, [bytes(16)], 0, 1)[0]),
                      write_packets(0x301, psn, [bytes(16)], 0, 1)[0])
    ep.sent.clear()
    req = Requester(_as_endpoint(ep), 0x100, 0x201, "10.0.0.2", 0, 64, 0.01, 2.0, 30.0, None,
                    track_results=True)
    req.on_timeout = resp.refresh_ack
    _post(req, 1)
    req.transmit(time.monotonic())
    ep.sent.clear()
    req.poll_timer(_deadline(req) + 0.001)
    acks = [d for d in ep.sent if parse_bth(d).opcode == 0x11]
    assert [parse_bth(a).psn for a in acks] == [2]  # cumulative: everything up to PSN 2
    quiet = Responder(_fake_endpoint(), 0x302, 0x100, "10.0.0.1", 0, ack_every=16)
    quiet.refresh_ack()  # nothing accepted yet: nothing to acknowledge
    assert _fake(quiet).sent == []
