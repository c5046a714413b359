"""The NetReduce protocol contract, in one place.

Everything the Python side knows about ``p4src/netreduce.p4`` and its wire format lives here:
header layouts (field names and widths as ``p4src/include/nr_headers.p4`` declares them),
the constants and flags, the compile-time limits, the element-count (E) bounds, the QP
number and UDP source-port formulas, and the full P4Info names of the tables, actions,
counters and registers the control plane uses. The controller, the host agents, the
simulator's header sizes, the benchmarks and the tests import it; nothing else writes these
numbers down. ``tests/test_protocol_contract.py`` compiles the P4 program with the project's
own front end and fails when the two disagree, so change a constant here and in the P4
source together (docs/protocol.md documents both).
"""

from __future__ import annotations

import enum
import struct

# ------------------------------------------------------------------------- constants

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_ARP = 0x0806
IPPROTO_TCP = 6
IPPROTO_UDP = 17
#: UDP destination port of every RoCE v2 packet.
ROCE_V2_PORT = 4791

# BTH opcodes of the RC transport used here.
RC_WRITE_FIRST = 0x06
RC_WRITE_MIDDLE = 0x07
RC_WRITE_LAST = 0x08
RC_WRITE_ONLY = 0x0A

#: First two bytes of the aggregation tag ("NR").
NR_MAGIC = 0x4E52


class Flag(enum.IntFlag):
    """``NR_FLAG_*``: bits of the aggregation tag's ``flags`` byte."""

    VERSION = 0x01  # which of the slot's two copies
    OVERFLOW = 0x02  # some element saturated
    RESULT = 0x04  # a result (switch -> worker / parent -> child)
    SWITCH = 0x08  # inter-switch packet: tag on every packet
    PULL = 0x10  # inter-switch: send me the final result you hold (after a restart)
    TOTAL = 0x20  # inter-switch, up: the final result a child holds, not a partial


FLAG_VERSION = int(Flag.VERSION)
FLAG_OVERFLOW = int(Flag.OVERFLOW)
FLAG_RESULT = int(Flag.RESULT)
FLAG_SWITCH = int(Flag.SWITCH)
FLAG_PULL = int(Flag.PULL)
FLAG_TOTAL = int(Flag.TOTAL)

#: BTH ``resv7`` value on a result packet whose elements saturated.
RESV7_OVERFLOW = 0x01


class Role(enum.IntEnum):
    """``NR_ROLE_*``: what a switch does for a job."""

    ROOT = 0
    LEAF = 1


class Emit(enum.IntEnum):
    """``NR_EMIT_*``: what the ingress decided to transmit for an aggregation packet."""

    NONE = 0
    RESULT = 1
    UP = 2


class SlotFlag(enum.IntFlag):
    """``NR_SLOT_*``: bits of the slot flags register."""

    OVERFLOW = 0x01
    FINAL = 0x02


class DropReason(enum.IntEnum):
    """``DROP_*``: indices of the drop counters."""

    NONE = 0
    UNKNOWN_JOB = 1
    NON_MEMBER = 2
    MALFORMED = 3
    OUT_OF_RANGE = 4
    CREDIT = 5
    STALE = 6
    UNBOUND = 7
    NO_REWRITE = 8
    FAULT = 9
    ARP = 10
    NOT_IPV4 = 11
    TTL = 12
    NO_ROUTE = 13
    BAD_CHECKSUM = 14
    WRONG_PORT = 15
    FORGED_SWITCH = 16
    STALE_RESULT = 17
    REPEAT_RESULT = 18
    BAD_INDEX = 19


class Limit(enum.IntEnum):
    """Compile-time sizes of the default build (``NR_*`` macros; the P4Info gives a build's
    real ones) and the fault-injection constants."""

    SLOTS = 1024
    JOBS = 64
    CONNS = 1024
    BIND = 4  # message bindings per connection: credits may not exceed it
    MAX_RANKS = 32
    RANK_PARENT = 255
    DROP_REASONS = 32
    PORTS = 512
    RESEND_US = 10000
    LOSS_ALWAYS = 65536  # PortLoss threshold meaning "drop everything"
    REORDER_MAX_HOLD = 8  # PortReorder default: a held packet is overtaken by at most 8


