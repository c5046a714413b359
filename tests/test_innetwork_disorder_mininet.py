"""In-network all-reduces through real switch processes in disorder (needs root; issue 16).

The in-network jobs of tests/test_workloads_mininet.py again, on switch processes that run
the built-in target's BMv2-like random egress order (``--egress-order random --seed N``:
replicas to different ports leave in any order, a packet's egress may run after later
packets' ingress), with reordering injected on every port of every switch (the program's
``port_reorder`` tables through the controller's fault API: ``fault set ... --reorder``).
Every worker checks its own result bit for bit (``--check``).

ONE small network for the module: one spine, two leaves, two hosts per leaf with two GPUs
each (eight workers; the hierarchical job sums each host's GPUs first), 10 Mbit/s links.
Names carry the prefix ``tq``; the network is always stopped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from controller.fabric import Controller
from experiment.matrix import Launcher, MatrixSpec
from tests.matrix_network import module_network, with_spec
from topo.network import Network

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("mininet") is None, reason="Mininet is missing"),
]

PREFIX = "to"
SWITCHES = [f"{PREFIX}l1", f"{PREFIX}l2", f"{PREFIX}sp1"]
SIZE = 3000  # values per worker: not a multiple of the packet or message size
REORDER = 0.05
EGRESS_SEED = 11
REORDERED = ("SwitchIngress.reorder.reordered", "SwitchEgress.reorder.reordered")

SPEC = MatrixSpec(spines=1, leaves=2, hosts_per_leaf=2, gpus=2, bw_mbit=10.0, elems=32,
                  credits=2, slots=64, msg_pkts=16, timeout_s=60.0, name_prefix=PREFIX,
                  egress_order="random", seed=EGRESS_SEED)


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    """The running, programmed network; stopped at the end of the module."""
    yield from module_network(SPEC, tmp_path_factory.mktemp("disorder") / "run", SWITCHES, 27300)


def _with(launch: Launcher, **changes: object) -> Launcher:
    return with_spec(launch, SPEC, **changes)


def _controller(launch: Launcher) -> Controller:
    """The launcher's controller, for its fault and counter calls."""
    ctl = launch.controller
    assert isinstance(ctl, Controller)
    return ctl


def _held(launch: Launcher) -> int:
    """Aggregation packets the reorder tables have held back so far, all switches."""
    ctl = _controller(launch)
    return sum(packets for sw in SWITCHES
               for counter in ctl.read_counters(sw, REORDERED).values()
               for packets, _bytes in counter.values())


@pytest.fixture()
def reordering(launcher: Launcher) -> Iterator[Launcher]:
    """REORDER on both directions of every port of every switch, cleared afterwards."""
    ctl = _controller(launcher)
    try:
        for sw in ctl.topology.switches:
            for port in sw.ports:
                ctl.set_fault(sw.name, port.port, 0.0, "both", reorder=REORDER)
        yield launcher
    finally:
        ctl.clear_faults()


def test_switch_processes_run_random_egress_order(launcher: Launcher) -> None:
    """Every switch process got --egress-order random, each with its own seed."""
    seeds = []
    network = launcher.network
    assert isinstance(network, Network)
    for sw in network.net.switches:
        argv = sw.argv()
        assert argv[argv.index("--egress-order") + 1] == "random"
        seeds.append(int(argv[argv.index("--seed") + 1]))
        with open(f"/proc/{sw.proc.pid}/cmdline", "rb") as f:
            assert b"--egress-order\0random\0" in f.read()
    assert len(set(seeds)) == len(seeds) == len(SWITCHES)


@pytest.mark.parametrize("algo", ["innetwork", "innetwork-hier"])
def test_innetwork_exact_with_random_egress_and_reordering(reordering: Launcher,
                                                           algo: str) -> None:
    """Random egress order in all three switches and 5 % reordering on every port: every
    worker's result is exact, and the reorder tables did hold packets back."""
    before = _held(reordering)
    cell = _with(reordering).allreduce(algo, SIZE)
    assert cell.ok and cell.exact, cell.errors
    assert _held(reordering) > before


def test_network_soak_cell_counts_exact_all_reduces(launcher: Launcher) -> None:
    """The network soak (bench/netreduce_soak_net.py, the path that reaches BMv2) on this
    network: loss and reordering on every link direction, each all-reduce checked."""
    from bench.netreduce_soak_net import soak_cell

    res = soak_cell(launcher.network, launcher.controller, 4, loss=0.05, reorder=0.05,
                    values=96, timeout=60.0, label="softswitch random")
    assert (res.completed, res.wrong, res.hangs) == (4, 0, 0), res.errors
    assert res.retransmitted > 0 and res.duplicates_at_switches > 0
    assert not _controller(launcher).state.faults
