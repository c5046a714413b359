"""Simulation (issue 9): ns-3 runs of the collectives, the cost models, validation, sweeps."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from sim import ns3sim, sweeps
from sim.fabric import Fabric, datacenter, emulated
from sim.iteration import iteration_time
from sim.model import predict
from sim.schedules import ALGORITHMS, build, chunk_sizes
from sim.sweeps import Simulate
from sim.validate import ValidationInputError, report, validate
from workloads.profiles import get_profile


@pytest.fixture(scope="module")
def simulate() -> Simulate:
    """The ns-3 simulate callback (skips the module's ns-3 tests if ns-3 cannot load)."""
    if not ns3sim.available():
        pytest.skip("ns-3 (pip package ns3) is not installed")

    def seconds(algorithm: str, f: Fabric, nbytes: int, density: float) -> float:
        return ns3sim.simulate(algorithm, f, nbytes, density).seconds

    return seconds


def test_chunk_sizes_sum() -> None:
    """Ring chunks are near-equal and sum to the message."""
    sizes = chunk_sizes(1001, 4)
    assert sizes.tolist() == [251, 250, 250, 250]


def test_ring_schedule_shape() -> None:
    """A ring over P workers has 2(P-1)·P sends, each moving one chunk to the next worker."""
    f = emulated()
    s = build("ring", f, 4096)
    assert s.ops == 2 * 3 * 4
    assert (s.dst == (s.src + 1) % 4).all()
    assert s.nbytes.sum() == 2 * 3 * 4096


def test_unknown_algorithm_is_clear() -> None:
    """An unknown algorithm names the known ones."""
    with pytest.raises(ValueError, match="ring"):
        build("butterfly", emulated(), 10)


def test_fabric_rejects_bad_counts() -> None:
    """A fabric with zero leaves is refused with the field's name."""
    with pytest.raises(ValueError, match="leaves"):
        Fabric(leaves=0)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_sim_matches_model_at_emulated_scale(simulate: Simulate, algorithm: str) -> None:
    """On the emulated 2x2x2 fabric at 10 Mbit/s, ns-3 and the cost model agree within 15 %."""
    f = emulated(10.0)
    n = 256 << 10
    sim = simulate(algorithm, f, n, 0.01)
    model = predict(algorithm, f, n, 0.01)
    assert abs(model - sim) / sim < 0.15


def test_sim_matches_model_at_20mbit(simulate: Simulate) -> None:
    """The agreement holds at 20 Mbit/s links too (ring, 1 MiB)."""
    f = emulated(20.0)
    sim = simulate("ring", f, 1 << 20, 0.01)
    assert abs(predict("ring", f, 1 << 20) - sim) / sim < 0.15


def test_single_send_time_is_bandwidth_plus_path(simulate: Simulate) -> None:
    """In-network all-reduce takes n·β plus one slot round trip (ns-3 adds a 2-byte PPP header)."""
    f = emulated(10.0, switch_delay_s=0.0, header_bytes=0)
    n = 100 * 1024
    sim = simulate("ina", f, n, 0.01)
    assert sim == pytest.approx(n * 8 / 10e6 + f.ina_round_trip(), rel=5e-3)


def test_fabric_links_standing_for_a_deeper_tree_lengthen_the_round_trip(
        simulate: Simulate) -> None:
    """With fabric_extra_hops the ns-3 leaf-spine links carry the hops they stand for: the
    in-network slot's round trip crosses two of them each way, and the simulation follows
    the model's longer round trip."""
    f = emulated(10.0, switch_delay_s=1e-4, header_bytes=0, link_delay_s=1e-3)
    deep = f.replace(fabric_extra_hops=1)
    n = 100 * 1024
    assert deep.ina_round_trip() - f.ina_round_trip() == pytest.approx(
        2 * (deep.fabric_link_delay - f.fabric_link_delay))
    sim, sim_deep = simulate("ina", f, n, 0.01), simulate("ina", deep, n, 0.01)
    assert sim_deep - sim == pytest.approx(deep.ina_round_trip() - f.ina_round_trip(),
                                           rel=0.05)


def test_a_send_window_bounds_point_to_point_packets_in_flight(simulate: Simulate) -> None:
    """send_window (the RoCE ranks' window): one that covers the round trip changes
    nothing; one packet in flight, acknowledged alone, makes every packet of a ring step
    wait for its ACK: a packet time, the way there and the ACK's way back each."""
    f = emulated(10.0, leaves=1, spines=1, hosts_per_leaf=2, switch_delay_s=0.0,
                 link_delay_s=1e-3, header_bytes=0)
    n = 64 * 1024  # two ring steps of 32 KiB: 32 packets each
    free = simulate("ring", f, n, 0.01)
    assert simulate("ring", f.replace(send_window=1024), n, 0.01) == pytest.approx(free)
    one = simulate("ring", f.replace(send_window=1, send_ack_every=1), n, 0.01)
    packet = f.packet_time(f.host_bps)
    ack = 2 * (1e-3 + 4 * 8 / f.host_bps)  # two host links, the AETH alone (no header here)
    per_packet = packet + f.path_latency(False) + ack
    assert one == pytest.approx(2 * 32 * per_packet, rel=0.02)
    assert one > 5 * free
    with pytest.raises(ValueError, match="send_ack_every must be >= 1"):
        f.replace(send_ack_every=0)


def test_message_credits_return_when_the_whole_message_is_in(simulate: Simulate) -> None:
    """With message-level credits (the papers' and the emulation's agents'), one credit of M
    packets sends a message, waits for its whole result and its receiver's ACK (to the
    sender behind the same leaf: two host links), then sends the next: a message costs its
    transfer, one slot round trip and the ACK's trip, and the time is link-bound from the
    first credit count that covers that cycle (docs/reproduction.md, the credits figure).
    A sliding window of the same M packets overlaps the round trips and is faster."""
    msg, msgs = 4, 12
    f = emulated(100.0, switch_delay_s=0.0, header_bytes=0, link_delay_s=100e-6,
                 window=msg, message_packets=msg)
    n = msg * msgs * f.segment_bytes
    transfer = msg * f.segment_bytes * 8 / f.host_bps
    ack = 2 * (f.link_delay_s + 4 * 8 / f.host_bps)  # host -> leaf -> host, 4 bytes of AETH
    cycle = transfer + f.ina_round_trip() + ack
    one = simulate("ina", f, n, 0.01)
    assert one == pytest.approx(msgs * cycle, rel=0.03)
    assert simulate("ina", f.replace(message_packets=0), n, 0.01) < 0.8 * one
    knee = math.ceil(cycle / transfer)  # 4 credits here
    link_bound = n * 8 / f.host_bps + f.ina_round_trip()
    below = simulate("ina", f.replace(window=(knee - 1) * msg), n, 0.01)
    at = simulate("ina", f.replace(window=knee * msg), n, 0.01)
    assert below > 1.1 * link_bound
    assert at == pytest.approx(link_bound, rel=0.03)
    with pytest.raises(ValueError, match="message_packets must be >= 0, got -1"):
        f.replace(message_packets=-1)


def test_ina_flat_in_p_ring_grows(simulate: Simulate) -> None:
    """In the simulator, in-network time stays flat from 16 to 64 workers; ring grows."""
    n = 1 << 20
    ina = [simulate("ina", datacenter(p, hosts_per_leaf=8), n, 0.01) for p in (16, 64)]
    ring = [simulate("ring", datacenter(p, hosts_per_leaf=8), n, 0.01) for p in (16, 64)]
    assert ina[1] / ina[0] < 1.02
    assert ring[1] / ring[0] > 1.5
    assert ina[1] < ring[1]


def test_crossover_found(simulate: Simulate) -> None:
    """The small crossover sweep finds a finite B_intra/B_inter crossover near the model's."""
    result = sweeps.crossover(simulate, small=True)
    assert 1.0 < result["sim_crossover"] < 4.0
    assert 1.0 < result["model_crossover"] < 4.0
    assert abs(result["sim_crossover"] - result["closed_form_alpha0"]) < 0.5


def test_small_sweeps_run(simulate: Simulate, tmp_path: Path) -> None:
    """Every sweep runs in its small form, ticks once per row and is JSON-serialisable."""
    from sim.plots import PLOTTERS

    for name in sweeps.SWEEPS:
        ticks: list[int] = []

        def tick(ticks: list[int] = ticks) -> None:
            ticks.append(1)

        result = sweeps.run(name, simulate, small=True, tick=tick)
        assert len(ticks) == sweeps.plan_size(name, small=True)
        json.dumps(result)
        png = PLOTTERS[name](result, tmp_path / f"{name}.png")
        assert png.stat().st_size > 1000


def test_speedup_grows_as_the_network_slows(simulate: Simulate) -> None:
    """Hierarchical in-network's iteration speedup over ring rises as the inter-machine
    rate falls, and never exceeds its communication-only speedup (compute overlaps)."""
    result = sweeps.speedup(simulate, small=True)
    rows = sorted(result["by_rate"], key=lambda r: r["gbit"])
    assert [r["gbit"] for r in rows] == sorted(sweeps.SPEEDUP_RATES_GBIT_SMALL)
    assert rows[0]["sim_speedup"] > rows[-1]["sim_speedup"] >= 1.0
    for r in rows:
        assert r["sim_speedup"] <= r["sim_comm_speedup"] + 1e-9
        assert r["model_speedup"] == pytest.approx(r["sim_speedup"], rel=0.15)
        assert r["sim_comm_speedup"] > 1.5  # as a communication step it always wins


def test_validation_flags_and_passes(simulate: Simulate) -> None:
    """Synthetic measured rows: one near the simulation passes, one 50 % off is flagged."""
    f = emulated(10.0)
    n = 256 << 10
    truth = simulate("ring", f, n, 0.01)
    topo = {"spines": 2, "leaves": 2, "hosts_per_leaf": 2, "bw_mbit": 10}
    rows = [
        {"algorithm": "ring", "workers": 4, "bytes": n, "seconds": truth * 1.05, "topology": topo},
        {"algorithm": "ring", "workers": 4, "bytes": n, "seconds": truth * 1.5, "topology": topo},
    ]
    results = validate(rows, simulate)
    assert [r.flagged for r in results] == [False, True]
    assert results[0].sim_error == pytest.approx(1 / 1.05 - 1, rel=1e-6)
    assert "FLAGGED" in report(results)


def test_validation_rejects_inconsistent_workers() -> None:
    """A row whose worker count disagrees with its topology is refused, naming the row."""
    rows = [{"algorithm": "ring", "workers": 5, "bytes": 10, "seconds": 1.0, "topology": {}}]
    with pytest.raises(ValidationInputError, match="row 0"):
        validate(rows)


def test_iteration_overlap_bounds() -> None:
    """Iteration time lies between compute alone and compute plus all communication."""
    profile = get_profile("resnet50", 10.0)
    it = iteration_time(profile, lambda n: n / 1e9)
    assert it.compute_s <= it.iteration_s <= it.compute_s + it.comm_s


def test_cli_run_prints_json(simulate: Simulate, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m sim run` simulates one collective and prints sim and model seconds."""
    from sim.__main__ import main

    assert main(["run", "--algorithm", "ina", "--bytes", "65536"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workers"] == 4 and out["sim_s"] > 0


def test_ns3_loads_only_the_modules_the_executor_includes(simulate: Simulate) -> None:
    """The wheel's own loader (``from ns import ns``) parses every module's headers, 15-20 s
    of CPU in each process; the executor needs three, loaded in 2-3 s."""
    assert "ns3.ns" not in sys.modules and "ns" not in sys.modules
    assert ns3sim.ns3_modules() == ("core", "network", "point-to-point")
