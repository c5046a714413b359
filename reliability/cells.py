"""The campaign's cells on one running :class:`~reliability.testbed.Testbed`: loss on every
link, switches SIGKILLed mid-job, a serving controller killed and restarted while jobs run,
and malformed frames plus illegal P4Runtime requests into a running switch."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stackdump
from controller.errors import ControllerError
from reliability.illegal import illegal_requests
from reliability.pool import WorkerPool
from reliability.results import BadInputCell, ControllerCell, JobTally, LossCell, RestartCell
from reliability.testbed import Testbed

log = logging.getLogger(__name__)

Tick = Callable[[str], None]  # advances the progress bar by one step, with a description
RECOVERY_TIMEOUT_S = 120.0
RESTART_JOB_TIMEOUT_S = 240.0  # a job across a switch restart: recompiling takes a while
CONTROLLER_READY_S = 60.0
RECONCILE_TIMEOUT_S = 300.0
REPO_ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- loss


def lossy_ports(bed: Testbed) -> list[tuple[str, int, str]]:
    """(switch, port, direction) so that every link direction loses once: a host link at
    its leaf port both ways, a fabric link at each end's egress."""
    kinds = {}
    for ln in bed.network.topology.links:
        kinds[(ln.node1, ln.port1)] = kinds[(ln.node2, ln.port2)] = ln.kind
    out = []
    for sw in bed.network.topology.switches:
        for p in sw.ports:
            fabric = kinds.get((sw.name, p.port)) == "fabric"
            out.append((sw.name, p.port, "out" if fabric else "both"))
    return out


def loss_cell(bed: Testbed, loss: float, count: int, tick: Tick,
              elements: int | None = None, reorder: float = 0.0,
              timers: tuple[float | None, float | None] = (None, None)) -> LossCell:
    """``count`` all-reduces of ``elements`` float32 per worker (default the testbed's) with
    ``loss`` (and ``reorder``: that share of aggregation packets held back) on every link
    direction; each on a new job, run by host workers that stay up for the cell (``timers``:
    their retransmission timer's bounds, None: the target's)."""
    elements = elements or bed.config.elements
    ports = lossy_ports(bed)
    links = sum(2 if d == "both" else 1 for _, _, d in ports)
    ctl = bed.server
    for sw, port, direction in ports:
        ctl.set_fault(sw, port, loss, direction, reorder=reorder)
    tally = JobTally(bound_s=bed.bound(elements, loss=max(loss, reorder)))
    name = f"reorder {reorder:.0%}" if reorder else f"loss {loss:.0%}"
    drops = 0
    t0 = time.monotonic()
    try:
        with WorkerPool(bed, *timers) as pool:
            try:
                for i in range(count):
                    verdict, _ = pool.allreduce(tally, elements)
                    tick(f"{name}: {i + 1}/{count} {verdict}")
            finally:
                drops = pool.fault_drops()
    finally:
        ctl.clear_faults()
    return LossCell(loss, links, tally, drops, elements, reorder=reorder,
                    target=bed.config.target, mbit=bed.config.bw_mbit,
                    seconds=round(time.monotonic() - t0, 1))


# ----------------------------------------------------------------------------- switch restart


