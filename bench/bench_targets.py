"""Packets/s of the built-in switch process and BMv2's simple_switch_grpc, side by side.

Same program (tests/p4/counters_registers.p4: a port-forwarding table with a direct
counter, an indexed counter and a register updated per packet), same traffic (frames of
``FRAME_SIZES`` bytes from h1 to h2 as fast as a raw socket sends them with sendmmsg for
``seconds``, counted by h2's interface counter: no receiving process competes with the
switch for the 2 cores), same set-up: a private network namespace with
veth pairs s1/h1 and s2/h2, the switch on s1/s2, the pipeline and the entry
``ingress_port 1 -> forward(2)`` written over P4Runtime by a small client inside the
namespace. Targets: the built-in switch on the Python engine and Python loop (the default),
on the C engine with the Python loop (``--engine c --io python``), on the C engine with
the C packet loop (``--engine c``: receive and transmit rings), the same sending with
sendmmsg instead of the transmit ring (``SOFTSWITCH_TX_RING=off``), and BMv2. Runs
alternate target by target and each figure is the median; BMv2 rows appear where p4c and
simple_switch_grpc are installed.

Besides packets/s, each run reads the switch process's CPU time (all its threads, its CPU
clock: ``topo.measure.process_cpu_seconds``) over the flood: CPU per forwarded packet,
and its inverse, packets per CPU-second, the switch's forwarding capacity. The C loop
forwards nearly all the sender can offer on the 2 shared cores, so its packets/s say how
fast the sender is; its capacity says how fast the switch is.
The namespace is :class:`experiment.netns.SwitchNamespace`. Needs root. Everything it
creates is removed on exit, also when it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped
from experiment.netns import SwitchNamespace
from topo.measure import process_cpu_seconds

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "p4" / "counters_registers.p4"
FRAME_SIZES = (64, 128)
ROUNDS = 3
DEFAULT_SECONDS = 3.0
GRPC = "127.0.0.1:50071"

# In the namespace: P4Runtime primary, SetForwardingPipelineConfig, entry 1 -> 2.
CONFIGURE = r"""
import sys
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from controller.p4client import P4Client
addr, p4info_path, config_path = sys.argv[1:4]
info = text_format.Parse(open(p4info_path).read(), p4info_pb2.P4Info())
c = P4Client(addr, 0, 1, timeout_s=30)
c.connect_with_retry(60)
c.set_pipeline(info, open(config_path, "rb").read())
t = next(x for x in info.tables if x.preamble.name == "MyIngress.fwd")
a = next(x for x in info.actions if x.preamble.name == "MyIngress.forward")
u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
te = u.entity.table_entry
te.table_id = t.preamble.id
te.match.add(field_id=t.match_fields[0].id).exact.value = b"\x01"
te.action.action.action_id = a.preamble.id
te.action.action.params.add(param_id=a.params[0].id, value=b"\x02")
c.write([u])
c.close()
print("configured", flush=True)
"""

# Batched raw-socket I/O for the traffic ends (ctypes, so the sender and receiver are
# not the bottleneck of a switch that forwards a few hundred thousand packets/s).
MMSG = r"""
import ctypes, ctypes.util, socket
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class Hdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(Iov)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class Mmsg(ctypes.Structure):
    _fields_ = [("hdr", Hdr), ("len", ctypes.c_uint)]
B = 64
def msgs(bufs):
    m, iov = (Mmsg * B)(), (Iov * B)()
    for i, b in enumerate(bufs):
        iov[i].base, iov[i].len = ctypes.addressof(b), len(b)
        m[i].hdr.iov, m[i].hdr.iovlen = ctypes.pointer(iov[i]), 1
    return m
"""

# In the namespace: the count of frames h2 received, read from its interface counter (prints
# "ready", then JSON {count, first, last}: frames counted and when the count first and last
# moved). No socket reads them: a receiving process took CPU from the switch under test
# on the 2 shared cores (the Python path forwarded 43k pkt/s with one, 67k without).
RECEIVE = r"""
import json, sys, time
path = "/sys/class/net/h2/statistics/rx_packets"
def read():
    with open(path) as f:
        return int(f.read())
prev = read()
print("ready", flush=True)
deadline = time.monotonic() + float(sys.argv[1]) + 10
first = last = 0.0
start = None  # the count when it first moved: frames from then to the last move
while time.monotonic() < deadline:
    time.sleep(0.002)
    now, t = read(), time.monotonic()
    if now != prev:
        if start is None:
            start, first = now, t
        prev, last = now, t
        deadline = t + 1.0
