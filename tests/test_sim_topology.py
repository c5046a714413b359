"""The simulator reads the topology files the emulation runs (sim/topology.py). No ns-3 needed:
the fabric a file maps to, and the cost model evaluated on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.model import predict
from sim.topology import TopologyFileMismatch, fabric_from_file


def test_spineleaf_file_maps_exactly_and_scales_by_params() -> None:
    """The shipped spine-leaf at a larger size: the file's parameters give the fabric."""
    fabric, notes = fabric_from_file("spineleaf", {"leaves": 32, "hosts": 16, "bw": 100.0,
                                                   "fabric_bw": 400.0, "delay": "2ms"})
    assert (fabric.spines, fabric.leaves, fabric.hosts_per_leaf, fabric.workers) == (2, 32, 16, 512)
    assert (fabric.host_bps, fabric.fabric_rate, fabric.link_delay_s) == (100e6, 400e6, 2e-3)
    assert notes == []
    assert predict("ring", fabric, 1 << 20, 0.01) > predict("ina", fabric, 1 << 20, 0.01)


def test_oversubscribed_and_rack_files() -> None:
    """The oversubscribed file's slower uplinks reach the fabric; a rack is one leaf."""
    fabric, _ = fabric_from_file("spineleaf-oversub", {"oversubscription": 4.0, "bw": 8.0})
    assert fabric.fabric_rate == 4 * 8e6 / (2 * 4.0) and fabric.host_bps == 8e6
    rack, _ = fabric_from_file("rack", {"hosts": 8})
    assert (rack.leaves, rack.hosts_per_leaf) == (1, 8)


def test_fattree_is_approximated_and_says_so() -> None:
    """A three-tier file becomes a spine-leaf with one spine per leaf uplink, with a note;
    its leaf-spine links stand for a hop more each, so a path across the core (6 links, 5
    switches) is as long as in the fat-tree, which the two-tier files do not get."""
    fabric, notes = fabric_from_file("fattree", {"k": 8, "hosts": 4, "bw": "100G",
                                                 "delay": "2us"}, switch_delay_s=1e-6)
    assert (fabric.leaves, fabric.hosts_per_leaf, fabric.spines) == (32, 4, 4)
    assert len(notes) == 1 and "more than two tiers" in notes[0] and "fattree.yaml" in notes[0]
    assert "1 switch hop(s) longer" in notes[0] and fabric.fabric_extra_hops == 1
    packet = fabric.packet_time(fabric.fabric_rate)
    assert fabric.fabric_link_delay == pytest.approx(2 * 2e-6 + 1e-6 + packet)
    across = fabric.path_latency(True)
    assert across == pytest.approx(6 * 2e-6 + 5 * 1e-6 + 4 * packet
                                   + fabric.packet_time(fabric.host_bps))
    two_tier, _ = fabric_from_file("spineleaf", {"bw": "100G", "delay": "2us"})
    assert two_tier.fabric_extra_hops == 0 and two_tier.fabric_link_delay == 2e-6


def test_non_uniform_file_is_refused(tmp_path: Path) -> None:
    """Leaves with different host counts cannot be the simulator's uniform fabric."""
    path = tmp_path / "odd.yaml"
    path.write_text("schema: 1\nswitches:\n  - {name: l1, role: leaf}\n  - {name: l2, role: leaf}\n"
                    "hosts:\n  - {name: a, switch: l1}\n  - {name: b, switch: l1}\n"
                    "  - {name: c, switch: l2}\n"
                    "links:\n  - {a: l1, b: l2}\n  - {a: l1, b: l2}\n", encoding="utf-8")
    with pytest.raises(TopologyFileMismatch,
                       match=r"odd\.yaml: .*one number of worker hosts per leaf "
                                                   r"for the whole fabric, the file has 1, 2"):
        fabric_from_file(path)


def test_rates_with_units_and_the_intra_host_rate_reach_the_fabric(tmp_path: Path) -> None:
    """The simulator takes the file's rates with units (100G needs no time dilation here) and
    the hosts' intra_bw as the fabric's intra-host rate; rates that differ are named with
    their units."""
    fabric, _ = fabric_from_file("spineleaf", {"bw": "100G", "fabric_bw": "400G",
                                               "delay": "2us", "intra_bw": "150GB/s"})
    assert (fabric.host_bps, fabric.fabric_rate) == (100e9, 400e9)
    assert fabric.link_delay_s == pytest.approx(2e-6) and fabric.intra_bps == 1.2e12
    path = tmp_path / "mixed.yaml"
    path.write_text("schema: 1\nswitches:\n  - {name: l1, role: leaf}\n"
                    "hosts:\n  - {name: a, switch: l1, link: {bw: 25G}}\n"
                    "  - {name: b, switch: l1, link: {bw: 100G}}\n", encoding="utf-8")
    with pytest.raises(TopologyFileMismatch, match=r"one host link rate for the whole fabric, "
                                                   r"the file has 100 Gbit/s, 25 Gbit/s"):
        fabric_from_file(path)
