"""The TCP communicator: framing, tags, timeouts, errors and clean shutdown."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import numpy as np
import pytest

from vtime import VirtualClock
from workloads import comm
from workloads.comm import CommError, CommTimeout, Communicator, listen
from workloads.loopback import RankFailed, run_ranks


def test_send_recv_dtypes_and_shapes() -> None:
    """Arrays of several dtypes and shapes (including empty) arrive byte for byte."""
    arrays: list[np.ndarray] = [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([-(2**31), 2**31 - 1, 0], dtype=np.int32),
        np.arange(5, dtype=np.int64),
        np.zeros(0, dtype=np.uint8),
        np.float64(2.5) * np.ones((2, 1, 2)),
        np.arange(4, dtype=">f4"),
    ]

    def work(comm: Communicator) -> list[np.ndarray]:
        if comm.rank == 0:
            for i, a in enumerate(arrays):
                comm.send(1, a, tag=i)
            return []
        return [comm.recv(0, tag=i) for i in range(len(arrays))]

    got = run_ranks(2, work, timeout=5)[1]
    for sent, received in zip(arrays, got, strict=True):
        assert received.shape == sent.shape
        np.testing.assert_array_equal(received, sent)


def test_tags_are_matched_not_ordered() -> None:
    """A receive for tag 2 gets its message even if tag 1 was sent first and is read later."""

    def work(comm: Communicator) -> tuple[int, int]:
        if comm.rank == 0:
            comm.send(1, np.array([1]), tag=1)
            comm.send(1, np.array([2]), tag=2)
            return (0, 0)
        second = int(comm.recv(0, tag=2)[0])
        first = int(comm.recv(0, tag=1)[0])
        return (first, second)

    assert run_ranks(2, work, timeout=5)[1] == (1, 2)


def test_large_message_all_send_first() -> None:
    """Every rank sends 8 MB to the next before anyone receives: no deadlock."""
    size = 2_000_003

    def work(comm: Communicator) -> float:
        data = np.full(size, comm.rank, dtype=np.float32)
        comm.send((comm.rank + 1) % comm.size, data, tag=7)
        got = comm.recv((comm.rank - 1) % comm.size, tag=7)
        return float(got[-1])

    assert run_ranks(3, work, timeout=10) == [2.0, 0.0, 1.0]


def test_traffic_counts_payload_and_header() -> None:
    """Traffic counters count payload bytes and the frame header of each message."""

    def work(comm: Communicator) -> tuple[int, int, int]:
        if comm.rank == 0:
            comm.send(1, np.zeros(100, dtype=np.float32), tag=1)
        else:
            comm.recv(0, tag=1)
        t = comm.traffic()
        return t.payload_sent, t.payload_received, t.bytes_sent + t.bytes_received

    sender, receiver = run_ranks(2, work, timeout=5)
    assert sender[0] == 400 and receiver[1] == 400
    assert sender[2] == receiver[2] == 400 + 20 + 8


def test_recv_times_out() -> None:
    """Waiting for a message nobody sends raises CommTimeout after the timeout."""

    def work(comm: Communicator) -> None:
        if comm.rank == 1:
            comm.recv(0, tag=99, timeout=0.2)
        comm.barrier()

    with pytest.raises(RankFailed) as info:
        run_ranks(2, work, timeout=3)
    assert isinstance(info.value.__cause__, CommError)


def test_peer_close_is_reported() -> None:
    """A receive from a rank that has closed fails fast with CommError, not a hang."""
    done = threading.Event()

    def work(comm: Communicator) -> str:
        if comm.rank == 0:
            return "closed"
        try:
            comm.recv(0, tag=1, timeout=5)
        except CommTimeout:
            return "timeout"
        except CommError as err:
            done.set()
            return str(err)
        return "message"

    out = run_ranks(2, work, timeout=5)
    assert done.is_set() and "rank 0" in out[1]


def test_connect_fails_when_peer_absent() -> None:
    """Dialling a rank that never listens gives CommTimeout within the connect timeout."""
    lone = listen(("127.0.0.1", 0))
    free = listen(("127.0.0.1", 0))
    addresses = [free.getsockname()[:2], lone.getsockname()[:2]]
    free.close()  # rank 0's port now refuses connections
    with pytest.raises(CommTimeout):
        Communicator(1, addresses, listener=lone, connect_timeout=0.3)


def test_dial_waits_a_dilated_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """At TDF 400,000 a 16 us round trip is 6.4 s of real time: a dial attempt given less
    (it was capped at 5 s) is abandoned before its SYN-ACK can come back, again and again,
    and the ring never connected. Here the network answers a dial after 6.4 s: an attempt
    with a shorter timeout times out (as the kernel's connect would), a longer one connects."""
    rtt_real = 6.4
    dial = socket.create_connection
    attempts: list[float] = []

    def slow_network(address: tuple[str, int], timeout: float) -> socket.socket:
        attempts.append(timeout)
        if timeout < rtt_real:
            raise TimeoutError("timed out")
        return dial(address, timeout=timeout)

    monkeypatch.setattr(comm.socket, "create_connection", slow_network)
    lone = listen(("127.0.0.1", 0))
    peer = listen(("127.0.0.1", 0))
    addresses = [peer.getsockname()[:2], lone.getsockname()[:2]]
    clock = VirtualClock(400_000)
    accepted: list[socket.socket] = []
    acceptor = threading.Thread(target=lambda: accepted.append(peer.accept()[0]), daemon=True)
    acceptor.start()
    try:
        # 8 s of real time to connect, in emulated seconds
        c = Communicator(1, addresses, listener=lone, connect_timeout=8.0 / 400_000,
                         clock=clock)
    finally:
        acceptor.join(timeout=10)
        peer.close()
        for sock in accepted:
            sock.close()
    c.close()
    assert attempts and attempts[-1] >= rtt_real


def test_barrier_and_single_rank() -> None:
    """Barriers complete for several sizes, including a job of one rank."""
    for size in (1, 2, 5):
        assert run_ranks(size, lambda c: c.barrier(), timeout=5) == [None] * size


def test_bad_arguments() -> None:
    """Sending to oneself, to a missing rank or an object array is refused clearly."""

    def work(comm: Communicator) -> list[str]:
        errors: list[str] = []
        calls: list[Callable[[], None]] = [
            lambda: comm.send(comm.rank, np.zeros(1), 0),
            lambda: comm.send(5, np.zeros(1), 0),
            lambda: comm.send(1 - comm.rank, np.array(["x"], dtype=object), 0),
        ]
        for call in calls:
            try:
                call()
            except (ValueError, TypeError) as err:
                errors.append(type(err).__name__)
        return errors

    assert run_ranks(2, work, timeout=5)[0] == ["ValueError", "ValueError", "TypeError"]
