"""Packets/s and latency through a running switch process between two network namespaces.

``python -m bench.process_rig [--seconds S] [--size BYTES]`` (root) builds
``h1 --veth-- switch --veth-- h2``, starts ``python -m softswitch run`` with the IPv4
forwarding program tests/p4/ipv4_forward.p4 (LPM, MAC rewrite, TTL, checksum verify and
update), installs the two /32 routes over P4Runtime, and measures two things with raw
sockets in the namespaces (IPv4/UDP frames from h1 to h2):

* throughput: h1 sends as fast as it can for S seconds; h2 counts what arrives
  (packets/s = received / (last arrival - first arrival));
* latency: h1 sends paced probes (1 per ms) carrying a CLOCK_MONOTONIC time stamp, which
  all namespaces share; h2 computes arrival - departure, reported as p50/p99/mean in µs.

:func:`run` returns a flat dict (``pps``, ``sent``, ``received``, ``lost``, ``p50_us``,
``p99_us``, ``mean_us``) that ``bench/bench_process.py`` turns into report rows.
The namespaces and veths are :class:`experiment.netns.HostsAroundSwitch`'s; everything the
run creates (namespaces, veths, the processes, temp files) is removed on exit, also when it
fails.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import queue
import re
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from experiment.netns import HostsAroundSwitch, stop_process
from p4schema import P4InfoIndex
from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info

log = logging.getLogger(__name__)

READY = re.compile(r"softswitch ready: .*grpc=(\S+):(\d+)")
REPO_ROOT = Path(__file__).resolve().parent.parent

PROGRAM = REPO_ROOT / "tests" / "p4" / "ipv4_forward.p4"  # the same one bench_engine runs
H1_MAC, H2_MAC, SWITCH_MAC = "020000000001", "020000000002", "02aa00000001"
H1_IP, H2_IP = "10.0.1.1", "10.0.2.2"
UDP_PORT = 4791


def ipv4_udp_header(size: int) -> bytes:
    """Ethernet/IPv4/UDP headers (42 bytes) of an h1 -> h2 frame of ``size`` bytes, with a
    correct IPv4 checksum (the program verifies it) and UDP checksum 0."""
    total = size - 14
    ip = bytearray(struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 17, 0,
        ipaddress.IPv4Address(H1_IP).packed, ipaddress.IPv4Address(H2_IP).packed,
    ))
    acc = sum(struct.unpack("!10H", bytes(ip)))
    while acc >> 16:
        acc = (acc & 0xFFFF) + (acc >> 16)
    ip[10:12] = struct.pack("!H", ~acc & 0xFFFF)
    eth = bytes.fromhex(SWITCH_MAC + H1_MAC) + b"\x08\x00"
    udp = struct.pack("!HHHH", UDP_PORT, UDP_PORT, total - 20, 0)
    return eth + bytes(ip) + udp


def install_routes(address: str, program: Path = PROGRAM) -> None:
    """Become primary over P4Runtime and add the /32 routes h1 <-> h2 (ports 1 and 2)."""
    index = P4InfoIndex(build_p4info(compile_file(str(program))))
    table = index.table("MyIngress.ipv4_lpm")
    action = index.action("MyIngress.ipv4_forward")
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        stream = stub.StreamChannel(iter(requests.get, None))
        arb = p4runtime_pb2.StreamMessageRequest()
        arb.arbitration.device_id = 0
        arb.arbitration.election_id.low = 1
        requests.put(arb)
        reply = next(stream)
        if reply.arbitration.status.code != 0:
            raise RuntimeError(f"P4Runtime arbitration failed: {reply.arbitration.status}")
        write = p4runtime_pb2.WriteRequest(device_id=0)
        write.election_id.low = 1
        for ip, mac, port in ((H2_IP, H2_MAC, 2), (H1_IP, H1_MAC, 1)):
            u = write.updates.add(type=p4runtime_pb2.Update.INSERT)
            te = u.entity.table_entry
            te.table_id = table.preamble.id
            m = te.match.add(field_id=1)
            m.lpm.value = ipaddress.IPv4Address(ip).packed
            m.lpm.prefix_len = 32
            te.action.action.action_id = action.preamble.id
            te.action.action.params.add(param_id=1, value=bytes.fromhex(mac))
            te.action.action.params.add(param_id=2, value=port.to_bytes(2, "big"))
        stub.Write(write, timeout=30)
        requests.put(None)
        stream.cancel()


# Sender: argv = mode ("flood" | "paced"), seconds or count, frame size, headers (hex).
# Prints packets sent.
SENDER = r"""
import socket, struct, sys, time
mode, amount, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
head = bytes.fromhex(sys.argv[4])
pad = bytes(max(0, size - len(head) - 12))
pack, now, send = struct.Struct("!IQ").pack, time.monotonic_ns, s.send
seq = 0
if mode == "flood":
    end = now() + int(amount * 1e9)
    while now() < end:
        for _ in range(64):
            try:
                send(head + pack(seq, now()) + pad)
                seq += 1
            except OSError:
                time.sleep(0.0001)
else:
    gap = 1_000_000
    nxt = now()
    for _ in range(int(amount)):
        left = nxt - now()
        if left > 200_000:  # sleep most of the gap: a spinning sender would steal a core
            time.sleep((left - 150_000) / 1e9)
        while now() < nxt:
            pass
        send(head + pack(seq, now()) + pad)
        seq += 1
        nxt += gap
