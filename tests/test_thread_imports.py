"""A thread imports nothing new (issue 29).

The test suite hung: the reliability campaign's teardown thread imported ``topo.nodes`` ->
Mininet -> setuptools' distutils hack -> ``pkg_resources`` -> ``heapq`` for the first time
while the main thread imported ``controller.fabric`` -> ``concurrent.futures`` -> ``heapq``;
each held one module's import lock and waited for the other's. The deadlock needs an unlucky
interleaving, so running the campaign and waiting for a hang catches nothing; its cause is
seen every time: a module imported for the first time on a thread. Two checks:

* **At run time** (what really catches it): the thread code paths run in fresh processes
  under :mod:`tests.thread_imports`, a finder first on ``sys.meta_path`` that the import
  system asks about every module not imported yet; a question from a thread other than the
  main one is a first import on a thread, and the test fails naming the module, the thread
  and the line of ours that imported it. This also catches libraries that import inside
  their functions (grpc's channel modules, ``numpy.random``, the idna codec of
  ``socket.create_connection``, the cp437 codec of zipfile, ply's table modules), which no
  reading of our code shows. Covered here without root: the campaign's teardown thread and
  progress bar; switch processes (P4Runtime server threads compiling a pushed program), the
  controller's CLI verbs (thread pools, stream threads), ``controller serve`` across a
  switch restart (recovery threads) and the live view (HTTP, sampler and P4Runtime
  threads); loopback training (rank threads, the data server); ring ranks and the replay's
  communication thread; the benchmark's loopback fabric with in-network channels on
  threads. The quick campaign (tests/test_reliability.py, root) runs with the recorder in
  every process it starts (its cells' threads, the switches, the in-network agents in the
  hosts, the controllers, the teardown's ``make run`` s).
* **In the source**: modules whose code runs on threads import at module load; an import
  inside one of their functions needs an entry in :data:`ALLOWED` with the reason. This
  is the cheap check a reviewer sees first; it misses a lazy import in a library.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.p4runtime_fakes import Client
from tests.p4runtime_server_fake import SwitchProcess, compile_program, free_tcp_port
from tests.thread_imports import AST_PARSE, Finding, read_report, summary, wrap_argv

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "p4src" / "netreduce.p4"

#: Modules with code that runs on a thread (thread targets, what they call, gRPC and HTTP
#: handlers, pool tasks); a directory stands for every module under it.
THREAD_CODE = (
    "reliability/campaign.py", "reliability/cells.py", "reliability/teardown.py",
    "reliability/testbed.py", "reliability/leaks.py", "reliability/illegal.py",
    "reliability/results.py", "reliability/__main__.py",
    "scenarios/runner.py",
    "liveview/server.py", "liveview/sources.py",
    "experiment/session.py", "experiment/lifecycle.py", "experiment/serving.py",
    "controller",
    "workloads",
    "train/dataserver.py", "train/interference.py", "train/trainer.py", "train/exchange.py",
    "train/cache.py", "train/data.py", "train/model.py",
    "softswitch/switch.py", "softswitch/p4runtime", "softswitch/device_config.py",
    "softswitch/pipeline.py", "softswitch/program_cache.py", "softswitch/engine",
    "softswitch/frontend", "softswitch/v1model", "softswitch/ports.py", "softswitch/stats.py",
    "softswitch/pcap.py", "softswitch/p4info.py",
    "bench/loopback_fabric.py", "bench/netreduce_soak.py", "bench/process_rig.py",
)

#: (module, function) -> why its import may stay inside it.
ALLOWED = {
    ("workloads/results.py", "plot"): "matplotlib, for the plot command, on the main thread",
    ("train/data.py", "load_digits_split"): "scikit-learn is optional (a clear message when it "
    "is missing); called on the main thread before any rank starts",
    ("softswitch/program_cache.py", "compile_p4_file"): "the front end imports the program "
    "cache (a cycle); called when a switch starts, on the main thread",
}


def _modules() -> Iterator[Path]:
    for entry in THREAD_CODE:
        path = REPO / entry
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _function_imports(path: Path) -> Iterator[tuple[str, int, str]]:
    """(function, line, statement) of every import inside a function of ``path``."""
    tree = ast.parse(path.read_text(), str(path))

    def walk(node: ast.AST, function: str | None) -> Iterator[tuple[str, int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                name = getattr(child, "name", "<lambda>")
                yield from walk(child, f"{function}.{name}" if function else name)
            elif isinstance(child, ast.Import | ast.ImportFrom) and function is not None:
                yield function.split(".")[0], child.lineno, ast.unparse(child)
            else:
                yield from walk(child, function)

    yield from walk(tree, None)


def test_code_that_runs_on_threads_imports_at_module_load() -> None:
    """No import inside a function of a module whose code runs on threads, unless
    :data:`ALLOWED` says why (the campaign's ``free_port_block`` imported ``topo.nodes``
    inside itself, on the teardown thread)."""
    found = []
    for path in _modules():
        rel = path.relative_to(REPO).as_posix()
        for function, line, text in _function_imports(path):
            if (rel, function) not in ALLOWED:
                found.append(f"{rel}:{line} in {function}(): {text}")
    assert not found, ("imports inside functions of modules that run on threads (import at "
                       "module load, or add the reason to ALLOWED):\n" + "\n".join(found))


def _assert_none(report: Path) -> None:
    findings = read_report(report)
    assert not findings, (
        "modules imported for the first time on a thread (import them at module load, or "
        "before the thread starts), or ast.parse on a thread (not thread-safe on CPython "
        "3.11 before 3.11.8):\n" + summary(findings))


# ----------------------------------------------------------------------------- the recorder


RECORDED = """
import threading
{before}
def use():
    import colorsys
    colorsys.rgb_to_hsv(0.1, 0.2, 0.3)
