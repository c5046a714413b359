"""BMv2's ports in a throwaway network namespace (needs root; p4c's compiles of the project's
programs are tests/test_bmv2_target.py, which runs beside the network tests)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns import ip

pytestmark = pytest.mark.netns

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ethtool") is None,
                    reason="needs root (a network namespace) and ethtool")
def test_bmv2_ports_get_offloads_off_so_libpcap_rings_hold_more_than_8_packets() -> None:
    """BMv2 reads its ports through libpcap, whose receive ring held 8 frames on a veth with
    its default offloads (TSO, GSO on): the kernel dropped hundreds of packets per make run
    (docs/benchmarks.md). A BMv2 switch turns them off on each port before it starts; this
    checks, on a veth in a throwaway namespace, that the helper it uses does."""
    netns = f"bo{os.getpid() % 100000}"
    ip("netns", "add", netns)
    try:
        ip("-n", netns, "link", "add", "bo0", "type", "veth", "peer", "name", "bo1")
        code = ("import json\n"
                "from topo.nodes import offloads_on, pcap_ring_offloads_off\n"
                "before = offloads_on('bo0')\n"
                "print(json.dumps([before, pcap_ring_offloads_off('bo0'), offloads_on('bo0'),"
                " offloads_on('bo1')]))\n")
        proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", code],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        before, ok, after, peer = json.loads(proc.stdout)
        assert "gso" in before and ok is True and after == [], proc.stdout
        assert "gso" in peer, "the other end of the link keeps its offloads"
    finally:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=30)
