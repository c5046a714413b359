"""The fidelity guard (experiment.fidelity) and the TDF calibration (experiment.calibrate):
verdicts from measured loads, the monitor's peaks, the TDF model and its cache."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiment import calibrate as cal
from experiment.fidelity import Budget, Monitor, RunLoad, judge, link_utilization, softnet_drops
from topo.measure import process_cpu_seconds


def _load(**changes: object) -> RunLoad:
    base = dict(switch_cores={"l1": 0.4, "sp1": 0.1}, switch_peaks={"l1": 0.6, "sp1": 0.4},
                agent_cores={"h1#0": 0.1, "h2#1": 0.1}, machine_cores=2,
                link_utilization={"l1:1": 0.93, "l1:3": 0.5}, machine_drops=0)
    base.update(changes)
    return RunLoad(**base)  # type: ignore[arg-type]


def test_a_run_inside_every_budget_is_faithful() -> None:
    verdict = judge(_load(), tdf=4)
    assert verdict.faithful, verdict.failures
    assert verdict.tdf == 4
    assert verdict.line().startswith("faithful (")
    assert json.loads(json.dumps(verdict.to_dict()))["faithful"] is True


@pytest.mark.parametrize(("changes", "check"), [
    ({"switch_cores": {"l1": 0.97, "sp1": 0.3}}, "switch CPU"),
    ({"switch_peaks": {"l1": 1.0}}, "switch CPU peaks"),
    ({"agent_cores": {"h1#0": 0.95}}, "host CPU"),
    ({"switch_cores": {"l1": 0.8, "sp1": 0.8}, "agent_cores": {"h1#0": 0.3}}, "machine CPU"),
    ({"link_utilization": {"l1:1": 1.4}}, "links at rate"),
    ({"machine_drops": 12}, "machine drops"),
])
def test_each_budget_breach_makes_the_run_unfaithful(changes: dict[str, object],
                                                     check: str) -> None:
    """Every check can fail the run on its own, and the verdict names it."""
    verdict = judge(_load(**changes))
    assert not verdict.faithful
    assert [f.split(":")[0] for f in verdict.failures] == [check]
    assert "NOT faithful" in verdict.line()


def test_budget_is_adjustable() -> None:
    strict = Budget(switch_core=0.3)
    assert not judge(_load(), budget=strict).faithful


def test_monitor_keeps_the_highest_share_over_a_window() -> None:
    """A switch busy for one half-second burst shows in the peak though its mean is low."""
    now = [0.0]
    cpu = {"s1": 0.0}

    def cpu_seconds(pid: int) -> float:
        return cpu["s1"]

    mon = Monitor({"s1": 1}, period=0.1, window=0.5, cpu_seconds=cpu_seconds,
                  clock=lambda: now[0])
    for step in range(40):  # 4 s: idle, then 0.5 s at a full core, then idle
        now[0] = step * 0.1
        if 15 <= step < 20:
            cpu["s1"] += 0.1
        mon.sample()
    assert mon.peaks()["s1"] == pytest.approx(1.0, abs=0.05)
    assert cpu["s1"] / now[0] < 0.2  # the mean alone would have hidden it


def test_monitor_thread_samples_until_stopped() -> None:
    """The thread samples on its own; stop() ends it and returns the peaks."""
    calls: list[int] = []

    def cpu_seconds(pid: int) -> float:
        calls.append(pid)
        return 0.0

    mon = Monitor({"me": 1}, period=0.01, window=0.02, cpu_seconds=cpu_seconds).start()
    deadline = time.monotonic() + 10
    while len(calls) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mon.stop() == {"me": 0.0}
    assert mon._thread is not None and not mon._thread.is_alive()
    seen = len(calls)
    time.sleep(0.05)
    assert len(calls) == seen  # nothing samples after stop()


def test_softnet_drops_sums_every_cpu(tmp_path: Path) -> None:
    f = tmp_path / "softnet_stat"
    f.write_text("0000a000 00000002 00000000\n0000b000 00000010 00000001\n")
    assert softnet_drops(f) == 2 + 16
    assert softnet_drops(tmp_path / "missing") == 0


def test_link_utilization_skips_idle_and_unshaped_links() -> None:
    links = [SimpleNamespace(switch="l1", port=1, utilization=0.9, tx_bytes=5, rx_bytes=0),
             SimpleNamespace(switch="l1", port=2, utilization=0.0, tx_bytes=0, rx_bytes=0),
             SimpleNamespace(switch="l1", port=3, utilization=None, tx_bytes=5, rx_bytes=5)]
    assert link_utilization(links) == {"l1:1": 0.9}


# ----------------------------------------------------------------------------- calibration


@pytest.mark.parametrize(("value", "nice"), [
    (0.3, 1.0), (1.0, 1.0), (1.1, 1.25), (2.2, 2.5), (7, 8), (9.5, 10), (33_333, 40_000),
    (66_667, 80_000), (120, 125),
])
def test_nice_tdf_rounds_up(value: float, nice: float) -> None:
    assert cal.nice_tdf(value) == nice


def _costs(switch_us: float = 600, agent_us: float = 200) -> cal.Costs:
    return cal.Costs(switch_us * 1e-6, agent_us * 1e-6, "softswitch", 2, 252)


def test_tdf_grows_with_the_emulated_rate_and_the_cost() -> None:
    """Ten times the emulated rate, ten times the TDF; a costlier switch, a larger one."""
    fabric = cal.Fabric({"l1": 3, "l2": 3, "sp1": 2}, agents=4, max_bw_bps=3e6, cores=2)
    tdf3, why = cal.choose_tdf(_costs(), fabric, 252)
    fast = cal.Fabric(fabric.fanins, 4, 100e9, 2)
    tdf100g, _ = cal.choose_tdf(_costs(), fast, 252)
    slow, _ = cal.choose_tdf(_costs(switch_us=4000), fabric, 252)
    assert 1 <= tdf3 < tdf100g and tdf3 < slow
    assert tdf100g / tdf3 == pytest.approx(100e9 / 3e6, rel=0.3)
    assert "us CPU per aggregation packet" in why


def test_the_chosen_tdf_keeps_the_modelled_load_inside_the_budget() -> None:
    """At bw / TDF every switch stays under its budget times the headroom."""
    costs = _costs()
    fabric = cal.Fabric({"l1": 3, "l2": 3, "sp1": 2}, agents=4, max_bw_bps=100e9, cores=2)
    tdf, _ = cal.choose_tdf(costs, fabric, 252)
    pps = (100e9 / tdf) / cal.frame_bits(252)
    busiest = 3 * pps * costs.switch_s
    machine = (8 * costs.switch_s + 4 * costs.agent_s) * pps
    assert busiest <= 0.85 * cal.HEADROOM + 1e-9
    assert machine <= 0.9 * 2 * cal.HEADROOM + 1e-9


def test_no_cost_means_real_time() -> None:
    fabric = cal.Fabric({}, agents=2, max_bw_bps=1e9, cores=2)
    assert cal.choose_tdf(_costs(), fabric, 252)[0] == 1.0
    assert math.isinf(cal.max_real_rate(_costs(0, 0), cal.Fabric({"s": 1}, 1, 1e9, 2), 252,
                                        0.5, 0.5))


def test_costs_from_a_calibration_run() -> None:
    bits = cal.frame_bits(252)
    links = [SimpleNamespace(rx_bytes=1000 * bits // 8, tx_bytes=0)]
    ranks = [SimpleNamespace(bytes_sent=500 * bits // 8, cpu_seconds=0.1),
             SimpleNamespace(bytes_sent=500 * bits // 8, cpu_seconds=0.1)]
    run = SimpleNamespace(links=links, switch_cpu={"s1": 0.5}, wall_seconds=2.0, ranks=ranks)
    costs = cal.costs_from_run(run, "bmv2", 2, 252)
    assert costs.switch_s == pytest.approx(1.0 / 1000)
    assert costs.agent_s == pytest.approx(0.2 / 1000)
    assert costs.packets == 1000
    idle = SimpleNamespace(links=[], switch_cpu={}, wall_seconds=1.0, ranks=[])
    with pytest.raises(cal.CalibrationError, match="nothing to measure"):
        cal.costs_from_run(idle, "bmv2", 2, 252)


def _fake_run(elements: int, cpu_per_packet: float, elems: int = 252) -> SimpleNamespace:
    """An all-reduce of ``elements`` float32 on two workers whose switch CPU /proc reads in
    10 ms ticks (rounded down, as the kernel counts)."""
    packets = 2 * -(-elements // elems)
    cpu = math.floor(packets * cpu_per_packet / 0.01) * 0.01
    bits = cal.frame_bits(elems)
    return SimpleNamespace(links=[SimpleNamespace(rx_bytes=packets * bits // 8, tx_bytes=0)],
                           switch_cpu={"s1": cpu / 2.0}, wall_seconds=2.0, exact=True,
                           ranks=[SimpleNamespace(bytes_sent=packets * bits // 16,
                                                  cpu_seconds=0.01)] * 2)


def test_calibration_grows_until_the_switch_cpu_can_be_read() -> None:
    """Regression: the C engine's switch (11 us per packet) used 3 ms on the 32768-float32
    calibration all-reduce at E = 252, which /proc reads as 0.00 s, and the run failed
    ("nothing to measure"); the all-reduce now grows until the CPU is countable, and the
    cost comes out within 5 %."""
    sizes: list[tuple[int, int]] = []

    def run(elements: int, attempt: int) -> SimpleNamespace:
        sizes.append((elements, attempt))
        return _fake_run(elements, 11e-6)

    with pytest.raises(cal.CalibrationError, match="nothing to measure"):
        cal.costs_from_run(_fake_run(cal.CALIBRATION_ELEMENTS, 11e-6), "softswitch", 2, 252)
    costs = cal.costs_from_run(cal.measurable_run(run), "softswitch", 2, 252)
    assert sizes[0] == (cal.CALIBRATION_ELEMENTS, 0) and len(sizes) >= 2
    assert [a for _n, a in sizes] == list(range(len(sizes)))  # a new job name each
    assert cal.switch_cpu_seconds(_fake_run(sizes[-1][0], 11e-6)) >= cal.MIN_SWITCH_CPU_S
    assert costs.switch_s == pytest.approx(11e-6, rel=0.05)


def test_calibration_does_not_grow_what_it_can_measure_or_past_its_limit() -> None:
    sizes: list[int] = []

    def slow(elements: int, attempt: int) -> SimpleNamespace:
        sizes.append(elements)
        return _fake_run(elements, 1e-3)  # the Python engine on a slow machine

    cal.measurable_run(slow)
    assert sizes == [cal.CALIBRATION_ELEMENTS]
    sizes.clear()

    def idle(elements: int, attempt: int) -> SimpleNamespace:
        sizes.append(elements)
        return _fake_run(elements, 0.0)

    cal.measurable_run(idle)
    assert sizes[-1] == cal.CALIBRATION_ELEMENTS * cal.MAX_CALIBRATION_GROWTH
    assert len(sizes) == 3  # x16 each step: 32768 -> 524288 -> 8388608


def test_calibration_is_cached_per_setting(tmp_path: Path) -> None:
    """The first call measures, the second reads the cache; another E measures again; a
    corrupt cache is ignored, not fatal."""
    program = tmp_path / "p.p4"
    program.write_text("#include \"inc.p4\"\n")
    (tmp_path / "inc.p4").write_text("// v1\n")
    cache = tmp_path / "cache.json"
    calls: list[int] = []

    def measure() -> cal.Costs:
        calls.append(1)
        return _costs()

    first, cached = cal.calibrate("softswitch", program, 252, 2, measure, path=cache)
    again, cached2 = cal.calibrate("softswitch", program, 252, 2, measure, path=cache)
    assert (cached, cached2, len(calls)) == (False, True, 1)
    assert again == first
    cal.calibrate("softswitch", program, 64, 2, measure, path=cache)
    assert len(calls) == 2
    (tmp_path / "inc.p4").write_text("// v2\n")  # an included file changed: measure again
    cal.calibrate("softswitch", program, 252, 2, measure, path=cache)
    assert len(calls) == 3
    cal.calibrate("softswitch", program, 252, 2, measure, path=cache, refresh=True)
    assert len(calls) == 4
    cache.write_text("{not json")
    assert cal.load_cached("anything", cache) is None
    cal.calibrate("softswitch", program, 252, 2, measure, path=cache)
    assert json.loads(cache.read_text())["version"] == cal.CACHE_VERSION


def test_calibration_cache_file_of_its_own(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """INA_CALIBRATION_CACHE names the calibration's file and moves nothing else (a test
    that moved XDG_CACHE_HOME for it also lost the switch's program and C caches)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cal.cache_file() == tmp_path / "xdg" / "ina-testbed" / "calibration.json"
    monkeypatch.setenv(cal.CACHE_ENV, str(tmp_path / "mine.json"))
    assert cal.cache_file() == tmp_path / "mine.json"
    cal.store("k", _costs())
    assert cal.load_cached("k") == _costs()
    assert not (tmp_path / "xdg").exists()


