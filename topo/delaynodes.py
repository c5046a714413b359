"""Delay nodes: link propagation delay where neither netem nor the switches can hold packets.

A link's delay is emulated by the first of these that exists:

1. the kernel's netem qdisc on the link (``sch_netem``; this project's CI kernel lacks it);
2. the switches' own delay lines (the built-in target, ``P4Switch.delay_line``);
3. **delay nodes**: each delayed link A--B is built as A--W--B, where W runs
   ``python -m softswitch wire`` (:mod:`softswitch.wire`), a transparent two-port wire that
   holds every frame ``delay * TDF`` real seconds, each direction its own FIFO.

Only the Mininet build sees W. A's and B's port numbers and interface names, the hosts'
addresses and every record of ``topology.json`` stay what they are without delay nodes (the
controller, the routes, the jobs and the port counters do not notice): :func:`with_delay_nodes`
rewrites a copy of the topology for Mininet, and ``topo.model.describe`` keeps reading the
original. Both halves of a delayed link keep its rate (htb on A's and B's ends, and on W's);
the delay is the wire's alone, and a loss rate (netem) goes on the first half only.

``start_network(..., delay_nodes=True)`` forces delay nodes whatever the target, so the
mechanism can be tested and compared with the built-in switch's delay line.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mininet.topo import Topo

from softswitch.wire import READY_PREFIX, wire_argv
from topo.errors import TargetError, TopologyError
from topo.nodes import (
    DEFAULT_START_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    LOG_LEVELS,
    ProcessNode,
    _disable_ipv6,
)
from topo.rundir import RunDir
from topo.topologies import MAX_IFNAME, TestbedTopo

log = logging.getLogger(__name__)

#: Delay nodes are named ``<name_prefix>dl<N>`` (N from 1, in link order).
DELAY_NODE_BASE = "dl"
#: The wire's two ports: 1 towards the link's first node, 2 towards its second.
WIRE_PORTS = (1, 2)
#: Link options that belong to a link's ends, not to its halves' shaping.
_END_OPTIONS = ("node1", "node2", "port1", "port2", "addr1", "addr2")


class DelayMechanism(enum.Enum):
    """What holds packets for the links' propagation delays in a run."""

    NONE = "none"  # no link has a delay
    NETEM = "netem"  # the kernel's qdisc on each link
    SWITCHES = "switches"  # the switches' delay lines (built-in target)
    DELAY_NODES = "delay nodes"  # a wire process on every delayed link


def delay_mechanism(delayed: bool, netem: bool, delay_line: bool,
                    forced: bool = False) -> DelayMechanism:
    """Which mechanism a run uses: ``delayed`` (some link has a delay), ``netem`` (the kernel
    has it), ``delay_line`` (the target's switches can hold packets), ``forced`` (delay
    nodes asked for, e.g. to compare them with the switches' delay line)."""
    if not delayed:
        return DelayMechanism.NONE
    if forced:
        return DelayMechanism.DELAY_NODES
    if netem:
        return DelayMechanism.NETEM
    return DelayMechanism.SWITCHES if delay_line else DelayMechanism.DELAY_NODES


@dataclass(frozen=True)
class DelayNodePlan:
    """One delay node: the link it sits on (``node1:port1 -- node2:port2`` as the topology
    has it) and the link's one-way delay in emulated seconds."""

    name: str
    node1: str
    port1: int
    node2: str
    port2: int
    delay_s: float

    @property
    def link(self) -> str:
        """``l1:3--sp1:1``, for logs."""
        return f"{self.node1}:{self.port1}--{self.node2}:{self.port2}"

    @property
    def interfaces(self) -> tuple[str, str]:
        """The wire's two interfaces (towards node1, towards node2)."""
        return (f"{self.name}-eth{WIRE_PORTS[0]}", f"{self.name}-eth{WIRE_PORTS[1]}")


def has_delays(topo: TestbedTopo) -> bool:
    """True when some link of ``topo`` has a propagation delay."""
    return any(info.get("delay_s") for _a, _b, info in topo.links(withInfo=True))


def plan_delay_nodes(topo: TestbedTopo) -> list[DelayNodePlan]:
    """A delay node for every link of ``topo`` with a delay, in the topology's link order,
    named ``<name_prefix>dl<N>`` (N skips numbers whose name a node already has). Raises
    :class:`TopologyError` when a name would make an interface name too long."""
    taken = set(topo.nodes())
    plans = []
    number = 0
    for _a, _b, info in topo.links(sort=True, withInfo=True):
        delay = info.get("delay_s")
        if not delay:
            continue
        number += 1
        name = f"{topo.name_prefix}{DELAY_NODE_BASE}{number}"
        while name in taken:
            number += 1
            name = f"{topo.name_prefix}{DELAY_NODE_BASE}{number}"
        longest = f"{name}-eth{max(WIRE_PORTS)}"
        if len(longest) > MAX_IFNAME:
            raise TopologyError(
                f"delay node {name!r} (link {info['node1']}--{info['node2']}): its interface "
                f"{longest} exceeds {MAX_IFNAME} characters; use a shorter name_prefix "
                f"(now {topo.name_prefix!r})")
        taken.add(name)
        plans.append(DelayNodePlan(name, str(info["node1"]), int(info["port1"]),
                                   str(info["node2"]), int(info["port2"]), float(delay)))
    return plans


