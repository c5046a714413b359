"""Topology descriptions, run directory, JSON schema, argv, cleanup helpers: no root needed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from topo.cleanup import is_same_process, stop_recorded
from topo.errors import TargetError, TopoError, TopologyError, TopologyFileError
from topo.links import (
    ACK_CLASS,
    DATA_CLASS,
    HTB_QUANTUM_MIN,
    AckFirstIntf,
    LinkRateError,
    ack_first_htb_cmds,
    check_link_shapes,
    htb_quantum,
    netem_available,
    netem_delay,
    real_link_params,
    shaping_warning,
    tclink_params,
)
from topo.measure import measure_path
from topo.model import describe, topology_from_dict, topology_to_dict
from topo.nodes import (
    EGRESS_ORDERS,
    EPHEMERAL_FLOOR,
    BMv2Switch,
    SoftSwitch,
    SwitchLaunch,
    check_egress_order,
    choose_target,
    failure_reason,
    free_port_base,
    is_self_connection,
    log_tail,
    port_accepts,
)
from topo.probe import receive, send
from topo.rundir import ProcessRecord, RunDir, exec_target, load_topology, read_pids
from topo.topologies import LinkShape, RackTopo, SpineLeafTopo, TestbedTopo
from vtime import REAL_TIME, VirtualClock


def _ports(topo: TestbedTopo, switch: str) -> dict[int, tuple[str, int]]:
    """{port: (peer, peer_port)} of one switch, from Mininet's own port map."""
    return dict(sorted(topo.ports[switch].items()))


def test_rack_counts_and_names() -> None:
    """A rack is one switch s1 with hosts h1..hN, one link each."""
    topo = RackTopo(hosts=3)
    assert topo.switches() == ["s1"]
    assert topo.hosts() == ["h1", "h2", "h3"]
    assert len(topo.links()) == 3


def test_rack_ports_addresses_and_ids() -> None:
    """Rack host i sits on port i with 10.0.1.i/16 and MAC 00:00:0a:00:01:0i."""
    topo = RackTopo(hosts=2)
    assert _ports(topo, "s1") == {1: ("h1", 0), 2: ("h2", 0)}
    h2 = topo.host_options("h2")
    assert (h2["ip"], h2["mac"], h2["gpus"]) == ("10.0.1.2/16", "00:00:0a:00:01:02", 1)
    s1 = topo.switch_options("s1")
    assert (s1["device_id"], s1["grpc_port"], s1["dpid"], s1["cpu_port"]) == (
        0, 9559, "0000000000000001", 255)


def test_spineleaf_counts() -> None:
    """Default spine-leaf: 2 leaves, 2 spines, 4 hosts, 4 host + 4 fabric links."""
    topo = SpineLeafTopo()
    assert topo.switches() == ["l1", "l2", "sp1", "sp2"]
    assert topo.hosts() == ["h1", "h2", "h3", "h4"]
    kinds = [info["kind"] for _a, _b, info in topo.links(withInfo=True)]
    assert sorted(kinds) == ["fabric"] * 4 + ["host"] * 4


def test_spineleaf_port_plan() -> None:
    """Leaf ports 1..H go to hosts, H+1.. to spines; spine port i goes to leaf i."""
    topo = SpineLeafTopo(spines=3, leaves=2, hosts_per_leaf=2)
    assert _ports(topo, "l2") == {1: ("h3", 0), 2: ("h4", 0), 3: ("sp1", 2), 4: ("sp2", 2),
                                  5: ("sp3", 2)}
    assert _ports(topo, "sp3") == {1: ("l1", 5), 2: ("l2", 5)}


def test_spineleaf_device_ids_and_grpc_ports() -> None:
    """Leaves take ids 0..L-1 and spines L..; gRPC port is base + id."""
    topo = SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=1, grpc_base_port=40000)
    ids = {n: topo.switch_options(n)["device_id"] for n in topo.switches()}
    assert ids == {"l1": 0, "l2": 1, "l3": 2, "sp1": 3, "sp2": 4}
    assert topo.switch_options("sp2")["grpc_port"] == 40004
    assert topo.switch_options("sp2")["thrift_port"] == 9094


def test_spineleaf_host_addresses_per_leaf() -> None:
    """Leaf L owns 10.0.L.0/24; host slot j on it is 10.0.L.j with a matching MAC."""
    topo = SpineLeafTopo(leaves=3, hosts_per_leaf=2, gpus_per_host=4)
    h6 = topo.host_options("h6")
    assert (h6["ip"], h6["mac"], h6["leaf"], h6["slot"], h6["gpus"]) == (
        "10.0.3.2/16", "00:00:0a:00:03:02", 3, 2, 4)


def test_topology_is_deterministic() -> None:
    """Two builds with the same arguments describe the same network."""
    a = describe(SpineLeafTopo(spines=2, leaves=3), target="softswitch")
    b = describe(SpineLeafTopo(spines=2, leaves=3), target="softswitch")
    assert a == b


