"""Build/dissect round trips of the NetReduce scapy layers (docs/protocol.md formats)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from workloads.netreduce_headers import (
    FLAG_OVERFLOW,
    FLAG_RESULT,
    FLAG_VERSION,
    NR_MAGIC,
    RC_WRITE_FIRST,
    RC_WRITE_LAST,
    RC_WRITE_MIDDLE,
    RC_WRITE_ONLY,
    RETH,
    NRData,
    NRTag,
    packet_opcode,
    pad_elems,
    split_message,
    worker_packet,
)

E = 32
ADDR: dict[str, Any] = dict(
    src_mac="02:00:00:00:00:01",
    dst_mac="02:00:00:00:00:02",
    src_ip="10.0.0.1",
    dst_ip="10.0.0.2",
    sport=49152,
    dqpn=0x123,
)


def test_tag_is_sixteen_bytes_in_documented_order() -> None:
    """The tag's bytes follow the layout table of docs/protocol.md."""
    raw = bytes(NRTag(job=0x0102, msg=0x0304, slot=0x0506, npkts=0x0708, pkt_idx=0x090A,
                      rank=0x0B, flags=FLAG_RESULT | FLAG_VERSION, window=0))
    assert raw == bytes.fromhex("4e52 0102 0304 0506 0708 090a 0b 05 0000".replace(" ", ""))


def test_reth_is_sixteen_bytes() -> None:
    """RETH packs VA, R_Key and DMA length big-endian."""
    raw = bytes(RETH(va=0x1122334455667788, rkey=0xAABBCCDD, dlen=272))
    assert raw == struct.pack("!QII", 0x1122334455667788, 0xAABBCCDD, 272)


def test_first_packet_round_trip() -> None:
    """A tagged first packet dissects back into BTH/RETH/NRTag/NRData with its ICRC."""
    elems = pad_elems([1, -2, 2**31 - 1, -(2**31)], E)
    pkt = worker_packet(**ADDR, psn=0xABCDEF, pkt_idx=0, npkts=3, elems=elems, job=5,
                        msg=9, slot=12, version=1, va=0x1000, rkey=0x77)
    raw = bytes(pkt)
    assert len(raw) == 14 + 20 + 8 + 12 + 16 + 16 + 4 * E + 4
    back = Ether(raw)
    assert back[UDP].len == 8 + 12 + 16 + 16 + 4 * E + 4
    assert back[BTH].opcode == RC_WRITE_FIRST and back[BTH].psn == 0xABCDEF
    assert back[BTH].dqpn == 0x123 and back[BTH].icrc == 0
    assert back[RETH].va == 0x1000 and back[RETH].rkey == 0x77
    assert back[RETH].dlen == 16 + 3 * 4 * E
    tag = back[NRTag]
    assert (tag.magic, tag.job, tag.msg, tag.slot, tag.npkts) == (NR_MAGIC, 5, 9, 12, 3)
    assert int(tag.flags) == FLAG_VERSION
    assert back[NRData].elems == elems
    assert bytes(back) == raw


def test_middle_packet_round_trip() -> None:
    """A plain middle packet has no RETH/tag and dissects into NRData."""
    elems = pad_elems(list(range(-5, 5)), E)
    raw = bytes(worker_packet(**ADDR, psn=7, pkt_idx=1, npkts=3, elems=elems))
    assert len(raw) == 14 + 20 + 8 + 12 + 4 * E + 4
    back = Ether(raw)
    assert back[BTH].opcode == RC_WRITE_MIDDLE
    assert RETH not in back and NRTag not in back
    assert back[NRData].elems == elems


def test_real_icrc_can_be_computed() -> None:
    """icrc=None makes scapy compute a non-zero ICRC over the packet."""
    raw = bytes(worker_packet(**ADDR, psn=1, pkt_idx=1, npkts=2, elems=pad_elems([1], E),
                              icrc=None))
    assert Ether(raw)[BTH].icrc != 0


def test_untagged_write_payload_stays_raw() -> None:
    """An ordinary RDMA WRITE First (no magic) keeps its payload as Raw."""
    pkt = (Ether() / IP() / UDP(dport=4791) / BTH(opcode=RC_WRITE_FIRST, icrc=0)
           / RETH(dlen=4) / Raw(b"\x00\x01" * 20))
    back = Ether(bytes(pkt))
    assert NRTag not in back and Raw in back


def test_overflow_flag_round_trip() -> None:
    """The overflow flag of a result tag survives build and dissection."""
    raw = bytes(NRTag(flags=FLAG_OVERFLOW | FLAG_RESULT))
    assert int(NRTag(raw).flags) == FLAG_OVERFLOW | FLAG_RESULT


def test_opcodes_by_position() -> None:
    """WRITE Only/First/Middle/Last follow the packet's place in the message."""
    assert packet_opcode(0, 1) == RC_WRITE_ONLY
    assert [packet_opcode(i, 3) for i in range(3)] == [
        RC_WRITE_FIRST, RC_WRITE_MIDDLE, RC_WRITE_LAST]


def test_split_message_pads_last_packet() -> None:
    """A message that is not a multiple of E is zero-padded in its last packet."""
    parts = split_message(list(range(1, 2 * E + 4)), E)
    assert len(parts) == 3 and parts[2][:3] == [2 * E + 1, 2 * E + 2, 2 * E + 3]
    assert parts[2][3:] == [0] * (E - 3)


def test_values_outside_int32_are_rejected() -> None:
    """Values that are not int32 raise a clear ValueError."""
    with pytest.raises(ValueError, match="signed 32-bit"):
        pad_elems([2**31], E)
