"""Packets/s of the built-in switch process and BMv2's simple_switch_grpc, side by side.

Same program (tests/p4/counters_registers.p4: a port-forwarding table with a direct
counter, an indexed counter and a register updated per packet), same traffic (128-byte
frames from h1 to h2 as fast as a raw socket sends them for ``seconds``), same set-up:
a private network namespace with veth pairs s1/h1 and s2/h2, the switch on s1/s2, the
pipeline and the entry ``ingress_port 1 -> forward(2)`` written over P4Runtime by a small
client inside the namespace. Runs alternate (built-in, BMv2, built-in, ...) and each
figure is the median; BMv2 rows appear where p4c and simple_switch_grpc are installed.
Needs root. Everything it creates is removed on exit.
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
import uuid
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "p4" / "counters_registers.p4"
FRAME_BYTES = 128
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

# In the namespace: receiver on h2 (prints "ready", then JSON {count, first, last}).
RECEIVE = r"""
import json, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x9000))
s.bind(("h2", 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
print("ready", flush=True)
count, first, last = 0, 0.0, 0.0
s.settimeout(float(sys.argv[1]) + 10)
while True:
    try:
        data, addr = s.recvfrom(2048)
    except socket.timeout:
        break
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    t = time.monotonic()
    if count == 0:
        first = t
        s.settimeout(1.0)
    count += 1
    last = t
print(json.dumps({"count": count, "first": first, "last": last}), flush=True)
"""

# In the namespace: flood h1 with one 128-byte frame for S seconds; prints frames sent.
SEND = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("h1", 0))
frame = bytes.fromhex("000000000002000000000001" "9000") + bytes(int(sys.argv[2]) - 14)
end, n, send = time.monotonic() + float(sys.argv[1]), 0, s.send
while time.monotonic() < end:
    for _ in range(64):
        try:
            send(frame)
            n += 1
        except OSError:
            time.sleep(0.0001)
print(n, flush=True)
"""


def _run(cmd: list[str], timeout: float = 120) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])}...: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc.stdout


class _Namespace:
    """netns with veths s1/h1, s2/h2 (all inside it); removed on exit."""

    def __init__(self) -> None:
        self.name = f"bt{uuid.uuid4().hex[:8]}"

    def __enter__(self) -> _Namespace:
        _run(["ip", "netns", "add", self.name])
        try:
            ex = self.exec_argv()
            for key in ("all", "default"):
                subprocess.run([*ex, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"],
                               capture_output=True, timeout=30)
            _run(["ip", "-n", self.name, "link", "set", "lo", "up"])
            for p in (1, 2):
                _run(["ip", "-n", self.name, "link", "add", f"s{p}", "type", "veth", "peer",
                      "name", f"h{p}"])
                for end in (f"s{p}", f"h{p}"):
                    _run(["ip", "-n", self.name, "link", "set", end, "up"])
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)

    def exec_argv(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]


def _switch_argv(target: str, workdir: Path) -> list[str]:
    ports = ["-i", "1@s1", "-i", "2@s2"]
    if target == "softswitch":
        return [sys.executable, "-m", "softswitch", "run", "--no-p4", *ports,
                "--grpc-server-addr", GRPC, "--log-file", str(workdir / "switch.log"), "-L", "warn"]
    return ["simple_switch_grpc", "--no-p4", *ports, "--log-level", "warn",
            "--", "--grpc-server-addr", GRPC]


def _artifacts(target: str, workdir: Path) -> tuple[Path, Path]:
    """(P4Info text, device config) for the target."""
    if target == "softswitch":
        info = workdir / "ours.p4info.txtpb"
        config = workdir / "ours.config"
        _run([sys.executable, "-m", "softswitch", "compile", str(PROGRAM), "--p4info", str(info),
              "--device-config", str(config)])
        return info, config
    out = workdir / "p4c"
    _run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out), "--p4runtime-files",
          str(out / "p4info.txtpb"), str(PROGRAM)], timeout=600)
    return out / "p4info.txtpb", out / f"{PROGRAM.stem}.json"


def measure(target: str, seconds: float, workdir: Path) -> float:
    """Received packets/s through one target (fresh namespace and switch)."""
    info, config = _artifacts(target, workdir)
    with _Namespace() as ns:
        ex = ns.exec_argv()
        switch = subprocess.Popen([*ex, *_switch_argv(target, workdir)], cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _run([*ex, sys.executable, "-c", CONFIGURE, GRPC, str(info), str(config)], timeout=180)
            rx = subprocess.Popen([*ex, sys.executable, "-c", RECEIVE, str(seconds)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert rx.stdout is not None
            try:
                if rx.stdout.readline().strip() != "ready":
                    raise RuntimeError("receiver failed to start")
                _run([*ex, sys.executable, "-c", SEND, str(seconds), str(FRAME_BYTES)],
                     timeout=seconds + 60)
                result = json.loads(
                    rx.communicate(timeout=seconds + 60)[0].strip().splitlines()[-1]
                )
            finally:
                if rx.poll() is None:
                    rx.kill()
                    rx.wait()
        finally:
            switch.terminate()
            try:
                switch.wait(20)
            except subprocess.TimeoutExpired:
                switch.kill()
                switch.wait()
    span = result["last"] - result["first"]
    if result["count"] < 2 or span <= 0:
        raise RuntimeError(f"{target}: no frames forwarded ({result})")
    return result["count"] / span


def run(seconds: float = DEFAULT_SECONDS) -> list[dict[str, Any]]:
    if os.geteuid() != 0:
        raise BenchSkipped("needs root for network namespaces")
    targets = ["softswitch"]
    if shutil.which("simple_switch_grpc") and shutil.which("p4c"):
        targets.append("bmv2")
    pps: dict[str, list[float]] = {t: [] for t in targets}
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        for _ in range(ROUNDS):
            for t in targets:
                pps[t].append(measure(t, seconds, Path(tmp)))
                time.sleep(0.5)
    notes = (f"{PROGRAM.name} (fwd table + counters + register), {FRAME_BYTES} B frames flooded "
             f"for {seconds:g} s, median of {ROUNDS} alternating runs; shared 2-core machine")
    label = {"softswitch": "built-in switch process", "bmv2": "simple_switch_grpc (BMv2)"}
    rows = [{"name": label[t], "metric": "throughput", "value": statistics.median(v),
             "unit": "pkt/s", "notes": notes} for t, v in pps.items()]
    if "bmv2" in pps:
        ratio = statistics.median(pps["softswitch"]) / statistics.median(pps["bmv2"])
        rows.append({"name": "built-in / BMv2", "metric": "throughput ratio", "value": ratio,
                     "unit": "x", "notes": notes})
    else:
        rows.append({"name": label["bmv2"], "metric": "throughput", "value": "not installed",
                     "unit": "", "notes": "p4c and simple_switch_grpc are needed for this row"})
    return rows