def test_link_shapes_reach_links() -> None:
    """Host and fabric links carry their own rates; delay/loss are passed on."""
    topo = SpineLeafTopo(host_bw=12.0, fabric_bw=24.0, delay="1ms", loss=0.5)
    infos = {(a, b): i for a, b, i in topo.links(withInfo=True)}
    assert infos[("h1", "l1")]["bw_bps"] == 12e6
    assert infos[("l1", "sp1")]["bw_bps"] == 24e6
    assert (infos[("l1", "sp1")]["delay_s"], infos[("l1", "sp1")]["loss"]) == (1e-3, 0.5)
    # rates and delays with units, as users write them
    topo = SpineLeafTopo(host_bw="100G", fabric_bw="25G", delay="2us", intra_bw="150GB/s")
    infos = {(a, b): i for a, b, i in topo.links(withInfo=True)}
    assert infos[("h1", "l1")]["bw_bps"] == 100e9 and infos[("l1", "sp1")]["bw_bps"] == 25e9
    assert infos[("h1", "l1")]["delay_s"] == pytest.approx(2e-6)
    assert topo.nodeInfo("h1")["intra_bw_bps"] == 1.2e12
    shape = topo.fabric_shape
    assert shape.bw_bps == 25e9 and shape.delay_s == pytest.approx(2e-6) and shape.loss is None
    assert shape.queue is None


@pytest.mark.parametrize("kwargs, message", [
    ({"spines": 0}, "spines"),
    ({"leaves": 255}, "leaves"),
    ({"hosts_per_leaf": 0}, "hosts_per_leaf"),
    ({"host_bw": 0}, "host_bw"),
    ({"host_bw": "fast"}, r"host_bw: 'fast' is not a rate"),
    ({"fabric_bw": "10X"}, r"fabric_bw: '10X' is not a rate"),
    ({"delay": "2"}, r"delay: '2' needs a unit"),
    ({"intra_bw": -1}, r"intra_bw: -1 must be a positive rate"),
    ({"loss": 150}, "loss"),
    ({"name_prefix": "longprefix"}, "too long"),
    ({"name_prefix": "a-b"}, "name_prefix"),
    ({"hosts_per_leaf": 3, "cpu_port": 4}, "CPU port"),
])
def test_bad_topology_arguments_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    """Impossible sizes, names or port plans raise TopologyError naming the problem."""
    with pytest.raises(TopologyError, match=message):
        SpineLeafTopo(**kwargs)


def test_describe_records_ports_and_attachments() -> None:
    """describe() lists each switch port with its peer and each host's switch port."""
    t = describe(SpineLeafTopo(), target="softswitch", rundir="/r", log_dir="/r/logs")
    l1 = t.switch("l1")
    assert [(p.port, p.peer, p.peer_port) for p in l1.ports] == [
        (1, "h1", 0), (2, "h2", 0), (3, "sp1", 1), (4, "sp2", 1)]
    assert l1.ports[2].intf == "l1-eth3" and l1.ports[2].peer_intf == "sp1-eth1"
    assert l1.ports[0].mac == "00:0b:00:00:00:01"
    assert l1.grpc_addr == "127.0.0.1:9559" and l1.log == "/r/logs/l1.log"
    h3 = t.host("h3")
    assert (h3.ip, h3.prefix_len, h3.switch, h3.switch_port, h3.intf) == (
        "10.0.2.1", 16, "l2", 1, "h3-eth0")
    assert [s.name for s in t.spines()] == ["sp1", "sp2"]
    assert t.total_gpus() == 4


def test_topology_json_round_trip(tmp_path: Path) -> None:
    """topology.json written by RunDir loads back into an equal Topology."""
    rundir = RunDir.create(tmp_path / "r1")
    t = describe(RackTopo(hosts=2), target="softswitch", program="/p/x.p4",
                 p4info="/b/x.p4info.txtpb", rundir=str(rundir.path))
    rundir.write_topology(t)
    assert load_topology(rundir.path) == t
    assert load_topology(rundir.topology_path) == t
    data = json.loads(rundir.topology_path.read_text())
    assert data["schema"] == 2
    assert data["switches"][0]["ports"][0] == {
        "port": 1, "intf": "s1-eth1", "mac": "00:0b:00:00:00:01", "peer": "h1",
        "peer_port": 0, "peer_intf": "h1-eth0"}
    assert data["hosts"][1] == {
        "name": "h2", "ip": "10.0.1.2", "prefix_len": 16, "mac": "00:00:0a:00:01:02",
        "intf": "h2-eth0", "switch": "s1", "switch_port": 2, "leaf": 1, "slot": 2, "gpus": 1,
        "role": "worker", "intra_bw_bps": None}
    assert data["links"][0] == {"node1": "h1", "port1": 0, "node2": "s1", "port2": 1,
                                "kind": "host", "bw_bps": 3e6, "delay_s": None, "loss": None}


