"""The papers' figures as presets (experiment.figures): the presets are runnable networks,
the ideals agree with ``make run``'s, the points are grouped into as few networks as their
TDFs allow, and the document, table, plot and knee say what was measured. The networks are
faked here; tests/test_figures_net.py runs the small preset for real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from experiment import calibrate, figures, replays
from experiment.__main__ import main
from experiment.dilation import Dilation
from experiment.run import ideal_ratio
from experiment.seams import json_float, json_list, json_object
from experiment.session import HIERARCHICAL, AllreduceRun, ExperimentResult, RankOutcome
from protocol import netreduce as nr
from sim.emulation import ALGORITHM_OF, fabric_for


def test_every_preset_is_a_network_the_simulator_models() -> None:
    """Each point loads as a topology with one shaped worker rate; every algorithm drawn is
    known to the simulator (ns-3 runs beside every point)."""
    for fig in figures.PRESETS.values():
        # the hybrid is ns-3's iterations of its phases (experiment.replays)
        simulated = [a for a in fig.algorithms if a != replays.HYBRID]
        if replays.HYBRID in fig.algorithms:
            simulated += replays.hybrid_phases()
        assert fig.points and all(a in ALGORITHM_OF for a in simulated), fig.name
        for point in fig.points:
            spec = figures.point_spec(fig, point)
            assert figures.host_rate(spec) > 0
            assert point.slots <= nr.Limit.SLOTS and point.credits <= nr.Limit.BIND
            for algo in simulated:
                f = fabric_for(algo, figures.sim_spec(spec, point, nr.PROGRAM_ELEMS, 0.0))
                assert f.workers == figures.workers_of(spec)
                assert f.link_delay_s == figures.link_delay(spec)
                # the fat-tree's third level in the stand-in's fabric links
                assert f.fabric_extra_hops == (1 if fig.topo == "fattree" else 0)
                # the RoCE ring's window is the one the emulated ring runs with
                if algo == figures.BASELINE:
                    assert f.send_window == point.slots and f.send_ack_every == 16


def test_the_papers_network_is_100_gbe_with_microsecond_links() -> None:
    spec = figures.point_spec(figures.PRESETS["size"], figures.PRESETS["size"].points[0])
    assert figures.host_rate(spec) == 100e9 and figures.link_delay(spec) == pytest.approx(2e-6)


def test_ideals_are_make_runs_ideal_ratio() -> None:
    """ring / in-network of the ideals is 2(P-1)/P, and with frame sizes exactly what
    ``make run`` prints for a RoCE ring (one place for the packet formats)."""
    point = figures.Point(1, {}, 1 << 20, credits=4, msg_pkts=64)
    for workers in (2, 4, 8):
        ring = figures.ideal_seconds("ring-roce", workers, point.elements, 100e9, 252, point)
        inn = figures.ideal_seconds("innetwork", workers, point.elements, 100e9, 252, point)
        assert inn[0] == pytest.approx(32 * point.elements / 100e9)
        payload, framed = ideal_ratio(workers, 252, False, 64, 256, roce=True)
        assert ring[0] / inn[0] == pytest.approx(payload)
        assert ring[1] / inn[1] == pytest.approx(framed)


def test_ring_roce_is_simulated_with_roce_packets() -> None:
    spec = {"spines": 1, "leaves": 1, "hosts_per_leaf": 4, "gpus": 1, "bw_mbit": 1e5,
            "delay_s": 2e-6, "switch_delay_s": 0.0, "elems": 252, "credits": 4, "msg_pkts": 64}
    f = fabric_for("ring-roce", spec)
    assert (f.segment_bytes, f.link_delay_s, f.switch_delay_s) == (nr.PATH_MTU, 2e-6, 0.0)
    assert f.header_bytes == round(nr.ROCE_HEADER_BYTES + nr.ROCE_ACK_BYTES / 16)


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(figures.FigureError, match="preset 'fig9': choose from size"):
        figures.preset("fig9")


# ----------------------------------------------------------------------------- faked runs


def _run(algo: str, elements: int, seconds: float, switch_cores: float = 0.1) -> AllreduceRun:
    rank = RankOutcome(0, "h1", seconds=seconds, exact=True)
    return AllreduceRun(algo, elements, (rank,), switch_cpu={"s1": switch_cores},
                        wall_seconds=seconds * 10, machine_cores=2, tdf=10.0,
                        busy_real_seconds=seconds * 10)


class FakeLab:
    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.controller = self
        self.ratio = 1.0  # B_intra / B_inter of its network (the hierarchy test)
        self.programmed = True

    def delete_job(self, key: str) -> None:
        self.deleted.append(key)


@pytest.fixture
def faked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """run_figure without networks: each network start is recorded, each point's all-reduces
    take the frame-size ideal (in-network) and 1.1 times it (ring), exact; in-network's
    switch is saturated (not faithful) at 65536 float32."""
    seen: dict[str, Any] = {"networks": [], "labs": [], "sims": [], "opts": []}
    monkeypatch.setenv(calibrate.CACHE_ENV, str(tmp_path / "calibration.json"))

    @contextmanager
    def network(spec: Any, program: Path, dilation: Dilation, opts: figures.Options,
                group: int) -> Iterator[FakeLab]:
        seen["networks"].append((len(spec.hosts), dilation.tdf))
        lab = FakeLab()
        seen["labs"].append(lab)
        yield lab

    def experiment(lab: FakeLab, opts: Any) -> ExperimentResult:
        seen["opts"].append(opts)
        runs = []
        point = figures.Point(0, {}, opts.elements, opts.credits, opts.msg_pkts or 64)
        for algo in opts.algorithms:
            _, framed = figures.ideal_seconds(algo, 4, opts.elements, 100e9, opts.elems, point)
            busy = 0.99 if algo == "innetwork" and opts.elements == 65536 else 0.1
            runs.append(_run(algo, opts.elements, framed * (1.1 if algo != "innetwork" else 1),
                             busy))
        return ExperimentResult({}, tuple(runs))

    def simulate(algo: str, spec: figures.SimSpec, nbytes: int) -> float:
        seen["sims"].append((algo, spec, nbytes))
        return 1e-3

    monkeypatch.setattr(figures, "_network", network)
    monkeypatch.setattr(figures, "run_allreduce_experiment", experiment)
    seen["simulate"] = simulate
    return seen


@pytest.mark.parametrize("start", ["slow", "line"])
def test_a_presets_window_start_reaches_every_run_and_its_record(
        faked: dict[str, Any], start: str) -> None:
    """A preset's cc_start is every all-reduce's (the agents' and the RoCE ring's windows),
    the results file and the summary say which it was, and a results file from before the
    option (slow start) reads as such."""
    fig = replace(figures.PRESETS["size"], cc_start=start)
    opts = figures.Options(tdf=10.0, simulate=faked["simulate"], retries=0)
    ran = figures.run_figure(fig, opts)
    doc = ran.to_dict()
    assert [o.cc_start for o in faked["opts"]] == [start] * len(fig.points)
    assert doc["cc_start"] == start
    assert f"congestion windows: {figures.CC_START_WORDS[start]}" in figures.summary_lines(ran)
    assert figures.figure_from_dict(doc).cc_start == start
    del doc["cc_start"]
    assert figures.figure_from_dict(doc).cc_start == "slow"
    assert figures.PRESETS["size"].cc_start == "line"  # ns-3's and RoCE NICs' start


def test_points_share_a_network_when_their_topology_and_tdf_agree(
        faked: dict[str, Any]) -> None:
    """size's four points run on one network at a forced TDF, each with its own job (deleted
    after it), then on one at twice the TDF, where their times agree (converged); scaling's
    three worker counts need three networks at each TDF."""
    opts = figures.Options(tdf=10.0, simulate=faked["simulate"])
    fig = figures.run_figure(figures.PRESETS["size"], opts)
    assert faked["networks"] == [(4, 10.0), (4, 20.0)]
    assert faked["labs"][0].deleted == ["fig0", "fig1", "fig2", "fig3"]
    assert fig.converged and all(p.tdf == 20.0 and p.retried == ((10.0, 0),)
                                 for p in fig.points)
    assert [p.x for p in fig.points] == [0.25, 1, 4, 16]
    assert fig.exact and not fig.faithful  # one point's switch was saturated
    unfaithful = [(p.x, run.algorithm) for p, run in fig.outcomes() if not run.faithful]
    assert unfaithful == [(0.25, "innetwork")]
    assert "switch CPU" in fig.points[0].runs["innetwork"].fidelity[0]
    faked["networks"].clear()
    figures.run_figure(figures.PRESETS["scaling"], opts)
    assert faked["networks"] == [(2, 10.0), (4, 10.0), (8, 10.0), (2, 20.0), (4, 20.0),
                                 (8, 20.0)]


def test_the_figure_holds_ns3_the_ideals_and_the_ratio(faked: dict[str, Any]) -> None:
    opts = figures.Options(tdf=10.0, simulate=faked["simulate"])
    fig = figures.run_figure(figures.PRESETS["size"], opts, command="figure size")
    point = fig.points[2]
    inn, ring = point.runs["innetwork"], point.runs["ring-roce"]
    assert inn.seconds == pytest.approx(inn.frames_ideal_s)
    assert ring.seconds == pytest.approx(1.1 * ring.frames_ideal_s)
    assert point.ratio is not None
    assert point.ratio[0] == pytest.approx(1.1 * point.ratio[1])
    assert inn.ns3_seconds == 1e-3
    assert inn.sim_error == pytest.approx((1e-3 - inn.seconds) / inn.seconds)
    assert point.tdf == 20.0 and point.delay_s == pytest.approx(2e-6)  # checked at twice 10
    assert point.rtt_s == pytest.approx(8e-6)  # host - switch - host, both ways
    # ns-3 saw the point's network: 4 workers on one leaf at 100 GbE, 2 us, the RoCE ring
    algo, spec, nbytes = faked["sims"][7]
    assert (algo, nbytes, spec["hosts_per_leaf"], spec["bw_mbit"]) == ("ring-roce", 16 << 20,
                                                                      4, 1e5)
    # points where the two differ by more than 10 % are listed, by algorithm and x
    assert any(line.startswith("innetwork at 16:") for line in fig.sim_outside_tolerance)
    doc = fig.to_dict()
    assert json.loads(json.dumps(doc)) == doc  # the JSON file holds all of it
    assert doc["command"] == "figure size" and "cores" in str(doc["machine"])
    assert doc["faithful"] is False and doc["exact"] is True and doc["knee"] is None
    last = json_object(json_list(doc["points"])[3])
    assert set(json_object(last["runs"])) == {"innetwork", "ring-roce"}
    assert json_float(last["ratio"]) == pytest.approx(1.1 * json_float(last["ideal_ratio"]))


def test_table_plot_and_verdicts(faked: dict[str, Any], tmp_path: Path) -> None:
    opts = figures.Options(tdf=10.0, simulate=faked["simulate"])
    fig = figures.run_figure(figures.PRESETS["size-small"], opts)
    text = figures.table(fig)
    assert text.count("\n") == 2 + 4 - 1  # header, rule, 2 points x 2 algorithms
    assert "| innetwork |" in text and "| ring-roce |" in text and "| NO, yes |" in text
    lines = figures.summary_lines(fig)
    assert any(line.startswith("tensor per worker (MiB) = 0.25: ring-roce / innetwork")
               for line in lines)
    assert "do not publish" in lines[-1]
    plot = figures.plot_figure(fig, tmp_path / "fig.png")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_point_runs_again_at_a_higher_tdf_until_its_times_hold(
        faked: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Adaptive dilation: a point is kept when its times at twice the TDF agree within 5 %;
    times that move with the TDF were set by the machine, so it goes on up, at most
    MAX_RETRIES times, and a point that never settled is reported, not published. A run
    that resent packets neither settles nor is the reference: its timers cost the same
    emulated time at any TDF, so lossy runs agreed while both were slow."""
    def experiment(lab: FakeLab, opts: Any) -> ExperimentResult:
        # 16384 float32 is 20 % slower below TDF 20; 65536 resends packets below TDF 40
        lost = 5 if opts.elements == 65536 and opts.tdf < 40 else 0
        seconds = 1.2e-3 if opts.elements == 16384 and opts.tdf < 20 else 1e-3
        runs = tuple(AllreduceRun(algo, opts.elements,
                                  (RankOutcome(0, "h1", seconds=seconds, exact=True,
                                               retransmissions=lost),),
                                  machine_cores=2, tdf=opts.tdf) for algo in opts.algorithms)
        return ExperimentResult({}, runs)

    monkeypatch.setattr(figures, "run_allreduce_experiment", experiment)
    fig = figures.run_figure(figures.PRESETS["size-small"],
                             figures.Options(tdf=10.0, simulate=None))
    assert faked["networks"] == [(2, 10.0), (2, 20.0), (2, 40.0), (2, 80.0)]
    small, large = fig.points
    # 16384: 20 % faster at 20 than at 10 (not settled), the same at 40: kept at 40
    assert (small.tdf, small.retried, small.converged) == (40.0, ((10.0, 0), (20.0, 0)), True)
    assert "times at TDF 20 moved more than 5%" in small.dilation
    # 65536: the same times at 10 and 20, but packets resent at both: on up; the first
    # loss-free run (40) is the reference the next one (80) agrees with
    assert (large.tdf, large.retried, large.resent, large.converged) == (
        80.0, ((10.0, 10), (20.0, 10), (40.0, 0)), 0, True)
    assert "TDF 20 resent 10 packets" in large.dilation
    assert fig.converged and "| 80 | 0 | yes |" in figures.table(fig)
    # without retries left the last run is kept and reported as not converged
    fig = figures.run_figure(figures.PRESETS["size-small"],
                             figures.Options(tdf=10.0, simulate=None, retries=1))
    assert (fig.points[0].tdf, fig.points[0].converged) == (20.0, False)
    assert not fig.converged and "do not publish" in figures.summary_lines(fig)[-1]
    assert any("did not settle" in line for line in figures.summary_lines(fig))