print(seq, flush=True)
"""

# Receiver: argv = idle timeout s, overall limit s. Prints JSON {count, first, last, lat}.
RECEIVER = r"""
import json, socket, struct, sys, time
idle, limit = float(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind(("eth0", 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
unpack, now = struct.Struct("!IQ").unpack_from, time.monotonic_ns
count, first, last, lat = 0, 0, 0, []
print("ready", flush=True)
end = time.monotonic() + limit
s.settimeout(limit)
while time.monotonic() < end:
    try:
        data, addr = s.recvfrom(65535)
    except socket.timeout:
        break
    if addr[2] == socket.PACKET_OUTGOING or len(data) < 54 or data[36:38] != b"\x12\xb7":
        continue
    if data[22] != 63:  # the switch routed it: TTL 64 - 1
        continue
    t = now()
    seq, sent = unpack(data, 42)
    if count == 0:
        first = t
        s.settimeout(idle)
    count += 1
    last = t
    lat.append(t - sent)
print(json.dumps({"count": count, "first": first, "last": last, "lat": lat}), flush=True)
"""


def _start_switch(rig: HostsAroundSwitch, program: Path, workdir: Path
                  ) -> tuple[subprocess.Popen[str], str]:
    """The switch on the rig's switch ports, here (SIGTERM and 30 s to exit when the rig
    stops); returns it and its P4Runtime address once it says it is ready."""
    cmd = [sys.executable, "-m", "softswitch", "run", str(program),
           "--grpc-server-addr", "127.0.0.1:0", "--log-file", str(workdir / "switch.log"),
           "-L", "warn"]
    for n, iface in enumerate(rig.switch_ports, 1):
        cmd += ["-i", f"{n}@{iface}"]
    proc = rig.popen(None, cmd, grace_s=30.0)
    ready = threading.Event()
    address: list[str] = []

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = READY.search(line)
            if m:
                address.append(f"{m.group(1)}:{m.group(2)}")
                ready.set()

    threading.Thread(target=watch, daemon=True).start()
    if not ready.wait(120):
        stop_process(proc)
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"switch did not become ready: {err.strip()[-500:]}")
    return proc, address[0]


def _phase(rig: HostsAroundSwitch, mode: str, amount: float, size: int, idle: float,
           limit: float) -> tuple[int, dict[str, Any]]:
    h1, h2 = rig.host_namespaces
    rx = rig.python(h2, RECEIVER, str(idle), str(limit))
    assert rx.stdout is not None
    if rx.stdout.readline().strip() != "ready":
        raise RuntimeError(f"receiver failed: {rx.stderr.read() if rx.stderr else ''}")
    tx = rig.python(h1, SENDER, mode, str(amount), str(size), ipv4_udp_header(size).hex())
    out, err = tx.communicate(timeout=limit + 30)
    if tx.returncode != 0:
        raise RuntimeError(f"sender failed: {err.strip()}")
    rx_out, rx_err = rx.communicate(timeout=limit + 30)
    if rx.returncode != 0:
        raise RuntimeError(f"receiver failed: {rx_err.strip()}")
    return int(out.strip() or 0), json.loads(rx_out.strip().splitlines()[-1])


def _percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[idx])


def run(seconds: float = 3.0, size: int = 128, probes: int = 500) -> dict[str, float]:
    """Measure throughput (``seconds`` of flooding) and latency (``probes`` paced probes)."""
    if os.geteuid() != 0:
        raise PermissionError("the process benchmark needs root (network namespaces)")
    with tempfile.TemporaryDirectory(prefix="softswitch-bench-") as tmp, \
            HostsAroundSwitch(hosts=2) as rig:
        workdir = Path(tmp)
        if not PROGRAM.exists():
            raise RuntimeError(f"{PROGRAM} does not exist")
        _switch, address = _start_switch(rig, PROGRAM, workdir)
        install_routes(address)
        # warm-up, then throughput
        _phase(rig, "paced", 20, size, idle=1.0, limit=10)
        sent, rx = _phase(rig, "flood", seconds, size, idle=2.0, limit=seconds + 30)
        span_s = (rx["last"] - rx["first"]) / 1e9
        pps = rx["count"] / span_s if span_s > 0 else 0.0
        _, probe_rx = _phase(rig, "paced", probes, size, idle=2.0, limit=probes / 1000 + 30)
        lat = sorted(probe_rx["lat"])
    return {
        "pps": round(pps, 1),
        "sent": sent,
        "received": rx["count"],
        "lost": max(0, sent - rx["count"]),
        "p50_us": round(_percentile(lat, 0.50) / 1000, 1),
        "p99_us": round(_percentile(lat, 0.99) / 1000, 1),
        "mean_us": round(sum(lat) / len(lat) / 1000, 1) if lat else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    """CLI: print the measurement as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.process_rig",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="flooding time")
    parser.add_argument("--size", type=int, default=128, help="frame size in bytes")
    parser.add_argument("--probes", type=int, default=500, help="paced latency probes")
    args = parser.parse_args(argv)
    try:
        result = run(args.seconds, args.size, args.probes)
    except (PermissionError, RuntimeError) as exc:
        print(f"bench_process: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