def test_topology_json_of_schema_1_still_loads() -> None:
    """Run directories written before rates had units (schema 1: ``bw_mbit``, a tc delay
    string) load into the same records, by both readers of topology.json."""
    from controller.topology import load_topology as controller_load

    t = describe(SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=1, host_bw=10,
                               fabric_bw="20M", delay="1.5ms", loss=0.5, intra_bw="1T"),
                 target="softswitch")
    old = topology_to_dict(t)
    old["schema"] = 1
    for h in old["hosts"]:
        del h["intra_bw_bps"]
    for ln in old["links"]:
        ln["bw_mbit"] = ln.pop("bw_bps") / 1e6
        ln["delay"] = "1.5ms"
        del ln["delay_s"]
    back = topology_from_dict(old)
    assert back.links == t.links
    assert [h.intra_bw_bps for h in back.hosts] == [None, None]
    assert {ln.kind: ln.bw_bps for ln in back.links} == {"host": 10e6, "fabric": 20e6}
    assert [ln.delay_s for ln in back.links] == [pytest.approx(1.5e-3)] * len(back.links)
    bad = json.loads(json.dumps(old))
    bad["links"][0]["delay"] = "2"
    with pytest.raises(TopologyFileError, match=r"links\[0\]\.delay: '2' needs a unit"):
        topology_from_dict(bad)
    # the controller's own reader takes both schemas (it keeps no link shapes)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"units-topo-{os.getpid()}.json"
    try:
        for doc in (old, topology_to_dict(t)):
            path.write_text(json.dumps(doc))
            fabric = controller_load(path)
            assert [h.name for h in fabric.hosts] == ["h1", "h2"]
        assert [h.intra_bw_bps for h in fabric.hosts] == [1e12, 1e12]
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("switches"), "missing key 'switches'"),
    (lambda d: d["hosts"][0].__setitem__("gpus", "two"), r"hosts\[0\]\.gpus: expected int"),
    (lambda d: d["switches"][0].__setitem__("device_id", True), "device_id: expected int"),
    (lambda d: d.__setitem__("schema", 9), "schema 9"),
    (lambda d: d["hosts"][0].__setitem__("switch", "nope"), "unknown switch 'nope'"),
])
def test_bad_topology_json_is_rejected(mutate: Callable[[dict[str, Any]], object],
                                       message: str) -> None:
    """A topology.json that breaks the schema raises TopologyFileError naming the key."""
    data = topology_to_dict(describe(RackTopo(hosts=1), target="softswitch"))
    mutate(data)
    with pytest.raises(TopologyFileError, match=message):
        topology_from_dict(data)


def test_load_topology_missing_file(tmp_path: Path) -> None:
    """A missing topology.json gives a clear error, not a traceback."""
    with pytest.raises(TopologyFileError, match="no such file"):
        load_topology(tmp_path)


def test_rundir_layout_and_latest_link(tmp_path: Path) -> None:
    """RunDir.create makes logs/ and build/ under run/<stamp> and points run/latest at it."""
    rundir = RunDir.create(root=tmp_path)
    assert rundir.path.parent == tmp_path.resolve()
    assert (tmp_path / "latest").resolve() == rundir.path
    assert rundir.logs.is_dir() and rundir.build.is_dir()
    owner, records = read_pids(rundir.pids_path)
    assert owner["pid"] == os.getpid() and records == []


def test_rundir_records_processes(tmp_path: Path) -> None:
    """record_process stores the pid with its /proc cmdline."""
    rundir = RunDir.create(tmp_path / "r")
    rundir.record_process("me", "test", os.getpid())
    _owner, records = read_pids(rundir.pids_path)
    assert [(r.name, r.kind, r.pid) for r in records] == [("me", "test", os.getpid())]
    assert records[0].cmdline and is_same_process(records[0])


def test_cleanup_stops_only_matching_processes(tmp_path: Path) -> None:
    """A recorded process is stopped; a pid whose cmdline no longer matches is left alone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rundir = RunDir.create(tmp_path / "r")
        rundir.record_process("victim", "switch", proc.pid, proc.pid)
        wrong = ProcessRecord("bystander", "switch", other.pid, None, ("not", "this"))
        _owner, records = read_pids(rundir.pids_path)
        stopped = stop_recorded(records + [wrong], wait_s=5.0)
        assert stopped == [f"victim (pid {proc.pid})"]
        assert proc.wait(5) is not None
        assert other.poll() is None
    finally:
        for p in (proc, other):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_cleanup_finishes_before_a_sigint_lands(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT during the cleanup of dead runs (a `make run` interrupted while it cleaned up
    after a SIGKILLed one) comes after the cleanup: every dead run's processes are stopped
    first. Before, the interrupt cut the cleanup short and a dead run's switch outlived the
    interrupted run (the reliability campaign's stricter leak check, 1 of 50)."""
    from topo import cleanup

    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True) for _ in range(2)]
    try:
        for i, proc in enumerate(procs):
            rundir = RunDir.create(tmp_path / f"run{i}")
            rundir.record_process(f"sw{i}", "switch", proc.pid, proc.pid)
            data = json.loads(rundir.pids_path.read_text())
            data["owner"] = {"pid": 999999, "cmdline": ["gone"]}  # a dead run
            rundir.pids_path.write_text(json.dumps(data))
        real_stop = cleanup.stop_recorded

        def stop_then_interrupt(records: list[ProcessRecord], wait_s: float = 3.0) -> list[str]:
            stopped = real_stop(records, wait_s)
            if stopped:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C after the first dead run
            return stopped

        monkeypatch.setattr(cleanup, "stop_recorded", stop_then_interrupt)
        monkeypatch.setattr(cleanup, "remove_interfaces", lambda intfs: [])
        # another thread, as make run has (gRPC, the live view): the kernel may hand it the
        # process's SIGINT, and a mask on the main thread alone then defers nothing
        done = threading.Event()
        other = threading.Thread(target=done.wait, name="other", daemon=True)
        other.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                cleanup.clean_all(tmp_path)
                time.sleep(1.0)  # (the deferred SIGINT lands before this ends)
        finally:
            done.set()
            other.join()
        for proc in procs:
            assert proc.wait(5) is not None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def test_softswitch_argv() -> None:
    """The built-in switch's command line: one -i per port, gRPC, CPU port, log, pcap."""
    launch = SwitchLaunch(name="s1", device_id=3, grpc_addr="127.0.0.1:50054",
                          ports=((1, "s1-eth1"), (2, "s1-eth2")), log_file=Path("/r/logs/s1.log"),
                          cpu_port=255, pcap_dir=Path("/r/pcaps"))
    assert SoftSwitch.build_argv(launch) == [
        sys.executable, "-m", "softswitch", "run", "--no-p4", "-i", "1@s1-eth1",
        "-i", "2@s1-eth2", "--device-id", "3", "--grpc-server-addr", "127.0.0.1:50054",
        "--cpu-port", "255", "--log-file", "/r/logs/s1.log", "-L", "info",
        "--pcap", "/r/pcaps"]


