"""Aggregation jobs: from a request (hosts, credits, slots) to a plan for every switch.

Planning is pure: :func:`plan_job` takes the topology, the jobs already placed and the
per-switch allocation state, and returns a :class:`JobPlan` or raises :class:`JobError`
naming the request field and value that cannot be satisfied. The plan records every
allocation (job id, spine, slot base and connection index per switch), so that the
entities derived from it are the same after a controller restart.

Connections follow docs/protocol.md: each worker has one RC connection to a peer, and the
controller pairs workers in a ring *inside each leaf*, so every connection's sender and
receiver sit behind the same leaf and results never cross the fabric as worker packets.
The ring alternates hosts (:func:`leaf_ring`): a connection between two workers of the
same host would be delivered by that host's kernel over ``lo`` and never reach the switch,
so a leaf whose workers cannot be arranged that way is refused. QP numbers and UDP source
ports are derived from (job, rank) (``controller.netreduce``); ``job show --json``
publishes them for the hosts.

Credits: the protocol (section 4.4) needs ``1 <= credits <= NR_BIND`` and ``credits x
msg_pkts <= slots`` (:func:`check_credits`); docs/controller.md explains how that is the
issue's "credits x workers <= slots" counted in packets and contribution cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from controller import netreduce as nr
from controller.errors import JobError, TreeError
from controller.topology import FabricTopology, HostInfo
from controller.trees import Tree, aggregation_tree


@dataclass(frozen=True)
class JobRequest:
    """What a user asks for."""

    name: str
    hosts: tuple[str, ...]
    credits: int = 2
    slots: int = 64
    msg_pkts: int | None = None  # packets per message; default slots // credits
    workers_per_host: int | None = None  # None: one worker per GPU of the host
    root: str | None = None  # the tree's root switch; None: chosen (controller.trees)


@dataclass(frozen=True)
class Worker:
    """One worker (GPU) and its job connection."""

    rank: int  # global rank in the job
    host: str
    gpu: int
    ip: str
    mac: str
    switch: str
    switch_port: int
    position: int  # bitmap position at its leaf
    peer: int  # rank of the receiver of this worker's connection
    send_qpn: int  # this worker's QP of its own connection
    recv_qpn: int  # this worker's QP receiving its ring predecessor's connection
    sport: int  # UDP source port of its connection


@dataclass
class SwitchPart:
    """What a job uses on one switch."""

    switch: str
    role: str  # "root" or "leaf"
    slot_base: int
    slot_count: int
    members: int
    expected: int
    mcast_grp: int
    upstream_port: int = 0
    parent: str | None = None
    children: list[str] = field(default_factory=list)  # child switches, by position
    conns: dict[str, int] = field(default_factory=dict)  # "w<rank>", "child<pos>", "parent"
    level: int = 0  # tree edges from the root (root 0)
    child_base: int = 0  # bitmap position of the first child: after the switch's own workers


@dataclass
class JobPlan:
    job_id: int
    name: str
    credits: int
    slots: int
    msg_pkts: int
    workers: list[Worker]
    parts: dict[str, SwitchPart]
    spine: str | None = None  # the root when the tree has more than one switch (kept name)
    root: str | None = None  # the tree's root switch
    # NR_ELEMS of the switches' program: the workers' packet size (None: a plan written
    # before plans carried it; workers then take theirs from --elems)
    elems: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobPlan:
        return cls(
            job_id=int(data["job_id"]), name=str(data["name"]), credits=int(data["credits"]),
            slots=int(data["slots"]), msg_pkts=int(data["msg_pkts"]),
            workers=[Worker(**w) for w in data["workers"]],
            parts={k: SwitchPart(**v) for k, v in data["parts"].items()},
            spine=data.get("spine"), root=data.get("root", data.get("spine")),
            elems=int(data["elems"]) if data.get("elems") is not None else None,
        )

    def worker(self, rank: int) -> Worker:
        return self.workers[rank]

    def hosts(self) -> list[str]:
        return list(dict.fromkeys(w.host for w in self.workers))


@dataclass
class SwitchAlloc:
    """Per-switch allocation state that must survive the controller (and be reset when
    the switch restarts, because its registers are then fresh)."""

    next_conn: int = 0
    retired_jobs: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _free_range(used: Iterable[tuple[int, int]], count: int, total: int) -> int | None:
    """First base where ``count`` slots fit between the used (base, count) ranges."""
    base = 0
    for start, length in sorted(used):
        if start - base >= count:
            return base
        base = max(base, start + length)
    return base if total - base >= count else None


def _largest_gap(used: Iterable[tuple[int, int]], total: int) -> int:
    base, best = 0, 0
    for start, length in sorted(used):
        best = max(best, start - base)
        base = max(base, start + length)
    return max(best, total - base)


def slot_ranges(jobs: Iterable[JobPlan], switch: str) -> list[tuple[int, int]]:
    return [(j.parts[switch].slot_base, j.parts[switch].slot_count)
            for j in jobs if switch in j.parts]


def check_credits(credits: int, msg_pkts: int, slots: int, sizes: nr.Sizes,
                  msg_pkts_given: bool = False) -> None:
    """The protocol's credit rule (docs/protocol.md section 4.4): at most ``NR_BIND``
    messages in flight per connection, and the ``credits`` messages in flight of one worker
    (each up to ``msg_pkts`` packets, one slot per packet, shared by all workers) fit in
    the job's slots. Raises :class:`JobError` naming the field and value."""
    if credits < 1:
        raise JobError("credits", f"{credits} must be at least 1")
    if credits > sizes.bind:
        raise JobError("credits", f"credits too high: {credits} > {sizes.bind} "
                                  f"(the switch remembers {sizes.bind} messages per connection)")
    if msg_pkts < 1:
        if msg_pkts_given:
            raise JobError("msg_pkts", f"{msg_pkts} must be at least 1")
        raise JobError("credits", f"credits too high: {credits} credits need at least "
                                  f"{credits} slots, the job has {slots}")
    if msg_pkts_given and msg_pkts > slots:
        raise JobError("msg_pkts", f"{msg_pkts} packets per message do not fit in the job's "
                                   f"{slots} slots")
    if credits * msg_pkts > slots:
        raise JobError("credits", f"credits too high: {credits} credits x {msg_pkts} packets "
                                  f"per message need {credits * msg_pkts} slots, the job has "
                                  f"{slots}")


