"""The pieces of ``make run`` that need no root: options, summary, experiment bookkeeping,
host commands on loopback, the device-config bundle."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from experiment.lifecycle import LinkUsage, collect_rows, link_usage
from experiment.run import (
    DEFAULT_ELEMS,
    Summary,
    SwitchStatus,
    _program,
    bottleneck,
    build_topology,
    calibration_rundir,
    experiment_options,
    ideal_ratio,
    links_line,
    main,
    parse_args,
    print_experiment,
    ratio_line,
    retransmissions_cell,
    rtt_line,
)
from experiment.seams import JsonObject, json_list, json_object
from experiment.session import (
    AllreduceRun,
    ExperimentOptions,
    ExperimentResult,
    RankOutcome,
    _outcome,
    allreduce_argv,
    collect,
    with_target_timers,
)
from sim.emulation import tcp_payload_share
from topo import hostcmd
from topo.model import Topology, describe
from topo.network import bundle_device_config
from topo.nodes import ProgramBuild
from topo.topologies import DEFAULT_HOST_BW_BPS, SpineLeafTopo
from workloads.rocecomm import payload_share

PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"


def _topology() -> Topology:
    return describe(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, host_bw=10),
                    target="softswitch")


def _run(algo: str, exact: bool = True, error: str | None = None, seconds: float = 0.5,
         busiest_bytes: int = 625_000, cpu: float = 0.95) -> AllreduceRun:
    ranks = (RankOutcome(0, "h1", seconds, 1000, exact, 0, error),
             RankOutcome(1, "h2", 0.25, 1000, True))
    links = (LinkUsage("l1", 3, "sp1", "fabric", busiest_bytes, 0, 10e6, 1.0),
             LinkUsage("l1", 1, "h1", "host", 100_000, 250_000, 10e6, 1.0))
    return AllreduceRun(algo, 1024, ranks, links, {"l1": cpu, "sp1": 0.2}, 2.0)


def test_defaults_and_test_options() -> None:
    """Defaults are a 2x2x2 spine-leaf with the CLI; prefix and gRPC port reach the topology."""
    args = parse_args([])
    assert (args.topo, args.no_cli, args.elements, args.tdf) == ("spineleaf", False, None, "auto")
    default = build_topology(args)
    assert (default.spec.params["spines"], default.spec.params["leaves"]) == (2, 2)
    assert sorted(default.switches()) == ["l1", "l2", "sp1", "sp2"]
    topo = build_topology(parse_args(["--topo", "rack", "--hosts", "3", "--name-prefix", "zz",
                                      "--grpc-port", "41000"]))
    assert sorted(topo.switches()) == ["zzs1"]
    assert topo.nodeInfo("zzs1")["grpc_port"] == 41000


def test_thrift_port_base_reaches_bmv2_records() -> None:
    """--thrift-port moves BMv2's Thrift ports; topology.json records them for BMv2 only."""
    topo = build_topology(parse_args(["--topo", "spineleaf", "--thrift-port", "42000"]))
    assert {n: topo.nodeInfo(n)["thrift_port"] for n in topo.switches()} == {
        "l1": 42000, "l2": 42001, "sp1": 42002, "sp2": 42003}
    assert [s.thrift_port for s in describe(topo, target="bmv2").switches] == [
        42000, 42001, 42002, 42003]
    assert {s.thrift_port for s in describe(topo, target="softswitch").switches} == {None}


def test_summary_counts_innetwork_retransmissions() -> None:
    """The retx column sums the in-network ranks' retransmissions (the ring has none)."""
    console = Console(record=True, width=160)
    job: JsonObject = {"name": "allreduce", "job_id": 0, "workers": [{}, {}], "parts": {}}
    inn = _run("innetwork")
    inn = AllreduceRun(inn.algorithm, inn.elements,
                       tuple(RankOutcome(r.rank, r.host, r.seconds, r.bytes_sent, True, 268,
                                         None, 5, 1, 2)
                             for r in inn.ranks), inn.links, inn.switch_cpu, inn.wall_seconds)
    print_experiment(ExperimentResult(job, (inn, _run("ring"))), console)
    cells = [[c.strip() for c in line.split("│")[1:-1]]
             for line in console.export_text().splitlines() if line.startswith("│")]
    retx = {row[0]: row[3] for row in cells}
    assert retx == {"innetwork": "536 (12 losses)", "ring": "-"}
    # timeouts that ACKs showed to be spurious are no loss (a loaded machine's late timer)
    late = AllreduceRun("innetwork", 1, (RankOutcome(0, "h1", 1.0, 1, True, 64, None, 1, 1),))
    assert retransmissions_cell(late) == "64 (spurious)"
    assert late.ranks[0].loss_seen == 0


