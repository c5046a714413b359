"""The softswitch command line: exit codes and messages, run as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from softswitch import frontend

REPO = Path(__file__).resolve().parent.parent
STF_ONLY = REPO / "tests" / "p4" / "stf_only"
INC = ["-I", str(STF_ONLY / "inc")]

needs_frontend = pytest.mark.skipif(
    not hasattr(frontend, "compile_file"), reason="front end not available yet"
)



def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "softswitch", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_help_lists_commands() -> None:
    """--help names the three commands and exits 0."""
    proc = _cli("--help")
    assert proc.returncode == 0
    for word in ("compile", "stf", "run"):
        assert word in proc.stdout


def test_no_command_is_usage_error() -> None:
    """Without a command argparse prints usage and exits 2."""
    proc = _cli()
    assert proc.returncode == 2 and "usage:" in proc.stderr


@needs_frontend
def test_missing_program_file() -> None:
    """A missing program is one error line and exit 1, no traceback."""
    proc = _cli("compile", "does/not/exist.p4", "--p4info", "/dev/null")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "exist.p4" in proc.stderr


@needs_frontend
def test_compile_error_is_file_line_col(tmp_path: Path) -> None:
    """A compile error prints FILE:LINE:COL: error: ... and exits 1."""
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\ncontrol c() { apply { undefined_thing = 1; } }\n")
    proc = _cli("compile", str(bad), "--p4info", str(tmp_path / "out.txtpb"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"{bad}:2:" in proc.stderr and "error:" in proc.stderr


@needs_frontend
def test_compile_writes_p4info_and_device_config(tmp_path: Path) -> None:
    """compile writes text P4Info and a device config that names the main file."""
    out, cfg = tmp_path / "fwd.txtpb", tmp_path / "fwd.json"
    proc = _cli(
        "compile", str(STF_ONLY / "fwd.p4"), *INC, "--p4info", str(out), "--device-config", str(cfg)
    )
    assert proc.returncode == 0, proc.stderr
    from softswitch.device_config import DeviceConfig, parse_device_config
    from softswitch.p4info import p4info_from_text

    p4info = p4info_from_text(out.read_text())
    assert [t.preamble.name for t in p4info.tables] == ["MyIngress.dmac"]
    config = parse_device_config(cfg.read_bytes())
    assert isinstance(config, DeviceConfig) and config.main == "fwd.p4"


def test_stf_pass_exits_zero() -> None:
    """A passing STF test exits 0."""
    proc = _cli("stf", str(STF_ONLY / "fwd.p4"), str(STF_ONLY / "fwd.stf"), *INC)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout


def test_stf_mismatch_exits_one() -> None:
    """A failing expectation prints the first mismatch and exits 1."""
    proc = _cli("stf", str(STF_ONLY / "fwd.p4"), str(STF_ONLY / "fwd_fail.stf"), *INC)
    assert proc.returncode == 1
    assert "port 2: expected 0000000000020000000000090800BEE0 got " in proc.stderr


def test_stf_bad_line_reports_location(tmp_path: Path) -> None:
    """A bad STF line is reported as FILE:LINE: error: and exits 1."""
    stf = tmp_path / "bad.stf"
    stf.write_text("packet 0 00\nadd nosuch 1 k:1 a()\n")
    proc = _cli("stf", str(STF_ONLY / "fwd.p4"), str(stf), *INC)
    assert proc.returncode == 1
    assert f"{stf}:2: error: no table named 'nosuch'" in proc.stderr


def test_run_dispatches_to_switch() -> None:
    """'run --help' reaches softswitch.switch.main (its own argument parser)."""
    proc = _cli("run", "--help")
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (0, 1)