def test_softswitch_argv_with_preloaded_program() -> None:
    """With a program to preload, it replaces --no-p4."""
    launch = SwitchLaunch(name="s1", device_id=0, grpc_addr="127.0.0.1:50051", ports=(),
                          log_file=Path("/l"), program=Path("/p/netreduce.p4"))
    argv = SoftSwitch.build_argv(launch)
    assert argv[4] == "/p/netreduce.p4" and "--no-p4" not in argv and "--cpu-port" not in argv


def test_softswitch_argv_with_random_egress_order() -> None:
    """--egress-order and --seed reach the switch process; sync (the default) adds nothing."""
    launch = SwitchLaunch(name="s1", device_id=2, grpc_addr="127.0.0.1:50053", ports=(),
                          log_file=Path("/l"), egress_order="random", seed=9)
    assert SoftSwitch.build_argv(launch)[-4:] == ["--egress-order", "random", "--seed", "9"]
    plain = SwitchLaunch(name="s1", device_id=2, grpc_addr="127.0.0.1:50053", ports=(),
                         log_file=Path("/l"))
    assert "--egress-order" not in SoftSwitch.build_argv(plain)


def test_egress_order_checks_name_the_bad_option() -> None:
    """Unknown orders, an order on BMv2 and a seed without random are refused clearly; the
    list of orders is the switch's own."""
    from softswitch.traffic_manager import EGRESS_ORDERS as SWITCH_ORDERS

    assert EGRESS_ORDERS == SWITCH_ORDERS
    check_egress_order(SoftSwitch, "random", 3)
    check_egress_order(BMv2Switch, "sync", None)
    with pytest.raises(TargetError, match="egress order 'lifo': choose from sync, fifo, random"):
        check_egress_order(SoftSwitch, "lifo", None)
    with pytest.raises(TargetError, match="only the built-in target.*bmv2 has its own"):
        check_egress_order(BMv2Switch, "random", None)
    with pytest.raises(TargetError, match="seed 4: only egress order 'random'"):
        check_egress_order(SoftSwitch, "fifo", 4)
    with pytest.raises(TargetError, match="seed -1"):
        check_egress_order(SoftSwitch, "random", -1)


def test_bmv2_argv() -> None:
    """simple_switch_grpc gets --no-p4 and its gRPC options after '--'."""
    launch = SwitchLaunch(name="l1", device_id=1, grpc_addr="127.0.0.1:50052",
                          ports=((1, "l1-eth1"),), log_file=Path("/l"), cpu_port=255,
                          thrift_port=9091)
    assert BMv2Switch.build_argv(launch) == [
        "simple_switch_grpc", "--device-id", "1", "-i", "1@l1-eth1", "--thrift-port", "9091",
        "--log-console", "-L", "info", "--no-p4", "--", "--grpc-server-addr",
        "127.0.0.1:50052", "--cpu-port", "255"]


def _fake_bin(directory: Path, name: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)


def test_choose_target_auto_without_bmv2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto falls back to the built-in target and says why."""
    monkeypatch.setenv("PATH", str(tmp_path))
    cls, why = choose_target("auto")
    assert cls is SoftSwitch and "not on PATH" in why


def test_choose_target_auto_with_bmv2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto picks BMv2 when simple_switch_grpc and p4c are both on PATH."""
    _fake_bin(tmp_path, "simple_switch_grpc")
    _fake_bin(tmp_path, "p4c")
    monkeypatch.setenv("PATH", str(tmp_path))
    cls, why = choose_target("auto")
    assert cls is BMv2Switch and "simple_switch_grpc" in why


