"""`python -m train`: comparison outputs, the process launcher, and the interference probe."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from topo.model import HostRecord, SwitchRecord, Topology, topology_to_dict
from train.cli import main
from train.data import load_digits_split, make_shards, shards_of_rank
from train.dataserver import DataServer, ShardClient
from train.interference import measure_data_interference
from train.launch import LaunchError, plan_from_rundir
from workloads.comm import Communicator
from workloads.loopback import run_ranks


def test_compare_writes_json_and_plots(tmp_path: Path) -> None:
    """compare writes one JSON and one plot per collective plus compare.json/.png."""
    code = main(["compare", "--collectives", "fp32-ring,inswitch", "--epochs", "2",
                 "--workers", "2", "--outdir", str(tmp_path)])
    assert code == 0
    for stem in ("fp32-ring", "inswitch", "compare"):
        assert (tmp_path / f"{stem}.json").is_file()
        assert (tmp_path / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert [r["collective"] for r in doc["runs"]] == ["fp32-ring", "inswitch"]
    assert doc["fixed_point_minus_fp32_pp"] is not None
    run = json.loads((tmp_path / "inswitch.json").read_text())
    assert run["implementation"] == "inswitch-reference"
    assert len(run["history"]) == 3 and run["models_identical_on_all_ranks"]
    # time to the ring's final accuracy: the ring's own ends with it; loopback has no guard
    ring, fixed = doc["runs"]
    assert doc["target_accuracy"] == ring["final_accuracy"]
    assert ring["time_to_target_s"] == ring["train_wall_s"]
    assert fixed["time_to_target_s"] == (fixed["train_wall_s"] if fixed["final_accuracy"]
                                         >= ring["final_accuracy"] else None)
    assert ring["faithful"] is None and fixed["faithful"] is None


def test_compare_as_processes(tmp_path: Path) -> None:
    """With --processes every rank and the data server are separate processes."""
    code = main(["compare", "--collectives", "hybrid", "--epochs", "1", "--workers", "2",
                 "--processes", "--timeout", "60", "--outdir", str(tmp_path)])
    assert code == 0
    run = json.loads((tmp_path / "hybrid.json").read_text())
    assert run["transport"] == "loopback-processes"
    assert run["models_identical_on_all_ranks"]
    assert len(run["payload_sent_per_rank"]) == 2


def test_unknown_collective_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown collective exits with status 2 and names the choices."""
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--collectives", "fp32-ring,bogus"])
    assert exc.value.code == 2
    assert "bogus" in capsys.readouterr().err


