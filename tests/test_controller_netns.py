"""The controller with real data: one built-in switch on veths, host agents in namespaces.

One switch process runs ``p4src/netreduce.p4`` (pushed by the controller) with four ports,
each a veth to a network namespace playing a host (h1, h2 with two GPUs each; h3, h4 with
one). The controller programs routes and jobs from the run directory; each host runs the
in-network all-reduce (``python -m workloads allreduce --algo innetwork`` or the same agent
API in a two-phase driver) and checks the sum exactly. Needs root; the namespaces, veths
and every process are removed at the end, also on failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from tests import netns
from tests.netreduce_sizes import SMALL_ELEMS, netreduce_with
from tests.p4runtime_server_fake import SwitchProcess, compile_program, free_tcp_port

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "netreduce.p4"
GPUS = {"h1": 2, "h2": 2, "h3": 1, "h4": 1}
SIZE = 3000  # elements per worker: 94 packets of 32 (the program built with E = 32)

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.skipif(not netns.can_use_netns(), reason="needs root and ip(8)"),
    pytest.mark.skipif(not PROGRAM.is_file(), reason="p4src/netreduce.p4 missing"),
]

# Runs inside a host namespace: all-reduce once, flush (every peer has every result), say
# so, wait for "go" on stdin, all-reduce again; one JSON line per phase.
DRIVER = r"""
import json, sys
import numpy as np
from workloads.__main__ import make_input
from workloads.agent import HostAgent, load_job, local_ranks
from workloads.innetwork import innetwork_allreduce

plan, host, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
job = load_job(plan, elems=32)  # the program built with E = 32
ranks = local_ranks(job, host, None)

def phase(seed):
    want = sum(make_input(r, size, "int32", seed).astype(np.int64) for r in range(job.size))
    def work(rank, ch):
        got, _stats = innetwork_allreduce(ch, make_input(rank, size, "int32", seed))
        ch.flush(120.0)
        return got
    out = agent.run(work, timeout=180.0)
    return {"phase": seed, "ranks": sorted(out),
            "exact": all(np.array_equal(v.astype(np.int64), want) for v in out.values())}

with HostAgent(job, ranks, dead_after=120.0, timeout=180.0) as agent:
    print(json.dumps(phase(1)), flush=True)
    if sys.stdin.readline().strip() == "go":
        print(json.dumps(phase(2)), flush=True)
"""


def _mac(host: int) -> str:
    return f"00:00:0a:00:01:{host:02x}"


def _switch_mac(port: int) -> str:
    return f"00:0b:00:01:00:{port:02x}"


@dataclass
class Lab:
    topo: netns.NetnsTopology
    switch: SwitchProcess
    rundir: Path
    namespaces: dict[str, str]  # host name -> namespace

    def host_argv(self, host: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[host], sys.executable, *argv]


def ctl(rundir: Path, *args: str) -> tuple[int, str, str]:
    """One controller CLI command (a fresh controller each time, as from a shell)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--rundir", str(rundir), "--json", *args])
    return code, out.getvalue(), err.getvalue()


def ctl_json(rundir: Path, *args: str) -> Any:
    code, out, err = ctl(rundir, *args)
    assert code == 0, err
    return json.loads(out)


def _setup_host(topo: netns.NetnsTopology, index: int, ns: str) -> None:
    netns.ip("-n", ns, "link", "set", "eth0", "down")
    netns.ip("-n", ns, "link", "set", "eth0", "address", _mac(index))
    netns.ip("-n", ns, "link", "set", "eth0", "up")
    netns.ip("-n", ns, "addr", "add", f"10.0.1.{index}/24", "dev", "eth0")
    subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off", "rx", "off",
                    "sg", "off", "tso", "off", "gso", "off", "gro", "off"],
                   capture_output=True, timeout=30, check=False)
    for other in range(1, len(GPUS) + 1):
        if other != index:  # the switch drops ARP: static neighbours
            netns.ip("-n", ns, "neigh", "replace", f"10.0.1.{other}", "lladdr", _mac(other),
                     "dev", "eth0", "nud", "permanent")