def test_switch_cpu_is_read_finer_than_the_clock_tick() -> None:
    """A process's CPU is read to well under /proc's 10 ms tick (the calibration measures
    a few ms of switch CPU): 3 ms of busy loop reads as 3 ms, not 0 or 10."""
    pid = os.getpid()
    for _ in range(3):
        before, own0 = process_cpu_seconds(pid), time.process_time()
        while time.process_time() - own0 < 0.003:
            pass
        after, own1 = process_cpu_seconds(pid), time.process_time()
        assert before is not None and after is not None
        assert after - before == pytest.approx(own1 - own0, abs=0.001)
    assert process_cpu_seconds(2**22 + 12345) is None  # beyond pid_max: no such process


def test_a_fixed_cost_raises_the_tdf_until_it_is_a_small_share() -> None:
    """A 60 ms one-packet cost, paid over the window's 4-round-trip ramp, against a 0.7 s
    emulated transfer needs a TDF of 240 / (2 % of 700) = 17.1; the CPU alone asks for 1."""
    costs = cal.Costs(100e-6, 150e-6, "softswitch", 4, 252, overhead_s=0.06)
    fabric = cal.Fabric({"l1": 4, "l2": 4, "sp1": 2, "sp2": 2}, agents=4, max_bw_bps=3e6,
                        cores=2)
    cpu_only, _ = cal.choose_tdf(costs, fabric, 252)
    tdf, why = cal.choose_tdf(costs, fabric, 252, transfer_s=0.7)
    assert cpu_only == 1.0
    assert tdf == 20.0  # 60 ms x 4 round trips / (2 % of 700 ms) = 17.1, rounded up
    assert "fixed cost 240 ms" in why
    # three switches on the path (spine-leaf): three times the cost, 51.4 -> 60
    assert cal.choose_tdf(costs, fabric, 252, transfer_s=0.7, hops=3)[0] == 60.0


def test_the_machine_latency_check() -> None:
    """The calibrated fixed cost over the TDF may take 5 % of a collective, no more."""
    assert judge(_load(fixed_cost_share=0.02)).faithful
    slow = judge(_load(fixed_cost_share=0.13))
    assert [f.split(":")[0] for f in slow.failures] == ["machine latency"]
    assert "raise the TDF" in slow.line()
    assert "machine latency" not in {c.name for c in judge(_load()).checks}  # uncalibrated


def test_switch_cpu_is_judged_over_the_collective_not_the_window() -> None:
    """A switch busy 0.24 s of a 0.25 s collective inside a 4 s window of process start and
    exit was saturated, though it used 6 % of a core over the window."""
    from experiment.session import AllreduceRun, RankOutcome

    run = AllreduceRun("innetwork", 1024, (RankOutcome(0, "h1", seconds=0.25, exact=True),),
                       switch_cpu={"l1": 0.06}, wall_seconds=4.0, machine_cores=2,
                       busy_real_seconds=0.25)
    verdict = run.fidelity
    assert not verdict.faithful
    assert any(f.startswith("switch CPU: l1 96%") for f in verdict.failures)
