"""Malformed frames for the bad-frame cell, and the sender that runs inside a Mininet host.

Every frame is wrong in one way the switch must survive and count: too short for the
headers it announces, a foreign ethertype, ARP, a bad IPv4 header (checksum, IHL, total
length, version, TTL), an unroutable destination, or a RoCE v2 packet whose BTH or
aggregation tag is cut short or names no job. ``python -m reliability.frames --iface IF
--count N`` sends them (paced, retrying when the interface's queue is full) and prints one
JSON line: how many of each kind went out.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence

ROCE_PORT = 4791
KINDS = (
    "runt",
    "ethertype",
    "arp",
    "ip_checksum",
    "ip_ihl",
    "ip_version",
    "ip_truncated",
    "ip_ttl",
    "no_route",
    "roce_short_bth",
    "roce_bad_tag",
    "garbage",
)


def ip_checksum(header: bytes) -> int:
    """The IPv4 header checksum (RFC 791) of ``header`` with its checksum field zeroed."""
    if len(header) % 2:
        header += b"\0"
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def _ipv4(
    src: str,
    dst: str,
    payload: bytes,
    *,
    ttl: int = 64,
    proto: int = 17,
    ihl: int = 5,
    version: int = 4,
    bad_sum: bool = False,
    total_len: int | None = None,
) -> bytes:
    length = total_len if total_len is not None else 20 + len(payload)
    head = struct.pack(
        "!BBHHHBBH4s4s",
        (version << 4) | ihl,
        0,
        length & 0xFFFF,
        1,
        0,
        ttl,
        proto,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    csum = ip_checksum(head)
    if bad_sum:
        csum ^= 0x5A5A
    return head[:10] + struct.pack("!H", csum) + head[12:] + payload


def _udp(sport: int, dport: int, payload: bytes) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


class FrameFactory:
    """Builds malformed frames from ``src`` (MAC, IP) to ``dst`` (the switch side)."""

    def __init__(self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, seed: int = 1) -> None:
        self.rng = random.Random(seed)
        self.eth = _mac(dst_mac) + _mac(src_mac)
        self.src_ip, self.dst_ip = src_ip, dst_ip
        self.makers: dict[str, Callable[[], bytes]] = {k: getattr(self, f"_{k}") for k in KINDS}

    def _bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n)

    def _ip_frame(self, payload: bytes, **kw: object) -> bytes:
        return self.eth + b"\x08\x00" + _ipv4(self.src_ip, self.dst_ip, payload, **kw)  # type: ignore[arg-type]

    def _runt(self) -> bytes:  # an Ethernet header announcing IPv4, then a cut header
        return self.eth + b"\x08\x00" + self._bytes(self.rng.randrange(0, 20))

    def _ethertype(self) -> bytes:
        etype = self.rng.choice((0x86DD, 0x8100, 0x88CC, 0x9000, 0x0000, 0xFFFF))
        return self.eth + struct.pack("!H", etype) + self._bytes(self.rng.randrange(20, 100))

    def _arp(self) -> bytes:
        return self.eth + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + self._bytes(20)

    def _ip_checksum(self) -> bytes:
        return self._ip_frame(_udp(1000, 2000, self._bytes(16)), bad_sum=True)

    def _ip_ihl(self) -> bytes:
        return self._ip_frame(_udp(1000, 2000, self._bytes(16)), ihl=self.rng.randrange(0, 5))

    def _ip_version(self) -> bytes:
        return self._ip_frame(
            _udp(1000, 2000, self._bytes(16)), version=self.rng.choice((0, 6, 15))
        )

    def _ip_truncated(self) -> bytes:  # total length beyond the frame, or the options cut
        if self.rng.random() < 0.5:
            return self._ip_frame(_udp(1000, 2000, self._bytes(8)), total_len=1400)
        return self._ip_frame(b"", ihl=15)  # 60-byte header announced, 20 present

    def _ip_ttl(self) -> bytes:
        return self._ip_frame(_udp(1000, 2000, self._bytes(16)), ttl=self.rng.choice((0, 1)))

    def _no_route(self) -> bytes:
        return (
            self.eth
            + b"\x08\x00"
            + _ipv4(
                self.src_ip,
                f"192.0.2.{self.rng.randrange(1, 255)}",
                _udp(1000, 2000, self._bytes(16)),
            )
        )

    def _roce_short_bth(self) -> bytes:
        return self._ip_frame(_udp(49152, ROCE_PORT, self._bytes(self.rng.randrange(0, 12))))

    def _roce_bad_tag(self) -> bytes:
        # a WRITE First whose BTH names a QP no job has, with a garbage RETH, tag and data
        bth = struct.pack(
            "!BBHI I", 0x06, 0, 0xFFFF, self.rng.randrange(1 << 24), self.rng.randrange(1 << 24)
        )
        return self._ip_frame(_udp(49152, ROCE_PORT, bth + self._bytes(self.rng.randrange(0, 200))))

    def _garbage(self) -> bytes:
        return self.eth + self._bytes(self.rng.randrange(2, 200))

    def frames(self, count: int) -> list[tuple[str, bytes]]:
        """``count`` frames, the kinds in turn."""
        return [(KINDS[i % len(KINDS)], self.makers[KINDS[i % len(KINDS)]]()) for i in range(count)]


def send(iface: str, frames: Sequence[tuple[str, bytes]], rate_pps: float) -> Counter[str]:
    """Sends ``frames`` on ``iface`` at about ``rate_pps``; a full transmit queue (ENOBUFS)
    is waited out, never skipped, so every frame leaves exactly once."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    sent: Counter[str] = Counter()
    gap = 1.0 / rate_pps if rate_pps > 0 else 0.0
    t_next = time.monotonic()
    try:
        for kind, frame in frames:
            while True:
                try:
                    sock.send(frame)
                    break
                except OSError as exc:
                    if exc.errno != 105:  # ENOBUFS: the queue is full
                        raise
                    time.sleep(0.002)
            sent[kind] += 1
            t_next += gap
            delay = t_next - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        sock.close()
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m reliability.frames --iface IF --count N --src-mac ... --dst-mac ...``."""
    p = argparse.ArgumentParser(
        prog="python -m reliability.frames", description=__doc__.splitlines()[0]
    )
    p.add_argument("--iface", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--rate", type=float, default=2000.0, help="frames per second")
    p.add_argument("--src-mac", required=True)
    p.add_argument("--dst-mac", default="02:00:00:00:ff:ff")
    p.add_argument("--src-ip", required=True)
    p.add_argument("--dst-ip", required=True)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    factory = FrameFactory(args.src_mac, args.dst_mac, args.src_ip, args.dst_ip, args.seed)
    t0 = time.monotonic()
    sent = send(args.iface, factory.frames(args.count), args.rate)
    print(
        json.dumps(
            {
                "sent": sum(sent.values()),
                "kinds": dict(sent),
                "seconds": round(time.monotonic() - t0, 3),
            },
            sort_keys=True,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
