"""What a link between machines costs (``make run servers=...``, topo/cluster.py): the
throughput and round trip of Mininet's ssh Ethernet tunnel against the direct path it runs
over.

Two namespaced machines (tests/machines.py: an sshd each, joined by a bridge) stand for two
servers. The direct path is their own network (veth and bridge); the tunnel is what a
crossing link is: tap devices at both ends joined by ``ssh -o Tunnel=Ethernet -w``. Each is
measured the same way: one TCP stream for a few seconds (receiver's bytes / time) and the
median round trip of 200 small UDP echoes one at a time. The added latency per crossing is
half the round trip's difference (one way). Root and openssh-server are needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any

from bench.harness import BenchSkipped

PORT = 5601
ECHOES = 200
TAP_NET = "192.168.77"

SINK = """
import socket, sys, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(1)
echo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); echo.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
import threading
def serve_echo():
    while True:
        data, peer = echo.recvfrom(2048)
        echo.sendto(data, peer)
threading.Thread(target=serve_echo, daemon=True).start()
conn, _ = srv.accept(); total = 0; t0 = None
while True:
    data = conn.recv(1 << 16)
    if not data:
        break
    if t0 is None:
        t0 = time.monotonic()
    total += len(data)
print(total, time.monotonic() - t0, flush=True)
"""

SOURCE = """
import socket, statistics, sys, time
host, port, seconds, echoes = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1.0)
rtts = []
for i in range(echoes):
    t = time.perf_counter(); u.sendto(b"x" * 64, (host, port))
    try:
        u.recvfrom(2048)
    except socket.timeout:
        continue
    rtts.append(time.perf_counter() - t)
s = socket.create_connection((host, port)); buf = b"\\0" * (1 << 16)
end = time.monotonic() + seconds
while time.monotonic() < end:
    s.sendall(buf)
s.close()
print(statistics.median(rtts) if rtts else -1, len(rtts), flush=True)
"""


def _measure(src_ns: str, dst_ns: str, dst_addr: str, seconds: float
             ) -> tuple[float, float]:
    """(Mbit/s of one TCP stream, median UDP round trip in s) from src_ns to dst_addr."""
    sink = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c", SINK,
                             dst_addr, str(PORT)], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        if sink.stdout.readline().strip() != "ready":
            raise RuntimeError("the sink did not start")
        out = subprocess.run(["ip", "netns", "exec", src_ns, sys.executable, "-c", SOURCE,
                              dst_addr, str(PORT), str(seconds), str(ECHOES)],
                             capture_output=True, text=True, timeout=seconds + 60, check=True)
        rtt = float(out.stdout.split()[0])
        total, took = sink.communicate(timeout=30)[0].split()
        return int(total) * 8 / float(took) / 1e6, rtt
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()


def _tunnel(lab: Any) -> subprocess.Popen[bytes]:
    """Machine a's ssh tunnel to b, as topo.cluster.ClusterLink makes it (taps addressed
    here so that a socket can use them)."""
    a, b = lab.names
    for ns in (a, b):
        subprocess.run(["ip", "-n", ns, "tuntap", "add", "dev", "tap9", "mode", "tap"],
                       check=True)
    tunnel = subprocess.Popen(
        ["ip", "netns", "exec", a, "ssh", "-F", str(lab.ssh_config), "-o", "BatchMode=yes",
         "-o", "ControlPath=none", "-o", "Tunnel=Ethernet", "-w", "9:9", lab.addresses[1],
         "echo @; exec cat >/dev/null"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert tunnel.stdout is not None
    if tunnel.stdout.read(1) != b"@":
        raise RuntimeError("the tunnel did not come up")
    for i, ns in enumerate((a, b), start=1):
        subprocess.run(["ip", "-n", ns, "addr", "add", f"{TAP_NET}.{i}/24", "dev", "tap9"],
                       check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "tap9", "up"], check=True)
    deadline = time.monotonic() + 10
    while b"LOWER_UP" not in subprocess.run(["ip", "-n", b, "link", "show", "tap9"],
                                            capture_output=True).stdout:
        if time.monotonic() > deadline:
            raise RuntimeError("tap9 has no carrier")
        time.sleep(0.05)
    return tunnel


def run(seconds: float = 5.0) -> list[dict[str, Any]]:
    """Throughput and round trip: direct path vs ssh tunnel; the added one-way latency."""
    if os.geteuid() != 0:
        raise BenchSkipped("needs root (network namespaces)")
    if shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"):
        raise BenchSkipped("openssh-server is not installed (make setup installs it)")
    from tests.machines import machines

    with machines(2, tag="clbt") as lab:
        a, b = lab.names
        direct_mbit, direct_rtt = _measure(a, b, lab.addresses[1], seconds)
        tunnel = _tunnel(lab)
        try:
            tun_mbit, tun_rtt = _measure(a, b, f"{TAP_NET}.2", seconds)
        finally:
            tunnel.kill()
            tunnel.wait()
    load = os.getloadavg()[0]
    note = f"2 namespaced machines on one host, one TCP stream, load {load:.1f}"
    return [
        {"name": "tunnel", "metric": "direct path throughput", "value": direct_mbit,
         "unit": "Mbit/s", "notes": note},
        {"name": "tunnel", "metric": "ssh tunnel throughput", "value": tun_mbit,
         "unit": "Mbit/s", "notes": "Tunnel=Ethernet, one ssh connection per link"},
        {"name": "tunnel", "metric": "direct path round trip", "value": direct_rtt * 1e6,
         "unit": "us", "notes": f"median of {ECHOES} UDP echoes of 64 B"},
        {"name": "tunnel", "metric": "ssh tunnel round trip", "value": tun_rtt * 1e6,
         "unit": "us", "notes": f"median of {ECHOES} UDP echoes of 64 B"},
        {"name": "tunnel", "metric": "added one-way latency per crossing link",
         "value": (tun_rtt - direct_rtt) / 2 * 1e6, "unit": "us",
         "notes": "half the round trips' difference"},
    ]