def _check_request(req: JobRequest, sizes: nr.Sizes) -> int:
    if not req.name or not req.name.replace("-", "").replace("_", "").isalnum():
        raise JobError("name", f"{req.name!r} is not a valid job name (letters, digits, -, _)")
    if not req.hosts:
        raise JobError("hosts", "a job needs at least one host")
    dup = sorted({h for h in req.hosts if req.hosts.count(h) > 1})
    if dup:
        raise JobError("hosts", f"host {dup[0]!r} given twice")
    if not 1 <= req.slots <= sizes.slots:
        raise JobError("slots", f"{req.slots} outside 1..{sizes.slots}")
    given = req.msg_pkts is not None
    msg_pkts = req.msg_pkts if req.msg_pkts is not None else req.slots // max(1, req.credits)
    check_credits(req.credits, msg_pkts, req.slots, sizes, msg_pkts_given=given)
    if req.workers_per_host is not None and req.workers_per_host < 1:
        raise JobError("workers_per_host", f"{req.workers_per_host} must be at least 1")
    return msg_pkts


def _alternates(order: Sequence[tuple[HostInfo, int]]) -> bool:
    """True when no two neighbours of the cyclic ``order`` are on the same host."""
    n = len(order)
    return n >= 2 and all(order[i][0].name != order[(i + 1) % n][0].name for i in range(n))


def leaf_ring(local: Sequence[tuple[HostInfo, int]], leaf: str) -> list[int]:
    """The ring of a leaf's workers (indices into ``local``, a list of (host, gpu) in rank
    order) in which every worker's successor is on another host.

    Tried in order: round robin over the hosts by GPU index (``(gpu, host)`` order); else
    hosts with the most workers first, dealt to every other ring position (possible exactly
    when no host has more than half of the leaf's workers). Raises :class:`JobError` when
    no such ring exists."""
    n = len(local)
    counts: dict[str, int] = {}
    for host, _gpu in local:
        counts[host.name] = counts.get(host.name, 0) + 1
    if n == 1:
        host = local[0][0]
        raise JobError(
            "hosts",
            f"only one worker behind switch {leaf} ({host.name}): its "
            "connection would go to itself over the host's loopback and never "
            f"reach the switch; put at least two hosts behind {leaf} in the job",
        )
    if len(counts) == 1:
        raise JobError("hosts", f"all {n} workers behind switch {leaf} are on host "
                                f"{local[0][0].name}: connections inside one host go over its "
                                "loopback and never reach the switch; put at least two hosts "
                                f"behind {leaf} in the job, with --workers-per-host 1 "
                                "(hierarchical mode sums a host's GPUs locally)")
    by_gpu = sorted(range(n), key=lambda i: (local[i][1], i))
    if _alternates([local[i] for i in by_gpu]):
        return by_gpu
    busiest = max(counts.values())
    if 2 * busiest > n:
        name = next(h for h, c in counts.items() if c == busiest)
        raise JobError("hosts", f"host {name} has {busiest} of the {n} workers behind switch "
                                f"{leaf}: every connection must go to another host, so no host may "
                                "have more than half of a switch's workers; use "
                                "--workers-per-host 1 "
                                "(hierarchical mode sums a host's GPUs locally) or add hosts")
    first_seen = {h: k for k, h in enumerate(counts)}
    deal = sorted(range(n), key=lambda i: (-counts[local[i][0].name],
                                           first_seen[local[i][0].name], i))
    ring = [0] * n
    slots = list(range(0, n, 2)) + list(range(1, n, 2))
    for pos, i in zip(slots, deal, strict=True):
        ring[pos] = i
    assert _alternates([local[i] for i in ring])
    return ring