def test_choose_target_bmv2_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for bmv2 without it installed is a clear error."""
    _fake_bin(tmp_path, "p4c")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TargetError, match="simple_switch_grpc not found"):
        choose_target("bmv2")


def test_choose_target_unknown() -> None:
    """An unknown target name is rejected with the choices."""
    with pytest.raises(TargetError, match="unknown target 'tofino'"):
        choose_target("tofino")


def test_failure_reason_picks_last_error_line(tmp_path: Path) -> None:
    """The reason of a failed start is the log's last error line."""
    log = tmp_path / "s1.log"
    log.write_text("# 10:00:00 python -m softswitch run\nstarting\n"
                   "softswitch run: error: -i: no such interface s1-eth9\n")
    tail = log_tail(log)
    assert failure_reason(tail, "exited") == "softswitch run: error: -i: no such interface s1-eth9"
    assert failure_reason(["all fine"], "exited with status 3") == "exited with status 3"


def test_shaping_warning_without_netem() -> None:
    """Delay/loss without netem produce one warning naming the data-plane loss knob."""
    shapes = [LinkShape(10e6, 2e-3, 1.0), LinkShape(20e6, 2e-3, 1.0)]
    text = shaping_warning(shapes, netem=False)
    assert text is not None and "delay=2 ms loss=1%" in text and "loss knob" in text
    assert shaping_warning(shapes, netem=True) is None
    assert shaping_warning([LinkShape(10e6)], netem=False) is None


def test_real_link_params_convert_emulated_units() -> None:
    """htb gets Mbit/s and netem a microsecond string tc reads (its bare number is us, and
    tc 6.1 refuses ns); with a time-dilation factor, bw / TDF and delay * TDF."""
    assert real_link_params(LinkShape(3e6), REAL_TIME) == (3.0, None)
    assert real_link_params(LinkShape(None, None)) == (None, None)
    assert real_link_params(LinkShape(500e3, 2e-6)) == (0.5, "2.000us")
    assert real_link_params(LinkShape(1e9, 1.5e-3)) == (1000.0, "1500.000us")
    assert real_link_params(LinkShape(10e6, 0.0)) == (10.0, None)  # 0: no netem delay
    assert real_link_params(LinkShape(10e6, 100e-9))[1] == "0.100us"
    assert netem_delay(2e-6) == "2.000us"
    dilated = VirtualClock(100)
    assert real_link_params(LinkShape(100e9, 2e-6), dilated) == (1000.0, "200.000us")


def test_rates_above_the_real_link_ask_for_time_dilation() -> None:
    """100G without dilation is refused before any network is built, naming the factor."""
    with pytest.raises(LinkRateError, match=r"link rate 100 Gbit/s: above the 1 Gbit/s .* "
                                            r"time dilation, tdf=100 or more"):
        real_link_params(LinkShape(100e9))
    with pytest.raises(LinkRateError, match=r"at tdf=10 that is 10 Gbit/s.* tdf=100 or more"):
        real_link_params(LinkShape(100e9), VirtualClock(10))
    assert isinstance(LinkRateError("x"), TopoError)
    topo = SpineLeafTopo(host_bw="1G", fabric_bw="100G")
    with pytest.raises(LinkRateError, match="100 Gbit/s"):
        check_link_shapes(topo.requested_shapes())
    check_link_shapes(SpineLeafTopo(host_bw="1G").requested_shapes())


def test_start_network_refuses_undilated_100g_before_building(tmp_path: Path) -> None:
    """start_network refuses a 100G topology up front: no run directory, nothing started."""
    from topo.network import start_network

    with pytest.raises(LinkRateError, match="time dilation"):
        start_network(RackTopo(hosts=2, host_bw="100G"), "softswitch", tmp_path / "run",
                      progress=False)
    assert not (tmp_path / "run").exists()


def test_shaped_link_hands_tclink_real_parameters() -> None:
    """ShapedLink gives TCLink the topology link's bw_bps/delay_s as bw (Mbit/s) and a netem
    delay string; without netem no delay/loss; the topology's own keys never reach it."""
    topo = SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, host_bw="25M", delay="2us",
                         loss=1.0)
    info = next(i for _a, _b, i in topo.links(withInfo=True) if i["kind"] == "host")
    opts = tclink_params(info)
    assert (opts["bw"], opts["delay"], opts["loss"]) == (25.0, "2.000us", 1.0)
    assert not {"bw_bps", "delay_s", "kind"} & set(opts)
    assert (opts["txo"], opts["rxo"]) == (False, False)
    bare = tclink_params(info, netem=False)
    assert bare["bw"] == 25.0 and not {"delay", "loss"} & set(bare)
    assert tclink_params(info, clock=VirtualClock(5))["delay"] == "10.000us"
    with pytest.raises(LinkRateError):
        tclink_params({"bw_bps": 2e9})


