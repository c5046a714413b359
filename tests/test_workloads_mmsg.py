"""Batched datagram I/O (workloads/mmsg.py) on loopback UDP sockets."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from workloads.mmsg import BatchSocket


@pytest.fixture()
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for s in (a, b):
            s.bind(("127.0.0.1", 0))
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        yield a, b
    finally:
        a.close()
        b.close()


def _receive_all(rx: BatchSocket, count: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < count:
        if not select.select([rx.sock], [], [], 2.0)[0]:
            break
        got += rx.recv_batch()
    return got


@pytest.mark.parametrize("batched", [True, False])
def test_batch_round_trip_in_order(pair: tuple[socket.socket, socket.socket],
                                   batched: bool) -> None:
    """150 datagrams of different sizes arrive complete and in order; batched, both sides
    need fewer system calls than datagrams (plain fallback: one per datagram)."""
    a, b = pair
    tx, rx = BatchSocket(a, batch=64), BatchSocket(b, batch=64)
    if not batched:
        tx._lib = rx._lib = None  # noqa: SLF001 - the fallback for C libraries without mmsg
    elif not tx.batched:
        pytest.skip("the C library has no sendmmsg/recvmmsg")
    data = [bytes([i % 256]) * (1 + i * 7 % 1100) for i in range(150)]
    assert tx.send_batch(data, b.getsockname()) == len(data)
    assert _receive_all(rx, len(data)) == data
    if batched:
        assert tx.syscalls == 3  # 64 + 64 + 22
        assert rx.syscalls < len(data)
    else:
        assert tx.syscalls == len(data)


def test_empty_socket_and_empty_batch(pair: tuple[socket.socket, socket.socket]) -> None:
    """Nothing queued: [] without blocking; nothing to send: 0 without a system call."""
    a, b = pair
    rx, tx = BatchSocket(b), BatchSocket(a)
    assert rx.recv_batch() == []
    assert tx.send_batch([], b.getsockname()) == 0 and tx.syscalls == 0
