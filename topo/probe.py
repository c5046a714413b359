"""A paced UDP sender and a counting receiver, run inside host namespaces by topo.measure.

``python -m topo.probe recv --port 5201 --seconds 5`` prints ``ready`` once bound, then one
JSON line when done; ``python -m topo.probe send --dst 10.0.1.2 --port 5201 --seconds 3
--rate-mbit 15 --size 1000`` prints one JSON line. Rates are of UDP payload bytes.

The receiver ends at ``--seconds`` or, once a line on its standard input says the sender
is done, when the link's queue has drained: no datagram for :func:`drained_after` (the
whole ``--seconds`` made every ``make run``'s link check wait 2 s after its sender).
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import IO, Any

MAX_PAYLOAD = 1472  # one Ethernet frame of 1500 bytes MTU


@dataclass(frozen=True)
class SendResult:
    """What the sender put on the wire."""

    packets: int
    bytes: int
    seconds: float


@dataclass(frozen=True)
class ReceiveResult:
    """What arrived; ``seconds`` spans the first to the last packet."""

    packets: int
    bytes: int
    seconds: float

    @property
    def mbit_per_s(self) -> float:
        """Payload rate between the first and the last packet (0 with fewer than 2)."""
        if self.packets < 2 or self.seconds <= 0:
            return 0.0
        # n packets span n-1 inter-arrival gaps
        return (self.bytes * (self.packets - 1) / self.packets) * 8 / self.seconds / 1e6


def send(dst: str, port: int, seconds: float, rate_mbit: float, size: int = 1000) -> SendResult:
    """Sends ``size``-byte datagrams to ``dst:port`` at ``rate_mbit`` for ``seconds``."""
    if not 1 <= size <= MAX_PAYLOAD:
        raise ValueError(f"size must be in 1..{MAX_PAYLOAD}")
    if rate_mbit <= 0 or seconds <= 0:
        raise ValueError("rate and duration must be positive")
    interval = size * 8 / (rate_mbit * 1e6)
    payload = bytes(size)
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((dst, port))
        t0 = time.monotonic()
        end = t0 + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            due = t0 + sent * interval
            if due > now:
                time.sleep(min(due - now, end - now))
                continue
            try:
                sock.send(payload)
            except OSError:  # full buffers / unreachable: count only what left
                continue
            sent += 1
        elapsed = time.monotonic() - t0
    return SendResult(sent, sent * size, elapsed)


#: After the sender is done, the receiver ends once no datagram came for this many of the
#: longest gap it saw between two, and at least DRAIN_MIN_S: a queue still draining keeps
#: the gaps at the link's pace (slow under time dilation), so the tail is not cut short.
DRAIN_GAPS = 20
DRAIN_MIN_S = 0.3


def drained_after(max_gap: float) -> float:
    """How long without a datagram, once the sender is done, ends the receiver."""
    return max(DRAIN_MIN_S, DRAIN_GAPS * max_gap)


@dataclass
class _Tally:
    """What arrived so far, and the longest gap between two datagrams."""

    packets: int = 0
    nbytes: int = 0
    first: float = 0.0
    last: float = 0.0
    max_gap: float = 0.0

    def read(self, sock: socket.socket) -> bool:
        """Counts every datagram waiting on ``sock`` (non-blocking); True when one was."""
        got = False
        while True:
            try:
                data = sock.recv(65535)
            except BlockingIOError:
                return got
            now = time.monotonic()
            if self.packets == 0:
                self.first = now
            else:
                self.max_gap = max(self.max_gap, now - self.last)
            self.last = now
            self.packets += 1
            self.nbytes += len(data)
            got = True


def receive(port: int, seconds: float, on_ready: Callable[[], None] | None = None,
            host: str = "0.0.0.0", done: IO[str] | None = None) -> ReceiveResult:
    """Counts datagrams arriving on ``port`` for ``seconds`` (after binding), or until the
    queue drained after a line ``done`` on ``done`` said the sender is done (the end of
    ``done`` alone, as from /dev/null, is no such line)."""
    tally = _Tally()
    quiet_from: float | None = None  # when the sender was done, then each later datagram
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((host, port))
        sock.setblocking(False)
        if on_ready is not None:
            on_ready()
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if quiet_from is not None:
                left = min(left, quiet_from + drained_after(tally.max_gap) - time.monotonic())
            if left <= 0:
                break
            watch: list[Any] = [sock] if done is None else [sock, done]
            readable, _, _ = select.select(watch, [], [], left)
            if done is not None and done in readable:
                line = done.readline()
                if line.strip() == "done":
                    quiet_from = time.monotonic()
                elif not line:
                    done = None  # its end: nothing more to hear from it
            if sock in readable and tally.read(sock) and quiet_from is not None:
                quiet_from = tally.last
    return ReceiveResult(tally.packets, tally.nbytes, tally.last - tally.first)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI for use inside a host namespace."""
    p = argparse.ArgumentParser(prog="python -m topo.probe")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, default=5201)
    s.add_argument("--seconds", type=float, default=3.0)
    s.add_argument("--rate-mbit", type=float, required=True)
    s.add_argument("--size", type=int, default=1000)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=5201)
    r.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args(argv)
    if args.cmd == "send":
        result: SendResult | ReceiveResult = send(args.dst, args.port, args.seconds,
                                                  args.rate_mbit, args.size)
    else:
        result = receive(args.port, args.seconds,
                         on_ready=lambda: print("ready", flush=True), done=sys.stdin)
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
