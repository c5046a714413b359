"""Job planning, the state file and the CLI's offline verbs (no switch needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller import netreduce as nr
from controller.cli import Commands, Shell, build_parser, main
from controller.errors import JobError
from controller.jobs import (
    JobPlan,
    JobRequest,
    SwitchAlloc,
    commit_allocations,
    plan_job,
    retire,
)
from controller.state import ControllerState, load_state, next_election_id, save_state
from controller.topology import FabricTopologyError, load_topology

SIZES = nr.Sizes(slots=1024, jobs=64, conns=1024)


def _topology_json(gpus: int | dict[str, int] = 1) -> dict[str, Any]:
    """l1: h1, h2, h5; l2: h3, h4; spines sp1, sp2. ``gpus``: for every host, or by name."""
    def port(n: int, peer: str, peer_port: int) -> dict[str, Any]:
        return {"port": n, "mac": f"00:0b:00:00:00:{n:02x}", "peer": peer, "peer_port": peer_port}

    def host(name: str, leaf: int, slot: int, port_no: int) -> dict[str, Any]:
        n = gpus.get(name, 1) if isinstance(gpus, dict) else gpus
        return {"name": name, "ip": f"10.0.{leaf}.{slot}", "prefix_len": 24,
                "mac": f"00:00:0a:00:{leaf:02x}:{slot:02x}", "switch": f"l{leaf}",
                "switch_port": port_no, "gpus": n}

    return {
        "schema": 1,
        "switches": [
            {"name": "l1", "device_id": 1, "grpc_addr": "127.0.0.1:1", "role": "leaf", "index": 1,
             "ports": [port(1, "h1", 0), port(2, "h2", 0), port(3, "sp1", 1), port(4, "sp2", 1),
                       port(5, "h5", 0)]},
            {"name": "l2", "device_id": 2, "grpc_addr": "127.0.0.1:2", "role": "leaf", "index": 2,
             "ports": [port(1, "h3", 0), port(2, "h4", 0), port(3, "sp1", 2), port(4, "sp2", 2)]},
            {"name": "sp1", "device_id": 3, "grpc_addr": "127.0.0.1:3", "role": "spine", "index": 1,
             "ports": [port(1, "l1", 3), port(2, "l2", 3)]},
            {"name": "sp2", "device_id": 4, "grpc_addr": "127.0.0.1:4", "role": "spine", "index": 2,
             "ports": [port(1, "l1", 4), port(2, "l2", 4)]},
        ],
        "hosts": [host("h1", 1, 1, 1), host("h2", 1, 2, 2), host("h3", 2, 1, 1),
                  host("h4", 2, 2, 2), host("h5", 1, 3, 5)],
    }


@pytest.fixture
def rundir(tmp_path: Path) -> Path:
    (tmp_path / "topology.json").write_text(json.dumps(_topology_json()), encoding="utf-8")
    return tmp_path


def test_rack_local_job_has_one_root(rundir: Path) -> None:
    """Hosts behind one leaf: the leaf is the root, workers form a ring there."""
    topo = load_topology(rundir)
    plan = plan_job(JobRequest("a", ("h1", "h2")), topo, [], {}, SIZES)
    assert plan.spine is None and list(plan.parts) == ["l1"]
    part = plan.parts["l1"]
    assert (part.role, part.expected, part.members, part.conns) == (
        "root",
        2,
        0b11,
        {"w0": 0, "w1": 1},
    )
    assert [(w.rank, w.peer, w.position) for w in plan.workers] == [(0, 1, 0), (1, 0, 1)]
    assert plan.workers[0].recv_qpn == nr.worker_qpn(plan.job_id, 0, True)


def test_cross_leaf_job_uses_least_loaded_spine(rundir: Path) -> None:
    """A job over two leaves gets a spine root; the next one the other spine."""
    topo = load_topology(rundir)
    first = plan_job(JobRequest("a", ("h1", "h2", "h3", "h4")), topo, [], {}, SIZES)
    second = plan_job(JobRequest("b", ("h2", "h5", "h3", "h4")), topo, [first], {}, SIZES)
    assert (first.spine, second.spine) == ("sp1", "sp2")
    leaf = first.parts["l1"]
    assert (leaf.role, leaf.parent, leaf.upstream_port) == ("leaf", "sp1", 3)
    assert first.parts["sp1"].children == ["l1", "l2"]
    assert second.job_id == 1


def test_slot_ranges_do_not_overlap(rundir: Path) -> None:
    """Later jobs take the first free slot range on each switch."""
    topo = load_topology(rundir)
    a = plan_job(JobRequest("a", ("h1", "h2"), slots=100), topo, [], {}, SIZES)
    b = plan_job(JobRequest("b", ("h2", "h5"), slots=10), topo, [a], {}, SIZES)
    assert (b.parts["l1"].slot_base, b.parts["l1"].slot_count) == (100, 10)


def test_connection_indices_and_job_ids_are_not_reused(rundir: Path) -> None:
    """Connection indices only grow, and a deleted job's id stays retired on its switches."""
    topo = load_topology(rundir)
    allocs: dict[str, SwitchAlloc] = {}
    a = plan_job(JobRequest("a", ("h1", "h2")), topo, [], allocs, SIZES)
    commit_allocations(a, allocs)
    retire(a, allocs)
    b = plan_job(JobRequest("b", ("h1", "h2")), topo, [], allocs, SIZES)
    assert b.job_id == 1
    assert b.parts["l1"].conns == {"w0": 2, "w1": 3}