def with_delay_nodes(topo: TestbedTopo, plans: Sequence[DelayNodePlan],
                     node_cls: Callable[..., Any]) -> Topo:
    """A copy of ``topo`` for Mininet in which each planned link A--B is A--W--B: A keeps
    its port (now to W's port 1), B keeps its port (to W's port 2), the MACs of A's and B's
    ends stay; both halves carry the link's options (rate, queue) except its delay (the
    wire's) and its loss (first half only). W is a switch node built by ``node_cls`` with
    ``delay_s`` and ``link``. Hosts, switches and every other link are copied unchanged."""
    out = Topo()
    for name in topo.hosts():
        out.addHost(name, **topo.nodeInfo(name))
    for name in topo.switches():
        opts = {k: v for k, v in topo.nodeInfo(name).items() if k != "isSwitch"}
        out.addSwitch(name, **opts)
    by_end = {(p.node1, p.port1, p.node2, p.port2): p for p in plans}
    used = set()
    for _a, _b, info in topo.links(sort=True, withInfo=True):
        ends = (info["node1"], int(info["port1"]), info["node2"], int(info["port2"]))
        plan = by_end.get(ends)
        if plan is None:
            out.addLink(**info)
            continue
        used.add(ends)
        shape = {k: v for k, v in info.items() if k not in _END_OPTIONS and k != "delay_s"}
        second = {k: v for k, v in shape.items() if k != "loss"}
        out.addSwitch(plan.name, cls=node_cls, delay_s=plan.delay_s, link=plan.link)
        out.addLink(plan.node1, plan.name, port1=plan.port1, port2=WIRE_PORTS[0],
                    addr1=info.get("addr1"), **shape)
        out.addLink(plan.name, plan.node2, port1=WIRE_PORTS[1], port2=plan.port2,
                    addr2=info.get("addr2"), **second)
    missing = [p.link for p in plans if (p.node1, p.port1, p.node2, p.port2) not in used]
    if missing:
        raise TopologyError(f"delay nodes planned for links the topology does not have: "
                            f"{', '.join(missing)}")
    return out


class DelayNode(ProcessNode):
    """A delay node in the root namespace: ``python -m softswitch wire`` on its two veth
    ends, holding frames for ``delay_s`` (emulated) at the run's TDF. Ready once the wire
    printed its readiness line (into the node's log)."""

    what = "delay node"
    isSetup: ClassVar[bool] = False
    python: ClassVar[str] = sys.executable

    def __init__(
        self,
        name: str,
        delay_s: float = 0.0,
        link: str = "",
        tdf: float = 1.0,
        log_level: str = "info",
        rundir: RunDir | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        **params: Any,
    ) -> None:
        if log_level not in LOG_LEVELS:
            raise TargetError(f"log level {log_level!r}: choose from {', '.join(LOG_LEVELS)}")
        self.delay_s = float(delay_s)
        self.link = link
        self.tdf = tdf
        self.log_level = log_level
        self._log_offset = 0
        super().__init__(name, rundir=rundir, start_timeout=start_timeout,
                         stop_timeout=stop_timeout, **params)

    def argv(self) -> list[str]:
        """``python -m softswitch wire -i 1@W-eth1 -i 2@W-eth2 --delay D --tdf N ...``."""
        return [self.python, "-m", "softswitch", "wire",
                *wire_argv(self.port_interfaces(), self.delay_s, self.tdf, self.name,
                           str(self.log_file), self.log_level)]

    def start(self, controllers: Sequence[Any] = ()) -> None:
        """Launches the wire (does not wait; see ``batchStartup``)."""
        if self.is_running():
            return
        ports = self.port_interfaces()
        if len(ports) != len(WIRE_PORTS):
            raise TopologyError(f"delay node {self.name} has {len(ports)} ports, not 2")
        for _port, intf in ports:
            _disable_ipv6(intf)  # no router solicitations or MLD reports on the wire
        try:
            self._log_offset = self.log_file.stat().st_size
        except OSError:
            self._log_offset = 0
        log.debug("delay node %s on %s: %g s emulated", self.name, self.link, self.delay_s)
        self.launch(self.argv(), "wire")

    def is_ready(self) -> bool:
        """True once the wire printed its readiness line (after this start's header)."""
        try:
            with self.log_file.open("rb") as fh:
                fh.seek(self._log_offset)
                text = fh.read().decode(errors="replace")
        except OSError:
            return False
        return any(line.startswith(READY_PREFIX) for line in text.splitlines())

    def not_ready_reason(self, timeout: float) -> str:
        return f"no readiness line after {timeout:g} s"