def test_missing_rundir_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rundir without a running network exits 2 with a one-line reason."""
    code = main(["compare", "--collectives", "fp32-ring", "--rundir", str(tmp_path / "none"),
                 "--outdir", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: ")


def _fake_rundir(path: Path) -> None:
    switch = SwitchRecord(name="s1", device_id=1, grpc_addr="127.0.0.1:50001", role="leaf",
                          index=1, target="softswitch", cpu_port=None, ports=(), log=None)
    hosts = tuple(
        HostRecord(f"h{i}", f"10.0.1.{i}", 24, f"00:00:00:00:01:0{i}", f"h{i}-eth0", "s1", i,
                   1, i, 2)
        for i in (1, 2)
    )
    topo = Topology("star", "softswitch", (switch,), hosts, ())
    path.mkdir()
    (path / "topology.json").write_text(json.dumps(topology_to_dict(topo)))
    procs = [{"name": f"h{i}", "kind": "host-shell", "pid": 1000 + i, "pgid": None,
              "cmdline": ["bash"]} for i in (1, 2)]
    (path / "pids.json").write_text(json.dumps({"owner": {}, "processes": procs}))


def test_mininet_plan_from_rundir(tmp_path: Path) -> None:
    """Each host runs `gpus` ranks in its namespace; the data server goes on the last host."""
    _fake_rundir(tmp_path / "run")
    plan = plan_from_rundir(tmp_path / "run", tmp_path / "c.json", tmp_path / "w", 32)
    assert plan.addresses == (("10.0.1.1", 47000), ("10.0.1.1", 47001),
                              ("10.0.1.2", 47000), ("10.0.1.2", 47001))
    assert plan.data_address == ("10.0.1.2", 46999)
    cmd = plan.workers[2].command()
    assert cmd[:3] == ["nsenter", "--net=/proc/1002/ns/net", "--"]
    assert cmd[cmd.index("--rank") + 1] == "2"
    assert plan.server.netns_pid == 1002
    assert plan.ranks_per_host == 2


def test_switch_training_needs_one_rank_per_host(tmp_path: Path) -> None:
    """A job plan with two ranks on one host is refused (one RoCE endpoint per host)."""
    _fake_rundir(tmp_path / "run")
    with pytest.raises(LaunchError, match="one rank per host"):
        plan_from_rundir(tmp_path / "run", tmp_path / "c.json", tmp_path / "w", 32,
                         job_plan=tmp_path / "job.json")


def test_interference_measurement_runs() -> None:
    """All-reduce is timed quiet and under data streaming; the streamers really read data."""
    shards = make_shards(load_digits_split(8), 8)
    with DataServer(shards) as server:

        def work(comm: Communicator) -> dict[str, Any]:
            with ShardClient(server.address, timeout=10) as client:
                names = shards_of_rank(comm.rank, comm.size, 8)
                return measure_data_interference(comm, client.get, names, elements=4096,
                                                 repeats=3, loading_ranks=[1]).as_dict()

        results = run_ranks(2, work, timeout=20)
    assert results[0]["data_bytes"] == 0 and results[1]["data_bytes"] > 0
    for r in results:
        assert r["quiet_s"] > 0 and r["loaded_s"] > 0 and r["slowdown"] > 0


def test_module_entry_point_help() -> None:
    """`python -m train --help` works from the repository root."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-m", "train", "--help"], cwd=root, timeout=60,
                         capture_output=True, text=True, env={**os.environ})
    assert out.returncode == 0 and "compare" in out.stdout


def test_mininet_plan_skips_hosts_without_workers(tmp_path: Path) -> None:
    """A host with gpus = 0 (the topology's data host) runs no rank and gets the data server."""
    run = tmp_path / "run"
    _fake_rundir(run)
    doc = json.loads((run / "topology.json").read_text())
    doc["hosts"][0]["gpus"] = 0
    (run / "topology.json").write_text(json.dumps(doc))
    plan = plan_from_rundir(run, tmp_path / "c.json", tmp_path / "w", 32)
    assert plan.addresses == (("10.0.1.2", 47000), ("10.0.1.2", 47001))
    assert plan.data_address == ("10.0.1.1", 46999) and plan.server.netns_pid == 1001
    assert plan.ranks_per_host == 2


def test_interference_plan_reuses_hosts_and_data_server(tmp_path: Path) -> None:
    """The interference plan runs `train interference` in the same namespaces and addresses."""
    from train.launch import interference_plan

    _fake_rundir(tmp_path / "run")
    base = plan_from_rundir(tmp_path / "run", tmp_path / "c.json", tmp_path / "w", 32)
    plan = interference_plan(base, tmp_path / "w", 4810, 3, 32, 30.0)
    assert plan.server == base.server and plan.addresses == base.addresses
    cmd = plan.workers[3].command()
    assert cmd[:2] == ["nsenter", "--net=/proc/1002/ns/net"]
    assert cmd[cmd.index("-m") + 1:cmd.index("-m") + 3] == ["train", "interference"]
    assert cmd[cmd.index("--elements") + 1] == "4810"
    assert cmd[cmd.index("--data-server") + 1] == "10.0.1.2:46999"
    assert plan.rank_files[3] == tmp_path / "w" / "interference-rank3.json"


