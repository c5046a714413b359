"""A run's time-dilation factor and what follows from it for the experiment.

``make run ... tdf=auto`` (the default) asks :mod:`experiment.calibrate` for the smallest TDF
at which this machine keeps up with the emulated network; ``tdf=N`` forces one. The
emulated network itself is described in emulated units (``bw=100G delay=2us``): the links
are configured at ``bw / TDF`` and ``delay * TDF``, the switches and host agents run their
clocks TDF times slower, and the in-network agents' timer bounds are chosen here in emulated
seconds from the emulated network (round trip) so that they mean the same at any
rate.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from experiment import calibrate
from experiment.session import TARGET_TIMERS, ExperimentOptions
from protocol import netreduce as nr
from topo.topofile import LinkShapeSpec, TopologySpec
from vtime import parse_tdf
from workloads.innetwork import AGG_MAX_RTO, AGG_RTO
from workloads.rocecomm import DEFAULT_MAX_RTO as ROCE_MAX_RTO
from workloads.rocecomm import DEFAULT_RTO as ROCE_RTO

#: ``tdf=auto``: calibrate.
AUTO = "auto"
#: A default tensor lasts at least this many round trips of the emulated network.
ROUND_TRIPS = 20

#: Settling (the figure presets always, ``make run settle=N`` on request). An emulation that
#: kept up gives the same emulated times at any higher TDF; one that did not (a path of the
#: machine the guard does not see set the pace) gives other times. So a run is repeated at
#: SETTLE_FACTOR times its TDF and kept when every algorithm's time agrees with the last
#: loss-free run before within SETTLE_SHARE and it resent nothing. A run that resent packets
#: in a network configured without loss neither settles nor serves as the reference: the
#: transports' timers run in emulated time, so a timeout costs the same emulated time at
#: every TDF, and two lossy runs agreed while both were slow (the hierarchy figure's ring:
#: 1.07 ms at TDF 6,000, within 5 % of its time at 3,000, packets resent at both; 633 us
#: loss-free at 50,000; ns-3 628 us).
SETTLE_FACTOR = 2.0
SETTLE_SHARE = 0.05


def settled(times: Mapping[str, float], resent: int,
            reference: Mapping[str, float] | None) -> bool:
    """Nothing resent, and every algorithm's emulated time within :data:`SETTLE_SHARE` of
    the reference run's (the last loss-free run at a lower TDF; None: there is none)."""
    return reference is not None and resent == 0 and all(
        algo in reference and abs(t - reference[algo]) <= SETTLE_SHARE * t
        for algo, t in times.items())


def unsettled_why(tdf: float, resent: int, reference: Mapping[str, float] | None) -> str:
    """Why a run at ``tdf`` goes on up (for the TDF's reason)."""
    if resent:
        return f"TDF {tdf:g} resent {resent} packets"
    if reference is None:
        return f"the check of TDF {tdf:g}"
    return f"times at TDF {tdf:g} moved more than {SETTLE_SHARE:.0%}"


@dataclass(frozen=True)
class Dilation:
    """A run's TDF and why it was chosen (for the summary and experiment.json)."""

    tdf: float
    why: str
    auto: bool
    costs: calibrate.Costs | None = None  # the calibration behind it, where there is one

    def to_dict(self) -> dict[str, object]:
        return {"tdf": self.tdf, "why": self.why, "auto": self.auto,
                "costs": self.costs.to_dict() if self.costs else None}


def parse_tdf_option(text: str) -> str | float:
    """``auto`` or a number >= 1 (the ``--tdf`` option's type)."""
    if text.strip().lower() == AUTO:
        return AUTO
    return parse_tdf(text, "--tdf")


def shape_bps(shape: LinkShapeSpec) -> float | None:
    """A link shape's emulated rate in bits/s (None: unshaped)."""
    return shape.bw_bps


def shape_delay(shape: LinkShapeSpec) -> float:
    """A link shape's emulated one-way delay in seconds (0: none)."""
    return shape.delay_s or 0.0