# ------------------------------------------------------------------- header layouts

#: Field names and widths in bits, in wire order, as the P4 header types declare them.
HEADERS: dict[str, tuple[tuple[str, int], ...]] = {
    "ethernet_t": (("dstAddr", 48), ("srcAddr", 48), ("etherType", 16)),
    "ipv4_t": (("version", 4), ("ihl", 4), ("diffserv", 8), ("totalLen", 16),
               ("identification", 16), ("flags", 3), ("fragOffset", 13), ("ttl", 8),
               ("protocol", 8), ("hdrChecksum", 16), ("srcAddr", 32), ("dstAddr", 32)),
    "udp_t": (("srcPort", 16), ("dstPort", 16), ("length", 16), ("checksum", 16)),
    "bth_t": (("opcode", 8), ("se", 1), ("migreq", 1), ("padcnt", 2), ("tver", 4),
              ("pkey", 16), ("fecn", 1), ("becn", 1), ("resv6", 6), ("dqpn", 24),
              ("ackreq", 1), ("resv7", 7), ("psn", 24)),
    "reth_t": (("va", 64), ("rkey", 32), ("dmaLen", 32)),
    "nr_tag_t": (("magic", 16), ("job", 16), ("msg", 16), ("slot", 16), ("npkts", 16),
                 ("pktIdx", 16), ("rank", 8), ("flags", 8), ("window", 16)),
    "icrc_t": (("icrc", 32),),
}


def header_bytes(name: str) -> int:
    """The size in bytes of header type ``name`` (:data:`HEADERS`)."""
    return sum(width for _, width in HEADERS[name]) // 8


ETH_BYTES = header_bytes("ethernet_t")
IPV4_BYTES = header_bytes("ipv4_t")
UDP_BYTES = header_bytes("udp_t")
BTH_BYTES = header_bytes("bth_t")
RETH_BYTES = header_bytes("reth_t")
TAG_BYTES = header_bytes("nr_tag_t")
ICRC_BYTES = header_bytes("icrc_t")
#: Bytes per element (``int<32>``).
ELEM_BYTES = 4
#: Per-packet header bytes of every RoCE packet: Ethernet, IPv4, UDP, BTH and ICRC.
ROCE_HEADER_BYTES = ETH_BYTES + IPV4_BYTES + UDP_BYTES + BTH_BYTES + ICRC_BYTES
#: What a message's first packet (and every inter-switch packet) adds: RETH and the tag.
RETH_TAG_BYTES = RETH_BYTES + TAG_BYTES
#: RoCE ACK Extended Transport Header, and a whole ACK frame (Ethernet ... AETH, ICRC).
AETH_BYTES = 4
ROCE_ACK_BYTES = ROCE_HEADER_BYTES + AETH_BYTES
#: The tag as a struct: magic, job, msg, slot, npkts, pkt_idx, rank, flags, window.
TAG = struct.Struct("!HHHHHHBBH")

# Byte offsets in a worker's first packet (Ethernet, IPv4 without options, UDP, BTH, RETH, tag).
BTH_OFFSET = ETH_BYTES + IPV4_BYTES + UDP_BYTES
PSN_OFFSET = BTH_OFFSET + 9
RETH_OFFSET = BTH_OFFSET + BTH_BYTES
TAG_OFFSET = RETH_OFFSET + RETH_BYTES

# ------------------------------------------------------------- elements per packet (E)

#: RoCE path MTU: payload bytes per packet (after BTH and RETH, before the ICRC).
PATH_MTU = 1024
#: The smallest and largest E (``NR_ELEMS``) the program can be built with; E is a
#: multiple of :data:`ELEMS_STEP`.
MIN_ELEMS = 4
MAX_ELEMS = 256
ELEMS_STEP = 4
#: The largest E with which the tag and the elements of every packet fit the path MTU.
MTU_ELEMS = (PATH_MTU - TAG_BYTES) // ELEM_BYTES // ELEMS_STEP * ELEMS_STEP
#: NR_ELEMS of p4src/netreduce.p4 as written (nr_headers.p4's default): the full path MTU,
#: the program every run uses unless asked for another size.
PROGRAM_ELEMS = MTU_ELEMS


