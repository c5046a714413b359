"""Scapy layers for the testbed's NetReduce aggregation protocol.

The formats are those of ``p4src/netreduce.p4`` (constants from the contract,
:mod:`protocol.netreduce`) and are specified in ``docs/protocol.md``:
a RoCE v2 RDMA WRITE whose first packet carries, after the RETH, a 16-byte aggregation tag
(:class:`NRTag`), and whose every packet carries ``elems`` signed 32-bit fixed-point values
(:class:`NRData`).  ``scapy.contrib.roce`` supplies the BTH (including its ICRC trailer);
this module adds the RETH, the tag and the payload and binds them so that captured pcaps
dissect.  Importing the module is what installs the bindings.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from scapy.contrib.roce import BTH
from scapy.fields import (
    ByteField,
    FieldListField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from protocol.netreduce import (
    FLAG_OVERFLOW,
    FLAG_RESULT,
    FLAG_SWITCH,
    FLAG_VERSION,
    ICRC_BYTES,
    NR_MAGIC,
    PROGRAM_ELEMS,
    RC_WRITE_FIRST,
    RC_WRITE_LAST,
    RC_WRITE_MIDDLE,
    RC_WRITE_ONLY,
    RESV7_OVERFLOW,
    RETH_BYTES,
    ROCE_V2_PORT,
    TAG_BYTES,
    Flag,
)

__all__ = [
    "DEFAULT_ELEMS", "FLAG_OVERFLOW", "FLAG_RESULT", "FLAG_SWITCH", "FLAG_VERSION", "NR_MAGIC",
    "RC_WRITE_FIRST", "RC_WRITE_LAST", "RC_WRITE_MIDDLE", "RC_WRITE_ONLY", "RESV7_OVERFLOW",
    "RETH", "ROCE_V2_PORT", "NRData", "NRTag", "packet_opcode", "pad_elems", "split_message",
    "worker_packet",
]

DEFAULT_ELEMS = PROGRAM_ELEMS  # NR_ELEMS of p4src/netreduce.p4 unless redefined
RETH_LEN = RETH_BYTES
TAG_LEN = TAG_BYTES
ICRC_LEN = ICRC_BYTES
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)


class RETH(Packet):
    """RDMA Extended Transport Header (16 bytes), on WRITE First and WRITE Only."""

    name = "RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dlen", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """A payload that starts with the tag's magic is an aggregation tag."""
        if len(payload) >= TAG_LEN and payload[:2] == struct.pack("!H", NR_MAGIC):
            return NRTag
        return Raw


class NRTag(Packet):
    """The aggregation tag (16 bytes) that follows the RETH of a message's first packet."""

    name = "NRTag"
    fields_desc = [
        XShortField("magic", NR_MAGIC),
        ShortField("job", 0),
        ShortField("msg", 0),
        ShortField("slot", 0),
        ShortField("npkts", 1),
        ShortField("pkt_idx", 0),
        ByteField("rank", 0),
        FlagsField("flags", 0, 8, [f.name or "" for f in Flag]),
        ShortField("window", 0),  # worker: messages in flight; result: job credits
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return NRData


class NRData(Packet):
    """The payload of an aggregation packet: signed 32-bit fixed-point elements."""

    name = "NRData"
    fields_desc = [
        FieldListField(
            "elems",
            [],
            SignedIntField("e", 0),
            length_from=lambda pkt: pkt._elems_len,
        ),
    ]

    _elems_len = 0

    def do_dissect(self, s: bytes) -> bytes:
        """Take whole 32-bit words only; a trailing fragment stays as payload."""
        self._elems_len = len(s) - len(s) % 4
        return super().do_dissect(s)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


bind_layers(BTH, RETH, opcode=RC_WRITE_FIRST)
bind_layers(BTH, RETH, opcode=RC_WRITE_ONLY)
bind_layers(BTH, NRData, opcode=RC_WRITE_MIDDLE)
bind_layers(BTH, NRData, opcode=RC_WRITE_LAST)


def pad_elems(values: Sequence[int], elems: int = DEFAULT_ELEMS) -> list[int]:
    """``values`` zero-padded to a whole packet (workers pad a message's last packet)."""
    if len(values) > elems:
        raise ValueError(f"{len(values)} values do not fit in one packet of {elems}")
    for v in values:
        if not INT32_MIN <= v <= INT32_MAX:
            raise ValueError(f"value {v} is not a signed 32-bit integer")
    return list(values) + [0] * (elems - len(values))


def split_message(values: Sequence[int], elems: int = DEFAULT_ELEMS) -> list[list[int]]:
    """The per-packet element lists of a message carrying ``values`` (last one padded)."""
    if not values:
        raise ValueError("a message carries at least one value")
    return [pad_elems(values[i : i + elems], elems) for i in range(0, len(values), elems)]


def packet_opcode(pkt_idx: int, npkts: int) -> int:
    """The RDMA WRITE opcode of packet ``pkt_idx`` of an ``npkts``-packet message."""
    if not 0 <= pkt_idx < npkts:
        raise ValueError(f"packet index {pkt_idx} outside a {npkts}-packet message")
    first, last = pkt_idx == 0, pkt_idx == npkts - 1
    if first and last:
        return RC_WRITE_ONLY
    if first:
        return RC_WRITE_FIRST
    return RC_WRITE_LAST if last else RC_WRITE_MIDDLE


def worker_packet(
    *,
    src_mac: str,
    dst_mac: str,
    src_ip: str,
    dst_ip: str,
    sport: int,
    dqpn: int,
    psn: int,
    pkt_idx: int,
    npkts: int,
    elems: Sequence[int],
    job: int = 0,
    msg: int = 0,
    slot: int = 0,
    version: int = 0,
    va: int = 0,
    rkey: int = 0,
    dma_len: int | None = None,
    rank: int = 0,
    flags: int = 0,
    icrc: int | None = 0,
    resv7: int = 0,
    window: int = 0,
) -> Ether:
    """One packet of a worker's tagged RDMA WRITE message, as docs/protocol.md specifies.

    Packet 0 carries RETH and tag; the others only the elements.  ``icrc=None`` lets scapy
    compute a real ICRC; the default 0 matches what the switch writes on its own packets.
    ``resv7=RESV7_OVERFLOW`` marks a saturated result packet, as the switch does.
    ``window`` is the tag's last field: the credits a worker uses, or on a result the job's
    credits the switch advertises.
    """
    op = packet_opcode(pkt_idx, npkts)
    bth = BTH(opcode=op, dqpn=dqpn, psn=psn & 0xFFFFFF, ackreq=int(pkt_idx == npkts - 1),
              resv7=resv7)
    bth.icrc = icrc
    data = NRData(elems=list(elems))
    if pkt_idx == 0:
        if dma_len is None:
            dma_len = TAG_LEN + 4 * len(elems) * npkts
        tag = NRTag(
            job=job, msg=msg, slot=slot, npkts=npkts, pkt_idx=0, rank=rank,
            flags=flags | (FLAG_VERSION if version else 0), window=window,
        )
        payload = bth / RETH(va=va, rkey=rkey, dlen=dma_len) / tag / data
    else:
        payload = bth / data
    return (
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=src_ip, dst=dst_ip, flags="DF", id=0, ttl=64)
        / UDP(sport=sport, dport=ROCE_V2_PORT, chksum=0)
        / payload
    )
