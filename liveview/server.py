"""The live view's web server: the standard library's ``http.server`` plus server-sent events.

One sampler thread takes a snapshot (:class:`liveview.sources.Collector`) every interval and
hands it to every open ``/events`` stream, so the number of browsers never multiplies the
reads; a second thread reads P4Runtime at the same pace, so that a switch slow to answer
delays only the job and drop numbers, never the link rates. Routes::

    /              the page (static/index.html: cytoscape.js drawing, tables)
    /static/NAME   the page's script, style and the vendored cytoscape.js
    /api/graph     nodes, links and layout roots from topology.json
    /api/snapshot  the latest snapshot (JSON)
    /events        text/event-stream: one ``data:`` line of snapshot JSON per interval

It binds to loopback only.
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from liveview.sources import Collector
from topo.errors import TopologyFileError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_INTERVAL_S = 1.0
STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".txt": "text/plain; charset=utf-8"}


class LiveViewError(Exception):
    """The live view cannot start (port taken, no topology.json)."""


def static_file(name: str) -> tuple[bytes, str] | None:
    """(content, content type) of a file shipped in ``liveview/static``, or None."""
    if "/" in name or name.startswith("."):
        return None
    ctype = STATIC_TYPES.get(Path(name).suffix)
    if ctype is None:
        return None
    res = resources.files("liveview") / "static" / name
    if not res.is_file():
        return None
    return res.read_bytes(), ctype


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, body: bytes, ctype: str, status: HTTPStatus = HTTPStatus.OK) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data: Any) -> None:
        self._send(json.dumps(data).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        path = self.path.split("?", 1)[0]
        live: LiveServer = self.server.live
        if path in ("/", "/index.html"):
            found = static_file("index.html")
        elif path.startswith("/static/"):
            found = static_file(path[len("/static/"):])
        elif path == "/api/graph":
            return self._json(live.graph)
        elif path == "/api/snapshot":
            return self._json(live.latest())
        elif path == "/events":
            return self._events(live)
        else:
            found = None
        if found is None:
            return self._send(b"not found\n", "text/plain", HTTPStatus.NOT_FOUND)
        self._send(*found)

    def _events(self, live: LiveServer) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        seq = -1
        try:
            while not live.stopping.is_set():
                snap = live.wait_newer(seq, timeout_s=5.0)
                if snap is None:
                    self.wfile.write(b": keep-alive\n\n")
                else:
                    seq = snap["seq"]
                    self.wfile.write(b"data: " + json.dumps(snap).encode() + b"\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    live: LiveServer


class LiveServer:
    """The server and its sampler thread for one run directory; :meth:`start`, :meth:`stop`
    (or use it as a context manager). ``port`` 0 takes a free port."""

    def __init__(self, rundir: str | Path, port: int = 0, interval_s: float = DEFAULT_INTERVAL_S,
                 collector: Collector | None = None) -> None:
        try:
            self.collector = collector if collector is not None else Collector(rundir)
        except TopologyFileError as exc:
            raise LiveViewError(str(exc)) from None
        self.graph = self.collector.graph()
        self.interval_s = interval_s
        try:
            self.httpd = _Server((HOST, port), _Handler)
        except OSError as exc:
            raise LiveViewError(f"live view: cannot listen on {HOST}:{port}: "
                                f"{exc.strerror or exc}") from None
        self.httpd.live = self
        self.stopping = threading.Event()
        self._cond = threading.Condition()
        self._latest: dict[str, Any] | None = None
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.httpd.server_port}/"

    def latest(self) -> dict[str, Any] | None:
        with self._cond:
            return self._latest

    def wait_newer(self, seq: int, timeout_s: float) -> dict[str, Any] | None:
        """The latest snapshot once it is newer than ``seq`` (None after ``timeout_s``)."""
        with self._cond:
            self._cond.wait_for(lambda: (self._latest is not None and self._latest["seq"] > seq)
                                or self.stopping.is_set(), timeout=timeout_s)
            if self._latest is not None and self._latest["seq"] > seq:
                return self._latest
            return None

    def _sample_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                snap = self.collector.snapshot()
            except Exception as exc:  # keep serving; the page shows what went wrong
                log.debug("snapshot failed", exc_info=True)
                snap = {"seq": (self._latest or {}).get("seq", 0) + 1, "links": [],
                        "switches": {}, "jobs": [], "errors": [f"snapshot failed: {exc}"]}
            with self._cond:
                self._latest = snap
                self._cond.notify_all()
            self.stopping.wait(self.interval_s)

    def _p4runtime_loop(self) -> None:
        self.collector.p4runtime_loop(self.stopping, self.interval_s)

    def start(self) -> LiveServer:
        self.collector.background = True  # before the first snapshot: never read inline
        for target, name in ((self._p4runtime_loop, "liveview-p4runtime"),
                             (self._sample_loop, "liveview-sampler"),
                             (self.httpd.serve_forever, "liveview-http")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stops sampling and serving; idempotent."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._threads:
            self.httpd.shutdown()
        self.httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self.collector.close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
