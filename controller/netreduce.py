"""Everything the controller knows about ``p4src/netreduce.p4``, in one place.

The P4 constants are mirrored as ``IntEnum``s; each control block of the program that the
controller configures is one class that owns its tables, actions and counters by full P4Info
name and turns controller-level facts into table entries. When the program changes, this is
the only module to edit (docs/protocol.md section 5 is the contract).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.schema import P4Schema, SchemaError


class Role(enum.IntEnum):
    """``NR_ROLE_*``: what a switch does for a job."""

    ROOT = 0
    LEAF = 1


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
    """Compile-time sizes of the default build (the P4Info gives the real ones)."""

    SLOTS = 1024
    JOBS = 64
    CONNS = 1024
    BIND = 4  # message bindings per connection: credits may not exceed it
    MAX_RANKS = 32
    RANK_PARENT = 255
    DROP_REASONS = 32
    LOSS_ALWAYS = 65536  # PortLoss threshold meaning "drop everything"
    REORDER_MAX_HOLD = 8  # PortReorder default: a held packet is overtaken by at most 8


ROCE_V2_PORT = 4791


@dataclass(frozen=True)
class Sizes:
    """The sizes a compiled program really has (read from its P4Info)."""

    slots: int
    jobs: int
    conns: int
    bind: int = Limit.BIND
    max_ranks: int = Limit.MAX_RANKS


def program_sizes(schema: P4Schema) -> Sizes:
    """NR_SLOTS, NR_JOBS and NR_CONNS as compiled, from register and counter sizes."""
    def size(kind: str, name: str, default: int, divide: int = 1) -> int:
        try:
            obj = schema.register(name) if kind == "register" else schema.counter(name)
        except SchemaError:
            return default
        return obj.size // divide if obj.size else default

    return Sizes(
        slots=size("register", AggregationIngress.SLOT_JOB, Limit.SLOTS, 2),
        jobs=size("counter", AggregationIngress.CONTRIBUTIONS, Limit.JOBS),
        conns=size("register", AggregationIngress.CONN_STARTED, Limit.CONNS),
    )


def is_netreduce(schema: P4Schema) -> bool:
    """True when the P4Info looks like netreduce.p4 (has the job table)."""
    return schema.has_table(AggregationIngress.JOB_TABLE)


# --------------------------------------------------------------- QPs and addresses
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


def switch_ip(device_id: int) -> str:
    """The address a switch uses on its inter-switch aggregation packets (never routed)."""
    return f"10.255.{(device_id >> 8) & 0xFF}.{device_id & 0xFF}"


def link_sport(job: int) -> int:
    return 0xB000 | (job & 0xFFF)


# ---------------------------------------------------------------- control blocks
class AggregationIngress:
    """``SwitchIngress.agg``: which connections belong to which job, and the job's slots."""

    CONN_TABLE = "SwitchIngress.agg.conn_table"
    JOB_TABLE = "SwitchIngress.agg.job_table"
    CONTRIBUTIONS = "SwitchIngress.agg.contributions"
    DUPLICATES = "SwitchIngress.agg.duplicates"
    COMPLETIONS = "SwitchIngress.agg.completions"
    JOB_DROPS = "SwitchIngress.agg.job_drops"
    SLOT_JOB = "SwitchIngress.agg.slot_job"
    CONN_STARTED = "SwitchIngress.agg.conn_started"
    JOB_COUNTERS = (CONTRIBUTIONS, DUPLICATES, COMPLETIONS)

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema

    def job(self, job: int, slot_base: int, slot_count: int, expected: int, members: int,
            credits: int, role: Role, mcast_grp: int, upstream_port: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.JOB_TABLE, {"meta.nr.job": job}, "SwitchIngress.agg.set_job",
            {"slot_base": slot_base, "slot_count": slot_count, "expected": expected,
             "members": members, "credits": credits, "role": int(role),
             "mcast_grp": mcast_grp, "upstream_port": upstream_port},
        )

    def conn(self, src_ip: str, dst_ip: str, dqpn: int, job: int, conn: int, rank: int,
             result_port: int, in_port: int, fabric: bool) -> p4runtime_pb2.TableEntry:
        """A connection: ``in_port`` is the only port its packets may arrive on and
        ``fabric`` marks a link between switches (docs/protocol.md section 4.1)."""
        return self.schema.table_entry(
            self.CONN_TABLE,
            {"hdr.ipv4.srcAddr": src_ip, "hdr.ipv4.dstAddr": dst_ip, "hdr.bth.dqpn": dqpn},
            "SwitchIngress.agg.set_conn",
            {"job": job, "conn": conn, "rank": rank, "result_port": result_port,
             "in_port": in_port, "fabric": int(fabric)},
        )


