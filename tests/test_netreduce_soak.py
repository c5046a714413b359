"""The soak harness of bench/bench_soak.py, in small: a spine-leaf of built-in switches
with loss and reordering on every link and random egress order stays exact and live."""

from __future__ import annotations

import pytest

from bench.bench_soak import _rows, counts
from bench.netreduce_soak import soak


def test_soak_with_loss_and_reordering_on_every_link() -> None:
    """Five all-reduces with 5 % loss and 5 % reordering on every link: all complete,
    all exact, retransmissions happened and packets were held back."""
    r = soak(5, loss=0.05, reorder=0.05, seed=3, values=96, timeout=60.0)
    assert (r.completed, r.wrong, r.hangs) == (5, 0, 0), r.errors
    assert r.retransmitted > 0 and r.held > 0
    assert r.stale_results == 0
    rows = {row["metric"]: row["value"] for row in _rows("t", r)}
    assert rows["wrong sums"] == 0 and rows["all-reduces completed"] == 5


def test_soak_counts_from_environment() -> None:
    """NR_SOAK_COUNT: one number, or per cell; bad input names the cell and value."""
    assert counts("") == {"loss1": 1000, "loss5": 1000, "loss10": 1000, "reorder5": 1000}
    assert counts("20")["loss10"] == 20
    assert counts("loss1=5,loss10=2") == {"loss1": 5, "loss5": 1000, "loss10": 2,
                                          "reorder5": 1000}
    with pytest.raises(ValueError, match="unknown cell 'loss2'"):
        counts("loss2=5")
    with pytest.raises(ValueError, match="NR_SOAK_COUNT loss1: 'x' is not a whole number"):
        counts("loss1=x")


def test_soak_options_are_checked(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """NR_SOAK_JOBS and the command line's numbers are refused by name before any cell runs."""
    from bench import bench_soak
    from bench.netreduce_soak import main

    monkeypatch.setenv("NR_SOAK_JOBS", "0")
    with pytest.raises(ValueError, match="NR_SOAK_JOBS: 0 must be at least 1"):
        bench_soak.run()
    for argv, what in ((["--loss", "2"], "--loss must be in 0..1"),
                       (["--max-rto", "0"], "--max-rto must be positive")):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert what in capsys.readouterr().err