def test_compare_writes_extra_plot(tmp_path: Path) -> None:
    """--plot copies the accuracy-vs-time comparison plot to the given path."""
    code = main(["compare", "--collectives", "fp32-ring", "--epochs", "1", "--workers", "2",
                 "--outdir", str(tmp_path / "out"), "--plot", str(tmp_path / "img" / "a.png")])
    assert code == 0
    assert (tmp_path / "img" / "a.png").read_bytes() == (
        tmp_path / "out" / "compare.png"
    ).read_bytes()
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    rows = doc["runs"][0]["cache_per_epoch"]
    assert rows[0]["epoch"] == 1 and rows[0]["hit_rate"]["remote"] == 1.0


def test_topo_and_rundir_together_is_an_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--topo starts its own network, so --rundir with it is refused with a one-line reason."""
    code = main(["compare", "--topo", "spineleaf", "--rundir", str(tmp_path)])
    assert code == 2
    assert "--topo" in capsys.readouterr().err


# ------------------------------------------------------------------------ time dilation


def test_compare_dilated_records_the_factor_and_real_time(tmp_path: Path) -> None:
    """--tdf 2: the run says so, and gives the real training time beside the emulated."""
    code = main(["compare", "--collectives", "fp32-ring", "--epochs", "1", "--workers", "2",
                 "--tdf", "2", "--outdir", str(tmp_path)])
    assert code == 0
    run = json.loads((tmp_path / "fp32-ring.json").read_text())
    assert run["tdf"] == 2.0
    assert run["train_wall_real_s"] == pytest.approx(2 * run["train_wall_s"])
    epoch = run["history"][1]
    assert epoch["real_epoch_s"] == pytest.approx(2 * epoch["epoch_s"])


def test_compare_as_dilated_processes(tmp_path: Path) -> None:
    """--processes --tdf 2: every rank and the data server run dilated (--tdf reaches them)."""
    code = main(["compare", "--collectives", "fp32-ring", "--epochs", "1", "--workers", "2",
                 "--processes", "--timeout", "60", "--tdf", "2", "--outdir", str(tmp_path)])
    assert code == 0
    run = json.loads((tmp_path / "fp32-ring.json").read_text())
    assert run["transport"] == "loopback-processes" and run["tdf"] == 2.0


def test_dilated_plans_give_every_process_the_factor(tmp_path: Path) -> None:
    """A plan's tdf goes to every rank, the data server and the interference ranks; at real
    time the command lines stay as they were."""
    from train.launch import interference_plan, plan_loopback

    plan = plan_loopback(tmp_path / "c.json", tmp_path, 2, 8, tdf=3.0)
    probe = interference_plan(plan, tmp_path, 100, 2, 8, 30.0)
    for proc in (plan.server, *plan.workers, *probe.workers):
        assert proc.argv[-2:] == ("--tdf", "3")
    assert plan.tdf == probe.tdf == 3.0
    real = plan_loopback(tmp_path / "c.json", tmp_path, 2, 8)
    assert all("--tdf" not in p.argv for p in (real.server, *real.workers))


def test_testbed_dilates_its_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spine-leaf testbed starts its network with the run's tdf (links at bw/tdf, the
    switches' clocks dilated), the same tdf its training processes get, and on make run's
    packet engine (the C data path) unless told otherwise."""
    import train.testbed as testbed

    monkeypatch.delenv("SOFTSWITCH_ENGINE", raising=False)
    seen: dict[str, object] = {}

    class FakeLab:
        def __init__(self, topo: object, target: str, rundir: object, program: object,
                     **kw: object) -> None:
            seen.update(kw)

        def start(self) -> FakeLab:
            raise testbed.TopoError("stop here")

    monkeypatch.setattr(testbed, "ExperimentNetwork", FakeLab)
    with pytest.raises(testbed.TestbedError, match="stop here"):
        testbed.TrainingTestbed(testbed.TestbedOptions(tdf=2.0)).start()
    assert seen["start"] == testbed.StartOptions(tdf=2.0, engine="c")
    with pytest.raises(testbed.TestbedError, match="stop here"):
        testbed.TrainingTestbed(testbed.TestbedOptions(engine="python")).start()
    assert seen["start"] == testbed.StartOptions(engine="python")


