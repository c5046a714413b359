"""A run directory and interface counters for the live view without a network: the
``topology.json`` of a described (not started) topology and a fake ``/sys/class/net`` whose
counters the test moves forward."""

from __future__ import annotations

from pathlib import Path

from topo.model import Topology, describe
from topo.rundir import RunDir
from topo.topologies import RackTopo, SpineLeafTopo

COUNTERS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_dropped", "tx_dropped")


class FakeNet:
    """A described topology in a run directory, with one counter file set per switch port."""

    def __init__(self, root: Path, spineleaf: bool = True, tdf: float = 1.0) -> None:
        topo = (SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, host_bw=10)
                if spineleaf else RackTopo(hosts=3, host_bw=10))
        self.rundir = RunDir.create(root / "run", link_latest=False)
        self.topology: Topology = describe(topo, target="softswitch",
                                           rundir=str(self.rundir.path),
                                           log_dir=str(self.rundir.logs), tdf=tdf)
        self.rundir.write_topology(self.topology)
        self.sysfs = root / "sys-class-net"
        for sw in self.topology.switches:
            for p in sw.ports:
                self.set(p.intf, **{c: 0 for c in COUNTERS})

    def set(self, intf: str, **values: int) -> None:
        stats = self.sysfs / intf / "statistics"
        stats.mkdir(parents=True, exist_ok=True)
        for name, value in values.items():
            (stats / name).write_text(f"{value}\n")

    def add(self, intf: str, **values: int) -> None:
        stats = self.sysfs / intf / "statistics"
        for name, value in values.items():
            path = stats / name
            path.write_text(f"{int(path.read_text()) + value}\n")
