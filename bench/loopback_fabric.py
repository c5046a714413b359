"""A loopback fabric for tests and benchmarks: RoCE endpoints on 127.0.0.1 whose datagrams
are relayed, as Ethernet/IPv4/UDP frames, through any frame processor (a softswitch pipeline,
three wired pipelines, a plain router), with injectable loss.

Test and benchmark equipment, not part of the host agents (moved out of workloads/roce.py).
"""

from __future__ import annotations

import logging
import random
import select
import socket
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.netreduce import ROCE_V2_PORT
from workloads.roce import Address

log = logging.getLogger(__name__)

# ------------------------------------------------------------------- loopback fabric

FrameProcessor = Callable[[int, bytes], list[tuple[int, bytes]]]
_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")


def _mac(text: str) -> bytes:
    return bytes(int(b, 16) for b in text.split(":"))


def ipv4_checksum(header: bytes) -> int:
    """The ones'-complement checksum of an IPv4 header whose checksum field is 0."""
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, sport: int, dport: int,
              payload: bytes, ttl: int = 64) -> bytes:
    """An Ethernet/IPv4/UDP frame (DF, id 0, UDP checksum 0 as RoCE v2 sends)."""
    total = 20 + 8 + len(payload)
    ip = _IPV4.pack(0x45, 0, total, 0, 0x4000, ttl, 17, 0, socket.inet_aton(src_ip),
                    socket.inet_aton(dst_ip))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    return (_ETH.pack(_mac(dst_mac), _mac(src_mac), 0x0800) + ip
            + _UDP.pack(sport, dport, 8 + len(payload), 0) + payload)


@dataclass(frozen=True)
class FabricHost:
    """An emulated host behind the fabric: its address, MAC and switch port."""

    ip: str
    mac: str
    port: int


@dataclass
class FabricStats:
    relayed: int = 0
    emitted: int = 0
    dropped_in: int = 0  # lost on the way to the switch (injected)
    dropped_out: int = 0  # lost on the way to a host (injected)
    misrouted: int = 0
    unknown_source: int = 0
    per_port: dict[int, int] = field(default_factory=dict)


