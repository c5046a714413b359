"""The controller's BMv2 runtime (Thrift) fallback for registers, without BMv2.

A fake P4Runtime server refuses register entries the way PI (inside ``simple_switch_grpc``)
does, and a fake ``simple_switch_CLI`` (tests/bmv2_fake_cli.py) answers in the real CLI's
formats; the real pair is exercised by tests/test_bmv2_controller.py where BMv2 is installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.bmv2_runtime import Bmv2Runtime
from controller.cli import main
from controller.errors import Bmv2RuntimeError
from tests import bmv2_fake_cli
from tests.p4runtime_server_fake import FakeP4RuntimeServer, free_tcp_port

P4INFO = """
pkg_info { arch: "v1model" }
registers {
  preamble { id: 369100001 name: "MyIngress.conn_psn" alias: "conn_psn" }
  type_spec { bitstring { bit { bitwidth: 24 } } }
  size: 8
}
"""


@pytest.fixture
def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake simple_switch_CLI first on PATH; returns its state file."""
    bindir = tmp_path / "bin"
    bmv2_fake_cli.install(bindir)
    monkeypatch.setenv("PATH", f"{bindir}:{Path('/usr/bin')}:{Path('/bin')}")
    state = tmp_path / "fake-bmv2.json"
    monkeypatch.setenv(bmv2_fake_cli.STATE_ENV, str(state))
    return state


@pytest.fixture
def server() -> Iterator[FakeP4RuntimeServer]:
    with FakeP4RuntimeServer(device_id=1) as srv:
        srv.servicer.unimplemented.add("register_entry")
        yield srv


def _rundir(tmp_path: Path, server: FakeP4RuntimeServer, thrift_port: int | None) -> Path:
    (tmp_path / "p4info.txtpb").write_text(P4INFO)
    switch = {"name": "s1", "device_id": 1, "grpc_addr": server.address, "role": "leaf",
              "index": 1, "target": "bmv2", "cpu_port": None, "ports": []}
    if thrift_port is not None:
        switch["thrift_port"] = thrift_port
    topo = {"schema": 1, "kind": "rack", "target": "bmv2", "switches": [switch], "hosts": [],
            "links": [], "p4info": "p4info.txtpb"}
    rundir = tmp_path / "run"
    rundir.mkdir()
    (rundir / "topology.json").write_text(json.dumps(topo))
    (rundir / "p4info.txtpb").write_text(P4INFO)
    return rundir


def _state(path: Path, ports: list[int], cells: list[int]) -> None:
    path.write_text(json.dumps({"ports": ports, "registers": {"MyIngress.conn_psn": cells}}))


def _cli(rundir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--rundir", str(rundir), "--json", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_register_read_falls_back_to_thrift(tmp_path: Path, fake_cli: Path,
                                            server: FakeP4RuntimeServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """P4Runtime says UNIMPLEMENTED: the values come from BMv2's runtime, non-zero cells."""
    port = free_tcp_port()
    _state(fake_cli, [port], [0, 7, 0, 0, 0, 0, 0, 0x123456])
    rundir = _rundir(tmp_path, server, port)
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn")
    assert code == 0, err
    assert json.loads(out) == [{"index": 1, "value": 7}, {"index": 7, "value": 0x123456}]
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn",
                          "--index", "2")
    assert code == 0, err
    assert json.loads(out) == [{"index": 2, "value": 0}]


def test_register_write_falls_back_to_thrift(tmp_path: Path, fake_cli: Path,
                                             server: FakeP4RuntimeServer,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """--set: PI refuses the MODIFY per update; the cell is written over Thrift and read back."""
    port = free_tcp_port()
    _state(fake_cli, [port], [0] * 8)
    rundir = _rundir(tmp_path, server, port)
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "MyIngress.conn_psn",
                          "--index", "3", "--set", "4242")
    assert code == 0, err
    assert json.loads(out) == [{"index": 3, "value": 4242}]
    assert json.loads(fake_cli.read_text())["registers"]["MyIngress.conn_psn"][3] == 4242


