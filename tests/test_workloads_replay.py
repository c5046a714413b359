"""Gradient replay (workloads/replay.py), results files and plots (workloads/results.py) and
the ``python -m workloads`` command line (workloads/__main__.py, workloads/agent.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from protocol.netreduce import PROGRAM_ELEMS
from softswitch import ir
from softswitch.frontend import compile_file
from tests.fake_clock import FakeRealTime
from tests.netreduce_sizes import netreduce_with
from tests.test_workloads_innetwork import E, SwitchBench
from workloads.__main__ import main, make_input
from workloads.agent import AgentError, HostAgent, load_job, local_ranks
from workloads.collectives import CollectiveStats
from workloads.comm import Communicator, listen
from workloads.innetwork import AggregationChannel, IntraHost, innetwork_allreduce
from workloads.loopback import run_ranks
from workloads.profiles import get_profile
from workloads.replay import ReplayConfig, make_reducer, replay
from workloads.results import (
    CpuLoad,
    RunRecord,
    cpu_saturated,
    plot,
    read_json,
    summarize,
    write_json,
)
from workloads.roce import CC_STARTS, LINE_RATE

PROFILE = get_profile("resnet50", 2000)  # about 12,800 parameters
CONFIG = ReplayConfig(iterations=2, warmup=1, bucket_bytes=16 << 10, flops_per_s=30e12)


def record(algo: str = "ring", rank: int = 0, cpu: float = 0.2) -> RunRecord:
    return RunRecord(algorithm=algo, model="resnet50/2000", workers=2, rank=rank, iterations=2,
                     bytes_per_iteration=1000.0, payload_per_iteration=800.0,
                     iteration_s=[0.02, 0.03], comm_s=[0.01, 0.01], compute_s=0.015,
                     retransmissions=1, cpu_utilization=cpu, cpu_saturated=cpu >= 0.9)


# ------------------------------------------------------------------------ replay


def test_ring_replay_sends_whole_gradient_per_iteration() -> None:
    """Two-rank ring replay: every rank sends exactly the model's gradient bytes per
    iteration, and one record per rank comes back."""
    def work(comm: Communicator) -> RunRecord:
        return replay(PROFILE, make_reducer("ring", comm=comm), CONFIG, algorithm="ring",
                      rank=comm.rank, workers=comm.size, barrier=comm.barrier)

    recs = run_ranks(2, work)
    for r in recs:
        assert r.iterations == 2 and len(r.iteration_s) == 2 and len(r.comm_s) == 2
        assert r.payload_per_iteration == PROFILE.gradient_bytes()
        assert r.bytes_per_iteration > r.payload_per_iteration  # frame headers
        assert r.extra["buckets"] == len(PROFILE.buckets(CONFIG.bucket_bytes)) > 1
        assert r.compute_s == pytest.approx(PROFILE.iteration_compute_s(30e12))


@pytest.mark.parametrize("algo", ["torus", "topk", "hybrid"])
def test_other_tcp_algorithms_replay(algo: str) -> None:
    """2D torus, HiTopKComm and the hybrid replay on 2 hosts x 2 ranks."""
    def work(comm: Communicator) -> RunRecord:
        reducer = make_reducer(algo, comm=comm, gpus_per_host=2, density=0.05,
                               sparse_epochs=1, iters_per_epoch=2)
        return replay(PROFILE, reducer, CONFIG, algorithm=algo, rank=comm.rank,
                      workers=comm.size)

    recs = run_ranks(4, work)
    assert [r.rank for r in recs] == [0, 1, 2, 3]
    assert all(r.iterations == 2 and r.bytes_per_iteration > 0 for r in recs)
    if algo == "torus":
        dense = recs[0].payload_per_iteration
        assert dense < PROFILE.gradient_bytes() * 2  # only a shard crosses the columns


def test_innetwork_replay_through_switch(program: ir.Program) -> None:
    """In-network replay through netreduce.p4: fixed-point payload of every bucket sent once."""
    bench = SwitchBench(program, 2)
    try:
        def work(rank: int, ch: AggregationChannel) -> RunRecord:
            return replay(PROFILE, make_reducer("innetwork", channel=ch), CONFIG,
                          algorithm="innetwork", rank=rank, workers=2)

        recs = bench.run(work)
        buckets = len(PROFILE.buckets(CONFIG.bucket_bytes))
        for r in recs:
            # values + one clamp word per bucket, padded to whole packets of 32 words
            assert PROFILE.gradient_bytes() < r.payload_per_iteration \
                <= PROFILE.gradient_bytes() + buckets * 4 * 33
            assert r.algorithm == "innetwork" and r.iterations == 2
    finally:
        bench.close()


def test_hierarchical_replay_models_intra_host(program: ir.Program) -> None:
    """Hierarchical in-network replay reports the modelled intra-host phases."""
    bench = SwitchBench(program, 2)
    try:
        reducers = {r: make_reducer("innetwork-hier", channel=ch, gpus_per_host=4,
                                    intra=IntraHost(1e9, emulate=False))
                    for r, ch in enumerate(bench.channels)}
        recs = bench.run(lambda r, ch: replay(PROFILE, reducers[r], CONFIG,
                                              algorithm="innetwork-hier", rank=r, workers=8))
        assert all(r.workers == 8 and r.iterations == 2 for r in recs)
    finally:
        bench.close()


def test_make_reducer_rejects_bad_requests() -> None:
    """Unknown algorithms and missing transports are clear ValueErrors."""
    with pytest.raises(ValueError, match="unknown algorithm"):
        make_reducer("butterfly")
    with pytest.raises(ValueError, match="ring needs a point-to-point communicator"):
        make_reducer("ring")
    with pytest.raises(ValueError, match="topk needs a TCP communicator"):
        make_reducer("topk")
    with pytest.raises(ValueError, match="needs an aggregation channel"):
        make_reducer("innetwork")


@pytest.mark.parametrize("tdf", [1.0, 4.0])
def test_replay_sleeps_compute_times_tdf_and_reports_emulated_seconds(tdf: float) -> None:
    """The modelled forward and backward times are slept TDF times as long in real time, and
    an iteration whose communication takes no time is reported as exactly its compute."""
    machine = FakeRealTime()

    def reducer(x: np.ndarray, it: int, b: int) -> tuple[np.ndarray, CollectiveStats]:
        return x, CollectiveStats("none", 1, x.size, 4 * x.size, 0, 4 * x.size, 0, 1, 0.0)

    rec = replay(PROFILE, reducer, CONFIG, algorithm="ring", clock=machine.clock(tdf))
    times = {name: (f, b) for name, f, b in PROFILE.compute_times(CONFIG.flops_per_s)}
    forward = sum(f for f, _ in times.values())
    backward = [sum(times[name][1] for name in bucket.layers)
                for bucket in PROFILE.buckets(CONFIG.bucket_bytes)]
    one = [s * tdf for s in [forward, *backward] if s > 0]
    assert machine.slept == pytest.approx(one * (CONFIG.warmup + CONFIG.iterations))
    assert rec.compute_s == pytest.approx(forward + sum(backward))
    # the machine clock counts whole nanoseconds: one per sleep at most
    assert rec.iteration_s == pytest.approx([rec.compute_s] * CONFIG.iterations, abs=1e-8)
    assert rec.comm_s == [0.0] * CONFIG.iterations
    assert rec.tdf == tdf
    row = rec.to_dict()
    assert row["real_iteration_s"] == pytest.approx([rec.compute_s * tdf] * CONFIG.iterations,
                                                    abs=1e-8 * tdf)
    assert row["real_compute_s"] == pytest.approx(rec.compute_s * tdf)


# ------------------------------------------------------------------------ results


def test_cpu_saturation_flag() -> None:
    """A process busy 95 % of one core is saturated; 50 % is not."""
    assert cpu_saturated(CpuLoad(0.95, 1.0))
    assert not cpu_saturated(CpuLoad(0.5, 1.0))
    assert not record(cpu=0.95).network_bound and record(cpu=0.1).network_bound


def test_results_json_round_trip(tmp_path: Path) -> None:
    """Records written as JSON read back equal, with derived fields in the file."""
    recs = [record(rank=0), record(rank=1, cpu=0.95)]
    path = write_json(tmp_path / "r.json", recs, {"note": "x"})
    doc = json.loads(path.read_text())
    assert doc["runs"][1]["network_bound"] is False
    assert doc["runs"][0]["mean_iteration_s"] == pytest.approx(0.025)
    assert read_json([path]) == recs
    row = summarize(recs)[0]
    assert row["network_bound"] is False and row["retransmissions"] == 2


def test_read_json_rejects_other_files(tmp_path: Path) -> None:
    """A JSON file of another kind is a clear error."""
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a workloads results file"):
        read_json([bad])


def test_plot_writes_png(tmp_path: Path) -> None:
    """The plot is a PNG file."""
    out = plot([record("ring"), record("innetwork", cpu=0.95)], tmp_path / "p.png", "t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------ agent and CLI


PLAN = {
    "job_id": 4, "name": "j", "credits": 2, "slots": 16, "msg_pkts": 8, "spine": None,
    "parts": {},
    "workers": [
        {"rank": r, "host": f"h{r // 2}", "gpu": r % 2, "ip": f"10.0.0.{r // 2 + 1}",
         "mac": "02:00:00:00:00:01", "switch": "s1", "switch_port": r // 2 + 1,
         "position": r, "peer": (r + 1) % 4, "send_qpn": 0x5000 + 2 * r,
         "recv_qpn": 0x5001 + 2 * r, "sport": 0xC400 + r} for r in range(4)],
}


def test_job_plan_gives_local_ranks(tmp_path: Path) -> None:
    """A controller plan file gives the job and the ranks of each host."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    job = load_job(path)
    assert job.job_id == 4 and job.size == 4 and job.predecessor(0).rank == 3
    assert local_ranks(job, "h1", None) == [2, 3]
    with pytest.raises(AgentError, match="no worker of job 4 on host 'h9'"):
        local_ranks(job, "h9", None)
    with pytest.raises(AgentError, match="different hosts"):
        local_ranks(job, None, [1, 2])