def test_ack_first_htb_splits_the_rate_and_filters_acks() -> None:
    """The rate class keeps the link's rate; ACKs get a prio-0 class that may borrow all of
    it, everything unmatched (the htb default) goes to the data class."""
    cmds = ack_first_htb_cmds(3.0)
    assert cmds[0].endswith("root handle 5:0 htb default " + DATA_CLASS.split(":")[1])
    assert "classid 5:1 htb rate 3.000000Mbit burst 15k quantum 37500" in cmds[1]
    ack, data = cmds[2], cmds[3]
    assert f"classid {ACK_CLASS} htb rate 0.300000Mbit ceil 3.000000Mbit" in ack
    assert ack.endswith("prio 0 quantum 3750")
    assert f"classid {DATA_CLASS} htb rate 2.700000Mbit ceil 3.000000Mbit" in data
    assert data.endswith("prio 1 quantum 33750")
    filters = cmds[4:]
    assert len(filters) == 2 and all(f.endswith(f"flowid {ACK_CLASS}") for f in filters)
    assert "protocol 6" in filters[0] and "0x10 0xff at 33" in filters[0]
    assert "dport 4791" in filters[1] and "0x11 0xff at 28" in filters[1]
    assert all(cmd.count("%s") == 2 for cmd in cmds)


def test_ack_first_netem_goes_under_both_classes() -> None:
    """Where netem exists, delay and loss apply to ACKs and data alike."""
    intf = object.__new__(AckFirstIntf)  # delayCmds needs no node
    cmds, parent = intf.delayCmds(f" parent {DATA_CLASS} ", delay="2ms", loss=1.0)
    assert len(cmds) == 2 and parent == " parent 10:1 "
    assert f"parent {DATA_CLASS}" in cmds[0] and "handle 10: netem" in cmds[0]
    assert f"parent {ACK_CLASS}" in cmds[1] and "handle 11: netem" in cmds[1]
    assert all("delay 2ms" in c and "loss 1.00000" in c for c in cmds)
    assert intf.delayCmds(f" parent {DATA_CLASS} ") == ([], f" parent {DATA_CLASS} ")


def test_a_hosts_send_queue_holds_the_largest_windows() -> None:
    """A host's own interface queues HOST_QUEUE_PACKETS (htb's default 1000 overflowed under a
    window of 1024 packets: 543 of them dropped at the sending host, each a NAK and a resent
    window); a switch's keeps htb's default; a queue given explicitly stays."""
    from mininet.node import Host, Switch

    from topo.links import HOST_QUEUE_PACKETS

    host, switch = object.__new__(AckFirstIntf), object.__new__(AckFirstIntf)
    host.node, switch.node = object.__new__(Host), object.__new__(Switch)
    cmds, parent = host.delayCmds(f" parent {DATA_CLASS} ")
    assert cmds == [f"%s qdisc add dev %s  parent {DATA_CLASS}  handle 10: pfifo limit "
                    f"{HOST_QUEUE_PACKETS}"] and parent == " parent 10:1 "
    from protocol.netreduce import Limit

    assert HOST_QUEUE_PACKETS >= 8 * Limit.SLOTS
    assert switch.delayCmds(f" parent {DATA_CLASS} ") == ([], f" parent {DATA_CLASS} ")
    cmds, _ = host.delayCmds(f" parent {DATA_CLASS} ", max_queue_size=50)
    assert cmds[0].endswith("pfifo limit 50")
    cmds, _ = host.delayCmds(f" parent {DATA_CLASS} ", delay="2ms")  # netem's own limit
    assert all(f"limit {HOST_QUEUE_PACKETS}" in c for c in cmds)


def test_netem_probe_without_tc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without tc on PATH, netem counts as unavailable (and the answer is cached)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    netem_available.cache_clear()
    try:
        assert netem_available() is False
        assert netem_available.cache_info().hits == 0
        netem_available()
        assert netem_available.cache_info().hits == 1
    finally:
        netem_available.cache_clear()


def test_probe_send_and_receive_on_loopback() -> None:
    """The measurement probe counts exactly the datagrams and bytes that arrived."""
    ready = threading.Event()
    result = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def rx_port() -> None:
        result["r"] = receive(port, 2.0, on_ready=ready.set, host="127.0.0.1")

    thread = threading.Thread(target=rx_port)
    thread.start()
    assert ready.wait(5)
    sent = send("127.0.0.1", port, 0.3, rate_mbit=1.0, size=500)
    thread.join(10)
    got = result["r"]
    assert sent.packets > 0 and sent.bytes == sent.packets * 500
    assert 0 < got.packets <= sent.packets and got.bytes == got.packets * 500


