"""`python -m train compare --rundir` with its ranks in real network namespaces (needs root;
the rest of the command line is tests/test_train_cli.py, which runs beside the network tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_train_cli import _fake_rundir
from train.cli import main


@pytest.mark.root
@pytest.mark.slow
def test_compare_in_network_namespaces(tmp_path: Path) -> None:
    """--rundir starts ranks and the data server inside the hosts' namespaces (nsenter)."""
    import subprocess
    import uuid

    from tests.netns import can_use_netns, ip, topology

    if not can_use_netns():
        pytest.skip("needs root and iproute2")
    bridge = f"br{uuid.uuid4().hex[:6]}"
    sleepers: list[subprocess.Popen[bytes]] = []
    with topology(2) as net:
        try:
            ip("link", "add", bridge, "type", "bridge")
            ip("link", "set", bridge, "up")
            for i, link in enumerate(net.links, start=1):
                ip("link", "set", link.switch_end, "master", bridge)
                ip("-n", link.netns, "addr", "add", f"10.77.0.{i}/24", "dev", "eth0")
                sleepers.append(subprocess.Popen(["ip", "netns", "exec", link.netns,
                                                  "sleep", "120"]))
            run = tmp_path / "run"
            _fake_rundir(run)
            for i, p in enumerate(sleepers, start=1):  # the namespaces' IPs and "shells"
                text = (run / "topology.json").read_text().replace(f"10.0.1.{i}", f"10.77.0.{i}")
                (run / "topology.json").write_text(text)
                text = (run / "pids.json").read_text().replace(str(1000 + i), str(p.pid))
                (run / "pids.json").write_text(text)
            code = main(["compare", "--collectives", "hybrid", "--epochs", "1",
                         "--rundir", str(run), "--timeout", "90",
                         "--outdir", str(tmp_path / "out")])
        finally:
            for p in sleepers:
                p.kill()
                p.wait(10)
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)
    assert code == 0
    doc = json.loads((tmp_path / "out" / "hybrid.json").read_text())
    assert doc["transport"] == "mininet" and doc["models_identical_on_all_ranks"]
    assert doc["config"]["workers"] == 4
    assert doc["config"]["exchange"]["ranks_per_host"] == 2