def _kill_switch(sw: Any) -> None:
    """SIGKILL the switch's process group (it runs in its own session) and reap it."""
    try:
        os.killpg(sw.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    sw.proc.wait()


def _job_started(bed: Testbed, name: str, before: int, timeout_s: float) -> bool:
    """True once the job's contributions counter at ``name`` moved past ``before`` (the
    barrier's one-element all-reduce counts too: then the timed call starts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _contributions(bed, name) > before:
            return True
        time.sleep(0.05)
    return False


def _contributions(bed: Testbed, name: str) -> int:
    """The contributions ``name`` added to the job so far; -1 when they cannot be read."""
    rows = _job_counter_rows(bed)
    if any("error" in r for r in rows):
        return -1
    return sum(int(r.get("contributions", 0)) for r in rows if r["switch"] == name)


def _job_counter_rows(bed: Testbed) -> list[dict[str, Any]]:
    """The job's counters at every switch, or one row saying why they cannot be read."""
    try:
        return bed.controller.job_counters(bed.plan["name"])
    except ControllerError as exc:
        return [{"error": str(exc)}]


def restart_cell(bed: Testbed, count: int, rng: random.Random, tick: Tick,
                 elements: int) -> RestartCell:
    """``count`` jobs, each with one switch of its tree (leaves and the spine in turn, a
    random one of the role) SIGKILLed at a random point of the job and started again."""
    cell = RestartCell()
    cell.tally.bound_s = RESTART_JOB_TIMEOUT_S
    # how long a job takes undisturbed: the kill lands in [0.1, 0.9] of it
    base = JobTally(bound_s=bed.bound(elements))
    _, run = bed.allreduce(base, elements)
    span = max(run.seconds, 0.2)
    tree = bed.job_switches()
    roles = sorted({role for _, role in tree})
    tries = 0
    while cell.attempts < count and tries < 2 * count:
        tries += 1
        role = roles[cell.attempts % len(roles)]
        victim = rng.choice([n for n, r in tree if r == role])
        frac = rng.uniform(0.1, 0.9)
        bed.new_job()
        before = max(0, _contributions(bed, victim))
        box: dict[str, Any] = {}
        one = JobTally(bound_s=RESTART_JOB_TIMEOUT_S)  # this job's; kept when the kill came

        def job(box: dict[str, Any] = box, one: JobTally = one) -> None:
            try:
                box["verdict"], box["run"] = bed.allreduce(one, elements,
                                                           timeout_s=RESTART_JOB_TIMEOUT_S,
                                                           fresh_job=False)
            except Exception as exc:  # reported in the cell
                box["error"] = f"{type(exc).__name__}: {exc}"

        worker = threading.Thread(target=job, name="soak-restart-job", daemon=True)
        worker.start()
        record: dict[str, Any] = {"switch": victim, "role": role}
        if _job_started(bed, victim, before, 60.0):
            time.sleep(frac * span)
        record["at"] = round(frac, 2)
        record["job_running"] = worker.is_alive()
        if not record["job_running"]:
            # the job ended before the kill was due (the counter reads that find its start
            # lag on a loaded machine): no kill, another job instead
            worker.join()
            cell.missed += 1
            tick(f"restart {victim}: the job ended before {frac:.0%}, again")
            continue
        sw = bed.network.node(victim)
        seen = len(bed.events)
        t0 = time.monotonic()
        _kill_switch(sw)
        sw.start()
        sw.wait_ready()
        record["recovered"] = bed.wait_recovered(victim, seen, RECOVERY_TIMEOUT_S)
        record["recovery_s"] = round(time.monotonic() - t0, 2)
        worker.join(RESTART_JOB_TIMEOUT_S + 60.0)
        cell.tally.absorb(one)
        cell.attempts += 1
        record["verdict"] = box.get("verdict", box.get("error", "still running"))
        rows = _job_counter_rows(bed)
        # pulls and the totals answering them (docs/protocol.md section 4.3): the job's
        # counters, since the job began (the victim's since its restart)
        record["pulls"] = sum(int(r.get("pulls_sent", 0)) for r in rows)
        if box.get("verdict") == "exact":
            cell.survived += 1
        else:
            # what each switch of the job counted (drops by reason): why it did not recover
            record["counters"] = rows
        cell.kills.append(record)
        tick(f"restart {victim} at {frac:.0%}: {record['verdict']}")
    return cell


# ----------------------------------------------------------------------------- controller


def _reconcile(bed: Testbed) -> subprocess.CompletedProcess[str]:
    """``ina-controller --json reconcile`` of the testbed's run; one that does not finish
    within RECONCILE_TIMEOUT_S is asked for its threads' stacks (logged) and killed."""
    try:
        return stackdump.run([sys.executable, "-m", "controller", "--rundir", str(bed.rundir),
                              "--json", "reconcile"], RECONCILE_TIMEOUT_S, cwd=str(REPO_ROOT),
                             capture_output=True, text=True)
    except stackdump.HungProcess as hung:
        log.warning("reconcile: %s", hung)
        raise RuntimeError(f"reconcile did not finish within {RECONCILE_TIMEOUT_S:g} s "
                           f"(killed; its threads' stacks are logged)") from None


def _serve_argv(rundir: Path) -> list[str]:
    return [sys.executable, "-m", "controller", "--rundir", str(rundir), "serve"]


def _wait_serving(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """True once ``ina-controller serve`` printed its "serving" line."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    while time.monotonic() < deadline and proc.poll() is None:
        chunk = proc.stdout.read()
        if chunk:
            buf += chunk
            if b"serving" in buf:
                return True
        time.sleep(0.05)
    return False


def controller_cell(bed: Testbed, restarts: int, rng: random.Random, tick: Tick) -> ControllerCell:
    """``ina-controller serve`` (a process of its own) SIGKILLed and started again
    ``restarts`` times while all-reduces run back to back; then ``ina-controller
    reconcile`` must find nothing to write."""
    cell = ControllerCell()
    cell.tally.bound_s = bed.bound()
    bed.stop_serving()
    done = threading.Event()

    def jobs() -> None:
        while not done.is_set():
            try:
                bed.allreduce(cell.tally)
            except Exception as exc:  # reported in the cell
                cell.errors.append(f"all-reduce: {type(exc).__name__}: {exc}")
                done.wait(1.0)

    runner = threading.Thread(target=jobs, name="soak-controller-jobs", daemon=True)
    runner.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        for i in range(restarts):
            t0 = time.monotonic()
            proc = subprocess.Popen(_serve_argv(bed.rundir), cwd=str(REPO_ROOT),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            if not _wait_serving(proc, CONTROLLER_READY_S):
                cell.errors.append(f"restart {i + 1}: serve did not start")
                if proc.poll() is None:
                    out, _ = stackdump.dump_and_kill(proc)
                    log.warning("serve did not start; its output and threads' stacks:\n%s",
                                (out or b"").decode(errors="replace")[-20000:])
            # killed at a random moment: during its first reconcile or while it serves
            time.sleep(rng.uniform(0.0, 3.0))
            proc.kill()
            proc.wait()
            proc = None
            cell.restarts += 1
            cell.serve_seconds.append(round(time.monotonic() - t0, 2))
            tick(f"controller restart {i + 1}/{restarts}: {cell.tally.count} jobs, "
                 f"{cell.tally.exact} exact")
        # one more job after the last kill, then stop (not waiting for ever when every
        # all-reduce fails: those are reported in the cell)
        target = cell.tally.count + 1
        deadline = time.monotonic() + cell.tally.bound_s + 60.0
        while cell.tally.count < target and runner.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        done.set()
        if proc is not None:
            proc.kill()
            proc.wait()
        runner.join(cell.tally.bound_s + 60.0)
    res = _reconcile(bed)
    try:
        rows = json.loads(res.stdout)
        cell.reconcile_changes = sum(r["inserted"] + r["modified"] + r["deleted"] for r in rows)
        cell.reconcile_pushed = sum(1 for r in rows if r["pipeline_pushed"])
    except (ValueError, KeyError, TypeError):
        cell.errors.append(f"reconcile: exit {res.returncode}: {res.stderr.strip()[-300:]}")
    bed.start_serving()
    return cell


# ----------------------------------------------------------------------------- bad input


def _kernel_rx(intf: str) -> int:
    return int(Path(f"/sys/class/net/{intf}/statistics/rx_packets").read_text())


def bad_input_cell(bed: Testbed, frames: int, rate_pps: float, seed: int,
                   tick: Tick) -> BadInputCell:
    """``frames`` malformed frames from the first host into its leaf, then illegal
    P4Runtime requests to that leaf; then an all-reduce must still be exact, the leaf's
    counters must account for every frame, and a reconcile must find nothing to write."""
    topo = bed.network.topology
    host = topo.hosts[0]
    leaf = topo.switch(host.switch)
    port = leaf.ports[[p.peer for p in leaf.ports].index(host.name)]
    cell = BadInputCell(switch=leaf.name, port=port.port)
    before = bed.switch_counters(leaf.name)
    krx0 = _kernel_rx(port.intf)
    argv = [sys.executable, "-m", "reliability.frames", "--iface", host.intf, "--count",
            str(frames), "--rate", str(rate_pps), "--src-mac", host.mac, "--dst-mac",
            port.mac, "--src-ip", host.ip, "--dst-ip", topo.hosts[1].ip, "--seed", str(seed)]
    proc = bed.popen(host.name, argv)
    tick(f"{frames} malformed frames into {leaf.name} port {port.port}")
    try:
        out, err = stackdump.communicate(proc, frames / rate_pps * 3 + 120)
    except stackdump.HungProcess as hung:
        log.warning("frame sender: %s", hung)
        raise RuntimeError(f"the frame sender did not finish within {hung.timeout:g} s "
                           f"(killed; its threads' stacks are logged)") from None
    if proc.returncode != 0:
        raise RuntimeError(f"frame sender failed: {err.decode(errors='replace').strip()[-300:]}")
    sent = json.loads(out.decode().strip().splitlines()[-1])
    cell.frames_sent, cell.kinds = int(sent["sent"]), dict(sent["kinds"])
    # the switch works through its socket buffer: wait until it counted every frame the
    # kernel took in on its port, else until its counter stops moving (3 s unchanged: a
    # switch that lost some; the cell reports the difference)
    rx0 = before["ports"].get(port.port, {}).get("rx_packets", 0)
    last, still = -1, 0
    while still < 10:
        now = bed.switch_counters(leaf.name)["ports"].get(port.port, {}).get("rx_packets", 0)
        if now - rx0 >= _kernel_rx(port.intf) - krx0:
            break
        still = still + 1 if now == last else 0
        last = now
        time.sleep(0.3)
    after = bed.switch_counters(leaf.name)
    cell.kernel_rx = _kernel_rx(port.intf) - krx0
    cell.port_rx = (after["ports"][port.port]["rx_packets"]
                    - before["ports"].get(port.port, {}).get("rx_packets", 0))
    for key, n in after["drops"].items():
        d = n - before["drops"].get(key, 0)
        if d:
            cell.dropped[key] = d
    # the whole switch balances: what came in on any port was dropped or sent (replies of
    # the hosts to frames that were forwarded, ICMP say, come in on other ports)
    cell.switch_rx = sum(after["ports"][p]["rx_packets"]
                         - before["ports"].get(p, {}).get("rx_packets", 0)
                         for p in after["ports"])
    cell.forwarded = sum(after["ports"][p]["tx_packets"]
                         - before["ports"].get(p, {}).get("tx_packets", 0)
                         for p in after["ports"])
    tick("illegal P4Runtime requests")
    cell.requests = illegal_requests(bed.rundir, leaf.name)
    cell.alive_after = bed.network.node(leaf.name).is_running()
    cell.after.bound_s = bed.bound()
    verdict, _ = bed.allreduce(cell.after)
    tick(f"all-reduce after the abuse: {verdict}")
    res = _reconcile(bed)
    try:
        cell.reconcile_changes = sum(r["inserted"] + r["modified"] + r["deleted"]
                                     for r in json.loads(res.stdout))
    except (ValueError, KeyError, TypeError):
        cell.reconcile_changes = -1
    return cell
