"""experiment.dilation: a run's TDF (forced or calibrated), the topology's fan-ins, round trip
and window, and the in-network timer bounds in emulated seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiment import calibrate, dilation
from experiment.session import TARGET_TIMERS
from protocol import netreduce as nr
from topo.topofile import load_spec, resolve
from workloads.innetwork import AGG_MAX_RTO, AGG_RTO


def _spineleaf(**params: object) -> object:
    return load_spec(resolve("spineleaf"), dict(params))


def test_fabric_of_spineleaf_counts_fanins_agents_and_rate() -> None:
    fabric = dilation.fabric_of(_spineleaf(bw=3), cores=2)  # type: ignore[arg-type]
    # leaves: 2 hosts + 2 spines; spines: 2 leaves
    assert fabric.fanins == {"l1": 4, "l2": 4, "sp1": 2, "sp2": 2}
    assert fabric.agents == 4
    assert fabric.max_bw_bps == pytest.approx(3e6)
    assert fabric.cores == 2


def test_longest_rtt_is_the_cross_leaf_path() -> None:
    spec = _spineleaf(bw=3, delay="2us")
    # host - leaf - spine - leaf - host: 4 links of 2 us, there and back
    assert dilation.longest_rtt(spec) == pytest.approx(16e-6)  # type: ignore[arg-type]
    assert dilation.longest_rtt(_spineleaf(bw=3)) == 0.0  # type: ignore[arg-type]


def test_timer_bounds_real_time_unchanged() -> None:
    """At TDF 1 with no delay the bounds are today's: the target's, else the agents'."""
    assert dilation.timer_bounds("softswitch", 1.0) == (AGG_RTO, AGG_MAX_RTO)
    assert dilation.timer_bounds("bmv2", 1.0) == TARGET_TIMERS["bmv2"]


def test_timer_bounds_follow_the_emulated_network() -> None:
    """At a large TDF the machine's real-time margins vanish and the emulated round trip sets
    the bounds; they never drop below it."""
    rtt = 16e-6
    low, high = dilation.timer_bounds("softswitch", 80_000, rtt)
    assert low == pytest.approx(2 * rtt)
    assert high == pytest.approx(4 * rtt)
    low2, high2 = dilation.timer_bounds("softswitch", 2, 0.0)
    assert low2 == pytest.approx(AGG_RTO / 2)
    assert high2 == pytest.approx(AGG_MAX_RTO / 2)


def test_the_timers_wait_for_a_whole_window_to_leave_the_host() -> None:
    """A transport sends its window at once, so the last packet's round trip starts after
    the window has left the host. The top bound was 4 round trips, 32 us at 100 GbE with
    2 us links, below the 8 + 22.5 us a window of 4 credits x 64 packets needs: every
    queued window timed out and the figures' runs resent packets without any loss."""
    from experiment.calibrate import frame_bits
    from experiment.session import ExperimentOptions

    spec = load_spec(resolve("rack"), {"hosts": 4, "bw": "100G", "delay": "2us"})
    base = ExperimentOptions(credits=4, slots=256, msg_pkts=64, elems=nr.MTU_ELEMS)
    opts = dilation.dilated_options(base, spec, dilation.Dilation(50_000.0, "forced", False),
                                    "softswitch")
    rtt = 8e-6
    drain = 256 * frame_bits(nr.MTU_ELEMS) / 100e9
    assert drain == pytest.approx(22.5e-6, rel=0.05)
    assert opts.rto is not None and opts.max_rto is not None
    assert opts.rto == pytest.approx(2 * rtt + drain)
    assert opts.max_rto > rtt + drain and opts.max_rto == pytest.approx(2 * opts.rto)
    assert dilation.drain_seconds(spec, 256, frame_bits(nr.MTU_ELEMS)) == pytest.approx(drain)


@pytest.mark.parametrize(("text", "value"), [("auto", "auto"), ("AUTO", "auto"), ("4", 4.0),
                                             ("1", 1.0), ("2.5", 2.5)])
def test_tdf_option(text: str, value: object) -> None:
    assert dilation.parse_tdf_option(text) == value


@pytest.mark.parametrize("bad", ["0.5", "fast", "-2", "nan"])
def test_bad_tdf_option_names_it(bad: str) -> None:
    with pytest.raises(ValueError, match="--tdf: "):
        dilation.parse_tdf_option(bad)