def elems_error(elems: object) -> str | None:
    """Why ``elems`` is not a NR_ELEMS the program can be built with, or None."""
    if not isinstance(elems, int) or isinstance(elems, bool):
        return f"elems must be an integer, not {elems!r}"
    if not MIN_ELEMS <= elems <= MAX_ELEMS or elems % ELEMS_STEP:
        return (f"elems (NR_ELEMS) must be a multiple of {ELEMS_STEP} from {MIN_ELEMS} "
                f"to {MAX_ELEMS}, not {elems}")
    return None


def check_elems(elems: object) -> int:
    """``elems`` when valid, else ValueError naming the field and the value."""
    why = elems_error(elems)
    if why is not None:
        raise ValueError(why)
    assert isinstance(elems, int)
    return elems


def first_packet_payload(elems: int) -> int:
    """Payload bytes of a message's first packet: tag plus ``elems`` elements."""
    return TAG_BYTES + ELEM_BYTES * elems


def udp_length(elems: int, tagged: bool) -> int:
    """``NR_UDP_LEN_TAGGED`` / ``NR_UDP_LEN_PLAIN``: the UDP length of an aggregation packet."""
    tag = RETH_TAG_BYTES if tagged else 0
    return UDP_BYTES + BTH_BYTES + tag + ELEM_BYTES * elems + ICRC_BYTES


# ---------------------------------------------------------------- QPs and addresses


def worker_qpn(job: int, rank: int, receiving: bool) -> int:
    """The QP number of a worker's end of a job connection (deterministic, 24 bits):
    the sending end of connection ``rank`` or the receiving end of the connection whose
    peer is ``rank``."""
    return ((job + 1) << 12) | (rank << 1) | int(receiving)


def worker_sport(job: int, rank: int) -> int:
    """The UDP source port a worker uses on its job connection."""
    return 0xC000 | ((job & 0x3F) << 8) | (rank & 0xFF)


def link_qpn(job: int, child: int, down: bool) -> int:
    """The QP number naming the leaf<->spine aggregation link of child ``child``."""
    return (0xD00000 if down else 0xC00000) | (job << 8) | child


def link_sport(job: int) -> int:
    """The UDP source port of a job's inter-switch aggregation packets."""
    return 0xB000 | (job & 0xFFF)


def switch_ip(device_id: int) -> str:
    """The address a switch uses on its inter-switch aggregation packets (never routed)."""
    return f"10.255.{(device_id >> 8) & 0xFF}.{device_id & 0xFF}"


# ------------------------------------------------------- control-plane (P4Info) names


class AggregationIngressNames:
    """``SwitchIngress.agg``: connection and job tables, per-job counters, slot registers."""

    CONN_TABLE = "SwitchIngress.agg.conn_table"
    JOB_TABLE = "SwitchIngress.agg.job_table"
    SET_CONN = "SwitchIngress.agg.set_conn"
    SET_JOB = "SwitchIngress.agg.set_job"
    CONTRIBUTIONS = "SwitchIngress.agg.contributions"
    DUPLICATES = "SwitchIngress.agg.duplicates"
    COMPLETIONS = "SwitchIngress.agg.completions"
    JOB_DROPS = "SwitchIngress.agg.job_drops"
    SLOT_JOB = "SwitchIngress.agg.slot_job"
    SLOT_SUMS = "SwitchIngress.agg.slot_sums"
    CONN_STARTED = "SwitchIngress.agg.conn_started"
    JOB_COUNTERS = (CONTRIBUTIONS, DUPLICATES, COMPLETIONS)


class AggregationEgressNames:
    """``SwitchEgress.agg``: the per-receiver rewrite of results and partials."""

    RESULT_REWRITE = "SwitchEgress.agg.result_rewrite"
    TO_SWITCH = "SwitchEgress.agg.to_switch"
    TO_WORKER = "SwitchEgress.agg.to_worker"
    RESULTS_SENT = "SwitchEgress.agg.results_sent"
    PARTIALS_SENT = "SwitchEgress.agg.partials_sent"
    PULLS_SENT = "SwitchEgress.agg.pulls_sent"
    JOB_COUNTERS = (RESULTS_SENT, PARTIALS_SENT, PULLS_SENT)


