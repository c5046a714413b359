"""The controller CLI on a Mininet spine-leaf 2x2x2 of built-in switches (needs root).

ONE network per module: two leaves with two hosts each (two GPUs per host), two spines.
The controller CLI pushes netreduce.p4 and routes, then creates jobs whose entries are read
back over P4Runtime, and runs one job's in-network all-reduce on the hosts (eight workers,
every connection from one host to the other host of its leaf) with an exact check. Routes,
ping, TCP and the one-worker-per-host experiment are tests/test_fabric_mininet.py's. Switch
names carry the prefix ``tc`` and gRPC ports are found free, so nothing collides with
another network; the interfaces are removed at the end, also on failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from tests.netreduce_sizes import SMALL_ELEMS, netreduce_with

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("mininet") is None
                       and not Path("/usr/bin/mn").exists(), reason="Mininet is not installed"),
]

PREFIX = "tc"
LEAVES, SPINES = [f"{PREFIX}l1", f"{PREFIX}l2"], [f"{PREFIX}sp1", f"{PREFIX}sp2"]
HOSTS = [f"{PREFIX}h{i}" for i in range(1, 5)]
PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"
SIZE = 2000  # per worker: 63 packets of 32 (the program built with E = 32; float32 adds a word)


def _free_port_base(count: int) -> int:
    from topo.nodes import free_port_base

    return free_port_base(count, 25000)


def ctl(rundir: Path, *args: str) -> tuple[int, Any, str]:
    """One controller CLI command with --json; (exit status, parsed output, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--rundir", str(rundir), "--json", *args])
    text = out.getvalue()
    return code, (json.loads(text) if text.strip() else None), err.getvalue()


def ok(rundir: Path, *args: str) -> Any:
    code, data, err = ctl(rundir, *args)
    assert code == 0, err
    return data


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The running 2x2x2 network with pipeline and routes programmed by the CLI."""
    from topo.cleanup import remove_interfaces, switch_interfaces
    from topo.network import start_network
    from topo.topologies import SpineLeafTopo

    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, gpus_per_host=2, host_bw=None,
                         name_prefix=PREFIX, grpc_base_port=_free_port_base(4))
    base = tmp_path_factory.mktemp("ctlmn")
    program = netreduce_with(SMALL_ELEMS, base / "src", PROGRAM)
    network = start_network(topo, "softswitch", base / "run", program, progress=False)
    try:
        ok(Path(network.rundir.path), "pipeline", "push")
        ok(Path(network.rundir.path), "routes")
        yield network
    finally:
        network.stop()
        remove_interfaces(switch_interfaces(LEAVES + SPINES))


def _entries(rundir: Path, switch: str, table: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = ok(rundir, "tables", "--switch", switch, "--table", table)
    return entries


def test_job_create_and_delete_read_back(net: Any) -> None:
    """A job over all hosts is read back on both leaves and one spine; delete empties them."""
    rundir = Path(net.rundir.path)
    plan = ok(rundir, "job", "create", "rb", "--hosts", ",".join(HOSTS), "--slots", "32")
    assert len(plan["workers"]) == 8 and plan["spine"] in SPINES
    spine, other = plan["spine"], next(s for s in SPINES if s != plan["spine"])
    for leaf in LEAVES:
        (entry,) = _entries(rundir, leaf, "job_table")
        params = entry["params"]
        assert (params["role"], params["expected"], params["members"], params["slot_count"]) == (
            1, 4, 0b1111, 32)
        assert params["upstream_port"] == plan["parts"][leaf]["upstream_port"]
        assert len(_entries(rundir, leaf, "conn_table")) == 5  # 4 workers + the parent link
        assert len(_entries(rundir, leaf, "result_rewrite")) == 5
    (root,) = _entries(rundir, spine, "job_table")
    assert (root["params"]["role"], root["params"]["expected"], root["params"]["members"]) == (
        0, 2, 0b11)
    assert _entries(rundir, other, "job_table") == []
    listed = ok(rundir, "job", "list")
    assert [(j["name"], j["workers"], j["spine"]) for j in listed] == [("rb", 8, spine)]
    ok(rundir, "job", "delete", "rb")
    for sw in LEAVES + SPINES:
        for table in ("job_table", "conn_table", "result_rewrite"):
            assert _entries(rundir, sw, table) == [], (sw, table)
    assert ok(rundir, "job", "list") == []


def test_two_gpu_hosts_allreduce_exactly_through_the_spine(net: Any) -> None:
    """Eight workers (two per host) all-reduce exactly through leaves and a spine, and the
    job counters account for every packet."""
    from experiment.lifecycle import ExperimentNetwork

    rundir = Path(net.rundir.path)
    plan = ok(rundir, "job", "create", "ar", "--hosts", ",".join(HOSTS), "--slots", "64",
              "--credits", "2")
    assert all(plan["workers"][w["peer"]]["host"] != w["host"] for w in plan["workers"])
    plan_path = rundir / "plan-ar.json"
    plan_path.write_text(json.dumps(plan))
    lab = ExperimentNetwork.around(net)
    procs = {h: lab.popen(h, [sys.executable, "-m", "workloads", "allreduce", "--algo",
                              "innetwork", "--job", str(plan_path), "--host", h, "--size",
                              str(SIZE), "--check", "--seed", "3", "--timeout", "90",
                              "--elems", str(SMALL_ELEMS)])
             for h in HOSTS}
    lines = {}
    for h, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=150)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err.decode(errors="replace")[-1500:]
        lines[h] = [json.loads(x) for x in out.decode().splitlines() if x.startswith("{")]
    assert sorted((r["rank"], r["check"]) for rows in lines.values() for r in rows) == [
        (rank, True) for rank in range(8)]
    packets = -(-(SIZE + 1) // 32)
    rows = {r["switch"]: r for r in ok(rundir, "counters", "--job", "ar")}
    for leaf in LEAVES:
        assert rows[leaf]["contributions"] == 4 * packets
        assert rows[leaf]["partials_sent"] >= packets
    spine = rows[plan["spine"]]
    assert (spine["contributions"], spine["completions"]) == (2 * packets, packets)
    assert spine["results_sent"] >= 2 * packets
    ok(rundir, "job", "delete", "ar")