def _job_id(jobs: Sequence[JobPlan], allocs: Mapping[str, SwitchAlloc], switches: Iterable[str],
            sizes: nr.Sizes) -> int:
    taken = {j.job_id for j in jobs}
    for name in switches:
        alloc = allocs.get(name)
        if alloc is not None:
            taken.update(alloc.retired_jobs)
    for jid in range(sizes.jobs):
        if jid not in taken:
            return jid
    raise JobError("job", f"no free job id: all {sizes.jobs} ids are in use or were used since "
                          "the switches started (restart the switches to reuse them)")


def plan_job(req: JobRequest, topo: FabricTopology, jobs: Sequence[JobPlan],
             allocs: Mapping[str, SwitchAlloc], sizes: nr.Sizes) -> JobPlan:
    """Place a job: workers, tree, slots, connections. ``allocs`` is not modified; the
    caller commits the plan with :func:`commit_allocations`."""
    msg_pkts = _check_request(req, sizes)
    if any(j.name == req.name for j in jobs):
        raise JobError("name", f"a job named {req.name!r} already exists")
    by_leaf = _workers_by_leaf(req, topo, sizes)
    leaves = sorted(by_leaf, key=lambda s: topo.switch(s).device_id)
    rings = {leaf: leaf_ring(by_leaf[leaf], leaf) for leaf in leaves}
    tree = _tree(req, topo, jobs, leaves, sizes)
    members = {name: len(by_leaf.get(name, ())) + len(tree.children[name]) for name in tree.parent}
    for name, count in members.items():
        if count > sizes.max_ranks:
            raise JobError("hosts", f"switch {name} would aggregate {count} members (workers "
                                    f"and child switches); at most {sizes.max_ranks}")
    order = sorted(tree.parent, key=lambda n: (-tree.level[n], topo.switch(n).device_id))
    job_id = _job_id(jobs, allocs, order, sizes)
    workers = _workers(job_id, leaves, by_leaf, rings)
    parts: dict[str, SwitchPart] = {}
    for name in order:
        base = _free_range(slot_ranges(jobs, name), req.slots, sizes.slots)
        if base is None:
            gap = _largest_gap(slot_ranges(jobs, name), sizes.slots)
            raise JobError("slots", f"slots exhausted on switch {name}: {req.slots} requested, "
                                    f"largest free range {gap} of {sizes.slots}")
        parent = tree.parent[name]
        parts[name] = SwitchPart(
            switch=name, role="root" if parent is None else "leaf", slot_base=base,
            slot_count=req.slots, members=(1 << members[name]) - 1, expected=members[name],
            mcast_grp=job_id + 1, parent=parent,
            upstream_port=topo.switch(name).port_to(parent).port if parent else 0,
            children=list(tree.children[name]), level=tree.level[name],
            child_base=len(by_leaf.get(name, ())))
    _assign_conns(order, parts, workers, allocs, sizes)
    root = tree.root
    return JobPlan(job_id=job_id, name=req.name, credits=req.credits, slots=req.slots,
                   msg_pkts=msg_pkts, workers=workers, parts=parts,
                   spine=root if len(parts) > 1 else None, root=root, elems=sizes.elems)


