"""The fork server and the switches it forks, as processes (no network: switches without
ports, their gRPC servers on loopback ports found free).

Each test launches its own server (tests/forkserver_helpers.py) and ends every process it
started, also when it fails; readiness is a gRPC port that accepts, never a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from softswitch.device_config import load_device_config, make_device_config
from softswitch.p4info import build_p4info
from tests.forkserver_helpers import Forks
from tests.output_wait import wait_for_text
from tests.p4runtime_fakes import Client
from topo.forkserver import STATUS_UNKNOWN, ForkServer, ForkServerError

PROGRAM = Path(__file__).resolve().parent / "p4" / "port_forward.p4"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The device config of port_forward.p4 (what a controller pushes)."""
    path = tmp_path_factory.mktemp("fkconfig") / "port_forward.device_config.json"
    path.write_bytes(make_device_config(PROGRAM))
    return path


@pytest.fixture
def forks(tmp_path: Path, config: Path) -> Iterator[Forks]:
    """A fork server that preloaded port_forward.p4 (Python engine, log level info)."""
    with Forks(tmp_path, config, ["-L", "info", "--engine", "python"]) as f:
        yield f


def _push(client: Client, config: Path) -> None:
    data = config.read_bytes()
    client.arbitrate()
    client.set_config(device_config=data, p4info=build_p4info(load_device_config(data)))


def _fwd_entry(client: Client, config: Path, port: int) -> p4runtime_pb2.Update:
    info = build_p4info(load_device_config(config.read_bytes()))
    table = next(t for t in info.tables if t.preamble.name.endswith("fwd"))
    action = next(a for a in info.actions if a.preamble.name.endswith("set_port"))
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    entry = update.entity.table_entry
    entry.table_id = table.preamble.id
    entry.match.add(field_id=1).exact.value = port.to_bytes(2, "big")
    entry.action.action.action_id = action.preamble.id
    entry.action.action.params.add(param_id=1, value=(port + 1).to_bytes(2, "big"))
    return update


def _entries(client: Client) -> list[p4runtime_pb2.Entity]:
    entity = p4runtime_pb2.Entity()
    entity.table_entry.SetInParent()
    return client.read(entity)


def test_server_has_one_thread_and_preloaded(forks: Forks) -> None:
    """Ready with the program loaded, and one thread: forking it is safe."""
    assert forks.server.note == "program loaded for every switch (python engine)"
    assert os.listdir(f"/proc/{forks.server.proc.pid}/task") == [str(forks.server.proc.pid)]


def test_forked_switches_are_processes_of_their_own(forks: Forks) -> None:
    """Each switch: its own pid, session and process group, the fork server its parent, its
    own log; killing one's group leaves the other serving."""
    one, two = forks.switch("s1"), forks.switch("s2")
    server = forks.server.proc.pid
    for sw in (one, two):
        pid = sw.proc.pid
        assert os.getsid(pid) == os.getpgid(pid) == pid != server
        with open(f"/proc/{pid}/stat") as fh:
            assert int(fh.read().rsplit(")", 1)[1].split()[1]) == server
        # the gRPC port accepts before the ready line is logged: wait for it
        assert "softswitch ready: device_id=" in wait_for_text(
            sw.log, "softswitch ready: device_id=", 10.0)
        if os.geteuid() == 0:  # PR_SET_MM_MAP needs CAP_CHECKPOINT_RESTORE or root
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                assert fh.read().split(b"\0")[:-1] == [a.encode() for a in sw.argv]
    os.killpg(one.proc.pid, signal.SIGKILL)
    assert one.proc.wait(10) == -signal.SIGKILL
    assert two.proc.poll() is None
    client = Client(two.address)
    try:
        assert client.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=10)
    finally:
        client.close()


def test_pushed_program_is_the_preload_with_state_of_its_own(forks: Forks,
                                                            config: Path) -> None:
    """Both switches take the preloaded pipeline; an entry written to one is not in the
    other; a second push loads afresh (fresh tables)."""
    one, two = forks.switch("s1"), forks.switch("s2")
    clients = [Client(one.address), Client(two.address)]
    try:
        for client in clients:
            _push(client, config)
        clients[0].write(_fwd_entry(clients[0], config, 1))
        assert len(_entries(clients[0])) == 1 and _entries(clients[1]) == []
        _push(clients[0], config)
        assert _entries(clients[0]) == []
    finally:
        for client in clients:
            client.close()
    logs = [sw.log.read_text() for sw in (one, two)]
    assert [text.count("the fork server's preloaded one") for text in logs] == [1, 1], logs


def test_other_options_load_the_pushed_program_afresh(forks: Forks, config: Path) -> None:
    """A switch started with another queue depth than the preload's loads it itself."""
    sw = forks.switch("s1", "--queue-depth", "32")
    client = Client(sw.address)
    try:
        _push(client, config)
    finally:
        client.close()
    text = sw.log.read_text()
    assert "forwarding pipeline installed" in text and "preloaded" not in text, text


def test_switch_that_exits_at_start_reports_its_status_and_reason(forks: Forks) -> None:
    """Its exit status comes from the server, its reason is in its own log."""
    sw = forks.switch("s1", "-i", "1@fk-nosuch", wait=False)
    assert sw.proc.wait(30) == 2
    assert "-i: interface 'fk-nosuch' does not exist" in sw.log.read_text()


def test_refuses_what_is_not_a_switch(forks: Forks) -> None:
    """Only ``python -m softswitch run`` command lines are forked."""
    with pytest.raises(ForkServerError, match="not a built-in switch command line"):
        forks.server.spawn([sys.executable, "-m", "softswitch", "wire", "--log-file", "x"])


def test_switch_outlives_a_dead_server_and_is_still_seen_ending(forks: Forks) -> None:
    """A server SIGKILLed: its switch runs on (own session), a new spawn fails (the node
    starts the switch itself then), and the switch's end is still noticed (status unknown)."""
    sw = forks.switch("s1")
    os.killpg(forks.server.proc.pid, signal.SIGKILL)
    forks.server.proc.wait(10)
    assert sw.proc.poll() is None
    with pytest.raises(ForkServerError):
        forks.server.spawn(sw.argv)
    os.killpg(sw.proc.pid, signal.SIGTERM)
    assert sw.proc.wait(20) == STATUS_UNKNOWN


def test_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    """A server that exits before it is ready, or cannot be run: ForkServerError."""
    bad = ForkServer.launch("/bin/false", tmp_path / "fs.log")
    try:
        with pytest.raises(ForkServerError, match=r"exited \(status 1\); see .*fs.log"):
            bad.wait_ready(30)
    finally:
        bad.close()
    with pytest.raises(ForkServerError, match="cannot run the fork server"):
        ForkServer.launch(str(tmp_path / "no-python"), tmp_path / "fs.log")


def test_program_that_cannot_be_preloaded_is_left_to_the_switches(tmp_path: Path) -> None:
    """A preload that fails (here: no such file) leaves a server that forks all the same;
    each switch loads the program itself and reports what fails."""
    with Forks(tmp_path, tmp_path / "missing.json", ["-L", "info"]) as forks:
        assert forks.server.note is not None and "nothing preloaded" in forks.server.note
        assert forks.switch("s1").proc.poll() is None


def test_closing_ends_the_server(forks: Forks) -> None:
    """The server exits when its socket closes (the network's end, or its process's)."""
    forks.server.close()
    assert forks.server.proc.returncode == 0
