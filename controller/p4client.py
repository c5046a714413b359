"""Thin P4Runtime transport: one gRPC channel and StreamChannel per device.

Everything that can go wrong on the wire surfaces as one exception, :class:`P4RuntimeRequestError`,
which names the operation, the gRPC status code and, for Write batches, the per-update
``p4.v1.Error`` details the server packed into the ``grpc-status-details-bin`` trailer. The
client knows nothing about programs: it moves protobuf messages, keeps the arbitration state
of its stream (primary or backup) up to date and tells a listener when the stream breaks so
that the layer above can reconnect and reconcile.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import grpc

# grpc imports these inside insecure_channel() (and channel_ready_future()): imported at module
# load, so that a thread that opens a channel (the live view's reader, a controller's
# worker) imports nothing (threads importing at once can deadlock on the import locks)
import grpc._channel  # noqa: F401
import grpc._utilities  # noqa: F401
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.errors import ControllerError

log = logging.getLogger(__name__)

STATUS_DETAILS_KEY = "grpc-status-details-bin"
FwdReq = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetReq = p4runtime_pb2.GetForwardingPipelineConfigRequest
MAX_MESSAGE = 256 * 1024 * 1024


@dataclass(frozen=True)
class UpdateError:
    """Why one update of a Write batch failed (``index`` into the batch)."""

    index: int
    code: grpc.StatusCode
    message: str

    def __str__(self) -> str:
        return f"update {self.index}: {self.code.name}: {self.message}"


def _grpc_code(canonical: int) -> grpc.StatusCode:
    for code in grpc.StatusCode:
        if code.value[0] == canonical:
            return code
    return grpc.StatusCode.UNKNOWN


class P4RuntimeRequestError(ControllerError):
    """A P4Runtime request failed: ``operation``, ``code`` (grpc.StatusCode), ``message`` and,
    for Write, ``errors`` with one :class:`UpdateError` per failed update."""

    def __init__(
        self,
        operation: str,
        code: grpc.StatusCode,
        message: str,
        errors: tuple[UpdateError, ...] = (),
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.code = code
        self.message = message
        self.errors = errors

    def __str__(self) -> str:
        text = f"{self.operation} failed: {self.code.name}: {self.message}"
        if self.errors:
            text += "; " + "; ".join(str(e) for e in self.errors)
        return text

    @property
    def unreachable(self) -> bool:
        """True when the switch could not be reached at all."""
        return self.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

    def only(self, *codes: grpc.StatusCode) -> bool:
        """True when every failed update failed with one of ``codes``."""
        return bool(self.errors) and all(e.code in codes for e in self.errors)

    @classmethod
    def from_rpc(cls, operation: str, err: grpc.RpcError) -> P4RuntimeRequestError:
        """Decode a grpc.RpcError, including google.rpc.Status details of p4.v1.Error."""
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        message = err.details() if hasattr(err, "details") else str(err)
        errors: list[UpdateError] = []
        trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
        for datum in trailers or ():
            if datum.key != STATUS_DETAILS_KEY:
                continue
            status = status_pb2.Status.FromString(datum.value)
            for index, detail in enumerate(status.details):
                p4err = p4runtime_pb2.Error()
                if not detail.Unpack(p4err) or p4err.canonical_code == code_pb2.OK:
                    continue
                errors.append(UpdateError(index, _grpc_code(p4err.canonical_code), p4err.message))
        return cls(operation, code or grpc.StatusCode.UNKNOWN, message or "", tuple(errors))


@dataclass(frozen=True)
class ArbitrationAnswer:
    """The last arbitration answer on this client's stream."""

    primary: bool
    election_id: int  # the election id of the current primary (or highest), as the server says
    code: int  # google.rpc.Code of the answer: OK primary, ALREADY_EXISTS backup, NOT_FOUND none
    message: str = ""


@dataclass
class _Stream:
    """One StreamChannel call and the queue that feeds its requests."""

    outbox: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = field(
        default_factory=queue.Queue
    )
    call: object | None = None
    thread: threading.Thread | None = None
    closed: threading.Event = field(default_factory=threading.Event)

    def requests(self) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while True:
            item = self.outbox.get()
            if item is None:
                return
            yield item


