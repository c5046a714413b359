"""Routes and aggregation trees over topology files (controller/trees.py, controller/desired.py):
ECMP where a fat-tree has equal paths, three-level trees, a chosen root, and the entities of a
switch that is both a child and a parent. No switch needed."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from controller import netreduce as nr
from controller.cli import job_tree_lines
from controller.desired import parent_position, route_entities
from controller.errors import JobError
from controller.jobs import JobRequest, commit_allocations, plan_job
from controller.schema import ControlPlaneSchema
from controller.topology import FabricTopology, load_topology
from controller.trees import aggregation_tree, next_hops
from topo.model import describe, topology_to_dict
from topo.topologies import load_topology_file

SIZES = nr.Sizes(slots=1024, jobs=64, conns=1024)
PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"


@functools.lru_cache(maxsize=1)
def netreduce_schema() -> ControlPlaneSchema:
    """netreduce.p4's P4Info, from the built-in front end."""
    from softswitch.frontend import compile_file
    from softswitch.p4info import build_p4info

    return ControlPlaneSchema(build_p4info(compile_file(PROGRAM)))


def _controller_topology(tmp_path: Path, name: str,
                         params: dict[str, Any] | None = None) -> FabricTopology:
    """The controller's view of a shipped topology file (through topology.json)."""
    described = describe(load_topology_file(name, params), target="softswitch")
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(topology_to_dict(described)), encoding="utf-8")
    return load_topology(path)


@pytest.fixture
def fattree(tmp_path: Path) -> FabricTopology:
    return _controller_topology(tmp_path, "fattree")


def test_fattree_next_hops_are_ecmp_upward_and_single_downward(fattree: FabricTopology) -> None:
    """A leaf reaches another pod through both its aggregation switches, an aggregation
    switch through both its cores; downward there is one path."""
    hops = next_hops(fattree)
    assert hops["l1"]["l3"] == ["a1", "a2"]  # other pod: both aggregation switches
    assert hops["l1"]["l2"] == ["a1", "a2"]  # same pod, other leaf: also both
    assert hops["a1"]["l3"] == ["c1", "c2"]  # up to the cores a1 is cabled to
    assert hops["a1"]["l2"] == ["l2"]  # down: one path
    assert hops["c1"]["l8"] == ["a7"]


def test_fattree_routes_use_ecmp_groups(fattree: FabricTopology) -> None:
    """Route entities: a leaf has one ECMP group of its 2 aggregation switches for every
    remote leaf; an aggregation switch one group of its 2 cores for other pods."""
    schema = netreduce_schema()
    lpm_id = schema.table(nr.Ipv4Forwarding.IPV4_LPM).preamble.id
    ecmp_id = schema.table(nr.Ipv4Forwarding.ECMP_NHOP).preamble.id

    def routes(name: str) -> tuple[list[Any], list[Any]]:
        entries = [e.table_entry for e in route_entities(fattree, fattree.switch(name), schema)]
        return ([e for e in entries if e.table_id == lpm_id],
                [e for e in entries if e.table_id == ecmp_id])

    lpm, members = routes("a1")
    assert len(lpm) == 8  # l1 and l2 directly, 6 other-pod leaves through the cores
    assert len(members) == 2  # one group: c1, c2
    lpm, members = routes("l1")
    assert len(lpm) == 2 + 7  # its two hosts (/32), every other leaf's /24 (ECMP)
    assert len(members) == 2  # one group: a1, a2
    lpm, members = routes("c1")
    assert len(lpm) == 8 and not members  # one way down to each leaf


def test_fattree_job_is_a_three_level_tree(fattree: FabricTopology) -> None:
    """A job over every host: leaves -> aggregation -> core, rooted at a core switch."""
    hosts = tuple(h.name for h in fattree.hosts)
    plan = plan_job(JobRequest("all", hosts), fattree, [], {}, SIZES)
    assert plan.root == "c1" and plan.spine == "c1"
    parts = plan.parts
    assert parts["c1"].children == ["a1", "a3", "a5", "a7"] and parts["c1"].role == "root"
    assert parts["a1"].parent == "c1" and parts["a1"].children == ["l1", "l2"]
    assert parts["a1"].role == "leaf" and parts["a1"].level == 1  # a LEAF role with children
    assert parts["a1"].expected == 2 and parts["a1"].members == 0b11
    assert set(parts["a1"].conns) == {"child0", "child1", "parent"}
    assert parts["l1"].parent == "a1" and parts["l1"].level == 2 and parts["l1"].expected == 2
    assert parent_position(plan, "l2") == 1 and parent_position(plan, "a5") == 2
    assert sorted(n for n, p in parts.items() if p.level == 1) == ["a1", "a3", "a5", "a7"]
    lines = job_tree_lines(plan)
    assert lines[0].startswith("c1: level 0") and lines[1].startswith("  a1: level 1")
    assert lines[2].startswith("    l1: level 2") and "workers on h1, h2" in lines[2]


def test_second_job_takes_the_next_core_and_a_chosen_root(fattree: FabricTopology) -> None:
    """Roots spread over the cores; a root can be chosen; an unknown root is refused."""
    hosts = tuple(h.name for h in fattree.hosts)
    allocs: dict[str, Any] = {}
    first = plan_job(JobRequest("a", hosts), fattree, [], allocs, SIZES)
    commit_allocations(first, allocs)
    second = plan_job(JobRequest("b", hosts), fattree, [first], allocs, SIZES)
    assert (first.root, second.root) == ("c1", "c2")
    assert second.parts["a1"].parent == "c2"
    pod = plan_job(JobRequest("p", ("h1", "h2", "h3", "h4"), root="a2"), fattree, [], {}, SIZES)
    assert pod.root == "a2" and pod.parts["a2"].children == ["l1", "l2"]
    natural = plan_job(JobRequest("q", ("h1", "h2", "h3", "h4")), fattree, [], {}, SIZES)
    assert natural.root in ("a1", "a2") and len(natural.parts) == 3  # two levels inside a pod
    with pytest.raises(JobError, match="unknown switch 'x9'") as info:
        plan_job(JobRequest("r", hosts, root="x9"), fattree, [], {}, SIZES)
    assert info.value.field == "root"


def test_leaf_as_root_has_workers_and_a_child(tmp_path: Path) -> None:
    """Rooted at a leaf, that leaf aggregates its own workers and the other leaf's subtree:
    its children's bitmap positions follow its workers'."""
    topo = _controller_topology(tmp_path, "spineleaf")
    plan = plan_job(JobRequest("a", ("h1", "h2", "h3", "h4"), root="l1"), topo, [], {}, SIZES)
    l1 = plan.parts["l1"]
    assert plan.root == "l1" and l1.children == ["sp1"] and l1.child_base == 2
    assert l1.expected == 3 and set(l1.conns) == {"w0", "w1", "child2"}
    assert plan.parts["sp1"].children == ["l2"] and plan.parts["l2"].parent == "sp1"
    assert parent_position(plan, "sp1") == 2


def test_spineleaf_tree_is_unchanged(tmp_path: Path) -> None:
    """On the spine-leaf the tree is the old leaf -> spine one (spine by load, then index)."""
    topo = _controller_topology(tmp_path, "spineleaf")
    tree = aggregation_tree(topo, ["l1", "l2"])
    assert tree.root == "sp1" and tree.children["sp1"] == ["l1", "l2"]
    assert aggregation_tree(topo, ["l1", "l2"], load={"sp1": 1}).root == "sp2"
    assert aggregation_tree(topo, ["l1"]).root == "l1"