class Ipv4ForwardingNames:
    """``SwitchIngress.fwd``: LPM routes, optionally through an ECMP group."""

    IPV4_LPM = "SwitchIngress.fwd.ipv4_lpm"
    ECMP_NHOP = "SwitchIngress.fwd.ecmp_nhop"
    SET_NHOP = "SwitchIngress.fwd.set_nhop"
    SET_ECMP = "SwitchIngress.fwd.set_ecmp"


class PortLossNames:
    """``SwitchIngress.loss`` and ``SwitchEgress.loss``: injected per-port loss."""

    INGRESS = "SwitchIngress.loss.port_loss"
    EGRESS = "SwitchEgress.loss.port_loss"
    INGRESS_ACTION = "SwitchIngress.loss.lossy"
    EGRESS_ACTION = "SwitchEgress.loss.lossy"


class PortReorderNames:
    """``SwitchIngress.reorder`` and ``SwitchEgress.reorder``: injected reordering."""

    INGRESS = "SwitchIngress.reorder.port_reorder"
    EGRESS = "SwitchEgress.reorder.port_reorder"
    INGRESS_ACTION = "SwitchIngress.reorder.reorder"
    EGRESS_ACTION = "SwitchEgress.reorder.reorder"


class SwitchCounters:
    """Counters of ``SwitchIngress``/``SwitchEgress`` themselves."""

    PORT_RX = "SwitchIngress.port_rx"
    PORT_TX = "SwitchEgress.port_tx"
    INGRESS_DROPS = "SwitchIngress.drops"
    EGRESS_DROPS = "SwitchEgress.drops"


#: Every table's actions and their control-plane parameters, in declaration order.
ACTION_PARAMS: dict[str, tuple[str, ...]] = {
    AggregationIngressNames.SET_CONN: ("job", "conn", "rank", "result_port", "in_port",
                                       "fabric"),
    AggregationIngressNames.SET_JOB: ("slot_base", "slot_count", "expected", "members",
                                      "credits", "role", "mcast_grp", "upstream_port"),
    AggregationEgressNames.TO_SWITCH: ("smac", "dmac", "sip", "dip", "sport", "dqpn"),
    AggregationEgressNames.TO_WORKER: ("smac", "dmac", "sip", "dip", "sport", "dqpn", "conn"),
    Ipv4ForwardingNames.SET_NHOP: ("smac", "dmac", "port"),
    Ipv4ForwardingNames.SET_ECMP: ("group", "group_size"),
    PortLossNames.INGRESS_ACTION: ("threshold",),
    PortLossNames.EGRESS_ACTION: ("threshold",),
    PortReorderNames.INGRESS_ACTION: ("threshold", "max_hold"),
    PortReorderNames.EGRESS_ACTION: ("threshold", "max_hold"),
}

#: Every table and its key fields (P4Info match-field names), in declaration order.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    AggregationIngressNames.CONN_TABLE: ("hdr.ipv4.srcAddr", "hdr.ipv4.dstAddr",
                                         "hdr.bth.dqpn"),
    AggregationIngressNames.JOB_TABLE: ("meta.nr.job",),
    AggregationEgressNames.RESULT_REWRITE: ("meta.nr.job", "meta.nr.target"),
    Ipv4ForwardingNames.IPV4_LPM: ("hdr.ipv4.dstAddr",),
    Ipv4ForwardingNames.ECMP_NHOP: ("meta.fwd.ecmp_group", "meta.fwd.ecmp_member"),
    PortLossNames.INGRESS: ("port",),
    PortLossNames.EGRESS: ("port",),
    PortReorderNames.INGRESS: ("port",),
    PortReorderNames.EGRESS: ("port",),
}

#: Counters the control plane reads.
COUNTERS = (*AggregationIngressNames.JOB_COUNTERS, AggregationIngressNames.JOB_DROPS,
            *AggregationEgressNames.JOB_COUNTERS, SwitchCounters.PORT_RX,
            SwitchCounters.PORT_TX, SwitchCounters.INGRESS_DROPS, SwitchCounters.EGRESS_DROPS)
#: Registers the control plane reads (program sizes).
REGISTERS = (AggregationIngressNames.SLOT_JOB, AggregationIngressNames.CONN_STARTED)
