"""A process that hangs shows every thread's stack to the one that waits on it (issue 29).

The quick campaign was killed by its test's timeout with nothing to say where it hung; the
stacks came from a dump taken by hand. Now a child that does not finish in time is asked
for its stacks (:mod:`stackdump`, SIGUSR2) before it is killed, and they end up in the
failure; a test that pytest-timeout stops gets its own threads' stacks and its child's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stackdump
from tests.p4runtime_server_fake import free_tcp_port

REPO = Path(__file__).resolve().parent.parent

# Two threads deadlocked on two locks, as two threads importing at once can be.
DEADLOCK = """
import threading, stackdump
stackdump.enable()
first, second = threading.Lock(), threading.Lock()
ready = threading.Barrier(2)
def hold_first_want_second():
    with first:
        ready.wait()
        second.acquire()
def hold_second_want_first():
    with second:
        ready.wait()
        print("deadlocked", flush=True)
        first.acquire()
threading.Thread(target=hold_first_want_second, name="importer-a").start()
hold_second_want_first()
"""


def test_a_hung_childs_stacks_are_in_the_timeout_error() -> None:
    with pytest.raises(stackdump.HungProcess) as info:
        stackdump.run([sys.executable, "-c", DEADLOCK], 2.0, cwd=REPO, capture_output=True,
                      text=True)
    text = str(info.value)
    assert "timed out after 2" in text and "killed" in text
    assert "in hold_first_want_second" in text and "in hold_second_want_first" in text
    assert text.count("hread 0x") == 2  # faulthandler: "(Current) thread 0x...", one each


def test_a_hung_childs_stacks_are_in_the_error_when_its_stderr_goes_to_stdout() -> None:
    """A test reading a child's output as one stream (``stderr=STDOUT``, as the cluster
    test reads ``make run``) got an error ending in an empty "end of its stderr"."""
    with pytest.raises(stackdump.HungProcess) as info:
        stackdump.run([sys.executable, "-c", DEADLOCK], 2.0, cwd=REPO,
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = str(info.value)
    assert "end of its output" in text
    assert "in hold_first_want_second" in text and "in hold_second_want_first" in text


def test_a_child_that_ends_in_time_is_left_alone() -> None:
    res = stackdump.run([sys.executable, "-c", "print('done')"], 30.0, capture_output=True,
                        text=True)
    assert (res.returncode, res.stdout) == (0, "done\n")


def _controller_rundir(tmp_path: Path) -> Path:
    """A run whose one switch nobody serves: ``controller serve`` waits for it for ever."""
    (tmp_path / "topology.json").write_text(json.dumps({
        "schema": 1, "kind": "spineleaf", "target": "softswitch", "links": [], "hosts": [],
        "switches": [{"name": "l1", "device_id": 1, "grpc_addr": f"127.0.0.1:{free_tcp_port()}",
                      "role": "leaf", "index": 1, "target": "softswitch", "cpu_port": None,
                      "ports": [], "subnet": "10.0.1.0/24"}]}))
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("argv, where", [
    (["softswitch", "run", "--no-p4", "--grpc-server-addr", "127.0.0.1:0"],
     "softswitch/switch.py"),
    (["controller", "--rundir", "{rundir}", "serve"], "controller/fabric.py"),
    (["workloads", "allreduce", "--algo", "ring", "--size", "4", "--rank", "0", "--peers",
      "127.0.0.1:{port},127.0.0.1:{port2}", "--timeout", "600"], "workloads/comm.py"),
], ids=["softswitch", "controller", "workloads"])
def test_entry_points_answer_the_dump_signal(tmp_path: Path, argv: list[str],
                                             where: str) -> None:
    """``python -m X`` of the testbed's processes registers the dump: a child that waits
    for ever shows where."""
    fill = {"rundir": str(_controller_rundir(tmp_path)), "port": str(free_tcp_port()),
            "port2": str(free_tcp_port())}
    with pytest.raises(stackdump.HungProcess) as info:
        stackdump.run([sys.executable, "-m", *(a.format(**fill) for a in argv)], 5.0,
                      cwd=REPO, capture_output=True, text=True)
    text = str(info.value)
    assert "most recent call first" in text and where in text, text[-3000:]


INNER_TEST = """
import subprocess, sys, threading, stackdump

CHILD = {child!r}

def test_waits_on_a_hung_child():
    done = threading.Event()
    threading.Thread(target=done.wait, name="helper-thread", daemon=True).start()
    stackdump.run([sys.executable, "-c", CHILD], 600, capture_output=True, text=True)
"""


@pytest.mark.slow
def test_a_test_stopped_by_its_timeout_shows_its_threads_and_its_childs(tmp_path: Path) -> None:
    """With the project's pytest settings, a test that pytest-timeout stops while it waits
    on a hung child prints its own other threads' stacks and the child's, and its cleanup
    runs (the child is gone)."""
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER_TEST.format(child=DEADLOCK))
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir",
         str(REPO), "-p", "no:cacheprovider", "-o", "timeout=5", str(inner)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-4000:]
    assert "Timeout (>5.0s)" in out, out[-4000:]
    assert "Stack of helper-thread" in out, out[-4000:]  # pytest-timeout: the test's threads
    assert "in hold_first_want_second" in out, out[-4000:]  # stackdump: the child's
    assert "in hold_second_want_first" in out, out[-4000:]


def test_a_child_writing_to_a_file_dumps_into_it(tmp_path: Path) -> None:
    """A child whose output goes to a log file (the campaign's ``make run`` s, switch
    processes): the stacks are in the file once the signal was taken and the file is quiet."""
    log = tmp_path / "child.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", DEADLOCK], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "deadlocked" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert stackdump.request_dump(proc.pid)
        stackdump.wait_quiet(lambda: log.stat().st_size)
        text = log.read_text()
        assert "in hold_first_want_second" in text and "in hold_second_want_first" in text
    finally:
        proc.kill()
        proc.wait()
    assert not stackdump.request_dump(proc.pid)  # gone: nothing to ask