def test_agent_refuses_connections_inside_one_host(tmp_path: Path) -> None:
    """Rank 0 writing to rank 1 on the same host would bypass the switch: refused."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    with pytest.raises(AgentError, match="bypassing the switch"):
        HostAgent(load_job(path), [0, 1], bind=("127.0.0.1", 0))


@pytest.mark.parametrize("start", CC_STARTS)
def test_host_agents_allreduce_through_switch(program: ir.Program, start: str) -> None:
    """Two host agents (one worker each) all-reduce through the switch and drain cleanly,
    their windows starting as ``start`` says (line: the whole window at once)."""
    bench = SwitchBench(program, 2, endpoints=False)
    agents = [HostAgent(bench.job, [r], bind=("127.0.0.1", 0), resolve=bench.fabric.address_of,
                        window=64, start=start)
              for r in range(2)]
    try:
        for r, agent in enumerate(agents):
            req = agent.channels[r].req
            assert req.cwnd == (req.window if start == LINE_RATE else req.min_cwnd)
            assert req.min_cwnd < req.window
        for r, agent in enumerate(agents):
            bench.fabric.attach(bench.hosts[r].ip, agent.endpoint.address)
        xs = [make_input(r, 700, "float32", 3) for r in range(2)]
        out: dict[int, np.ndarray] = {}

        def run(agent: HostAgent) -> None:
            out.update({r: v[0] for r, v in agent.run(
                lambda r, ch: innetwork_allreduce(ch, xs[r])).items()})

        threads = [threading.Thread(target=run, args=(a,)) for a in agents]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert all(np.array_equal(out[r], xs[0] + xs[1]) for r in range(2))
    finally:
        for agent in agents:
            agent.close(drain_timeout=10.0, linger=0.2)
        bench.close()
    assert all(agent.endpoint.closed for agent in agents)


def test_cli_innetwork_without_plan_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Asking for in-network without a job plan exits 2 with a one-line reason."""
    assert main(["allreduce", "--algo", "innetwork", "--size", "10"]) == 2
    err = capsys.readouterr().err
    assert "needs --job" in err and "Traceback" not in err


