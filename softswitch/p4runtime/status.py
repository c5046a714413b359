"""P4Runtime errors and their encoding as gRPC status (with per-update details).

Handlers raise :class:`P4RuntimeError` with a canonical code; the server turns it into the
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


class P4RuntimeError(Exception):
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


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def batch_status(errors: list[P4RuntimeError | None]) -> status_pb2.Status:
    """A google.rpc.Status (code UNKNOWN) with one ``p4.v1.Error`` per update (OK for None)."""
    failed = sum(1 for e in errors if e is not None)
    status = status_pb2.Status(
        code=code_pb2.UNKNOWN,
        message=f"{failed} of {len(errors)} updates failed",
    )
    for err in errors:
        p4err = p4runtime_pb2.Error()
        if err is None:
            p4err.canonical_code = code_pb2.OK
        else:
            p4err.canonical_code = canonical(err.code)
            p4err.message = err.message
        detail = any_pb2.Any()
        detail.Pack(p4err)
        status.details.append(detail)
    return status


def abort_batch(context: grpc.ServicerContext, errors: list[P4RuntimeError | None]) -> None:
    """Mark the RPC as failed with per-update errors (the caller then returns normally)."""
    status = batch_status(errors)
    context.set_trailing_metadata(((STATUS_DETAILS_KEY, status.SerializeToString()),))
    context.set_code(grpc.StatusCode.UNKNOWN)
    context.set_details(status.message)
