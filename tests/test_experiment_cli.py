"""``python -m experiment``: the experiment command lines, above workloads and sim (the
checks that need no network: parsing, and bad options refused before anything starts)."""

from __future__ import annotations

import pytest

from experiment.__main__ import build_parser, main
from experiment.matrix import spec_from_args


def test_matrix_options_become_the_spec() -> None:
    args = build_parser().parse_args(["matrix", "--algos", "ring", "--sizes", "4096",
                                      "--models", "", "--bw", "10M", "--gpus", "1"])
    spec = spec_from_args(args)
    assert (spec.algos, spec.sizes, spec.models, spec.bw_mbit, spec.gpus) == (
        ("ring",), (4096,), (), 10.0, 1)


def test_bad_matrix_options_exit_2_before_a_network_starts(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["matrix", "--algos", "nope", "--models", ""]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m experiment matrix: error: unknown algorithm(s) nope")


@pytest.mark.parametrize("module, command", [("workloads.__main__", "matrix"),
                                             ("sim.__main__", "emulate")])
def test_old_entry_points_are_gone_from_the_lower_layers(
    module: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """workloads and sim no longer start experiments (their layer is below experiment)."""
    import importlib

    with pytest.raises(SystemExit) as info:
        importlib.import_module(module).main([command])
    assert info.value.code == 2
    assert f"invalid choice: '{command}'" in capsys.readouterr().err