@pytest.mark.parametrize(("args", "message"), [
    (("--index", "8"), "error: index: 8 is outside register MyIngress.conn_psn (0..7)"),
    (("--index", "1", "--set", str(1 << 24)), "error: value: 16777216 does not fit register"),
    (("--set", "1"), "error: index: --set needs --index"),
])
def test_bad_register_requests_name_the_field(tmp_path: Path, fake_cli: Path,
                                              server: FakeP4RuntimeServer,
                                              capsys: pytest.CaptureFixture[str],
                                              args: tuple[str, ...], message: str) -> None:
    port = free_tcp_port()
    _state(fake_cli, [port], [0] * 8)
    rundir = _rundir(tmp_path, server, port)
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn", *args)
    assert code == 2
    assert err.startswith(message), err
    assert "Traceback" not in out + err


def test_no_thrift_port_says_what_bmv2_lacks(tmp_path: Path, fake_cli: Path,
                                             server: FakeP4RuntimeServer,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Without a recorded Thrift port the error says why (PI's message) and what is missing."""
    rundir = _rundir(tmp_path, server, None)
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn")
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "does not implement register reads over P4Runtime" in err
    assert "records no thrift_port" in err
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn",
                          "--index", "0", "--set", "1")
    assert code == 2
    assert "register writes" in err and "register_entry writes are not supported" in err


def test_unreachable_thrift_port_is_one_line(tmp_path: Path, fake_cli: Path,
                                             server: FakeP4RuntimeServer,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    port = free_tcp_port()
    _state(fake_cli, [], [0] * 8)
    rundir = _rundir(tmp_path, server, port)
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn")
    assert code == 2
    assert err.strip() == (f"error: switch s1: BMv2 runtime (Thrift) at 127.0.0.1:{port}: "
                           f"unreachable (is the switch running with --thrift-port {port}?)")


def test_missing_cli_is_reported(tmp_path: Path, server: FakeP4RuntimeServer,
                                 capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rundir = _rundir(tmp_path, server, free_tcp_port())
    code, out, err = _cli(rundir, capsys, "registers", "--switch", "s1", "conn_psn")
    assert code == 2
    assert "simple_switch_CLI not found on PATH" in err


def test_runtime_splits_answers_per_command_and_reports_cli_errors(fake_cli: Path) -> None:
    """Several commands in one session: one answer each; the CLI's own errors become
    Bmv2RuntimeError naming the command."""
    port = free_tcp_port()
    _state(fake_cli, [port], [1, 2, 3])
    rt = Bmv2Runtime("s1", "127.0.0.1", port)
    rt.write_registers("MyIngress.conn_psn", {0: 10, 2: 30})
    assert rt.read_register("MyIngress.conn_psn") == {0: 10, 1: 2, 2: 30}
    assert rt.run(["register_read MyIngress.conn_psn 1", "register_read MyIngress.conn_psn 2"]) \
        == ["MyIngress.conn_psn[1]= 2", "MyIngress.conn_psn[2]= 30"]
    with pytest.raises(Bmv2RuntimeError, match=r"'register_read MyIngress.nope 0' failed: "
                       r"Error: Invalid register name \(MyIngress.nope\)"):
        rt.read_register("MyIngress.nope", 0)
    with pytest.raises(Bmv2RuntimeError, match=r"INVALID_INDEX"):
        rt.write_registers("MyIngress.conn_psn", {5: 1})
    with pytest.raises(Bmv2RuntimeError, match="is not a P4 name"):
        rt.read_register("x; rm -rf /")


def test_cli_runs_on_a_python_that_has_thrift(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """BMv2's CLI is '#!/usr/bin/env python3'; when that python3 (a pyenv or venv first on
    PATH) lacks the thrift module, the system Python that has it runs the script."""
    from controller import bmv2_runtime

    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("python3", "simple_switch_CLI"):
        (bindir / name).write_text("#!/usr/bin/env python3\n")
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    system = str(tmp_path / "system-python3")
    monkeypatch.setattr(bmv2_runtime, "SYSTEM_PYTHONS", (system,))
    has_thrift = {str(bindir / "python3"): False, system: True}
    monkeypatch.setattr(bmv2_runtime, "_imports_thrift", lambda python: has_thrift[python])
    cli = str(bindir / "simple_switch_CLI")
    assert bmv2_runtime.cli_interpreter(cli) == [system]
    assert Bmv2Runtime("s1", "127.0.0.1", 9090).argv()[:2] == [system, cli]
    has_thrift[str(bindir / "python3")] = True
    assert bmv2_runtime.cli_interpreter(cli) == []  # the one on PATH will do
    (bindir / "simple_switch_CLI").write_text("#!/opt/python/bin/python3\n")
    assert bmv2_runtime.cli_interpreter(cli) == []  # a fixed interpreter is left alone
