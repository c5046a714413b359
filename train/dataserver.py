"""A TCP data server for dataset shards (the stand-in for NFS) and its client.

Protocol (one persistent connection per client, requests answered in order):

* request: one ASCII line, ``GET <name>\\n`` or ``LIST\\n``;
* response: a 9-byte header (``!BQ``: status, payload length) then the payload. Status 0 is
  success (``GET``: the shard's bytes; ``LIST``: JSON ``{name: size}``), 1 an unknown shard,
  2 a malformed request (the payload is then a UTF-8 message).

Why a home-made protocol rather than real NFS: it needs no root, no kernel server and no
mount, runs unchanged on a Mininet host and on 127.0.0.1, and its bytes are counted exactly.
``latency_s`` and ``rate_bps`` let the server act as a slow remote filesystem on loopback,
where the network itself costs nothing; on Mininet leave them at 0 and let the links decide.
Both, and every timeout, are emulated (seconds and bits per second of the server's or client's
:class:`vtime.VirtualClock`): under time dilation the server waits ``TDF`` times as long.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import struct
import threading
from collections.abc import Mapping

from train.errors import TrainError
from vtime import REAL_TIME, VirtualClock

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!BQ")
OK, NOT_FOUND, BAD_REQUEST = 0, 1, 2
_MAX_LINE = 1024
_MAX_PAYLOAD = 1 << 32


class DataServerError(TrainError, RuntimeError):
    """The data server could not be reached or answered with an error."""


class _Handler(socketserver.StreamRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        self.connection.settimeout(self.server.clock.real(self.server.idle_timeout))
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                line = self.rfile.readline(_MAX_LINE)
            except (TimeoutError, OSError):
                return
            if not line:
                return
            try:
                self._answer(line.decode("ascii", "replace").strip())
            except OSError:
                return

    def _answer(self, request: str) -> None:
        verb, _, arg = request.partition(" ")
        shards = self.server.shards
        if verb == "GET" and arg in shards:
            blob = shards[arg]
            self.server.throttle(len(blob))
            self._reply(OK, blob)
            self.server.count(len(blob))
        elif verb == "GET":
            self._reply(NOT_FOUND, f"no shard named {arg!r}".encode())
        elif verb == "LIST" and not arg:
            self._reply(OK, json.dumps({n: len(b) for n, b in shards.items()}).encode())
        else:
            self._reply(BAD_REQUEST, f"bad request {request[:80]!r}".encode())

    def _reply(self, status: int, payload: bytes) -> None:
        # One write: a separate small header write would meet Nagle + delayed ACK (40 ms).
        self.wfile.write(_HEADER.pack(status, len(payload)) + payload)
        self.wfile.flush()


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        shards: Mapping[str, bytes],
        latency_s: float,
        rate_bps: float,
        idle_timeout: float,
        clock: VirtualClock = REAL_TIME,
    ) -> None:
        self.clock = clock
        super().__init__(address, _Handler)
        self.shards = dict(shards)
        self.latency_s = latency_s
        self.rate_bps = rate_bps
        self.idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self.bytes_served = 0
        self.requests_served = 0

    def throttle(self, nbytes: int) -> None:
        delay = self.latency_s + (8.0 * nbytes / self.rate_bps if self.rate_bps > 0 else 0.0)
        self.clock.sleep(delay)

    def count(self, nbytes: int) -> None:
        with self._lock:
            self.bytes_served += nbytes
            self.requests_served += 1


class DataServer:
    """Serves ``shards`` on ``host:port`` (port 0 picks a free one) from a background thread.

    Use as a context manager, or call :meth:`close`; both stop the thread and close the socket.
    ``latency_s``, ``rate_bps`` and ``idle_timeout`` are emulated (``clock``).
    """

    def __init__(
        self,
        shards: Mapping[str, bytes],
        host: str = "127.0.0.1",
        port: int = 0,
        latency_s: float = 0.0,
        rate_bps: float = 0.0,
        idle_timeout: float = 60.0,
        clock: VirtualClock = REAL_TIME,
    ) -> None:
        if latency_s < 0 or rate_bps < 0:
            raise ValueError("latency_s and rate_bps must be >= 0")
        self.clock = clock
        try:
            self._server = _TCPServer((host, port), shards, latency_s, rate_bps, idle_timeout,
                                      clock)
        except OSError as exc:
            raise DataServerError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
            name="dataserver",
        )
        self._thread.start()
        log.info("data server on %s:%d with %d shards", *self.address, len(shards))

    @property
    def address(self) -> tuple[str, int]:
        """Where the server listens."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def bytes_served(self) -> int:
        """Shard bytes sent so far (all clients)."""
        return self._server.bytes_served

    def close(self) -> None:
        """Stop serving and close the listening socket (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=self.clock.real(5.0))
        self._server.server_close()

    def __enter__(self) -> DataServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShardClient:
    """A worker's connection to the data server: ``get(name)`` returns a shard's bytes.

    Thread-safe (one request at a time on the connection); reconnects once when the server
    closed an idle connection. Counts the bytes it received, header included. ``timeout``
    (connecting and every read) is emulated seconds of ``clock``.
    """

    def __init__(self, address: tuple[str, int], timeout: float = 30.0,
                 clock: VirtualClock = REAL_TIME) -> None:
        self.address = (str(address[0]), int(address[1]))
        self.timeout = timeout
        self.clock = clock
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.bytes_received = 0

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection(self.address, timeout=self.clock.real(self.timeout))
        except OSError as exc:
            raise DataServerError(
                f"cannot reach the data server at {self.address[0]}:{self.address[1]}: {exc}"
            ) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("data server closed the connection")
            got += k
        return bytes(buf)

    def _request(self, line: str) -> bytes:
        with self._lock:
            for attempt in (0, 1):
                if self._sock is None:
                    self._sock = self._connect()
                try:
                    self._sock.sendall(line.encode("ascii") + b"\n")
                    status, length = _HEADER.unpack(self._recv_exact(self._sock, _HEADER.size))
                    if length > _MAX_PAYLOAD:
                        raise DataServerError(f"data server announced {length} bytes")
                    payload = self._recv_exact(self._sock, length)
                    break
                except (ConnectionError, TimeoutError, OSError) as exc:
                    self._close_socket()
                    if attempt or isinstance(exc, TimeoutError):
                        raise DataServerError(
                            f"data server request {line!r} failed: {exc}") from exc
            self.bytes_received += _HEADER.size + len(payload)
        if status != OK:
            raise DataServerError(payload.decode("utf-8", "replace"))
        return payload

    def get(self, name: str) -> bytes:
        """The bytes of shard ``name``."""
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"invalid shard name {name!r}")
        return self._request(f"GET {name}")

    def list(self) -> dict[str, int]:
        """``{name: size in bytes}`` of every shard the server holds."""
        return {str(k): int(v) for k, v in json.loads(self._request("LIST")).items()}

    def _close_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._close_socket()

    def __enter__(self) -> ShardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
