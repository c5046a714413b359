"""A paced UDP sender and a counting receiver, run inside host namespaces by topo.measure.

``python -m topo.probe recv --port 5201 --seconds 5`` prints ``ready`` once bound, then one
JSON line when done; ``python -m topo.probe send --dst 10.0.1.2 --port 5201 --seconds 3
--rate-mbit 15 --size 1000`` prints one JSON line. Rates are of UDP payload bytes.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

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


def receive(port: int, seconds: float, on_ready: Callable[[], None] | None = None,
            host: str = "0.0.0.0") -> ReceiveResult:
    """Counts datagrams arriving on ``port`` for ``seconds`` (after binding)."""
    packets = nbytes = 0
    first = last = 0.0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((host, port))
        if on_ready is not None:
            on_ready()
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                data = sock.recv(65535)
            except TimeoutError:
                break
            now = time.monotonic()
            if packets == 0:
                first = now
            last = now
            packets += 1
            nbytes += len(data)
    return ReceiveResult(packets, nbytes, last - first)


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
                         on_ready=lambda: print("ready", flush=True))
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
