"""The same programs on p4c, where installed (skipped with the reason where it is not).

These tests hold the built-in target's inputs to the real toolchain: every P4 program of the
project must compile with p4c for BMv2. ``make run`` on BMv2 is tests/test_bmv2_run.py, every
controller verb on BMv2 tests/test_bmv2_controller.py (docs/setup.md: how to install them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns import ip

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(
    [REPO / "p4src" / "netreduce.p4", *(REPO / "tests" / "p4").glob("*.p4")],
    key=lambda p: p.name,
)

needs_p4c = pytest.mark.skipif(
    shutil.which("p4c") is None, reason="p4c is not installed on this machine"
)
needs_bmv2 = pytest.mark.skipif(
    shutil.which("simple_switch_grpc") is None or shutil.which("p4c") is None,
    reason="BMv2 (simple_switch_grpc) and p4c are not both installed on this machine",
)


@needs_p4c
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_p4c_compiles_program_for_bmv2(program: Path, tmp_path: Path) -> None:
    """p4c accepts the program for BMv2 (v1model), as the built-in target does."""
    proc = subprocess.run(
        ["p4c", "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
         "-o", str(tmp_path), "--p4runtime-files", str(tmp_path / "p4info.txtpb"), str(program)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p4info.txtpb").is_file()


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