def test_gpus_make_workers(tmp_path: Path) -> None:
    """Each GPU of a host is a worker unless workers_per_host says otherwise."""
    (tmp_path / "topology.json").write_text(json.dumps(_topology_json(gpus=4)), encoding="utf-8")
    topo = load_topology(tmp_path)
    assert len(plan_job(JobRequest("a", ("h1", "h2")), topo, [], {}, SIZES).workers) == 8
    assert len(plan_job(JobRequest("a", ("h1", "h2"), workers_per_host=1), topo, [], {},
                        SIZES).workers) == 2


def _ring_ok(plan: JobPlan) -> bool:
    """Every worker's peer is another host behind the same leaf, and the peers of each leaf
    form one ring through all of its workers."""
    for w in plan.workers:
        peer = plan.worker(w.peer)
        if peer.host == w.host or peer.switch != w.switch:
            return False
    for leaf in {w.switch for w in plan.workers}:
        ranks = [w.rank for w in plan.workers if w.switch == leaf]
        seen, r = [], ranks[0]
        while r not in seen:
            seen.append(r)
            r = plan.worker(r).peer
        if sorted(seen) != ranks:
            return False
    return True


def test_workers_pair_across_hosts(tmp_path: Path) -> None:
    """With two GPUs per host every connection goes to a worker on another host of the leaf."""
    (tmp_path / "topology.json").write_text(json.dumps(_topology_json(gpus=2)), encoding="utf-8")
    plan = plan_job(JobRequest("a", ("h1", "h2", "h3", "h4")), load_topology(tmp_path), [], {},
                    SIZES)
    assert [(w.rank, w.host, w.gpu, w.position) for w in plan.workers[:4]] == [
        (0, "h1", 0, 0), (1, "h1", 1, 1), (2, "h2", 0, 2), (3, "h2", 1, 3)]
    assert [w.peer for w in plan.workers] == [2, 3, 1, 0, 6, 7, 5, 4]  # (gpu, host) order
    assert _ring_ok(plan)


def test_uneven_gpus_are_dealt_alternately(tmp_path: Path) -> None:
    """h1 with 2 GPUs and two 1-GPU hosts: round robin would pair h1 with itself; the ring
    alternates hosts instead."""
    topo = _topology_json(gpus={"h1": 2})
    (tmp_path / "topology.json").write_text(json.dumps(topo), encoding="utf-8")
    plan = plan_job(JobRequest("a", ("h1", "h2", "h5")), load_topology(tmp_path), [], {}, SIZES)
    assert [w.host for w in plan.workers] == ["h1", "h1", "h2", "h5"]
    assert _ring_ok(plan)


