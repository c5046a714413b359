"""The controller against real built-in switch processes (``python -m softswitch run``).

The switches run without data-plane interfaces: these tests check what the controller
writes, read back over P4Runtime. Four switches (two leaves, two spines) are shared by the
module; each test has its own run directory, whose first sync removes what earlier tests
left on the switches.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from p4.v1 import p4runtime_pb2

from controller.cli import main
from controller.fabric import Controller, ControllerOptions
from controller.jobs import JobRequest
from controller.topology import FabricTopology
from protocol import netreduce as nr
from tests.p4runtime_server_fake import SwitchProcess, compile_program
from tests.p4runtime_server_fake import free_tcp_port as free_port

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "netreduce.p4"

pytestmark = pytest.mark.skipif(not PROGRAM.is_file(), reason="p4src/netreduce.p4 missing")


@pytest.fixture(scope="module")
def program_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """P4Info and device config of netreduce.p4, compiled once."""
    return compile_program(PROGRAM, tmp_path_factory.mktemp("program"))


def _port(port: int, mac: str, peer: str, peer_port: int) -> dict[str, Any]:
    return {"port": port, "intf": f"x-eth{port}", "mac": mac, "peer": peer,
            "peer_port": peer_port, "peer_intf": f"{peer}-eth{peer_port}"}


def spine_leaf_topology(switches: dict[str, SwitchProcess], p4info: Path,
                        config: Path) -> dict[str, Any]:
    """l1 (h1, h2 with 2 GPUs each), l2 (h3, h4); spines sp1, sp2; leaf ports 3/4 go to the
    spines."""
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
                   "ports": ports, "subnet": f"10.0.{index}.0/24" if role == "leaf" else None})
    hosts = []
    for name, leaf, slot, gpus in (("h1", 1, 1, 2), ("h2", 1, 2, 2), ("h3", 2, 1, 1),
                                   ("h4", 2, 2, 1)):
        hosts.append({"name": name, "ip": f"10.0.{leaf}.{slot}", "prefix_len": 24,
                      "mac": f"00:00:0a:00:{leaf:02x}:{slot:02x}", "intf": f"{name}-eth0",
                      "switch": f"l{leaf}", "switch_port": slot, "leaf": leaf, "slot": slot,
                      "gpus": gpus})
    return {"schema": 1, "kind": "spineleaf", "target": "softswitch", "switches": sw,
            "hosts": hosts, "links": [], "p4info": str(p4info), "device_config": str(config)}


@pytest.fixture(scope="module")
def fabric(program_files: tuple[Path, Path]) -> Iterator[dict[str, SwitchProcess]]:
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
def rundir(tmp_path: Path, fabric: dict[str, SwitchProcess],
           program_files: tuple[Path, Path]) -> Path:
    topo = spine_leaf_topology(fabric, *program_files)
    (tmp_path / "topology.json").write_text(json.dumps(topo), encoding="utf-8")
    return tmp_path


def cli(rundir: Path, *args: str, capsys: pytest.CaptureFixture[str] | None = None
        ) -> tuple[int, str, str]:
    code = main(["--rundir", str(rundir), "--json", *args])
    if capsys is None:
        return code, "", ""
    out = capsys.readouterr()
    return code, out.out, out.err


def controller(rundir: Path, **kw: Any) -> Controller:
    return Controller(ControllerOptions(rundir=rundir, **kw))


def test_pipeline_push_installs_program_everywhere(rundir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """pipeline push leaves every switch running our pipeline, as status reports."""
    code, _, err = cli(rundir, "pipeline", "push", capsys=capsys)
    assert code == 0, err
    code, out, err = cli(rundir, "status", capsys=capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["switch"], r["reachable"], r["primary"], r["pipeline"]) for r in rows] == [
        ("l1", True, True, "ours"), ("l2", True, True, "ours"),
        ("sp1", True, True, "ours"), ("sp2", True, True, "ours")]


def test_routes_are_read_back(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """routes: host /32s at the leaf, remote subnets by ECMP over both spines, subnets at spines."""
    assert cli(rundir, "routes", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        lpm = {e["match"]["hdr.ipv4.dstAddr"]: (e["action"].rsplit(".", 1)[1], e["params"])
               for e in ctl.read_table("l1", nr.Ipv4ForwardingNames.IPV4_LPM)}
        assert lpm == {
            "10.0.1.1/32": ("set_nhop",
                            {"smac": 0x000B00010001, "dmac": 0x00000A000101, "port": 1}),
            "10.0.1.2/32": ("set_nhop",
                            {"smac": 0x000B00010002, "dmac": 0x00000A000102, "port": 2}),
            "10.0.2.0/24": ("set_ecmp", {"group": 1, "group_size": 2}),
        }
        ecmp = sorted((e["match"]["meta.fwd.ecmp_member"], e["params"]["port"])
                      for e in ctl.read_table("l1", "ecmp_nhop"))
        assert ecmp == [("0", 3), ("1", 4)]
        spine = {e["match"]["hdr.ipv4.dstAddr"]: e["params"]["port"]
                 for e in ctl.read_table("sp2", "ipv4_lpm")}
        assert spine == {"10.0.1.0/24": 1, "10.0.2.0/24": 2}


def _read(ctl: Controller, switch: str, table: str) -> list[dict[str, Any]]:
    return ctl.read_table(switch, table)


def test_job_create_and_delete_read_back(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A two-leaf job configures job/conn/rewrite tables and groups on its tree; delete removes
    them."""
    code, out, err = cli(rundir, "job", "create", "j1", "--hosts", "h1,h2,h3,h4", "--credits", "2",
                         "--slots", "16", capsys=capsys)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["spine"] == "sp1" and len(plan["workers"]) == 6
    with controller(rundir) as ctl:
        jobs = _read(ctl, "l1", "job_table")
        assert [(e["match"], e["params"]) for e in jobs] == [(
            {"meta.nr.job": "0"},
            {"slot_base": 0, "slot_count": 16, "expected": 4, "members": 15, "credits": 2,
             "role": 1, "mcast_grp": 1, "upstream_port": 3})]
        spine_job = _read(ctl, "sp1", "job_table")[0]["params"]
        assert (spine_job["role"], spine_job["expected"], spine_job["members"]) == (0, 2, 3)
        conns = {(e["match"]["hdr.ipv4.srcAddr"], e["match"]["hdr.ipv4.dstAddr"],
                  int(e["match"]["hdr.bth.dqpn"])): e["params"]
                 for e in _read(ctl, "l1", "conn_table")}
        # every worker connection crosses from one host to the other; the parent's downlink
        # has rank 255
        assert sorted((src, dst) for src, dst, _q in conns if src.startswith("10.0.")) == [
            ("10.0.1.1", "10.0.1.2"), ("10.0.1.1", "10.0.1.2"),
            ("10.0.1.2", "10.0.1.1"), ("10.0.1.2", "10.0.1.1")]
        parent = [v for (src, _d, _q), v in conns.items() if src == "10.255.0.3"]
        assert parent == [{"job": 0, "conn": 4, "rank": 255, "result_port": 3, "in_port": 3,
                           "fabric": 1}]
        for w in plan["workers"][:4]:
            peer = plan["workers"][w["peer"]]
            got = conns[(w["ip"], peer["ip"], peer["recv_qpn"])]
            assert got == {"job": 0, "conn": w["rank"], "rank": w["position"],
                           "result_port": 1 if peer["host"] == "h1" else 2,
                           "in_port": 1 if w["host"] == "h1" else 2, "fabric": 0}
        rewrites = {int(e["match"]["meta.nr.target"]): e["action"].rsplit(".", 1)[1]
                    for e in _read(ctl, "l1", "result_rewrite")}
        assert rewrites == {0: "to_worker", 1: "to_worker", 2: "to_worker", 3: "to_worker",
                            255: "to_switch"}
        assert _read(ctl, "l2", "job_table")[0]["params"]["expected"] == 2
        assert _read(ctl, "sp2", "job_table") == []
    code, out, err = cli(rundir, "job", "delete", "j1", capsys=capsys)
    assert code == 0, err
    with controller(rundir) as ctl:
        for sw in ("l1", "l2", "sp1"):
            for table in ("job_table", "conn_table", "result_rewrite"):
                assert _read(ctl, sw, table) == [], (sw, table)
        assert ctl.switch("l1").read([_mcast_request()]) == []


