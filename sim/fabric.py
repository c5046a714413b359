"""The simulated network: a spine-leaf fabric with the emulation's parameters.

One :class:`Fabric` describes both what the simulator builds and what the closed-form models
are evaluated with, so the two always see the same network. The names follow the emulation
(``topo/topologies.py``): ``spines``, ``leaves``, ``hosts_per_leaf``, ``gpus_per_host``; host
links (host NIC to leaf), fabric links (leaf to spine) and, inside a multi-GPU host, one
intra-host link per GPU to the host's internal switch (NVLink/NVSwitch-like).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

#: Ethernet + IPv4 + UDP + RoCE BTH + ICRC, the per-packet overhead of the RoCE v2 transport.
ROCE_HEADER_BYTES = 14 + 20 + 8 + 12 + 4


#: The Fabric's fields with a lower bound: (names, bound, unit).
_AT_LEAST = ((("link_delay_s", "intra_delay_s", "switch_delay_s"), 0, " s"),
             (("segment_bytes",), 1, ""),
             (("header_bytes", "window", "message_packets", "ina_spines",
               "switch_header_bytes", "fabric_extra_hops", "send_window"), 0, ""),
             (("send_ack_every",), 1, ""))


@dataclass(frozen=True)
class Fabric:
    """A spine-leaf network; rates in bit/s, delays in seconds, sizes in bytes.

    ``window`` is the in-network credit window (packets in flight per worker); 0 picks one
    that covers twice the bandwidth-delay product, so credits never limit throughput.
    ``message_packets`` is what one credit covers: 0 frees a packet's place in the window
    with each result packet (a sliding window), N > 0 frees a message of N packets when its
    whole result is in (the papers' message-level credits, which the emulation's agents use).
    ``ina_spines`` is how many spines one in-network job aggregates on (0: slots sprayed
    over all; the emulation's controller gives each job one spine) and
    ``switch_header_bytes`` what leaf-spine aggregation packets carry on top of
    ``header_bytes`` (the emulation repeats RETH and tag, 32 bytes, on every one).
    ``send_window`` bounds a point-to-point send's packets in flight (0: no bound), freed
    by the receiver's ACKs, one every ``send_ack_every`` packets: the RoCE transport's
    window, which the emulated RoCE ring runs with (the agents' credits x packets).
    ``fabric_extra_hops`` is how many more switches each leaf-spine link stands for when
    the fabric stands in for a deeper tree (a three-level fat-tree: 1, its edge -> aggregation
    -> core path): the link then carries their links' propagation, their processing and
    their store-and-forward (:attr:`fabric_link_delay`), so the longest paths and the
    aggregation tree's round trip keep their length.
    """

    spines: int = 2
    leaves: int = 2
    hosts_per_leaf: int = 2
    gpus_per_host: int = 1
    host_bps: float = 10e6
    fabric_bps: float | None = None  # None: same as host_bps
    intra_bps: float = 1.2e12  # NVLink 2.0 on V100: 150 GB/s per GPU
    link_delay_s: float = 0.0
    intra_delay_s: float = 0.0
    switch_delay_s: float = 0.0
    segment_bytes: int = 1024
    header_bytes: int = ROCE_HEADER_BYTES
    window: int = 0
    message_packets: int = 0
    ina_spines: int = 0
    switch_header_bytes: int = 0
    fabric_extra_hops: int = 0
    send_window: int = 0
    send_ack_every: int = 16

    def __post_init__(self) -> None:
        for name in ("spines", "leaves", "hosts_per_leaf", "gpus_per_host"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("host_bps", "intra_bps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 bit/s, got {getattr(self, name)!r}")
        if self.fabric_bps is not None and not self.fabric_bps > 0:
            raise ValueError(f"fabric_bps must be > 0 bit/s, got {self.fabric_bps!r}")
        for names, low, unit in _AT_LEAST:
            for name in names:
                if getattr(self, name) < low:
                    raise ValueError(f"{name} must be >= {low}{unit}, got "
                                     f"{getattr(self, name)!r}")

    # ------------------------------------------------------------------ sizes
    @property
    def hosts(self) -> int:
        """Machines: ``leaves * hosts_per_leaf``."""
        return self.leaves * self.hosts_per_leaf

    @property
    def workers(self) -> int:
        """Workers (GPUs): ``hosts * gpus_per_host``."""
        return self.hosts * self.gpus_per_host

    @property
    def fabric_rate(self) -> float:
        """Leaf-spine link rate in bit/s."""
        return self.host_bps if self.fabric_bps is None else self.fabric_bps

    @property
    def fabric_link_delay(self) -> float:
        """A leaf-spine link's delay in seconds: its propagation, and that of the links and
        switches it stands for (``fabric_extra_hops``; each adds a link's propagation, a
        switch's processing and a full packet's serialisation at the fabric rate)."""
        extra = self.fabric_extra_hops
        return ((1 + extra) * self.link_delay_s
                + extra * (self.switch_delay_s + self.packet_time(self.fabric_rate)))

    @property
    def wire_factor(self) -> float:
        """Bytes on the wire per payload byte (headers of full-size packets)."""
        return (self.segment_bytes + self.header_bytes) / self.segment_bytes

    def packet_time(self, bps: float, payload: float | None = None) -> float:
        """Seconds one packet (full-size, or carrying ``payload`` bytes) takes at ``bps``."""
        size = self.segment_bytes if payload is None else min(self.segment_bytes, payload)
        return (size + self.header_bytes) * 8.0 / bps

    # ------------------------------------------------------------------ latencies
    def _host_ends(self, payload: float | None) -> float:
        """Extra latency a multi-GPU host adds to a network path: two intra-host hops."""
        if self.gpus_per_host == 1:
            return 0.0
        return 2 * self.intra_delay_s + 2 * self.packet_time(self.intra_bps, payload)

    def path_latency(self, cross_leaf: bool, payload: float | None = None) -> float:
        """Latency of one packet between two hosts beyond the bandwidth term: propagation,
        one packet time per hop except the bottleneck's (that one is in ``n·β``), switches."""
        if cross_leaf and self.leaves > 1:
            base = (
                2 * self.link_delay_s + 2 * self.fabric_link_delay
                + self.packet_time(self.host_bps, payload)
                + 2 * self.packet_time(self.fabric_rate, payload)
                + 3 * self.switch_delay_s
            )
        else:
            base = (2 * self.link_delay_s + self.packet_time(self.host_bps, payload)
                    + self.switch_delay_s)
        return base + self._host_ends(payload)

    def intra_latency(self, payload: float | None = None) -> float:
        """Latency of one packet between two GPUs of the same host (two intra-host hops)."""
        return 2 * self.intra_delay_s + self.packet_time(self.intra_bps, payload)

    def mean_hop_latency(self, intra: int, same_leaf: int, cross_leaf: int,
                         payload: float | None = None) -> float:
        """Mean latency over a ring's hops (``intra`` inside hosts, ``same_leaf`` between
        hosts of one leaf, ``cross_leaf`` through a spine). The critical path of a ring
        crosses every hop equally often, so this mean (not the worst hop) is its ``α``."""
        hops = intra + same_leaf + cross_leaf
        if hops == 0:
            return 0.0
        total = (
            intra * self.intra_latency(payload)
            + same_leaf * self.path_latency(False, payload)
            + cross_leaf * self.path_latency(True, payload)
        )
        return total / hops

    def host_ring_hops(self) -> tuple[int, int]:
        """``(same_leaf, cross_leaf)`` hops of a ring over all hosts in host order."""
        if self.hosts == 1:
            return 0, 0
        cross = self.leaves if self.leaves > 1 else 0
        return self.hosts - cross, cross

    def ina_levels(self) -> int:
        """Switch levels an in-network all-reduce crosses: 1 (leaf) or 2 (leaf and spine)."""
        return 1 if self.leaves == 1 else 2

    def ina_round_trip(self, payload: float | None = None) -> float:
        """Latency of one aggregation slot beyond the bandwidth term: up to the top switch
        and back down (the round trip equals a cross-leaf path when there are spines, plus
        the inter-switch packets' extra header on the two fabric hops)."""
        extra = 0.0
        if self.leaves > 1:
            extra = 2 * self.switch_header_bytes * 8.0 / self.fabric_rate
        return self.path_latency(self.leaves > 1, payload) + extra

    def ina_spine_spread(self) -> int:
        """Spines one in-network job's slots are spread over."""
        if self.ina_spines == 0:
            return self.spines
        return min(self.ina_spines, self.spines)

    def ina_beta(self) -> float:
        """Seconds per payload byte of an in-network all-reduce: the slower of a host link
        (one packet per slot each way) and a leaf-spine link (one packet per slot, with the
        inter-switch header, shared out over the job's spines)."""
        seg = self.segment_bytes
        host = (seg + self.header_bytes) * 8.0 / (self.host_bps * seg)
        if self.leaves == 1:
            return host
        wire = seg + self.header_bytes + self.switch_header_bytes
        fabric = wire * 8.0 / (self.fabric_rate * self.ina_spine_spread() * seg)
        return max(host, fabric)

    def credit_window(self) -> int:
        """The credit window used: ``window`` or twice the bandwidth-delay product in packets."""
        if self.window:
            return self.window
        slowest = min(self.host_bps, self.fabric_rate)
        rtt = self.ina_round_trip() + 2 * self.packet_time(slowest) + 2 * self.switch_delay_s
        return max(4, math.ceil(2 * rtt / self.packet_time(slowest)) + 4)

    # ------------------------------------------------------------------ conversions
    def replace(self, **changes: Any) -> Fabric:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fabric:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown fabric parameter(s): {', '.join(unknown)}")
        return cls(**data)


def emulated(bw_mbit: float = 10.0, **changes: Any) -> Fabric:
    """The emulated testbed: 2 spines, 2 leaves, 2 hosts per leaf, one GPU each, RoCE packets
    of 1 KiB payload, and ~100 µs of per-packet processing in the built-in Python switch."""
    base = Fabric(
        spines=2,
        leaves=2,
        hosts_per_leaf=2,
        gpus_per_host=1,
        host_bps=bw_mbit * 1e6,
        switch_delay_s=100e-6,
        segment_bytes=1024,
    )
    return base.replace(**changes)


def datacenter(
    workers: int,
    gpus_per_host: int = 1,
    hosts_per_leaf: int = 32,
    spines: int = 4,
    **changes: Any,
) -> Fabric:
    """A 100 GbE spine-leaf cluster with NVLink inside hosts, 1 µs links, 1 µs switches and
    coarse 64 KiB packets (message-level simulation at scale; see docs/scale.md)."""
    if workers % gpus_per_host:
        raise ValueError(f"workers={workers} is not a multiple of gpus_per_host={gpus_per_host}")
    hosts = workers // gpus_per_host
    per_leaf = min(hosts, hosts_per_leaf)
    if hosts % per_leaf:
        raise ValueError(f"{hosts} hosts do not fill leaves of {per_leaf}")
    base = Fabric(
        spines=spines,
        leaves=hosts // per_leaf,
        hosts_per_leaf=per_leaf,
        gpus_per_host=gpus_per_host,
        host_bps=100e9,
        intra_bps=1.2e12,
        link_delay_s=1e-6,
        intra_delay_s=0.5e-6,
        switch_delay_s=1e-6,
        segment_bytes=65536,
    )
    return base.replace(**changes)
