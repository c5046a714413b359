"""P4Runtime errors and their encoding as gRPC status (with per-update details).

Handlers raise :class:`StatusError` with a canonical code; the server turns it into the
RPC's status, or for a Write batch into one ``p4.v1.Error`` per update packed into a
``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer (overall code UNKNOWN), as
the P4Runtime specification and PI do.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"


class StatusError(Exception):
    """A rejected request or update; ``code`` is a ``grpc.StatusCode``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


def status_code(name: str) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` for a canonical code name such as ``"NOT_FOUND"``."""
    try:
        return grpc.StatusCode[name]
    except KeyError:
        return grpc.StatusCode.UNKNOWN


def canonical(code: grpc.StatusCode) -> int:
    """The numeric google.rpc.Code of a gRPC status code."""
    return int(code.value[0])


def invalid(message: str) -> StatusError:
    return StatusError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> StatusError:
    return StatusError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> StatusError:
    return StatusError(grpc.StatusCode.UNIMPLEMENTED, message)


# A default gRPC client refuses response metadata over 8 KiB (``grpc.max_metadata_size``)
# and then reports RESOURCE_EXHAUSTED with no detail at all. The details trailer travels
# base64-encoded (4/3 larger) beside the status message and the other headers, so the
# serialized google.rpc.Status is kept under 4 KiB and each error message under 160 chars.
DETAILS_BUDGET = 4096
ERROR_MESSAGE_CHARS = 160
SUMMARY_FAILURES = 5


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def batch_status(
    errors: list[StatusError | None], budget: int = DETAILS_BUDGET
) -> status_pb2.Status:
    """A google.rpc.Status (code UNKNOWN) with one ``p4.v1.Error`` per update (OK for None),
    in update order, as the specification prescribes -- as many as fit ``budget`` bytes.
    When the batch is too large, the details stop after the first updates that fit and the
    message summarises the whole batch: failures per code and the first failures beyond."""
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    status = status_pb2.Status(code=code_pb2.UNKNOWN)
    size = 0
    for err in errors:
        p4err = p4runtime_pb2.Error()
        if err is None:
            p4err.canonical_code = code_pb2.OK
        else:
            p4err.canonical_code = canonical(err.code)
            p4err.message = _clip(err.message, ERROR_MESSAGE_CHARS)
        detail = any_pb2.Any()
        detail.Pack(p4err)
        item = detail.ByteSize() + 4  # field tag and length
        if size + item > budget:
            break
        size += item
        status.details.append(detail)
    shown = len(status.details)
    message = f"{len(failed)} of {len(errors)} updates failed"
    if shown < len(errors):
        counts: dict[str, int] = {}
        for _i, e in failed:
            counts[e.code.name] = counts.get(e.code.name, 0) + 1
        per_code = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
        beyond = [f"#{i} {e.code.name}" for i, e in failed if i >= shown][:SUMMARY_FAILURES]
        message += (
            f" ({per_code}); per-update details only for updates 0-{shown - 1}"
            f" (gRPC metadata limit)"
        )
        if beyond:
            message += "; first failures after them: " + ", ".join(beyond)
    status.message = message
    return status


def abort_batch(context: grpc.ServicerContext, errors: list[StatusError | None]) -> None:
    """Mark the RPC as failed with per-update errors (the caller then returns normally)."""
    status = batch_status(errors)
    context.set_trailing_metadata(((STATUS_DETAILS_KEY, status.SerializeToString()),))
    context.set_code(grpc.StatusCode.UNKNOWN)
    context.set_details(status.message)
