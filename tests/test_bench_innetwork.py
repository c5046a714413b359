"""The in-network sweep's arithmetic (bench/bench_innetwork.py), without a network."""

from __future__ import annotations

import pytest

from bench.bench_innetwork import SIZES, frame_ideal
from sim.emulation import RETH_TAG, ROCE_HEADER, TCP_HEADER, TCP_MSS


def test_frame_ideal_at_full_mtu_is_close_to_the_papers_ratio() -> None:
    """At E = 256 the wire formats allow >= 0.93 of 2(P-1)/P (issue 13), at E = 64 not."""
    for p in (4, 8):
        paper = 2 * (p - 1) / p
        assert frame_ideal(1_048_576, p, 256) >= 0.93 * paper
        assert frame_ideal(1_048_576, p, 64) < 0.85 * paper


def test_frame_ideal_is_the_ratio_of_wire_bytes() -> None:
    """Ring: 2(P-1)/P of the tensor in 1448-byte segments with a 66-byte header and half an
    ACK; in-network: the tensor and its clamp word in E-element packets with RETH + tag
    (the leaf-spine link, the busiest)."""
    size, p, e = 262144, 4, 256
    ring = 1.5 * size * 4 * (TCP_MSS + TCP_HEADER + TCP_HEADER / 2) / TCP_MSS
    packets = -(-(size + 1) // e)
    ina = packets * (4 * e + ROCE_HEADER + RETH_TAG)
    assert frame_ideal(size, p, e) == pytest.approx(ring / ina, rel=1e-3)


def test_every_rate_has_a_tensor_size() -> None:
    assert sorted(SIZES) == [3.0, 10.0, 30.0, 100.0] and all(v > 0 for v in SIZES.values())


def test_a_network_that_fails_to_start_costs_its_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """One rate whose network fails to come up (a pipeline push past its deadline on a
    loaded machine) gives a 'failed' row; the other rates keep theirs (before, the error
    dropped every row of the sweep)."""
    import contextlib
    import math

    import bench.bench_innetwork as bi
    import experiment.matrix as matrix

    @contextlib.contextmanager
    def network(spec, rundir):  # type: ignore[no-untyped-def]
        if spec.bw_mbit == 100.0:
            raise RuntimeError("SetForwardingPipelineConfig failed: DEADLINE_EXCEEDED")
        yield spec

    monkeypatch.setattr(bi.os, "geteuid", lambda: 0)
    monkeypatch.setattr(matrix, "running_network", network)
    monkeypatch.setattr(matrix, "free_grpc_base", lambda count: 46000)
    monkeypatch.setattr(bi, "_config_rows", lambda launch, bw, elems: [
        bi._row(f"ring, E={elems}, {bw:g} Mbit/s", "time", 1.0, "ms")])
    monkeypatch.setenv("INA_BENCH_RATES", "3,100")
    monkeypatch.setenv("INA_BENCH_ELEMS", "256")
    rows = bi.run()
    assert [r["name"] for r in rows] == ["ring, E=256, 3 Mbit/s", "network, E=256, 100 Mbit/s"]
    assert math.isnan(rows[1]["value"]) and "DEADLINE_EXCEEDED" in rows[1]["notes"]