def test_cli_ring_allreduce_checks_result(capsys: pytest.CaptureFixture[str]) -> None:
    """Two CLI ranks run a checked ring all-reduce over loopback TCP."""
    socks = [listen(("127.0.0.1", 0)) for _ in range(2)]
    peers = ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in socks)
    for s in socks:
        s.close()
    codes: list[int] = [-1, -1]

    def run(rank: int) -> None:
        codes[rank] = main(["allreduce", "--algo", "ring", "--rank", str(rank), "--peers", peers,
                            "--size", "1001", "--check", "--timeout", "20"])

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [0, 0]
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["rank"] for r in rows) == [0, 1] and all(r["check"] for r in rows)


def test_cli_dilated_rows_carry_the_factor_and_real_seconds(
        capsys: pytest.CaptureFixture[str]) -> None:
    """With --tdf 4 every row says tdf 4 and gives the real seconds beside the emulated."""
    socks = [listen(("127.0.0.1", 0)) for _ in range(2)]
    peers = ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in socks)
    for s in socks:
        s.close()
    codes: list[int] = [-1, -1]

    def run(rank: int) -> None:
        codes[rank] = main(["allreduce", "--algo", "ring", "--rank", str(rank), "--peers", peers,
                            "--size", "1001", "--check", "--timeout", "20", "--tdf", "4",
                            "--iters", "2"])

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [0, 0]
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for row in rows:
        assert row["check"] is True and row["tdf"] == 4.0
        assert row["real_seconds"] == pytest.approx([4 * s for s in row["seconds"]], abs=4e-6)