def _topology_json(switch: SwitchProcess, p4info: Path, config: Path) -> dict[str, Any]:
    ports, hosts = [], []
    for i, (name, gpus) in enumerate(GPUS.items(), start=1):
        ports.append({"port": i, "mac": _switch_mac(i), "peer": name, "peer_port": 0})
        hosts.append({"name": name, "ip": f"10.0.1.{i}", "prefix_len": 24, "mac": _mac(i),
                      "switch": "s1", "switch_port": i, "gpus": gpus})
    return {"schema": 1, "kind": "rack", "target": "softswitch",
            "switches": [{"name": "s1", "device_id": switch.device_id,
                          "grpc_addr": switch.address, "role": "leaf", "index": 1,
                          "cpu_port": None, "ports": ports}],
            "hosts": hosts, "links": [], "p4info": str(p4info), "device_config": str(config)}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Namespaces h1..h4, the switch on their veths, pipeline and routes programmed."""
    base = tmp_path_factory.mktemp("ctlnet")
    p4info, config = compile_program(netreduce_with(SMALL_ELEMS, base / "src", PROGRAM),
                                     base / "program")
    rundir = base / "run"
    rundir.mkdir()
    with netns.topology(len(GPUS)) as topo:
        namespaces = {}
        for i, (name, link) in enumerate(zip(GPUS, topo.links, strict=True), start=1):
            _setup_host(topo, i, link.netns)
            namespaces[name] = link.netns
        switch = SwitchProcess("s1", 1, free_tcp_port(),
                               {i: link.switch_end for i, link in enumerate(topo.links, start=1)},
                               log_path=base / "switch.log")
        switch.start()
        try:
            (rundir / "topology.json").write_text(
                json.dumps(_topology_json(switch, p4info, config))
            )
            assert ctl(rundir, "pipeline", "push")[0] == 0
            assert ctl(rundir, "routes")[0] == 0
            yield Lab(topo, switch, rundir, namespaces)
        finally:
            switch.stop()


def _plan(lab: Lab, job: str) -> Path:
    path = lab.rundir / f"plan-{job}.json"
    code, out, err = ctl(lab.rundir, "job", "show", job)
    assert code == 0, err
    path.write_text(out)
    return path


def _kill(procs: list[subprocess.Popen[Any]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def _read_line(proc: subprocess.Popen[Any], deadline: float) -> dict[str, Any]:
    """The next JSON line of a driver, or a failure with its stderr."""
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("{"):
                row: dict[str, Any] = json.loads(line)
                return row
            if not line:
                break
    _kill([proc])
    err = proc.stderr.read() if proc.stderr else ""
    pytest.fail(f"driver gave no result: {err.strip()[-1500:]}")


@contextlib.contextmanager
def drivers(lab: Lab, job: str, hosts: list[str]) -> Iterator[dict[str, subprocess.Popen[Any]]]:
    plan = _plan(lab, job)
    procs = {h: subprocess.Popen(lab.host_argv(h, ["-c", DRIVER, str(plan), h, str(SIZE)]),
                                 cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for h in hosts}
    try:
        yield procs
    finally:
        _kill(list(procs.values()))


def _all(procs: dict[str, subprocess.Popen[Any]],
         timeout_s: float = 120.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    return {h: _read_line(p, deadline) for h, p in procs.items()}


def _go(procs: dict[str, subprocess.Popen[Any]]) -> None:
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


@contextlib.contextmanager
def serving(lab: Lab, name: str) -> Iterator[subprocess.Popen[Any]]:
    """``python -m controller serve`` as its own process (output in the run directory)."""
    log = (lab.rundir / f"serve-{name}.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "controller", "--rundir", str(lab.rundir),
                             "serve"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "serving" not in (lab.rundir / f"serve-{name}.log").read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        log.close()


def _job_tables(rundir: Path) -> dict[str, list[Any]]:
    """The entries of the tables a job and the routes use (without direct counters)."""
    return {t: [{k: v for k, v in e.items() if k not in ("packets", "bytes")}
                for e in ctl_json(rundir, "tables", "--table", t)]
            for t in ("job_table", "conn_table", "result_rewrite", "ipv4_lpm")}


def test_two_concurrent_jobs_are_exact(lab: Lab) -> None:
    """Two jobs on one switch at once (4 workers on 2 two-GPU hosts; 2 workers) sum exactly."""
    a = ctl_json(lab.rundir, "job", "create", "ja", "--hosts", "h1,h2", "--slots", "64")
    b = ctl_json(lab.rundir, "job", "create", "jb", "--hosts", "h3,h4", "--slots", "32",
                 "--credits", "4", "--msg-pkts", "8")
    assert (len(a["workers"]), len(b["workers"])) == (4, 2)
    assert all(a["workers"][w["peer"]]["host"] != w["host"] for w in a["workers"])
    runs = []
    for job, hosts, dtype in (("ja", ("h1", "h2"), "float32"), ("jb", ("h3", "h4"), "int32")):
        plan = _plan(lab, job)
        for h in hosts:
            runs.append((job, h, subprocess.Popen(lab.host_argv(h, [
                "-m", "workloads", "allreduce", "--algo", "innetwork", "--job", str(plan),
                "--host", h, "--size", str(SIZE), "--dtype", dtype, "--seed", "7", "--check",
                "--timeout", "90", "--elems", str(SMALL_ELEMS)]), cwd=ROOT,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    try:
        results = {}
        for job, h, proc in runs:
            out, err = proc.communicate(timeout=150)
            assert proc.returncode == 0, err
            results[(job, h)] = [
                json.loads(line) for line in out.splitlines() if line.startswith("{")
            ]
    finally:
        _kill([p for _j, _h, p in runs])
    assert {k: [(r["rank"], r["check"]) for r in v] for k, v in results.items()} == {
        ("ja", "h1"): [(0, True), (1, True)], ("ja", "h2"): [(2, True), (3, True)],
        ("jb", "h3"): [(0, True)], ("jb", "h4"): [(1, True)]}
    counters = {r["job"]: r for r in ctl_json(lab.rundir, "counters")}
    packets = -(-(SIZE + 1) // 32)  # float32 carries one more word: the clamp count
    assert (counters["ja"]["contributions"], counters["ja"]["completions"]) == (
        4 * packets,
        packets,
    )
    packets = -(-SIZE // 32)
    assert (counters["jb"]["contributions"], counters["jb"]["completions"]) == (
        2 * packets,
        packets,
    )
    for name in ("ja", "jb"):
        assert ctl(lab.rundir, "job", "delete", name)[0] == 0
    assert ctl_json(lab.rundir, "tables", "--table", "job_table") == []


def test_switch_restart_mid_job_completes_exactly(lab: Lab) -> None:
    """The switch is killed between two all-reduces of a job and restarted while hosts are
    already sending; serve re-pushes pipeline and state, retransmissions finish exactly."""
    ctl_json(lab.rundir, "job", "create", "jr", "--hosts", "h1,h2")
    try:
        with serving(lab, "restart") as serve, drivers(lab, "jr", ["h1", "h2"]) as procs:
            first = _all(procs)
            assert all(r["exact"] for r in first.values()), first
            before = _job_tables(lab.rundir)
            lab.switch.kill()
            _go(procs)  # the hosts send into a dead switch: only retransmission gets through
            lab.switch.start()
            second = _all(procs)
            assert {h: (r["phase"], r["ranks"], r["exact"]) for h, r in second.items()} == {
                "h1": (2, [0, 1], True), "h2": (2, [2, 3], True)}
            assert serve.poll() is None
            assert _job_tables(lab.rundir) == before
            # serve reports a recovery at its next poll (1 s): the all-reduce can end before
            assert _log_says(lab.rundir / "serve-restart.log", "s1: recovered")
    finally:  # the module's next tests share the switch: no job of this one stays behind
        deleted = ctl(lab.rundir, "job", "delete", "jr")[0] == 0
    assert deleted


def _log_says(path: Path, text: str, timeout_s: float = 20.0) -> bool:
    """Whether ``text`` appears in the file at ``path`` within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_controller_restart_mid_job_does_not_disturb_it(lab: Lab) -> None:
    """A serving controller dies and another starts while a job runs: nothing is rewritten
    and the job's next all-reduce is exact."""
    ctl_json(lab.rundir, "job", "create", "jc", "--hosts", "h3,h4")
    with drivers(lab, "jc", ["h3", "h4"]) as procs:
        with serving(lab, "first") as first_serve:
            assert all(r["exact"] for r in _all(procs).values())
            _go(procs)
            os.killpg(first_serve.pid, signal.SIGKILL)
            first_serve.wait(10)
        reports = ctl_json(lab.rundir, "reconcile")
        assert [(r["pipeline_pushed"], r["inserted"], r["modified"], r["deleted"])
                for r in reports] == [(False, 0, 0, 0)]
        assert [j["name"] for j in ctl_json(lab.rundir, "job", "list")] == ["jc"]
        with serving(lab, "second"):
            second = _all(procs)
    assert {h: (r["phase"], r["exact"]) for h, r in second.items()} == {
        "h3": (2, True), "h4": (2, True)}
    assert ctl(lab.rundir, "job", "delete", "jc")[0] == 0