count = prev - start if start is not None else 0
print(json.dumps({"count": count, "first": first, "last": last}), flush=True)
"""

# In the namespace: flood h1 with one frame of N bytes for S seconds; prints frames sent.
SEND = MMSG + r"""
import sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("h1", 0))
frame = bytes.fromhex("000000000002000000000001" "9000") + bytes(int(sys.argv[2]) - 14)
m = msgs([ctypes.create_string_buffer(frame, len(frame)) for _ in range(B)])
end, n, fd = time.monotonic() + float(sys.argv[1]), 0, s.fileno()
while time.monotonic() < end:
    r = libc.sendmmsg(fd, m, B, 0)
    if r > 0:
        n += r
    else:
        time.sleep(0.0001)
print(n, flush=True)
"""

TARGETS = {  # name: (label, extra options of softswitch run)
    "softswitch": ("built-in switch process (Python engine, Python loop)", []),
    "softswitch-c-pyio": ("built-in switch process (C engine, Python loop)",
                          ["--engine", "c", "--io", "python"]),
    "softswitch-c": ("built-in switch process (C engine, C packet loop)", ["--engine", "c"]),
    "softswitch-c-mmsg": ("built-in switch process (C engine, C packet loop, sendmmsg)",
                          ["--engine", "c"]),
    "bmv2": ("simple_switch_grpc (BMv2)", []),
}
TARGET_ENV = {"softswitch-c-mmsg": {"SOFTSWITCH_TX_RING": "off"}}  # no PACKET_TX_RING


def _run(cmd: list[str], timeout: float = 120) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])}...: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout


def _switch_argv(target: str, workdir: Path) -> list[str]:
    ports = ["-i", "1@s1", "-i", "2@s2"]
    if target.startswith("softswitch"):
        return [sys.executable, "-m", "softswitch", "run", "--no-p4", *ports,
                "--grpc-server-addr", GRPC, "--log-file", str(workdir / "switch.log"), "-L", "warn",
                *TARGETS[target][1]]
    return ["simple_switch_grpc", "--no-p4", *ports, "--log-level", "warn",
            "--", "--grpc-server-addr", GRPC]


def _artifacts(target: str, workdir: Path) -> tuple[Path, Path]:
    """(P4Info text, device config) for the target (compiled once per run)."""
    if target.startswith("softswitch"):
        info = workdir / "ours.p4info.txtpb"
        config = workdir / "ours.config"
        if not config.exists():
            _run([sys.executable, "-m", "softswitch", "compile", str(PROGRAM), "--p4info",
                  str(info), "--device-config", str(config)])
        return info, config
    out = workdir / "p4c"
    if (out / f"{PROGRAM.stem}.json").exists():
        return out / "p4info.txtpb", out / f"{PROGRAM.stem}.json"
    _run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out), "--p4runtime-files",
          str(out / "p4info.txtpb"), str(PROGRAM)], timeout=600)
    return out / "p4info.txtpb", out / f"{PROGRAM.stem}.json"


@dataclass(frozen=True)
class Measurement:
    """One flood through one target: packets/s forwarded (counted at h2) and offered (what
    the sender got into h1: whether it, not the switch, was the limit), and the switch
    process's CPU seconds per forwarded packet."""

    pps: float
    offered: float
    cpu_per_packet: float


def _cpu(pid: int) -> float:
    """The switch's CPU seconds so far (all threads; topo.measure's clock)."""
    seconds = process_cpu_seconds(pid)
    if seconds is None:
        raise RuntimeError(f"switch process {pid} is gone")
    return seconds


def measure(target: str, seconds: float, workdir: Path, size: int = 128) -> Measurement:
    """One flood through one target (fresh namespace and switch)."""
    info, config = _artifacts(target, workdir)
    with SwitchNamespace(ports=2) as rig:
        ex = rig.exec_argv(rig.name)
        # stopped with SIGTERM and 20 s to exit, then SIGKILL, when the rig stops
        # `ip netns exec` execs the switch: the process started is the switch itself
        switch = rig.popen(rig.name, _switch_argv(target, workdir), grace_s=20.0,
                           stdout=subprocess.DEVNULL,
                           env={**os.environ, **TARGET_ENV.get(target, {})})
        _run([*ex, sys.executable, "-c", CONFIGURE, GRPC, str(info), str(config)], timeout=180)
        rx = rig.python(rig.name, RECEIVE, str(seconds))
        assert rx.stdout is not None
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("receiver failed to start")
        cpu_before = _cpu(switch.pid)
        sent = int(_run([*ex, sys.executable, "-c", SEND, str(seconds), str(size)],
                        timeout=seconds + 60).split()[-1])
        result = json.loads(rx.communicate(timeout=seconds + 60)[0].strip().splitlines()[-1])
        cpu = _cpu(switch.pid) - cpu_before  # the flood and its tail
    span = result["last"] - result["first"]
    if result["count"] < 2 or span <= 0:
        raise RuntimeError(f"{target}: no frames forwarded ({result})")
    return Measurement(result["count"] / span, sent / seconds, cpu / result["count"])