class LoopbackFabric:
    """Relays endpoints' datagrams on 127.0.0.1 through ``process(port, frame)``.

    Every emulated host ``ip`` gets a relay socket: an endpoint sending to host ``ip`` sends
    to :meth:`address_of` ``(ip)``; the fabric learns who sent it from the source socket
    address (:meth:`attach`), wraps the datagram in Ethernet/IPv4/UDP (destination port
    4791) and hands it to ``process`` on the sender's switch port. Each frame that comes out
    is unwrapped and sent from the relay socket of its IPv4 source to the endpoint of the
    host on that port, so replies go back through the switch too. ``loss`` drops datagrams
    at random (seeded) on the way in and on the way out. The relay runs in one thread.
    ``idle``, if given, is called when no datagram is waiting after some were processed
    and returns the frames a switch with egress queues lets leave then (as the switch
    process does when its input is idle), so a queued packet never waits for the next
    datagram, which may be a retransmission after a timeout.
    """

    def __init__(self, process: FrameProcessor, hosts: Iterable[FabricHost],
                 switch_mac: str = "02:aa:00:00:00:01", loss: float = 0.0, seed: int = 1,
                 drop: Callable[[bytes], bool] | None = None,
                 idle: Callable[[], list[tuple[int, bytes]]] | None = None) -> None:
        self.process = process
        self.idle = idle
        self.hosts = {h.ip: h for h in hosts}
        self.by_port = {h.port: h for h in self.hosts.values()}
        self.switch_mac = switch_mac
        self.loss = loss
        self.drop = drop
        self.stats = FabricStats()
        self._rng = random.Random(seed)
        self._endpoints: dict[str, Address] = {}
        self._owner: dict[Address, str] = {}
        self._relays: dict[str, socket.socket] = {}
        self._closed = False
        try:
            for ip in self.hosts:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self._relays[ip] = s
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
                s.bind(("127.0.0.1", 0))
                s.setblocking(False)
        except OSError:
            self._close_sockets()
            raise
        self._by_fd = {s.fileno(): ip for ip, s in self._relays.items()}
        self._thread = threading.Thread(target=self._loop, name="fabric", daemon=True)

    def address_of(self, ip: str) -> Address:
        """Where endpoints send datagrams meant for host ``ip``."""
        try:
            return self._relays[ip].getsockname()[:2]
        except KeyError:
            raise ValueError(f"host {ip} is not attached to the fabric") from None

    def attach(self, ip: str, endpoint_address: Address) -> None:
        """Host ``ip``'s endpoint listens on ``endpoint_address``."""
        if ip not in self.hosts:
            raise ValueError(f"host {ip} is not attached to the fabric")
        self._endpoints[ip] = endpoint_address
        self._owner[endpoint_address] = ip

    def start(self) -> LoopbackFabric:
        self._thread.start()
        return self

    def _lost(self) -> bool:
        return self.loss > 0 and self._rng.random() < self.loss

    def _loop(self) -> None:
        poller = select.poll()
        for s in self._relays.values():
            poller.register(s, select.POLLIN)
        busy = False  # datagrams processed since the last idle call
        while not self._closed:
            try:
                events = poller.poll(0 if busy and self.idle is not None else 100)
            except OSError:
                break
            if not events and busy and self.idle is not None:
                busy = False
                for port, out in self.idle():
                    self._emit(port, out)
                continue
            busy = busy or bool(events)
            for fd, _ in events:
                dst_ip = self._by_fd.get(fd)
                if dst_ip is not None:
                    self._drain(dst_ip)

    def _drain(self, dst_ip: str) -> None:
        """Relay up to 64 datagrams waiting on ``dst_ip``'s relay socket."""
        sock = self._relays[dst_ip]
        for _ in range(64):
            try:
                data, src = sock.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            self._relay(dst_ip, data, src[:2])

    def _relay(self, dst_ip: str, data: bytes, src: Address) -> None:
        src_ip = self._owner.get(src)
        if src_ip is None:
            self.stats.unknown_source += 1
            return
        if self._lost() or (self.drop is not None and self.drop(data)):
            self.stats.dropped_in += 1
            return
        host = self.hosts[src_ip]
        frame = udp_frame(host.mac, self.switch_mac, src_ip, dst_ip, src[1], ROCE_V2_PORT, data)
        self.stats.relayed += 1
        for port, out in self.process(host.port, frame):
            self._emit(port, out)

    def _emit(self, port: int, frame: bytes) -> None:
        target = self.by_port.get(port)
        if target is None or len(frame) < 42 or frame[12:14] != b"\x08\x00":
            self.stats.misrouted += 1
            return
        ihl = (frame[14] & 0x0F) * 4
        src_ip = socket.inet_ntoa(frame[26:30])
        dst_ip = socket.inet_ntoa(frame[30:34])
        if frame[23] != 17 or dst_ip != target.ip or src_ip not in self._relays:
            self.stats.misrouted += 1
            return
        udp = 14 + ihl
        (length,) = struct.unpack_from("!H", frame, udp + 4)
        payload = frame[udp + 8: udp + length]
        addr = self._endpoints.get(dst_ip)
        if addr is None:
            self.stats.misrouted += 1
            return
        if self._lost():
            self.stats.dropped_out += 1
            return
        self.stats.emitted += 1
        self.stats.per_port[port] = self.stats.per_port.get(port, 0) + 1
        try:
            self._relays[src_ip].sendto(payload, addr)
        except OSError as err:
            log.debug("fabric: send to %s failed: %s", dst_ip, err)

    def _close_sockets(self) -> None:
        for s in self._relays.values():
            s.close()

    def close(self) -> None:
        """Stop the relay thread and close its sockets (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self._close_sockets()

    def __enter__(self) -> LoopbackFabric:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
