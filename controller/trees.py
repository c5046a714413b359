"""The switch graph of a topology: next hops for routing and aggregation trees for jobs.

Both are computed over whatever graph ``topology.json`` describes (spine-leaf, fat-tree, a
ring of switches), with networkx for the path search:

* :func:`next_hops`: for every switch and every leaf, the neighbours on a shortest path to
  that leaf (several = ECMP).
* :func:`aggregation_tree`: the tree a job's partial sums climb, from the leaves that hold
  its workers to a root: the given one, or the switch closest to all of them (fewest levels;
  ties: fewest jobs rooted there, then the highest tier, then the lowest device id). Each
  leaf climbs a shortest path to the root, joining the tree as early as it can, so on a
  fat-tree the leaves of one pod meet at one aggregation switch and the pods at one core:
  leaf -> aggregation -> core.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

from controller.errors import TreeError
from controller.topology import FabricTopology, SwitchInfo

#: Tiers, bottom to top; a higher tier wins a tie for the root.
TIERS = {"leaf": 0, "aggregation": 1, "spine": 2, "core": 3}


def switch_graph(topo: FabricTopology) -> nx.Graph:
    """Switches as nodes, one edge per pair of cabled switches (parallel links collapse)."""
    graph = nx.Graph()
    names = set(topo.switch_names())
    graph.add_nodes_from(names)
    for sw in topo.switches:
        for p in sw.ports:
            if p.peer in names and p.peer != sw.name:
                graph.add_edge(sw.name, p.peer)
    return graph


def next_hops(topo: FabricTopology,
              graph: nx.Graph | None = None) -> dict[str, dict[str, list[str]]]:
    """{switch: {leaf: neighbours on a shortest path to that leaf}} for every leaf that is
    not the switch itself and can be reached; neighbours in device-id order."""
    g = graph if graph is not None else switch_graph(topo)
    order = {s.name: s.device_id for s in topo.switches}
    out: dict[str, dict[str, list[str]]] = {name: {} for name in g.nodes}
    for leaf in (s.name for s in topo.leaves()):
        dist = nx.single_source_shortest_path_length(g, leaf)
        for name in g.nodes:
            if name == leaf or name not in dist:
                continue
            hops = [n for n in g.neighbors(name) if dist.get(n) == dist[name] - 1]
            out[name][leaf] = sorted(hops, key=lambda n: order[n])
    return out


@dataclass
class Tree:
    """An aggregation tree: ``parent`` of every switch in it (None at the root) and the
    ``children`` of each, in device-id order; ``level`` = tree edges from the root."""

    root: str
    parent: dict[str, str | None] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    level: dict[str, int] = field(default_factory=dict)


def aggregation_tree(topo: FabricTopology, leaves: Sequence[str], root: str | None = None,
                     load: Mapping[str, int] | None = None,
                     fits: Callable[[str], bool] | None = None) -> Tree:
    """The tree joining ``leaves`` (switches with workers) at ``root`` (see the module
    docstring). ``load``: jobs already rooted at each switch; ``fits(name)``: whether the
    job's slots fit on a switch (a chosen root is one where they fit, when there is one;
    the caller checks every tree switch). Raises :class:`TreeError`."""
    g = switch_graph(topo)
    info = {s.name: s for s in topo.switches}
    load = load or {}
    if not leaves:
        raise TreeError("hosts", "a job needs at least one leaf")
    if root is not None:
        _check_root(topo, g, info, root, leaves)
    else:
        root = _best_root(g, info, leaves, load, fits)
    dist = nx.single_source_shortest_path_length(g, root)
    tree = Tree(root=root, parent={root: None}, level={root: 0})
    # Closest leaves first, so farther ones can join the branches already built.
    for leaf in sorted(dict.fromkeys(leaves), key=lambda n: (dist[n], info[n].device_id)):
        path = [leaf]
        node = leaf
        while node not in tree.parent:
            ups = [n for n in g.neighbors(node) if dist.get(n) == dist[node] - 1]
            joined = [n for n in ups if n in tree.parent]
            # join the tree now if a parent is in it; else the least loaded, lowest id
            node = min(joined or ups, key=lambda n: (load.get(n, 0), info[n].device_id))
            path.append(node)
        for child, parent in zip(path, path[1:], strict=False):
            tree.parent[child] = parent
    for name in tree.parent:
        tree.level[name] = dist[name]
        tree.children.setdefault(name, [])
    for name, up in tree.parent.items():
        if up is not None:
            tree.children[up].append(name)
    for kids in tree.children.values():
        kids.sort(key=lambda n: info[n].device_id)
    return tree


def _check_root(topo: FabricTopology, g: nx.Graph, info: Mapping[str, SwitchInfo], root: str,
                leaves: Sequence[str]) -> None:
    """A root the caller chose: a known switch that reaches every leaf."""
    if root not in info:
        raise TreeError("root", f"unknown switch {root!r} (switches: "
                                f"{', '.join(topo.switch_names())})")
    unreachable = [lf for lf in leaves if not nx.has_path(g, root, lf)]
    if unreachable:
        raise TreeError("root", f"switch {root} cannot reach {', '.join(unreachable)}")


def _best_root(g: nx.Graph, info: Mapping[str, SwitchInfo], leaves: Sequence[str],
               load: Mapping[str, int], fits: Callable[[str], bool] | None) -> str:
    """The root that reaches every leaf in the fewest hops, then the least loaded, the
    highest tier, the lowest device id; one where the job's slots fit when there is one
    (when none has room, the caller's per-switch check names the switch and its largest
    free range)."""
    dists = {lf: nx.single_source_shortest_path_length(g, lf) for lf in leaves}
    scored: list[tuple[tuple[int, int, int, int], str]] = []
    for name in g.nodes:
        if all(name in d for d in dists.values()):
            depth = max(d[name] for d in dists.values())
            scored.append(((depth, load.get(name, 0), -TIERS.get(info[name].role, 0),
                            info[name].device_id), name))
    if not scored:
        raise TreeError("hosts", f"leaves {', '.join(leaves)} are not connected to one "
                                 "another")
    scored.sort()
    best_depth = scored[0][0][0]
    candidates = [n for key, n in scored if key[0] == best_depth]
    usable = [n for n in candidates if fits is None or fits(n)] or candidates
    return usable[0]


def describe_tree(tree: Tree, label: Callable[[str], str] | None = None) -> list[str]:
    """The tree as indented lines, root first (``job show`` prints them)."""
    lines: list[str] = []

    def walk(name: str, depth: int) -> None:
        lines.append("  " * depth + (label(name) if label else name))
        for child in tree.children.get(name, []):
            walk(child, depth + 1)

    walk(tree.root, 0)
    return lines