def test_host_with_most_workers_is_refused(tmp_path: Path) -> None:
    """A host with more than half of a leaf's workers cannot pair across hosts: one-line
    error naming the host and suggesting one worker per host."""
    (tmp_path / "topology.json").write_text(json.dumps(_topology_json(gpus={"h1": 3})),
                                            encoding="utf-8")
    with pytest.raises(JobError) as info:
        plan_job(JobRequest("a", ("h1", "h2")), load_topology(tmp_path), [], {}, SIZES)
    assert info.value.field == "hosts"
    assert str(info.value).startswith("hosts: host h1 has 3 of the 4 workers behind switch l1")
    assert "--workers-per-host 1" in str(info.value)


def test_leaf_rings_alternate_for_every_feasible_layout() -> None:
    """For all GPU counts up to 4 on up to 3 hosts, a ring exists exactly when no host has
    more than half of the workers, and then it alternates hosts."""
    import itertools

    from controller.jobs import leaf_ring
    from controller.topology import HostInfo

    hosts = [HostInfo(name=f"h{i}", ip=f"10.0.0.{i}", prefix_len=24, mac="00:00:00:00:00:01",
                      intf=f"h{i}-eth0", switch="l1", switch_port=i, leaf=1, slot=i, gpus=1)
             for i in range(3)]
    for counts in itertools.product(range(5), repeat=3):
        local = [(h, g) for h, c in zip(hosts, counts, strict=True) for g in range(c)]
        if not local:
            continue
        feasible = len(local) >= 2 and 2 * max(counts) <= len(local)
        if not feasible:
            with pytest.raises(JobError):
                leaf_ring(local, "l1")
            continue
        ring = leaf_ring(local, "l1")
        assert sorted(ring) == list(range(len(local)))
        assert all(local[ring[k]][0] != local[ring[(k + 1) % len(ring)]][0]
                   for k in range(len(ring))), counts


@pytest.mark.parametrize("request_, field, text", [
    (JobRequest("a", ("h1", "h1")), "hosts", "host 'h1' given twice"),
    (JobRequest("a", ()), "hosts", "at least one host"),
    (JobRequest("a b", ("h1",)), "name", "not a valid job name"),
    (JobRequest("a", ("h1",), credits=0), "credits", "at least 1"),
    (JobRequest("a", ("h1",), slots=2000), "slots", "outside 1..1024"),
    (JobRequest("a", ("h1",), credits=3, slots=2), "credits", "credits too high"),
    (JobRequest("a", ("h1",), credits=5), "credits", "credits too high: 5 > 4"),
    (JobRequest("a", ("h1",), credits=4, slots=8, msg_pkts=4), "credits",
     "4 credits x 4 packets per message need 16 slots, the job has 8"),
    (JobRequest("a", ("h1",), slots=8, msg_pkts=9), "msg_pkts", "9 packets per message"),
    (JobRequest("a", ("h1",), msg_pkts=0), "msg_pkts", "0 must be at least 1"),
    (JobRequest("a", ("h1", "h3", "h4")), "hosts", "only one worker behind switch l1 \\(h1\\)"),
    (JobRequest("a", ("h1", "h3", "h4"), workers_per_host=2), "hosts",
     "all 2 workers behind switch l1 are on host h1.*--workers-per-host 1"),
])
def test_bad_requests_name_the_field(rundir: Path, request_: JobRequest, field: str,
                                     text: str) -> None:
    """Every refused request says which field is wrong."""
    with pytest.raises(JobError, match=text) as info:
        plan_job(request_, load_topology(rundir), [], {}, SIZES)
    assert info.value.field == field


def test_job_ids_run_out(rundir: Path) -> None:
    """With every id used since the switches started, a clear error asks for a restart."""
    allocs = {"l1": SwitchAlloc(retired_jobs=list(range(64)))}
    with pytest.raises(JobError, match="no free job id"):
        plan_job(JobRequest("a", ("h1", "h2")), load_topology(rundir), [], allocs, SIZES)


def test_state_round_trip_and_election_ids(rundir: Path) -> None:
    """The state file keeps plans exactly; every controller start gets a higher election id."""
    plan = plan_job(JobRequest("a", ("h1", "h2", "h3", "h4")), load_topology(rundir), [], {}, SIZES)
    save_state(rundir, ControllerState(jobs={plan.job_id: plan}, routes=True))
    again = load_state(rundir)
    assert again.jobs[0] == JobPlan.from_dict(plan.to_dict()) == plan
    assert again.job("a") is again.jobs[0] and again.job("0") is again.jobs[0]
    assert next_election_id(rundir) < next_election_id(rundir)
    assert load_state(rundir).routes