def test_compare_starts_the_network_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """`compare --topo` takes rates with units, a link delay, the engine and a TDF, and the
    testbed builds that spine-leaf (100 GbE with 2 us links, as in the papers)."""
    import train.testbed as testbed

    seen: list[testbed.TestbedOptions] = []

    def fake_start(self: testbed.TrainingTestbed) -> None:
        seen.append(self.options)
        raise testbed.TestbedError("stop here")

    monkeypatch.setattr(testbed.TrainingTestbed, "start", fake_start)
    code = main(["compare", "--topo", "spineleaf", "--bw", "100G", "--delay", "2us",
                 "--tdf", "5000", "--engine", "python", "--collectives", "inswitch"])
    assert code == 2
    opts = seen[0]
    assert (opts.bw_mbit, opts.delay_s, opts.tdf, opts.engine) == (100_000.0, 2e-6, 5000.0,
                                                                   "python")
    topo = opts.topology()
    assert topo.host_shape.bw_bps == 100e9 and topo.host_shape.delay_s == 2e-6


def test_dilated_testbed_gives_the_agents_timers_of_the_emulated_network() -> None:
    """At TDF 5,000 the in-network agents' timer bounds are make run's for that network:
    the real-time bounds shrunk by the TDF, never below the emulated round trip (their
    defaults are emulated seconds: 50 ms emulated is 250 s real there); at real time
    without delays the agents keep their defaults."""
    from experiment.dilation import longest_rtt, timer_bounds
    from train.testbed import TestbedOptions, TrainingTestbed

    opts = TestbedOptions(bw_mbit=100_000.0, delay_s=2e-6, tdf=5000.0)
    low, high = TrainingTestbed(opts).agent_timers() or (0.0, 0.0)
    rtt = longest_rtt(opts.topology().spec)
    assert rtt > 0 and (low, high) == timer_bounds("softswitch", 5000.0, rtt)
    assert 2 * rtt <= low < 0.01 and high < 0.1
    assert TrainingTestbed(TestbedOptions()).agent_timers() is None


