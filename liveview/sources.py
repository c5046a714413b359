"""Where the live view's numbers come from; every source is read-only and outside the packet path.

* **Interface counters** of every switch port, from ``/sys/class/net/<intf>/statistics`` (the
  switches' interfaces live in the root namespace): bytes and packets each way, for every
  target. Two reads give each link's rate and, with the shaped rate from ``topology.json``,
  its utilisation.
* **Switch stats files** (``softswitch run --stats-file``, beside each switch's log; see
  :mod:`softswitch.stats`): per-port drops, malformed frames and the process's own counters.
* **P4Runtime reads** through the controller code (:class:`ReadOnlyController`): each job's
  aggregation counters (contributions, duplicates = retransmitted contributions the switch
  saw, completed slots, results and partials sent, drops by reason) and each switch's drop
  counters. The reads use only the Read RPC, without a stream or arbitration, so the view
  never becomes primary and never disturbs the controller that runs the experiment.
* **Controller state** (``controller_state.json``): which jobs exist, their switches and slots.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import ControllerError
from controller.fabric import Controller, ControllerOptions
from controller.jobs import JobPlan
from controller.state import load_state
from liveview.remote import load_cluster, read_remote_interfaces, remote_switches
from softswitch.stats import StatsError, default_stats_path, read_stats
from topo.model import Topology
from topo.rundir import load_topology
from vtime import format_rate

log = logging.getLogger(__name__)

SYSFS_NET = Path("/sys/class/net")
COUNTER_FILES = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_dropped", "tx_dropped")
STATS_KEYS = ("rx_packets", "tx_packets", "dropped", "tx_drops", "malformed", "rx_errors")


def read_interface(intf: str, root: Path = SYSFS_NET) -> dict[str, int] | None:
    """The kernel's counters of one interface (None when it does not exist)."""
    stats = root / intf / "statistics"
    out = {}
    for name in COUNTER_FILES:
        try:
            out[name] = int((stats / name).read_text())
        except (OSError, ValueError):
            return None
    return out


def stats_path(log_file: str | None) -> Path | None:
    """Where a switch with this log file writes its stats file (softswitch's default)."""
    path = default_stats_path(log_file)
    return Path(path) if path else None


def read_switch_stats(log_file: str | None) -> dict[str, Any] | None:
    """A switch's stats file, or None (no file: BMv2, or not written yet)."""
    path = stats_path(log_file)
    if path is None or not path.exists():
        return None
    try:
        return read_stats(path)
    except StatsError as exc:
        log.debug("%s", exc)
        return None


def link_id(node1: str, port1: int, node2: str, port2: int) -> str:
    """The id of a link in the page (stable across snapshots)."""
    return f"{node1}:{port1}-{node2}:{port2}"


def graph_elements(topology: Topology) -> list[dict[str, Any]]:
    """cytoscape.js elements: one node per switch and host, one edge per link."""
    elements: list[dict[str, Any]] = []
    for sw in topology.switches:
        elements.append({"group": "nodes", "data": {
            "id": sw.name, "label": sw.name, "kind": "switch", "role": sw.role,
            "device_id": sw.device_id, "grpc": sw.grpc_addr}})
    for h in topology.hosts:
        elements.append({"group": "nodes", "data": {
            "id": h.name, "label": f"{h.name}\n{h.ip}", "kind": "host", "role": "host"}})
    for ln in topology.links:
        elements.append({"group": "edges", "data": {
            "id": link_id(ln.node1, ln.port1, ln.node2, ln.port2), "source": ln.node1,
            "target": ln.node2, "kind": ln.kind, "bw_bps": ln.bw_bps, "bw": _bw_text(ln.bw_bps)}})
    return elements


def _bw_text(bps: float | None) -> str:
    """A link's emulated rate as the page shows it: ``100 Gbit/s`` or ``unshaped``."""
    return format_rate(bps) if bps else "unshaped"


def roots(topology: Topology) -> list[str]:
    """The top of the drawing: spines when there are any, else every switch."""
    spines = [s.name for s in topology.switches if s.role == "spine"]
    return spines or [s.name for s in topology.switches]


class ReadOnlyController:
    """The controller's counter reads (:meth:`controller.fabric.Controller.job_counters`,
    ``switch_counters``) over channels without a stream: Read needs no arbitration."""

    def __init__(self, rundir: Path, timeout_s: float = 2.0) -> None:
        class _Reader(Controller):
            def connect(self, names: Any = None, required: bool = True) -> dict[str, str]:
                failed: dict[str, str] = {}
                for name in (list(names) if names is not None else list(self.switches)):
                    client = self.switch(name).client
                    if not client.has_channel:
                        client.open_channel(timeout_s)
                return failed

        # election id 0 is never used: no stream, so no arbitration and no bump of the
        # run directory's election counter.
        self.controller = _Reader(ControllerOptions(rundir=rundir, election_id=0,
                                                    connect_timeout_s=timeout_s,
                                                    rpc_timeout_s=timeout_s))
        self.rundir = rundir

    def refresh_state(self) -> None:
        """Reload the jobs other controllers recorded."""
        self.controller.state = load_state(self.rundir)

    def close(self) -> None:
        self.controller.close()