def _workers_by_leaf(req: JobRequest, topo: FabricTopology,
                     sizes: nr.Sizes) -> dict[str, list[tuple[HostInfo, int]]]:
    """The job's (host, gpu) workers behind each leaf switch, at most ``max_ranks`` each."""
    hosts: list[HostInfo] = []
    for host_name in req.hosts:
        try:
            hosts.append(topo.host(host_name))
        except KeyError:
            raise JobError("hosts", f"unknown host {host_name!r} (hosts: "
                                    f"{', '.join(x.name for x in topo.hosts)})") from None
    by_leaf: dict[str, list[tuple[HostInfo, int]]] = {}
    for h in hosts:
        n = req.workers_per_host if req.workers_per_host is not None else max(1, h.gpus)
        for gpu in range(n):
            by_leaf.setdefault(h.switch, []).append((h, gpu))
    for leaf in sorted(by_leaf, key=lambda s: topo.switch(s).device_id):
        if len(by_leaf[leaf]) > sizes.max_ranks:
            raise JobError("hosts", f"{len(by_leaf[leaf])} workers behind switch {leaf}; at most "
                                    f"{sizes.max_ranks} per switch")
    return by_leaf


def _workers(job_id: int, leaves: Sequence[str], by_leaf: Mapping[str, list[tuple[HostInfo, int]]],
             rings: Mapping[str, list[int]]) -> list[Worker]:
    """The job's workers ranked leaf by leaf, each with its ring peer behind its leaf."""
    workers: list[Worker] = []
    for leaf in leaves:
        local = by_leaf[leaf]
        start = len(workers)
        ring = rings[leaf]
        successor = {ring[k]: ring[(k + 1) % len(ring)] for k in range(len(ring))}
        for pos, (h, gpu) in enumerate(local):
            rank = start + pos
            peer = start + successor[pos]
            workers.append(Worker(
                rank=rank, host=h.name, gpu=gpu, ip=h.ip, mac=h.mac, switch=leaf,
                switch_port=h.switch_port, position=pos, peer=peer,
                send_qpn=nr.worker_qpn(job_id, rank, False),
                recv_qpn=nr.worker_qpn(job_id, rank, True),
                sport=nr.worker_sport(job_id, rank),
            ))
    return workers


def _assign_conns(order: Sequence[str], parts: dict[str, SwitchPart], workers: list[Worker],
                  allocs: Mapping[str, SwitchAlloc], sizes: nr.Sizes) -> None:
    """Give every switch part one connection index per worker, child and parent, after
    the indices its switch has used since it started (never reused within a run)."""
    next_conn = {name: (allocs[name].next_conn if name in allocs else 0) for name in order}

    def conn(switch: str, key: str) -> None:
        index = next_conn[switch]
        if index >= sizes.conns:
            raise JobError("hosts", f"switch {switch} has no free connection index "
                                    f"({sizes.conns} used since it started; restart it)")
        parts[switch].conns[key] = index
        next_conn[switch] = index + 1

    for name in order:
        part = parts[name]
        for w in workers:
            if w.switch == name:
                conn(name, f"w{w.rank}")
        for pos in range(part.child_base, part.child_base + len(part.children)):
            conn(name, f"child{pos}")
        if part.parent is not None:
            conn(name, "parent")


def _tree(req: JobRequest, topo: FabricTopology, jobs: Sequence[JobPlan], leaves: Sequence[str],
          sizes: nr.Sizes) -> Tree:
    """The job's aggregation tree (``controller.trees``), errors as :class:`JobError`."""
    load: dict[str, int] = {}
    for j in jobs:
        top = j.root or j.spine
        if top is not None and len(j.parts) > 1:
            load[top] = load.get(top, 0) + 1

    def fits(name: str) -> bool:
        return _free_range(slot_ranges(jobs, name), req.slots, sizes.slots) is not None

    try:
        return aggregation_tree(topo, leaves, req.root, load, fits)
    except TreeError as err:
        raise JobError(err.field, str(err)) from None


def commit_allocations(plan: JobPlan, allocs: dict[str, SwitchAlloc]) -> None:
    """Record what ``plan`` took: connection indices are never reused within a switch run."""
    for name, part in plan.parts.items():
        alloc = allocs.setdefault(name, SwitchAlloc())
        if part.conns:
            alloc.next_conn = max(alloc.next_conn, max(part.conns.values()) + 1)


def retire(plan: JobPlan, allocs: dict[str, SwitchAlloc]) -> None:
    """After deleting a job: its id may not be reused on its switches until they restart
    (their registers still hold its slot state)."""
    for name in plan.parts:
        alloc = allocs.setdefault(name, SwitchAlloc())
        if plan.job_id not in alloc.retired_jobs:
            alloc.retired_jobs.append(plan.job_id)