def test_link_bound_defaults() -> None:
    """make run's defaults: 3 Mbit/s links, E = 252 (full path MTU with the tag; wrapper
    program), 65536 float32, 4 credits x 64-packet messages."""
    args = parse_args([])
    defaults = experiment_options(args)
    assert args.elements is None  # sized from the network (experiment.dilation)
    assert (args.elems, defaults.elements, defaults.credits, defaults.slots) == (
        252, 65536, 4, 256)
    assert DEFAULT_HOST_BW_BPS == 3e6 and DEFAULT_ELEMS == 252
    opts = experiment_options(parse_args(["--elements", "100", "--elems", "16",
                                          "--credits", "4", "--slots", "256"]))
    assert (opts.elements, opts.elems, opts.credits, opts.slots) == (100, 16, 4, 256)
    topo = describe(build_topology(args), target="softswitch")
    assert {ln.bw_bps for ln in topo.links} == {3e6}


def test_default_tensor_covers_the_bandwidth_delay_product() -> None:
    """With delay the default tensor grows until its transfer lasts 20 round trips: at
    100 Gbit/s and 2 us links (16 us round trip) that is 1 Mi float32."""
    fast = build_topology(parse_args(["--bw", "100G", "--delay", "2us"]))
    opts = experiment_options(parse_args(["--bw", "100G", "--delay", "2us"]), fast)
    assert opts.elements == 1 << 20
    assert opts.elements * 32 / 100e9 >= 20 * 16e-6
    given = experiment_options(parse_args(["--bw", "100G", "--delay", "2us", "--elements",
                                           "4096"]), fast)
    assert given.elements == 4096


def test_elems_option_rejects_sizes_the_program_cannot_build(
    capsys: pytest.CaptureFixture[str]
) -> None:
    """--elems takes multiples of 4 up to 256 and names the rule otherwise."""
    assert parse_args(["--elems", "256"]).elems == 256
    for bad in ("250", "260", "0", "x"):
        with pytest.raises(SystemExit):
            parse_args(["--elems", bad])
        assert "--elems" in capsys.readouterr().err


def test_link_check_seconds_option(capsys: pytest.CaptureFixture[str]) -> None:
    """--link-check-seconds sets how long the link check runs (0 skips it); a negative or
    non-numeric value is refused with the option and the value named."""
    assert experiment_options(parse_args([])).measure_seconds == 3.0
    assert experiment_options(parse_args(["--link-check-seconds", "0"])).measure_seconds == 0.0
    assert experiment_options(parse_args(["--link-check-seconds", "1.5"])).measure_seconds == 1.5
    for bad in ("-1", "x", "nan", "inf"):
        with pytest.raises(SystemExit):
            parse_args(["--link-check-seconds", bad])
        err = capsys.readouterr().err
        assert "--link-check-seconds" in err and bad in err


def test_program_wrapper_defines_elems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default program is netreduce.p4 itself (E = 252), a NR_ELEMS wrapper otherwise."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p4src").mkdir()
    (tmp_path / "p4src" / "netreduce.p4").write_text("/* the program */\n")
    assert _program(parse_args([])) == Path("p4src/netreduce.p4")
    assert _program(parse_args(["--elems", "252"])) == Path("p4src/netreduce.p4")
    wrapper = _program(parse_args(["--elems", "32"]))
    assert wrapper is not None and wrapper.name == "netreduce_e32.p4"
    assert (tmp_path / wrapper).resolve() == (tmp_path / "build" / "netreduce_e32.p4").resolve()
    assert "#define NR_ELEMS 32" in wrapper.read_text()
    assert _program(parse_args(["--no-program"])) is None
    assert _program(parse_args(["--program", str(PROGRAM)])) == PROGRAM


@pytest.mark.parametrize("option", [["--elements", "0"], ["--grpc-port", "x"],
                                    ["--elems", "50"], ["--credits", "0"],
                                    ["--egress-order", "lifo"], ["--seed", "3"],
                                    ["--egress-order", "random", "--seed", "-2"]])
