"""A minimal in-process P4Runtime server, for testing controllers without a switch.

:class:`FakeP4RuntimeServer` keeps entities in a dict keyed by their identity (no program
semantics: it does not check match fields against the P4Info), arbitrates by election id like
the specification says, and reports per-update errors in a ``google.rpc.Status`` trailer as
real servers do. ``fail_next`` lets a test inject an error into the next RPC of a kind;
``unimplemented`` makes it refuse entity kinds as PI does (register entries).

:class:`SwitchProcess` runs the built-in target as a real process (``python -m softswitch
run``) and :func:`compile_program` makes P4Info and device config with ``python -m
softswitch compile``; both are subprocesses, so the controller still imports nothing from
``softswitch``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

import stackdump
from controller import entities as ents
from controller.p4client import STATUS_DETAILS_KEY, from_uint128, uint128

Update = p4runtime_pb2.Update
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(eq=False)
class _Session:
    election_id: int | None = None
    refused: str = ""
    outbox: list[p4runtime_pb2.StreamMessageResponse | None] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def send(self, msg: p4runtime_pb2.StreamMessageResponse | None) -> None:
        with self.cond:
            self.outbox.append(msg)
            self.cond.notify_all()


class _Servicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.sessions: list[_Session] = []
        self.entities: dict[ents.EntityKey, p4runtime_pb2.Entity] = {}
        self.config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self.packet_outs: list[p4runtime_pb2.PacketOut] = []
        self.writes = 0
        self.fail_next: dict[str, grpc.StatusCode] = {}
        # Entity kinds answered with UNIMPLEMENTED, as PI (simple_switch_grpc) does for
        # "register_entry": the Read fails, a Write fails per update.
        self.unimplemented: set[str] = set()

    # -------------------------------------------------------------- arbitration
    def _primary(self) -> _Session | None:
        cands = [s for s in self.sessions if s.election_id is not None]
        return max(cands, key=lambda s: s.election_id or 0, default=None)

    def _notify(self, targets: list[_Session]) -> None:
        primary = self._primary()
        for s in targets:
            msg = p4runtime_pb2.StreamMessageResponse()
            msg.arbitration.device_id = self.device_id
            if primary is not None:
                msg.arbitration.election_id.CopyFrom(uint128(primary.election_id or 0))
            if primary is None:
                msg.arbitration.status.code = code_pb2.NOT_FOUND
            elif s is primary:
                msg.arbitration.status.code = code_pb2.OK
            else:
                msg.arbitration.status.code = code_pb2.ALREADY_EXISTS
            s.send(msg)

    def StreamChannel(
        self, request_iterator: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        session = _Session()

        context.add_callback(lambda: session.send(None))
        threading.Thread(target=self._read_stream, args=(session, request_iterator),
                         daemon=True).start()
        try:
            while True:
                with session.cond:
                    while not session.outbox:
                        session.cond.wait()
                    item = session.outbox.pop(0)
                if item is None:
                    break
                yield item
        finally:
            self._leave(session)
        if session.refused:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, session.refused)

    def _read_stream(self, session: _Session, request_iterator: Iterator[Any]) -> None:
        """A stream's requests: arbitration and packet-outs; the stream ends (None in the
        outbox) when the client's side ends or an arbitration is refused."""
        try:
            for req in request_iterator:
                if req.HasField("arbitration"):
                    if not self._arbitrate(session, req.arbitration):
                        session.send(None)
                        return
                elif req.HasField("packet"):
                    self.packet_outs.append(req.packet)
        except grpc.RpcError:
            pass
        finally:
            session.send(None)

    def _leave(self, session: _Session) -> None:
        """A stream ended: the others hear of a new primary."""
        with self.lock:
            if session in self.sessions:
                before = self._primary()
                self.sessions.remove(session)
                if self._primary() is not before:
                    self._notify(list(self.sessions))

    def _arbitrate(self, session: _Session, arb: Any) -> bool:
        """A session's (new) election id; False, with the reason on the session, for
        another device's id or an election id another session has."""
        if arb.device_id != self.device_id:
            session.refused = f"no device {arb.device_id}"
            return False
        eid = from_uint128(arb.election_id)
        with self.lock:
            if any(o is not session and o.election_id == eid for o in self.sessions):
                session.refused = f"election id {eid} is in use"
                return False
            before = self._primary()
            session.election_id = eid
            if session not in self.sessions:
                self.sessions.append(session)
            changed = self._primary() is not before
            self._notify(list(self.sessions) if changed else [session])
        return True

    # ------------------------------------------------------------------- RPCs
    def _check(self, name: str, request: Any, context: grpc.ServicerContext, write: bool) -> None:
        code = self.fail_next.pop(name, None)
        if code is not None:
            context.abort(code, f"injected failure of {name}")
        if request.device_id != self.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no device {request.device_id}")
        if write:
            with self.lock:
                primary = self._primary()
                if primary is None or primary.election_id != from_uint128(request.election_id):
                    context.abort(grpc.StatusCode.PERMISSION_DENIED, "not primary")

    def SetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check("SetForwardingPipelineConfig", request, context, write=True)
        with self.lock:
            self.config = p4runtime_pb2.ForwardingPipelineConfig()
            self.config.CopyFrom(request.config)
            self.entities.clear()
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check("GetForwardingPipelineConfig", request, context, write=False)
        with self.lock:
            if self.config is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no pipeline")
            assert self.config is not None  # abort raised otherwise
            resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
            resp.config.cookie.CopyFrom(self.config.cookie)
            if request.response_type != request.COOKIE_ONLY:
                resp.config.p4info.CopyFrom(self.config.p4info)
            return resp

    def Write(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._check("Write", request, context, write=True)
        errors: list[tuple[int, str]] = []
        with self.lock:
            self.writes += 1
            for u in request.updates:
                if u.entity.WhichOneof("entity") in self.unimplemented:
                    errors.append((code_pb2.UNIMPLEMENTED,
                                   f"{u.entity.WhichOneof('entity')} writes are not supported"))
                    continue
                key = ents.entity_key(u.entity)
                exists = key in self.entities
                if u.type == Update.INSERT and exists:
                    errors.append((code_pb2.ALREADY_EXISTS, "entry exists"))
                elif u.type in (Update.MODIFY, Update.DELETE) and not exists \
                        and not ents.is_default_entry(u.entity):
                    errors.append((code_pb2.NOT_FOUND, "no such entry"))
                else:
                    if u.type == Update.DELETE:
                        del self.entities[key]
                    else:
                        self.entities[key] = u.entity
                    errors.append((code_pb2.OK, ""))
        if any(code != code_pb2.OK for code, _ in errors):
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="some updates failed")
            for code, message in errors:
                detail = any_pb2.Any()
                detail.Pack(p4runtime_pb2.Error(canonical_code=code, message=message))
                status.details.append(detail)
            context.set_trailing_metadata(((STATUS_DETAILS_KEY, status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, status.message)
        return p4runtime_pb2.WriteResponse()

    def Read(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._check("Read", request, context, write=False)
        with self.lock:
            stored = list(self.entities.values())
        for req in request.entities:
            if req.WhichOneof("entity") in self.unimplemented:
                context.abort(grpc.StatusCode.UNIMPLEMENTED,
                              f"{req.WhichOneof('entity')} reads are not supported")
        out = [e for req in request.entities for e in stored if _read_matches(req, e)]
        yield p4runtime_pb2.ReadResponse(entities=out)

    def Capabilities(self, request: Any, context: grpc.ServicerContext) -> Any:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.4.1")


def _read_matches(req: Any, e: Any) -> bool:
    """Whether a Read request entity (a wildcard of a kind, a table, default entries or a
    PRE entry type) asks for the stored entity ``e``."""
    kind = req.WhichOneof("entity")
    if e.WhichOneof("entity") != kind:
        return False
    if kind == "table_entry":
        if req.table_entry.table_id and req.table_entry.table_id != e.table_entry.table_id:
            return False
        return bool(req.table_entry.is_default_action == e.table_entry.is_default_action)
    if kind == "packet_replication_engine_entry":
        want = req.packet_replication_engine_entry.WhichOneof("type")
        return not want or bool(e.packet_replication_engine_entry.WhichOneof("type") == want)
    return True


SERVER_THREAD_PREFIX = "fake-p4runtime-server"


class FakeP4RuntimeServer:
    """A P4Runtime server on 127.0.0.1 with a free port; use as a context manager."""

    def __init__(self, device_id: int = 0) -> None:
        self.servicer = _Servicer(device_id)
        # Named, so a test of the client's threads can tell the server's pool apart: the pool
        # starts a thread when a call arrives before the last call's thread has told the pool
        # it is idle (that thread sends its answer first), which a loaded machine makes likely.
        self.pool = futures.ThreadPoolExecutor(max_workers=16,
                                               thread_name_prefix=SERVER_THREAD_PREFIX)
        self._server = grpc.server(self.pool)
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    def start(self) -> FakeP4RuntimeServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=0).wait(2.0)

    def __enter__(self) -> FakeP4RuntimeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def entities(self) -> list[p4runtime_pb2.Entity]:
        with self.servicer.lock:
            return list(self.servicer.entities.values())


# --------------------------------------------------------------- real switch processes
class SwitchStartError(RuntimeError):
    """A ``softswitch run`` process exited or did not report ready in time."""


def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SwitchProcess:
    """One built-in switch process (``python -m softswitch run --no-p4``) for tests: the
    controller pushes the program. ``interfaces`` maps port numbers to network interfaces;
    the process's output goes to ``log_path`` (never to a pipe nobody reads)."""

    name: str
    device_id: int
    port: int
    interfaces: dict[int, str] = field(default_factory=dict)
    log_path: Path | None = None
    start_timeout_s: float = 60.0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "softswitch", "run", "--no-p4", "--device-id",
                str(self.device_id), "--grpc-server-addr", self.address]
        for number, intf in sorted(self.interfaces.items()):
            argv += ["-i", f"{number}@{intf}"]
        return argv

    def start(self) -> None:
        """Start and wait for the ``softswitch ready`` line; raises SwitchStartError."""
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix=f"softswitch-{self.name}-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        with self.log_path.open("ab") as log_file:
            offset = log_file.tell()
            self.proc = subprocess.Popen(self.argv(), cwd=REPO_ROOT, stdout=log_file,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            text = self.log_path.read_bytes()[offset:].decode(errors="replace")
            if "softswitch ready" in text:
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                if self.proc.poll() is None:  # its threads' stacks into its log
                    stackdump.request_dump(self.proc.pid)

                    def log_size(path: Path = self.log_path) -> int:
                        return path.stat().st_size

                    stackdump.wait_quiet(log_size)
                    text = self.log_path.read_bytes()[offset:].decode(errors="replace")
                self.stop()
                raise SwitchStartError(f"switch {self.name} did not start: {text.strip()[-2000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the process (a crash: no clean shutdown)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None


def compile_program(program: Path, outdir: Path) -> tuple[Path, Path]:
    """P4Info and device config of ``program``, written by ``python -m softswitch compile``
    (a subprocess: the controller does not import the target)."""
    outdir.mkdir(parents=True, exist_ok=True)
    p4info = outdir / f"{program.stem}.p4info.txtpb"
    config = outdir / f"{program.stem}.device.json"
    proc = subprocess.run([sys.executable, "-m", "softswitch", "compile", "--p4info", str(p4info),
                           "--device-config", str(config), str(program)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SwitchStartError(f"cannot compile {program}: {proc.stderr.strip()}")
    return p4info, config