@pytest.mark.parametrize("value", ["0.5", "x", "inf"])
def test_cli_rejects_a_bad_tdf(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A time-dilation factor below 1 or not a number is a usage error naming --tdf."""
    with pytest.raises(SystemExit) as exit_:
        main(["allreduce", "--algo", "ring", "--size", "10", "--tdf", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--tdf" in err and repr(value) in err and "Traceback" not in err


def test_cli_ring_replay_writes_results_and_plot(tmp_path: Path) -> None:
    """Two CLI ranks replay a tiny ResNet-50 with ring; each writes JSON and a plot."""
    socks = [listen(("127.0.0.1", 0)) for _ in range(2)]
    peers = ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in socks)
    for s in socks:
        s.close()
    codes: list[int] = [-1, -1]

    def run(rank: int) -> None:
        codes[rank] = main(["replay", "--model", "resnet50", "--scale", "2000", "--algo", "ring",
                            "--rank", str(rank), "--peers", peers, "--iters", "1",
                            "--warmup", "0", "--bucket-mb", "0.016", "--timeout", "20",
                            "--out", str(tmp_path / f"r{rank}.json"),
                            "--plot", str(tmp_path / f"r{rank}.png")])

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [0, 0]
    recs = read_json([tmp_path / "r0.json", tmp_path / "r1.json"])
    assert [(r.algorithm, r.rank, r.workers, r.iterations) for r in recs] == \
        [("ring", 0, 2, 1), ("ring", 1, 2, 1)]
    assert (tmp_path / "r1.png").exists()


def test_cli_plot_from_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plot`` turns results files into a PNG."""
    path = write_json(tmp_path / "r.json", [record()])
    assert main(["plot", str(path), "--out", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").exists()


def test_inputs_are_deterministic_and_exactly_summable() -> None:
    """CLI inputs repeat per (rank, seed) and float inputs lie on a 2^-8 grid."""
    a, b = make_input(3, 50, "float32", 1), make_input(3, 50, "float32", 1)
    assert np.array_equal(a, b)
    assert np.array_equal(a * 256, np.round(a * 256))


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> ir.Program:
    """The program at the switch bench's E."""
    return compile_file(str(netreduce_with(E, tmp_path_factory.mktemp("program"))))


def test_job_plan_gives_the_packet_size(tmp_path: Path) -> None:
    """The plan's elems is the workers' packet size; an explicit one must agree, and a plan
    without it (an older controller's) takes the explicit one."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**PLAN, "elems": 32}))
    assert load_job(path).elems == 32
    assert load_job(path, elems=32).elems == 32
    with pytest.raises(AgentError, match="elems 64 given, but the job plan's switches carry "
                                         "32 elements per packet"):
        load_job(path, elems=64)
    path.write_text(json.dumps(PLAN))
    assert load_job(path, elems=64).elems == 64
    assert load_job(path).elems == PROGRAM_ELEMS
