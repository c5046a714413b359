"""Soak of in-network all-reduces through real switch processes (issue 16): BMv2
(``simple_switch_grpc``) or the built-in target, on a Mininet spine-leaf.

The in-process soak (:mod:`bench.netreduce_soak`) can only drive built-in pipelines. This
one starts a network (one spine, two leaves, two single-worker hosts per leaf, like the
in-process one), lets the controller program it, sets loss and/or reordering on every
link direction once (the program's ``port_loss``/``port_reorder`` tables through the
controller's fault API: ``out`` on every switch port, plus ``in`` on host ports), creates
a job, and runs :func:`worker` (``python -m bench.netreduce_soak_net worker``) inside
every host: ``count`` all-reduces of fresh int32 inputs each, every one compared with the
exact sum. Each worker prints one JSON line; :func:`soak_cell` adds them up.

Needs root and Mininet; BMv2 needs ``simple_switch_grpc`` and ``p4c`` (to compile the
program). ``python -m bench.netreduce_soak_net run --target bmv2 --count 100 --loss 0.05``
runs one cell by hand.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench.netreduce_soak import SOAK_MAX_RTO, SOAK_RTO, SoakResult

log = logging.getLogger(__name__)

ELEMS = 32
CREDITS = 2
MSG_PKTS = 4  # 256 values: 8 packets, 2 messages, as in the in-process soak
VALUES = 256
DUPLICATES = "SwitchIngress.agg.duplicates"
REORDERED = ("SwitchIngress.reorder.reordered", "SwitchEgress.reorder.reordered")


def inputs(seed: int, index: int, workers: int, values: int) -> np.ndarray:
    """All workers' int32 inputs of all-reduce ``index`` (every process computes the same)."""
    rng = np.random.default_rng([seed, index])
    return rng.integers(-(2**20), 2**20, size=(workers, values), dtype=np.int32)


# ------------------------------------------------------------------ inside a host


def worker(job_path: str, host: str, count: int, *, seed: int, values: int, rto: float,
           max_rto: float, timeout: float) -> list[dict[str, Any]]:
    """The host's ranks run ``count`` all-reduces, each checked; one summary per rank."""
    from workloads.agent import HostAgent, load_job, local_ranks

    job = load_job(job_path, elems=ELEMS)
    ranks = local_ranks(job, host, None)
    agent = HostAgent(job, ranks, rto=rto, max_rto=max_rto, dead_after=timeout,
                      timeout=timeout)

    def work(rank: int, ch: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"rank": rank, "completed": 0, "wrong": 0, "error": None}
        start = time.monotonic()
        try:
            for i in range(count):
                x = inputs(seed, i, job.size, values)
                got, _overflow = ch.allreduce_int32(x[rank])
                want = x.astype(np.int64).sum(axis=0).astype(np.int32)
                if not np.array_equal(got, want):
                    row["wrong"] += 1
                row["completed"] += 1
        except Exception as err:  # a hang or a dead connection: reported, not raised
            row["error"] = f"rank {rank} after {row['completed']} all-reduces: {err}"
        row["seconds"] = round(time.monotonic() - start, 3)
        with agent.endpoint.cv:
            row["retransmitted"] = ch.req.stats.retransmitted
            row["timeouts"] = ch.req.stats.timeouts
            row["duplicates"] = ch.resp.stats.duplicates
        return row

    try:
        return list(agent.run(work, timeout=timeout * (count + 1)).values())
    finally:
        agent.close()


# ------------------------------------------------------------------ the network


@contextmanager
def spine_leaf(target: str, rundir: Path, *, egress_order: str = "sync", seed: int | None = None,
               name_prefix: str = "ns", grpc_base: int | None = None) -> Iterator[tuple[Any, Any]]:
    """The running, programmed spine-leaf (network, controller); always taken down."""
    from experiment.lifecycle import ExperimentNetwork, StartOptions
    from experiment.matrix import free_grpc_base, program_for
    from topo.topofile import load_spec
    from topo.topologies import FileTopo, shipped_file

    # gRPC and Thrift (BMv2) ports found free, away from make run's defaults
    base = grpc_base if grpc_base is not None else free_grpc_base(6, start=27600)
    spec = load_spec(shipped_file("spineleaf"), {"spines": 1, "leaves": 2, "hosts": 2,
                                                 "gpus": 1, "bw": None})
    topo = FileTopo(spec, grpc_base_port=base, thrift_base_port=base + 3,
                    name_prefix=name_prefix)
    program = program_for(ELEMS, rundir / "program")
    start = StartOptions(egress_order=egress_order, seed=seed)
    with ExperimentNetwork(topo, target, rundir / "run", program, start=start) as lab:
        yield lab.network, lab.controller


def set_faults(controller: Any, loss: float, reorder: float) -> int:
    """Loss/reordering once on every link direction: egress of every switch port, and
    ingress of the ports that face hosts. Returns the ports configured."""
    hosts = {h.name for h in controller.topology.hosts}
    n = 0
    for sw in controller.topology.switches:
        for port in sw.ports:
            direction = "both" if port.peer in hosts else "out"
            controller.set_fault(sw.name, port.port, loss, direction, reorder=reorder)
            n += 1
    return n