@pytest.mark.parametrize("say_done", [True, False], ids=["done", "end-of-input"])
def test_probe_receiver_ends_once_the_queue_drained_after_the_sender_is_done(
        say_done: bool) -> None:
    """A "done" line ends the receiver when nothing more comes (make run's link check waited
    its whole --seconds, 2 s past the sender); the end of its input alone does not."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ready = threading.Event()
    result: dict[str, Any] = {}
    r_fd, w_fd = os.pipe()
    with os.fdopen(r_fd) as done_in, os.fdopen(w_fd, "w") as done_out:

        def rx_port() -> None:
            t0 = time.monotonic()
            result["r"] = receive(port, 30.0 if say_done else 1.5, on_ready=ready.set,
                                  host="127.0.0.1", done=done_in)
            result["s"] = time.monotonic() - t0

        thread = threading.Thread(target=rx_port)
        thread.start()
        assert ready.wait(5)
        sent = send("127.0.0.1", port, 0.3, rate_mbit=1.0, size=500)
        done_out.write("done\n" if say_done else "")
        done_out.close()
        thread.join(40)
    assert result["r"].packets == sent.packets  # (loopback: nothing lost)
    if say_done:
        assert result["s"] < 15.0, result  # well before its 30 s
    else:
        assert result["s"] >= 1.5, result  # its whole time: an end of input is not "done"


# The two ends of the link check as stand-ins for topo.probe: the sender writes the real rate it
# was asked for to a file; the receiver, once told "done", reports what a link shaped to the
# rate after the comma (real Mbit/s) would have delivered of it in one second.
_FAKE_PROBE = """
import json, sys
rate_file, link_mbit = sys.argv[1].split(",")
if sys.argv[2] == "send":
    args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    with open(rate_file, "w") as f:
        f.write(args["--rate-mbit"])
    print(json.dumps({"packets": 1000, "bytes": 1000 * 1000, "seconds": 1.0}))
else:
    print("ready", flush=True)
    sys.stdin.readline()
    mbit = min(float(open(rate_file).read()), float(link_mbit))
    print(json.dumps({"packets": 1000, "bytes": int(mbit * 1e6 / 8 * 1000 / 999),
                      "seconds": 1.0}))
"""


class _FakeProbeNode:
    def __init__(self, rate_file: Path, link_real_mbit: float) -> None:
        self.spec = f"{rate_file},{link_real_mbit}"

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        assert argv[1:3] == ["-m", "topo.probe"], argv
        return subprocess.Popen([sys.executable, "-c", _FAKE_PROBE, self.spec, *argv[3:]],
                                stdin=kwargs.get("stdin"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)


@pytest.mark.parametrize("tdf", [1.0, 3.0])
def test_link_check_offers_and_counts_in_emulated_time_under_dilation(
        tmp_path: Path, tdf: float) -> None:
    """Under time dilation a link carries bw / tdf in real time: the link check offers
    1.5 x bw / tdf and counts what arrived tdf times over, so a link at its rate is
    link-bound (make run's check compared real time with the emulated rate: 32 % of a
    3 Mbit/s link at TDF 3, "NOT link-bound")."""
    topology = replace(describe(RackTopo(hosts=2, host_bw="3M"), target="softswitch"),
                       tdf=tdf)
    rate_file = tmp_path / "asked"
    node = _FakeProbeNode(rate_file, 3.0 / tdf)
    network = SimpleNamespace(topology=topology, switches=(), node=lambda name: node)
    check = measure_path(network, "h1", "h2", seconds=1.0)
    assert float(rate_file.read_text()) == pytest.approx(4.5 / tdf)  # real rate offered
    assert check.configured_mbit == pytest.approx(3.0)
    assert check.offered_mbit == pytest.approx(4.5)
    assert check.achieved_mbit == pytest.approx(3.0, rel=0.01)
    assert check.link_bound, check.describe()


def test_spineleaf_data_server_host_is_optional_and_extra() -> None:
    """data_server=True adds host `data` (gpus 0) on the last leaf after its spines; every
    other name, port, address and the default topology stay as they were."""
    plain = describe(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2), target="softswitch")
    with_data = describe(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, data_server=True),
                         target="softswitch")
    assert SpineLeafTopo().data_host is None
    assert [h.name for h in plain.hosts] == ["h1", "h2", "h3", "h4"]
    assert with_data.hosts[:4] == plain.hosts
    data = with_data.host("data")
    assert (data.ip, data.mac, data.switch, data.switch_port, data.leaf, data.slot, data.gpus) == (
        "10.0.2.3", "00:00:0a:00:02:03", "l2", 5, 2, 3, 0)
    l2 = with_data.switch("l2")
    assert [(p.port, p.peer) for p in l2.ports] == [
        (1, "h3"), (2, "h4"), (3, "sp1"), (4, "sp2"), (5, "data")]
    assert with_data.switch("l1").ports == plain.switch("l1").ports
    assert with_data.total_gpus() == plain.total_gpus() == 4


def test_spineleaf_data_server_with_prefix_and_bad_value() -> None:
    """The data host takes the name prefix; a non-boolean data_server is refused."""
    topo = SpineLeafTopo(leaves=3, hosts_per_leaf=1, data_server=True, name_prefix="x")
    assert topo.data_host == "xdata"
    assert topo.host_options("xdata")["ip"] == "10.0.3.2/16"
    with pytest.raises(TopologyError, match="data_server"):
        SpineLeafTopo(data_server="yes")  # type: ignore[arg-type]  # the wrong type on purpose


def test_default_target_is_the_builtin_one_even_with_bmv2_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make run`` without ``target=`` measures the built-in target on every machine: once the
    toolchain was installed, the old default (auto) silently switched the main job to BMv2."""
    from experiment.run import parse_args, target_name
    from topo.topofile import load_spec, resolve

    _fake_bin(tmp_path, "simple_switch_grpc")
    _fake_bin(tmp_path, "p4c")
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = load_spec(resolve("spineleaf"))
    assert target_name(parse_args(["--topo", "spineleaf"]).target, spec) == "softswitch"
    cls, _ = choose_target(target_name(None, spec))
    assert cls is SoftSwitch
    assert target_name("auto", spec) == "auto"