def test_resolve_forced_and_calibrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forced TDF is taken as it is; auto calibrates (the fake measurement) and scales with
    the emulated rate."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    program = tmp_path / "p.p4"
    program.write_text("// program\n")
    spec = _spineleaf(bw=3)
    forced = dilation.resolve(8.0, "softswitch", program, spec, 252)  # type: ignore[arg-type]
    assert (forced.tdf, forced.auto) == (8.0, False)

    def measure() -> calibrate.Costs:
        return calibrate.Costs(600e-6, 200e-6, "softswitch", 4, 252)

    slow = dilation.resolve("auto", "softswitch", program, spec, 252,  # type: ignore[arg-type]
                            measure=measure)
    fast = dilation.resolve("auto", "softswitch", program, _spineleaf(bw="100G"),  # type: ignore[arg-type]
                            252, measure=measure)
    assert slow.auto and slow.tdf >= 1
    assert fast.tdf > 10_000 * slow.tdf
    assert "cached" in fast.why  # the second call read the first one's measurement
    none = dilation.resolve("auto", "softswitch", None, spec, 252)  # type: ignore[arg-type]
    assert none.tdf == 1.0


def test_collective_timeout_is_bounded_in_real_time() -> None:
    """At a huge TDF the deadline is a multiple of the emulated transfer, not minutes of
    emulated time (weeks of real time); at TDF 1 and a small tensor it is the real timeout."""
    fast = _spineleaf(bw="100G", delay="2us")
    t = dilation.collective_timeout(fast, 1 << 20, 15_000, 120.0)  # type: ignore[arg-type]
    assert t == pytest.approx(100 * (2 * (1 << 20) * 32 / 100e9 + 16e-6))
    assert t * 15_000 < 3600
    slow = _spineleaf(bw=3)
    assert dilation.collective_timeout(slow, 1024, 1, 120.0) == 120.0  # type: ignore[arg-type]


def test_undilated_clocks_are_named_in_the_summary() -> None:
    """A dilated run names what it could not dilate: kernel TCP for the ring, BMv2's clock."""
    from experiment.session import undilated_clock_notes

    assert undilated_clock_notes(1.0, "bmv2", ("ring", "innetwork")) == []
    notes = undilated_clock_notes(4.0, "bmv2", ("ring", "innetwork"))
    assert len(notes) == 2
    assert "kernel TCP" in notes[0] and "BMv2 keeps real time" in notes[1]
    assert undilated_clock_notes(4.0, "softswitch", ("innetwork",)) == []


def test_switch_hops() -> None:
    """Switches a packet passes between the farthest workers: 1 in a rack, 3 in a spine-leaf."""
    assert dilation.switch_hops(_spineleaf(bw=3)) == 3  # type: ignore[arg-type]
    rack = load_spec(resolve("rack"), {"hosts": 3})
    assert dilation.switch_hops(rack) == 1


def test_experiment_json_records_the_dilation(tmp_path: Path) -> None:
    """experiment.json gains the TDF, why it was chosen and the calibration behind it."""
    from experiment.run import record_dilation

    path = tmp_path / "experiment.json"
    path.write_text('{"exact": true}\n')
    costs = calibrate.Costs(1e-4, 2e-4, "softswitch", 4, 252, overhead_s=0.003)
    record_dilation(path, dilation.Dilation(2.5, "calibrated", True, costs))
    import json

    data = json.loads(path.read_text())
    assert data["exact"] is True
    assert data["dilation"]["tdf"] == 2.5 and data["dilation"]["auto"] is True
    assert data["dilation"]["costs"]["overhead_s"] == 0.003


def test_the_c_engine_is_calibrated_as_the_run_will_have_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--engine c`` costs a fraction of the Python engine per packet: its calibration is a
    setting of its own, measured with the C engine (the python engine keeps the old key)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    program = tmp_path / "p.p4"
    program.write_text("// program\n")
    plain = calibrate.cache_key("softswitch", program, 252, 4)
    assert calibrate.cache_key("softswitch", program, 252, 4, engine="python") == plain
    assert calibrate.cache_key("softswitch", program, 252, 4, engine="c") != plain
    c_loop = calibrate.cache_key("softswitch", program, 252, 4, engine="c")
    assert calibrate.cache_key("softswitch", program, 252, 4, engine="c", io="c") == c_loop
    assert calibrate.cache_key("softswitch", program, 252, 4, engine="c", io="python") \
        not in (c_loop, plain)  # the Python loop around C calls costs more per packet
    seen: list[tuple[object, object]] = []

    def measure_costs(*args: object, engine: str | None = None, io: str | None = None,
                      **kw: object) -> calibrate.Costs:
        seen.append((engine, io))
        return calibrate.Costs(10e-6, 50e-6, "softswitch", 4, 252)

    monkeypatch.setattr(calibrate, "measure_costs", measure_costs)
    spec = load_spec(resolve("spineleaf"), {"bw": 3})
    dilation.resolve("auto", "softswitch", program, spec, 252, engine="c", io="c")
    dilation.resolve("auto", "softswitch", program, spec, 252, engine="c", io="c")
    assert seen == [("c", "c")]  # measured once with the C engine, then cached


