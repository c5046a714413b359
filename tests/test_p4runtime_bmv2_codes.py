"""The same 77 illegal P4Runtime requests sent to this switch and to BMv2's
``simple_switch_grpc``, each compared with the table in tests/p4runtime_illegal.py (which
docs/conformance.md reproduces). The BMv2 half runs wherever ``simple_switch_grpc`` is on
PATH: with p4c's P4Info and JSON where p4c is installed, else with our P4Info and a JSON
holding the same control-plane objects (tests/bmv2_json.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from softswitch.device_config import make_device_config
from softswitch.p4runtime.server import default_loader
from tests.bmv2 import free_port_block
from tests.bmv2_json import bmv2_json
from tests.p4runtime_illegal import CASES, Target, our_server, setup_updates

PROGRAM = Path(__file__).resolve().parent / "p4" / "p4rt_codes.p4"


def test_table_is_consistent() -> None:
    """At least 60 requests; where the specification prescribes a code we answer it; every
    difference from BMv2 is explained."""
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)
    for c in CASES:
        if c.spec != "-":
            assert c.ours == c.spec, c.name
        if c.ours != c.bmv2:
            assert c.note, f"{c.name}: difference from BMv2 without an explanation"


def run_cases(target: Target, column: str) -> dict[str, tuple[str, str]]:
    """Push the program, write the setup state, send every case; the mismatches with the
    expected ``column`` ('ours' or 'bmv2') as name -> (expected, answered)."""
    target.push_pipeline()
    target.write(setup_updates(target.ids))
    wrong: dict[str, tuple[str, str]] = {}
    for case in CASES:
        expected = getattr(case, column)
        got = target.code(case)
        if got != expected:
            wrong[case.name] = (expected, got)
    return wrong


@pytest.fixture
def our_switch() -> Iterator[str]:
    """This switch's P4Runtime server (real compiler, no ports) on a free loopback port."""
    with our_server() as address:
        yield address


def test_our_status_codes(our_switch: str) -> None:
    """This switch answers every illegal request with the code in the table."""
    dc = make_device_config(PROGRAM)
    _pipeline, p4info = default_loader(dc)
    target = Target(our_switch, p4info, dc)
    try:
        wrong = run_cases(target, "ours")
    finally:
        target.close()
    assert wrong == {}


# ------------------------------------------------------------------------------ BMv2


def _p4c() -> list[str] | None:
    if shutil.which("p4c-bm2-ss"):
        return ["p4c-bm2-ss"]
    if shutil.which("p4c"):
        return ["p4c", "--target", "bmv2", "--arch", "v1model"]
    return None


def compile_for_bmv2(tmp_path: Path) -> tuple[p4info_pb2.P4Info, bytes]:
    """P4Info and BMv2 JSON of the program: from p4c where installed, else our P4Info with
    a JSON that has its control-plane objects (tests/bmv2_json.py)."""
    p4c = _p4c()
    if p4c is None:
        _pipeline, p4info = default_loader(make_device_config(PROGRAM))
        return p4info, bmv2_json(p4info, PROGRAM.name)
    out = tmp_path / "p4rt_codes.json"
    info_txt = tmp_path / "p4info.txt"
    cc = subprocess.run([*p4c, "--p4runtime-files", str(info_txt), "-o", str(out), str(PROGRAM)],
                        capture_output=True, text=True, timeout=300)
    assert cc.returncode == 0, cc.stderr
    if out.is_dir():  # the p4c driver writes a directory
        out = next(out.glob("*.json"))
    return text_format.Parse(info_txt.read_text(), p4info_pb2.P4Info()), out.read_bytes()


@pytest.fixture
def bmv2(tmp_path: Path) -> Iterator[tuple[str, p4info_pb2.P4Info, bytes, Path]]:
    """simple_switch_grpc without interfaces, gRPC and thrift on free loopback ports, with
    the program's P4Info and BMv2 JSON; stopped by pid."""
    p4info, device_config = compile_for_bmv2(tmp_path)
    grpc_port = free_port_block(2)
    thrift_port = grpc_port + 1
    ipc = f"ipc://{tmp_path}/notify-{uuid.uuid4().hex[:8]}.ipc"
    log = open(tmp_path / "bmv2.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["simple_switch_grpc", "--no-p4", "--device-id", "0", "--thrift-port", str(thrift_port),
         "--notifications-addr", ipc, "--",
         "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        yield f"127.0.0.1:{grpc_port}", p4info, device_config, tmp_path / "bmv2.log"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None,
                    reason="BMv2 simple_switch_grpc not installed")
def test_bmv2_status_codes(bmv2: tuple[str, p4info_pb2.P4Info, bytes, Path]) -> None:
    """BMv2 answers every illegal request with the code in the table (so the table's
    differences are real and up to date)."""
    address, p4info, device_config, log = bmv2
    try:
        target = Target(address, p4info, device_config)
    except Exception as exc:  # not ready: show what BMv2 said
        pytest.fail(
            f"simple_switch_grpc did not serve P4Runtime ({exc}): {log.read_text()[-2000:]}"
        )
    try:
        wrong = run_cases(target, "bmv2")
    finally:
        target.close()
    assert wrong == {}