def soak_cell(network: Any, controller: Any, count: int, *, loss: float = 0.0,
              reorder: float = 0.0, seed: int = 7, values: int = VALUES, rto: float = SOAK_RTO,
              max_rto: float = SOAK_MAX_RTO, timeout: float = 60.0,
              workdir: Path | None = None, label: str = "") -> SoakResult:
    """One cell on a running network: faults on every link, a fresh job, ``count`` checked
    all-reduces on every host; faults cleared and the job deleted afterwards."""
    from controller.jobs import JobRequest
    from experiment.lifecycle import ExperimentNetwork
    from experiment.seams import json_int

    res = SoakResult(loss=loss, reorder=reorder, egress_order=label, count=count)
    hosts = tuple(h.name for h in network.topology.hosts)
    name = f"soak{int(time.monotonic() * 1000) % 100000}"
    workdir = Path(workdir or network.rundir.path) / "soak"
    workdir.mkdir(parents=True, exist_ok=True)
    plan = controller.create_job(JobRequest(name, hosts, credits=CREDITS,
                                            slots=CREDITS * MSG_PKTS, msg_pkts=MSG_PKTS))
    path = workdir / f"job-{name}.json"
    path.write_text(json.dumps(plan.to_dict(), indent=1, sort_keys=True) + "\n")
    lab = ExperimentNetwork.around(network, controller)
    duplicates_before = _counted(controller, DUPLICATES)
    held_before = _counted(controller, *REORDERED)
    start = time.monotonic()
    try:
        if loss or reorder:
            set_faults(controller, loss, reorder)
        argv = [sys.executable, "-m", "bench.netreduce_soak_net", "worker", "--job", str(path),
                "--count", str(count), "--seed", str(seed), "--values", str(values),
                "--rto", str(rto), "--max-rto", str(max_rto), "--timeout", str(timeout)]
        results = lab.run_processes({h: (h, argv + ["--host", h]) for h in hosts},
                                    timeout * (count + 1) + 60.0)
    finally:
        lab.stop()  # its processes only: the network and controller are the caller's
        res.seconds = time.monotonic() - start
        controller.clear_faults()
        try:
            controller.delete_job(name)
        except Exception as exc:  # reported; the next cell uses a fresh job anyway
            log.warning("could not delete job %s: %s", name, exc)
    done = []
    for host, rows in results.items():
        if isinstance(rows, str):
            res.errors.append(f"{host}: {rows}")
            res.hangs = 1
            done.append(0)
            continue
        for row in rows:
            done.append(json_int(row["completed"]))
            res.wrong = max(res.wrong, json_int(row["wrong"]))
            res.retransmitted += json_int(row["retransmitted"])
            res.timeouts += json_int(row["timeouts"])
            res.duplicates_at_workers += json_int(row["duplicates"])
            if row.get("error"):
                res.errors.append(str(row["error"]))
                res.hangs = 1
    res.completed = min(done) if done else 0
    if res.completed < count:
        res.hangs = 1
    res.duplicates_at_switches = _counted(controller, DUPLICATES) - duplicates_before
    res.held = _counted(controller, *REORDERED) - held_before
    return res


def _counted(controller: Any, *names: str) -> int:
    """Packets counted by these counters over all indices and switches."""
    return sum(packets for sw in controller.topology.switches
               for counter in controller.read_counters(sw.name, names).values()
               for packets, _bytes in counter.values())


# ------------------------------------------------------------------ command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.netreduce_soak_net",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="inside a host: run and check the all-reduces")
    w.add_argument("--job", required=True)
    w.add_argument("--host", required=True)
    r = sub.add_parser("run", help="start a spine-leaf and run one cell (root)")
    r.add_argument("--target", choices=("softswitch", "bmv2"), default="bmv2")
    r.add_argument("--egress-order", choices=("sync", "fifo", "random"), default="sync")
    r.add_argument("--loss", type=float, default=0.0)
    r.add_argument("--reorder", type=float, default=0.0)
    r.add_argument("--rundir", type=Path, default=Path("run") / "soak-net")
    for p in (w, r):
        p.add_argument("--count", type=int, default=100)
        p.add_argument("--seed", type=int, default=7)
        p.add_argument("--values", type=int, default=VALUES)
        p.add_argument("--rto", type=float, default=SOAK_RTO)
        p.add_argument("--max-rto", type=float, default=SOAK_MAX_RTO)
        p.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    for name in ("count", "values", "rto", "max_rto", "timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.cmd == "run":
        for name in ("loss", "reorder"):
            if not 0 <= getattr(args, name) <= 1:
                parser.error(f"--{name} must be in 0..1, got {getattr(args, name)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.cmd == "worker":
        for row in worker(args.job, args.host, args.count, seed=args.seed, values=args.values,
                          rto=args.rto, max_rto=args.max_rto, timeout=args.timeout):
            print(json.dumps(row, sort_keys=True), flush=True)
        return 0
    seed = args.seed if args.egress_order == "random" else None
    with spine_leaf(args.target, args.rundir, egress_order=args.egress_order,
                    seed=seed) as (network, controller):
        res = soak_cell(network, controller, args.count, loss=args.loss, reorder=args.reorder,
                        seed=args.seed, values=args.values, rto=args.rto,
                        max_rto=args.max_rto, timeout=args.timeout,
                        label=args.target if args.target == "bmv2"
                        else f"{args.target} {args.egress_order}")
    print(res)
    return 1 if res.wrong or res.hangs else 0


if __name__ == "__main__":
    raise SystemExit(main())