def test_a_change_to_the_agents_is_a_new_calibration(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The calibration measures a host agent's CPU per packet as well as the switch's, so
    the agents' sources are part of the key: a faster transport is measured again, not read
    from the cache of the slower one."""
    program = tmp_path / "p.p4"
    program.write_text("// program\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "roce.py").write_text("X = 1\n")
    before = calibrate.sources_digest(pkg)
    (pkg / "roce.py").write_text("X = 2\n")
    assert calibrate.sources_digest(pkg) != before
    assert calibrate.agent_build().startswith("agents ")
    key = calibrate.cache_key("softswitch", program, 252, 4)
    monkeypatch.setattr(calibrate, "agent_build", lambda: "agents 0123")
    assert calibrate.cache_key("softswitch", program, 252, 4) != key


def test_a_dilated_run_gives_the_roce_ring_timer_bounds_of_the_emulated_network() -> None:
    """The RoCE ring's own bounds (50 ms lowest, 1 s highest) are what the machine needs at
    TDF 1; at TDF 10,000 on 100 GbE with 2 us links they were emulated seconds, so one lost
    packet waited 500 s of real time (a figure's first all-reduce hung in its barrier). A
    dilated run passes them shrunk by the TDF, never below the emulated round trip, and the
    RoCE ring's processes get them; TCP rings and undilated runs keep theirs."""
    from experiment.session import ExperimentOptions, allreduce_argv
    from workloads.rocecomm import DEFAULT_MAX_RTO, DEFAULT_RTO

    spec = load_spec(resolve("rack"), {"hosts": 4, "bw": "100G", "delay": "2us"})
    opts = dilation.dilated_options(ExperimentOptions(), spec,
                                    dilation.Dilation(10_000.0, "forced", False), "softswitch")
    rtt = 8e-6  # host - switch - host, there and back
    window = ExperimentOptions().slots  # the agents' window, which the RoCE ring gets too
    drain = dilation.drain_seconds(spec, window, 8 * (nr.PATH_MTU + nr.ROCE_HEADER_BYTES))
    assert opts.roce_rto == pytest.approx(max(DEFAULT_RTO / 10_000, 2 * rtt + drain))
    assert opts.roce_max_rto == pytest.approx(DEFAULT_MAX_RTO / 10_000)
    argv = allreduce_argv("ring-roce", opts, rank="0", peers="10.0.1.1:4791")
    assert argv[argv.index("--rto") + 1] == str(opts.roce_rto)
    assert argv[argv.index("--max-rto") + 1] == str(opts.roce_max_rto)
    assert "--rto" not in allreduce_argv("ring", opts, rank=0, peers="10.0.1.1:5400")
    undilated = allreduce_argv("ring-roce", ExperimentOptions(), rank="0", peers="10.0.1.1:4791")
    assert "--rto" not in undilated


def test_a_small_collective_is_bounded_by_its_round_trip(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A gradient of 4,811 float32 on 100 GbE with 2 us links lasts at least a round trip
    (16 us), not its 1.5 us transfer: the calibrated TDF's latency bound uses both (it asked
    1.5 million, ten times too high, for a training run in the papers' network)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    program = tmp_path / "p.p4"
    program.write_text("// program\n")
    spec = _spineleaf(bw="100G", delay="2us")
    shortest = dilation.shortest_collective_seconds(spec, 4811)  # type: ignore[arg-type]
    assert shortest == pytest.approx(4811 * 32 / 100e9 + 16e-6)
    assert dilation.shortest_collective_seconds(spec, 0) == 0.0  # type: ignore[arg-type]
    costs = calibrate.Costs(9e-6, 46e-6, "softswitch", 4, 252, overhead_s=3.6e-3)

    got = dilation.resolve("auto", "softswitch", program, spec, 252,  # type: ignore[arg-type]
                           elements=4811, measure=lambda: costs)
    fixed = calibrate.fixed_cost(costs, 3)
    # the latency bound sets it here (the switches' CPU alone would ask ~3,500)
    assert got.tdf == calibrate.nice_tdf(fixed / (calibrate.OVERHEAD_SHARE * shortest))
    assert 100_000 <= got.tdf < 200_000
