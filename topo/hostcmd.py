"""Small commands that :mod:`experiment.session` runs *inside* Mininet hosts.

Each prints exactly one JSON line on stdout when done (and ``ready`` first where a peer must
wait for it), so the experiment reads results without parsing free text:

    python -m topo.hostcmd ping --dst 10.0.1.2,10.0.2.1 [--count 3 --timeout 2]
    python -m topo.hostcmd udp-flows --dst 10.0.2.1 --sports 6000-6015 --packets 20
    python -m topo.hostcmd tcp-recv --port 5301 --seconds 8
    python -m topo.hostcmd tcp-send --dst 10.0.2.1 --port 5301 --seconds 4

Why our own ping and TCP transfer: the testbed's hosts need nothing beyond Python (neither
``ping`` nor ``iperf`` is a dependency of the project). The all-reduces themselves run
``python -m workloads allreduce``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

ICMP_ECHO_REQUEST = 8
ICMP_ECHO_REPLY = 0
CHUNK = 64 * 1024


def _emit(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------- ping


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def ping(dst: str, count: int = 3, timeout: float = 2.0, interval: float = 0.1) -> dict[str, Any]:
    """ICMP echo over a raw socket (needs root in the namespace, which Mininet hosts have)."""
    ident = os.getpid() & 0xFFFF
    received = 0
    rtts: list[float] = []
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as sock:
        for seq in range(1, count + 1):
            payload = struct.pack("!d", time.monotonic()) + bytes(24)
            header = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0, 0, ident, seq)
            header = struct.pack("!BBHHH", ICMP_ECHO_REQUEST, 0,
                                 _checksum(header + payload), ident, seq)
            t0 = time.monotonic()
            sock.sendto(header + payload, (dst, 0))
            deadline = t0 + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                sock.settimeout(left)
                try:
                    data, addr = sock.recvfrom(2048)
                except TimeoutError:
                    break
                ihl = (data[0] & 0x0F) * 4
                typ, _code, _ck, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
                if typ == ICMP_ECHO_REPLY and rid == ident and rseq == seq and addr[0] == dst:
                    received += 1
                    rtts.append((time.monotonic() - t0) * 1000.0)
                    break
            if seq < count:
                time.sleep(interval)
    return {"dst": dst, "sent": count, "received": received, "rtt_ms": rtts}


def udp_flows(dst: str, sports: range, packets: int, dport: int = 7000,
              size: int = 1000) -> dict[str, Any]:
    """``packets`` datagrams on each of several flows, one per source port in ``sports``
    (fixed 5-tuples, so ECMP hashing spreads them deterministically)."""
    sent = 0
    for sport in sports:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("0.0.0.0", sport))
            for _ in range(packets):
                sock.sendto(bytes(size), (dst, dport))
                sent += 1
                time.sleep(0.001)
    return {"dst": dst, "flows": len(sports), "packets": sent}


# ------------------------------------------------------------------------------- TCP


def tcp_receive(port: int, seconds: float) -> dict[str, Any]:
    """Accepts one connection and counts bytes until it closes or ``seconds`` pass."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen(1)
        srv.settimeout(seconds)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        conn, _addr = srv.accept()
    total = 0
    first = last = None
    deadline = time.monotonic() + seconds
    with conn:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            conn.settimeout(left)
            try:
                data = conn.recv(CHUNK)
            except TimeoutError:
                break
            if not data:
                break
            now = time.monotonic()
            if first is None:
                first = now
            last = now
            total += len(data)
    span = (last - first) if first is not None and last is not None else 0.0
    return {"bytes": total, "seconds": span,
            "mbit_per_s": total * 8 / span / 1e6 if span > 0 else 0.0}


def tcp_send(dst: str, port: int, seconds: float) -> dict[str, Any]:
    """Sends as fast as TCP allows for ``seconds``."""
    buf = bytes(CHUNK)
    sent = 0
    with socket.create_connection((dst, port), timeout=10.0) as sock:
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            sock.settimeout(max(0.1, end - time.monotonic()))
            try:
                sent += sock.send(buf)
            except TimeoutError:
                continue
        elapsed = time.monotonic() - t0
    return {"bytes": sent, "seconds": elapsed}


# ------------------------------------------------------------------------------- CLI


def _port_range(text: str) -> range:
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; prints its JSON line; 1 with ``error: ...`` on failure."""
    p = _Parser(prog="python -m topo.hostcmd", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pg = sub.add_parser("ping")
    pg.add_argument("--dst", required=True, help="one or more addresses, comma-separated")
    pg.add_argument("--count", type=int, default=3)
    pg.add_argument("--timeout", type=float, default=2.0)
    uf = sub.add_parser("udp-flows")
    uf.add_argument("--dst", required=True)
    uf.add_argument("--sports", type=_port_range, required=True)
    uf.add_argument("--dport", type=int, default=7000)
    uf.add_argument("--packets", type=int, default=20)
    rv = sub.add_parser("tcp-recv")
    rv.add_argument("--port", type=int, required=True)
    rv.add_argument("--seconds", type=float, required=True)
    sd = sub.add_parser("tcp-send")
    sd.add_argument("--dst", required=True)
    sd.add_argument("--port", type=int, required=True)
    sd.add_argument("--seconds", type=float, required=True)
    args = p.parse_args(argv)
    try:
        if args.cmd == "ping":
            _emit({"results": [ping(d, args.count, args.timeout) for d in args.dst.split(",")]})
        elif args.cmd == "udp-flows":
            _emit(udp_flows(args.dst, args.sports, args.packets, args.dport))
        elif args.cmd == "tcp-recv":
            _emit(tcp_receive(args.port, args.seconds))
        else:
            _emit(tcp_send(args.dst, args.port, args.seconds))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
