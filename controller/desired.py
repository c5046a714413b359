"""The entities each switch should hold, derived from the topology and the controller state.

Nothing here talks to a switch: given the topology, the recorded jobs, routes and faults,
these functions return ``p4.v1.Entity`` lists (through the control-block classes of
``controller.netreduce``), the same every time for the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from p4.v1 import p4runtime_pb2

from controller import entities as ents
from controller import netreduce as nr
from controller.jobs import JobPlan
from controller.schema import ControlPlaneSchema
from controller.topology import FabricTopology, Port, SwitchInfo
from controller.trees import next_hops


def route_entities(
    topo: FabricTopology, switch: SwitchInfo, schema: ControlPlaneSchema
) -> list[p4runtime_pb2.Entity]:
    """IPv4 routes of one switch, over any graph of switches (``controller.trees.next_hops``).

    A /32 per attached host; every other leaf's subnet (or its hosts' /32s when they share
    no subnet) toward the neighbours on a shortest path to that leaf: one next hop, or an
    ECMP group when there are several. Groups are numbered from 1 per distinct set of
    neighbours, in the order the leaves are listed."""
    fwd = nr.Ipv4Forwarding(schema)
    out: list[p4runtime_pb2.Entity] = []
    for host in topo.hosts_of(switch.name):
        port = switch.port(host.switch_port)
        out.append(ents.entity(fwd.route(f"{host.ip}/32", port.mac, host.mac, port.port)))
    hops = next_hops(topo).get(switch.name, {})
    groups: dict[tuple[str, ...], int] = {}
    for leaf in topo.leaves():
        neighbours = tuple(hops.get(leaf.name, ()))
        if not neighbours:
            continue
        if len(neighbours) > 1 and neighbours not in groups:
            groups[neighbours] = len(groups) + 1
        for prefix in _prefixes(topo, leaf.name):
            if len(neighbours) == 1:
                up, dmac = _link(topo, switch, neighbours[0])
                out.append(ents.entity(fwd.route(prefix, up.mac, dmac, up.port)))
            else:
                out.append(ents.entity(fwd.ecmp_route(prefix, groups[neighbours],
                                                      len(neighbours))))
    for neighbours, group in groups.items():
        for member, name in enumerate(neighbours):
            up, dmac = _link(topo, switch, name)
            out.append(ents.entity(fwd.ecmp_member(group, member, up.mac, dmac, up.port)))
    return out


def _link(topo: FabricTopology, switch: SwitchInfo, neighbour: str) -> tuple[Port, str]:
    """The port of ``switch`` toward ``neighbour`` and the MAC at the other end."""
    return switch.port_to(neighbour), topo.switch(neighbour).port_to(switch.name).mac


def _prefixes(topo: FabricTopology, leaf: str) -> list[str]:
    subnet = topo.subnet_of(leaf)
    if subnet is not None:
        return [str(subnet)]
    return [f"{h.ip}/32" for h in topo.hosts_of(leaf)]


def job_entities(plan: JobPlan, topo: FabricTopology, switch: SwitchInfo,
                 schema: ControlPlaneSchema) -> list[p4runtime_pb2.Entity]:
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
    for w in plan.workers:  # this switch's own workers, in a ring
        if w.switch != switch.name:
            continue
        peer = plan.worker(w.peer)
        port = switch.port(peer.switch_port)
        out.append(ents.entity(ing.conn(w.ip, peer.ip, peer.recv_qpn, job,
                                        part.conns[f"w{w.rank}"], w.position, port.port,
                                        switch.port(w.switch_port).port, False)))
        out.append(ents.entity(eg.rewrite(job, w.position, False, port.mac, peer.mac, w.ip,
                                          peer.ip, w.sport, peer.recv_qpn,
                                          part.conns[f"w{w.rank}"])))
        replicas.append((port.port, w.position))
    for i, child in enumerate(part.children):  # child switches: one rank each
        pos = part.child_base + i
        below = topo.switch(child)
        down = switch.port_to(child)
        child_ip = nr.switch_ip(below.device_id)
        out.append(ents.entity(ing.conn(child_ip, me, nr.link_qpn(job, pos, down=False), job,
                                        part.conns[f"child{pos}"], pos, down.port,
                                        down.port, True)))
        out.append(ents.entity(eg.rewrite(job, pos, True, down.mac, below.port_to(switch.name).mac,
                                          me, child_ip, nr.link_sport(job),
                                          nr.link_qpn(job, pos, down=True))))
        replicas.append((down.port, pos))
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


def parent_position(plan: JobPlan, child: str) -> int:
    """The bitmap position of switch ``child`` at its parent in the job's tree."""
    parent = plan.parts[plan.parts[child].parent or ""]
    return parent.child_base + parent.children.index(child)


def fault_entities(faults: Iterable[dict[str, Any]], switch: SwitchInfo,
                   schema: ControlPlaneSchema) -> list[p4runtime_pb2.Entity]:
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