def fabric_of(spec: TopologySpec, cores: int | None = None) -> calibrate.Fabric:
    """The calibration model of ``spec``'s network: every switch's aggregation fan-in (its
    worker hosts and its switch neighbours, an upper bound of its children in any tree), the
    host agents and the fastest emulated link."""
    fanins: dict[str, int] = {sw.name: 0 for sw in spec.switches}
    rates = []
    agents = 0
    for host in spec.hosts:
        if host.gpus > 0:
            fanins[host.switch] = fanins.get(host.switch, 0) + 1
            agents += 1
        rates.append(shape_bps(host.link))
    for link in spec.links:
        for end in (link.a, link.b):
            if end in fanins:
                fanins[end] += 1
        rates.append(shape_bps(link.shape))
    shaped = [r for r in rates if r is not None]
    return calibrate.Fabric({k: v for k, v in fanins.items() if v}, agents,
                            max(shaped) if shaped else 0.0, cores or os.cpu_count() or 1)


def has_delays(spec: TopologySpec) -> bool:
    """True when some link of ``spec`` has a propagation delay."""
    return any(shape_delay(h.link) for h in spec.hosts) or \
        any(shape_delay(ln.shape) for ln in spec.links)


def longest_rtt(spec: TopologySpec) -> float:
    """The longest round trip (s, emulated propagation only) between two worker hosts."""
    adj: dict[str, list[tuple[str, float]]] = {}

    def edge(a: str, b: str, d: float) -> None:
        adj.setdefault(a, []).append((b, d))
        adj.setdefault(b, []).append((a, d))

    for host in spec.hosts:
        edge(host.name, host.switch, shape_delay(host.link))
    for link in spec.links:
        edge(link.a, link.b, shape_delay(link.shape))
    workers = [h.name for h in spec.hosts if h.gpus > 0]
    worst = 0.0
    for src in workers:
        dist = {src: 0.0}
        heap = [(0.0, src)]
        while heap:
            d, node = heapq.heappop(heap)
            if d > dist.get(node, float("inf")):
                continue
            for nxt, w in adj.get(node, ()):
                if d + w < dist.get(nxt, float("inf")):
                    dist[nxt] = d + w
                    heapq.heappush(heap, (d + w, nxt))
        worst = max([worst] + [dist[w] for w in workers if w in dist])
    return 2 * worst


def switch_hops(spec: TopologySpec) -> int:
    """The most switches on a shortest path between two worker hosts (1 in a rack, 3 in a
    spine-leaf): each is a process a packet waits for, the fixed cost's unit."""
    switches = {sw.name for sw in spec.switches}
    adj: dict[str, set[str]] = {}
    for host in spec.hosts:
        adj.setdefault(host.name, set()).add(host.switch)
        adj.setdefault(host.switch, set()).add(host.name)
    for link in spec.links:
        adj.setdefault(link.a, set()).add(link.b)
        adj.setdefault(link.b, set()).add(link.a)
    workers = [h.name for h in spec.hosts if h.gpus > 0]
    most = 0
    for src in workers:
        seen, frontier, depth = {src}, [src], 0
        hops: dict[str, int] = {src: 0}
        while frontier:
            depth += 1
            nxt = []
            for node in frontier:
                for peer in adj.get(node, ()):
                    if peer not in seen:
                        seen.add(peer)
                        hops[peer] = hops[node] + (1 if peer in switches else 0)
                        nxt.append(peer)
            frontier = nxt
        most = max([most] + [hops[w] for w in workers if w in hops])
    return max(1, most)


def transfer_seconds(spec: TopologySpec, elements: int) -> float:
    """Emulated seconds ``elements`` float32 take on the slowest worker host link (payload
    only; 0 when unshaped)."""
    rate = slowest_worker_rate(spec)
    return elements * 32 / rate if rate else 0.0


