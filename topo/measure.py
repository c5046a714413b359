"""Is the emulated link the bottleneck, or the switch process? Measure it.

:func:`measure_path` offers a UDP load above the configured link rate from one host to
another (``topo.probe`` inside the hosts' namespaces) while sampling the CPU time of every
switch process; the result says which one limited the throughput. An experiment is only
meaningful when the links are the bottleneck (``PathMeasurement.link_bound``). The path
must already forward (program loaded, table entries written by the controller). Delay nodes
(``topo.delaynodes``) count as switch processes here, named ``wire:<name>``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.errors import TopoError
from topo.model import Topology
from topo.probe import ReceiveResult
from vtime import format_rate

REPO_ROOT = Path(__file__).resolve().parent.parent
CPU_SATURATED = 0.9  # fraction of one core
LINK_BOUND_UTILIZATION = 0.85


def process_cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of ``pid``, all its threads (also those that ended), to the
    nanosecond; None when it is gone. The process's CPU clock, not /proc's utime + stime:
    those count 10 ms ticks, too coarse for a short all-reduce's switch CPU (a few ms on
    the C engine: the fidelity guard's shares and the calibration read it)."""
    try:
        return time.clock_gettime(_process_cpu_clock(pid))
    except OSError:  # gone (EINVAL), or a kernel without other processes' clocks
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def _process_cpu_clock(pid: int) -> int:
    """The clock id of process ``pid``'s CPU time (what clock_getcpuclockid(3) returns on
    Linux: the pid inverted, shifted by 3, ored with CPUCLOCK_SCHED = 2)."""
    return ((~pid) << 3) | 2


#: How :func:`process_pids` names a delay node's wire process (``topo.delaynodes``).
WIRE_LABEL = "wire:{}"


def process_pids(network: Any) -> dict[str, int]:
    """The pids of the processes that carry a running network's packets: every switch by
    its name, and every delay node as ``wire:<name>`` (a network's ``delay_nodes``, when it
    has any). Their CPU is what the fidelity guard and the calibration count."""
    out = {sw.name: sw.proc.pid for sw in getattr(network, "switches", ())
           if getattr(sw, "proc", None) is not None}
    for node in getattr(network, "delay_nodes", ()):
        if node.proc is not None:
            out[WIRE_LABEL.format(node.name)] = node.proc.pid
    return out


def network_cpu_seconds(network: Any) -> dict[str, float]:
    """CPU seconds so far of every process :func:`process_pids` names (those still there).
    A switch on another server (``topo.cluster``) reads its own there: its local handle is
    an ssh client."""
    remote = {sw.name: sw for sw in getattr(network, "switches", ())
              if getattr(sw, "isRemote", False)}
    out = {}
    for name, pid in process_pids(network).items():
        cpu = remote[name].cpu_seconds() if name in remote else process_cpu_seconds(pid)
        if cpu is not None:
            out[name] = cpu
    return out


def path_bandwidth(topology: Topology, src: str, dst: str) -> float | None:
    """The smallest configured rate (bits/s) on the way from host ``src`` to ``dst``
    (host links of both, plus the fabric when they are on different switches)."""
    a, b = topology.host(src), topology.host(dst)
    rates = []
    for link in topology.links:
        ends = {link.node1, link.node2}
        if src in ends or dst in ends or (a.switch != b.switch and link.kind == "fabric"):
            if link.bw_bps is not None:
                rates.append(link.bw_bps)
    return min(rates) if rates else None