def test_bad_options_exit_2(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """A bad option is one usage error and status 2."""
    with pytest.raises(SystemExit) as info:
        parse_args(option)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_rate_and_delay_options_take_units() -> None:
    """--bw/--fabric-bw/--intra-bw with k/M/G/T (a bare number is Mbit/s), --delay with
    ns/us/ms/s, all parsed by vtime.units to bits/s and seconds."""
    args = parse_args(["--bw", "100G", "--fabric-bw", "25g", "--delay", "2us",
                       "--intra-bw", "150GB/s"])
    assert (args.bw, args.fabric_bw, args.intra_bw) == (100e9, 25e9, 1.2e12)
    assert args.delay == pytest.approx(2e-6)
    assert parse_args(["--bw", "3"]).bw == 3e6
    assert parse_args(["--bw", "0.5"]).bw == 0.5e6
    assert parse_args(["--delay", "1.5ms"]).delay == pytest.approx(1.5e-3)


@pytest.mark.parametrize("option, needle", [
    (["--bw", "10X"], "argument --bw: '10X' is not a rate"),
    (["--bw", "0"], "argument --bw: '0' must be a positive rate"),
    (["--fabric-bw", "fast"], "argument --fabric-bw: 'fast' is not a rate"),
    (["--intra-bw", "1Q"], "argument --intra-bw: '1Q' is not a rate"),
    (["--delay", "2"], "argument --delay: '2' needs a unit (ns, us, ms or s), e.g. 2us"),
    (["--delay", "1h"], "argument --delay: '1h' is not a delay"),
])
def test_bad_rates_and_delays_name_option_and_value(option: list[str], needle: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A bad rate or delay is one usage line naming the option and the value; status 2."""
    with pytest.raises(SystemExit) as info:
        parse_args(option)
    err = capsys.readouterr().err
    assert info.value.code == 2 and needle in err and "Traceback" not in err


def test_undilated_100g_run_is_refused_clearly(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`make run bw=100G` without time dilation: status 1 and one error line that says to
    use time dilation, before any network is built."""
    status = main(["--bw", "100G", "--no-cli", "--no-program", "--rundir",
                   str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("error: link rate 100 Gbit/s: above the 1 Gbit/s")
    assert "time dilation, tdf=100 or more" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_egress_order_options() -> None:
    """make run egress=random seed=N: the options the switches get (sync by default)."""
    args = parse_args([])
    assert (args.egress_order, args.seed) == ("sync", None)
    args = parse_args(["--egress-order", "random", "--seed", "7"])
    assert (args.egress_order, args.seed) == ("random", 7)


def test_summary_ok_needs_exact_results() -> None:
    """Status 0 needs every switch up and, after an experiment, every all-reduce exact."""
    up = (SwitchStatus("l1", 0, "127.0.0.1:1", 1, True, "ready"),)
    down = (SwitchStatus("l1", 0, "127.0.0.1:1", None, False, "process exited"),)
    exact = ExperimentResult({}, (_run("innetwork"), _run("ring")))
    wrong = ExperimentResult({}, (_run("innetwork"), _run("ring", exact=False)))
    assert Summary(_topology(), up).ok
    assert not Summary(_topology(), down).ok
    assert Summary(_topology(), up, experiment=exact).ok
    assert not Summary(_topology(), up, experiment=wrong).ok
    assert not Summary(_topology(), up, experiment=ExperimentResult({}, ())).ok


def test_run_exactness_and_derived_values() -> None:
    """A run is exact only when every rank checked equal; busiest link and saturation."""
    run = _run("innetwork")
    assert run.exact and run.seconds == 0.5
    assert run.busiest is not None and (run.busiest.switch, run.busiest.port) == ("l1", 3)
    assert run.busiest.mbit_per_s == pytest.approx(5.0)
    assert run.busiest.utilization == pytest.approx(0.5)
    assert run.saturated_switches == ["l1"]
    failed = _run("ring", exact=False, error="result differs from the exact sum")
    assert not failed.exact
    assert failed.errors == ["rank 0 (h1): result differs from the exact sum"]


def test_result_json_spells_out_derived_values() -> None:
    """to_dict has exact, per-run seconds, per-link utilisation and saturated switches."""
    data = json.loads(json.dumps(ExperimentResult({"name": "j"}, (_run("ring"),),
                                                  elems=64).to_dict()))
    run = data["runs"][0]
    assert data["exact"] is True and run["seconds"] == 0.5 and data["elems"] == 64
    assert run["links"][0]["utilization"] == pytest.approx(0.5)
    assert run["saturated_switches"] == ["l1"]
    # rates with units beside the numbers (bw_mbit kept for older readers)
    assert run["links"][0]["bw"] == "10 Mbit/s" and run["links"][0]["bw_bps"] == 10e6
    assert run["links"][0]["bw_mbit"] == 10.0 and run["links"][0]["rate"] == "5 Mbit/s"


def test_result_json_records_the_link_classes() -> None:
    """experiment.json lists each class of links with rate and delay, numbers and text."""
    topo = describe(SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=1, host_bw="1G",
                                  fabric_bw="500M", delay="2us"), target="softswitch")
    data = json.loads(json.dumps(ExperimentResult({}, (), link_classes=tuple(
        topo.link_classes())).to_dict()))
    assert {c["kind"]: (c["bw"], c["bw_bps"], c["delay"], c["links"]) for c in data["links"]} \
        == {"host": ("1 Gbit/s", 1e9, "2 us", 2), "fabric": ("500 Mbit/s", 5e8, "2 us", 2)}
    assert links_line(topo) == "fabric 500 Mbit/s delay 2 us, host 1 Gbit/s delay 2 us"
    bare = describe(SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, host_bw=None),
                    target="softswitch")
    assert links_line(bare) == "fabric unshaped, host unshaped"


def test_link_usage_matches_ports_to_links() -> None:
    """Counter deltas per switch port, labelled with the link's kind and shaped rate."""
    topo = _topology()
    before = {("l1", 3): (100, 200)}
    after = {("l1", 3): (1100, 1200), ("l1", 1): (10, 20)}
    usage = {(u.switch, u.port): u for u in link_usage(topo, before, after, 2.0)}
    assert len(usage) == sum(len(s.ports) for s in topo.switches)
    up = usage[("l1", 3)]
    assert (up.peer, up.kind, up.bw_bps, up.rx_bytes, up.tx_bytes) == ("sp1", "fabric", 10e6,
                                                                       1000, 1000)
    assert usage[("l1", 1)].kind == "host" and usage[("sp2", 2)].tx_bytes == 0


def test_print_experiment_shows_result_time_link_and_cpu() -> None:
    """The summary table says exact/NOT exact, the time, the busiest link and switch CPU."""
    console = Console(record=True, width=160)
    job: JsonObject = {"name": "allreduce", "job_id": 0, "workers": [{}, {}],
                       "parts": {"l1": {"role": "root"}}}
    print_experiment(ExperimentResult(job, (_run("innetwork"), _run("ring", exact=False))),
                     console)
    text = console.export_text()
    assert "aggregation job allreduce (id 0): 2 workers" in text
    assert "innetwork" in text and "exact" in text and "NOT exact" in text
    assert "500 ms" in text and "l1:3 5 Mbit/s 50%" in text
    assert "l1 95% (saturated)" in text
    assert "CPU-bound (l1)" in text
    assert "flag: innetwork was CPU-bound (l1)" in text
    assert "fabric links (busier direction): l1:3 5 Mbit/s" in text


def test_bottleneck_verdicts() -> None:
    """Link-bound needs >= 70 % on the busiest link and no saturated switch process."""
    assert bottleneck(_run("ring", busiest_bytes=1_000_000, cpu=0.3)) == (True, "link-bound")
    assert bottleneck(_run("ring", busiest_bytes=1_000_000, cpu=0.95)) == (
        False, "CPU-bound (l1)")
    assert bottleneck(_run("ring", busiest_bytes=500_000, cpu=0.3)) == (
        False, "not link-bound (busiest link 40%)")


def test_switches_that_fill_the_machine_make_a_run_cpu_bound() -> None:
    """BMv2's spine-leaf: no switch alone near a core, but together 1.8 of 2 cores while the
    collective ran; a link at 80 % does not make that run link-bound."""
    base = _run("innetwork", busiest_bytes=1_000_000, cpu=0.5)
    full = dataclasses.replace(base, switches_cores=1.8, machine_cores=2)
    assert not base.switches_fill_machine and full.switches_fill_machine
    assert bottleneck(full) == (False, "CPU-bound (switches 1.8 of 2 cores)")
    assert bottleneck(dataclasses.replace(full, switches_cores=1.2)) == (True, "link-bound")
    data = ExperimentResult({}, (full,)).to_dict()
    run = json_object(json_list(data["runs"])[0])
    assert run["switches_fill_machine"] is True
    assert run["switches_cores"] == 1.8


def test_ideal_ratio_and_frame_correction() -> None:
    """2(P-1)/P, and the same scaled by aggregation-frame over TCP-frame payload share (half
    an ACK per TCP segment; on a host link the tag share of a message (32 packets, or the
    default 64) and a RoCE ACK per 16 packets, on a leaf-spine link RETH + tag on every
    packet)."""
    assert ideal_ratio(4) == (1.5, None)
    ideal, framed = ideal_ratio(4, 64, msg_pkts=32, window=64)
    tcp = 1448 / (1514 + 33)
    assert ideal == 1.5 and framed == pytest.approx(1.5 * (256 / (314 + 1 + 4)) / tcp)
    assert ideal_ratio(4, 64)[1] == pytest.approx(1.5 * (256 / (314 + 0 + 4)) / tcp)
    assert ideal_ratio(4, 64, spine=True)[1] == pytest.approx(1.5 * (256 / 346) / tcp)
    assert ideal_ratio(8)[0] == pytest.approx(1.75)


def test_summary_states_ratio_and_link_bound_runs() -> None:
    """Both runs link-bound: no flag; the measured ratio is printed beside the ideal."""
    result = ExperimentResult({"name": "j", "job_id": 1, "workers": [{}, {}]},
                              (_run("innetwork", seconds=0.8, busiest_bytes=1_000_000, cpu=0.3),
                               _run("ring", seconds=1.0, busiest_bytes=1_100_000, cpu=0.1)))
    console = Console(record=True, width=200)
    print_experiment(result, console, elems=64)
    text = console.export_text()
    assert text.count("link-bound") == 2 and "flag:" not in text and "NOT" not in text
    assert ("ring / in-network time: 1.25 measured, ideal 2(P-1)/P = 1.00 for P = 2 "
            "(0.86 counting frame sizes at E = 64, host-link packets)") in text
    assert ratio_line(result) == ("ring / in-network time: 1.25 measured, ideal "
                                  "2(P-1)/P = 1.00 for P = 2")
    inexact = ExperimentResult({}, (_run("innetwork"), _run("ring", exact=False)))
    assert ratio_line(inexact) is None
    two_level = ExperimentResult({"parts": {"l1": {"role": "leaf"}, "sp1": {"role": "root"}}},
                                 result.runs)
    line = ratio_line(two_level, 64)
    assert line is not None and line.endswith("(0.79 counting frame sizes at E = 64, "
                                              "leaf-spine packets)")


def test_allreduce_argv_for_ring_and_innetwork(tmp_path: Path) -> None:
    """Ring ranks get --rank/--peers, in-network agents --job/--host; both --check."""
    opts = ExperimentOptions(elements=100, seed=3, timeout_s=9)
    ring = allreduce_argv("ring", opts, rank=1, peers="10.0.1.1:5400,10.0.1.2:5401")
    assert ring[:4] == [sys.executable, "-m", "workloads", "allreduce"]
    assert ring[ring.index("--rank") + 1] == "1" and "--check" in ring
    assert ring[ring.index("--size") + 1] == "100" and ring[ring.index("--seed") + 1] == "3"
    inn = allreduce_argv("innetwork", opts, host="h2", plan_path=tmp_path / "job.json")
    assert inn[inn.index("--job") + 1] == str(tmp_path / "job.json")
    assert inn[inn.index("--host") + 1] == "h2" and "--peers" not in inn
    assert "--rto" not in inn and "--max-rto" not in inn  # the agent's own defaults


def test_several_gpus_per_host_run_every_gpu_as_a_rank_or_the_hierarchical_agent(
        tmp_path: Path) -> None:
    """With 2 GPUs per host the baselines run a ring over every GPU (ranks host by host) and
    innetwork-hier's agent sums each host's 2 tensors over the host's intra-host rate;
    flat innetwork, which runs one worker per host here, is refused with the reason."""
    from experiment.lifecycle import ExperimentNetwork
    from experiment.session import ExperimentError, baseline_ranks, run_allreduce

    hosts: list[JsonObject] = [{"rank": 0, "host": "h1", "ip": "10.0.1.1"},
                               {"rank": 1, "host": "h2", "ip": "10.0.1.2"}]
    ranks = baseline_ranks(hosts, 2)
    assert [(r["rank"], r["host"]) for r in ranks] == [(0, "h1"), (1, "h1"), (2, "h2"), (3, "h2")]
    opts = ExperimentOptions(gpus_per_host=2)
    hier = allreduce_argv("innetwork-hier", opts, host="h1", plan_path=tmp_path / "job.json",
                          intra_bw_bps=200e9)
    # the workload's own name for it: innetwork --hierarchical (it refuses innetwork-hier)
    assert hier[hier.index("--algo") + 1] == "innetwork" and "--hierarchical" in hier
    assert hier[hier.index("--gpus") + 1] == "2"
    assert hier[hier.index("--intra-bw") + 1] == "200000000000bit/s"
    flat = allreduce_argv("innetwork", ExperimentOptions(), host="h1", plan_path=tmp_path)
    assert "--hierarchical" not in flat and "--intra-bw" not in flat

    class Running:
        topology = SimpleNamespace(target="softswitch")

    lab = ExperimentNetwork.around(Running(), controller=object())  # type: ignore[arg-type]
    with pytest.raises(ExperimentError, match="innetwork runs one worker per host here, not 2: "
                                              "with several GPUs per host run innetwork-hier"):
        run_allreduce(lab, None, {"workers": list(hosts)}, "innetwork", opts,
                      tmp_path / "job.json")


def test_baseline_transport_picks_the_ring(capsys: pytest.CaptureFixture[str]) -> None:
    """--baseline-transport: TCP by default, roce runs ring-roce beside in-network (one
    process per host, its ranks listed, port 4791, the ring's own timers); a bad value
    names the option and the value."""
    assert experiment_options(parse_args([])).algorithms == ("innetwork", "ring")
    opts = experiment_options(parse_args(["--baseline-transport", "roce"]))
    assert opts.algorithms == ("innetwork", "ring-roce")
    argv = allreduce_argv("ring-roce", with_target_timers(opts, "bmv2"), rank="0,1",
                          peers="10.0.1.1:4791,10.0.1.1:4791")
    assert argv[argv.index("--algo") + 1] == "ring-roce"
    assert argv[argv.index("--rank") + 1] == "0,1" and "--rto" not in argv
    assert argv[argv.index("--window") + 1] == "256"  # the agents': 4 credits x 64 packets
    with pytest.raises(SystemExit):
        parse_args(["--baseline-transport", "rdma"])
    err = capsys.readouterr().err
    assert "--baseline-transport 'rdma': choose from tcp, roce" in err


def test_cc_start_reaches_the_agents_and_the_roce_ring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--cc-start line: the in-network agents and the RoCE ring start with their whole
    window (the TCP ring has no such option); the default passes nothing; a bad value names
    the option and the value."""
    assert experiment_options(parse_args([])).cc_start == "slow"
    opts = experiment_options(parse_args(["--baseline-transport", "roce", "--cc-start", "line"]))
    assert opts.cc_start == "line"
    roce = allreduce_argv("ring-roce", opts, rank="0,1", peers="10.0.1.1:4791,10.0.1.1:4791")
    inn = allreduce_argv("innetwork", opts, host="h1", plan_path=tmp_path / "job.json")
    tcp = allreduce_argv("ring", opts, rank=0, peers="10.0.1.1:5400,10.0.1.2:5401")
    assert roce[-2:] == ["--cc-start", "line"] and inn[-2:] == ["--cc-start", "line"]
    assert "--cc-start" not in tcp
    slow = experiment_options(parse_args(["--baseline-transport", "roce"]))
    assert "--cc-start" not in allreduce_argv("ring-roce", slow, rank=0,
                                              peers="10.0.1.1:4791,10.0.1.2:4791")
    with pytest.raises(SystemExit):
        parse_args(["--cc-start", "fast"])
    assert "--cc-start 'fast': choose from slow, line" in capsys.readouterr().err


def test_the_smallest_round_trips_are_reported_per_algorithm() -> None:
    """Each rank's smallest sampled round trip (us in its row) reaches the run, which keeps
    the smallest of the ranks that sampled any; the summary names them per algorithm, and
    says nothing when no transport sampled one (the TCP ring)."""
    row: JsonObject = {"seconds": [1e-3], "check": True, "rtt_min_us": 9.5}
    ranks = (_outcome({"rank": 0, "host": "h1"}, row, None),
             _outcome({"rank": 1, "host": "h2"}, {**row, "rtt_min_us": 8.25}, None),
             _outcome({"rank": 2, "host": "h3"}, {"seconds": [1e-3], "check": True}, None))
    assert ranks[0].rtt_min_s == pytest.approx(9.5e-6) and ranks[2].rtt_min_s == 0.0
    inn = AllreduceRun("innetwork", 10, ranks)
    tcp = AllreduceRun("ring", 10, ranks[2:])
    assert inn.smallest_rtt == pytest.approx(8.25e-6) and tcp.smallest_rtt == 0.0
    line = rtt_line(ExperimentResult({}, (inn, tcp)))
    assert line == "smallest round trips sampled (emulated): innetwork 8.25 us"
    assert rtt_line(ExperimentResult({}, (tcp,))) is None


def _settle_summary(times: dict[str, float], resent: int = 0) -> Summary:
    """A run whose all-reduces took ``times`` (emulated s), exact, ``resent`` packets resent
    by the first one's rank."""
    runs = tuple(AllreduceRun(algo, 10, (RankOutcome(0, "h1", t, exact=True,
                                                      retransmissions=resent if i == 0 else 0),))
                 for i, (algo, t) in enumerate(times.items()))
    up = (SwitchStatus("s1", 0, "127.0.0.1:1", 1, True, "ready"),)
    return Summary(Topology("rack", "softswitch", (), (), ()), up,
                   experiment=ExperimentResult({}, runs))


def test_settle_climbs_until_the_times_hold_and_says_so() -> None:
    """--settle N: a first run is checked at twice its TDF; times within 5 % of the last
    loss-free run settle; a run that resent packets goes up without becoming the reference;
    after N climbs the run stands as not settled (exit 1); without the option nothing
    runs again."""
    from rich.console import Console

    from experiment.dilation import Dilation
    from experiment.run import _settle

    console = Console(record=True, width=200)
    d = Dilation(2000.0, "calibrated", True)
    assert _settle(0, _settle_summary({"innetwork": 4.7e-4}), d, console, None, 0) == (True, None)
    kept, again = _settle(3, _settle_summary({"innetwork": 4.7e-4, "ring-roce": 6.3e-4}), d,
                          console, None, 0)
    assert kept and again is not None
    d2, ref = again
    assert d2.tdf == 4000 and "the check of TDF 2000" in d2.why
    assert ref == {"innetwork": 4.7e-4, "ring-roce": 6.3e-4}
    moved = _settle_summary({"innetwork": 3.7e-4, "ring-roce": 5.6e-4}, resent=3)
    kept, again = _settle(3, moved, d2, console, ref, 1)
    assert again is not None and again[1] == ref and "TDF 4000 resent 3 packets" in again[0].why
    kept, again = _settle(3, _settle_summary({"innetwork": 3.62e-4, "ring-roce": 5.6e-4}),
                          again[0], console, {"innetwork": 3.6e-4, "ring-roce": 5.59e-4}, 2)
    assert (kept, again) == (True, None)
    assert "settled: every time within 5% of the run at the TDF before" in console.export_text()
    kept, again = _settle(1, moved, d2, console, ref, 1)
    assert (kept, again) == (False, None)
    assert "not settled after 1 run(s) at higher TDFs" in console.export_text()
    with pytest.raises(SystemExit):
        parse_args(["--settle", "-1"])


def test_make_run_runs_again_while_settle_says_so(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """main() starts a network per TDF that --settle asks for, each announced, and exits 1
    when the last one did not settle (the networks themselves faked here)."""
    from experiment import run as run_mod
    from experiment.dilation import Dilation

    seen: list[float] = []
    summary = _settle_summary({"innetwork": 1e-3})

    def run_once(args: Any, topo: Any, target: str, program: Any, engine: Any,
                 dilation: Dilation, console: Any, reference: Any, tried: int) -> Any:
        seen.append(dilation.tdf)
        if tried < 2:
            return summary, True, (Dilation(dilation.tdf * 2, "up", False), {"innetwork": 1.0})
        return summary, False, None

    monkeypatch.setattr(run_mod, "_run_once", run_once)
    code = main(["--topo", "rack", "--hosts", "2", "--tdf", "2000", "--settle", "2",
                 "--no-cli", "--rundir", str(tmp_path)])
    assert code == 1 and seen == [2000, 4000, 8000]


def test_ratio_line_names_the_roce_ring_and_its_frames() -> None:
    """With the ring on RoCE the ratio line says so and corrects the ideal for RoCE frames
    (1024 of 1082 bytes, an ACK every 16 packets) instead of TCP's."""
    job: JsonObject = {"name": "allreduce", "parts": {"l1": {"role": "root"}}}
    inn, ring = _run("innetwork", seconds=1.0), _run("ring-roce", seconds=1.5)
    line = ratio_line(ExperimentResult(job, (inn, ring)), elems=64)
    assert line is not None and line.startswith("ring-roce / in-network time: 1.50 measured")
    tcp_ideal = ideal_ratio(2, 64)[1]
    roce_ideal = ideal_ratio(2, 64, roce=True)[1]
    assert tcp_ideal is not None and roce_ideal is not None
    assert roce_ideal / tcp_ideal == pytest.approx(tcp_payload_share() / payload_share())
    assert payload_share() == pytest.approx(1024 / (1082 + 62 / 16))
    assert f"({roce_ideal:.2f} counting frame sizes" in line
    assert retransmissions_cell(ring) == "0"  # RoCE counts its retransmissions


def test_bmv2_runs_give_the_agents_wider_timer_bounds(tmp_path: Path) -> None:
    """On BMv2 the agents' timer waits 0.5-1 s (its ingress FIFO holds results back longer
    than the defaults' 0.25 s bound); the built-in target keeps the agent's defaults, and
    bounds the options set stay."""
    def timers(opts: ExperimentOptions) -> tuple[str | None, ...]:
        argv = allreduce_argv("innetwork", opts, host="h1", plan_path=tmp_path / "j.json")
        return tuple(argv[argv.index(f) + 1] if f in argv else None for f in ("--rto", "--max-rto"))

    assert timers(with_target_timers(ExperimentOptions(), "bmv2")) == ("0.5", "1.0")
    assert timers(with_target_timers(ExperimentOptions(), "softswitch")) == (None, None)
    assert timers(with_target_timers(ExperimentOptions(max_rto=2.0), "bmv2")) == ("0.5", "2.0")
    ring = allreduce_argv("ring", with_target_timers(ExperimentOptions(), "bmv2"), rank=0,
                          peers="10.0.1.1:5400")
    assert "--rto" not in ring


def test_collect_reads_json_lines_errors_and_timeouts() -> None:
    """JSON lines come back per process; failures give their last stderr line; a process
    past the deadline is killed and reported."""
    import subprocess

    def start(code: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    procs = {
        "two": start("print('noise'); print('{\"rank\": 0}'); print('{\"rank\": 1}')"),
        "fail": start("import sys; sys.stderr.write('first\\nerror: bad thing\\n'); sys.exit(2)"),
        "slow": start("import time; time.sleep(30)"),
    }
    rows = collect_rows(procs, 3.0)
    assert rows["two"] == [{"rank": 0}, {"rank": 1}]
    assert rows["fail"] == "error: bad thing"
    assert rows["slow"] == "no result within 3 s (killed)"
    assert procs["slow"].returncode is not None
    again = collect({"one": start("print('{\"a\": 1}')")}, 10.0)
    assert again == {"one": {"a": 1}}


def test_tcp_transfer_on_loopback() -> None:
    """The host command's TCP receiver counts what the sender sent."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    got: dict[str, object] = {}
    receiver = threading.Thread(target=lambda: got.update(hostcmd.tcp_receive(port, 10.0)))
    receiver.start()
    for _ in range(100):
        try:
            sent = hostcmd.tcp_send("127.0.0.1", port, 0.3)
            break
        except ConnectionRefusedError:
            threading.Event().wait(0.05)
    receiver.join(15)
    assert got["bytes"] == sent["bytes"] > 0


def test_device_config_bundle_carries_includes(tmp_path: Path) -> None:
    """For the built-in target the device config becomes a bundle with every include."""
    build = ProgramBuild(PROGRAM, tmp_path / "x.p4info.txtpb", PROGRAM)
    bundled = bundle_device_config(build, tmp_path)
    assert bundled.device_config == (tmp_path / "netreduce.device_config.json").resolve()
    doc = json.loads(bundled.device_config.read_bytes())
    assert doc["main"] == "netreduce.p4"
    assert {"include/nr_headers.p4", "include/nr_elems.p4"} <= set(doc["files"])
    bmv2 = ProgramBuild(PROGRAM, None, tmp_path / "netreduce.json")
    assert bundle_device_config(bmv2, tmp_path) == bmv2


def test_calibration_network_lives_beside_the_run() -> None:
    """A calibration's network goes into the run's runs root, where the next run's cleanup
    of killed runs looks: a run with --rundir elsewhere, SIGKILLed while it calibrated, left
    the calibration's switch in the default runs root, holding the default gRPC port (the
    reliability campaign's teardown cell: every later run there refused to start)."""
    run = Path("/tmp/soak/teardown/run004")
    beside = calibration_rundir(run)
    assert beside == Path("/tmp/soak/teardown/run004-calibration")
    assert beside.parent == run.parent  # clean_stale_runs(run) cleans it
    assert calibration_rundir(None) is None  # the default runs root: the run's own
