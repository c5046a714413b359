"""Batched UDP datagram I/O: Linux ``sendmmsg``/``recvmmsg`` through ctypes.

An emulated RoCE NIC moves one datagram per packet; with ``socket.sendto``/``recv_into``
that is one system call per packet plus a failing one (EAGAIN) per wake-up. Measured on an
in-network all-reduce (``strace -c`` of a host agent, docs/benchmarks.md): about two
system calls per packet moved. ``sendmmsg`` sends a whole window's packets in one call and
``recvmmsg`` takes everything queued in one call; both fall back to the plain socket calls
where the C library lacks them (not Linux).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import socket
from collections.abc import Sequence

log = logging.getLogger(__name__)

MSG_DONTWAIT = 0x40


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(_Iovec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


class _SockaddrIn(ctypes.Structure):
    _fields_ = [("sin_family", ctypes.c_ushort), ("sin_port", ctypes.c_uint16),
                ("sin_addr", ctypes.c_uint8 * 4), ("sin_zero", ctypes.c_uint8 * 8)]


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name, use_errno=True)
        lib.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
        lib.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                                 ctypes.c_void_p]
        return lib
    except (OSError, AttributeError):
        return None


def sockaddr_in(addr: tuple[str, int]) -> _SockaddrIn:
    """A ``struct sockaddr_in`` for an IPv4 ``(host, port)``."""
    sa = _SockaddrIn()
    sa.sin_family = socket.AF_INET
    sa.sin_port = socket.htons(addr[1])
    sa.sin_addr[:] = list(socket.inet_aton(addr[0]))
    return sa


class BatchSocket:
    """A non-blocking UDP socket's batched send and receive (one instance per socket, used
    by one thread). ``batch`` bounds the datagrams per call."""

    def __init__(self, sock: socket.socket, batch: int = 64, bufsize: int = 2048) -> None:
        self.sock = sock
        self.batch = batch
        self.bufsize = bufsize
        self._lib = _libc()
        self._fd = sock.fileno()
        self.syscalls = 0  # system calls made (for the profile in docs/benchmarks.md)
        self._names: dict[tuple[str, int], _SockaddrIn] = {}
        # receive side: fixed buffers and headers, filled by the kernel
        self._rbufs = [ctypes.create_string_buffer(bufsize) for _ in range(batch)]
        self._riov = (_Iovec * batch)()
        self._rmsgs = (_Mmsghdr * batch)()
        for i, b in enumerate(self._rbufs):
            self._riov[i].iov_base = ctypes.addressof(b)
            self._riov[i].iov_len = bufsize
            self._rmsgs[i].msg_hdr.msg_iov = ctypes.pointer(self._riov[i])
            self._rmsgs[i].msg_hdr.msg_iovlen = 1
        self._siov = (_Iovec * batch)()
        self._smsgs = (_Mmsghdr * batch)()
        for i in range(batch):
            self._smsgs[i].msg_hdr.msg_iov = ctypes.pointer(self._siov[i])
            self._smsgs[i].msg_hdr.msg_iovlen = 1

    @property
    def batched(self) -> bool:
        """sendmmsg/recvmmsg are available (else one call per datagram)."""
        return self._lib is not None

    def recv_batch(self) -> list[bytes]:
        """Every datagram queued (up to ``batch``), without blocking; [] when none."""
        if self._lib is None:
            return self._recv_plain()
        self.syscalls += 1
        n = self._lib.recvmmsg(self._fd, ctypes.byref(self._rmsgs), self.batch, MSG_DONTWAIT,
                               None)
        if n < 0:
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR, errno.ECONNREFUSED):
                return []
            raise OSError(err, f"recvmmsg: {errno.errorcode.get(err, err)}")
        msgs, bufs = self._rmsgs, self._rbufs
        return [bufs[i].raw[:msgs[i].msg_len] for i in range(n)]

    def _recv_plain(self) -> list[bytes]:
        out = []
        for _ in range(self.batch):
            self.syscalls += 1
            try:
                out.append(self.sock.recv(self.bufsize))
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:
                continue
        return out

    def send_batch(self, datagrams: Sequence[bytes], addr: tuple[str, int]) -> int:
        """Sends ``datagrams`` to ``addr`` in order; returns how many the kernel took (fewer
        when the socket buffer filled up)."""
        if not datagrams:
            return 0
        if self._lib is None:
            return self._send_plain(datagrams, addr)
        name = self._names.get(addr)
        if name is None:
            name = self._names[addr] = sockaddr_in(addr)
        sent = 0
        while sent < len(datagrams):
            chunk = datagrams[sent:sent + self.batch]
            for i, d in enumerate(chunk):
                iov = self._siov[i]
                iov.iov_base = ctypes.cast(ctypes.c_char_p(d), ctypes.c_void_p).value
                iov.iov_len = len(d)
                hdr = self._smsgs[i].msg_hdr
                hdr.msg_name = ctypes.addressof(name)
                hdr.msg_namelen = ctypes.sizeof(name)
            self.syscalls += 1
            n = self._lib.sendmmsg(self._fd, ctypes.byref(self._smsgs), len(chunk), 0)
            if n < 0:
                err = ctypes.get_errno()
                if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS, errno.EINTR):
                    return sent
                log.warning("sendmmsg to %s failed: %s", addr, errno.errorcode.get(err, err))
                return sent + len(chunk)  # as sendto: an error drops the datagram
            sent += n
            if n < len(chunk):
                return sent
        return sent

    def _send_plain(self, datagrams: Sequence[bytes], addr: tuple[str, int]) -> int:
        for i, d in enumerate(datagrams):
            self.syscalls += 1
            try:
                self.sock.sendto(d, addr)
            except (BlockingIOError, InterruptedError):
                return i
            except OSError as err:
                if err.errno in (errno.ENOBUFS, errno.EAGAIN):
                    return i
                log.warning("send to %s failed: %s", addr, err)
        return len(datagrams)
