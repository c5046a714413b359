"""Point-to-point messaging between the P ranks of a job over the project's RoCE v2 transport.

The baselines (ring, 2D torus, hierarchical ring in :mod:`workloads.collectives`) run over
anything with :class:`workloads.comm.PointToPoint`'s methods: the TCP
:class:`~workloads.comm.Communicator`, or the :class:`RoceCommunicator` here, which stands for
NCCL's ring on RoCE v2 (the papers' baseline). It reuses :mod:`workloads.roce` whole: each
ordered pair of ranks is one reliable connection (RC WRITEs with PSNs, cumulative ACK/NAK,
go-back-N with the adaptive timeout, the window and the congestion window, set as the
in-network agents set theirs); only message framing and the QP numbers are new.

* Wire: UDP to port 4791 on the hosts' addresses, so the packets cross the P4 switches as
  ordinary routed RoCE. ``p4src/netreduce.p4`` takes a RoCE packet for aggregation only
  when its (source IP, destination IP, destination QP) is in ``conn_table``; the QP numbers
  here (:func:`p2p_qpn`, 0xE00000 and up) lie outside every range the controller installs
  (workers below 0x41000, switch links 0xC00000-0xDFFFFF), so they always miss and are
  routed. A first packet also starts with :data:`MAGIC` (never the aggregation tag's
  ``NR_MAGIC``), so it is never mistaken for a tagged packet either.
* A message is one RDMA WRITE: the RETH's virtual address carries the 64-bit tag, the
  payload starts with a header (magic, dtype code, number of dimensions, the dimensions)
  and goes on with the array's little-endian bytes, cut into :data:`PATH_MTU` packets.
* One :class:`RoceHost` (one UDP socket and I/O thread) serves every rank of a process:
  ranks on one host share port 4791, told apart by their QP numbers, so all ranks with the
  same IP must share one process and one port.

Sends return once the message is queued (the window and retransmission run on the I/O
thread, as an RDMA NIC's send queue); :meth:`RoceCommunicator.recv` waits for a whole
message. :meth:`RoceHost.close` waits until everything sent is acknowledged, then lingers
to answer peers' retransmissions. Times are emulated seconds of the host's clock.
"""

from __future__ import annotations

