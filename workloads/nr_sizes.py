"""Payload sizes of the NetReduce aggregation packets (``NR_ELEMS``), in one place.

``p4src/netreduce.p4`` is built with ``NR_ELEMS`` signed 32-bit elements per packet
(``p4src/include/nr_elems.p4``): a multiple of 4 from 4 to 256. RoCE's path MTU bounds the
payload of every packet to 1024 bytes; a message's first packet carries the 16-byte
aggregation tag in that payload as well, so 252 elements is the most that keeps *every*
packet within the MTU (:data:`MTU_ELEMS`, the default of the builds that ``make run``, the
experiment matrix and the benchmarks make). 256 elements fill the MTU exactly on all but the
first packet of a message, which is 16 bytes over (the testbed's emulated NICs and 1500-byte
veths accept it; docs/protocol.md section 8).
"""

from __future__ import annotations

#: RoCE path MTU: payload bytes per packet (after BTH and RETH, before the ICRC).
PATH_MTU = 1024
#: The aggregation tag's size (docs/protocol.md section 2.1).
TAG_BYTES = 16
#: Bytes per element (int<32>).
ELEM_BYTES = 4
#: The largest E the program supports.
MAX_ELEMS = 256
#: The largest E with which the tag and the elements of every packet fit the path MTU.
MTU_ELEMS = (PATH_MTU - TAG_BYTES) // ELEM_BYTES // 4 * 4
#: NR_ELEMS of p4src/netreduce.p4 as written (small: fast unit tests on the Python target).
PROGRAM_ELEMS = 32


def elems_error(elems: object) -> str | None:
    """Why ``elems`` is not a NR_ELEMS the program can be built with, or None."""
    if not isinstance(elems, int) or isinstance(elems, bool):
        return f"elems must be an integer, not {elems!r}"
    if not 4 <= elems <= MAX_ELEMS or elems % 4:
        return f"elems (NR_ELEMS) must be a multiple of 4 from 4 to {MAX_ELEMS}, not {elems}"
    return None


def check_elems(elems: object) -> int:
    """``elems`` when valid, else ValueError naming the field and the value."""
    why = elems_error(elems)
    if why is not None:
        raise ValueError(why)
    return elems  # type: ignore[return-value]


def first_packet_payload(elems: int) -> int:
    """Payload bytes of a message's first packet: tag plus ``elems`` elements."""
    return TAG_BYTES + ELEM_BYTES * elems