@dataclass(frozen=True)
class PathMeasurement:
    """One measurement; rates are emulated UDP payload Mbit/s (what the links are configured
    in), CPU is a fraction of one core."""

    src: str
    dst: str
    configured_mbit: float | None
    offered_mbit: float
    achieved_mbit: float
    sent_packets: int
    received_packets: int
    seconds: float
    switch_cpu: dict[str, float] = field(default_factory=dict)

    @property
    def utilization(self) -> float | None:
        """Achieved / configured rate."""
        if not self.configured_mbit:
            return None
        return self.achieved_mbit / self.configured_mbit

    @property
    def configured_text(self) -> str:
        """The configured rate with its unit (``3 Mbit/s``), or ``unshaped``."""
        return format_rate(self.configured_mbit * 1e6) if self.configured_mbit else "unshaped"

    @property
    def saturated_switches(self) -> list[str]:
        """Switch processes that used (nearly) a whole core."""
        return sorted(n for n, c in self.switch_cpu.items() if c >= CPU_SATURATED)

    @property
    def link_bound(self) -> bool:
        """True when the link rate was reached and no switch process was saturated."""
        util = self.utilization
        return util is not None and util >= LINK_BOUND_UTILIZATION and not self.saturated_switches

    def describe(self) -> str:
        """One line for reports."""
        cpu = ", ".join(f"{n} {c:.0%}" for n, c in sorted(self.switch_cpu.items()))
        util = "n/a" if self.utilization is None else f"{self.utilization:.0%}"
        verdict = "link-bound" if self.link_bound else "NOT link-bound"
        return (f"{self.src}->{self.dst}: {format_rate(self.achieved_mbit * 1e6)} of "
                f"{self.configured_text} ({util}), offered "
                f"{format_rate(self.offered_mbit * 1e6)}; switch CPU: {cpu}; {verdict}")


def _read_ready(proc: subprocess.Popen[Any], deadline: float) -> None:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.strip() == b"ready":
            return
    proc.kill()
    proc.wait()
    raise TopoError("measurement receiver did not start")


def measure_path(network: Any, src: str, dst: str, seconds: float = 3.0,
                 offered_factor: float = 1.5, size: int = 1000, port: int = 5201,
                 rate_mbit: float | None = None) -> PathMeasurement:
    """Sends UDP from host ``src`` to ``dst`` at ``offered_factor`` x the configured rate
    (or ``rate_mbit``) for ``seconds``; ``network`` is a running ``topo.network.Network``.

    Rates are emulated ones, as configured: under time dilation the links carry bw / tdf in
    real time, so the sender offers offered / tdf and the rate received counts tdf times
    over (compared in real time, a dilated link looked 1/tdf as busy as it was).
    ``seconds`` and the switches' CPU are real time, what the machine spent."""
    topology: Topology = network.topology
    tdf = float(topology.tdf)
    path_bps = path_bandwidth(topology, src, dst)
    configured = path_bps / 1e6 if path_bps is not None else None
    offered = rate_mbit if rate_mbit is not None else (configured or 100.0) * offered_factor
    py = [sys.executable, "-m", "topo.probe"]
    receiver = network.node(dst).popen(
        py + ["recv", "--port", str(port), "--seconds", str(seconds + 2.0)], cwd=str(REPO_ROOT),
        stdin=subprocess.PIPE)
    _read_ready(receiver, time.monotonic() + 15.0)
    cpu0 = network_cpu_seconds(network)
    t0 = time.monotonic()
    sender = network.node(src).popen(
        py + ["send", "--dst", topology.host(dst).ip, "--port", str(port), "--seconds",
              str(seconds), "--rate-mbit", f"{offered / tdf:.6f}", "--size", str(size)],
        cwd=str(REPO_ROOT))
    s_out, s_err = sender.communicate(timeout=seconds + 30.0)
    wall = time.monotonic() - t0
    cpu1 = network_cpu_seconds(network)
    # the sender is done: the receiver ends once the queue drained (not seconds + 2 later)
    r_out, r_err = receiver.communicate(b"done\n", timeout=seconds + 30.0)
    if sender.returncode != 0 or receiver.returncode != 0:
        raise TopoError(f"measurement failed: {(s_err or r_err).decode(errors='replace').strip()}")
    sent = json.loads(s_out.decode().strip().splitlines()[-1])
    got = ReceiveResult(**json.loads(r_out.decode().strip().splitlines()[-1]))
    achieved = got.mbit_per_s * tdf
    cpu = {n: (after - before) / wall for n, before in cpu0.items()
           if (after := cpu1.get(n)) is not None}
    return PathMeasurement(src, dst, configured, offered, achieved, int(sent["packets"]),
                           got.packets, float(sent["seconds"]), cpu)
