"""The simulator's view of a topology file (``topo/files/*.yaml``, docs/topology.md).

The same file that ``make run topo=FILE`` emulates is simulated at any scale by changing its
parameters (``python -m sim run --topo spineleaf --param leaves=32 --param hosts=16``).

The simulator's network (:class:`~sim.fabric.Fabric`, built by ``collective_engine.cc``) is a
two-tier spine-leaf with uniform leaves, so a file maps onto it as follows:

* leaves = the file's leaf switches, hosts_per_leaf = worker hosts per leaf, gpus_per_host =
  their GPUs, host_bps = the host links' rate, link_delay_s = their delay, intra_bps = the
  hosts' ``intra_bw`` when they set it (all must agree: the fabric is uniform, so a file
  whose leaves differ is refused, naming what differs);
* two tiers (leaves and spines, every leaf cabled once to every spine): spines and
  fabric_bps as in the file, exactly;
* more tiers (aggregation, core: a fat-tree): **approximated** by a spine-leaf with one
  spine per leaf uplink at the uplinks' rate. That keeps each leaf's uplink capacity and, for
  a full-bisection fat-tree, the bisection. Each leaf-spine link also carries the delay of
  the hops it stands for (:func:`extra_hops`; ``Fabric.fabric_extra_hops``): a cross-pod
  path crosses 5 switches, not 3, and the link's delay makes up the two more links and
  switches, so the longest paths and the aggregation tree's round trip keep their length
  (paths inside a pod come out as long as those across it). The returned notes say so.

Data-server hosts (``role: data``) are left out: they run no workers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sim.errors import SimError
from sim.fabric import Fabric, emulated
from topo.topofile import TopologySpec, load_spec, resolve
from vtime import format_delay, format_rate


class TopologyFileMismatch(SimError, ValueError):
    """A topology file the simulator's uniform spine-leaf cannot stand for."""


def _rate_text(bps: float | None) -> str:
    return format_rate(bps) if bps else "unshaped"


def _one(values: set[Any], what: str, source: str, show: Callable[[Any], str] = str) -> Any:
    if len(values) != 1:
        shown = ", ".join(sorted(show(v) for v in values))
        raise TopologyFileMismatch(f"{source}: the simulator needs one {what} for the whole "
                                   f"fabric, the file has {shown}")
    return next(iter(values))


def extra_hops(spec: TopologySpec) -> int:
    """Switch levels beyond a spine-leaf's two (distinct switch roles: leaf and spine are
    two, a fat-tree's leaf, aggregation and core three): what each leaf-spine link of the
    simulator's two-level stand-in adds on the way up (``Fabric.fabric_extra_hops``)."""
    return max(0, len({s.role for s in spec.switches}) - 2)


def fabric_from_spec(spec: TopologySpec, **changes: Any) -> tuple[Fabric, list[str]]:
    """The :class:`Fabric` standing for ``spec`` and notes on what was approximated;
    ``changes`` override Fabric fields afterwards (e.g. ``switch_delay_s``)."""
    src = spec.source
    roles = {s.name: s.role for s in spec.switches}
    leaves = [s.name for s in spec.switches if s.role == "leaf"]
    workers = [h for h in spec.hosts if h.role == "worker"]
    if not workers:
        raise TopologyFileMismatch(f"{src}: no worker hosts to simulate")
    per_leaf = {leaf: sum(1 for h in workers if h.switch == leaf) for leaf in leaves}
    used = [leaf for leaf in leaves if per_leaf[leaf]]
    hosts_per_leaf = _one({per_leaf[leaf] for leaf in used}, "number of worker hosts per leaf",
                          src)
    gpus = _one({h.gpus for h in workers}, "number of GPUs per host", src)
    host_bps = _one({h.link.bw_bps for h in workers}, "host link rate", src, _rate_text)
    delay = _one({h.link.delay_s or 0.0 for h in workers} | {ln.shape.delay_s or 0.0
                                                             for ln in spec.links},
                 "link delay", src, format_delay)
    intra = _one({h.intra_bw_bps for h in workers}, "intra-host rate", src, _rate_text)
    notes: list[str] = []
    uplinks = {leaf: [ln for ln in spec.links if leaf in (ln.a, ln.b)] for leaf in used}
    fabric_bps = None
    spines = 1
    if len(used) > 1:
        rates = {ln.shape.bw_bps for links in uplinks.values() for ln in links}
        fabric_bps = _one(rates, "switch link rate", src, _rate_text)
        spines = _one({len(links) for links in uplinks.values()}, "number of uplinks per leaf",
                      src)
        tops = {s for links in uplinks.values() for ln in links for s in (ln.a, ln.b)
                if s not in used}
        two_tier = all(roles.get(s) == "spine" for s in tops) and all(
            {(ln.b if ln.a == leaf else ln.a) for ln in links} == tops
            for leaf, links in uplinks.items())
        if not two_tier:
            notes.append(
                f"{src}: {len(spec.switches)} switches in more than two tiers, simulated as a "
                f"spine-leaf with {spines} spine(s) per leaf at the uplinks' rate: uplink "
                f"capacity kept, each leaf-spine link {extra_hops(spec)} switch hop(s) "
                "longer (the longest paths' length kept; shorter ones made as long)")
    if host_bps is None:
        raise TopologyFileMismatch(f"{src}: unshaped host links (bw null): the simulator needs "
                                   "a rate")
    fabric = emulated().replace(
        spines=spines, leaves=len(used), hosts_per_leaf=hosts_per_leaf, gpus_per_host=gpus,
        host_bps=host_bps, fabric_bps=fabric_bps, link_delay_s=delay,
        fabric_extra_hops=extra_hops(spec) if len(used) > 1 else 0)
    if intra is not None:
        fabric = fabric.replace(intra_bps=intra)
    return fabric.replace(**changes), notes


def fabric_from_file(name_or_path: str | Path, params: Mapping[str, Any] | None = None,
                     **changes: Any) -> tuple[Fabric, list[str]]:
    """:func:`fabric_from_spec` of a shipped topology's name or a file path with ``params``."""
    return fabric_from_spec(load_spec(resolve(name_or_path), params), **changes)
