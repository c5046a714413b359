"""Validation against the emulation (issue 9): the emulated fabric's parameters and matrix
rows (the small emulation that the simulator and the cost model must match, which needs root:
tests/test_sim_emulation_net.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.emulation import (
    RETH_TAG,
    TCP_MSS,
    fabric_for,
    ina_header_bytes,
    load_matrix_rows,
    rows_from_matrix,
    tcp_header_bytes,
)
from sim.fabric import emulated
from sim.model import predict
from sim.validate import THRESHOLD, ValidationInputError, load_rows, report, validate

SPEC = {"spines": 2, "leaves": 2, "hosts_per_leaf": 2, "gpus": 1, "bw_mbit": 3.0,
        "elems": 64, "credits": 4, "msg_pkts": 16, "density": 0.01}


def _cell(algo: str, size: int, seconds: float, **extra: Any) -> dict[str, Any]:
    return {"kind": "allreduce", "algo": algo, "workers": 4, "size": size,
            "seconds": seconds, "exact": True, "errors": [], **extra}


def test_frame_overheads() -> None:
    """In-network packets carry 58 header bytes + tag share + ACK share; TCP 66 + half an ACK."""
    assert ina_header_bytes(16, 64) == round(58 + 32 / 16 + 62 / 16)
    assert tcp_header_bytes() == 99
    assert TCP_MSS == 1448


def test_innetwork_fabric_is_one_spine_with_tag() -> None:
    """An emulated in-network job aggregates on one spine with +32-byte leaf-spine packets."""
    f = fabric_for("innetwork", SPEC)
    assert (f.segment_bytes, f.ina_spines) == (256, 1)
    assert f.header_bytes + f.switch_header_bytes == 58 + RETH_TAG
    assert f.window == 64
    # the leaf-spine link, not the host link, bounds it: 346 frame bytes per 256 payload
    assert f.ina_beta() == pytest.approx(346 * 8 / (3e6 * 256))


def test_ring_fabric_is_tcp() -> None:
    """An emulated ring moves 1448-byte TCP segments."""
    f = fabric_for("ring", SPEC)
    assert (f.segment_bytes, f.header_bytes) == (1448, 99)


def test_default_fabric_model_unchanged() -> None:
    """Spraying over both spines with no extra header keeps in-network host-link bound."""
    f = emulated(10.0)
    assert f.ina_beta() == pytest.approx(8 * f.wire_factor / f.host_bps)


def test_rows_from_matrix_skip_failed_and_unknown() -> None:
    """Only successful all-reduce cells of modelled algorithms become rows."""
    doc = {"spec": SPEC, "cells": [
        _cell("ring", 65536, 1.2), _cell("innetwork", 65536, 1.0),
        _cell("hybrid", 65536, 1.0), _cell("ring", 262144, 5.0, errors=["rank 1: died"]),
        {"kind": "replay", "algo": "ring", "workers": 4, "model": "resnet50", "seconds": 1.0}]}
    rows = rows_from_matrix(doc)
    assert [(r["algorithm"], r["bytes"]) for r in rows] == [("ring", 262144), ("ina", 262144)]
    assert rows[1]["topology"]["ina_spines"] == 1


def test_matrix_file_is_loaded_by_validate(tmp_path: Path) -> None:
    """``python -m sim validate`` reads a matrix result directly (model only here)."""
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"spec": SPEC, "cells": [_cell("innetwork", 262144, 4.0)]}))
    rows = load_rows(path)
    assert rows == load_matrix_rows([path])
    (r,) = validate(rows)
    assert r.algorithm == "ina" and abs(r.model_error) < THRESHOLD


def test_matrix_file_errors_are_clear(tmp_path: Path) -> None:
    """A file that is not a matrix result is named in the error."""
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="x.json"):
        load_matrix_rows([path])


def _run_dir(tmp_path: Path, kind: str, leaves: int, spines: int, seconds: dict[str, Any],
             elems: int | None = 64, schema: int = 2) -> Path:
    """A run directory as ``python -m experiment.run`` leaves it (the parts rows_from_run
    reads); topology.json schema 2 has links' bw_bps, schema 1 (older runs) bw_mbit."""
    rundir = tmp_path / f"{kind}{schema}"
    (rundir / "results").mkdir(parents=True)
    switches = ([{"name": f"l{i}", "role": "leaf"} for i in range(leaves)]
                + [{"name": f"sp{i}", "role": "spine"} for i in range(spines)])
    rate = {"bw_bps": 3e6} if schema == 2 else {"bw_mbit": 3.0}
    links = [{"kind": "host", **rate}] + ([{"kind": "fabric", **rate}] if spines else [])
    (rundir / "topology.json").write_text(json.dumps(
        {"kind": kind, "switches": switches, "hosts": [{"name": f"h{i}", "gpus": 1}
                                                       for i in range(4)], "links": links}))
    runs = [{"algorithm": algo, "exact": True, "elements": 65536, "seconds": t,
             "ranks": [{}] * 4} for algo, t in seconds.items()]
    (rundir / "results" / "experiment.json").write_text(json.dumps(
        {"elems": elems, "job": {"credits": 2, "msg_pkts": 32}, "runs": runs}))
    return rundir


def test_make_run_directory_is_validated(tmp_path: Path) -> None:
    """``python -m sim validate run/latest``: a rack and a spine-leaf run directory become
    rows on their own fabrics; this session's measured times pass the model."""
    rack = load_rows(_run_dir(tmp_path, "rack", 1, 0, {"innetwork": 0.876, "ring": 1.124}))
    assert [r["algorithm"] for r in rack] == ["ina", "ring"]
    assert (rack[0]["topology"]["leaves"], rack[0]["topology"]["hosts_per_leaf"]) == (1, 4)
    sl = load_rows(_run_dir(tmp_path, "spineleaf", 2, 2, {"innetwork": 0.955, "ring": 1.124}))
    assert sl[0]["topology"]["leaves"] == 2 and sl[0]["topology"]["ina_spines"] == 1
    assert sl[0]["topology"]["segment_bytes"] == 256 and sl[1]["topology"]["segment_bytes"] == 1448
    for row in validate(rack + sl):
        assert not row.flagged, report(validate(rack + sl))
    old = load_rows(_run_dir(tmp_path, "rack", 1, 0, {"innetwork": 0.876, "ring": 1.124},
                             schema=1))
    assert [{**r, "emulation": None} for r in old] == [{**r, "emulation": None} for r in rack]


def test_make_run_directory_errors_are_clear(tmp_path: Path) -> None:
    """An older run without E, links of one kind at different rates, or a directory that is
    no run: each is named in the error."""
    old = _run_dir(tmp_path, "rack", 1, 0, {"ring": 1.1}, elems=None)
    with pytest.raises(ValidationInputError, match="elems"):
        load_rows(old)
    mixed = _run_dir(tmp_path, "spineleaf", 2, 2, {"ring": 1.1})
    topo = json.loads((mixed / "topology.json").read_text())
    topo["links"].append({"kind": "host", "bw_mbit": 10.0})
    (mixed / "topology.json").write_text(json.dumps(topo))
    with pytest.raises(ValidationInputError, match="different rates"):
        load_rows(mixed)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValidationInputError, match="not a readable run directory"):
        load_rows(empty)


def test_model_ina_link_bound_at_3mbit() -> None:
    """1 MiB in-network on the emulated fabric: 4096 packets of 346 bytes at 3 Mbit/s."""
    f = fabric_for("innetwork", SPEC)
    seconds = predict("ina", f, 1 << 20)
    assert seconds == pytest.approx(4096 * 346 * 8 / 3e6, rel=0.02)
