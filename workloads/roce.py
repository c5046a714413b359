"""An emulated RoCE v2 NIC over a kernel UDP socket: RC WRITEs, ACK/NAK, go-back-N.

The in-network aggregation of ``p4src/netreduce.p4`` needs hosts that speak RoCE v2 the way
an RDMA NIC does (docs/protocol.md): every packet is a UDP datagram to port 4791 starting with
the 12-byte Base Transport Header (BTH), messages are RDMA WRITEs of First/Middle/Last/Only
packets, the first one carrying a RETH, and a reliable connection (RC) is made reliable end to
end by the receiver's cumulative ACKs, a NAK on a sequence gap and go-back-N retransmission at
the sender. The kernel supplies the IP and UDP headers; this module writes everything after
them (the 4-byte ICRC trailer is sent as 0, as the switch does, and never checked).

* :class:`RoceEndpoint` is one host's NIC: one UDP socket, one I/O thread, queue pairs
  demultiplexed by destination QP number. All protocol state is touched by that thread only
  (under the endpoint's lock); application threads post messages and wait on a condition.
* :class:`Requester` is the sending end of a connection: a packet queue, a window (and,
  optionally, an AIMD congestion window inside it), a retransmission timer that adapts to the
  measured round trip (RFC 6298: 1 s before the first sample, exponential back-off kept until
  a fresh sample, Karn's rule), a timeout recovery that probes with one packet before going
  back N (so ACKs that are only queued behind the window cost one packet, not a window), and
  a clear :class:`TransportError` when the connection makes no progress for ``dead_after``
  seconds.
* :class:`Responder` is the receiving end: accepts packets in PSN order, reassembles WRITE
  messages, ACKs (coalesced per receive batch), NAKs a gap (again each time the sender
  visibly went back and it stayed open), re-ACKs duplicates.
* Tests and benchmarks relay endpoints' datagrams on 127.0.0.1 through a P4 switch with
  :class:`bench.loopback_fabric.LoopbackFabric` (test equipment, not part of this module).

What the aggregation protocol puts *inside* the messages (tag, slots, credits) is the business
of :mod:`workloads.innetwork`.

Time: an endpoint reads one :class:`vtime.VirtualClock`. Every time the transport keeps (RTT
samples, the retransmission timeout and its bounds, ``dead_after``, deadlines, ``linger``) is
in emulated seconds; only the waits the OS times (``poll``, condition waits) are converted to
real seconds, so under time dilation the RTO fires after ``rto * TDF`` real seconds.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import select
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from protocol.netreduce import (
    RC_WRITE_FIRST,
    RC_WRITE_LAST,
    RC_WRITE_MIDDLE,
    RC_WRITE_ONLY,
    ROCE_V2_PORT,
)
from vtime import REAL_TIME, VirtualClock
from workloads.errors import WorkloadError
from workloads.mmsg import BatchSocket

log = logging.getLogger(__name__)

# Why a connection may never see its first packet acknowledged. The third cause is easy to
# hit: a job's message numbers start at 0 in every run of its workers, and the switches
# still hold the last run's messages, so they drop a second run's packets as stale.
NOTHING_ACKED = ("nothing was ever acknowledged: the job is not configured on the switch, "
                 "a worker is not running, or this job's workers ran before (a job serves "
                 "one run: the switch drops a second run's messages as stale; create a new "
                 "job for each run, or use --iters)")

PSN_MOD = 1 << 24
PSN_HALF = 1 << 23
# The machine's margins, in REAL seconds (converted with clock.emulated() where used): they
# cover what this machine does in real time (processes starting one by one, a peer that
# died), not the emulated network, so a time-dilated run must not stretch them TDF times.
INITIAL_RTO = 1.0  # timeout before the first RTT sample (RFC 6298 2.1), even above max_rto
DEAD_AFTER = 30.0  # a connection without progress this long is dead
POLL_CAP = 0.2  # the I/O loop looks at its state at least this often
# Where a congestion-controlled connection's window starts: slow start from its lowest
# window, or the whole window at once, as RoCE NICs start at line rate (DCQCN; the papers'
# setting and ns-3's). Both cut the window on loss the same way.
SLOW_START = "slow"
LINE_RATE = "line"
CC_STARTS = (SLOW_START, LINE_RATE)
# Receive moderation (a NIC's completion moderation): after a pass that found fewer than
# MODERATION_BATCH datagrams the I/O loop lets more arrive before it looks again, for at
# most MODERATION_MAX_S real seconds and MODERATION_RTT_SHARE of the smoothed round trip,
# so a trickle of packets costs one wake-up per few packets, not one each, while the added
# delay stays a small share of every connection's round trip.
MODERATION_BATCH = 16
MODERATION_MAX_S = 0.002
MODERATION_RTT_SHARE = 0.1

OP_WRITE_FIRST = RC_WRITE_FIRST
OP_WRITE_MIDDLE = RC_WRITE_MIDDLE
OP_WRITE_LAST = RC_WRITE_LAST
OP_WRITE_ONLY = RC_WRITE_ONLY
OP_ACK = 0x11
WRITE_OPCODES = (OP_WRITE_FIRST, OP_WRITE_MIDDLE, OP_WRITE_LAST, OP_WRITE_ONLY)

BTH = struct.Struct("!BBHII")  # opcode, SE|M|Pad|TVer, P_Key, FECN|BECN|rsv ++ dqpn, A|rsv7 ++ PSN
RETH = struct.Struct("!QII")  # virtual address, R_Key, DMA length
AETH = struct.Struct("!I")  # syndrome ++ MSN
ICRC = b"\x00\x00\x00\x00"
BTH_LEN, RETH_LEN, AETH_LEN, ICRC_LEN = 12, 16, 4, 4
DEFAULT_PKEY = 0xFFFF

SYNDROME_ACK = 0x1F  # ACK, "invalid" credit count (end-to-end credits unused)
SYNDROME_NAK_PSN = 0x60  # NAK: PSN sequence error

Address = tuple[str, int]


class TransportError(WorkloadError, RuntimeError):
    """A connection failed (no progress within its deadline) or the endpoint is closed."""


def psn_add(psn: int, n: int) -> int:
    """``psn + n`` in the 24-bit PSN space."""
    return (psn + n) % PSN_MOD


def psn_diff(a: int, b: int) -> int:
    """``a - b`` in the 24-bit PSN space, as a signed distance in ``[-2^23, 2^23)``."""
    d = (a - b) % PSN_MOD
    return d - PSN_MOD if d >= PSN_HALF else d


# ------------------------------------------------------------------- wire format


def pack_bth(opcode: int, dqpn: int, psn: int, ackreq: bool = False, resv7: int = 0) -> bytes:
    """A 12-byte BTH (SE, MigReq, PadCnt, TVer, FECN, BECN all 0; default P_Key)."""
    return BTH.pack(opcode, 0, DEFAULT_PKEY, dqpn & 0xFFFFFF,
                    (int(ackreq) << 31) | ((resv7 & 0x7F) << 24) | (psn % PSN_MOD))


def write_opcode(index: int, npkts: int) -> int:
    """The WRITE opcode of packet ``index`` of an ``npkts``-packet message."""
    if not 0 <= index < npkts:
        raise ValueError(f"packet {index} outside a {npkts}-packet message")
    if npkts == 1:
        return OP_WRITE_ONLY
    if index == 0:
        return OP_WRITE_FIRST
    return OP_WRITE_LAST if index == npkts - 1 else OP_WRITE_MIDDLE


def write_packets(
    dqpn: int, first_psn: int, chunks: Sequence[bytes], va: int, rkey: int
) -> list[bytes]:
    """The datagrams of one RDMA WRITE whose packets carry ``chunks``; the first gets a RETH.

    The DMA length is the total of the chunks; AckReq is set on the last packet.
    """
    if not chunks:
        raise ValueError("a WRITE carries at least one packet")
    dma_len = sum(len(c) for c in chunks)
    out = []
    for i, chunk in enumerate(chunks):
        op = write_opcode(i, len(chunks))
        head = pack_bth(op, dqpn, psn_add(first_psn, i), ackreq=i == len(chunks) - 1)
        if i == 0:
            head += RETH.pack(va, rkey, dma_len)
        out.append(head + chunk + ICRC)
    return out


def ack_packet(dqpn: int, psn: int, msn: int, nak: bool = False) -> bytes:
    """An RC Acknowledge (BTH + AETH + ICRC): ACK up to ``psn``, or a PSN-sequence NAK."""
    syndrome = SYNDROME_NAK_PSN if nak else SYNDROME_ACK
    return pack_bth(OP_ACK, dqpn, psn) + AETH.pack((syndrome << 24) | (msn & 0xFFFFFF)) + ICRC


class Header(NamedTuple):
    """The fields of a received BTH that the endpoint uses (a named tuple: built once per
    received packet, where a frozen dataclass's ``__init__`` cost a microsecond more)."""

    opcode: int
    dqpn: int
    psn: int
    ackreq: bool
    resv7: int


def parse_bth(data: bytes | memoryview) -> Header:
    """The BTH at the start of ``data`` (ValueError when too short)."""
    if len(data) < BTH_LEN + ICRC_LEN:
        raise ValueError(f"{len(data)}-byte datagram is too short for a RoCE packet")
    opcode, _, _, qp, word = BTH.unpack_from(data, 0)
    return Header(opcode, qp & 0xFFFFFF, word & 0xFFFFFF, bool(word >> 31), (word >> 24) & 0x7F)


# ------------------------------------------------------------------- statistics


@dataclass
class QpStats:
    """Counters of one queue pair end (plain ints, written by the I/O thread only)."""

    packets_sent: int = 0
    bytes_sent: int = 0  # UDP payload bytes (BTH ... ICRC)
    retransmitted: int = 0  # packets sent again after a timeout or NAK
    timeouts: int = 0
    naks_received: int = 0
    packets_received: int = 0
    bytes_received: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    acks_sent: int = 0
    naks_sent: int = 0
    messages_sent: int = 0
    messages_acked: int = 0
    messages_received: int = 0
    rtt_samples: int = 0
    # the smallest round trip sampled (emulated s; 0.0: none): the path's, plus whatever the
    # machine added in real time divided by the TDF (what a too small TDF shows in)
    rtt_min: float = 0.0
    spurious_timeouts: int = 0  # timeouts undone: ACKs showed the originals had arrived
    # timeouts with one packet in flight: the probe is that packet, so nothing can show
    # whether the original was lost or only late (Karn's ambiguity)
    lone_timeouts: int = 0
    cwnd_cuts: int = 0  # loss events that shrank the congestion window

    def copy(self) -> QpStats:
        return QpStats(**vars(self))


@dataclass(frozen=True)
class ReceivedMessage:
    """A WRITE message delivered by a :class:`Responder`, in PSN order."""

    data: bytes  # everything written: payloads of all packets, in order
    first_psn: int
    npkts: int
    va: int
    rkey: int
    resv7_or: int  # OR of the packets' BTH reserved bits (netreduce: 1 = saturated)


# ------------------------------------------------------------------- queue pairs


#: In-network (track_results): timeouts in a row without progress before the kept packets a
#: restarted switch needs are sent too (see Requester._kept_for_switch).
KEPT_AFTER_TIMEOUTS = 2


class Requester:
    """The sending end of an RC connection (go-back-N); create with
    :meth:`RoceEndpoint.requester`. Methods other than :meth:`post` run on the I/O thread.
    Times (``rto``, ``max_rto``, ``dead_after``, the ``now`` arguments) are emulated seconds
    of ``clock`` (the endpoint's)."""

    def __init__(self, ep: RoceEndpoint, local_qpn: int, remote_qpn: int, peer_ip: str,
                 first_psn: int, window: int, rto: float, max_rto: float,
                 dead_after: float, min_cwnd: int | None = None,
                 track_results: bool = False, clock: VirtualClock = REAL_TIME,
                 start: str = SLOW_START) -> None:
        self.ep = ep
        self.clock = clock
        self.local_qpn = local_qpn
        self.remote_qpn = remote_qpn
        self.peer_ip = peer_ip
        self.first_psn = first_psn % PSN_MOD
        self.window = window
        # Congestion window (packets): slow start from min_cwnd (or the whole window at
        # once: start LINE_RATE), then +1 per round trip; halved on a NAK (once per loss
        # event), back to min_cwnd on a timeout. With min_cwnd == window it never limits
        # (plain go-back-N with a fixed window).
        if start not in CC_STARTS:
            raise ValueError(f"start must be one of {', '.join(CC_STARTS)}, got {start!r}")
        self.min_cwnd = max(1, min(window, min_cwnd if min_cwnd is not None else window))
        self.cwnd = float(window if start == LINE_RATE else self.min_cwnd)
        self.ssthresh = float(window)
        self._recover = 0  # sequence numbers below this belong to the last loss event
        self.rto = rto
        self.max_rto = max_rto
        self.dead_after = dead_after
        self.stats = QpStats()
        self._queue: collections.deque[bytes] = collections.deque()  # from seq _una on
        self._una = 0  # oldest unacknowledged sequence number (PSN = first_psn + seq)
        self._next = 0  # next sequence number to transmit
        self._high = 0  # one past the highest sequence number ever transmitted
        self._ends: collections.deque[int] = collections.deque()  # last seq of each message
        self._srtt: float | None = None  # smoothed RTT and its variation (RFC 6298)
        self._rttvar = 0.0
        self._backoff = self.current_rto
        self._sent_at: dict[int, float] = {}  # seq -> first-send time (never retransmitted)
        self._deadline = 0.0  # when the oldest unacked packet times out
        self._progress = clock.now()
        self._retries = 0
        # After a timeout: only the oldest packet is resent (a probe) until an ACK arrives;
        # _hold keeps the backed-off timeout until a fresh RTT sample (Karn's algorithm).
        self._probing = False
        self._probe_base = 0
        self._undo = (self.cwnd, self.ssthresh)
        self._hold = False
        self._nak_una: int | None = None  # the oldest packet at the last NAK
        self._nak_again = False  # NAKed again there: resends do not restart the timer
        self.error: str | None = None
        # In-network aggregation (track_results): the peer's ACK says only that the *peer*
        # got its result at a position; our own result there (note_arrived) says that the
        # switch had every worker's packet. A switch that restarts with empty registers
        # after delivering a result to some workers only, or in the middle of a message,
        # needs packets that are already acknowledged: the tagged first packet that binds
        # the message again, and our packets at positions whose result we still lack.
        # Those stay kept until our result arrives, and timeouts in a row resend them.
        self.track_results = track_results
        self._arrived = 0  # one past the last position whose result arrived (in order)
        self._kept: collections.deque[bytes] = collections.deque()  # seq _kept_base .. _una-1
        self._kept_base = 0
        self._starts: collections.deque[int] = collections.deque()  # first seq per message
        # Called on every retransmission timeout (I/O thread). The aggregation channel
        # re-sends its responder's cumulative ACK there: an ACK lost with a switch that
        # restarted cannot be fetched by the peer's retransmission any more (the new
        # switch has no result to answer it with), and our timeout shows we are stuck too.
        self.on_timeout: Callable[[], None] | None = None

    @property
    def next_psn(self) -> int:
        """The PSN the next posted packet will get."""
        return psn_add(self.first_psn, self._una + len(self._queue))

    def post(self, packets_for: Callable[[int], list[bytes]]) -> int:
        """Queue one message; ``packets_for(first_psn)`` builds its datagrams. Returns its
        first PSN. Thread-safe (takes the endpoint lock)."""
        with self.ep.cv:
            self._check()
            psn = self.next_psn
            packets = packets_for(psn)
            if not packets:
                raise ValueError("a message needs at least one packet")
            if not self._queue:
                self._progress = self.clock.now()
            if self.track_results:
                self._starts.append(self._una + len(self._queue))
            self._queue.extend(packets)
            self._ends.append(self._una + len(self._queue) - 1)
            self.stats.messages_sent += 1
        self.ep.wake()
        return psn

    def _check(self) -> None:
        if self.error is not None:
            raise TransportError(self.error)
        if self.ep.closed:
            raise TransportError("the RoCE endpoint is closed")

    @property
    def messages_acked(self) -> int:
        return self.stats.messages_acked

    @property
    def idle(self) -> bool:
        """Everything posted has been acknowledged."""
        return not self._queue

    # -- I/O thread ---------------------------------------------------------------------

    def on_ack(self, hdr: Header, syndrome: int) -> bool:
        """Handle an ACK/NAK; True when it acknowledged a message in full (what the
        application waits for: a credit, or the queue drained), not for every ACK that moves
        the window inside a message."""
        acked = self.stats.messages_acked
        in_flight = self._high - self._una
        d = psn_diff(hdr.psn, psn_add(self.first_psn, self._una))
        is_nak = (syndrome >> 5) == 0b011
        if is_nak:
            self.stats.naks_received += 1
            if not 0 <= d <= in_flight:
                return False  # stale NAK
            self._probing = False
            self._hold = False  # a real loss: the timeout was right, no reason to keep backoff
            self._advance(d, grow=False)
            # A NAK again at the same oldest packet without progress (the responder NAKs
            # again once it sees we went back): go back again at once, but the timer keeps
            # running from the first go-back instead of restarting with every resend, so
            # a gap that resending cannot close (a restarted switch that lacks the
            # message's binding) still reaches the timeouts that resend what it needs.
            self._nak_again = self._nak_una == self._una
            self._nak_una = self._una
            self._on_loss(timeout=False)
            if self._next > self._una:
                self._go_back("NAK")
            return self.stats.messages_acked != acked
        if (syndrome >> 5) != 0:
            log.debug("qp %#x: ignoring AETH syndrome %#x", self.local_qpn, syndrome)
            return False
        if not 0 <= d < in_flight:
            return False  # duplicate or stale ACK
        spurious = False
        if self._probing:
            self._probing = False
            # The receiver holds more than the probe: the originals were only delayed
            # (queued behind the window), so nothing else is resent and the cut is undone.
            spurious = self._una + d + 1 > self._probe_base + 1
            # Only the probe arrived: the originals were lost, the timeout was right, so the
            # backed-off timeout is dropped (as TCP does on new data acknowledged); keeping it
            # until a fresh sample made every later loss wait for max_rto under steady loss.
            # A spurious timeout keeps the backoff: the timeout was too short.
            self._hold = spurious
        self._advance(d + 1)
        if spurious:
            self.stats.spurious_timeouts += 1
            self.cwnd, self.ssthresh = self._undo
            self._next = max(self._next, self._high)
        return self.stats.messages_acked != acked

    @property
    def srtt(self) -> float | None:
        """The smoothed round trip (emulated seconds), None before the first sample."""
        return self._srtt

    @property
    def current_rto(self) -> float:
        """The retransmission timeout now: ``srtt + 4·rttvar`` (RFC 6298) from the measured
        round trips, at least the configured ``rto`` and at most ``max_rto`` (before the first
        sample: INITIAL_RTO)."""
        if self._srtt is None:
            # no sample yet: the first message waits for every worker to start (they start
            # one by one), so the first timer is RFC 6298's 1 s, not max_rto; a first timer
            # at the configured rto fired before the slowest worker had started (a quarter
            # of dead_after at most, so that a dead peer still gets a few retries)
            return max(self.rto, min(self.clock.emulated(self.ep.initial_rto),
                                     self.dead_after / 4.0))
        return min(self.max_rto, max(self.rto, self._srtt + 4.0 * self._rttvar))

    def _on_loss(self, timeout: bool) -> None:
        """Multiplicative decrease, once per loss event (one window's worth of packets) for
        NAKs; a timeout drops the window to ``min_cwnd`` (undone if it proves spurious)."""
        if not timeout and self._una < self._recover:
            return
        self._recover = self._high
        self.ssthresh = max(float(self.min_cwnd), self.cwnd / 2.0)
        self.cwnd = float(self.min_cwnd) if timeout else self.ssthresh
        self.stats.cwnd_cuts += 1

    def _grow(self, count: int) -> None:
        if self.cwnd >= self.window:
            return
        if self.cwnd < self.ssthresh:
            self.cwnd += count  # slow start: doubles per round trip
        else:
            self.cwnd += count / self.cwnd  # one packet per round trip
        self.cwnd = min(self.cwnd, float(self.window))

    def _sample_rtt(self, rtt: float) -> None:
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2.0
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt
        if not self.stats.rtt_samples or rtt < self.stats.rtt_min:
            self.stats.rtt_min = rtt
        self.stats.rtt_samples += 1

    def _advance(self, count: int, grow: bool = True) -> None:
        if count <= 0:
            return
        now = self.clock.now()
        # The round trip includes waiting at the switch for the slowest worker's packet:
        # a fixed timeout below it retransmits whole windows for nothing (go-back-N), which
        # is why the timeout adapts. Karn's rule: only never-retransmitted packets count.
        sent = self._sent_at.get(self._una + count - 1)
        if sent is not None:
            self._sample_rtt(now - sent)
            self._hold = False
        if grow:
            self._grow(count)
        self._release_acked(count)
        self._progress = now
        self._retries = 0
        self._nak_again = False
        if not self._hold:
            self._backoff = self.current_rto
        self._deadline = now + self._backoff

    def _release_acked(self, count: int) -> None:
        """Moves the window past ``count`` newly acknowledged packets: out of the queue (kept
        for a restarted switch when tracking results), their send times forgotten, and the
        messages they complete counted."""
        if self.track_results:
            for _ in range(count):
                self._kept.append(self._queue.popleft())
        else:
            for _ in range(count):
                self._queue.popleft()
        self._una += count
        if self.track_results:
            self._trim_kept()
        times = self._sent_at
        while times:
            seq = next(iter(times))
            if seq >= self._una:
                break
            del times[seq]
        self._next = max(self._next, self._una)
        while self._ends and self._ends[0] < self._una:
            self._ends.popleft()
            self.stats.messages_acked += 1

    def note_arrived(self, psn: int, now: float) -> None:
        """Evidence outside the ACK stream that the packet sent with ``psn`` got through (in
        network aggregation: the result at that position exists only once every worker's
        packet arrived, this one's included). The timer restarts instead of firing while a
        slow switch works through the window, and a timeout whose probe is overtaken by such
        evidence was spurious. Nothing is acknowledged by it: that stays the peer's ACK."""
        if self.track_results:
            seq = self._arrived + psn_diff(psn, psn_add(self.first_psn, self._arrived))
            if self._arrived <= seq < self._una + len(self._queue):
                self._arrived = seq + 1
                self._progress = now
                self._trim_kept()
        if self._high <= self._una:
            return  # nothing in flight (the common case between all-reduces)
        seq = self._una + psn_diff(psn, psn_add(self.first_psn, self._una))
        if not self._una <= seq < self._high:
            return
        if self._probing and seq > self._probe_base:
            # a packet beyond the probe arrived: the originals were only delayed
            self._probing = False
            self._hold = True  # the timeout was too short: keep the backoff
            self.stats.spurious_timeouts += 1
            self.cwnd, self.ssthresh = self._undo
            self._next = max(self._next, self._high)
        if not self._probing:
            self._deadline = max(self._deadline, now + self._backoff)
        self._progress = now

    def _trim_kept(self) -> None:
        """Forget kept packets before the message that holds the oldest position still
        missing its result or its ACK."""
        need = min(self._arrived, self._una)
        starts = self._starts
        if need >= self._una + len(self._queue):
            starts.clear()  # every message posted so far is done
            keep_from = need
        else:
            while len(starts) > 1 and starts[1] <= need:
                starts.popleft()
            keep_from = starts[0]
        while self._kept and self._kept_base < keep_from:
            self._kept.popleft()
            self._kept_base += 1
        if not self._kept:
            self._kept_base = self._una

    def _kept_for_switch(self) -> list[bytes]:
        """Acknowledged packets a restarted switch needs (track_results): ours from the first
        packet of the message that holds the oldest position lacking its result or ACK up
        to the oldest unacknowledged one. The first packet binds the message again, so that
        the switch can place the later ones; positions whose result is missing need our
        packet again; and the switch counts a message done only when every one of its
        packets is final there, so the whole message is sent again."""
        need = min(self._arrived, self._una)
        if not self._starts or self._starts[0] > need:
            return []
        base = self._kept_base
        return [self._kept[seq - base] for seq in range(self._starts[0], self._una)
                if 0 <= seq - base < len(self._kept)]

    def _go_back(self, why: str) -> None:
        log.debug("qp %#x: go back %d packets (%s)", self.local_qpn, self._next - self._una, why)
        self._next = self._una
        self._sent_at.clear()  # Karn: what is sent again gives no RTT sample

    def poll_timer(self, now: float) -> None:
        """On a timeout resend the oldest packet only, with AckReq (a probe); fail the
        connection after ``dead_after`` without progress.

        At slow links the round trip is dominated by the window queued behind the host link
        (W packets x frame bytes x 8 / rate, twice: data out, ACKs back behind results), so
        a timeout may fire while every packet is still on its way. Going back N there
        resent whole windows that queued behind the originals and fired the next timeout:
        the 1 Mbit/s collapse of docs/scale.md. The probe's answer decides instead: an ACK
        beyond it means the originals arrived (spurious: nothing else is resent, the window
        cut is undone); an ACK of just the probe means they were lost (go back N).
        """
        outstanding = self._high > self._una
        lagging = self.track_results and self._arrived < self._una
        if not (outstanding or lagging) or now < self._deadline:
            return
        if now - self._progress > self.dead_after:
            self.error = (
                f"RoCE connection qp {self.local_qpn:#x} -> {self.peer_ip} qp "
                f"{self.remote_qpn:#x}: no acknowledgement for {self.dead_after:g} s after "
                f"{self._retries} retransmissions (PSN {psn_add(self.first_psn, self._una):#x}); "
                + (NOTHING_ACKED if self._una == 0 else
                   "is the job configured on the switch and every worker running?")
            )
            log.error("%s", self.error)
            return
        self.stats.timeouts += 1
        if self.on_timeout is not None:
            self.on_timeout()
        if self.track_results and self._retries >= KEPT_AFTER_TIMEOUTS:
            # Only after timeouts in a row without progress: an ordinary loss is repaired
            # by the probe, and resending a message's kept prefix at every timeout cost
            # whole messages of traffic at 10 % loss (the campaign's loss cell hung).
            kept = self._kept_for_switch()
            if kept:
                sent = self.ep.send_many(self.peer_ip, kept)
                self.stats.retransmitted += sent
                self.stats.packets_sent += sent
                self.stats.bytes_sent += sum(len(p) for p in kept[:sent])
        if not outstanding:
            # every packet acknowledged, some result missing: resend and back off
            self._retries += 1
            self._backoff = min(self._backoff * 2, self.max_rto)
            self._deadline = now + self._backoff
            return
        if self._high - self._una == 1:
            self.stats.lone_timeouts += 1
        if not self._probing:
            self._undo = (self.cwnd, self.ssthresh)
        self._on_loss(timeout=True)
        self._retries += 1
        self._backoff = min(self._backoff * 2, self.max_rto)
        self._hold = True
        self._probing = True
        self._probe_base = self._una
        self._go_back("timeout")
        self._deadline = now + self._backoff

    def next_deadline(self) -> float | None:
        if self.error is not None:
            return None
        if self._high <= self._una and not (self.track_results and self._arrived < self._una):
            return None
        return self._deadline

    def transmit(self, now: float) -> None:
        """Send what the window allows."""
        if self.error is not None:
            return
        limit = min(self._una + len(self._queue), self._una + min(self.window, int(self.cwnd)))
        if self._probing:
            limit = min(limit, self._una + 1)
        if self._next >= limit:
            return
        batch = []
        queue, una = self._queue, self._una
        for seq in range(self._next, limit):
            pkt = queue[seq - una]
            if self._probing and len(pkt) > 8:
                pkt = pkt[:8] + bytes([pkt[8] | 0x80]) + pkt[9:]  # AckReq: answer the probe
            batch.append(pkt)
        sent = self.ep.send_many(self.peer_ip, batch)  # fewer: socket buffer full, retry later
        for pkt in batch[:sent]:
            if self._next < self._high:
                self.stats.retransmitted += 1
            else:
                self._high = self._next + 1
                self._sent_at[self._next] = now
            if self._next == self._una and not self._nak_again:
                self._deadline = now + self._backoff
            self.stats.packets_sent += 1
            self.stats.bytes_sent += len(pkt)
            self._next += 1


class Responder:
    """The receiving end of an RC connection: in-order acceptance and WRITE reassembly;
    create with :meth:`RoceEndpoint.responder`."""

    def __init__(self, ep: RoceEndpoint, local_qpn: int, remote_qpn: int, peer_ip: str,
                 first_psn: int, ack_every: int, clock: VirtualClock = REAL_TIME) -> None:
        self.ep = ep
        self.clock = clock
        self.local_qpn = local_qpn
        self.remote_qpn = remote_qpn
        self.peer_ip = peer_ip
        self.expected = first_psn % PSN_MOD
        self.ack_every = ack_every
        self.stats = QpStats()
        self._msn = 0
        self._nak_sent = False
        self._nak_top = 0  # highest PSN distance past the gap seen since our last NAK
        self._ack_pending = False
        self._since_ack = 0
        self._parts: list[bytes] = []
        self._msg_head: tuple[int, int, int, int] | None = None  # psn, va, rkey, dma_len
        self._resv7 = 0
        self._delivered: collections.deque[ReceivedMessage] = collections.deque()
        # called with (PSN, emulated time) for every packet accepted in order (I/O thread)
        self.on_accept: Callable[[int, float], None] | None = None

    # -- application side (endpoint lock held by the caller) ----------------------------

    @property
    def has_message(self) -> bool:
        """A delivered message is waiting (read with ``ep.cv`` held)."""
        return bool(self._delivered)

    def take(self) -> ReceivedMessage | None:
        """The oldest delivered message not yet taken (call with ``ep.cv`` held)."""
        return self._delivered.popleft() if self._delivered else None

    # -- I/O thread ---------------------------------------------------------------------

    def on_write(self, hdr: Header, data: bytes | memoryview) -> bool:
        """Handle one WRITE packet; True when a message was delivered."""
        self.stats.packets_received += 1
        self.stats.bytes_received += len(data)
        d = psn_diff(hdr.psn, self.expected)
        if d:
            self._out_of_sequence(d)
            return False
        body = data[BTH_LEN: len(data) - ICRC_LEN]
        op = hdr.opcode
        starts = op in (OP_WRITE_FIRST, OP_WRITE_ONLY)
        if starts:
            if len(body) < RETH_LEN:
                log.warning("qp %#x: WRITE First without RETH dropped", self.local_qpn)
                return False
            va, rkey, dma_len = RETH.unpack_from(body, 0)
            if self._msg_head is not None:
                log.warning("qp %#x: message at PSN %#x abandoned by a new First",
                            self.local_qpn, self._msg_head[0])
            self._msg_head = (hdr.psn, va, rkey, dma_len)
            self._parts = [bytes(body[RETH_LEN:])]
            self._resv7 = hdr.resv7
        else:
            if self._msg_head is None:
                log.warning("qp %#x: WRITE Middle/Last outside a message dropped", self.local_qpn)
                return False
            self._parts.append(bytes(body))
            self._resv7 |= hdr.resv7
        self.expected = psn_add(self.expected, 1)
        self._nak_sent = False
        if self.on_accept is not None:
            self.on_accept(hdr.psn, self.clock.now())
        self._since_ack += 1
        if hdr.ackreq or self._since_ack >= self.ack_every:
            self._ack_pending = True
        if op in (OP_WRITE_LAST, OP_WRITE_ONLY):
            self._deliver_message(self._msg_head)
            return True
        return False

    def _out_of_sequence(self, d: int) -> None:
        """A packet ``d`` PSNs off the expected one, dropped: a duplicate (d < 0) asks for
        our ACK again; the first packet after a gap (d > 0) sends a NAK, which names the
        expected PSN. While the gap stays open, a packet *below* the highest one seen since
        that NAK shows the sender went back (it answered the NAK) and its resent packet at
        the gap was lost again: one more NAK then, at most one per such descent, so the
        sender goes back at once instead of waiting for its retransmission timer (under
        10 % loss on every link a resend is lost again about half the time). Packets that
        keep ascending past the gap send nothing more."""
        if d < 0:
            self.stats.duplicates += 1
            self._ack_pending = True
            return
        self.stats.out_of_order += 1
        if self._nak_sent and d > self._nak_top:
            self._nak_top = d
            return
        self._nak_sent = True
        self._nak_top = d
        self.stats.naks_sent += 1
        self.ep.send_raw(self.peer_ip, ack_packet(
            self.remote_qpn, self.expected, self._msn, nak=True))

    def _deliver_message(self, head: tuple[int, int, int, int]) -> None:
        """The message's last packet arrived: its parts (``head``: its first PSN and RETH)
        joined into one delivered message (a length other than the RETH's is logged, not
        refused), and the MSN advanced."""
        psn, va, rkey, dma_len = head
        payload = b"".join(self._parts)
        if len(payload) != dma_len:
            log.warning("qp %#x: message at PSN %#x wrote %d bytes, RETH said %d",
                        self.local_qpn, psn, len(payload), dma_len)
        self._msn = (self._msn + 1) % PSN_MOD
        self._delivered.append(ReceivedMessage(
            payload, psn, len(self._parts), va, rkey, self._resv7))
        self.stats.messages_received += 1
        self._msg_head, self._parts = None, []

    def refresh_ack(self) -> None:
        """Send our cumulative ACK again now (once anything was accepted): the peer may
        have lost the last one."""
        if self.stats.messages_received or self._msg_head is not None:
            self._ack_pending = True
            self.flush_ack()

    def flush_ack(self) -> None:
        """Send one cumulative ACK if any packet asked for it (end of a receive batch)."""
        if not self._ack_pending:
            return
        self._ack_pending = False
        self._since_ack = 0
        self.stats.acks_sent += 1
        self.ep.send_raw(self.peer_ip, ack_packet(
            self.remote_qpn, psn_add(self.expected, -1), self._msn))


# ------------------------------------------------------------------- endpoint


class RoceEndpoint:
    """One host's emulated RoCE NIC: a UDP socket on ``bind`` and an I/O thread.

    ``resolve(ip)`` gives the socket address datagrams for host ``ip`` are sent to (default:
    ``(ip, 4791)``; the loopback fabric supplies its relay addresses). ``clock`` is the
    emulated clock of every timer of the endpoint and its queue pairs. Use as a context
    manager; :meth:`close` stops the thread and closes the socket.

    ``initial_rto`` (real seconds) is every requester's timer before its first RTT sample:
    INITIAL_RTO covers peers that start one by one; a caller whose peers are known to be
    running and ready (a host process that serves job after job) may give less.
    """

    def __init__(self, bind: Address = ("0.0.0.0", ROCE_V2_PORT),
                 resolve: Callable[[str], Address] | None = None,
                 rcvbuf: int = 4 << 20, clock: VirtualClock = REAL_TIME,
                 initial_rto: float = INITIAL_RTO) -> None:
        if initial_rto <= 0:
            raise ValueError(f"initial_rto must be > 0, got {initial_rto}")
        self.clock = clock
        self.initial_rto = initial_rto
        self.loops = 0  # passes of the I/O loop (profiling; tests wait for one)
        self._resolve = resolve if resolve is not None else (lambda ip: (ip, ROCE_V2_PORT))
        self._addr_cache: dict[str, Address] = {}
        self.cv = threading.Condition()
        self.closed = False
        self._requesters: dict[int, Requester] = {}
        self._responders: dict[int, Responder] = {}
        self.unknown_qp = 0
        self.malformed = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, rcvbuf)
            self.sock.bind(bind)
        except OSError as err:
            self.sock.close()
            raise TransportError(f"cannot bind a RoCE socket to {bind[0]}:{bind[1]}: {err}") \
                from err
        self.sock.setblocking(False)
        self._io = BatchSocket(self.sock)  # sendmmsg/recvmmsg: many datagrams per call
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._loop, name=f"roce-{self.address[1]}",
                                        daemon=True)
        self._thread.start()

    @property
    def address(self) -> Address:
        """Where the endpoint's socket is bound."""
        host, port = self.sock.getsockname()[:2]
        return host, port

    # -- queue pairs --------------------------------------------------------------------

    def requester(self, local_qpn: int, remote_qpn: int, peer_ip: str, first_psn: int = 0, *,
                  window: int = 64, rto: float = 0.05, max_rto: float = 1.0,
                  dead_after: float | None = None, min_cwnd: int | None = None,
                  track_results: bool = False, start: str = SLOW_START) -> Requester:
        """The sending end of a connection to ``peer_ip`` QP ``remote_qpn``; ``min_cwnd``
        turns on congestion control and ``start`` says where its window starts (SLOW_START
        or LINE_RATE), ``track_results`` keeps acknowledged packets until their in-network
        result arrived (see :class:`Requester`)."""
        if dead_after is None:  # DEAD_AFTER of real time
            dead_after = self.clock.emulated(DEAD_AFTER)
        if window < 1 or rto <= 0 or dead_after <= 0:
            raise ValueError("window must be >= 1 and timeouts > 0")
        with self.cv:
            if local_qpn in self._requesters or local_qpn in self._responders:
                raise ValueError(f"QP {local_qpn:#x} already exists on this endpoint")
            qp = Requester(self, local_qpn, remote_qpn, peer_ip, first_psn, window, rto,
                           max(rto, max_rto), dead_after, min_cwnd, track_results, self.clock,
                           start)
            self._requesters[local_qpn] = qp
        return qp

    def responder(self, local_qpn: int, remote_qpn: int, peer_ip: str, first_psn: int = 0, *,
                  ack_every: int = 16) -> Responder:
        """The receiving end of the connection from ``peer_ip`` QP ``remote_qpn``."""
        with self.cv:
            if local_qpn in self._requesters or local_qpn in self._responders:
                raise ValueError(f"QP {local_qpn:#x} already exists on this endpoint")
            qp = Responder(self, local_qpn, remote_qpn, peer_ip, first_psn, max(1, ack_every),
                           self.clock)
            self._responders[local_qpn] = qp
        return qp

    def wait(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        """Block until ``ready()`` (evaluated with ``cv`` held) or raise at ``deadline``
        (emulated: ``self.clock.now() + timeout``)."""
        with self.cv:
            while not ready():
                for qp in self._requesters.values():
                    if qp.error is not None:
                        raise TransportError(qp.error)
                if self.closed:
                    raise TransportError("the RoCE endpoint is closed")
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    raise TransportError(f"timed out waiting for {what}")
                self.cv.wait(min(self.clock.real(remaining), 0.5))

    # -- I/O ----------------------------------------------------------------------------

    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # a wake-up is already pending
        except OSError:
            pass  # closed

    def send_many(self, ip: str, datagrams: Sequence[bytes]) -> int:
        """Send ``datagrams`` to host ``ip`` in one batch (``sendmmsg``); returns how many
        went out (fewer when the socket buffer is full)."""
        addr = self._addr_cache.get(ip)
        if addr is None:
            addr = self._addr_cache[ip] = self._resolve(ip)
        return self._io.send_batch(datagrams, addr)

    @property
    def syscalls(self) -> int:
        """Datagram system calls made so far (profiling: calls per packet)."""
        return self._io.syscalls

    def send_raw(self, ip: str, datagram: bytes) -> bool:
        """Send one datagram to host ``ip``; False when the socket buffer is full."""
        addr = self._addr_cache.get(ip)
        if addr is None:
            addr = self._addr_cache[ip] = self._resolve(ip)
        self._io.syscalls += 1
        try:
            self.sock.sendto(datagram, addr)
        except BlockingIOError:
            return False
        except OSError as err:
            if err.errno in (errno.ENOBUFS, errno.EAGAIN):
                return False
            log.warning("RoCE send to %s failed: %s", ip, err)
        return True

    def _loop(self) -> None:
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        wake_poller = select.poll()
        wake_poller.register(self._wake_r, select.POLLIN)
        buf = bytearray(65536)
        view = memoryview(buf)
        received = MODERATION_BATCH
        while not self.closed:
            with self.cv:
                deadlines = [d for qp in self._requesters.values()
                             if (d := qp.next_deadline()) is not None]
                moderation = self._moderation(received)
            wait = POLL_CAP
            if deadlines:
                wait = min(wait, self.clock.real(max(0.0, min(deadlines) - self.clock.now())))
            pause = min(wait, moderation)
            if pause > 0:
                # only the application's wake-ups end the pause early
                try:
                    wake_poller.poll(pause * 1000.0)
                except OSError:
                    break
                wait = 0.0 if self.closed else max(0.0, wait - pause)
            try:
                events = poller.poll(wait * 1000.0)
            except OSError:
                break
            if self.closed:
                break
            for fd, _ in events:
                if fd == self._wake_r:
                    try:
                        os.read(self._wake_r, 4096)
                    except OSError:
                        pass
            received = self._serve(buf, view)

    def _serve(self, buf: bytearray, view: memoryview) -> int:
        """One pass under the lock: receive what is queued, send the ACKs it asked for, fire
        the timers and send what the windows allow, then wake the waiters if anything they
        wait for changed. Returns the datagrams received (for the moderation pause)."""
        with self.cv:
            changed, received = self._receive_batch(buf, view)
            now = self.clock.now()
            for resp in self._responders.values():
                resp.flush_ack()
            for req in self._requesters.values():
                failed = req.error is not None
                req.poll_timer(now)
                req.transmit(now)
                changed |= (req.error is not None) != failed
            if changed:
                self.cv.notify_all()
            self.loops += 1
        return received

    def _moderation(self, received: int) -> float:
        """Real seconds to let datagrams gather before the next look (see
        MODERATION_BATCH): none after a full pass or before any round trip was measured.
        Call with ``cv`` held."""
        if received >= MODERATION_BATCH:
            return 0.0
        rtts = [r for q in self._requesters.values() if (r := q.srtt) is not None]
        if not rtts:
            return 0.0
        return min(MODERATION_MAX_S, self.clock.real(MODERATION_RTT_SHARE * min(rtts)))

    def _receive_batch(self, buf: bytearray, view: memoryview, limit: int = 256
                       ) -> tuple[bool, int]:
        """Everything queued on the socket (up to ``limit`` datagrams), ``recvmmsg``
        batches: (whether a waiter may proceed, datagrams received)."""
        changed = False
        received = 0
        while received < limit:
            try:
                batch = self._io.recv_batch()
            except OSError as err:
                log.warning("RoCE receive failed: %s", err)
                break
            if not batch:
                break
            received += len(batch)
            for data in batch:
                changed |= self._on_datagram(data)
        return changed, received

    def _on_datagram(self, data: bytes) -> bool:
        """Dispatch one received datagram to its QP; True when a waiter may proceed (a
        message delivered or acknowledged in full)."""
        try:
            hdr = parse_bth(data)
        except ValueError:
            self.malformed += 1
            return False
        if hdr.opcode == OP_ACK:
            req = self._requesters.get(hdr.dqpn)
            if req is None or len(data) < BTH_LEN + AETH_LEN + ICRC_LEN:
                self.unknown_qp += 1
                return False
            (aeth,) = AETH.unpack_from(data, BTH_LEN)
            # True only for a whole message: waking the waiters on every ACK cost the
            # application thread a futex round trip on this lock (and the GIL) several
            # times per message
            return req.on_ack(hdr, aeth >> 24)
        if hdr.opcode in WRITE_OPCODES:
            resp = self._responders.get(hdr.dqpn)
            if resp is None:
                self.unknown_qp += 1
                return False
            return resp.on_write(hdr, data)
        self.malformed += 1
        return False

    def idle(self) -> bool:
        """Every requester has had everything acknowledged."""
        with self.cv:
            return all(q.idle for q in self._requesters.values())

    def drain(self, timeout: float) -> bool:
        """Wait until every posted message is acknowledged (or ``timeout``); True if so.

        Call before :meth:`close` so that peers get every result; afterwards the endpoint
        keeps answering retransmissions until it is closed.
        """
        deadline = self.clock.now() + timeout
        try:
            self.wait(lambda: all(q.idle for q in self._requesters.values()), deadline,
                      "outstanding acknowledgements")
        except TransportError:
            return False
        return True

    def close(self, linger: float = 0.0) -> None:
        """Stop the I/O thread and close the socket (idempotent).

        ``linger`` seconds are spent first answering peers (their retransmissions need our
        ACKs) until nothing arrives for ``linger / 4`` seconds, like TCP's TIME-WAIT.
        """
        if self.closed:
            return
        if linger > 0:
            clock = self.clock
            end = clock.now() + linger
            quiet = linger / 4
            last = self._received_total()
            last_change = clock.now()
            while clock.now() < end:
                clock.sleep(min(clock.emulated(0.01), quiet))  # look every 10 ms real
                now_total = self._received_total()
                if now_total != last:
                    last, last_change = now_total, clock.now()
                elif clock.now() - last_change >= quiet:
                    break
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        self.wake()
        self._thread.join(timeout=5.0)  # real seconds: the I/O thread only has to notice
        self.sock.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _received_total(self) -> int:
        with self.cv:
            return sum(r.stats.packets_received for r in self._responders.values()) + \
                sum(q.stats.naks_received for q in self._requesters.values())

    def __enter__(self) -> RoceEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