class AggregationEgress:
    """``SwitchEgress.agg``: how results and partials are rewritten per receiver."""

    RESULT_REWRITE = "SwitchEgress.agg.result_rewrite"
    RESULTS_SENT = "SwitchEgress.agg.results_sent"
    PARTIALS_SENT = "SwitchEgress.agg.partials_sent"
    JOB_COUNTERS = (RESULTS_SENT, PARTIALS_SENT)

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema

    def rewrite(self, job: int, target: int, to_switch: bool, smac: str, dmac: str,
                sip: str, dip: str, sport: int, dqpn: int,
                conn: int = 0) -> p4runtime_pb2.TableEntry:
        """The rewrite of results for ``target``; a worker's also names its connection
        index ``conn``, whose bindings give the results' PSN and RETH."""
        action = "SwitchEgress.agg.to_switch" if to_switch else "SwitchEgress.agg.to_worker"
        params = {"smac": smac, "dmac": dmac, "sip": sip, "dip": dip, "sport": sport,
                  "dqpn": dqpn}
        if not to_switch:
            params["conn"] = conn
        return self.schema.table_entry(
            self.RESULT_REWRITE, {"meta.nr.job": job, "meta.nr.target": target}, action, params)


class Ipv4Forwarding:
    """``SwitchIngress.fwd``: LPM routes, optionally through an ECMP group."""

    IPV4_LPM = "SwitchIngress.fwd.ipv4_lpm"
    ECMP_NHOP = "SwitchIngress.fwd.ecmp_nhop"

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema

    def route(self, prefix: str, smac: str, dmac: str, port: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.IPV4_LPM, {"hdr.ipv4.dstAddr": prefix}, "SwitchIngress.fwd.set_nhop",
            {"smac": smac, "dmac": dmac, "port": port},
        )

    def ecmp_route(self, prefix: str, group: int, size: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.IPV4_LPM, {"hdr.ipv4.dstAddr": prefix}, "SwitchIngress.fwd.set_ecmp",
            {"group": group, "group_size": size},
        )

    def ecmp_member(self, group: int, member: int, smac: str, dmac: str,
                    port: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.ECMP_NHOP, {"meta.fwd.ecmp_group": group, "meta.fwd.ecmp_member": member},
            "SwitchIngress.fwd.set_nhop", {"smac": smac, "dmac": dmac, "port": port},
        )


class PortLoss:
    """``SwitchIngress.loss`` and ``SwitchEgress.loss``: injected per-port loss."""

    INGRESS = "SwitchIngress.loss.port_loss"
    EGRESS = "SwitchEgress.loss.port_loss"

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema

    def lossy(self, direction: str, port: int, threshold: int) -> p4runtime_pb2.TableEntry:
        table = self.INGRESS if direction == "in" else self.EGRESS
        action = table.rsplit(".", 1)[0] + ".lossy"
        return self.schema.table_entry(table, {"port": port}, action, {"threshold": threshold})


class PortReorder:
    """``SwitchIngress.reorder`` and ``SwitchEgress.reorder``: injected reordering."""

    INGRESS = "SwitchIngress.reorder.port_reorder"
    EGRESS = "SwitchEgress.reorder.port_reorder"

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema

    def reorder(self, direction: str, port: int, threshold: int,
                max_hold: int = Limit.REORDER_MAX_HOLD) -> p4runtime_pb2.TableEntry:
        table = self.INGRESS if direction == "in" else self.EGRESS
        action = table.rsplit(".", 1)[0] + ".reorder"
        return self.schema.table_entry(table, {"port": port}, action,
                                       {"threshold": threshold, "max_hold": max_hold})


class SwitchCounters:
    """Counters of ``SwitchIngress``/``SwitchEgress`` themselves."""

    PORT_RX = "SwitchIngress.port_rx"
    PORT_TX = "SwitchEgress.port_tx"
    INGRESS_DROPS = "SwitchIngress.drops"
    EGRESS_DROPS = "SwitchEgress.drops"


def loss_threshold(probability: float, what: str = "loss") -> int:
    """PortLoss/PortReorder threshold (out of 65536) for a probability in [0, 1]."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"{what} probability {probability} outside 0..1")
    return round(probability * Limit.LOSS_ALWAYS)
