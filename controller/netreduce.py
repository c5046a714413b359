"""How the controller configures ``p4src/netreduce.p4``: table entries from controller facts.

The protocol's constants, limits, QP/port formulas and P4Info names are the contract in
:mod:`protocol.netreduce` (re-exported here for the controller's callers); each control block
the controller configures is one class that takes its names from the contract and turns
controller-level facts into table entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.errors import SchemaError
from controller.schema import ControlPlaneSchema
from protocol.netreduce import (
    PROGRAM_ELEMS,
    ROCE_V2_PORT,
    AggregationEgressNames,
    AggregationIngressNames,
    DropReason,
    Ipv4ForwardingNames,
    Limit,
    PortLossNames,
    PortReorderNames,
    Role,
    SwitchCounters,
    link_qpn,
    link_sport,
    switch_ip,
    worker_qpn,
    worker_sport,
)

__all__ = [
    "ROCE_V2_PORT", "AggregationEgress", "AggregationIngress", "DropReason", "Ipv4Forwarding",
    "Limit", "PortLoss", "PortReorder", "Role", "Sizes", "SwitchCounters", "is_netreduce",
    "link_qpn", "link_sport", "loss_threshold", "program_sizes", "switch_ip", "worker_qpn",
    "worker_sport",
]


@dataclass(frozen=True)
class Sizes:
    """The sizes a compiled program really has (read from its P4Info)."""

    slots: int
    jobs: int
    conns: int
    bind: int = Limit.BIND
    max_ranks: int = Limit.MAX_RANKS
    elems: int = PROGRAM_ELEMS  # NR_ELEMS: int32 per aggregation packet


def program_sizes(schema: ControlPlaneSchema) -> Sizes:
    """NR_SLOTS, NR_JOBS, NR_CONNS and NR_ELEMS as compiled, from register and counter
    sizes (``slot_sums`` holds NR_ELEMS cells per slot copy)."""
    def size(kind: str, name: str, default: int, divide: int = 1) -> int:
        try:
            obj = schema.register(name) if kind == "register" else schema.counter(name)
        except SchemaError:
            return default
        return obj.size // divide if obj.size else default

    copies = size("register", AggregationIngress.SLOT_JOB, 2 * Limit.SLOTS)
    return Sizes(
        elems=size("register", AggregationIngress.SLOT_SUMS, PROGRAM_ELEMS * copies, copies),
        slots=size("register", AggregationIngress.SLOT_JOB, Limit.SLOTS, 2),
        jobs=size("counter", AggregationIngress.CONTRIBUTIONS, Limit.JOBS),
        conns=size("register", AggregationIngress.CONN_STARTED, Limit.CONNS),
    )


def is_netreduce(schema: ControlPlaneSchema) -> bool:
    """True when the P4Info looks like netreduce.p4 (has the job table)."""
    return schema.has_table(AggregationIngress.JOB_TABLE)


# ---------------------------------------------------------------- control blocks
class AggregationIngress(AggregationIngressNames):
    """``SwitchIngress.agg``: which connections belong to which job, and the job's slots."""

    def __init__(self, schema: ControlPlaneSchema) -> None:
        self.schema = schema

    def job(
        self,
        job: int,
        slot_base: int,
        slot_count: int,
        expected: int,
        members: int,
        credits: int,
        role: Role,
        mcast_grp: int,
        upstream_port: int,
    ) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.JOB_TABLE, {"meta.nr.job": job}, self.SET_JOB,
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
            self.SET_CONN,
            {"job": job, "conn": conn, "rank": rank, "result_port": result_port,
             "in_port": in_port, "fabric": int(fabric)},
        )


class AggregationEgress(AggregationEgressNames):
    """``SwitchEgress.agg``: how results and partials are rewritten per receiver."""

    def __init__(self, schema: ControlPlaneSchema) -> None:
        self.schema = schema

    def rewrite(self, job: int, target: int, to_switch: bool, smac: str, dmac: str,
                sip: str, dip: str, sport: int, dqpn: int,
                conn: int = 0) -> p4runtime_pb2.TableEntry:
        """The rewrite of results for ``target``; a worker's also names its connection
        index ``conn``, whose bindings give the results' PSN and RETH."""
        action = self.TO_SWITCH if to_switch else self.TO_WORKER
        params = {"smac": smac, "dmac": dmac, "sip": sip, "dip": dip, "sport": sport,
                  "dqpn": dqpn}
        if not to_switch:
            params["conn"] = conn
        return self.schema.table_entry(
            self.RESULT_REWRITE, {"meta.nr.job": job, "meta.nr.target": target}, action, params)


class Ipv4Forwarding(Ipv4ForwardingNames):
    """``SwitchIngress.fwd``: LPM routes, optionally through an ECMP group."""

    def __init__(self, schema: ControlPlaneSchema) -> None:
        self.schema = schema

    def route(self, prefix: str, smac: str, dmac: str, port: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.IPV4_LPM, {"hdr.ipv4.dstAddr": prefix}, self.SET_NHOP,
            {"smac": smac, "dmac": dmac, "port": port},
        )

    def ecmp_route(self, prefix: str, group: int, size: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.IPV4_LPM, {"hdr.ipv4.dstAddr": prefix}, self.SET_ECMP,
            {"group": group, "group_size": size},
        )

    def ecmp_member(self, group: int, member: int, smac: str, dmac: str,
                    port: int) -> p4runtime_pb2.TableEntry:
        return self.schema.table_entry(
            self.ECMP_NHOP, {"meta.fwd.ecmp_group": group, "meta.fwd.ecmp_member": member},
            self.SET_NHOP, {"smac": smac, "dmac": dmac, "port": port},
        )


class PortLoss(PortLossNames):
    """``SwitchIngress.loss`` and ``SwitchEgress.loss``: injected per-port loss."""

    def __init__(self, schema: ControlPlaneSchema) -> None:
        self.schema = schema

    def lossy(self, direction: str, port: int, threshold: int) -> p4runtime_pb2.TableEntry:
        table = self.INGRESS if direction == "in" else self.EGRESS
        action = self.INGRESS_ACTION if direction == "in" else self.EGRESS_ACTION
        return self.schema.table_entry(table, {"port": port}, action, {"threshold": threshold})


class PortReorder(PortReorderNames):
    """``SwitchIngress.reorder`` and ``SwitchEgress.reorder``: injected reordering."""

    def __init__(self, schema: ControlPlaneSchema) -> None:
        self.schema = schema

    def reorder(self, direction: str, port: int, threshold: int,
                max_hold: int = Limit.REORDER_MAX_HOLD) -> p4runtime_pb2.TableEntry:
        table = self.INGRESS if direction == "in" else self.EGRESS
        action = self.INGRESS_ACTION if direction == "in" else self.EGRESS_ACTION
        return self.schema.table_entry(table, {"port": port}, action,
                                       {"threshold": threshold, "max_hold": max_hold})


def loss_threshold(probability: float, what: str = "loss") -> int:
    """PortLoss/PortReorder threshold (out of 65536) for a probability in [0, 1]."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"{what} probability {probability} outside 0..1")
    return round(probability * Limit.LOSS_ALWAYS)
