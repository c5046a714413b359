"""Every controller verb against real BMv2 switches (``simple_switch_grpc``), where installed.

Four ``simple_switch_grpc --no-p4`` processes without data-plane ports (two leaves, two spines)
run ``p4src/netreduce.p4`` as compiled by p4c; the controller pushes it, programs routes and
a job and reads everything back over P4Runtime, and registers over BMv2's Thrift runtime (PI,
BMv2's P4Runtime server, does not implement register entries). Skipped with the reason where
the toolchain is missing (docs/setup.md says how to build it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cli import Commands, Shell, build_parser, main
from controller.fabric import Controller, ControllerOptions
from controller.jobs import JobRequest
from protocol import netreduce as nr
from tests.bmv2 import Bmv2Process, missing_binaries, skip_reason

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "netreduce.p4"
NAMES = ("l1", "l2", "sp1", "sp2")

pytestmark = pytest.mark.skipif(bool(missing_binaries()), reason=skip_reason())


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(P4Info, BMv2 JSON) of netreduce.p4 from p4c, compiled once."""
    from topo.nodes import BMv2Switch

    build = BMv2Switch.compile_program(PROGRAM, tmp_path_factory.mktemp("p4c"))
    assert build.p4info is not None and build.device_config is not None
    return build.p4info, build.device_config


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Bmv2Process]]:
    logs = tmp_path_factory.mktemp("bmv2-logs")
    procs = {name: Bmv2Process(name, dev, logs / f"{name}.log")
             for dev, name in enumerate(NAMES, start=1)}
    try:
        for p in procs.values():
            p.start()
        yield procs
    finally:
        for p in procs.values():
            p.stop()


def _port(port: int, peer: str, peer_port: int, dev: int) -> dict[str, Any]:
    return {"port": port, "intf": f"x-eth{port}", "mac": f"00:0b:00:{dev:02x}:00:{port:02x}",
            "peer": peer, "peer_port": peer_port, "peer_intf": f"{peer}-eth{peer_port}"}


def topology(procs: dict[str, Bmv2Process], p4info: Path, config: Path,
             only: tuple[str, ...] = NAMES) -> dict[str, Any]:
    """l1 (h1, h2 with 2 GPUs each), l2 (h3, h4); spines sp1, sp2 (as the built-in tests)."""
    layout = {
        "l1": ("leaf", 1, [(1, "h1", 0), (2, "h2", 0), (3, "sp1", 1), (4, "sp2", 1)]),
        "l2": ("leaf", 2, [(1, "h3", 0), (2, "h4", 0), (3, "sp1", 2), (4, "sp2", 2)]),
        "sp1": ("spine", 1, [(1, "l1", 3), (2, "l2", 3)]),
        "sp2": ("spine", 2, [(1, "l1", 4), (2, "l2", 4)]),
    }
    switches = []
    for name in only:
        role, index, ports = layout[name]
        proc = procs[name]
        switches.append({
            "name": name, "device_id": proc.device_id, "grpc_addr": proc.address,
            "thrift_port": proc.thrift_port, "role": role, "index": index, "target": "bmv2",
            "cpu_port": None, "subnet": f"10.0.{index}.0/24" if role == "leaf" else None,
            "ports": [_port(p, peer, pp, proc.device_id) for p, peer, pp in ports
                      if peer in only or peer.startswith("h")]})
    hosts = [{"name": h, "ip": f"10.0.{leaf}.{slot}", "prefix_len": 24,
              "mac": f"00:00:0a:00:{leaf:02x}:{slot:02x}", "intf": f"{h}-eth0",
              "switch": f"l{leaf}", "switch_port": slot, "leaf": leaf, "slot": slot, "gpus": gpus}
             for h, leaf, slot, gpus in (("h1", 1, 1, 2), ("h2", 1, 2, 2), ("h3", 2, 1, 1),
                                         ("h4", 2, 2, 1))
             if f"l{leaf}" in only]
    return {"schema": 1, "kind": "spineleaf", "target": "bmv2", "switches": switches,
            "hosts": hosts, "links": [], "p4info": str(p4info), "device_config": str(config)}


@pytest.fixture
def rundir(tmp_path: Path, fabric: dict[str, Bmv2Process], program: tuple[Path, Path]) -> Path:
    (tmp_path / "topology.json").write_text(json.dumps(topology(fabric, *program)))
    return tmp_path