def test_workers_get_the_agent_timers_and_reject_bad_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan passes the timer bounds to every in-switch rank (--agg-timers); a malformed
    value is a usage error naming it."""
    from train.launch import _worker_argv

    argv = _worker_argv(0, [("10.0.0.1", 47000)], ("10.0.0.9", 46999), tmp_path / "c.json",
                        tmp_path, tmp_path / "r.json", 60.0, tmp_path / "job.json", 5000.0,
                        (0.0001, 0.0004))
    assert argv[argv.index("--agg-timers") + 1] == "0.0001,0.0004"
    assert "--agg-timers" not in _worker_argv(0, [("10.0.0.1", 47000)], ("10.0.0.9", 46999),
                                              tmp_path / "c.json", tmp_path,
                                              tmp_path / "r.json", 60.0, None, 5000.0,
                                              (0.0001, 0.0004))
    with pytest.raises(SystemExit):
        main(["worker", "--rank", "0", "--addresses", "a:1", "--data-server", "a:2",
              "--config", "c", "--cache-dir", "d", "--out", "o", "--agg-timers", "0.2,0.1"])
    assert "'0.2,0.1': expected LOW,HIGH seconds with 0 < LOW <= HIGH" in capsys.readouterr().err


def test_a_highly_dilated_launch_polls_the_data_server_in_real_time(tmp_path: Path) -> None:
    """Regression: the launcher polled for the data server's ready file every 50 emulated
    ms, 1,000 s of real time at TDF 20,000 (a 100 GbE training run never started a rank)."""
    import subprocess
    import sys
    import threading

    from train.launch import _wait_server_ready, plan_loopback
    from vtime import VirtualClock

    plan = plan_loopback(tmp_path / "c.json", tmp_path, 2, 8, tdf=20000.0)
    clock = VirtualClock(20000.0)
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        waiter = threading.Thread(target=_wait_server_ready,
                                  args=(plan, server, clock, clock.now() + 60.0, tmp_path),
                                  daemon=True)
        waiter.start()
        threading.Timer(0.2, plan.server_ready.write_text, args=("{}",)).start()
        waiter.join(10.0)
        assert not waiter.is_alive(), "still waiting 10 s after the server was ready"
    finally:
        server.kill()
        server.wait()


def test_compare_tdf_auto_needs_a_network_of_its_own(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """--tdf auto calibrates a network compare starts; on a running one (--rundir) it is an
    error that says what to give instead."""
    code = main(["compare", "--rundir", str(tmp_path), "--tdf", "auto"])
    assert code == 2
    assert "--tdf auto: calibrates only a network this command starts" in (
        capsys.readouterr().err)


def test_train_rejects_a_bad_tdf(capsys: pytest.CaptureFixture[str]) -> None:
    """--tdf below 1 is a usage error that names the flag and the value."""
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--tdf", "0"])
    assert exc.value.code == 2
    assert "--tdf: '0' must be a finite number >= 1" in capsys.readouterr().err


def test_the_comparison_plot_picks_the_time_unit_that_fits() -> None:
    """Emulated 100 GbE trains in ms: the axis is in ms there, seconds at 10 Mbit/s."""
    from train.report import time_axis

    assert time_axis(1.86e-3) == ("ms", 1e3)
    assert time_axis(9.6) == ("s", 1.0)
    assert time_axis(4e-4) == ("us", 1e6)
    assert time_axis(0.0) == ("us", 1e6)


def test_sigterm_stops_compare_like_ctrl_c(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """SIGTERM mid-compare unwinds as Ctrl-C does (the network and ranks are stopped by
    their ``with`` blocks): exit 130 with one line, no traceback; the caller's SIGTERM
    handler is back afterwards."""
    import signal
    import time

    import train.cli as cli

    def killed(_args: object) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        return 0

    monkeypatch.setattr(cli, "_compare", killed)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["compare", "--collectives", "fp32-ring"]) == 130
    assert "interrupted: every process and network it started is stopped" in (
        capsys.readouterr().err)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_run_the_guard_rejects_makes_compare_fail(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A run whose emulation did not keep up is written and drawn (hollow), but compare
    exits 1 and says the comparison is not fit to publish."""
    import dataclasses

    import train.cli as cli

    real = cli.run_loopback

    def unfaithful(*args: Any, **kwargs: Any) -> Any:
        exp = real(*args, **kwargs)
        return dataclasses.replace(exp, network={"fidelity": {
            "faithful": False, "tdf": 1.0, "checks": [],
            "summary": "NOT faithful: machine CPU: 1.9 of 2 cores"}})

    monkeypatch.setattr(cli, "run_loopback", unfaithful)
    code = main(["compare", "--collectives", "fp32-ring", "--epochs", "1", "--workers", "2",
                 "--outdir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 1
    assert "fidelity: NOT faithful: machine CPU" in out.out
    assert "the emulation did not keep up in fp32-ring" in out.err
    assert json.loads((tmp_path / "compare.json").read_text())["runs"][0]["faithful"] is False


def test_the_guard_judges_the_machine_latency_per_training_step() -> None:
    """The calibrated fixed cost of an exchange, over the TDF, against one step's exchange:
    43 ms at TDF 125,000 is 0.34 us, 3.2 % of a 10.6 us step."""
    from train.testbed import fixed_cost_share
    from train.trainer import EpochRecord, RankResult

    def epoch(n: int, steps: int, comm_s: float) -> EpochRecord:
        return EpochRecord(n, 0.5, 0.5, 0.9, 0.0, comm_s, comm_s, steps=steps)

    rank = RankResult(0, "inswitch", [EpochRecord(0, None, 2.3, 0.1, 0.0),
                                      epoch(1, 11, 11 * 10.6e-6), epoch(2, 11, 11 * 10.6e-6)],
                      "", [])
    share = fixed_cost_share(0.043, 125_000, [rank])
    assert share is not None and share == pytest.approx(0.043 / 125_000 / 10.6e-6)
    assert 0.03 < share < 0.035
    assert fixed_cost_share(0.0, 125_000, [rank]) is None  # not calibrated
    assert fixed_cost_share(0.043, 125_000, []) is None