def test_credit_knee_is_the_fewest_credits_near_the_best_time() -> None:
    """Times halve with credits up to 8 and stay flat after: the knee is 8, beside the
    bandwidth-delay product in messages of the point's network."""
    fig = figures.PRESETS["credits"]
    pts = []
    for credits, seconds in ((1, 8.0), (2, 4.0), (4, 2.0), (8, 1.05), (16, 1.0), (32, 1.0)):
        run = figures.Outcome("innetwork", seconds, seconds, True, True, (), True, "link-bound",
                              0.9, 0, (), 1.0, 1.0)
        pts.append(figures.PointOutcome(credits, {}, 1, 4, credits, 16, 100e9, 2e-6, 20e-6,
                                        1, 1.0, "", {"innetwork": run}))
    knee = figures.Figure(fig, tuple(pts), 252).knee
    assert knee is not None and knee.credits == 8 and knee.best_seconds == 1.0
    assert knee.bdp_messages == pytest.approx(20e-6 * 100e9 / (16 * 8 * (1008 + 90)))
    assert figures.Figure(figures.PRESETS["size"], tuple(pts), 252).knee is None


def test_cli_lists_presets_and_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["figure", "--list"]) == 0
    assert "credits" in capsys.readouterr().out
    assert main(["figure", "fig9"]) == 2
    assert "preset 'fig9': choose from" in capsys.readouterr().err
    assert main(["figure", "size", "--tdf", "0.5"]) == 2
    assert "--tdf: '0.5'" in capsys.readouterr().err
    assert main(["figure"]) == 2
    assert "name a preset" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["figure", "size", "--retries", "-1"])
    assert exit_info.value.code == 2
    assert "--retries '-1': expected an integer >= 0" in capsys.readouterr().err