def shortest_collective_seconds(spec: TopologySpec, elements: int) -> float:
    """A lower bound of an all-reduce's emulated time on ``spec``: its transfer on the
    slowest worker link plus one round trip between the farthest workers, which every
    collective waits for at least once (in-network: up to the root and back). A gradient of
    a few thousand float32 at 100 Gbit/s is a round trip, not a transfer: bounding it by the
    transfer alone (1.5 us of 17.5) asked a TDF ten times too high (1.5 million). 0 for
    no elements (nothing to bound)."""
    if elements <= 0:
        return 0.0
    return transfer_seconds(spec, elements) + longest_rtt(spec)


def default_elements(spec: TopologySpec, minimum: int, round_trips: int = ROUND_TRIPS) -> int:
    """float32 per worker for a run that measures bandwidth: ``minimum``, or enough for the
    transfer to last ``round_trips`` of the network's longest round trip (a tensor inside a
    few bandwidth-delay products measures latency instead), rounded up to a power of two."""
    rtt = longest_rtt(spec)
    rate = slowest_worker_rate(spec)
    if rtt <= 0 or not rate:
        return minimum
    need = round_trips * rtt * rate / 32
    return max(minimum, 1 << math.ceil(math.log2(max(need, 1.0))))


def collective_timeout(spec: TopologySpec, elements: int, tdf: float,
                       real_timeout_s: float) -> float:
    """The collectives' deadline in emulated seconds: what ``real_timeout_s`` of real time
    stands for, but at least 100 times the transfer and the round trip of the emulated
    network (a deadline of minutes of emulated 100 Gbit/s would be weeks of real time)."""
    needed = 100 * (2 * transfer_seconds(spec, elements) + longest_rtt(spec))
    return max(real_timeout_s / tdf, needed)


def slowest_worker_rate(spec: TopologySpec) -> float | None:
    """The slowest shaped worker host link's emulated rate, bits/s (None: none shaped)."""
    rates = [r for h in spec.hosts if h.gpus > 0 and (r := shape_bps(h.link))]
    return min(rates) if rates else None


def drain_seconds(spec: TopologySpec, packets: int, frame_bits: int) -> float:
    """Emulated seconds a window of ``packets`` frames takes to leave a host on the slowest
    worker link (0 when unshaped): the wait of its last packet when it is sent at once."""
    rate = slowest_worker_rate(spec)
    return packets * frame_bits / rate if rate else 0.0


def timer_bounds(target: str, tdf: float, rtt_s: float = 0.0,
                 real: tuple[float, float] | None = None,
                 drain_s: float = 0.0) -> tuple[float, float]:
    """The in-network agents' retransmission timer bounds (lowest, highest), emulated
    seconds. The target's real-time bounds (``TARGET_TIMERS``, else the agents' defaults:
    what a switch process on this machine needs at TDF 1; ``real``: another transport's)
    shrink by the TDF, since the machine's delays do; but never below what the emulated
    network itself needs: twice its propagation round trip plus ``drain_s``, the time one
    window takes to leave the host at the link rate (a transport sends its window at once,
    so its last packet waits that long behind the others before its round trip begins),
    and twice that at the top. (The top stays low on purpose: under loss the estimate
    climbs to it and every stall costs the job that much, docs/protocol.md 7.)

    Without the window's drain the top was below what a full window's last packet needs
    at 100 GbE (4 round trips, 32 us, against 8 us + 22.5 us for 4 credits of 64 packets;
    90 us for messages of 256): queued windows timed out, and the figures' runs resent up
    to tens of thousands of packets in a network without loss (the other cause was the
    sending host's queue, ``topo.links.HOST_QUEUE_PACKETS``)."""
    low_real, high_real = real or TARGET_TIMERS.get(target, (AGG_RTO, AGG_MAX_RTO))
    low = max(low_real / tdf, 2 * rtt_s + drain_s)
    high = max(high_real / tdf, 2 * low)
    return low, high