t = threading.Thread(target=use, name="worker-x")
t.start()
t.join()
"""


PARSING = """
import ast
import threading
def use():
    ast.literal_eval("{{'shape': (3, 4)}}")
ast.literal_eval("1")
t = threading.Thread(target=use, name="parser-x")
t.start()
t.join()
"""


def _record(tmp_path: Path, before: str, program: str = RECORDED) -> list[Finding]:
    script = tmp_path / "prog.py"
    script.write_text(program.format(before=before))
    report = tmp_path / f"report-{len(before)}.jsonl"
    subprocess.run(wrap_argv(report, "prog", []), cwd=REPO, check=True, timeout=60,
                   env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    return read_report(report)


def test_the_recorder_names_a_first_import_on_a_thread(tmp_path: Path) -> None:
    """A thread that imports a module nobody imported yet is reported (module, thread, our
    line); the same thread after the main thread imported the module is not."""
    found = _record(tmp_path, "")
    assert [(f.module, f.thread) for f in found] == [("colorsys", "worker-x")]
    assert found[0].stack[0].endswith(" use") and "prog.py:" in found[0].stack[0]
    assert _record(tmp_path, "import colorsys") == []


def test_the_recorder_names_an_ast_parse_on_a_thread(tmp_path: Path) -> None:
    """``ast.parse`` on a thread is reported (numpy's ``.npy`` header reader is one); the main
    thread's is not."""
    found = _record(tmp_path, "", PARSING)
    assert [(f.module, f.thread) for f in found] == [(AST_PARSE, "parser-x")]
    assert "called ast.parse" in summary(found)


# ----------------------------------------------------------------------------- code paths


def test_campaign_teardown_thread_imports_nothing_new(tmp_path: Path) -> None:
    """The campaign with ``--parallel``: its teardown thread beside the main thread (the
    issue's deadlock), and the progress bar it ticks."""
    report = tmp_path / "report.jsonl"
    res = subprocess.run(
        wrap_argv(report, "tests.thread_scenarios", ["campaign-teardown", str(tmp_path / "runs")]),
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    _assert_none(report)


class _RecordedSwitch(SwitchProcess):
    """A switch process run under the recorder."""

    report: Path = Path()

    def argv(self) -> list[str]:
        return wrap_argv(self.report, "softswitch", super().argv()[3:])


def _one_leaf_topology(switch: SwitchProcess, p4info: Path, config: Path) -> dict[str, object]:
    ports = [{"port": n, "intf": f"l1-eth{n}", "mac": f"00:0b:00:01:00:{n:02x}",
              "peer": f"h{n}", "peer_port": 0, "peer_intf": f"h{n}-eth0"} for n in (1, 2)]
    hosts = [{"name": f"h{n}", "ip": f"10.0.1.{n}", "prefix_len": 24,
              "mac": f"00:00:0a:00:01:{n:02x}", "intf": f"h{n}-eth0", "switch": "l1",
              "switch_port": n, "leaf": 1, "slot": n, "gpus": 1} for n in (1, 2)]
    return {"schema": 1, "kind": "spineleaf", "target": "softswitch",
            "switches": [{"name": "l1", "device_id": switch.device_id,
                          "grpc_addr": switch.address, "role": "leaf", "index": 1,
                          "target": "softswitch", "cpu_port": None, "ports": ports,
                          "subnet": "10.0.1.0/24"}],
            "hosts": hosts, "links": [], "p4info": str(p4info), "device_config": str(config)}


def _read_until(proc: subprocess.Popen[str], text: str) -> str:
    """Reads ``proc``'s output until a line holds ``text`` (returned); fails when it ends
    first."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        if text in line:
            return line
        seen.append(line)
    pytest.fail(f"no {text!r} in the output of {proc.args!r}: {''.join(seen)[-2000:]}")


def _wait_primary(switch: SwitchProcess, election_id: int, timeout_s: float = 120.0) -> None:
    """Until ``switch`` answers an arbitration with ``election_id`` as its primary's (a
    serving controller prints its line before it connects)."""
    deadline = time.monotonic() + timeout_s
    while True:
        probe = Client(switch.address, switch.device_id)
        try:
            answer = probe.arbitrate((0, 1))
        finally:
            probe.close()
        if answer is not None and answer.arbitration.election_id.low == election_id:
            return
        assert time.monotonic() < deadline, f"election id {election_id} never became primary"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(not PROGRAM.is_file(), reason="p4src/netreduce.p4 missing")
def test_switch_controller_and_live_view_threads_import_nothing_new(tmp_path: Path) -> None:
    """A switch without a program gets one pushed (compiled on a gRPC thread), routes, a
    job, reads, loss; ``controller serve`` restores it after a restart; the live view
    serves its page, snapshots and events: switch, controller and live view processes all
    under the recorder."""
    report = tmp_path / "report.jsonl"
    files = compile_program(PROGRAM, tmp_path / "program")
    switch = _RecordedSwitch("l1", 1, free_tcp_port())
    switch.report = report
    rundir = tmp_path / "run"
    rundir.mkdir()
    procs: list[subprocess.Popen[str]] = []

    def controller(*args: str) -> None:
        res = subprocess.run(wrap_argv(report, "controller", ["--rundir", str(rundir), *args]),
                             cwd=REPO, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{args}: {res.stderr[-2000:]}"

    def start(module: str, *args: str) -> subprocess.Popen[str]:
        # unbuffered: its lines are read as they come; wide: rich wraps no line
        env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="500")
        proc = subprocess.Popen(wrap_argv(report, module, ["--rundir", str(rundir), *args]),
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)
        procs.append(proc)
        return proc

    switch.start()
    try:
        (rundir / "topology.json").write_text(json.dumps(_one_leaf_topology(switch, *files)))
        controller("pipeline", "push")
        controller("routes")
        controller("job", "create", "j1", "--hosts", "h1,h2")
        controller("--json", "counters")
        controller("tables")
        controller("fault", "set", "l1", "1", "0.1")
        serve = start("controller", "serve")
        election_id = int(_read_until(serve, "serving").split("election id ")[1].split(";")[0])
        _wait_primary(switch, election_id)
        switch.kill()
        switch.start()
        _read_until(serve, "l1: recovered")
        live = start("liveview", "--interval", "0.2")
        assert live.stdout is not None
        url = live.stdout.readline().split(": ", 1)[1].split()[0]
        for path in ("", "static/live.js", "api/graph", "api/snapshot"):
            with urllib.request.urlopen(url + path, timeout=30) as page:
                assert page.status == 200
        with urllib.request.urlopen(url + "events", timeout=30) as events:
            assert events.readline().startswith(b"data: ")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
        switch.stop()
    _assert_none(report)


@pytest.mark.slow
def test_training_ranks_on_threads_import_nothing_new(tmp_path: Path) -> None:
    """Loopback training: ranks are threads (they dial each other, fetch and decode shards
    from the in-process data server's thread, run the collectives)."""
    report = tmp_path / "report.jsonl"
    res = subprocess.run(
        wrap_argv(report, "train", ["compare", "--collectives", "fp32-ring,mstopk,inswitch",
                                    "--epochs", "1", "--workers", "2",
                                    "--interference-repeats", "1",
                                    "--outdir", str(tmp_path / "out")]),
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    _assert_none(report)


def test_workload_processes_import_nothing_new_on_their_threads(tmp_path: Path) -> None:
    """``python -m workloads`` ring ranks on loopback: reader threads, and the replay's
    communication thread."""
    report = tmp_path / "report.jsonl"
    for command in (["allreduce", "--size", "4096", "--check"],
                    ["replay", "--model", "resnet50", "--scale", "1000", "--iters", "2"]):
        peers = ",".join(f"127.0.0.1:{free_tcp_port()}" for _ in range(2))
        procs = [subprocess.Popen(
            wrap_argv(report, "workloads", [command[0], "--algo", "ring", "--rank", str(r),
                                            "--peers", peers, "--timeout", "60",
                                            *command[1:]]),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(2)]
        for proc in procs:
            try:
                _, err = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
            assert proc.returncode == 0, err[-2000:]
    _assert_none(report)


def test_in_network_channels_on_threads_import_nothing_new(tmp_path: Path) -> None:
    """The benchmark's in-process spine-leaf: the loopback fabric's thread runs three
    pipelines, four workers' aggregation channels and RoCE endpoints run on threads."""
    report = tmp_path / "report.jsonl"
    res = subprocess.run(wrap_argv(report, "bench.netreduce_soak", ["--count", "5"]), cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    _assert_none(report)
