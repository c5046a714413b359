"""The controller against real built-in switch processes (``python -m softswitch run``).

The switches run without data-plane interfaces: these tests check what the controller
writes, read back over P4Runtime. Four switches (two leaves, two spines) are shared by the
module; each test has its own run directory, whose first sync removes what earlier tests
left on the switches.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.cli import main
from controller.fabric import Controller, ControllerOptions
from controller.jobs import JobRequest

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "netreduce.p4"
START_DEADLINE_S = 60.0

pytestmark = pytest.mark.skipif(not PROGRAM.is_file(), reason="p4src/netreduce.p4 missing")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SwitchProcess:
    name: str
    device_id: int
    port: int
    proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [sys.executable, "-m", "softswitch", "run", "--no-p4", "--device-id",
                str(self.device_id), "--grpc-server-addr", self.address]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_DEADLINE_S
        out = b""
        assert self.proc.stdout is not None
        while b"softswitch ready" not in out:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"switch {self.name} did not start: {out.decode(errors='replace')}")
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.5))
            if ready:
                out += os.read(self.proc.stdout.fileno(), 4096)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


@pytest.fixture(scope="module")
def program_files(tmp_path_factory) -> tuple[Path, Path]:
    """P4Info and device config of netreduce.p4, compiled once."""
    from softswitch.device_config import make_device_config
    from softswitch.frontend import compile_file
    from softswitch.p4info import build_p4info, p4info_to_text

    out = tmp_path_factory.mktemp("program")
    p4info = out / "netreduce.p4info.txtpb"
    p4info.write_text(p4info_to_text(build_p4info(compile_file(str(PROGRAM)))), encoding="utf-8")
    config = json.loads(make_device_config(PROGRAM))
    # Work around a device-config bundling gap: nested includes of include/ files.
    for inc in sorted((PROGRAM.parent / "include").glob("*.p4")):
        config["files"].setdefault(f"include/{inc.name}", inc.read_text(encoding="utf-8"))
    device_config = out / "netreduce.device.json"
    device_config.write_text(json.dumps(config), encoding="utf-8")
    return p4info, device_config


def _port(port: int, mac: str, peer: str, peer_port: int) -> dict:
    return {"port": port, "intf": f"x-eth{port}", "mac": mac, "peer": peer,
            "peer_port": peer_port, "peer_intf": f"{peer}-eth{peer_port}"}


def spine_leaf_topology(switches: dict[str, SwitchProcess], p4info: Path, config: Path) -> dict:
    """l1 (h1 with 2 GPUs, h2), l2 (h3, h4); spines sp1, sp2; leaf ports 3/4 go to the spines."""
    def mac(dev: int, port: int) -> str:
        return f"00:0b:00:{dev:02x}:00:{port:02x}"

    sw = []
    for name, role, index, ports in (
        ("l1", "leaf", 1, [_port(1, mac(1, 1), "h1", 0), _port(2, mac(1, 2), "h2", 0),
                           _port(3, mac(1, 3), "sp1", 1), _port(4, mac(1, 4), "sp2", 1)]),
        ("l2", "leaf", 2, [_port(1, mac(2, 1), "h3", 0), _port(2, mac(2, 2), "h4", 0),
                           _port(3, mac(2, 3), "sp1", 2), _port(4, mac(2, 4), "sp2", 2)]),
        ("sp1", "spine", 1, [_port(1, mac(3, 1), "l1", 3), _port(2, mac(3, 2), "l2", 3)]),
        ("sp2", "spine", 2, [_port(1, mac(4, 1), "l1", 4), _port(2, mac(4, 2), "l2", 4)]),
    ):
        proc = switches[name]
        sw.append({"name": name, "device_id": proc.device_id, "grpc_addr": proc.address,
                   "role": role, "index": index, "target": "softswitch", "cpu_port": None,
                   "ports": ports})
    hosts = []
    for name, leaf, slot, gpus in (("h1", 1, 1, 2), ("h2", 1, 2, 1), ("h3", 2, 1, 1), ("h4", 2, 2, 1)):
        hosts.append({"name": name, "ip": f"10.0.{leaf}.{slot}", "prefix_len": 24,
                      "mac": f"00:00:0a:00:{leaf:02x}:{slot:02x}", "intf": f"{name}-eth0",
                      "switch": f"l{leaf}", "switch_port": slot, "leaf": leaf, "slot": slot,
                      "gpus": gpus})
    return {"schema": 1, "kind": "spineleaf", "target": "softswitch", "switches": sw,
            "hosts": hosts, "links": [], "p4info": str(p4info), "device_config": str(config)}


@pytest.fixture(scope="module")
def fabric(program_files) -> Iterator[dict[str, SwitchProcess]]:
    procs = {name: SwitchProcess(name, dev, free_port())
             for dev, name in enumerate(("l1", "l2", "sp1", "sp2"), start=1)}
    try:
        for p in procs.values():
            p.start()
        yield procs
    finally:
        for p in procs.values():
            p.stop()


@pytest.fixture
def rundir(tmp_path, fabric, program_files) -> Path:
    topo = spine_leaf_topology(fabric, *program_files)
    (tmp_path / "topology.json").write_text(json.dumps(topo), encoding="utf-8")
    return tmp_path


def cli(rundir: Path, *args: str, capsys=None) -> tuple[int, str, str]:
    code = main(["--rundir", str(rundir), "--json", *args])
    if capsys is None:
        return code, "", ""
    out = capsys.readouterr()
    return code, out.out, out.err


def controller(rundir: Path, **kw) -> Controller:
    return Controller(ControllerOptions(rundir=rundir, **kw))


def test_pipeline_push_installs_program_everywhere(rundir, capsys) -> None:
    """pipeline push leaves every switch running our pipeline, as status reports."""
    code, _, err = cli(rundir, "pipeline", "push", capsys=capsys)
    assert code == 0, err
    code, out, err = cli(rundir, "status", capsys=capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["switch"], r["reachable"], r["primary"], r["pipeline"]) for r in rows] == [
        ("l1", True, True, "ours"), ("l2", True, True, "ours"),
        ("sp1", True, True, "ours"), ("sp2", True, True, "ours")]


def test_routes_are_read_back(rundir, capsys) -> None:
    """routes: host /32s at the leaf, remote subnets by ECMP over both spines, subnets at spines."""
    assert cli(rundir, "routes", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        lpm = {e["match"]["hdr.ipv4.dstAddr"]: (e["action"].rsplit(".", 1)[1], e["params"])
               for e in ctl.read_table("l1", "SwitchIngress.fwd.ipv4_lpm")}
        assert lpm == {
            "10.0.1.1/32": ("set_nhop", {"smac": 0x000B00010001, "dmac": 0x00000A000101, "port": 1}),
            "10.0.1.2/32": ("set_nhop", {"smac": 0x000B00010002, "dmac": 0x00000A000102, "port": 2}),
            "10.0.2.0/24": ("set_ecmp", {"group": 1, "group_size": 2}),
        }
        ecmp = sorted((e["match"]["meta.fwd.ecmp_member"], e["params"]["port"])
                      for e in ctl.read_table("l1", "ecmp_nhop"))
        assert ecmp == [("0", 3), ("1", 4)]
        spine = {e["match"]["hdr.ipv4.dstAddr"]: e["params"]["port"]
                 for e in ctl.read_table("sp2", "ipv4_lpm")}
        assert spine == {"10.0.1.0/24": 1, "10.0.2.0/24": 2}


def _read(ctl: Controller, switch: str, table: str) -> list[dict]:
    return ctl.read_table(switch, table)


def test_job_create_and_delete_read_back(rundir, capsys) -> None:
    """A two-leaf job configures job/conn/rewrite tables and groups on its tree; delete removes them."""
    code, out, err = cli(rundir, "job", "create", "j1", "--hosts", "h1,h3", "--credits", "2",
                         "--slots", "16", capsys=capsys)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["spine"] == "sp1" and len(plan["workers"]) == 3
    with controller(rundir) as ctl:
        jobs = _read(ctl, "l1", "job_table")
        assert [(e["match"], e["params"]) for e in jobs] == [(
            {"meta.nr.job": "0"},
            {"slot_base": 0, "slot_count": 16, "expected": 2, "members": 3, "credits": 2,
             "role": 1, "mcast_grp": 1, "upstream_port": 3})]
        spine_job = _read(ctl, "sp1", "job_table")[0]["params"]
        assert (spine_job["role"], spine_job["expected"], spine_job["members"]) == (0, 2, 3)
        conns = {(e["match"]["hdr.ipv4.srcAddr"], e["match"]["hdr.ipv4.dstAddr"]): e["params"]
                 for e in _read(ctl, "l1", "conn_table")}
        # h1's two GPUs form a ring; the parent's downlink has rank 255
        assert conns[("10.0.1.1", "10.0.1.1")]["rank"] in (0, 1)
        assert conns[("10.255.0.3", "10.255.0.1")] == {"job": 0, "conn": 2, "rank": 255,
                                                       "result_port": 3}
        rewrites = {int(e["match"]["meta.nr.target"]): e["action"].rsplit(".", 1)[1]
                    for e in _read(ctl, "l1", "result_rewrite")}
        assert rewrites == {0: "to_worker", 1: "to_worker", 255: "to_switch"}
        assert _read(ctl, "l2", "job_table")[0]["params"]["expected"] == 1
        assert _read(ctl, "sp2", "job_table") == []
    code, out, err = cli(rundir, "job", "delete", "j1", capsys=capsys)
    assert code == 0, err
    with controller(rundir) as ctl:
        for sw in ("l1", "l2", "sp1"):
            for table in ("job_table", "conn_table", "result_rewrite"):
                assert _read(ctl, sw, table) == [], (sw, table)


def test_two_jobs_share_switches_without_overlap(rundir, capsys) -> None:
    """Two concurrent jobs get distinct ids, disjoint slot ranges and different spines."""
    assert cli(rundir, "job", "create", "a", "--hosts", "h1,h3", "--slots", "100", capsys=capsys)[0] == 0
    assert cli(rundir, "job", "create", "b", "--hosts", "h2,h4", "--slots", "50", capsys=capsys)[0] == 0
    code, out, _ = cli(rundir, "job", "list", capsys=capsys)
    jobs = {j["name"]: j for j in json.loads(out)}
    assert (jobs["a"]["id"], jobs["b"]["id"]) == (0, 1)
    assert (jobs["a"]["spine"], jobs["b"]["spine"]) == ("sp1", "sp2")
    with controller(rundir) as ctl:
        ranges = sorted((e["params"]["slot_base"], e["params"]["slot_count"])
                        for e in _read(ctl, "l1", "job_table"))
        assert ranges == [(0, 100), (100, 50)]
        groups = ctl.switch("l1").read([_mcast_request()])
        assert sorted(g.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
                      for g in groups) == [1, 2]


def _mcast_request():
    from p4.v1 import p4runtime_pb2

    req = p4runtime_pb2.Entity()
    req.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    return req


def test_slot_exhaustion_is_a_one_line_error(rundir, capsys) -> None:
    """A job that does not fit in the free slots is refused with exit 2 and one line."""
    assert cli(rundir, "job", "create", "big", "--hosts", "h1", "--slots", "1000", capsys=capsys)[0] == 0
    code, out, err = cli(rundir, "job", "create", "more", "--hosts", "h2", "--slots", "100",
                         capsys=capsys)
    assert code == 2
    assert err == ("error: slots: slots exhausted on switch l1: 100 requested, "
                   "largest free range 24 of 1024\n")


@pytest.mark.parametrize("args, message", [
    (["--hosts", "h1,h9"], "error: hosts: unknown host 'h9' (hosts: h1, h2, h3, h4)\n"),
    (["--hosts", "h1", "--credits", "5"],
     "error: credits: credits too high: 5 > 4 (the switch remembers 4 messages per connection)\n"),
    (["--hosts", "h1", "--credits", "4", "--slots", "8", "--msg-pkts", "4"],
     "error: credits: credits too high: 4 credits x 4 packets per message need 16 slots, "
     "the job has 8\n"),
])
def test_bad_job_requests_name_the_field(rundir, capsys, args, message) -> None:
    """Unknown hosts and too many credits are refused naming the field and value."""
    code, _, err = cli(rundir, "job", "create", "x", *args, capsys=capsys)
    assert (code, err) == (2, message)


def test_lower_election_id_is_refused_writes(rundir, capsys) -> None:
    """While a controller with a higher election id is primary, a lower one cannot write."""
    with controller(rundir, election_id=1000) as first:
        first.connect()
        code, _, err = cli(rundir, "--election-id", "5", "routes", capsys=capsys)
    assert code == 2
    assert "is a backup; election id 1000 is primary" in err
    assert err.count("\n") == 1


def test_controller_restart_adopts_running_state(rundir, capsys) -> None:
    """A new controller finds the job in the state file and changes nothing on the switches."""
    assert cli(rundir, "routes", capsys=capsys)[0] == 0
    assert cli(rundir, "job", "create", "keep", "--hosts", "h1,h4", capsys=capsys)[0] == 0
    code, out, _ = cli(rundir, "reconcile", capsys=capsys)
    assert code == 0
    reports = json.loads(out)
    assert all(r["inserted"] == r["modified"] == r["deleted"] == 0 and not r["pipeline_pushed"]
               for r in reports)
    assert sum(r["unchanged"] for r in reports) > 0
    code, out, _ = cli(rundir, "job", "list", capsys=capsys)
    assert [j["name"] for j in json.loads(out)] == ["keep"]


def test_fault_set_and_clear(rundir, capsys) -> None:
    """fault set writes port_loss entries in both directions; fault clear removes them."""
    assert cli(rundir, "fault", "set", "l2", "3", "0.25", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        for table in ("SwitchIngress.loss.port_loss", "SwitchEgress.loss.port_loss"):
            assert [(e["match"], e["params"]) for e in _read(ctl, "l2", table)] == [
                ({"port": "3"}, {"threshold": 16384})]
    code, _, err = cli(rundir, "fault", "set", "l2", "9", "0.5", capsys=capsys)
    assert (code, err) == (2, "error: port: switch l2 has no port 9 (ports: 1, 2, 3, 4)\n")
    assert cli(rundir, "fault", "clear", "l2", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        assert _read(ctl, "l2", "SwitchIngress.loss.port_loss") == []


def test_counters_and_registers_are_read(rundir, capsys) -> None:
    """Job counters read zero before traffic; a register is readable on the built-in target."""
    assert cli(rundir, "job", "create", "c", "--hosts", "h3,h4", capsys=capsys)[0] == 0
    code, out, err = cli(rundir, "counters", "--job", "c", capsys=capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert rows == [{"job": "c", "switch": "l2", "contributions": 0, "duplicates": 0,
                     "completions": 0, "results_sent": 0, "partials_sent": 0, "drops": {}}]
    code, out, err = cli(rundir, "registers", "--switch", "l2", "conn_started", "--index", "0",
                         capsys=capsys)
    assert code == 0, err
    assert json.loads(out) == [{"index": 0, "value": 0}]
    code, _, err = cli(rundir, "tables", "--switch", "l2", "--table", "no_such_tbl", capsys=capsys)
    assert code == 2 and err.startswith("error: no table named 'no_such_tbl'")


def test_unreachable_switch_is_reported(tmp_path, fabric, program_files, capsys) -> None:
    """A switch nobody listens for is named in a one-line error with exit status 2."""
    procs = dict(fabric)
    procs["sp2"] = SwitchProcess("sp2", 4, free_port())  # never started
    topo = spine_leaf_topology(procs, *program_files)
    (tmp_path / "topology.json").write_text(json.dumps(topo), encoding="utf-8")
    code, _, err = cli(tmp_path, "--timeout", "0.5", "routes", capsys=capsys)
    assert code == 2
    assert err.startswith(f"error: switch sp2 unreachable at {procs['sp2'].address}")
    assert err.count("\n") == 1


def test_restarted_switch_is_reconciled(tmp_path, program_files) -> None:
    """A switch that restarts gets its pipeline, routes and jobs back from a serving controller."""
    import threading

    procs = {name: SwitchProcess(name, dev, free_port())
             for dev, name in enumerate(("l1", "l2", "sp1", "sp2"), start=11)}
    for name in ("l2", "sp1", "sp2"):
        procs[name].port = 1  # unreachable: this test only uses l1
    topo = spine_leaf_topology(procs, *program_files)
    topo["switches"] = [s for s in topo["switches"] if s["name"] == "l1"]
    topo["switches"][0]["ports"] = topo["switches"][0]["ports"][:2]
    topo["hosts"] = [h for h in topo["hosts"] if h["switch"] == "l1"]
    (tmp_path / "topology.json").write_text(json.dumps(topo), encoding="utf-8")
    l1 = procs["l1"]
    stop = threading.Event()
    l1.start()
    ctl = controller(tmp_path, reconnect=True)
    thread = threading.Thread(target=ctl.serve, args=(stop, 0.1), daemon=True)
    try:
        ctl.connect()
        ctl.program_routes()
        ctl.create_job(JobRequest("r", ("h1", "h2")))
        before = {t: _read(ctl, "l1", t) for t in ("job_table", "conn_table", "ipv4_lpm")}
        thread.start()
        l1.stop()
        l1.start()
        sw = ctl.switch("l1")
        assert sw.wait_recovered(1, timeout_s=60)
        after = {t: _read(ctl, "l1", t) for t in ("job_table", "conn_table", "ipv4_lpm")}
        assert after == before and before["job_table"]
    finally:
        stop.set()
        thread.join(10)
        ctl.close()
        l1.stop()