def dilated_options(opts: ExperimentOptions, spec: TopologySpec, dilation: Dilation,
                    target: str) -> ExperimentOptions:
    """``opts`` for a run at ``dilation``'s TDF on ``spec``'s network: the in-network agents'
    and the RoCE ring's timer bounds (:func:`timer_bounds`, each with its own window's
    drain: the job's credits x packets per message, which the ring runs with too; its own,
    50 ms lowest, are emulated seconds: at TDF 10,000 one lost packet waited 500 s of real
    time), the collective's deadline of the emulated network (:func:`collective_timeout`)
    and the calibrated fixed cost of a collective over the job's switch hops (the guard's
    latency check; 0 without a calibration)."""
    rtt = longest_rtt(spec)
    # the RoCE ring runs with the agents' window (experiment.session.allreduce_argv)
    packets = opts.credits * (opts.msg_pkts or max(1, opts.slots // max(1, opts.credits)))
    window = drain_seconds(spec, packets, calibrate.frame_bits(opts.elems))
    roce_window = drain_seconds(spec, packets, 8 * (nr.PATH_MTU + nr.ROCE_HEADER_BYTES))
    low, high = timer_bounds(target, dilation.tdf, rtt, drain_s=window)
    roce_low, roce_high = timer_bounds(target, dilation.tdf, rtt, (ROCE_RTO, ROCE_MAX_RTO),
                                       roce_window)
    timeout = collective_timeout(spec, opts.elements, dilation.tdf, opts.timeout_s)
    overhead = (calibrate.fixed_cost(dilation.costs, switch_hops(spec))
                if dilation.costs is not None else 0.0)
    return replace(opts, tdf=dilation.tdf, rto=low, max_rto=high, roce_rto=roce_low,
                   roce_max_rto=roce_high, timeout_s=timeout, overhead_s=overhead)


def resolve(option: str | float, target: str, program: Path | None, spec: TopologySpec,
            elems: int, *, elements: int = 0, refresh: bool = False, rundir: Path | None = None,
            announce: Callable[[str], None] | None = None,
            measure: Callable[[], calibrate.Costs] | None = None,
            delay_nodes: bool = False, engine: str | None = None,
            io: str | None = None) -> Dilation:
    """The run's TDF: the number given, or (``auto``) the calibrated one for ``target``,
    ``program`` and ``spec``'s busiest fan-in and a collective of ``elements`` float32 per
    worker (1 without a program or shaped links). When the run will have delay nodes
    (``delay_nodes``: forced; else as ``topo.network.delay_nodes_needed`` decides) the
    calibration measures with them, so their CPU counts. ``engine`` and ``io``: the built-in
    switches' packet engine and loop, measured as the run will have them."""
    fabric = fabric_of(spec)
    fanin = max(fabric.fanins.values()) if fabric.fanins else 0
    if option != AUTO:
        # a calibration made before still lets the guard judge the machine's latency
        known = (calibrate.load_cached(calibrate.cache_key(target, program, elems, fanin,
                                                           engine=engine, io=io))
                 if program is not None and fanin else None)
        return Dilation(float(option), "set by --tdf", False, known)
    if program is None or not fabric.fanins or fabric.max_bw_bps <= 0:
        return Dilation(1.0, "no program or no shaped link: nothing to dilate", True)
    from topo.network import delay_nodes_needed  # Mininet's: only when calibrating

    wires = delay_nodes_needed(target, has_delays(spec), delay_nodes)
    run_measure = measure or (lambda: calibrate.measure_costs(
        target, program, elems, fanin, rundir, announce, delay_nodes=wires, engine=engine,
        io=io))
    costs, cached = calibrate.calibrate(target, program, elems, fanin, run_measure,
                                        refresh=refresh, delay_nodes=wires, engine=engine,
                                        io=io)
    tdf, why = calibrate.choose_tdf(costs, fabric, elems,
                                    transfer_s=shortest_collective_seconds(spec, elements),
                                    hops=switch_hops(spec))
    return Dilation(tdf, why + (" (calibration cached)" if cached else ""), True, costs)

