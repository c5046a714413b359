"""Data-plane ports: AF_PACKET sockets on Linux interfaces, and in-memory ports for tests.

Every port exposes a file descriptor so that one ``selectors`` loop can wait on all of them;
``recv_batch`` drains what is queued without blocking, and ``send`` never blocks (a full
socket buffer counts as a transmit drop, as a NIC ring overflow would).
"""

from __future__ import annotations

import errno
import socket
import struct
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Protocol

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4
PACKET_IGNORE_OUTGOING = 23  # Linux >= 4.20
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
ETH_P_8021Q = 0x8100
# struct tpacket_auxdata: status, len, snaplen (u32); mac, net, vlan_tci, vlan_tpid (u16)
AUXDATA = struct.Struct("=IIIHHHH")
AUXDATA_SPACE = socket.CMSG_SPACE(AUXDATA.size)
STATUS_LOW_BYTE = 0 if sys.byteorder == "little" else 3  # the byte of tp_status with bit 4
ETH_OVERHEAD = 14 + 4 + 4  # Ethernet header, one VLAN tag, slack for the FCS-less maximum
DEFAULT_MTU = 1500
MAX_FRAME = 65535
SOCKET_BUFFER = 4 * 1024 * 1024


class PortError(Exception):
    """A port could not be opened (missing interface, no permission)."""


@dataclass
class PortCounters:
    """Per-port statistics kept by the switch loop."""

    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0
    tx_drops: int = 0  # transmit failures (socket buffer full, interface down)
    rx_errors: int = 0  # packets whose processing raised inside the pipeline
    malformed: int = 0  # frames shorter than an Ethernet header
    dropped: int = 0  # frames received here from which the pipeline transmitted nothing

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class Port(Protocol):
    """What the switch loop needs from a port."""

    number: int
    name: str
    counters: PortCounters

    def fileno(self) -> int: ...

    def recv_batch(self, max_frames: int) -> list[bytes]: ...

    def send(self, frame: bytes) -> bool: ...

    def close(self) -> None: ...


def interface_mtu(iface: str) -> int:
    """The interface's MTU from sysfs (``DEFAULT_MTU`` when unknown)."""
    try:
        return int(Path(f"/sys/class/net/{iface}/mtu").read_text().strip())
    except (OSError, ValueError):
        return DEFAULT_MTU


def interface_exists(iface: str) -> bool:
    return Path(f"/sys/class/net/{iface}").exists()


def restore_vlan_tag(frame: bytes, ancillary: list[tuple[int, int, bytes]]) -> bytes:
    """``frame`` with the VLAN tag that the kernel took off on receive put back.

    With receive VLAN offload (on by default for veths and most NICs) the kernel removes
    the outermost 802.1Q/802.1ad tag from the frame and keeps it in the packet's metadata;
    an AF_PACKET socket with ``PACKET_AUXDATA`` gets it as ``tp_vlan_tci`` (and, since
    Linux 3.14, ``tp_vlan_tpid``). Reinserting it after the MAC addresses gives the frame
    exactly as it was on the wire, as libpcap does.
    """
    for level, kind, data in ancillary:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(data) < AUXDATA.size:
            continue
        status, _len, _snap, _mac, _net, tci, tpid = AUXDATA.unpack_from(data)
        # Kernels before 3.0 had no VLAN_VALID flag and only reported a non-zero TCI.
        if not (status & TP_STATUS_VLAN_VALID or tci):
            return frame
        if not status & TP_STATUS_VLAN_TPID_VALID or not tpid:
            tpid = ETH_P_8021Q
        if len(frame) < 12:
            return frame
        return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