def test_two_jobs_share_switches_without_overlap(rundir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Two concurrent jobs get distinct ids, disjoint slot ranges and different spines."""
    assert cli(rundir, "job", "create", "a", "--hosts", "h1,h2,h3,h4", "--slots", "100",
               capsys=capsys)[0] == 0
    assert cli(rundir, "job", "create", "b", "--hosts", "h1,h2,h3,h4", "--slots", "50",
               "--workers-per-host", "1", capsys=capsys)[0] == 0
    code, out, _ = cli(rundir, "job", "list", capsys=capsys)
    jobs = {j["name"]: j for j in json.loads(out)}
    assert (jobs["a"]["id"], jobs["b"]["id"]) == (0, 1)
    assert (jobs["a"]["spine"], jobs["b"]["spine"]) == ("sp1", "sp2")
    assert (jobs["a"]["workers"], jobs["b"]["workers"]) == (6, 4)
    with controller(rundir) as ctl:
        ranges = sorted((e["params"]["slot_base"], e["params"]["slot_count"])
                        for e in _read(ctl, "l1", "job_table"))
        assert ranges == [(0, 100), (100, 50)]
        groups = ctl.switch("l1").read([_mcast_request()])
        assert sorted(g.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
                      for g in groups) == [1, 2]
    code, out, _ = cli(rundir, "slots", capsys=capsys)
    assert code == 0
    assert {r["switch"]: r["ranges"] for r in json.loads(out)} == {
        "l1": [{"job": "a", "base": 0, "count": 100}, {"job": "b", "base": 100, "count": 50}],
        "l2": [{"job": "a", "base": 0, "count": 100}, {"job": "b", "base": 100, "count": 50}],
        "sp1": [{"job": "a", "base": 0, "count": 100}],
        "sp2": [{"job": "b", "base": 0, "count": 50}]}


def _mcast_request() -> p4runtime_pb2.Entity:
    req = p4runtime_pb2.Entity()
    req.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    return req


def test_slot_exhaustion_is_a_one_line_error(rundir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A job that does not fit in the free slots is refused with exit 2 and one line."""
    assert cli(rundir, "job", "create", "big", "--hosts", "h1,h2", "--slots", "1000",
               capsys=capsys)[0] == 0
    code, out, err = cli(rundir, "job", "create", "more", "--hosts", "h2,h1", "--slots", "100",
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
def test_bad_job_requests_name_the_field(rundir: Path, capsys: pytest.CaptureFixture[str],
                                         args: list[str], message: str) -> None:
    """Unknown hosts and too many credits are refused naming the field and value."""
    code, _, err = cli(rundir, "job", "create", "x", *args, capsys=capsys)
    assert (code, err) == (2, message)


def test_lower_election_id_is_refused_writes(rundir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """While a controller with a higher election id is primary, a lower one cannot write."""
    with controller(rundir, election_id=1000) as first:
        first.connect()
        code, _, err = cli(rundir, "--election-id", "5", "routes", capsys=capsys)
    assert code == 2
    assert "is a backup; election id 1000 is primary" in err
    assert err.count("\n") == 1


def test_controller_restart_adopts_running_state(rundir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A new controller finds the job in the state file and changes nothing on the switches."""
    assert cli(rundir, "routes", capsys=capsys)[0] == 0
    assert cli(rundir, "job", "create", "keep", "--hosts", "h3,h4", capsys=capsys)[0] == 0
    code, out, _ = cli(rundir, "reconcile", capsys=capsys)
    assert code == 0
    reports = json.loads(out)
    assert all(r["inserted"] == r["modified"] == r["deleted"] == 0 and not r["pipeline_pushed"]
               for r in reports)
    assert sum(r["unchanged"] for r in reports) > 0
    code, out, _ = cli(rundir, "job", "list", capsys=capsys)
    assert [j["name"] for j in json.loads(out)] == ["keep"]


def test_fault_set_and_clear(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fault set writes port_loss entries in both directions; fault clear removes them."""
    assert cli(rundir, "fault", "set", "l2", "3", "0.25", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        for table in (nr.PortLossNames.INGRESS, nr.PortLossNames.EGRESS):
            assert [(e["match"], e["params"]) for e in _read(ctl, "l2", table)] == [
                ({"port": "3"}, {"threshold": 16384})]
    code, _, err = cli(rundir, "fault", "set", "l2", "9", "0.5", capsys=capsys)
    assert (code, err) == (2, "error: port: switch l2 has no port 9 (ports: 1, 2, 3, 4)\n")
    assert cli(rundir, "fault", "clear", "l2", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        assert _read(ctl, "l2", nr.PortLossNames.INGRESS) == []


def test_fault_set_reorder(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fault set --reorder writes port_reorder entries (no loss entry for loss 0); a
    probability outside 0..1 is refused naming the field."""
    assert cli(rundir, "fault", "set", "l2", "3", "0", "--reorder", "0.05", "--max-hold", "4",
               "--direction", "out", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        assert [(e["match"], e["params"]) for e in _read(ctl, "l2", nr.PortReorderNames.EGRESS)] \
            == [({"port": "3"}, {"threshold": 3277, "max_hold": 4})]
        assert _read(ctl, "l2", nr.PortReorderNames.INGRESS) == []
        assert _read(ctl, "l2", nr.PortLossNames.EGRESS) == []
    code, _, err = cli(rundir, "fault", "set", "l2", "3", "0", "--reorder", "1.5", capsys=capsys)
    assert (code, err) == (2, "error: reorder: reorder probability 1.5 outside 0..1\n")
    assert cli(rundir, "fault", "clear", "l2", "3", capsys=capsys)[0] == 0
    with controller(rundir) as ctl:
        assert _read(ctl, "l2", nr.PortReorderNames.EGRESS) == []


def test_counters_and_registers_are_read(rundir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Job counters read zero before traffic; a register is readable on the built-in target."""
    assert cli(rundir, "job", "create", "c", "--hosts", "h3,h4", capsys=capsys)[0] == 0
    code, out, err = cli(rundir, "counters", "--job", "c", capsys=capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert rows == [{"job": "c", "switch": "l2", "contributions": 0, "duplicates": 0,
                     "completions": 0, "results_sent": 0, "partials_sent": 0, "pulls_sent": 0,
                     "drops": {}}]
    code, out, err = cli(rundir, "registers", "--switch", "l2", "conn_started", "--index", "0",
                         capsys=capsys)
    assert code == 0, err
    assert json.loads(out) == [{"index": 0, "value": 0}]
    code, _, err = cli(rundir, "tables", "--switch", "l2", "--table", "no_such_tbl", capsys=capsys)
    assert code == 2 and err.startswith("error: no table named 'no_such_tbl'")


def test_unreachable_switch_is_reported(tmp_path: Path, fabric: dict[str, SwitchProcess],
                                        program_files: tuple[Path, Path],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A switch nobody listens for is named in a one-line error with exit status 2."""
    procs = dict(fabric)
    procs["sp2"] = SwitchProcess("sp2", 4, free_port())  # never started
    topo = spine_leaf_topology(procs, *program_files)
    (tmp_path / "topology.json").write_text(json.dumps(topo), encoding="utf-8")
    code, _, err = cli(tmp_path, "--timeout", "0.5", "routes", capsys=capsys)
    assert code == 2
    assert err.startswith(f"error: switch sp2 unreachable at {procs['sp2'].address}")
    assert err.count("\n") == 1


def test_restarted_switch_is_reconciled(tmp_path: Path, program_files: tuple[Path, Path]) -> None:
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


def test_credits_set_rewrites_the_job_table(rundir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """credits set changes the job_table entry; a value the protocol forbids is refused."""
    assert cli(rundir, "job", "create", "cr", "--hosts", "h3,h4", "--slots", "16",
               capsys=capsys)[0] == 0  # credits 2, 8 packets per message
    code, out, err = cli(rundir, "credits", "set", "cr", "1", capsys=capsys)
    assert (code, json.loads(out)) == (0, {"job": "cr", "credits": 1}), err
    with controller(rundir) as ctl:
        assert [e["params"]["credits"] for e in _read(ctl, "l2", "job_table")] == [1]
    code, _, err = cli(rundir, "credits", "set", "cr", "4", capsys=capsys)
    assert (code, err) == (2, "error: credits: credits too high: 4 credits x 8 packets per "
                              "message need 32 slots, the job has 16\n")
    code, _, err = cli(rundir, "credits", "set", "nope", "1", capsys=capsys)
    assert (code, err) == (2, "error: job: unknown job 'nope' (jobs: cr)\n")
    code, out, _ = cli(rundir, "job", "show", "cr", capsys=capsys)
    assert json.loads(out)["credits"] == 1


def test_switch_counters_watch_and_table_occupancy(rundir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """counters --switch lists every port; --watch --count N repeats N times; tables counts
    entries per table."""
    assert cli(rundir, "job", "create", "w", "--hosts", "h3,h4", capsys=capsys)[0] == 0
    code, out, err = cli(rundir, "counters", "--switch", "l2", capsys=capsys)
    assert code == 0, err
    data = json.loads(out)
    assert {p: v["peer"] for p, v in data["ports"].items()} == {
        "1": "h3", "2": "h4", "3": "sp1", "4": "sp2"}
    assert all(v["rx_packets"] == v["tx_packets"] == 0 for v in data["ports"].values())
    code, out, err = cli(rundir, "counters", "--job", "w", "--watch", "0", "--count", "2",
                         capsys=capsys)
    assert code == 0, err
    decoder, rounds, pos = json.JSONDecoder(), [], 0
    while out[pos:].strip():
        doc, end = decoder.raw_decode(out[pos:].lstrip())
        rounds.append(doc)
        pos = len(out) - len(out[pos:].lstrip()) + end
    assert [[r["switch"] for r in doc] for doc in rounds] == [["l2"], ["l2"]]
    code, out, err = cli(rundir, "tables", "--switch", "l2", capsys=capsys)
    assert code == 0, err
    sizes = {r["table"]: r["entries"] for r in json.loads(out)}
    assert (sizes[nr.AggregationIngressNames.JOB_TABLE],
            sizes[nr.AggregationIngressNames.CONN_TABLE],
            sizes[nr.AggregationEgressNames.RESULT_REWRITE]) == (1, 2, 2)


def _set_counter(ctl: Controller, switch: str, name: str, index: int, packets: int,
                 nbytes: int = 0) -> None:
    from p4.v1 import p4runtime_pb2

    sw = ctl.switch(switch)
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
    u.entity.counter_entry.counter_id = sw.require_schema().counter(name).preamble.id
    u.entity.counter_entry.index.index = index
    u.entity.counter_entry.data.packet_count = packets
    u.entity.counter_entry.data.byte_count = nbytes
    sw.write([u])


def test_cell_reads_agree_with_wildcard_reads(rundir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """job_counters and port_bytes read only the job's and the ports' cells; they give what
    the wildcard reads give, and an index outside the counter is an error naming it."""
    from controller.errors import ControllerError

    assert cli(rundir, "job", "create", "cells", "--hosts", "h3,h4", capsys=capsys)[0] == 0
    # the module's switches outlive each test's run directory and its election ids: writing
    # counters needs to be primary over whatever an earlier test left connected
    with controller(rundir, election_id=1 << 40) as ctl:
        ctl.connect(["l2"])
        job_id = ctl._find_job(ctl.state, "cells").job_id
        base = job_id * nr.Limit.DROP_REASONS
        _set_counter(ctl, "l2", nr.AggregationIngressNames.CONTRIBUTIONS, job_id, 7)
        _set_counter(ctl, "l2", nr.AggregationIngressNames.DUPLICATES, job_id, 2)
        _set_counter(ctl, "l2", nr.AggregationIngressNames.JOB_DROPS,
                     base + nr.DropReason.STALE, 3)
        _set_counter(ctl, "l2", nr.AggregationIngressNames.CONTRIBUTIONS, job_id + 1, 99)
        _set_counter(ctl, "l2", nr.SwitchCounters.PORT_RX, 3, 5, 500)
        _set_counter(ctl, "l2", nr.SwitchCounters.PORT_TX, 4, 6, 600)
        (row,) = ctl.job_counters("cells")
        assert (row["switch"], row["contributions"], row["duplicates"], row["completions"]) \
            == ("l2", 7, 2, 0)
        assert row["drops"] == {nr.DropReason.STALE.name.lower(): 3}
        wild = ctl.read_counters("l2", (nr.SwitchCounters.PORT_RX, nr.SwitchCounters.PORT_TX))
        expect = {p: (wild[nr.SwitchCounters.PORT_RX].get(p, (0, 0))[1],
                      wild[nr.SwitchCounters.PORT_TX].get(p, (0, 0))[1]) for p in (1, 2, 3, 4)}
        assert ctl.port_bytes("l2") == expect == {1: (0, 0), 2: (0, 0), 3: (500, 0),
                                                  4: (0, 600)}
        with pytest.raises(ControllerError, match=r"index 512 is outside 0\.\.511"):
            ctl.read_counter_cells("l2", [(nr.SwitchCounters.PORT_RX, 512)])


def test_serve_reports_a_recovery_recorded_just_before_it_stops(tmp_path: Path) -> None:
    """A switch recovered in the background is reported at serve's next poll; one that
    recovered since the last poll was lost when serve stopped first (seen from outside: a
    serve log without the switch's "recovered" line after a job had finished exactly)."""
    topology = FabricTopology(kind="custom", target="softswitch", switches=(), hosts=(),
                              links=())
    ctl = Controller(ControllerOptions(rundir=tmp_path, reconnect=True), topology)
    ctl.events.append("s1: recovered (3 entries restored)")
    stop = threading.Event()
    stop.set()  # the stop comes before the next poll
    seen: list[str] = []
    ctl.serve(stop, poll_s=60.0, on_event=seen.append)
    assert seen == ["s1: recovered (3 entries restored)"]
