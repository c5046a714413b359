"""The P4Runtime v1 gRPC service of the built-in switch.

The service owns the P4Runtime view of the device (the committed :class:`PipelineState`,
arbitration, digest list ids) and reaches the data plane only through the small
:class:`Device` interface that ``softswitch.switch`` implements: one lock shared with the
packet loop, a way to swap the pipeline, and a way to inject a frame at a port.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any, Protocol, TypeAlias

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from softswitch.device_config import load_device_config
from softswitch.p4info import build_p4info
from softswitch.p4runtime.arbitration import PrimaryElection, Session
from softswitch.p4runtime.entities import PipelineState, carry_state
from softswitch.p4runtime.packetio import packet_in_message, packet_out_frame
from softswitch.p4runtime.schema import check_p4info_matches
from softswitch.p4runtime.status import (
    StatusError,
    abort_batch,
    canonical,
    invalid,
    not_found,
)
from softswitch.pipeline import Pipeline

log = logging.getLogger(__name__)

API_VERSION = "1.4.1"
READ_CHUNK = 1000
FwdReq: TypeAlias = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetReq: TypeAlias = p4runtime_pb2.GetForwardingPipelineConfigRequest

# device config bytes -> (engine pipeline, P4Info built from the same program)
PipelineLoader = Callable[[bytes], tuple[Any, p4info_pb2.P4Info]]


class Device(Protocol):
    """What the P4Runtime service needs from the switch process."""

    lock: Any  # threading.Lock/RLock shared with the packet loop
    cpu_port: int | None

    def install_pipeline(self, pipeline: Any | None) -> None:
        """Swap the running pipeline (called with ``lock`` held)."""

    def inject(self, port: int, frame: bytes) -> None:
        """Run ``frame`` through the pipeline as received on ``port`` and transmit the
        results (takes ``lock`` itself)."""


def default_loader(
    device_config: bytes, trace: bool = False, **tm: Any
) -> tuple[Any, p4info_pb2.P4Info]:
    """Compile a device config (or plain P4 source) into a pipeline and its P4Info
    (``trace``: the instrumented pipeline that traces every packet; ``tm``: the
    traffic-manager options of ``Pipeline``)."""
    program = load_device_config(device_config)
    return Pipeline.from_program(program, trace=trace, **tm), build_p4info(program)


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    """P4Runtime for one device. Every invalid request gets a precise status; none can
    stop the server."""

    def __init__(
        self,
        device: Device,
        device_id: int,
        loader: PipelineLoader = default_loader,
        initial: PipelineState | None = None,
    ) -> None:
        self.device = device
        self.device_id = device_id
        self.loader = loader
        self.arbitration = PrimaryElection(device_id)
        self.state: PipelineState | None = initial
        self._saved: PipelineState | None = None
        self._list_ids = itertools.count(1)
        self._config_lock = threading.Lock()
        self.packet_ins_dropped = 0
        self.digest_lists_sent = 0

    # ============================================================ data plane side
    def on_cpu_frame(self, frame: bytes) -> None:
        """A frame the pipeline sent to the CPU port (called by the packet loop, lock held)."""
        state = self.state
        primary = self.arbitration.primary
        if state is None or primary is None:
            self.packet_ins_dropped += 1
            return
        msg = packet_in_message(state.schema, frame)
        if msg is None:
            self.packet_ins_dropped += 1
            return
        primary.send(p4runtime_pb2.StreamMessageResponse(packet=msg))

    def on_digests(self, digests: list[tuple[str, tuple[int, ...]]]) -> None:
        """Digests drained from the pipeline (lock held): one DigestList per digest id."""
        state = self.state
        primary = self.arbitration.primary
        if state is None or primary is None or not state.digest_configs:
            return
        for lst in state.digest_lists(digests, lambda: next(self._list_ids)):
            primary.send(p4runtime_pb2.StreamMessageResponse(digest=lst))
            self.digest_lists_sent += 1

    # ================================================================= helpers
    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise StatusError(
                grpc.StatusCode.NOT_FOUND,
                f"device id {device_id} does not match this switch ({self.device_id})",
            )

    @staticmethod
    def _check_role(role: str) -> None:
        if role:  # the specification's code for a role the device does not have
            raise not_found(f"role {role!r} does not exist: this switch has only the default role")

    def _check_primary(self, request: Any) -> None:
        if not request.HasField("election_id") or not self.arbitration.is_primary_election(
            request.election_id
        ):
            raise StatusError(
                grpc.StatusCode.PERMISSION_DENIED,
                "only the primary client may write; arbitrate on StreamChannel with the "
                "highest election id and use it in the request",
            )

    def _require_state(self) -> PipelineState:
        """The state Read and Write address: a config saved by VERIFY_AND_SAVE (the
        specification has later requests refer to it) or else the committed one."""
        state = self._saved or self.state
        if state is None:
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config has been set"
            )
        return state

    # ===================================================================== Write
    def Write(self, request: p4runtime_pb2.WriteRequest, context: grpc.ServicerContext) -> Any:
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            self._check_primary(request)
            state = self._require_state()
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise StatusError(
                    grpc.StatusCode.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported"
                )
        except StatusError as err:
            context.abort(err.code, err.message)
        errors: list[StatusError | None] = []
        with self.device.lock:
            for i, update in enumerate(request.updates):
                try:
                    state.write(update)
                    errors.append(None)
                except StatusError as err:
                    errors.append(err)
                except Exception as exc:  # an engine bug must not kill the server
                    log.exception("update %d failed inside the engine", i)
                    errors.append(StatusError(grpc.StatusCode.INTERNAL, f"internal error: {exc}"))
        if any(e is not None for e in errors):
            abort_batch(context, errors)
        return p4runtime_pb2.WriteResponse()

    # ====================================================================== Read
    def Read(
        self, request: p4runtime_pb2.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[Any]:
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            state = self._require_state()
            results: list[p4runtime_pb2.Entity] = []
            with self.device.lock:
                for entity in request.entities:
                    results.extend(state.read(entity))
        except StatusError as err:
            context.abort(err.code, err.message)
        except Exception as exc:
            log.exception("read failed inside the engine")
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {exc}")
        for start in range(0, max(len(results), 1), READ_CHUNK):
            yield p4runtime_pb2.ReadResponse(entities=results[start : start + READ_CHUNK])

    # ================================================================ pipelines
    def SetForwardingPipelineConfig(self, request: FwdReq, context: grpc.ServicerContext) -> Any:
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            self._check_primary(request)
            with self._config_lock:
                self._set_config(request)
        except StatusError as err:
            context.abort(err.code, err.message)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _set_config(self, request: FwdReq) -> None:
        """The five actions as the P4Runtime specification defines them (section
        SetForwardingPipelineConfig RPC); a failing request changes nothing."""
        action = request.action
        config = request.config
        if action == FwdReq.COMMIT:
            if request.HasField("config") and config.ByteSize():
                raise invalid(
                    "COMMIT takes no config: it realizes the one saved by VERIFY_AND_SAVE"
                )
            if self._saved is None:
                raise not_found("COMMIT without a saved config (send VERIFY_AND_SAVE first)")
            candidate, self._saved = self._saved, None
            self._install(candidate)
            return
        if action not in (FwdReq.VERIFY, FwdReq.VERIFY_AND_SAVE, FwdReq.VERIFY_AND_COMMIT,
                          FwdReq.RECONCILE_AND_COMMIT):
            raise invalid(
                f"SetForwardingPipelineConfig action {action} is not valid (UNSPECIFIED?)"
            )
        if not request.HasField("config"):
            raise invalid(f"{FwdReq.Action.Name(action)} needs a config")
        if action == FwdReq.RECONCILE_AND_COMMIT and self.state is not None:
            self._reconcile(config)
            return
        candidate = self._verify(config)
        if action == FwdReq.VERIFY:
            return
        if action == FwdReq.VERIFY_AND_SAVE:
            self._saved = candidate
            return
        self._saved = None
        self._install(candidate)

    def _reconcile(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        """Commit ``config`` keeping the forwarding state: the same pipeline only takes
        the new cookie; another one gets the current state replayed into it first, and
        if any of it does not fit the new program nothing changes (INVALID_ARGUMENT)."""
        cur = self._saved or self.state
        assert cur is not None
        same_program = not config.p4_device_config or config.p4_device_config == cur.device_config
        cookie = config.cookie.cookie if config.HasField("cookie") else None
        if same_program and config.p4info == cur.p4info:
            cur.cookie = cookie
            if cur is not self.state:
                self._install(cur)
            self._saved = None
            log.info("RECONCILE_AND_COMMIT: same pipeline, state kept")
            return
        candidate = self._verify(config)
        with self.device.lock:
            carry_state(cur, candidate)
        self._saved = None
        self._install(candidate)
        log.info("RECONCILE_AND_COMMIT: new pipeline with the previous forwarding state")

    def _verify(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> PipelineState:
        if not config.HasField("p4info"):
            raise invalid("ForwardingPipelineConfig has no p4info")
        device_config = config.p4_device_config
        if not device_config:
            if self.state is None:
                raise invalid("p4_device_config is empty and no program is loaded")
            device_config = self.state.device_config
        try:
            pipeline, built = self.loader(device_config)
        except StatusError:
            raise
        except Exception as exc:  # P4Error, ValueError, UnsupportedError ...
            raise invalid(f"cannot load p4_device_config: {exc}") from None
        check_p4info_matches(config.p4info, built)
        cookie = config.cookie.cookie if config.HasField("cookie") else None
        return PipelineState(pipeline, config.p4info, device_config, cookie)

    def _install(self, candidate: PipelineState) -> None:
        with self.device.lock:
            self.device.install_pipeline(candidate.pipeline)
            self.state = candidate
        log.info(
            "forwarding pipeline installed: %d tables, %d actions",
            len(candidate.p4info.tables),
            len(candidate.p4info.actions),
        )

    def GetForwardingPipelineConfig(self, request: GetReq, context: grpc.ServicerContext) -> Any:
        try:
            self._check_device(request.device_id)
            rt = request.response_type
            if rt not in GetReq.ResponseType.values():
                raise invalid(f"response_type {rt} is not valid")
        except StatusError as err:
            context.abort(err.code, err.message)
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        state = self.state
        if state is None:
            return resp  # no config yet: the config field stays unset (specification)
        resp.config.SetInParent()  # set even when only an absent cookie was asked for
        if state.cookie is not None:
            resp.config.cookie.cookie = state.cookie
        if rt in (GetReq.ALL, GetReq.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(state.p4info)
        if rt in (GetReq.ALL, GetReq.DEVICE_CONFIG_AND_COOKIE):
            resp.config.p4_device_config = state.device_config
        return resp

    def Capabilities(self, request: Any, context: grpc.ServicerContext) -> Any:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ============================================================ StreamChannel
    def StreamChannel(
        self, request_iterator: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        session = Session(peer=context.peer())
        context.add_callback(lambda: session.outbox.put(None))
        reader = threading.Thread(
            target=self._stream_reader, args=(session, request_iterator), daemon=True,
            name=f"p4rt-stream-{session.sid}",
        )
        reader.start()
        try:
            while True:
                item = session.outbox.get()
                if item is None:
                    break
                if isinstance(item, StatusError):
                    context.abort(item.code, item.message)
                yield item
        finally:
            self.arbitration.remove(session)

    def _stream_reader(self, session: Session, requests: Iterator[Any]) -> None:
        try:
            for req in requests:
                kind = req.WhichOneof("update")
                try:
                    if kind == "arbitration":
                        self.arbitration.update(session, req.arbitration)
                    elif kind == "packet":
                        self._packet_out(session, req.packet)
                    elif kind == "digest_ack":
                        self._digest_ack(session, req.digest_ack)
                    else:
                        raise StatusError(
                            grpc.StatusCode.UNIMPLEMENTED,
                            f"stream message {kind!r} is not supported",
                        )
                except StatusError as err:
                    if kind == "arbitration":
                        session.outbox.put(err)  # closes the stream with this status
                        return
                    session.send(self._stream_error(err, req))
                except Exception as exc:  # an engine failure must not end the stream
                    log.exception("stream message %s failed", kind)
                    failure = StatusError(grpc.StatusCode.INTERNAL, f"internal error: {exc}")
                    session.send(self._stream_error(failure, req))
        except grpc.RpcError:
            pass  # the client went away
        except Exception:
            log.exception("stream reader failed")
        finally:
            session.outbox.put(None)

    @staticmethod
    def _stream_error(err: StatusError, req: Any) -> p4runtime_pb2.StreamMessageResponse:
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.error.canonical_code = canonical(err.code)
        msg.error.message = err.message
        if req.HasField("packet"):
            msg.error.packet_out.packet_out.CopyFrom(req.packet)
        elif req.HasField("digest_ack"):
            msg.error.digest_list_ack.digest_list_ack.CopyFrom(req.digest_ack)
        return msg

    def _packet_out(self, session: Session, packet: p4runtime_pb2.PacketOut) -> None:
        if not session.arbitrated:
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION, "arbitrate before sending packets"
            )
        if session is not self.arbitration.primary:
            raise StatusError(
                grpc.StatusCode.PERMISSION_DENIED, "only the primary client may send packets"
            )
        state = self._require_state()
        cpu_port = self.device.cpu_port
        if cpu_port is None:
            raise StatusError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "the switch has no CPU port (start it with --cpu-port)",
            )
        frame = packet_out_frame(state.schema, packet)
        self.device.inject(cpu_port, frame)

    def _digest_ack(self, session: Session, ack: p4runtime_pb2.DigestListAck) -> None:
        state = self._require_state()
        state.schema.digest(ack.digest_id)


def start_server(
    service: P4RuntimeService, address: str, max_workers: int = 32
) -> tuple[grpc.Server, int]:
    """Start a gRPC server for ``service`` on ``address`` (``HOST:PORT``; port 0 picks a free
    one). Returns the server and the bound port; raises OSError if it cannot bind."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"),
        options=[
            ("grpc.max_receive_message_length", 256 * 1024 * 1024),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
    )
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(service, server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {address}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    return server, port
