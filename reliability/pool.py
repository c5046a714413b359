"""Host workers that stay up for a whole cell (:mod:`reliability.worker`): each all-reduce is
still a new job, checked against the exact sum, counted in a :class:`JobTally` and judged
against its hang bound, without starting four processes for it."""

from __future__ import annotations

import json
import logging
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import stackdump
from experiment.lifecycle import ExperimentNetwork
from experiment.session import TARGET_TIMERS, AllreduceRun, RankOutcome
from protocol.netreduce import Limit
from reliability.results import JobTally
from reliability.testbed import Testbed
from workloads.innetwork import AGG_MAX_RTO, AGG_RTO

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
ANSWER_MARGIN_S = 15.0  # past the workers' own timeout before the campaign stops waiting
CLOSE_S = 10.0
JOB_IDS = Limit.JOBS  # job ids a pipeline push makes available again


def _outcome(row: dict[str, Any] | None, rank: int, host: str, missing: str) -> RankOutcome:
    """One rank's outcome from its worker's row (None: it did not answer)."""
    if row is None:
        return RankOutcome(rank, host, error=missing)
    error = row.get("error")
    if error is None and row.get("check") is not True:
        error = "result differs from the exact sum"
    return RankOutcome(rank, host, float(row.get("seconds", 0.0)), 0, row.get("check") is True,
                       int(row.get("retransmissions", 0)), error, int(row.get("timeouts", 0)),
                       int(row.get("spurious_timeouts", 0)), int(row.get("naks", 0)),
                       int(row.get("lone_timeouts", 0)))


class WorkerPool:
    """One :mod:`reliability.worker` per host of the testbed; :meth:`allreduce` runs one
    all-reduce on a new job. A worker that does not answer in time (a hang) or dies is
    replaced, with all the others, before the next all-reduce."""

    def __init__(self, bed: Testbed, rto: float | None = None,
                 max_rto: float | None = None) -> None:
        self.bed = bed
        self.hosts = [h.name for h in bed.network.topology.hosts]
        self.lab = ExperimentNetwork.around(bed.network)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.buffers: dict[str, bytes] = {}
        self.restarts = 0
        self.seed = 0
        self.log_path = bed.results / "loss-runs.jsonl"
        # The fault's drops, read from the switches' counters. A new job may push the
        # pipeline again (job ids used up, see Testbed.new_job), which zeroes them: the
        # counters are read before each new job that may do so, and the drops of each
        # stretch between pushes added up.
        self._drops_done = 0
        self._drops_base = bed.fault_drops()
        self._drops_last = self._drops_base
        low, high = TARGET_TIMERS.get(bed.network.topology.target or "", (AGG_RTO, AGG_MAX_RTO))
        self.rto = rto if rto is not None else low
        self.max_rto = max(self.rto, max_rto if max_rto is not None else high)

    def __enter__(self) -> WorkerPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        logs = self.bed.results
        for host in self.hosts:
            argv = [sys.executable, "-m", "reliability.worker", "--host", host,
                    "--elems", str(self.bed.elems), "--rto", str(self.rto),
                    "--max-rto", str(self.max_rto)]
            with (logs / f"worker-{host}.log").open("ab") as err:
                proc = self.bed.network.node(host).popen(
                    argv, cwd=str(REPO_ROOT), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=err)
            self.procs[host] = self.lab.track(proc, host)
            os.set_blocking(proc.stdout.fileno(), False)
            self.buffers[host] = b""

    def close(self) -> None:
        """End every worker's input (it closes its last agent) and reap them."""
        procs, self.procs = self.procs, {}
        for proc in procs.values():
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + CLOSE_S
        for proc in procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not end; its stacks, then SIGKILL", proc.pid)
                stackdump.dump_and_kill(proc)
            if proc.stdout is not None:
                proc.stdout.close()

    def _restart(self) -> None:
        self.restarts += 1
        for proc in self.procs.values():
            if proc.poll() is None:
                stackdump.dump_and_kill(proc)  # its stacks into its log: why it hung
        self.procs = {}
        self.close()
        self.start()

    def _send(self, request: dict[str, Any]) -> None:
        line = (json.dumps(request) + "\n").encode()
        for proc in self.procs.values():
            assert proc.stdin is not None
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
            except OSError:
                pass  # it died: it will not answer, and is replaced

    def _collect(self, deadline: float) -> dict[str, dict[str, Any]]:
        """{host: its row} for every worker that answered before ``deadline``."""
        rows: dict[str, dict[str, Any]] = {}
        sel = selectors.DefaultSelector()
        for host, proc in self.procs.items():
            assert proc.stdout is not None
            sel.register(proc.stdout, selectors.EVENT_READ, host)
        try:
            while len(rows) < len(self.procs) and (left := deadline - time.monotonic()) > 0:
                for key, _ in sel.select(min(left, 1.0)):
                    host = key.data
                    try:
                        chunk = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if not chunk:  # it ended: no answer will come
                        sel.unregister(key.fileobj)
                        continue
                    self.buffers[host] += chunk
                    while b"\n" in self.buffers[host] and host not in rows:
                        line, self.buffers[host] = self.buffers[host].split(b"\n", 1)
                        if line.startswith(b"{"):
                            rows[host] = json.loads(line)
                if sel.get_map() is not None and not sel.get_map():
                    break
        finally:
            sel.close()
        return rows

    def fault_drops(self) -> int:
        """Packets the loss fault dropped since the pool started (pipeline pushes included)."""
        return self._drops_done + self.bed.fault_drops() - self._drops_base

    def _new_job(self) -> dict[str, Any]:
        """A new job; the fault drops read first when it may push the pipeline again (the
        controller hands out the lowest free job id and a deleted job's id stays used until
        the next push, so ids climb to JOB_IDS - 1 between pushes; reading the counters
        takes most of a second, too much for every all-reduce)."""
        last = self.bed.plan.get("job_id") if self.bed.plan else None
        if last is None or int(last) >= JOB_IDS - 2:
            self._drops_last = self.bed.fault_drops()
        pushes = self.bed.pipeline_pushes
        plan = self.bed.new_job()
        if self.bed.pipeline_pushes != pushes:
            self._drops_done += self._drops_last - self._drops_base
            self._drops_base = 0
        return plan

    def allreduce(self, tally: JobTally, elements: int) -> tuple[str, AllreduceRun]:
        """One all-reduce of ``elements`` float32 per worker on a new job, counted in
        ``tally`` (the workers give up at its bound); returns (verdict, run)."""
        if not self.procs:
            self.start()
        plan = self._new_job()
        self.seed += 1
        t0 = time.monotonic()
        self._send({"plan": str(self.bed.plan_path), "seed": self.seed, "size": elements,
                    "timeout": tally.bound_s})
        rows = self._collect(t0 + tally.bound_s + ANSWER_MARGIN_S)
        wall = time.monotonic() - t0
        missing = f"no result within {tally.bound_s + ANSWER_MARGIN_S:g} s"
        outcomes = tuple(_outcome(rows.get(w["host"]), int(w["rank"]), w["host"], missing)
                         for w in sorted(plan["workers"], key=lambda w: w["rank"]))
        run = AllreduceRun("innetwork", elements, outcomes, wall_seconds=wall)
        with self.log_path.open("a") as f:  # every run's rows, for a closer look
            f.write(json.dumps({"job": plan["name"], "wall": round(wall, 4),
                                "rows": list(rows.values())}, sort_keys=True) + "\n")
        if len(rows) < len(self.procs) or any(p.poll() is not None for p in self.procs.values()):
            self._restart()
        return tally.add(run), run