def test_topology_errors_name_the_key(tmp_path: Path) -> None:
    """A topology.json without hosts is refused naming the key."""
    (tmp_path / "topology.json").write_text('{"switches": []}', encoding="utf-8")
    with pytest.raises(FabricTopologyError, match="missing key 'hosts'"):
        load_topology(tmp_path)


def test_cli_job_list_and_show_offline(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """job list/show read the state file without contacting switches."""
    plan = plan_job(JobRequest("a", ("h1", "h2", "h3", "h4")), load_topology(rundir), [], {}, SIZES)
    save_state(rundir, ControllerState(jobs={plan.job_id: plan}))
    assert main(["--rundir", str(rundir), "--json", "job", "list"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["spine"], r["workers"]) for r in rows] == [("a", "sp1", 4)]
    assert main(["--rundir", str(rundir), "job", "show", "nope"]) == 2
    assert capsys.readouterr().err == "error: job: unknown job 'nope' (jobs: a)\n"


def test_cli_usage_errors_exit_2(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Syntax errors and a missing run directory are one line with exit 2."""
    assert main(["--rundir", str(rundir), "job", "create", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: controller job create: the following arguments are required: "
                          "--hosts")
    assert main(["--rundir", str(rundir / "missing"), "status"]) == 2
    assert "no such file (is this a run directory?)" in capsys.readouterr().err


def test_shell_runs_verbs(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The interactive shell dispatches do_<verb> with the same syntax and errors."""
    args = build_parser().parse_args(["--rundir", str(rundir), "shell"])
    shell = Shell(Commands(args))
    shell.onecmd("job list")
    assert "jobs: none" in capsys.readouterr().out
    shell.onecmd("job show ghost")
    assert capsys.readouterr().out.strip() == "error: job: unknown job 'ghost' (jobs: none)"
    assert shell.onecmd("quit") is True


def test_cli_job_show_table_names_peers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """job show without --json prints the job, its switches and every worker with its peer."""
    (tmp_path / "topology.json").write_text(json.dumps(_topology_json(gpus=2)), encoding="utf-8")
    plan = plan_job(JobRequest("t", ("h1", "h2")), load_topology(tmp_path), [], {}, SIZES)
    save_state(tmp_path, ControllerState(jobs={plan.job_id: plan}))
    assert main(["--rundir", str(tmp_path), "job", "show", "t"]) == 0
    out = capsys.readouterr().out
    assert "job t" in out and "switches" in out and "workers" in out
    assert f"{plan.workers[0].send_qpn:#x}" in out


def test_plan_carries_the_programs_packet_size(rundir: Path) -> None:
    """The workers' packet size comes with the plan (the program's NR_ELEMS), through the
    plan's JSON, so no worker has to be told it separately."""
    topo = load_topology(rundir)
    sizes = nr.Sizes(slots=1024, jobs=64, conns=1024, elems=32)
    plan = plan_job(JobRequest("a", ("h1", "h2")), topo, [], {}, sizes)
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["elems"] == 32 and JobPlan.from_dict(data).elems == 32
    legacy = {k: v for k, v in data.items() if k != "elems"}
    assert JobPlan.from_dict(legacy).elems is None


def test_program_sizes_read_the_packet_size_from_p4info(tmp_path: Path) -> None:
    """NR_ELEMS is what slot_sums holds per slot copy, read from the compiled program."""
    from controller.schema import ControlPlaneSchema
    from softswitch.frontend import compile_file
    from softswitch.p4info import build_p4info
    from tests.netreduce_sizes import netreduce_with

    program = compile_file(str(netreduce_with(32, tmp_path)))
    sizes = nr.program_sizes(ControlPlaneSchema(build_p4info(program)))
    assert (sizes.elems, sizes.slots, sizes.jobs, sizes.conns) == (32, 1024, 64, 1024)
