"""The controller of a whole testbed run: many switches, routes, jobs, faults.

A :class:`Controller` is built from a run directory (``topology.json`` plus the controller's
own ``controller_state.json``). Every change follows the same path: update the recorded
intent under the state lock, derive each affected switch's entities again
(``controller.desired``) and :meth:`ManagedSwitch.sync` them, which writes only differences. So a
fresh controller (or one-shot CLI command) adopts running switches without disturbing
them, and a switch that restarted gets its pipeline and state back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
from p4.v1 import p4runtime_pb2

from controller import desired as dsr
from controller import netreduce as nr
from controller.bmv2_runtime import Bmv2Runtime
from controller.errors import Bmv2RuntimeError, ControllerError, JobError
from controller.jobs import (
    JobPlan,
    JobRequest,
    SwitchAlloc,
    check_credits,
    commit_allocations,
    plan_job,
    retire,
)
from controller.p4client import ArbitrationAnswer, P4RuntimeRequestError
from controller.schema import ControlPlaneSchema, decode_int, encode_int
from controller.state import ControllerState, load_state, locked, next_election_id, save_state
from controller.switch import ManagedSwitch, SwitchOptions, SyncReport
from controller.topology import FabricTopology, SwitchInfo, load_topology

log = logging.getLogger(__name__)
T = TypeVar("T")


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True)
class ControllerOptions:
    rundir: Path
    election_id: int | None = None  # None: a fresh one, higher than any before (newest wins)
    p4info: Path | None = None  # override topology.json's
    device_config: Path | None = None
    connect_timeout_s: float = 5.0
    rpc_timeout_s: float = 10.0
    reconnect: bool = False
    request_log: bool = False


class Controller:
    """All switches of one run directory."""

    def __init__(self, options: ControllerOptions, topology: FabricTopology | None = None) -> None:
        self.options = options
        self.topology = topology if topology is not None else load_topology(options.rundir)
        self.rundir = options.rundir
        self.state = load_state(self.rundir)
        eid = (
            options.election_id
            if options.election_id is not None
            else next_election_id(self.rundir)
        )
        self.election_id = eid
        p4info = options.p4info or _path(self.topology.p4info)
        device_config = options.device_config or _path(self.topology.device_config)
        self._schema: ControlPlaneSchema | None = None
        if p4info is not None:
            if not p4info.is_file():
                raise ControllerError(f"P4Info {p4info}: no such file")
            if device_config is not None and not device_config.is_file():
                raise ControllerError(f"device config {device_config}: no such file")
        self.switches: dict[str, ManagedSwitch] = {}
        for info in self.topology.switches:
            opts = SwitchOptions(
                name=info.name,
                address=info.grpc_addr,
                device_id=info.device_id,
                election_id=eid,
                p4info=p4info,
                device_config=device_config,
                connect_timeout_s=options.connect_timeout_s,
                rpc_timeout_s=options.rpc_timeout_s,
                reconnect=options.reconnect,
                request_log=(self.rundir / f"p4rt-{info.name}.log")
                if options.request_log
                else None,
            )
            sw = ManagedSwitch(opts)
            sw.on_recovered = self._on_recovered
            sw.on_primary_change = self._on_primary_change
            self.switches[info.name] = sw
        self._lock = threading.RLock()
        self.events: list[str] = []

    # ---------------------------------------------------------------- basics
    @property
    def schema(self) -> ControlPlaneSchema:
        for sw in self.switches.values():
            if sw.schema is not None:
                return sw.schema
        raise ControllerError("no P4Info: topology.json names none and --p4info was not given")

    def switch(self, name: str) -> ManagedSwitch:
        try:
            return self.switches[name]
        except KeyError:
            raise ControllerError(f"switch: unknown switch {name!r} "
                                  f"(switches: {', '.join(self.switches)})") from None

    def info(self, name: str) -> SwitchInfo:
        """topology.json's record of switch ``name`` (a ControllerError when unknown)."""
        return self.topology.switch(self.switch(name).name)

    def connect(self, names: Iterable[str] | None = None, required: bool = True) -> dict[str, str]:
        """Connect to the named switches (all by default). Returns {name: error} for those
        that failed; raises ControllerError for the first when ``required``."""
        failed: dict[str, str] = {}
        # P4Client itself connects one caller at a time (a second stream with one election id
        # is refused); this lock keeps a serving thread and a caller (a fault timeline, say)
        # from both finding a switch unconnected and connecting it twice in a row.
        with self._lock:
            for name in (list(names) if names is not None else list(self.switches)):
                sw = self.switch(name)
                if sw.client.connected:
                    continue
                try:
                    sw.connect()
                except P4RuntimeRequestError as err:
                    failed[name] = err.message
                    if required:
                        raise ControllerError(f"switch {name} unreachable at "
                                              f"{sw.options.address}: {err.message}") from None
        return failed

    def close(self) -> None:
        for sw in self.switches.values():
            sw.close()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- desired
    def desired(
        self, name: str, state: ControllerState | None = None
    ) -> list[p4runtime_pb2.Entity]:
        """Every entity switch ``name`` should hold according to ``state``."""
        st = state if state is not None else self.state
        schema = self.switch(name).require_schema()
        info = self.info(name)
        out: list[p4runtime_pb2.Entity] = []
        if st.routes:
            out.extend(dsr.route_entities(self.topology, info, schema))
        for plan in sorted(st.jobs.values(), key=lambda p: p.job_id):
            out.extend(dsr.job_entities(plan, self.topology, info, schema))
        out.extend(dsr.fault_entities(st.faults, info, schema))
        return out

    def _fresh_registers(self, name: str) -> None:
        """A (re)pushed pipeline starts with zeroed registers: forget retired job ids and
        restart connection numbering after the active jobs' indices."""
        with locked(self.rundir):
            state = load_state(self.rundir)
            _reset_alloc(state, name)
            save_state(self.rundir, state)
            self.state = state

    def _update(self, change: Callable[[ControllerState], T],
                names: Iterable[str] | None = None) -> T:
        """Apply ``change`` to the recorded state under the lock, sync the switches
        (``names``, default all), and save; on a failed write the state is restored."""
        with locked(self.rundir):
            state = load_state(self.rundir)
            before = load_state(self.rundir)
            result = change(state)
            targets = list(names) if names is not None else list(self.switches)
            if isinstance(result, JobPlan):
                targets = list(result.parts)
            self.state = state
            try:
                self._sync_locked(targets)
            except P4RuntimeRequestError:
                self.state = before
                try:
                    self._sync_locked(targets)
                except P4RuntimeRequestError as err:
                    log.warning("could not roll back: %s", err)
                raise
            save_state(self.rundir, state)
            return result

    def _sync_locked(self, names: Sequence[str]) -> None:
        for name in names:
            self.connect([name])
            report = self.switch(name).sync(self.desired(name))
            if report.pipeline_pushed:
                _reset_alloc(self.state, name)

    # ------------------------------------------------------------- pipeline
    def push_pipeline(
        self, names: Iterable[str] | None = None, force: bool = False
    ) -> dict[str, bool]:
        """Install the program where it is missing (everywhere with ``force``), then
        restore each switch's state."""
        targets = list(names) if names is not None else list(self.switches)
        self.connect(targets)
        switches = [self.switch(name) for name in targets]
        # every switch compiles the program it is given: push to all of them at once, so a
        # fabric takes about as long as its slowest switch, not the sum (each switch has its
        # own channel); the first failure is raised once every push has ended
        with ThreadPoolExecutor(max_workers=max(1, len(switches)),
                                thread_name_prefix="push-pipeline") as pool:
            futures = [pool.submit(sw.ensure_pipeline, force=force) for sw in switches]
        pushed = {name: f.result() for name, f in zip(targets, futures, strict=True)}
        with locked(self.rundir):
            self.state = load_state(self.rundir)
            for name in targets:
                if pushed[name]:
                    _reset_alloc(self.state, name)
            self._sync_locked(targets)
            save_state(self.rundir, self.state)
        return pushed

    def reconcile(self) -> dict[str, SyncReport]:
        """Bring every switch in line with the state file (pushing pipelines if missing)."""
        with locked(self.rundir):
            self.state = load_state(self.rundir)
            reports = {}
            for name in self.switches:
                self.connect([name])
                reports[name] = self.switch(name).sync(self.desired(name))
                if reports[name].pipeline_pushed:
                    _reset_alloc(self.state, name)
            save_state(self.rundir, self.state)
            return reports

    # --------------------------------------------------------------- routes
    def program_routes(self) -> None:
        def change(state: ControllerState) -> None:
            state.routes = True
        self._update(change)

    # ----------------------------------------------------------------- jobs
    def create_job(self, request: JobRequest) -> JobPlan:
        sizes = nr.program_sizes(self.schema)

        def change(state: ControllerState) -> JobPlan:
            plan = plan_job(request, self.topology, list(state.jobs.values()), state.allocs, sizes)
            commit_allocations(plan, state.allocs)
            state.jobs[plan.job_id] = plan
            return plan

        plan = self._update(change)
        log.info("job %s (id %d) created on %s", plan.name, plan.job_id, ", ".join(plan.parts))
        return plan

    def delete_job(self, key: str) -> JobPlan:
        def change(state: ControllerState) -> JobPlan:
            plan = self._find_job(state, key)
            del state.jobs[plan.job_id]
            retire(plan, state.allocs)
            return plan

        return self._update(change)

    def set_credits(self, key: str, credits: int) -> JobPlan:
        sizes = nr.program_sizes(self.schema)

        def change(state: ControllerState) -> JobPlan:
            plan = self._find_job(state, key)
            check_credits(credits, plan.msg_pkts, plan.slots, sizes)
            plan.credits = credits
            return plan

        return self._update(change)

    @staticmethod
    def _find_job(state: ControllerState, key: str) -> JobPlan:
        try:
            return state.job(key)
        except KeyError as err:
            raise JobError("job", str(err.args[0])) from None

    # --------------------------------------------------------------- faults
    def set_fault(self, switch: str, port: int, loss: float, direction: str = "both",
                  reorder: float = 0.0, max_hold: int = nr.Limit.REORDER_MAX_HOLD) -> None:
        """Loss and/or reordering on a switch port (docs/protocol.md section 5): ``loss``
        drops, ``reorder`` holds that fraction of aggregation packets back until at most
        ``max_hold`` later ones have passed."""
        info = self.info(switch)
        if port not in {p.port for p in info.ports}:
            raise ControllerError(f"port: switch {switch} has no port {port} "
                                  f"(ports: {', '.join(str(p.port) for p in info.ports)})")
        if direction not in ("in", "out", "both"):
            raise ControllerError(f"direction: {direction!r} is not in, out or both")
        try:
            threshold = nr.loss_threshold(loss)
        except ValueError as err:
            raise ControllerError(f"loss: {err}") from None
        try:
            reorder_threshold = nr.loss_threshold(reorder, "reorder")
        except ValueError as err:
            raise ControllerError(f"reorder: {err}") from None
        if not 0 <= max_hold <= 255:
            raise ControllerError(f"max_hold: {max_hold} outside 0..255")

        def change(state: ControllerState) -> None:
            state.faults = [
                f for f in state.faults if not (f["switch"] == switch and f["port"] == port)
            ]
            if threshold or reorder_threshold:
                state.faults.append({"switch": switch, "port": port, "direction": direction,
                                     "threshold": threshold, "loss": loss,
                                     "reorder_threshold": reorder_threshold, "reorder": reorder,
                                     "max_hold": max_hold})

        self._update(change, [switch])

    def clear_faults(self, switch: str | None = None, port: int | None = None) -> int:
        if switch is not None:
            self.switch(switch)
        removed: list[dict[str, Any]] = []

        def change(state: ControllerState) -> None:
            keep: list[dict[str, Any]] = []
            for f in state.faults:
                hit = (switch is None or f["switch"] == switch) and (
                    port is None or f["port"] == port
                )
                (removed if hit else keep).append(f)
            state.faults = keep

        self._update(change, [switch] if switch else None)
        return len(removed)

    # ---------------------------------------------------------------- reads
    def read_table(self, switch: str, table: str) -> list[dict[str, Any]]:
        sw = self.switch(switch)
        self.connect([switch])
        schema = sw.require_schema()
        info = schema.table(table)
        req = p4runtime_pb2.Entity()
        req.table_entry.table_id = info.preamble.id
        return [schema.describe_entry(e.table_entry) for e in sw.read([req])]

    def table_sizes(self, switch: str) -> list[dict[str, Any]]:
        sw = self.switch(switch)
        self.connect([switch])
        schema = sw.require_schema()
        req = p4runtime_pb2.Entity()
        req.table_entry.table_id = 0
        counts: dict[int, int] = {}
        for e in sw.read([req]):
            counts[e.table_entry.table_id] = counts.get(e.table_entry.table_id, 0) + 1
        return [{"switch": switch, "table": t.preamble.name,
                 "entries": counts.get(t.preamble.id, 0),
                 "size": t.size} for t in sorted(schema.p4info.tables,
                                                 key=lambda t: t.preamble.name)]

    def read_counter(
        self, switch: str, name: str, index: int | None = None
    ) -> dict[int, tuple[int, int]]:
        """{index: (packets, bytes)} of one indexed counter (all indices by default)."""
        return self.read_counters(switch, [name], index)[name]

    def read_counters(self, switch: str, names: Sequence[str],
                      index: int | None = None) -> dict[str, dict[int, tuple[int, int]]]:
        """Several indexed counters in one Read RPC: each a wildcard over all its indices
        (or just ``index``). Returns {name as given: {index: (packets, bytes)}}."""
        sw = self.switch(switch)
        self.connect([switch])
        schema = sw.require_schema()
        ids: dict[int, str] = {}
        requests = []
        for name in names:
            info = schema.counter(name)
            ids[info.preamble.id] = name
            req = p4runtime_pb2.Entity()
            req.counter_entry.counter_id = info.preamble.id
            if index is not None:
                req.counter_entry.index.index = index
            requests.append(req)
        out: dict[str, dict[int, tuple[int, int]]] = {name: {} for name in names}
        for e in sw.read(requests):
            entry = e.counter_entry
            given = ids.get(entry.counter_id)
            if given is not None:
                out[given][entry.index.index] = (entry.data.packet_count, entry.data.byte_count)
        return out

    def read_counter_cells(self, switch: str, cells: Iterable[tuple[str, int]]
                           ) -> dict[tuple[str, int], tuple[int, int]]:
        """Chosen cells of indexed counters in one Read RPC: {(name, index): (packets,
        bytes)}. Much cheaper than wildcard reads when only a few of a counter's indices
        matter (a job's row of 64-job counters, the ports a switch has of 512)."""
        sw = self.switch(switch)
        self.connect([switch])
        schema = sw.require_schema()
        wanted = list(dict.fromkeys(cells))
        ids: dict[int, str] = {}
        requests = []
        for name, index in wanted:
            info = schema.counter(name)
            if not 0 <= index < info.size:
                raise ControllerError(f"counter {name}: index {index} is outside 0.."
                                      f"{info.size - 1}")
            ids[info.preamble.id] = name
            req = p4runtime_pb2.Entity()
            req.counter_entry.counter_id = info.preamble.id
            req.counter_entry.index.index = index
            requests.append(req)
        out = dict.fromkeys(wanted, (0, 0))
        for e in sw.read(requests) if requests else []:
            entry = e.counter_entry
            key = (ids.get(entry.counter_id, ""), entry.index.index)
            if key in out:
                out[key] = (entry.data.packet_count, entry.data.byte_count)
        return out

    def read_register(self, switch: str, name: str, index: int | None = None) -> dict[int, int]:
        """{index: value} of one register cell, or of every cell. Over P4Runtime; where the
        switch answers UNIMPLEMENTED (BMv2's simple_switch_grpc: PI has no register support)
        over BMv2's Thrift runtime (``controller.bmv2_runtime``)."""
        sw = self.switch(switch)
        self.connect([switch])
        info = sw.require_schema().register(name)
        _check_register_index(info, index)
        req = p4runtime_pb2.Entity()
        req.register_entry.register_id = info.preamble.id
        if index is not None:
            req.register_entry.index.index = index
        try:
            found = sw.read([req])
        except P4RuntimeRequestError as err:
            if err.code != grpc.StatusCode.UNIMPLEMENTED:
                raise
            runtime = self._bmv2_runtime(switch, "register reads", err)
            try:
                return runtime.read_register(info.preamble.name, index)
            except Bmv2RuntimeError as exc:
                raise ControllerError(str(exc)) from None
        return {e.register_entry.index.index: decode_int(e.register_entry.data.bitstring)
                for e in found}

    def write_register(self, switch: str, name: str, index: int, value: int) -> None:
        """Sets one register cell (P4Runtime MODIFY; BMv2's Thrift runtime where the switch
        answers UNIMPLEMENTED, as for reads)."""
        sw = self.switch(switch)
        self.connect([switch])
        info = sw.require_schema().register(name)
        _check_register_index(info, index)
        width = info.type_spec.bitstring.bit.bitwidth or info.type_spec.bitstring.int.bitwidth
        if value < 0 or (width and value >> width):
            raise ControllerError(f"value: {value} does not fit register {info.preamble.name} "
                                  f"({width} bits, unsigned)")
        entity = p4runtime_pb2.Entity()
        entity.register_entry.register_id = info.preamble.id
        entity.register_entry.index.index = index
        entity.register_entry.data.bitstring = encode_int(value, width, "value")
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=entity)
        try:
            sw.write([update])
        except P4RuntimeRequestError as err:
            # PI reports it per update (the batch fails with UNKNOWN and the details)
            if not (err.code == grpc.StatusCode.UNIMPLEMENTED
                    or err.only(grpc.StatusCode.UNIMPLEMENTED)):
                raise
            runtime = self._bmv2_runtime(switch, "register writes", err)
            try:
                runtime.write_registers(info.preamble.name, {index: value})
            except Bmv2RuntimeError as exc:
                raise ControllerError(str(exc)) from None

    def _bmv2_runtime(self, switch: str, what: str, err: P4RuntimeRequestError) -> Bmv2Runtime:
        """BMv2's Thrift runtime of ``switch`` for an operation its P4Runtime server lacks;
        a ControllerError saying so precisely when topology.json names no Thrift port."""
        addr = self.info(switch).thrift_addr
        if addr is None:
            why = "; ".join(e.message for e in err.errors) or err.message
            raise ControllerError(
                f"switch {switch} does not implement {what} over P4Runtime ({why}), and "
                "topology.json records no thrift_port for it (BMv2's simple_switch_grpc serves "
                "registers only on its Thrift runtime port)")
        log.info("%s: %s over BMv2's Thrift runtime at %s:%d (P4Runtime: %s)", switch, what,
                 addr[0], addr[1], err.code.name)
        return Bmv2Runtime(switch, addr[0], addr[1], timeout_s=self.options.rpc_timeout_s * 3)

    def job_counters(self, key: str | None = None) -> list[dict[str, Any]]:
        """Per switch of a job (every job when ``key`` is None): contributions, duplicates,
        completions, results and partials sent, and aggregation drops by reason. One
        wildcard Read per switch serves every job on it."""
        plans = ([self._find_job(self.state, key)] if key is not None
                 else sorted(self.state.jobs.values(), key=lambda p: p.job_id))
        names = nr.AggregationIngress.JOB_COUNTERS + nr.AggregationEgress.JOB_COUNTERS
        reasons = [r for r in nr.DropReason if r != nr.DropReason.NONE]
        rows = []
        for plan in plans:
            base = plan.job_id * nr.Limit.DROP_REASONS
            cells = [(cname, plan.job_id) for cname in names]
            cells += [(nr.AggregationIngress.JOB_DROPS, base + r) for r in reasons]
            for name in plan.parts:
                # only this job's cells: a wildcard read of every job's counters cost ~0.3 s
                # per switch and was most of a short all-reduce's wall time
                values = self.read_counter_cells(name, cells)
                row: dict[str, Any] = {"job": plan.name, "switch": name}
                for cname in names:
                    row[cname.rsplit(".", 1)[1]] = values[(cname, plan.job_id)][0]
                drops = {}
                for reason in reasons:
                    n = values[(nr.AggregationIngress.JOB_DROPS, base + reason)][0]
                    if n:
                        drops[reason.name.lower()] = n
                row["drops"] = drops
                rows.append(row)
        return rows

    def port_bytes(self, switch: str) -> dict[int, tuple[int, int]]:
        """{port: (rx_bytes, tx_bytes)} of the switch's topology ports (what link usage is
        computed from), read cell by cell rather than over all NR_PORTS indices."""
        ports = [p.port for p in self.info(switch).ports]
        cells = [(cname, port) for port in ports
                 for cname in (nr.SwitchCounters.PORT_RX, nr.SwitchCounters.PORT_TX)]
        values = self.read_counter_cells(switch, cells)
        return {port: (values[(nr.SwitchCounters.PORT_RX, port)][1],
                       values[(nr.SwitchCounters.PORT_TX, port)][1]) for port in ports}

    def switch_counters(self, switch: str) -> dict[str, Any]:
        values = self.read_counters(switch, (nr.SwitchCounters.PORT_RX, nr.SwitchCounters.PORT_TX,
                                             nr.SwitchCounters.INGRESS_DROPS,
                                             nr.SwitchCounters.EGRESS_DROPS))
        rx, tx = values[nr.SwitchCounters.PORT_RX], values[nr.SwitchCounters.PORT_TX]
        ports = {}
        for p in self.info(switch).ports:
            ports[p.port] = {"peer": p.peer, "rx_packets": rx.get(p.port, (0, 0))[0],
                             "rx_bytes": rx.get(p.port, (0, 0))[1],
                             "tx_packets": tx.get(p.port, (0, 0))[0],
                             "tx_bytes": tx.get(p.port, (0, 0))[1]}
        drops = {}
        for cname, where in ((nr.SwitchCounters.INGRESS_DROPS, "ingress"),
                             (nr.SwitchCounters.EGRESS_DROPS, "egress")):
            for idx, (packets, _bytes) in sorted(values[cname].items()):
                if packets:
                    try:
                        reason = nr.DropReason(idx).name.lower()
                    except ValueError:
                        reason = str(idx)
                    drops[f"{where}:{reason}"] = packets
        return {"switch": switch, "ports": ports, "drops": drops}

    # --------------------------------------------------------------- status
    def status(self) -> list[dict[str, Any]]:
        """Per switch: reachable, primary, pipeline (ours / other / none), entries."""
        rows = []
        for name, sw in self.switches.items():
            row: dict[str, Any] = {"switch": name, "address": sw.options.address,
                                   "device_id": sw.options.device_id}
            try:
                self.connect([name])
                arb = sw.client.arbitration
                row["reachable"] = True
                row["primary"] = bool(arb and arb.primary)
                cookie = sw.device_cookie()
                if cookie is None:
                    row["pipeline"] = "none"
                elif cookie == sw.cookie:
                    row["pipeline"] = "ours"
                else:
                    row["pipeline"] = "other"
                row["jobs"] = sum(1 for p in self.state.jobs.values() if name in p.parts)
                if row["pipeline"] == "ours":
                    req = p4runtime_pb2.Entity()
                    req.table_entry.table_id = 0
                    row["entries"] = len(sw.read([req]))
                    row["expected_entries"] = sum(
                        1 for e in self.desired(name) if e.WhichOneof("entity") == "table_entry"
                        and not e.table_entry.is_default_action)
            except ControllerError as err:
                row["reachable"] = False
                row["error"] = str(err)
            rows.append(row)
        return rows

    def slot_usage(self) -> list[dict[str, Any]]:
        sizes = nr.program_sizes(self.schema)
        rows = []
        for name in self.switches:
            used = sorted((p.parts[name].slot_base, p.parts[name].slot_count, p.name)
                          for p in self.state.jobs.values() if name in p.parts)
            rows.append({"switch": name, "total": sizes.slots,
                         "used": sum(c for _, c, _ in used),
                         "ranges": [{"job": j, "base": b, "count": c} for b, c, j in used]})
        return rows

    # ---------------------------------------------------------------- serve
    def _on_recovered(self, sw: ManagedSwitch, report: SyncReport) -> None:
        self.events.append(f"{sw.name}: recovered ({report.inserted} entries restored"
                           f"{', pipeline pushed' if report.pipeline_pushed else ''})")
        if report.pipeline_pushed:
            try:
                self._fresh_registers(sw.name)
            except OSError as err:
                log.warning("%s: cannot update the state file: %s", sw.name, err)

    def _on_primary_change(self, sw: ManagedSwitch, arb: ArbitrationAnswer) -> None:
        if arb.primary and self.options.reconnect:
            # another controller may have changed the state file while we were backup
            threading.Thread(target=self._resync_one, args=(sw.name,), daemon=True).start()

    def _resync_one(self, name: str) -> None:
        try:
            with locked(self.rundir):
                self.state = load_state(self.rundir)
                self.switch(name).sync(self.desired(name))
        except (ControllerError, OSError) as err:
            log.warning("%s: resync after regaining primary failed: %s", name, err)

    def serve(self, stop: threading.Event, poll_s: float = 1.0,
              on_event: Callable[[str], None] | None = None) -> None:
        """Stay connected: reconcile switches whose stream broke (``reconnect`` must be set)
        and follow changes other controllers make to the state file, until ``stop``."""
        if not self.options.reconnect:
            raise ControllerError("serve needs ControllerOptions(reconnect=True)")
        self.connect(required=False)
        try:
            self.reconcile()
        except ControllerError as err:
            log.warning("initial reconcile incomplete: %s", err)
        path = self.rundir / "controller_state.json"
        mtime = path.stat().st_mtime if path.exists() else 0.0
        while not stop.wait(poll_s):
            self._report_events(on_event)
            for sw in self.switches.values():
                if not sw.client.connected:
                    sw.recover_in_background()
            mtime = self._follow_state_file(path, mtime)
        # a recovery that ended since the last poll is reported too, not lost with the stop
        self._report_events(on_event)

    def _report_events(self, on_event: Callable[[str], None] | None) -> None:
        """Hands each recorded event (a recovered switch...) to ``on_event``, oldest first."""
        while self.events:
            event = self.events.pop(0)
            if on_event is not None:
                on_event(event)

    def _follow_state_file(self, path: Path, mtime: float) -> float:
        """When the state file changed since ``mtime`` (another controller wrote it),
        resync the switches this controller is primary for; returns its new mtime."""
        new = path.stat().st_mtime if path.exists() else 0.0
        if new != mtime:
            for name, sw in self.switches.items():
                if sw.is_primary:
                    self._resync_one(name)
        return new


def _reset_alloc(state: ControllerState, name: str) -> None:
    """A (re)pushed pipeline starts with zeroed registers: forget retired job ids and
    restart connection numbering after the active jobs' indices."""
    used = [i for p in state.jobs.values() if name in p.parts for i in p.parts[name].conns.values()]
    state.allocs[name] = SwitchAlloc(next_conn=max(used, default=-1) + 1)


def _check_register_index(info: Any, index: int | None) -> None:
    """A ControllerError naming the index when it is outside the register's size."""
    if index is not None and not 0 <= index < info.size:
        raise ControllerError(f"index: {index} is outside register {info.preamble.name} "
                              f"(0..{info.size - 1})")


def with_options(options: ControllerOptions, **changes: Any) -> ControllerOptions:
    """A copy of ``options`` with changes (one call, as for SwitchOptions)."""
    return replace(options, **changes)


def wait_until(predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()