class AfPacketPort:
    """A switch port bound to a Linux interface with a raw AF_PACKET socket.

    The socket sees every frame on the interface (promiscuous membership) and ignores the
    copies of frames that the switch itself transmits (``PACKET_IGNORE_OUTGOING`` where
    the kernel has it, else the ``sll_pkttype`` of each frame). Received frames get back
    the VLAN tag that receive offload stripped (:func:`restore_vlan_tag`); transmitted
    frames go out as given, tags included.
    """

    def __init__(self, number: int, iface: str) -> None:
        self.number = number
        self.name = iface
        self.counters = PortCounters()
        if not interface_exists(iface):
            raise PortError(f"interface {iface!r} does not exist")
        self.bufsize = min(MAX_FRAME, max(interface_mtu(iface) + ETH_OVERHEAD, 2048))
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except PermissionError as exc:
            raise PortError(f"cannot open a raw socket on {iface!r}: {exc.strerror}") from None
        try:
            sock.bind((iface, ETH_P_ALL))
            ifindex = socket.if_nametoindex(iface)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass  # older kernel: filtered by sll_pkttype in recv_batch
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                try:
                    sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
                except OSError:
                    pass
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise PortError(f"cannot bind to interface {iface!r}: {exc.strerror or exc}") from None
        self._sock: socket.socket | None = sock
        self._recvmsg = sock.recvmsg

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    def recv_batch(self, max_frames: int) -> list[bytes]:
        """Up to ``max_frames`` received frames, without blocking."""
        out: list[bytes] = []
        recvmsg = self._recvmsg
        bufsize = self.bufsize
        while len(out) < max_frames:
            try:
                data, ancillary, _flags, addr = recvmsg(bufsize, AUXDATA_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if exc.errno in (errno.ENETDOWN, errno.ENXIO):
                    break
                raise
            if addr[2] == PACKET_OUTGOING:
                continue
            if ancillary:
                aux = ancillary[0][2]
                # Fast path: no VLAN_VALID bit in tp_status and a zero TCI.
                if aux[STATUS_LOW_BYTE] & TP_STATUS_VLAN_VALID or aux[16:18] != b"\x00\x00":
                    data = restore_vlan_tag(data, ancillary)
            out.append(data)
        return out

    def send(self, frame: bytes) -> bool:
        """Transmit one frame; False (and a counted drop) if the kernel refused it."""
        sock = self._sock
        if sock is None:
            self.counters.tx_drops += 1
            return False
        try:
            sock.send(frame)
        except OSError:
            self.counters.tx_drops += 1
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class MemoryPort:
    """An in-memory port: a datagram socket pair, so it works with the same select loop.

    Tests call :meth:`inject` to deliver a frame to the switch and :meth:`receive` to take
    what the switch transmitted on this port.
    """

    def __init__(self, number: int, name: str | None = None) -> None:
        self.number = number
        self.name = name or f"port{number}"
        self.counters = PortCounters()
        self._switch_end, self._peer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for sock in (self._switch_end, self._peer_end):
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
        self._switch_end.setblocking(False)

    # ---------------------------------------------------------------- the switch side
    def fileno(self) -> int:
        return self._switch_end.fileno()

    def recv_batch(self, max_frames: int) -> list[bytes]:
        out: list[bytes] = []
        recv = self._switch_end.recv
        while len(out) < max_frames:
            try:
                out.append(recv(MAX_FRAME))
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
        return out

    def send(self, frame: bytes) -> bool:
        try:
            self._switch_end.send(frame)
        except OSError:
            self.counters.tx_drops += 1
            return False
        return True

    def close(self) -> None:
        self._switch_end.close()
        self._peer_end.close()

    # ------------------------------------------------------------------ the test side
    def inject(self, frame: bytes) -> None:
        """Deliver ``frame`` to the switch as if received on this port."""
        self._peer_end.send(frame)

    def receive(self, timeout: float = 1.0) -> bytes | None:
        """The next frame the switch transmitted on this port, or None after ``timeout``."""
        self._peer_end.settimeout(timeout)
        try:
            return self._peer_end.recv(MAX_FRAME)
        except (TimeoutError, BlockingIOError):
            return None

    def receive_all(self, timeout: float = 0.2) -> list[bytes]:
        """Every frame transmitted so far (waiting up to ``timeout`` for the first)."""
        out: list[bytes] = []
        frame = self.receive(timeout)
        while frame is not None:
            out.append(frame)
            frame = self.receive(0.0)
        return out
