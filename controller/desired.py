"""The entities each switch should hold, derived from the topology and the controller state.

Nothing here talks to a switch: given the topology, the recorded jobs, routes and faults,
these functions return ``p4.v1.Entity`` lists (through the control-block classes of
``controller.netreduce``), the same every time for the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterable

from p4.v1 import p4runtime_pb2

from controller import entities as ents
from controller import netreduce as nr
from controller.jobs import JobPlan
from controller.schema import P4Schema
from controller.topology import SwitchInfo, Topology

ECMP_GROUP = 1  # every leaf uses one ECMP group: all spines


def route_entities(topo: Topology, switch: SwitchInfo, schema: P4Schema) -> list[p4runtime_pb2.Entity]:
    """IPv4 routes of one switch.

    Leaf: a /32 per attached host; every other leaf's subnet through the spines (ECMP
    when there are several). Spine: every leaf's subnet (or its hosts' /32s when they share
    no subnet) out of the port to that leaf."""
    fwd = nr.Ipv4Forwarding(schema)
    out: list[p4runtime_pb2.Entity] = []
    spines = [s for s in topo.spines() if any(p.peer == s.name for p in switch.ports)]
    if switch.role == "spine":
        for leaf in topo.leaves():
            if not any(p.peer == leaf.name for p in switch.ports):
                continue
            down = switch.port_to(leaf.name)
            dmac = leaf.port_to(switch.name).mac
            for prefix in _prefixes(topo, leaf.name):
                out.append(ents.entity(fwd.route(prefix, down.mac, dmac, down.port)))
        return out
    for host in topo.hosts_of(switch.name):
        port = switch.port(host.switch_port)
        out.append(ents.entity(fwd.route(f"{host.ip}/32", port.mac, host.mac, port.port)))
    if not spines:
        return out
    uplinks = [(switch.port_to(s.name), s.port_to(switch.name).mac) for s in spines]
    for leaf in topo.leaves():
        if leaf.name == switch.name:
            continue
        for prefix in _prefixes(topo, leaf.name):
            if len(uplinks) == 1:
                up, dmac = uplinks[0]
                out.append(ents.entity(fwd.route(prefix, up.mac, dmac, up.port)))
            else:
                out.append(ents.entity(fwd.ecmp_route(prefix, ECMP_GROUP, len(uplinks))))
    if len(uplinks) > 1:
        for member, (up, dmac) in enumerate(uplinks):
            out.append(ents.entity(fwd.ecmp_member(ECMP_GROUP, member, up.mac, dmac, up.port)))
    return out


def _prefixes(topo: Topology, leaf: str) -> list[str]:
    subnet = topo.subnet_of(leaf)
    if subnet is not None:
        return [str(subnet)]
    return [f"{h.ip}/32" for h in topo.hosts_of(leaf)]


def job_entities(plan: JobPlan, topo: Topology, switch: SwitchInfo,
                 schema: P4Schema) -> list[p4runtime_pb2.Entity]:
    """Everything a job needs on one switch (docs/protocol.md section 5)."""
    part = plan.parts.get(switch.name)
    if part is None:
        return []
    ing, eg = nr.AggregationIngress(schema), nr.AggregationEgress(schema)
    job = plan.job_id
    role = nr.Role.ROOT if part.role == "root" else nr.Role.LEAF
    out = [ents.entity(ing.job(job, part.slot_base, part.slot_count, part.expected, part.members,
                               plan.credits, role, part.mcast_grp, part.upstream_port))]
    replicas: list[tuple[int, int]] = []
    me = nr.switch_ip(switch.device_id)
    if part.children:  # a spine: one rank per child leaf
        for pos, child in enumerate(part.children):
            leaf = topo.switch(child)
            down = switch.port_to(child)
            leaf_ip = nr.switch_ip(leaf.device_id)
            out.append(ents.entity(ing.conn(leaf_ip, me, nr.link_qpn(job, pos, down=False), job,
                                            part.conns[f"child{pos}"], pos, down.port,
                                            down.port, True)))
            out.append(ents.entity(eg.rewrite(job, pos, True, down.mac, leaf.port_to(switch.name).mac,
                                              me, leaf_ip, nr.link_sport(job),
                                              nr.link_qpn(job, pos, down=True))))
            replicas.append((down.port, pos))
    else:  # a leaf: its workers, in a ring
        for w in plan.workers:
            if w.switch != switch.name:
                continue
            peer = plan.worker(w.peer)
            port = switch.port(peer.switch_port)
            conn = part.conns[f"w{w.rank}"]
            out.append(ents.entity(ing.conn(w.ip, peer.ip, peer.recv_qpn, job, conn, w.position,
                                            port.port, switch.port(w.switch_port).port, False)))
            out.append(ents.entity(eg.rewrite(job, w.position, False, port.mac, peer.mac, w.ip,
                                              peer.ip, w.sport, peer.recv_qpn, conn)))
            replicas.append((port.port, w.position))
        if part.parent is not None:
            parent = topo.switch(part.parent)
            pos = parent_position(plan, switch.name)
            up = switch.port_to(parent.name)
            parent_ip = nr.switch_ip(parent.device_id)
            out.append(ents.entity(ing.conn(parent_ip, me, nr.link_qpn(job, pos, down=True), job,
                                            part.conns["parent"], nr.Limit.RANK_PARENT, up.port,
                                            up.port, True)))
            out.append(ents.entity(eg.rewrite(job, nr.Limit.RANK_PARENT, True, up.mac,
                                              parent.port_to(switch.name).mac, me, parent_ip,
                                              nr.link_sport(job), nr.link_qpn(job, pos, down=False))))
    out.append(ents.multicast_group(part.mcast_grp, replicas))
    return out


def parent_position(plan: JobPlan, leaf: str) -> int:
    """The bitmap position of ``leaf`` at the job's spine."""
    assert plan.spine is not None
    return plan.parts[plan.spine].children.index(leaf)


def fault_entities(faults: Iterable[dict], switch: SwitchInfo,
                   schema: P4Schema) -> list[p4runtime_pb2.Entity]:
    loss = nr.PortLoss(schema)
    reorder = nr.PortReorder(schema)
    out = []
    for f in faults:
        if f["switch"] != switch.name:
            continue
        for direction in ("in", "out"):
            if f["direction"] in (direction, "both"):
                if f.get("threshold"):
                    out.append(ents.entity(loss.lossy(direction, f["port"], f["threshold"])))
                if f.get("reorder_threshold"):
                    out.append(ents.entity(reorder.reorder(
                        direction, f["port"], f["reorder_threshold"],
                        f.get("max_hold", nr.Limit.REORDER_MAX_HOLD))))
    return out
