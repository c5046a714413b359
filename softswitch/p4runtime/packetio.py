"""PacketOut/PacketIn <-> frames with the @controller_header prepended."""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from softswitch.engine.externs import pack_fields
from softswitch.p4runtime.codec import decode, encode, unpack_fields
from softswitch.p4runtime.schema import P4InfoById
from softswitch.p4runtime.status import invalid

PACKET_OUT = "packet_out"
PACKET_IN = "packet_in"


def packet_out_frame(schema: P4InfoById, msg: p4runtime_pb2.PacketOut) -> bytes:
    """The frame to inject at the CPU port: packet_out header (if the program has one) +
    payload. Every metadata field must be given exactly once."""
    header = schema.controller_headers.get(PACKET_OUT)
    if header is None:
        if len(msg.metadata):
            raise invalid("the program has no packet_out controller header; metadata not allowed")
        return msg.payload
    given: dict[int, bytes] = {}
    for m in msg.metadata:
        if m.metadata_id in given:
            raise invalid(f"packet_out metadata id {m.metadata_id} given twice")
        given[m.metadata_id] = m.value
    values: list[tuple[int, int]] = []
    known = {f.id for f in header.fields}
    unknown = sorted(set(given) - known)
    if unknown:
        raise invalid(f"packet_out has no metadata with ids {unknown}")
    for f in header.fields:
        if f.id not in given:
            raise invalid(f"packet_out metadata {f.name!r} (id {f.id}) is missing")
        values.append(
            (decode(given[f.id], f.bitwidth, f"packet_out metadata {f.name!r}"), f.bitwidth)
        )
    return pack_fields(values) + msg.payload


def packet_in_message(schema: P4InfoById, frame: bytes) -> p4runtime_pb2.PacketIn | None:
    """PacketIn for a frame sent to the CPU port: the packet_in header parsed off the front;
    None if the frame is shorter than that header."""
    header = schema.controller_headers.get(PACKET_IN)
    msg = p4runtime_pb2.PacketIn()
    if header is None:
        msg.payload = frame
        return msg
    n = header.byte_len
    if len(frame) < n:
        return None
    for f, value in zip(header.fields, unpack_fields(frame, header.widths), strict=True):
        msg.metadata.add(metadata_id=f.id, value=encode(value))
    msg.payload = frame[n:]
    return msg
