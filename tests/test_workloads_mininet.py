"""Every collective on a Mininet spine-leaf of built-in switches (needs root).

ONE network per module: 2 spines, 2 leaves, 2 hosts per leaf, 2 GPUs per host (8 workers),
10 Mbit/s links, ``p4src/netreduce.p4`` built with NR_ELEMS 32 programmed by the controller. Each
test runs one cell through :class:`experiment.matrix.Launcher`: the workers run
``python -m workloads`` inside the hosts and check their own result against the exact one
(``--check``: bit for bit, also for the fixed-point in-network sums). Data-plane loss is
injected with the P4 program's ``port_loss`` table through the controller's fault API.
Names carry the prefix ``tk`` and gRPC ports are found free, so the module cannot collide
with another network; the network is always stopped (last test checks nothing is left).

What this module does not repeat: ping/TCP/ECMP and the one-job all-reduce of
``make run`` (tests/test_fabric_mininet.py), job life cycle and switch restarts
(tests/test_controller_mininet.py).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.fabric import Controller
from experiment.matrix import ALGOS, Cell, Launcher, MatrixSpec
from tests.matrix_network import module_network, with_spec
from topo.cleanup import switch_interfaces

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("mininet") is None, reason="Mininet is missing"),
]

PREFIX = "tk"
SWITCHES = [f"{PREFIX}l1", f"{PREFIX}l2", f"{PREFIX}sp1", f"{PREFIX}sp2"]
SIZE = 3000  # float32 per worker: not a multiple of the packet or message size


SPEC = MatrixSpec(spines=2, leaves=2, hosts_per_leaf=2, gpus=2, bw_mbit=10.0, elems=32,
                  credits=2, slots=64, msg_pkts=16, scale=2000.0, replay_iters=2,
                  timeout_s=60.0, name_prefix=PREFIX)


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    """The running, programmed network; stopped (and checked) at the end of the module."""
    yield from module_network(SPEC, tmp_path_factory.mktemp("workloads") / "run", SWITCHES, 25000)


def _with(launch: Launcher, **changes: Any) -> Launcher:
    return with_spec(launch, SPEC, **changes)


def _assert_exact(cell: Cell) -> None:
    assert cell.ok and cell.exact, cell.errors


@pytest.mark.parametrize("algo", ["ring", "torus"])
def test_dense_tcp_collective_is_exact(launcher: Launcher, algo: str) -> None:
    """Ring and 2D-torus all-reduce over 8 ranks on 4 hosts give every rank the exact sum."""
    cell = _with(launcher).allreduce(algo, SIZE)
    _assert_exact(cell)
    assert cell.workers == 8 and cell.bytes_sent > 0


def test_ring_over_roce_is_exact(launcher: Launcher) -> None:
    """The ring over the RoCE v2 transport: 8 ranks, two per host sharing the host's port
    4791, cross the P4 switches as ordinary routed RoCE (their QPs are in no job's
    conn_table) and every rank gets the exact sum."""
    cell = _with(launcher).allreduce("ring-roce", SIZE)
    _assert_exact(cell)
    assert cell.workers == 8 and cell.bytes_sent > 0


@pytest.mark.parametrize("algo", ["topk", "hybrid"])
def test_sparse_collective_matches_reference(launcher: Launcher, algo: str) -> None:
    """HiTopKComm (and the hybrid schedule's sparse epoch) equal hitopk_reference exactly."""
    _assert_exact(_with(launcher).allreduce(algo, SIZE))


def test_innetwork_flat_two_workers_per_host_is_exact(launcher: Launcher) -> None:
    """Flat in-network, two workers per host NIC: the fixed-point float sum is bit-exact."""
    cell = _with(launcher).allreduce("innetwork", SIZE)
    _assert_exact(cell)
    assert cell.switch_cpu[f"{PREFIX}l1"] > 0  # the leaves aggregated


def test_innetwork_int32_is_exact(launcher: Launcher) -> None:
    """Flat in-network of int32 tensors equals numpy's integer sum."""
    _assert_exact(_with(launcher, dtype="int32").allreduce("innetwork", SIZE))


def test_innetwork_hierarchical_is_exact(launcher: Launcher) -> None:
    """Hierarchical in-network (GPUs of a host summed first, one network worker per host)."""
    _assert_exact(_with(launcher).allreduce("innetwork-hier", SIZE))


@pytest.mark.parametrize("loss", [0.01, 0.05])
def test_innetwork_exact_under_data_plane_loss(launcher: Launcher, loss: float) -> None:
    """With port_loss dropping packets on every leaf host port, go-back-N keeps it exact."""
    launch = _with(launcher)
    ctl = launch.controller
    assert isinstance(ctl, Controller)  # for its faults
    ports = [(sw, p) for sw in (f"{PREFIX}l1", f"{PREFIX}l2") for p in (1, 2)]
    try:
        for sw, port in ports:
            ctl.set_fault(sw, port, loss, "both")
        cell = launch.allreduce("innetwork", 6000)
        drops = sum(n for sw in (f"{PREFIX}l1", f"{PREFIX}l2")
                    for k, n in ctl.switch_counters(sw)["drops"].items() if "fault" in k)
    finally:
        ctl.clear_faults()
    _assert_exact(cell)
    assert drops > 0 and cell.retransmissions > 0


@pytest.mark.parametrize("algo", ALGOS)
def test_resnet50_replay_completes(launcher: Launcher, algo: str) -> None:
    """A ResNet-50 profile shrunk 2000 times replays two iterations with every algorithm."""
    cell = _with(launcher).replay(algo, "resnet50")
    assert cell.ok, cell.errors
    assert cell.seconds > 0 and cell.comm_seconds > 0


def test_teardown_leaves_nothing(launcher: Launcher) -> None:
    """Leaving the network's context stops every switch and removes every interface."""
    network = launcher.network
    assert network is not None and Path(network.rundir.path).is_dir()
    network.stop()
    assert switch_interfaces(SWITCHES) == []