def cli(rundir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    """Runs one verb with --json; (status, parsed JSON or the error text)."""
    code = main(["--rundir", str(rundir), "--json", *args])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    if code != 0:
        return code, out.err
    return code, json.loads(out.out) if out.out.strip() else None


def ok(rundir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, data = cli(rundir, capsys, *args)
    assert code == 0, f"{' '.join(args)}: {data}"
    return data


def read(rundir: Path, switch: str, table: str) -> list[dict[str, Any]]:
    with Controller(ControllerOptions(rundir=rundir)) as ctl:
        return ctl.read_table(switch, table)


def test_every_verb_on_bmv2(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pipeline push, status, routes, job create/show/list, slots, tables, counters, credits
    set, registers (Thrift), fault set/clear, reconcile, shell and job delete on BMv2."""
    pushed = ok(rundir, capsys, "pipeline", "push", "--force")
    assert pushed == [{"switch": n, "pushed": True} for n in NAMES]
    status = ok(rundir, capsys, "status")
    assert [(r["switch"], r["reachable"], r["primary"], r["pipeline"]) for r in status] == [
        (n, True, True, "ours") for n in NAMES]

    ok(rundir, capsys, "routes")
    lpm = {e["match"]["hdr.ipv4.dstAddr"]: e["action"].rsplit(".", 1)[1]
           for e in read(rundir, "l1", "ipv4_lpm")}
    assert lpm == {"10.0.1.1/32": "set_nhop", "10.0.1.2/32": "set_nhop",
                   "10.0.2.0/24": "set_ecmp"}

    plan = ok(rundir, capsys, "job", "create", "j1", "--hosts", "h1,h2,h3,h4", "--slots", "16")
    assert plan["spine"] == "sp1" and len(plan["workers"]) == 6
    assert [(e["params"]["slot_count"], e["params"]["credits"])
            for e in read(rundir, "l1", "job_table")] == [(16, 2)]
    assert ok(rundir, capsys, "job", "show", "j1")["name"] == "j1"
    assert [j["name"] for j in ok(rundir, capsys, "job", "list")] == ["j1"]
    slots = {r["switch"]: r["used"] for r in ok(rundir, capsys, "slots")}
    assert slots == {"l1": 16, "l2": 16, "sp1": 16, "sp2": 0}

    sizes = {r["table"].rsplit(".", 1)[1]: r["entries"]
             for r in ok(rundir, capsys, "tables", "--switch", "l1")}
    assert sizes["job_table"] == 1 and sizes["ipv4_lpm"] == 3 and sizes["conn_table"] > 0
    conns = ok(rundir, capsys, "tables", "--switch", "l1", "--table", "conn_table")
    assert len(conns) == sizes["conn_table"]

    counters = ok(rundir, capsys, "counters", "--job", "j1")
    assert {r["switch"] for r in counters} == {"l1", "l2", "sp1"}
    assert all(r["contributions"] == 0 and r["drops"] == {} for r in counters)
    ports = ok(rundir, capsys, "counters", "--switch", "l1")["ports"]
    assert sorted(int(p) for p in ports) == [1, 2, 3, 4]

    ok(rundir, capsys, "credits", "set", "j1", "1")
    assert [e["params"]["credits"] for e in read(rundir, "l1", "job_table")] == [1]

    # registers: PI answers UNIMPLEMENTED, the controller uses BMv2's Thrift runtime
    assert ok(rundir, capsys, "registers", "--switch", "l1", "conn_started") == []
    assert ok(rundir, capsys, "registers", "--switch", "l1", "conn_started", "--index", "3") \
        == [{"index": 3, "value": 0}]
    assert ok(rundir, capsys, "registers", "--switch", "l1", "conn_started", "--index", "3",
              "--set", "1") == [{"index": 3, "value": 1}]
    assert ok(rundir, capsys, "registers", "--switch", "l1", "conn_started") \
        == [{"index": 3, "value": 1}]
    ok(rundir, capsys, "registers", "--switch", "l1", "conn_started", "--index", "3", "--set", "0")
    code, err = cli(rundir, capsys, "registers", "--switch", "l1", "conn_started",
                    "--index", "100000")
    assert code == 2 and str(err).startswith("error: index: 100000 is outside register")

    ok(rundir, capsys, "fault", "set", "l2", "3", "0.25")
    for table in (nr.PortLossNames.INGRESS, nr.PortLossNames.EGRESS):
        assert [(e["match"], e["params"]) for e in read(rundir, "l2", table)] == [
            ({"port": "3"}, {"threshold": 16384})]
    assert ok(rundir, capsys, "fault", "clear", "l2") == {"cleared": 1}
    assert read(rundir, "l2", nr.PortLossNames.INGRESS) == []

    report = ok(rundir, capsys, "reconcile")
    assert all(not r["pipeline_pushed"] and r["inserted"] == r["modified"] == r["deleted"] == 0
               for r in report), report

    shell = Shell(Commands(build_parser().parse_args(["--rundir", str(rundir), "--json",
                                                      "shell"])))
    shell.onecmd("registers --switch l1 conn_started --index 3")
    assert json.loads(capsys.readouterr().out) == [{"index": 3, "value": 0}]
    shell.onecmd("counters --job ghost")
    assert capsys.readouterr().out.startswith("error: job: unknown job 'ghost'")
    assert shell.onecmd("quit") is True
    shell.commands.close()

    assert ok(rundir, capsys, "job", "delete", "j1")["deleted"] == "j1"
    assert read(rundir, "l1", "job_table") == [] and read(rundir, "sp1", "job_table") == []


def test_serve_restores_a_restarted_bmv2_switch(tmp_path: Path, program: tuple[Path, Path]) -> None:
    """serve: a BMv2 switch that restarts (empty, --no-p4) gets its pipeline, routes and job
    back; the registers are fresh again, as the controller assumes."""
    proc = Bmv2Process("l1", 21, tmp_path / "l1.log")
    topo = topology({"l1": proc}, *program, only=("l1",))
    (tmp_path / "topology.json").write_text(json.dumps(topo))
    stop = threading.Event()
    ctl = Controller(ControllerOptions(rundir=tmp_path, reconnect=True))
    thread = threading.Thread(target=ctl.serve, args=(stop, 0.1), daemon=True)
    try:
        proc.start()
        ctl.connect()
        ctl.program_routes()
        ctl.create_job(JobRequest("r", ("h1", "h2")))
        ctl.write_register("l1", "conn_started", 0, 1)
        tables = ("job_table", "conn_table", "ipv4_lpm")
        before = {t: ctl.read_table("l1", t) for t in tables}
        thread.start()
        proc.stop()
        proc.start()
        assert ctl.switch("l1").wait_recovered(1, timeout_s=60)
        assert {t: ctl.read_table("l1", t) for t in tables} == before and before["job_table"]
        assert ctl.read_register("l1", "conn_started", 0) == {0: 0}
    finally:
        stop.set()
        thread.join(10)
        ctl.close()
        proc.stop()