def _self_connected() -> socket.socket:
    """A TCP socket connected to itself: bound to a loopback port with no server, then
    connected to that port (TCP simultaneous open)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.connect(sock.getsockname())
    return sock


def test_a_probe_that_connects_to_itself_finds_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI: a switch looked ready because the readiness probe's socket was given the switch's
    own port (it lies in the ephemeral range) and connected to itself; the switch's bind then
    failed on it. A self-connection is not a server."""
    with _self_connected() as sock:
        assert is_self_connection(sock)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert port_accepts("127.0.0.1", port)
        with socket.create_connection(("127.0.0.1", port)) as client:
            assert not is_self_connection(client)
    monkeypatch.setattr("topo.nodes.socket.create_connection",
                        lambda *_args, **_kw: _self_connected())
    assert not port_accepts("127.0.0.1", 1)


def test_free_port_base_stays_below_the_ephemeral_ports() -> None:
    """Test and campaign networks take ports no client socket can be given meanwhile; a
    taken port moves the block past it."""
    base = free_port_base(4, 29000)
    assert 29000 <= base and base + 4 <= EPHEMERAL_FLOOR
    with socket.create_server(("127.0.0.1", base + 2)):
        for _ in range(20):  # a taken port is never in the block, whatever the first block
            again = free_port_base(4, base, base + 48)
            assert not again <= base + 2 < again + 4
    # two calls before anything binds: the parallel campaign's cells got the same block
    # while the search started at the same place every time
    assert len({free_port_base(2) for _ in range(5)}) > 1
    with pytest.raises(TopoError, match="no 4 consecutive free TCP ports"):
        free_port_base(4, EPHEMERAL_FLOOR)


def test_htb_quantum_stays_between_one_frame_and_htbs_bound() -> None:
    """A dilated run's real links are slow (100G at TDF 300,000: 0.33 Mbit/s, its ACK class
    0.033): rate / r2q would be 41 bytes, and htb warned on every such class ("quantum of
    class ... is small"), which Mininet printed as ERROR lines."""
    assert htb_quantum(0.033) == HTB_QUANTUM_MIN == 1514
    assert htb_quantum(3.0) == 37500
    assert htb_quantum(40_000.0) == 200_000
    cmds = ack_first_htb_cmds(0.333)
    assert cmds[2].endswith("quantum 1514")  # the ACK class, 0.0333 Mbit/s


def test_default_grpc_ports_lie_below_the_kernels_client_ports() -> None:
    """The default P4Runtime ports (9559 + device id) stay below the ephemeral range even on
    a k = 8 fat-tree (80 switches): at 50051 + D a client socket once took a switch's port
    before the switch bound it."""
    from topo.nodes import EPHEMERAL_FLOOR
    from topo.topologies import GRPC_BASE_PORT, load_topology_file

    topo = load_topology_file("fattree", {"k": 8})
    ports = [topo.switch_options(s)["grpc_port"] for s in topo.switches()]
    assert len(ports) == 80 and min(ports) == GRPC_BASE_PORT == 9559
    assert max(ports) < EPHEMERAL_FLOOR


def test_exec_target_reads_mnexec_lines() -> None:
    """What an mnexec line becomes: its options (and their arguments) dropped."""
    assert exec_target(["mnexec", "-da", "1702", "python", "-m", "w"]) == ("python", "-m", "w")
    assert exec_target(["/usr/bin/mnexec", "-c", "-n", "sh"]) == ("sh",)
    assert exec_target(["mnexec", "-a", "5", "-g", "grp", "x"]) == ("x",)
    assert exec_target(["python", "-m", "w"]) is None
    assert exec_target(["mnexec", "-da", "1"]) is None


def test_a_worker_started_through_mnexec_is_recorded_and_stopped(tmp_path: Path) -> None:
    """A command a run starts in a host goes through mnexec, whose own argv /proc shows until
    it execs the command. Recorded then, the record never matched the command again, so
    the cleanup after a killed run left the worker (and its host's namespace) running:
    the full soak's teardown cell found it after 38 of 39 runs. Now the record waits for
    the exec, and a record made before it still matches."""
    if shutil.which("mnexec") is None or os.geteuid() != 0:
        pytest.skip("needs Mininet's mnexec and root")
    proc = subprocess.Popen(["mnexec", "-da", str(os.getpid()), sys.executable, "-c",
                             "import time; time.sleep(60)"])
    try:
        rundir = RunDir.create(tmp_path / "r")
        rundir.record_process("h1", "in-host", proc.pid)
        _owner, records = read_pids(rundir.pids_path)
        assert records[0].cmdline[0] == sys.executable
        early = ProcessRecord("h1", "in-host", proc.pid, None,
                              ("mnexec", "-da", str(os.getpid()), *records[0].cmdline))
        assert is_same_process(early)
        assert stop_recorded([early]) == [f"h1 (pid {proc.pid})"]
        assert proc.wait(10) is not None
    finally:
        proc.kill()
        proc.wait()