import collections
import logging
import struct
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from protocol.netreduce import PATH_MTU, ROCE_ACK_BYTES, ROCE_HEADER_BYTES
from vtime import REAL_TIME, VirtualClock
from workloads.comm import (
    _CODES,
    _DTYPES,
    Address,
    Traffic,
    _wire_dtype,
    dissemination_barrier,
)
from workloads.errors import WorkloadError
from workloads.innetwork import ACK_EVERY
from workloads.roce import (
    BTH_LEN,
    ICRC_LEN,
    RETH_LEN,
    ROCE_V2_PORT,
    SLOW_START,
    ReceivedMessage,
    Requester,
    Responder,
    RoceEndpoint,
    TransportError,
    write_packets,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

#: First two payload bytes of every message (the aggregation tag's magic is 0x4E52, "NR").
MAGIC = b"RP"
_HEAD = struct.Struct("!2sBB")  # magic, dtype code, ndim
_DIM = struct.Struct("!Q")
#: Ranks a job may have: the QP number holds both ranks of a connection in 10 bits each.
MAX_RANKS = 1 << 10
_QP_RECV = 0xE00000
_QP_SEND = 0xF00000
#: Defaults of each connection: packets in flight (the in-network agents' window in
#: ``make run``: 4 credits x 64-packet messages; at 100 Gbit/s and 2 us links a 64-packet
#: window held the ring to 23 % of the link rate), lowest and highest retransmission timeout
#: (emulated s; the endpoint's own defaults).
DEFAULT_WINDOW = 256
DEFAULT_RTO = 0.05
DEFAULT_MAX_RTO = 1.0


class RoceCommError(WorkloadError, RuntimeError):
    """A RoCE rank cannot be set up, a peer sent something malformed, or a wait timed out."""


def p2p_qpn(src: int, dst: int, receiving: bool) -> int:
    """The QP number of one end of the connection from rank ``src`` to rank ``dst``: the
    sender's (``receiving`` False) or the receiver's; unique per ordered pair, outside the
    aggregation's QP ranges (see the module docstring)."""
    if not (0 <= src < MAX_RANKS and 0 <= dst < MAX_RANKS):
        raise ValueError(f"ranks must be below {MAX_RANKS}, got {src} -> {dst}")
    return (_QP_RECV if receiving else _QP_SEND) | (src << 10) | dst


class PeerPorts:
    """Where an endpoint sends datagrams for a host IP: the port the job's peers list for it
    (4791 on a network; tests on loopback bind others). The endpoint's ``resolve``."""

    def __init__(self) -> None:
        self._ports: dict[str, int] = {}

    def learn(self, addresses: Sequence[Address]) -> None:
        """Record every rank's ``(ip, port)``; ValueError when one IP has two ports (ranks
        on one address share one endpoint)."""
        for ip, port in addresses:
            known = self._ports.setdefault(ip, port)
            if known != port:
                raise ValueError(
                    f"peers: address {ip} is listed with ports {known} and {port}; RoCE ranks "
                    "on one address share one endpoint, so they must have the same port")

    def __call__(self, ip: str) -> Address:
        return ip, self._ports.get(ip, ROCE_V2_PORT)


def _frame(array: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The message header of ``array`` and its contiguous little-endian data."""
    wire = _wire_dtype(array.dtype)
    data = np.require(array, dtype=wire, requirements="C")  # keeps a 0-d array 0-d
    head = _HEAD.pack(MAGIC, _CODES[wire], data.ndim) + b"".join(_DIM.pack(d) for d in data.shape)
    return head, data


def _unframe(data: bytes, src: int) -> np.ndarray:
    """The array a message carries (read-only); RoceCommError when malformed."""
    if len(data) < _HEAD.size:
        raise RoceCommError(f"a {len(data)}-byte message from rank {src} has no header")
    magic, code, ndim = _HEAD.unpack_from(data, 0)
    offset = _HEAD.size + ndim * _DIM.size
    if magic != MAGIC or code not in _DTYPES or len(data) < offset:
        raise RoceCommError(f"malformed message from rank {src}")
    shape = tuple(_DIM.unpack_from(data, _HEAD.size + i * _DIM.size)[0] for i in range(ndim))
    dtype = _DTYPES[code]
    if (len(data) - offset) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise RoceCommError(f"message from rank {src}: {len(data) - offset} bytes do not "
                            f"make a {dtype} array of shape {shape}")
    return np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape)


class RoceHost:
    """One process's RoCE NIC for the ranks it runs: an endpoint bound to ``bind`` (port
    0 picks a free one, see :attr:`address`); make each rank's communicator with
    :meth:`communicator`. Use as a context manager."""

    def __init__(self, bind: Address, *, clock: VirtualClock = REAL_TIME) -> None:
        self.clock = clock
        self.ports = PeerPorts()
        try:
            self.endpoint = RoceEndpoint(bind, resolve=self.ports, clock=clock)
        except TransportError as err:
            raise RoceCommError(str(err)) from None
        self._comms: list[RoceCommunicator] = []

    @property
    def address(self) -> Address:
        return self.endpoint.address

    def communicator(self, rank: int, addresses: Sequence[Address], *, timeout: float = 30.0,
                     window: int = DEFAULT_WINDOW, rto: float = DEFAULT_RTO,
                     max_rto: float = DEFAULT_MAX_RTO,
                     start: str = SLOW_START) -> RoceCommunicator:
        """Rank ``rank`` of the job whose ranks are at ``addresses``."""
        comm = RoceCommunicator(self, rank, addresses, timeout=timeout, window=window,
                                rto=rto, max_rto=max_rto, start=start)
        self._comms.append(comm)
        return comm

    def close(self, drain_timeout: float = 10.0) -> None:
        """Wait (at most ``drain_timeout`` emulated s) until every peer acknowledged what
        was sent, then close, answering peers' retransmissions for a while first."""
        ep = self.endpoint
        if ep.closed:
            return
        if not ep.drain(drain_timeout):
            log.warning("RoCE host %s:%d closed with unacknowledged messages", *self.address)
        # the peers' last messages may need our ACK again (one was lost): answer for up to
        # half a second of real time, or until nothing arrived for a quarter of it
        ep.close(linger=self.clock.emulated(0.5))

    def __enter__(self) -> RoceHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RoceCommunicator:
    """One rank's connections to all other ranks of a job over RoCE; see the module
    docstring. Same methods as :class:`workloads.comm.Communicator` (``send``, ``recv``,
    ``barrier``, ``next_op_tag``, ``traffic``), so every collective runs over either.
    One thread drives a communicator; ranks of one :class:`RoceHost` may run in threads."""

    def __init__(self, host: RoceHost, rank: int, addresses: Sequence[Address], *,
                 timeout: float = 30.0, window: int = DEFAULT_WINDOW,
                 rto: float = DEFAULT_RTO, max_rto: float = DEFAULT_MAX_RTO,
                 start: str = SLOW_START) -> None:
        self.size = len(addresses)
        if not 1 <= self.size <= MAX_RANKS:
            raise ValueError(f"peers: {self.size} ranks; RoCE jobs have 1 to {MAX_RANKS}")
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} out of range for {self.size} ranks")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.rank = rank
        self.addresses = tuple((str(h), int(p)) for h, p in addresses)
        host.ports.learn(self.addresses)
        self.host = host
        self.clock = host.clock
        self.timeout = timeout
        ep = host.endpoint
        self._ep = ep
        ack_every = max(1, min(ACK_EVERY, window // 2))
        self._req: dict[int, Requester] = {}
        self._resp: dict[int, Responder] = {}
        for peer, (ip, _) in enumerate(self.addresses):
            if peer == rank:
                continue
            # the in-network agents' settings (AggregationChannel): an ACK every ack_every
            # packets and congestion control from two ACK intervals, which keeps the switch
            # queues short (a fixed window of 64 overflowed a 3 Mbit/s spine-leaf's queues:
            # 133 packets resent for 4 losses in a 65536-float ring)
            self._req[peer] = ep.requester(p2p_qpn(rank, peer, False), p2p_qpn(rank, peer, True),
                                           ip, window=window, rto=rto, max_rto=max_rto,
                                           min_cwnd=2 * ack_every, start=start)
            self._resp[peer] = ep.responder(p2p_qpn(peer, rank, True),
                                            p2p_qpn(peer, rank, False), ip, ack_every=ack_every)
        self._mail: dict[tuple[int, int], collections.deque[np.ndarray]] = {}
        self._op = 0
        self._sent = [0, 0, 0]  # bytes (BTH ... ICRC), payload, messages
        self._received = [0, 0, 0]

    # -- sending ------------------------------------------------------------------------

    def send(self, dst: int, array: np.ndarray, tag: int) -> None:
        """Queue ``array`` for rank ``dst`` under ``tag`` (one RDMA WRITE)."""
        if dst == self.rank or not 0 <= dst < self.size:
            raise ValueError(f"rank {self.rank} cannot send to rank {dst}")
        if not 0 <= tag < 2**64:
            raise ValueError(f"tag must fit in 64 bits, got {tag}")
        head, data = _frame(np.asarray(array))
        raw = head + data.tobytes()
        chunks = [raw[i:i + PATH_MTU] for i in range(0, len(raw), PATH_MTU)]
        req = self._req[dst]
        dqpn, rkey = req.remote_qpn, req.local_qpn
        try:
            req.post(lambda psn: write_packets(dqpn, psn, chunks, tag, rkey))
        except TransportError as err:
            raise RoceCommError(f"rank {self.rank}: sending to rank {dst}: {err}") from None
        self._sent[0] += len(raw) + len(chunks) * (BTH_LEN + ICRC_LEN) + RETH_LEN
        self._sent[1] += data.nbytes
        self._sent[2] += 1

    # -- receiving ----------------------------------------------------------------------

    def _collect(self, src: int) -> None:
        """Move messages ``src``'s responder delivered into the mailboxes (``cv`` held)."""
        resp = self._resp[src]
        while (msg := resp.take()) is not None:
            self._file(src, msg)

    def _file(self, src: int, msg: ReceivedMessage) -> None:
        array = _unframe(msg.data, src)
        self._mail.setdefault((src, msg.va), collections.deque()).append(array)
        self._received[0] += len(msg.data) + msg.npkts * (BTH_LEN + ICRC_LEN) + RETH_LEN
        self._received[1] += array.nbytes
        self._received[2] += 1

    def recv(self, src: int, tag: int, timeout: float | None = None) -> np.ndarray:
        """The next array ``src`` sent with ``tag`` (read-only); ``timeout`` in emulated
        seconds (default: the communicator's)."""
        if src == self.rank or not 0 <= src < self.size:
            raise ValueError(f"rank {self.rank} cannot receive from rank {src}")
        limit = self.timeout if timeout is None else timeout
        key = (src, tag)

        def ready() -> bool:
            self._collect(src)
            return bool(self._mail.get(key))

        try:
            self._ep.wait(ready, self.clock.now() + limit,
                          f"rank {self.rank}: a message from rank {src} with tag {tag:#x} "
                          f"(within {limit:g} s)")
        except TransportError as err:
            raise RoceCommError(str(err)) from None
        queue = self._mail[key]
        array = queue.popleft()
        if not queue:
            del self._mail[key]
        return array

    # -- helpers for collectives --------------------------------------------------------

    def next_op_tag(self) -> int:
        """A fresh tag base for one collective call (as the TCP communicator's)."""
        self._op += 1
        return self._op << 24

    def traffic(self) -> Traffic:
        """Totals so far: bytes are the RoCE packets' UDP payloads (BTH to ICRC, first
        transmissions only), payload the arrays' bytes; received counts messages taken."""
        return Traffic(self._sent[0], self._received[0], self._sent[1], self._received[1],
                       self._sent[2], self._received[2])

    def transport_stats(self) -> dict[str, int]:
        """This rank's connections' retransmitted packets, timeouts (spurious ones apart)
        and NAKs so far."""
        with self._ep.cv:
            reqs = list(self._req.values())
            return {"retransmissions": sum(q.stats.retransmitted for q in reqs),
                    "timeouts": sum(q.stats.timeouts for q in reqs),
                    "spurious_timeouts": sum(q.stats.spurious_timeouts for q in reqs),
                    "lone_timeouts": sum(q.stats.lone_timeouts for q in reqs),
                    "naks": sum(q.stats.naks_received for q in reqs)}

    def smallest_rtt(self) -> float:
        """The smallest round trip any of this rank's connections sampled (emulated s;
        0.0: none yet)."""
        with self._ep.cv:
            return min((q.stats.rtt_min for q in self._req.values() if q.stats.rtt_samples),
                       default=0.0)

    def barrier(self) -> None:
        """Return once every rank has entered the barrier and everything this rank sent has
        been acknowledged. Ranks start one by one, so a rank's first message can reach a
        peer whose endpoint is not up yet; waiting for the acknowledgements resends it here
        (the first timer) instead of leaving it to the work after the barrier, where the
        peer's NAK at the first new packet cost a go-back-N of a whole window inside the
        first timed all-reduce (32 packets, +26 ms at 10 Mbit/s: every ring-roce run on a
        rack). Without loss this costs one acknowledgement's round trip."""
        dissemination_barrier(self)
        reqs = list(self._req.values())
        try:
            self._ep.wait(lambda: all(q.idle for q in reqs), self.clock.now() + self.timeout,
                          f"rank {self.rank}: the acknowledgements of the barrier "
                          f"(within {self.timeout:g} s)")
        except TransportError as err:
            raise RoceCommError(str(err)) from None

    def close(self) -> None:
        """Nothing of its own to release: the :class:`RoceHost` owns the endpoint."""

    def __enter__(self) -> RoceCommunicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_ranks(ranks: Sequence[int], addresses: Sequence[Address], *,
               clock: VirtualClock = REAL_TIME, timeout: float = 30.0,
               window: int = DEFAULT_WINDOW, rto: float = DEFAULT_RTO,
               max_rto: float = DEFAULT_MAX_RTO,
               start: str = SLOW_START) -> tuple[RoceHost, list[RoceCommunicator]]:
    """A :class:`RoceHost` bound to the address of ``ranks`` (all must share it: one port
    per host address) and their communicators; the caller closes the host."""
    if not ranks:
        raise ValueError("rank: no local rank given")
    bad = [r for r in ranks if not 0 <= r < len(addresses)]
    if bad:
        raise ValueError(f"rank {bad[0]} out of range for {len(addresses)} peers")
    where = {tuple(addresses[r]) for r in ranks}
    if len(where) != 1:
        raise ValueError(f"rank {','.join(map(str, ranks))}: local RoCE ranks must share one "
                         f"address, got {', '.join(f'{h}:{p}' for h, p in sorted(where))}")
    host = RoceHost(addresses[ranks[0]], clock=clock)
    try:
        comms = [host.communicator(r, addresses, timeout=timeout, window=window, rto=rto,
                                   max_rto=max_rto, start=start) for r in ranks]
    except BaseException:
        host.endpoint.close()
        raise
    return host, comms


def run_local(comms: Sequence[RoceCommunicator], work: Callable[[RoceCommunicator], T],
              timeout: float) -> list[T]:
    """``work(comm)`` for each local rank, each in its own thread (they share the host's
    endpoint); the results in the order of ``comms``. The earliest failure is raised (as
    :class:`RoceCommError`, the error chained: the others are often its consequences, ranks
    waiting for the one that failed); a rank still running after ``timeout`` emulated
    seconds is one."""
    if len(comms) == 1:
        return [work(comms[0])]
    results: dict[int, T] = {}
    errors: list[tuple[int, BaseException]] = []  # in the order they happened
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            value = work(comms[i])
            with lock:
                results[i] = value
        except BaseException as err:  # reported below
            with lock:
                errors.append((i, err))

    threads = [threading.Thread(target=one, args=(i,), name=f"roce-rank{c.rank}", daemon=True)
               for i, c in enumerate(comms)]
    for t in threads:
        t.start()
    clock = comms[0].clock
    deadline = clock.now() + timeout
    for t in threads:
        t.join(timeout=clock.real(max(0.0, deadline - clock.now())))
    stuck = [c.rank for c, t in zip(comms, threads, strict=True) if t.is_alive()]
    if stuck:
        raise RoceCommError(f"ranks {stuck} did not finish within {timeout:g} s")
    if errors:
        first, err = errors[0]
        more = f" ({len(errors)} ranks failed)" if len(errors) > 1 else ""
        raise RoceCommError(f"rank {comms[first].rank} failed: {err}{more}") from err
    return [results[i] for i in range(len(comms))]


def payload_share(ack_every: int = ACK_EVERY) -> float:
    """Payload bytes per wire byte of a long RoCE message here: full :data:`PATH_MTU`
    packets (Ethernet, IPv4, UDP, BTH, ICRC around each) and one ACK per ``ack_every``
    packets (the responder's default) on the reverse path, counted against the data as the
    TCP figure counts its ACKs."""
    frame = PATH_MTU + ROCE_HEADER_BYTES
    return PATH_MTU / (frame + ROCE_ACK_BYTES / ack_every)