def uint128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


def from_uint128(msg: p4runtime_pb2.Uint128) -> int:
    return (msg.high << 64) | msg.low


def wait_until_ready(channel: grpc.Channel, timeout_s: float) -> bool:
    """True once the P4Runtime server behind ``channel`` answers (a Capabilities call that
    waits for the connection; any answer, even an error, says it is there), False when it
    did not within ``timeout_s``. Not ``grpc.channel_ready_future``: the connectivity
    poller it starts kept running and held the channel's close() for up to 0.2 s, which
    every controller CLI command paid."""
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    try:
        stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=timeout_s,
                          wait_for_ready=True)
    except grpc.RpcError as err:
        code = err.code() if isinstance(err, grpc.Call) else None
        return code not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
    return True


class P4Client:
    """A P4Runtime client for one device: RPCs plus the arbitration stream.

    ``on_stream_down`` is called (from the stream thread) when an established stream ends
    for any reason other than :meth:`close`; ``on_arbitration`` on every arbitration answer.
    """

    def __init__(
        self,
        address: str,
        device_id: int,
        election_id: int,
        timeout_s: float = 10.0,
        on_stream_down: Callable[[P4RuntimeRequestError], None] | None = None,
        on_arbitration: Callable[[ArbitrationAnswer], None] | None = None,
    ) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.timeout_s = timeout_s
        self.on_stream_down = on_stream_down
        self.on_arbitration = on_arbitration
        self.packet_ins: queue.Queue[p4runtime_pb2.PacketIn] = queue.Queue()
        self.digests: queue.Queue[p4runtime_pb2.DigestList] = queue.Queue()
        self.stream_errors: queue.Queue[p4runtime_pb2.StreamError] = queue.Queue()
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._stream: _Stream | None = None
        self._cond = threading.Condition()
        self._arbitration: ArbitrationAnswer | None = None
        self._stream_error: P4RuntimeRequestError | None = None
        self._closing = False
        # connect and close one at a time: a switch's recovery thread and a serving
        # controller's resync connecting at once each opened a stream, the second replaced
        # the first without closing it, and that orphan kept the election id at the switch,
        # which then refused every later arbitration with it
        self._connecting = threading.RLock()

    # ------------------------------------------------------------------ state
    @property
    def arbitration(self) -> ArbitrationAnswer | None:
        with self._cond:
            return self._arbitration

    @property
    def is_primary(self) -> bool:
        arb = self.arbitration
        return arb is not None and arb.primary

    @property
    def connected(self) -> bool:
        stream = self._stream
        return stream is not None and not stream.closed.is_set()

    @property
    def has_channel(self) -> bool:
        """A channel is open (with or without a stream)."""
        return self._stub is not None

    # ---------------------------------------------------------------- connect
    def connect(self, timeout_s: float | None = None) -> ArbitrationAnswer:
        """Open the channel and the stream and arbitrate; returns the answer (primary or
        backup). Raises P4RuntimeRequestError (UNAVAILABLE when the switch cannot be reached)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        with self._connecting:
            self.close()
            self._closing = False
            self.open_channel(timeout)
            with self._cond:
                self._arbitration = None
                self._stream_error = None
            stream = _Stream()
            self._stream = stream
            stream.call = self._require_stub("StreamChannel").StreamChannel(stream.requests())
            stream.thread = threading.Thread(
                target=self._receive, args=(stream,), daemon=True,
                name=f"p4client-{self.address}-{self.device_id}",
            )
            stream.thread.start()
            return self.arbitrate(timeout)

    def open_channel(self, timeout_s: float | None = None) -> None:
        """Open only the channel: enough for Read and Capabilities, which need no stream or
        arbitration, so a read-only observer never competes with the controllers for primary.
        Raises P4RuntimeRequestError (UNAVAILABLE when the switch cannot be reached)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        channel = grpc.insecure_channel(
            self.address,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.max_send_message_length", MAX_MESSAGE),
            ],
        )
        if not wait_until_ready(channel, timeout):
            channel.close()
            raise P4RuntimeRequestError(
                "connect",
                grpc.StatusCode.UNAVAILABLE,
                f"switch at {self.address} (device {self.device_id}) did not answer in "
                f"{timeout:g} s",
            ) from None
        self._channel = channel
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    def arbitrate(self, timeout_s: float | None = None) -> ArbitrationAnswer:
        """Send a MasterArbitrationUpdate with our election id and wait for the answer."""
        stream = self._require_stream("arbitrate")
        timeout = self.timeout_s if timeout_s is None else timeout_s
        with self._cond:
            self._arbitration = None
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(uint128(self.election_id))
        stream.outbox.put(req)
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._arbitration is None and self._stream_error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise P4RuntimeRequestError(
                        "arbitrate", grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"no arbitration answer from {self.address} in {timeout:g} s",
                    )
                self._cond.wait(left)
            if self._arbitration is None:
                assert self._stream_error is not None
                err = self._stream_error
                raise P4RuntimeRequestError("arbitrate", err.code, err.message)
            return self._arbitration

    def connect_with_retry(self, deadline_s: float, first_delay_s: float = 0.1,
                           max_delay_s: float = 2.0) -> ArbitrationAnswer:
        """:meth:`connect` until it works or ``deadline_s`` seconds have passed, backing off
        exponentially; re-raises the last error when the deadline passes."""
        deadline = time.monotonic() + deadline_s
        delay = first_delay_s
        while True:
            left = deadline - time.monotonic()
            try:
                return self.connect(timeout_s=max(0.2, min(self.timeout_s, left)))
            except P4RuntimeRequestError as err:
                if not err.unreachable or time.monotonic() + delay > deadline:
                    raise
                log.info("%s: %s; retrying in %.1f s", self.address, err.message, delay)
            time.sleep(delay)
            delay = min(delay * 2, max_delay_s)

    def close(self) -> None:
        """End the stream and the channel; no on_stream_down callback for this."""
        with self._connecting:
            self._closing = True
            stream, self._stream = self._stream, None
            if stream is not None:
                stream.outbox.put(None)
                call = stream.call
                if call is not None and hasattr(call, "cancel"):
                    call.cancel()
                if stream.thread is not None and stream.thread is not threading.current_thread():
                    stream.thread.join(timeout=2.0)
            channel, self._channel = self._channel, None
            self._stub = None
            if channel is not None:
                channel.close()

    def __enter__(self) -> P4Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- stream
    def _receive(self, stream: _Stream) -> None:
        error = P4RuntimeRequestError("stream", grpc.StatusCode.UNAVAILABLE,
                                      "stream closed by the switch")
        try:
            for msg in stream.call:  # type: ignore[attr-defined]
                self._dispatch(msg)
        except grpc.RpcError as err:
            error = P4RuntimeRequestError.from_rpc("stream", err)
        finally:
            stream.closed.set()
            with self._cond:
                self._stream_error = error
                self._cond.notify_all()
            if not self._closing and error.code != grpc.StatusCode.CANCELLED:
                log.warning("%s: P4Runtime stream ended: %s", self.address, error.message)
                if self.on_stream_down is not None:
                    self.on_stream_down(error)

    def _dispatch(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        kind = msg.WhichOneof("update")
        if kind == "arbitration":
            arb = msg.arbitration
            answer = ArbitrationAnswer(
                primary=arb.status.code == code_pb2.OK,
                election_id=from_uint128(arb.election_id),
                code=arb.status.code,
                message=arb.status.message,
            )
            with self._cond:
                self._arbitration = answer
                self._cond.notify_all()
            log.debug("%s: arbitration %s", self.address, answer)
            if self.on_arbitration is not None:
                self.on_arbitration(answer)
        elif kind == "packet":
            self.packet_ins.put(msg.packet)
        elif kind == "digest":
            self.digests.put(msg.digest)
        elif kind == "error":
            log.warning("%s: stream error: %s", self.address, msg.error.message)
            self.stream_errors.put(msg.error)
        else:
            log.debug("%s: ignoring stream message %s", self.address, kind)

    def _require_stream(self, operation: str) -> _Stream:
        stream = self._stream
        if stream is None or stream.closed.is_set():
            raise P4RuntimeRequestError(operation, grpc.StatusCode.UNAVAILABLE,
                                 f"not connected to {self.address}")
        return stream

    def _require_stub(self, operation: str) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None:
            raise P4RuntimeRequestError(operation, grpc.StatusCode.UNAVAILABLE,
                                 f"not connected to {self.address}")
        return self._stub

    def packet_out(self, payload: bytes, metadata: Iterable[tuple[int, bytes]] = ()) -> None:
        """Send a PacketOut (metadata as (id, canonical bytes) pairs)."""
        stream = self._require_stream("packet_out")
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        for mid, value in metadata:
            req.packet.metadata.add(metadata_id=mid, value=value)
        stream.outbox.put(req)

    def ack_digest(self, digest_id: int, list_id: int) -> None:
        stream = self._require_stream("digest_ack")
        req = p4runtime_pb2.StreamMessageRequest()
        req.digest_ack.digest_id = digest_id
        req.digest_ack.list_id = list_id
        stream.outbox.put(req)

    # ------------------------------------------------------------------- RPCs
    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int = 0,
                     action: FwdReq.Action.ValueType = FwdReq.VERIFY_AND_COMMIT) -> None:
        """SetForwardingPipelineConfig."""
        stub = self._require_stub("SetForwardingPipelineConfig")
        req = FwdReq(device_id=self.device_id, action=action)
        req.election_id.CopyFrom(uint128(self.election_id))
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        try:
            stub.SetForwardingPipelineConfig(req, timeout=max(self.timeout_s, 60.0))
        except grpc.RpcError as err:
            raise P4RuntimeRequestError.from_rpc("SetForwardingPipelineConfig", err) from None

    def get_pipeline(
        self, response_type: GetReq.ResponseType.ValueType = GetReq.P4INFO_AND_COOKIE
    ) -> p4runtime_pb2.ForwardingPipelineConfig | None:
        """GetForwardingPipelineConfig; None when the device has no pipeline yet."""
        stub = self._require_stub("GetForwardingPipelineConfig")
        req = GetReq(device_id=self.device_id, response_type=response_type)
        try:
            resp = stub.GetForwardingPipelineConfig(req, timeout=self.timeout_s)
            # No pipeline yet: the config is unset (specification) or, on older servers,
            # the call fails with FAILED_PRECONDITION.
            return resp.config if resp.HasField("config") else None
        except grpc.RpcError as err:
            error = P4RuntimeRequestError.from_rpc("GetForwardingPipelineConfig", err)
            if error.code == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise error from None

    def write(self, updates: Iterable[p4runtime_pb2.Update]) -> None:
        """One Write batch (CONTINUE_ON_ERROR); raises P4RuntimeRequestError with per-update
        errors."""
        batch = list(updates)
        if not batch:
            return
        stub = self._require_stub("Write")
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id,
                                         atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
        req.election_id.CopyFrom(uint128(self.election_id))
        req.updates.extend(batch)
        try:
            stub.Write(req, timeout=self.timeout_s)
        except grpc.RpcError as err:
            raise P4RuntimeRequestError.from_rpc("Write", err) from None

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        """One Read request; wildcards as in the spec (id 0 = all)."""
        stub = self._require_stub("Read")
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out: list[p4runtime_pb2.Entity] = []
        try:
            for resp in stub.Read(req, timeout=self.timeout_s):
                out.extend(resp.entities)
        except grpc.RpcError as err:
            raise P4RuntimeRequestError.from_rpc("Read", err) from None
        return out

    def capabilities(self) -> str:
        """The server's P4Runtime API version."""
        stub = self._require_stub("Capabilities")
        try:
            resp: p4runtime_pb2.CapabilitiesResponse = stub.Capabilities(
                p4runtime_pb2.CapabilitiesRequest(), timeout=self.timeout_s)
            return resp.p4runtime_api_version
        except grpc.RpcError as err:
            raise P4RuntimeRequestError.from_rpc("Capabilities", err) from None
