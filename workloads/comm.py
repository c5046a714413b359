"""Point-to-point messaging between the P ranks of a job, over TCP.

:class:`Communicator` connects every pair of ranks once (a full mesh: rank ``i`` dials every
lower rank and accepts every higher one) and then sends and receives whole numpy arrays
tagged with an integer. Why TCP and not datagrams: the baselines we compare in-network
aggregation with (ring, 2D-torus and sparse all-gather) are, in practice, run by NCCL/Gloo
over reliable, congestion-controlled byte streams; TCP gives the same here with the kernel's
retransmission and window, so a baseline is never slowed down by a home-made reliability layer
written in Python. See docs/workloads.md.

One reader thread per peer drains its socket into per-``(source, tag)`` mailboxes, so a send
never waits for the receiver to call :meth:`Communicator.recv` (no deadlock when all ranks send
first, as in a ring step). Sends are bounded: a send that makes no progress for ``timeout``
seconds fails. Receives wait at most ``timeout`` seconds. :meth:`Communicator.close` always
releases every socket and thread; use the communicator as a context manager.

Time dilation: a communicator reads one :class:`vtime.VirtualClock`; its timeouts are
emulated seconds (waited for ``TDF`` times as long in real time) and the collectives built on
it report emulated seconds. The kernel's TCP cannot be dilated. What it derives from the path
stays consistent, because the links dilate rate and delay: ACK clocking, the RTT estimate and
the congestion window's growth per round trip. Its fixed constants run on the machine's clock
and are ``TDF`` times *shorter* in emulated time: the minimum retransmission timeout (200 ms
on Linux), the delayed-ACK timer (up to 40 ms; Nagle is off, TCP_NODELAY), the initial RTO
(1 s). So a ring that loses packets recovers by timeout sooner than it would on the network
being emulated, and its times under loss are optimistic; without loss only a delayed ACK that
paces a window-limited sender differs (slightly optimistic too). docs/workloads.md, "Time
dilation", has the details.
"""

from __future__ import annotations

import collections

# socket.create_connection encodes a host name with the idna codec, which Python imports on
# first use: imported here, at module load, because ranks dial from threads (loopback runs)
import encodings.idna  # noqa: F401
import logging
import select
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from vtime import REAL_TIME, VirtualClock
from workloads.errors import WorkloadError

log = logging.getLogger(__name__)

Address = tuple[str, int]

_HELLO = struct.Struct("!4sII")  # magic, rank of the dialling side, world size
_HELLO_MAGIC = b"WKH1"
_FRAME = struct.Struct("!2sBBQQ")  # magic, dtype code, ndim, tag, payload bytes
_FRAME_MAGIC = b"WK"
_DIM = struct.Struct("!Q")
_SEND_PIECE = 1 << 20
_MAX_PAYLOAD = 1 << 34

_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f8"),
    3: np.dtype("<i4"),
    4: np.dtype("<i8"),
    5: np.dtype("<u4"),
    6: np.dtype("u1"),
    7: np.dtype("<f2"),
    8: np.dtype("i1"),
    9: np.dtype("<u8"),
    10: np.dtype("<i2"),
    11: np.dtype("<u2"),
}
_CODES: dict[np.dtype, int] = {dt: code for code, dt in _DTYPES.items()}


class CommError(WorkloadError, RuntimeError):
    """A peer is unreachable, closed its connection, or sent something malformed."""


class CommTimeout(CommError, TimeoutError):
    """A send or receive did not complete within the communicator's timeout."""


@dataclass(frozen=True)
class Traffic:
    """Counters of one rank's traffic.

    ``bytes_*`` add each frame's header (20 bytes plus 8 per dimension) to the ``payload_*``.
    """

    bytes_sent: int = 0
    bytes_received: int = 0
    payload_sent: int = 0
    payload_received: int = 0
    messages_sent: int = 0
    messages_received: int = 0

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.bytes_sent - other.bytes_sent,
            self.bytes_received - other.bytes_received,
            self.payload_sent - other.payload_sent,
            self.payload_received - other.payload_received,
            self.messages_sent - other.messages_sent,
            self.messages_received - other.messages_received,
        )