def test_cli_cc_start_chooses_where_the_windows_start(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--cc-start slow runs a preset as the figures before the option ran; without it the
    preset's own (line); a bad value names the option."""
    ran: list[str] = []

    def run_figure(fig: figures.Preset, opts: figures.Options, command: str = "") -> Any:
        ran.append(fig.cc_start)
        raise KeyboardInterrupt  # stop there: nothing written

    monkeypatch.setattr(figures, "run_figure", run_figure)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert main(["figure", "size", "--cc-start", "slow"]) == 130
    assert main(["figure", "size"]) == 130
    assert ran == ["slow", "line"]
    with pytest.raises(SystemExit):
        main(["figure", "size", "--cc-start", "fast"])
    assert "--cc-start: invalid choice: 'fast'" in capsys.readouterr().err


def test_recalibrate_measures_each_fan_in_once(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """--recalibrate: the first point of each fan-in measures again, the others reuse it
    (every point of a sweep recalibrated the same setting)."""
    calls: list[bool] = []

    def resolve(*_args: Any, refresh: bool = False, **_kw: Any) -> Dilation:
        calls.append(refresh)
        return Dilation(10.0, "test", False)

    monkeypatch.setattr(figures, "resolve_dilation", resolve)
    opts = figures.Options(refresh=True)
    figures.plan(figures.PRESETS["size"], tmp_path / "p.p4", 252, opts)
    assert calls == [True, False, False, False]
    calls.clear()
    figures.plan(figures.PRESETS["scaling"], tmp_path / "p.p4", 252, opts)
    assert calls == [True, True, True]


# ----------------------------------------------------------------------------- hierarchy


def test_crossing_is_interpolated_on_log_x_where_the_ratio_reaches_one() -> None:
    assert figures.crossing([(1.0, 0.9), (4.0, 1.1)]) == pytest.approx(2.0)
    assert figures.crossing([(2.0, 1.2), (1.0, 0.8), (4.0, 1.5)]) == pytest.approx(2 ** 0.5)
    assert figures.crossing([(1.0, 1.2), (2.0, 1.5)]) is None  # never below: no crossing
    assert figures.crossing([(1.0, 0.5)]) is None


def test_the_hierarchy_preset_is_two_gpus_per_host_with_the_intra_host_rate_swept() -> None:
    """Each point: 4 hosts of 2 GPUs (8 workers), the intra-host rate x times the host link's;
    ns-3 gets the same hosts, GPUs and intra-host rate."""
    fig = figures.PRESETS["hierarchy"]
    assert fig.crossover and fig.algorithms == (HIERARCHICAL, figures.BASELINE)
    for point in fig.points:
        spec = figures.point_spec(fig, point)
        assert (figures.workers_of(spec), figures.gpus_per_host(spec)) == (8, 2)
        sim = figures.sim_spec(spec, point, nr.PROGRAM_ELEMS, 0.0)
        assert (sim["hosts_per_leaf"], sim["gpus"]) == (4, 2)
        assert sim["intra_bw_mbit"] == pytest.approx(point.x * 100e3)
        f = fabric_for(HIERARCHICAL, sim)
        assert f.workers == 8 and f.intra_bps == pytest.approx(point.x * 100e9)


def test_hierarchy_reports_the_crossover_of_emulation_and_ns3(faked: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """Faked runs where the hierarchical time falls as the intra-host rate rises and the
    ring's does not: the crossover is where their ratio reaches 1, in both columns, and it
    is in the JSON and the summary."""
    base = faked["simulate"]

    faked_network: Any = figures._network

    @contextmanager
    def network(spec: Any, *args: Any) -> Iterator[FakeLab]:
        lab: FakeLab
        with faked_network(spec, *args) as lab:
            lab.ratio = spec.hosts[0].intra_bw_bps / spec.hosts[0].link.bw_bps
            yield lab

    def experiment(lab: FakeLab, opts: Any) -> ExperimentResult:
        assert opts.gpus_per_host == 2
        hier = 1e-3 * (0.5 + 1 / lab.ratio)  # ring 1.25 ms: equal at B_intra / B_inter = 4/3
        return ExperimentResult({}, (_run(HIERARCHICAL, opts.elements, hier),
                                     _run(figures.BASELINE, opts.elements, 1.25e-3)))

    def simulate(algo: str, spec: figures.SimSpec, nbytes: int) -> float:
        base(algo, spec, nbytes)
        ratio = spec["intra_bw_mbit"] / spec["bw_mbit"]
        return 1e-3 * (0.5 + 1 / ratio) if algo == HIERARCHICAL else 1.0e-3

    monkeypatch.setattr(figures, "run_allreduce_experiment", experiment)
    monkeypatch.setattr(figures, "_network", network)
    opts = figures.Options(tdf=10.0, simulate=simulate, retries=0)
    fig = figures.run_figure(figures.PRESETS["hierarchy"], opts)
    crossover = fig.crossover
    assert crossover is not None
    assert crossover.emulated == pytest.approx(4 / 3, rel=0.06)
    assert crossover.ns3 == pytest.approx(2.0, rel=0.06)
    assert fig.to_dict()["crossover"] == {"emulated": crossover.emulated, "ns3": crossover.ns3}
    assert any(line.startswith("crossover (ring-roce slower than innetwork-hier from there): "
                               "B_intra / B_inter = 1.3") for line in figures.summary_lines(fig))
    assert figures.plot_figure(fig, tmp_path / "hierarchy.png").stat().st_size > 0


# ----------------------------------------------------------------------------- model replays


def test_the_hybrid_measures_one_sparse_and_one_dense_iteration() -> None:
    assert replays.hybrid_phases() == ["topk", "torus"]
    setting = replays.ReplaySetting("resnet50", 100.0, 0.25)
    times = {"topk": 1e-4, "torus": 1e-2}
    sim = replays.ns3_iteration("hybrid", setting, lambda algo, nbytes: times[algo])
    sparse = replays.iteration_with(setting, lambda nbytes: 1e-4)
    dense = replays.iteration_with(setting, lambda nbytes: 1e-2)
    assert sim == pytest.approx((sparse + dense) / 2)
    assert sparse == pytest.approx(setting.compute_s, rel=0.01)  # hidden behind compute
    assert dense > 1.1 * setting.compute_s  # exposed
    assert replays.ns3_iteration("hier", setting, lambda algo, nbytes: 1.0) is None


def test_the_models_preset_shrinks_models_and_links_alike() -> None:
    """Each model shrunk MODEL_SCALE times on 25 GbE links as much slower, DDP's 25 MB
    buckets with them; the point's elements are the shrunk gradient's."""
    from workloads.profiles import get_profile

    fig = figures.PRESETS["models"]
    assert [p.label for p in fig.points] == ["resnet50", "vgg16", "bert-base"]
    for point in fig.points:
        spec = figures.point_spec(fig, point)
        assert figures.host_rate(spec) * point.scale == pytest.approx(25e9)
        assert point.bucket_mb * point.scale == pytest.approx(25.0)
        assert point.elements == get_profile(point.model, point.scale).params


def _replay(algo: str, seconds: float, resent: int = 0) -> replays.ReplayRun:
    from experiment.fidelity import RunLoad, judge

    verdict = judge(RunLoad({"s1": 0.2}, {}, {"h1": 0.1}, 2, {"s1:1": 0.5}), 10.0)
    return replays.ReplayRun(algo, seconds, seconds / 2, resent, (), verdict, 0.5)


def test_models_figure_reports_iteration_speedups_beside_ns3(
        faked: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Faked replays: each algorithm's iteration a fixed share of the ring's, ns-3 the same
    shares of its own; the speedups are in the summary, the table names the models, the
    replays get the point's TDF, timers and buckets, and the plot is written."""
    share = {"ring-roce": 1.0, "innetwork": 0.7, "topk": 0.5, "hybrid": 0.8}
    specs: list[Any] = []

    def run(lab: FakeLab, algorithms: Any, setting: replays.ReplaySetting, spec: Any,
            workdir: Path) -> list[replays.ReplayRun]:
        specs.append(spec)
        return [_replay(a, 0.1 * share[a]) for a in algorithms]

    monkeypatch.setattr(figures, "run_replays", run)
    ns3 = {"ring-roce": 2e-2, "innetwork": 1e-2, "topk": 1e-4, "torus": 1e-2}
    opts = figures.Options(tdf=10.0, simulate=lambda algo, spec, n: ns3[algo], retries=0)
    fig = figures.run_figure(figures.PRESETS["models"], opts)
    assert len(fig.points) == 3 and fig.exact and fig.faithful
    spec = specs[0]
    assert (spec.tdf, spec.models, spec.bucket_mb, spec.workers) == (10.0, ("resnet50",),
                                                                     0.25, 4)
    assert spec.cc_start == figures.PRESETS["models"].cc_start
    # the replays' timers wait for their job's window to leave the host (256 packets at
    # 250 Mbit/s: ~9 ms), as the all-reduce points' do
    from experiment.calibrate import frame_bits
    from experiment.dilation import drain_seconds

    first = figures.PRESETS["models"].points[0]
    drain = drain_seconds(figures.point_spec(figures.PRESETS["models"], first), first.slots,
                          frame_bits(nr.PROGRAM_ELEMS))
    assert spec.timers is not None and spec.roce_timers is not None
    assert spec.timers[0] == pytest.approx(2 * 8e-6 + drain) and drain > 8e-3
    point = fig.points[0]
    assert point.speedup("innetwork")[0] == pytest.approx(1 / 0.7)
    # ns-3's hybrid: the mean of its sparse (top-k) and dense (2D torus) iterations
    setting = first.replay
    assert setting is not None
    ring, sparse, dense = (replays.iteration_with(setting, _constant(t))
                           for t in (2e-2, 1e-4, 1e-2))
    assert point.speedup("hybrid")[1] == pytest.approx(ring / ((sparse + dense) / 2))
    assert point.runs["topk"].ideal_s == pytest.approx(point.runs["topk"].frames_ideal_s)
    assert point.runs["ring-roce"].frames_ideal_s > point.runs["ring-roce"].ideal_s
    lines = figures.summary_lines(fig)
    assert lines[0].startswith("resnet50: iteration speedup over ring-roce: innetwork 1.43x")
    assert "| vgg16 | topk |" in figures.table(fig)
    assert json_list(fig.to_dict()["points"])
    assert figures.plot_figure(fig, tmp_path / "models.png").stat().st_size > 0


def test_a_replay_cell_runs_dilated_with_the_given_timers(tmp_path: Path) -> None:
    """The matrix launcher passes the TDF to every process and the RoCE and in-network
    timers to their own transports only."""
    from experiment.matrix import Launcher, MatrixError, MatrixSpec

    class Lab:
        class topology:  # noqa: N801 - a stand-in for the Topology the launcher reads
            hosts: list[Any] = []

    spec = MatrixSpec(tdf=400.0, timers=(1e-3, 4e-3), roce_timers=(2e-3, 8e-3))
    launcher = Launcher(Lab(), spec, tmp_path)  # type: ignore[arg-type]
    launcher.hosts, launcher.gpus = ["h1"], {"h1": 1}
    assert launcher._common("ring")[-2:] == ["--tdf", "400"]
    assert launcher._common("ring-roce")[-4:] == ["--rto", "0.002", "--max-rto", "0.008"]
    assert launcher._common("innetwork")[-4:] == ["--rto", "0.001", "--max-rto", "0.004"]
    launcher.spec = replace(spec, cc_start="line")
    assert launcher._common("ring-roce")[-2:] == ["--cc-start", "line"]
    assert launcher._common("innetwork")[-2:] == ["--cc-start", "line"]
    assert "--cc-start" not in launcher._common("ring")
    with pytest.raises(MatrixError, match="cc_start 'fast': choose from slow, line"):
        MatrixSpec(cc_start="fast")


def test_a_results_file_is_drawn_again_without_running(
        faked: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--replot: a figure's JSON gives back the same figure (plot, table, verdicts, exit
    code) with no network; a file that is not one is a usage error naming it."""
    fig = figures.run_figure(figures.PRESETS["size"],
                             figures.Options(tdf=10.0, simulate=faked["simulate"], retries=0))
    doc = fig.to_dict()
    again = figures.figure_from_dict(json.loads(json.dumps(doc)))
    assert again.to_dict() == doc and figures.table(again) == figures.table(fig)
    path = tmp_path / "size.json"
    path.write_text(json.dumps(doc))
    code = main(["figure", "--replot", str(path), "--plot", str(tmp_path / "again.png")])
    assert code == (0 if fig.faithful and fig.exact and fig.converged else 1)
    assert (tmp_path / "again.png").stat().st_size > 0
    assert "| tensor per worker (MiB) |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"preset": "size", "points": [{"x": 1}]}))
    assert main(["figure", "--replot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"figure --replot {bad}: not a figure's results (KeyError" in err
    assert main(["figure", "--replot", str(tmp_path / "none.json")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_a_launcher_waits_for_its_processes_in_real_time(tmp_path: Path) -> None:
    """The processes' --timeout is emulated seconds: the launcher waits TDF times as long
    (it waited the emulated number of real seconds, and killed dilated replays)."""
    from types import SimpleNamespace

    from experiment.matrix import Launcher, MatrixSpec

    waited: list[float] = []

    class Lab:
        topology = SimpleNamespace(hosts=[SimpleNamespace(name="h1", gpus=1, ip="10.0.1.1",
                                                          intra_bw_bps=None)])

        def snapshot(self) -> None:
            return None

        def run_processes(self, procs: Any, timeout_s: float) -> dict[str, Any]:
            waited.append(timeout_s)
            return {}

    spec = MatrixSpec(tdf=400.0, timeout_s=5.0)
    Launcher(Lab(), spec, tmp_path)._run("ring", ["replay"], "t")  # type: ignore[arg-type]
    assert waited == [5.0 * 400.0 + 60.0]


def _constant(seconds: float) -> replays.AllreduceTime:
    return lambda _nbytes: seconds


def test_a_replay_point_simulates_each_bucket_once(faked: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The hybrid's ns-3 iteration reuses the top-k and torus bucket times (top-k is drawn
    beside it): no (algorithm, bucket size) is simulated twice for a point."""
    calls: list[tuple[str, int]] = []

    def simulate(algo: str, spec: figures.SimSpec, nbytes: int) -> float:
        calls.append((algo, nbytes))
        return 1e-3

    monkeypatch.setattr(figures, "run_replays", lambda lab, algorithms, *_a: [
        _replay(a, 0.1) for a in algorithms])
    fig = figures.PRESETS["models"]
    one = replace(fig, points=fig.points[:1])
    figures.run_figure(one, figures.Options(tdf=10.0, simulate=simulate, retries=0))
    assert calls and len(calls) == len(set(calls))
    assert {a for a, _ in calls} == {"ring-roce", "innetwork", "topk", "torus"}


def test_a_replay_cell_reads_every_rank_and_rates_links_in_emulated_time(
        tmp_path: Path) -> None:
    """Launcher.replay: the slowest rank's iteration, CPU and resent packets summed from the
    ranks' rows; link rates over the window's real time divided by the TDF (over real time
    a link at its emulated rate looked TDF times idler); the guard judges the cell."""
    from types import SimpleNamespace

    from experiment.matrix import Launcher, MatrixSpec

    seen: list[float] = []

    class Window:
        wall = 100.0  # real seconds
        machine_busy = 0.3
        switch_cpu = {"s1": 0.4}

        def links(self, topology: Any, seconds: float) -> list[Any]:
            seen.append(seconds)
            return [SimpleNamespace(utilization=0.9, kind="host", switch="s1", port=1)]

    class Lab:
        topology = SimpleNamespace(hosts=[])

    rows: list[Any] = [{"iteration_s": 0.05, "comm_s": 0.02, "cpu_utilization": 0.2,
             "retransmissions": 3},
            {"iteration_s": 0.06, "comm_s": 0.03, "cpu_utilization": 0.9,
             "retransmissions": 4}]
    launcher = Launcher(Lab(), MatrixSpec(tdf=50.0), tmp_path)  # type: ignore[arg-type]
    fake: Any = lambda algo, verb, tag: ({"h1": rows}, Window())  # noqa: E731
    launcher._run = fake  # type: ignore[method-assign]
    cell = launcher.replay("innetwork", "resnet50")
    assert seen == [pytest.approx(100.0 / 50.0)]
    assert (cell.seconds, cell.comm_seconds, cell.retransmissions) == (0.06, 0.03, 7)
    assert (cell.agent_cpu_max, cell.busiest_util, cell.busiest_link) == (0.9, 0.9, "s1:1")
    verdict = replays.verdict_of(cell, 50.0, drops=0)
    assert verdict.tdf == 50.0 and not verdict.faithful  # a host process above its budget
    assert any(f.startswith("host CPU") for f in verdict.failures)
    assert replays.verdict_of(replace(cell, agent_cpu_max=0.2), 50.0, drops=0).faithful
    assert not replays.verdict_of(replace(cell, agent_cpu_max=0.2), 50.0, drops=2).faithful