@dataclass
class Sample:
    """One read of the interface counters."""

    time: float
    ports: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)


def _rate_mbit(new: int, old: int, seconds: float) -> float:
    return max(0, new - old) * 8 / seconds / 1e6 if seconds > 0 else 0.0


class Collector:
    """Builds snapshots of one run directory's network; keeps the previous interface
    sample so that each snapshot carries rates over the last interval."""

    def __init__(self, rundir: str | Path, sysfs: Path = SYSFS_NET, p4runtime: bool = True,
                 timeout_s: float = 5.0) -> None:
        self.rundir = Path(rundir).resolve()
        self.topology = load_topology(self.rundir)
        self.sysfs = sysfs
        self.timeout_s = timeout_s
        self._reader: ReadOnlyController | None = None
        self._p4runtime = p4runtime and self.topology.p4info is not None
        self._last: Sample | None = None
        self._job_rows: dict[str, list[dict[str, Any]]] = {}  # last rows read, per job
        self._lock = threading.Lock()
        self._p4_latest: dict[str, Any] | None = None
        self.background = False  # P4Runtime read by p4runtime_loop, not in snapshot()
        self.sequence = 0
        self._cluster = load_cluster(self.rundir)  # a run across servers (None: here)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # ------------------------------------------------------------------ pieces
    def sample_ports(self) -> Sample:
        sample = Sample(time.monotonic())
        away = self._remote_counters()
        for sw in self.topology.switches:
            for p in sw.ports:
                counters = (away[sw.name].get(p.intf) if sw.name in away
                            else read_interface(p.intf, self.sysfs))
                if counters is not None:
                    sample.ports[(sw.name, p.port)] = counters
        return sample

    def _remote_counters(self) -> dict[str, dict[str, dict[str, int]]]:
        """{switch: {intf: counters}} of the switches on other servers (a run across
        machines: liveview.remote), read there with one ssh per server."""
        if self._cluster is None:
            return {}
        ssh = self._cluster.get("ssh")
        assert isinstance(ssh, dict)
        out: dict[str, dict[str, dict[str, int]]] = {}
        for server, nodes in remote_switches(self._cluster).items():
            switches = [sw for sw in self.topology.switches if sw.name in nodes]
            read = read_remote_interfaces(ssh[server], [p.intf for sw in switches
                                                        for p in sw.ports],
                                          COUNTER_FILES, str(self.sysfs))
            for sw in switches:
                out[sw.name] = read
        return out

    def links(self, now: Sample, before: Sample | None) -> list[dict[str, Any]]:
        """Per link: the rate each way (Mbit/s of the emulated network, seen at a switch end)
        and utilisation. Under time dilation a real interval is interval / TDF emulated
        seconds, so the bytes counted over it give the emulated rate."""
        out = []
        seconds = (now.time - before.time) / self.topology.tdf if before is not None else 0.0
        switches = {s.name for s in self.topology.switches}
        for ln in self.topology.links:
            # measured at a switch end: its tx is traffic away from it, rx towards it
            at, port, other = ((ln.node1, ln.port1, ln.node2) if ln.node1 in switches
                               else (ln.node2, ln.port2, ln.node1))
            cur = now.ports.get((at, port))
            old = before.ports.get((at, port)) if before is not None else None
            row: dict[str, Any] = {
                "id": link_id(ln.node1, ln.port1, ln.node2, ln.port2), "switch": at,
                "port": port, "peer": other, "kind": ln.kind, "bw_bps": ln.bw_bps,
                "bw": _bw_text(ln.bw_bps),
                "tx_bytes": cur["tx_bytes"] if cur else None,
                "rx_bytes": cur["rx_bytes"] if cur else None,
                "mbit_out": None, "mbit_in": None, "utilization": None,
            }
            if cur is not None and old is not None:
                row["mbit_out"] = _rate_mbit(cur["tx_bytes"], old["tx_bytes"], seconds)
                row["mbit_in"] = _rate_mbit(cur["rx_bytes"], old["rx_bytes"], seconds)
                if ln.bw_bps:
                    row["utilization"] = max(row["mbit_out"], row["mbit_in"]) * 1e6 / ln.bw_bps
            out.append(row)
        return out

    def switches(self, now: Sample) -> dict[str, dict[str, Any]]:
        """Per switch: interface totals, its stats file's counters, P4Runtime drops."""
        out: dict[str, dict[str, Any]] = {}
        for sw in self.topology.switches:
            totals = {k: 0 for k in COUNTER_FILES}
            for p in sw.ports:
                for k, v in now.ports.get((sw.name, p.port), {}).items():
                    totals[k] += v
            row: dict[str, Any] = {"name": sw.name, "role": sw.role, "device_id": sw.device_id,
                                   "interfaces": totals, "stats": None, "drops": {},
                                   "ports": len(sw.ports)}
            doc = read_switch_stats(sw.log)
            if doc is not None:
                t = doc.get("totals", {})
                row["stats"] = {k: int(t.get(k, 0)) for k in STATS_KEYS}
                row["stats"]["uptime_s"] = doc.get("uptime_s")
            out[sw.name] = row
        return out

    def _controller(self) -> ReadOnlyController:
        if self._reader is None:
            self._reader = ReadOnlyController(self.rundir, self.timeout_s)
        return self._reader

    def read_p4runtime(self) -> dict[str, Any]:
        """One P4Runtime reading: {"jobs": jobs with their per-switch counters, "drops":
        {switch: drops by reason}, "errors": [...], "time", "took_ms"}."""
        t0 = time.perf_counter()
        out: dict[str, Any] = {"jobs": [], "drops": {}, "errors": [], "time": time.time(),
                               "took_ms": 0.0}
        errors: list[str] = out["errors"]
        if not self._p4runtime:
            return out
        try:
            reader = self._controller()
        except (ControllerError, OSError) as exc:
            errors.append(f"P4Runtime: {exc}")
            return out
        reader.refresh_state()
        ctl = reader.controller
        for sw in self.topology.switches:
            try:
                out["drops"][sw.name] = ctl.switch_counters(sw.name)["drops"]
            except ControllerError as exc:
                errors.append(f"{sw.name}: P4Runtime counters unavailable: {exc}")
        for plan in sorted(ctl.state.jobs.values(), key=lambda p: p.job_id):
            out["jobs"].append(self._job_reading(ctl, plan, errors))
        out["took_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        return out

    def _job_reading(self, ctl: Controller, plan: JobPlan, errors: list[str]) -> dict[str, Any]:
        """One job with its per-switch counter rows, their totals and drops by reason."""
        job: dict[str, Any] = {
            "name": plan.name, "job_id": plan.job_id, "workers": len(plan.workers),
            "hosts": plan.hosts(), "credits": plan.credits, "msg_pkts": plan.msg_pkts,
            "slots": plan.slots, "switches": [], "totals": {}, "drops": {}}
        try:
            rows = ctl.job_counters(plan.name)
            self._job_rows[plan.name] = rows
        except ControllerError as exc:
            # a read that timed out on a busy switch: show the last rows, marked stale
            errors.append(f"job {plan.name}: counters unavailable: {exc}")
            rows = self._job_rows.get(plan.name, [])
            job["stale"] = True
        for row in rows:
            part = plan.parts.get(row["switch"])
            row = dict(row, role=part.role if part else None,
                       slots=part.slot_count if part else None)
            job["switches"].append(row)
            for key, value in row.items():
                if isinstance(value, int) and key not in ("slots",):
                    job["totals"][key] = job["totals"].get(key, 0) + value
            for reason, n in row["drops"].items():
                job["drops"][reason] = job["drops"].get(reason, 0) + n
        return job

    def p4runtime_loop(self, stop: threading.Event, interval_s: float) -> None:
        """Reads P4Runtime every ``interval_s`` until ``stop``, keeping the latest reading
        for :meth:`snapshot`: a switch slow to answer (busy forwarding) then delays only
        the job and drop numbers, never the link rates."""
        self.background = True
        while not stop.is_set():
            try:
                reading = self.read_p4runtime()
            except Exception as exc:  # keep the view alive; the page lists the error
                log.debug("P4Runtime reading failed", exc_info=True)
                reading = {"jobs": [], "drops": {}, "errors": [f"P4Runtime: {exc}"],
                           "time": time.time(), "took_ms": None}
            with self._lock:
                self._p4_latest = reading
            stop.wait(interval_s)

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> dict[str, Any]:
        """Everything the page shows, as one JSON-ready document."""
        t0 = time.perf_counter()
        now = self.sample_ports()
        before, self._last = self._last, now
        switches = self.switches(now)
        if self.background:
            with self._lock:
                p4 = self._p4_latest
        else:
            p4 = self.read_p4runtime()
        errors: list[str] = []
        jobs: list[dict[str, Any]] = []
        age = None
        if p4 is not None:
            for name, drops in p4["drops"].items():
                if name in switches:
                    switches[name]["drops"] = drops
            jobs, errors = p4["jobs"], list(p4["errors"])
            age = round(max(0.0, time.time() - p4["time"]), 1)
        self.sequence += 1
        return {"seq": self.sequence, "time": time.time(), "tdf": self.topology.tdf,
                "interval_s": round(now.time - before.time, 3) if before else None,
                "links": self.links(now, before), "switches": switches, "jobs": jobs,
                "errors": errors, "took_ms": round((time.perf_counter() - t0) * 1000, 1),
                "p4runtime_ms": p4["took_ms"] if p4 is not None else None,
                "p4runtime_age_s": age}

    def graph(self) -> dict[str, Any]:
        """The drawing's elements and layout roots, from ``topology.json``."""
        t = self.topology
        return {"kind": t.kind, "target": t.target, "rundir": str(self.rundir), "tdf": t.tdf,
                "elements": graph_elements(t), "roots": roots(t)}