def run(seconds: float = DEFAULT_SECONDS) -> list[dict[str, Any]]:
    if os.geteuid() != 0:
        raise BenchSkipped("needs root for network namespaces")
    targets = [t for t in TARGETS if t != "bmv2"]
    if shutil.which("simple_switch_grpc") and shutil.which("p4c"):
        targets.append("bmv2")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        for size in FRAME_SIZES:
            runs: dict[str, list[Measurement]] = {t: [] for t in targets}
            for _ in range(ROUNDS):
                for t in targets:
                    runs[t].append(measure(t, seconds, Path(tmp), size))
                    time.sleep(0.5)
            rows += size_rows(size, seconds, runs)
    return rows


def size_rows(size: int, seconds: float, runs: dict[str, list[Measurement]]
              ) -> list[dict[str, Any]]:
    """The rows of one frame size: each target's packets/s and CPU per packet (medians),
    the C loop's offered load, and the ratios between targets."""
    notes = (f"{PROGRAM.name} (fwd table + counters + register), {size} B frames flooded "
             f"for {seconds:g} s with sendmmsg, median of {ROUNDS} alternating runs; shared "
             "2-core machine")
    cpu_notes = (f"{notes}; the switch process's CPU time (all threads, its CPU clock) over "
                 "the flood divided by the frames forwarded")
    med = {t: statistics.median(m.pps for m in v) for t, v in runs.items()}
    cpu = {t: statistics.median(m.cpu_per_packet for m in v) for t, v in runs.items()}
    rows: list[dict[str, Any]] = [
        {"name": f"{TARGETS[t][0]}, {size} B", "metric": "throughput", "value": v,
         "unit": "pkt/s", "notes": notes} for t, v in med.items()]
    rows += [{"name": f"{TARGETS[t][0]}, {size} B", "metric": "switch CPU per packet",
              "value": c * 1e6, "unit": "us", "notes": cpu_notes} for t, c in cpu.items()]
    rows.append({"name": f"{TARGETS['softswitch-c'][0]}, {size} B", "metric": "offered load",
                 "value": statistics.median(m.offered for m in runs["softswitch-c"]),
                 "unit": "pkt/s",
                 "notes": "what the sender got into h1 while the C loop ran (the sender and "
                 "the switch share the 2 cores)"})
    base = med["softswitch"]
    rows.append({"name": f"C packet loop / Python path, {size} B", "metric": "throughput ratio",
                 "value": med["softswitch-c"] / base, "unit": "x", "notes": notes})
    rows.append({"name": f"C packet loop / Python path, {size} B",
                 "metric": "capacity ratio (packets per switch CPU-second)",
                 "value": cpu["softswitch"] / cpu["softswitch-c"], "unit": "x",
                 "notes": cpu_notes})
    rows.append({"name": f"C packet loop, transmit ring / sendmmsg, {size} B",
                 "metric": "throughput ratio",
                 "value": med["softswitch-c"] / med["softswitch-c-mmsg"], "unit": "x",
                 "notes": notes})
    if "bmv2" in med:
        rows.append({"name": f"C packet loop / BMv2, {size} B", "metric": "throughput ratio",
                     "value": med["softswitch-c"] / med["bmv2"], "unit": "x", "notes": notes})
        rows.append({"name": f"Python path / BMv2, {size} B", "metric": "throughput ratio",
                     "value": base / med["bmv2"], "unit": "x", "notes": notes})
        rows.append({"name": f"C packet loop / BMv2, {size} B",
                     "metric": "capacity ratio (packets per switch CPU-second)",
                     "value": cpu["bmv2"] / cpu["softswitch-c"], "unit": "x",
                     "notes": cpu_notes})
    else:
        rows.append({"name": TARGETS["bmv2"][0], "metric": "throughput", "value": "not installed",
                     "unit": "", "notes": "p4c and simple_switch_grpc are needed for this row"})
    return rows