class PointToPoint(Protocol):
    """What the collectives need of a transport: tagged numpy send/receive between the
    ranks of a job, tag bases per call, traffic counters and the clock. Implemented by
    :class:`Communicator` (TCP) and :class:`workloads.rocecomm.RoceCommunicator` (RoCE v2),
    so each algorithm is written once for both."""

    rank: int
    size: int
    clock: VirtualClock

    def send(self, dst: int, array: np.ndarray, tag: int) -> None: ...

    def recv(self, src: int, tag: int, timeout: float | None = None) -> np.ndarray: ...

    def next_op_tag(self) -> int: ...

    def traffic(self) -> Traffic: ...

    def barrier(self) -> None: ...


def dissemination_barrier(comm: PointToPoint) -> None:
    """Return once every rank of ``comm`` has entered (dissemination algorithm: ceil(log2 P)
    rounds of empty messages)."""
    base = comm.next_op_tag()
    token = np.zeros(0, dtype=np.uint8)
    distance, step = 1, 0
    while distance < comm.size:
        comm.send((comm.rank + distance) % comm.size, token, base + step)
        comm.recv((comm.rank - distance) % comm.size, base + step)
        distance, step = distance * 2, step + 1


def listen(address: Address, backlog: int = 64) -> socket.socket:
    """A TCP listening socket on ``address`` (port 0 picks a free port; see ``getsockname``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as err:
        sock.close()
        raise CommError(f"cannot listen on {address[0]}:{address[1]}: {err}") from err
    return sock


def _wire_dtype(dtype: np.dtype) -> np.dtype:
    """The little-endian form of ``dtype`` used on the wire; TypeError if it has no code."""
    wire = dtype if dtype.itemsize == 1 else dtype.newbyteorder("<")
    if wire not in _CODES:
        raise TypeError(f"cannot send arrays of dtype {dtype}")
    return wire


def _recv_exact(sock: socket.socket, nbytes: int) -> bytearray | None:
    """``nbytes`` from ``sock``; ``None`` on a clean end of stream before the first byte."""
    buf = bytearray(nbytes)
    view = memoryview(buf)
    got = 0
    while got < nbytes:
        n = sock.recv_into(view[got:], nbytes - got)
        if n == 0:
            if got == 0:
                return None
            raise CommError(f"connection closed in the middle of a message ({got}/{nbytes} bytes)")
        got += n
    return buf


class Communicator:
    """One rank's connections to all other ranks of a job; see the module docstring.

    ``addresses[r]`` is where rank ``r`` listens. A pre-bound ``listener`` may be passed (tests
    bind port 0 first to avoid races); the communicator owns and closes it. One thread drives
    a communicator (its reader threads are internal). ``timeout`` and ``connect_timeout`` are
    emulated seconds of ``clock``.
    """

    def __init__(
        self,
        rank: int,
        addresses: Sequence[Address],
        *,
        listener: socket.socket | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        clock: VirtualClock = REAL_TIME,
    ) -> None:
        self.clock = clock
        self.size = len(addresses)
        if self.size < 1:
            raise ValueError("need at least one rank address")
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} out of range for {self.size} ranks")
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be > 0 seconds")
        self.rank = rank
        self.addresses = tuple((str(h), int(p)) for h, p in addresses)
        self.timeout = timeout
        self._socks: dict[int, socket.socket] = {}
        self._send_locks: dict[int, threading.Lock] = {}
        self._readers: list[threading.Thread] = []
        self._cv = threading.Condition()
        self._mail: dict[tuple[int, int], collections.deque[np.ndarray]] = {}
        self._dead: dict[int, str] = {}
        self._closed = False
        self._op = 0
        self._sent = [0, 0, 0]  # bytes, payload, messages (main thread only)
        self._received = [0, 0, 0]  # counted when the caller takes a message
        own_listener = listener
        try:
            if own_listener is None and self.size > 1:
                own_listener = listen(self.addresses[rank], backlog=self.size)
            self._connect_mesh(own_listener, clock.now() + connect_timeout)
        except BaseException:
            self._shutdown_sockets()
            raise
        finally:
            if own_listener is not None:
                own_listener.close()
        for peer, sock in self._socks.items():
            self._send_locks[peer] = threading.Lock()
            reader = threading.Thread(
                target=self._read_loop,
                args=(peer, sock),
                daemon=True,
                name=f"comm-r{rank}-from{peer}",
            )
            reader.start()
            self._readers.append(reader)
        log.debug("rank %d/%d connected", rank, self.size)

    # -- set-up -------------------------------------------------------------------------

    def _connect_mesh(self, listener: socket.socket | None, deadline: float) -> None:
        for peer in range(self.rank):
            sock = self._dial(self.addresses[peer], deadline)
            self._socks[peer] = sock
            sock.sendall(_HELLO.pack(_HELLO_MAGIC, self.rank, self.size))
            sock.settimeout(None)
        expected = self.size - 1 - self.rank
        while expected:
            assert listener is not None
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                missing = sorted(set(range(self.rank + 1, self.size)) - set(self._socks))
                raise CommTimeout(f"rank {self.rank}: ranks {missing} did not connect in time")
            listener.settimeout(self.clock.real(remaining))
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            dialled = self._greet(conn, deadline)
            if dialled is None:
                conn.close()
                continue
            self._socks[dialled] = conn
            expected -= 1

    def _dial(self, address: Address, deadline: float) -> socket.socket:
        delay = 0.01
        while True:
            remaining = deadline - self.clock.now()
            if remaining <= 0:
                raise CommTimeout(f"rank {self.rank}: cannot reach {address[0]}:{address[1]}")
            try:
                # no shorter cap per attempt: a dilated network's round trip can be seconds
                # of real time (16 us at TDF 400,000: 6.4 s), and an attempt abandoned before
                # its SYN-ACK is back never connects; a refused one returns at once anyway
                sock = socket.create_connection(address, timeout=self.clock.real(remaining))
            except OSError:
                # the peer's listener is not up yet: processes start in real time, so the
                # back-off is real (10 to 200 ms), however dilated the network
                self.clock.sleep(min(self.clock.emulated(delay),
                                     max(0.0, deadline - self.clock.now())))
                delay = min(delay * 2, 0.2)
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock

    def _greet(self, conn: socket.socket, deadline: float) -> int | None:
        """Validate a dialling peer's hello; ``None`` for a stranger (the connection is dropped)."""
        conn.settimeout(self.clock.real(max(0.01, deadline - self.clock.now())))
        try:
            hello = _recv_exact(conn, _HELLO.size)
        except (OSError, CommError):
            return None
        if hello is None:
            return None
        magic, peer, size = _HELLO.unpack(hello)
        if magic != _HELLO_MAGIC or size != self.size or not self.rank < peer < self.size:
            log.warning(
                "rank %d: rejected a connection (magic %r, rank %d, size %d)",
                self.rank,
                magic,
                peer,
                size,
            )
            return None
        if peer in self._socks:
            log.warning("rank %d: rank %d connected twice", self.rank, peer)
            return None
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return peer

    # -- receiving ----------------------------------------------------------------------

    def _read_loop(self, peer: int, sock: socket.socket) -> None:
        reason = "closed the connection"
        try:
            while True:
                head = _recv_exact(sock, _FRAME.size)
                if head is None:
                    break
                magic, code, ndim, tag, nbytes = _FRAME.unpack(head)
                if magic != _FRAME_MAGIC or code not in _DTYPES or nbytes > _MAX_PAYLOAD:
                    raise CommError(f"malformed frame from rank {peer}")
                dims = _recv_exact(sock, ndim * _DIM.size) if ndim else bytearray()
                if dims is None:
                    raise CommError(f"connection from rank {peer} closed inside a frame")
                shape = tuple(_DIM.unpack_from(dims, i * _DIM.size)[0] for i in range(ndim))
                payload = _recv_exact(sock, nbytes) if nbytes else bytearray()
                if payload is None:
                    raise CommError(f"connection from rank {peer} closed inside a frame")
                array = np.frombuffer(payload, dtype=_DTYPES[code]).reshape(shape)
                with self._cv:
                    self._mail.setdefault((peer, tag), collections.deque()).append(array)
                    self._cv.notify_all()
        except (OSError, CommError, ValueError) as err:
            reason = f"failed: {err}"
        finally:
            with self._cv:
                self._dead[peer] = reason
                self._cv.notify_all()

    def recv(self, src: int, tag: int, timeout: float | None = None) -> np.ndarray:
        """The next array that ``src`` sent with ``tag`` (read-only; copy before writing);
        ``timeout`` in emulated seconds (default: the communicator's)."""
        if src == self.rank or not 0 <= src < self.size:
            raise ValueError(f"rank {self.rank} cannot receive from rank {src}")
        deadline = self.clock.now() + (self.timeout if timeout is None else timeout)
        key = (src, tag)
        with self._cv:
            while True:
                queue = self._mail.get(key)
                if queue:
                    array = queue.popleft()
                    if not queue:
                        del self._mail[key]
                    self._received[0] += _FRAME.size + array.ndim * _DIM.size + array.nbytes
                    self._received[1] += array.nbytes
                    self._received[2] += 1
                    return array
                if self._closed:
                    raise CommError(f"rank {self.rank}: communicator is closed")
                if src in self._dead:
                    raise CommError(f"rank {self.rank}: rank {src} {self._dead[src]}")
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    raise CommTimeout(
                        f"rank {self.rank}: nothing from rank {src} with tag {tag:#x} "
                        f"within {self.timeout if timeout is None else timeout:g} s"
                    )
                self._cv.wait(self.clock.real(remaining))

    # -- sending ------------------------------------------------------------------------

    def send(self, dst: int, array: np.ndarray, tag: int) -> None:
        """Send ``array`` (any shape, a supported dtype) to rank ``dst`` under ``tag``."""
        if dst == self.rank or not 0 <= dst < self.size:
            raise ValueError(f"rank {self.rank} cannot send to rank {dst}")
        if not 0 <= tag < 2**64:
            raise ValueError(f"tag must fit in 64 bits, got {tag}")
        arr = np.asarray(array)
        wire = _wire_dtype(arr.dtype)
        data = np.ascontiguousarray(arr, dtype=wire)
        header = _FRAME.pack(_FRAME_MAGIC, _CODES[wire], data.ndim, tag, data.nbytes)
        header += b"".join(_DIM.pack(d) for d in data.shape)
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        sock = self._socks[dst]
        with self._send_locks[dst]:
            self._send_all(sock, dst, memoryview(header))
            if data.nbytes:
                self._send_all(sock, dst, data.data.cast("B"))
        self._sent[0] += len(header) + data.nbytes
        self._sent[1] += data.nbytes
        self._sent[2] += 1

    def _send_all(self, sock: socket.socket, dst: int, view: memoryview) -> None:
        """Write all of ``view``; fail after ``timeout`` seconds without progress."""
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
        clock = self.clock
        last_progress = clock.now()
        while view:
            try:
                n = sock.send(view[:_SEND_PIECE], socket.MSG_DONTWAIT)
            except BlockingIOError:
                n = 0
            except OSError as err:
                raise CommError(f"rank {self.rank}: sending to rank {dst} failed: {err}") from err
            if n:
                view = view[n:]
                last_progress = clock.now()
                continue
            remaining = last_progress + self.timeout - clock.now()
            if remaining <= 0:
                raise CommTimeout(
                    f"rank {self.rank}: rank {dst} stopped reading for {self.timeout:g} s"
                )
            poller.poll(min(clock.real(remaining), 1.0) * 1000.0)

    # -- helpers for collectives --------------------------------------------------------

    def next_op_tag(self) -> int:
        """A fresh tag base for one collective call (the same on every rank if all ranks call
        the same collectives in the same order); steps add their index to it."""
        self._op += 1
        return self._op << 24

    def traffic(self) -> Traffic:
        """Totals so far (received counts messages already taken with :meth:`recv`)."""
        with self._cv:
            received = tuple(self._received)
        return Traffic(
            self._sent[0], received[0], self._sent[1], received[1], self._sent[2], received[2]
        )

    def barrier(self) -> None:
        """Return once every rank has entered the barrier (dissemination algorithm)."""
        dissemination_barrier(self)

    # -- teardown -----------------------------------------------------------------------

    def _shutdown_sockets(self) -> None:
        for sock in self._socks.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        """Close every connection and stop the reader threads (idempotent)."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        self._shutdown_sockets()
        for reader in self._readers:
            reader.join(timeout=5.0)  # real: the reader only has to notice the shutdown

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
