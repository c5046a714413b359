"""Command line of the host workloads, for Mininet hosts and scripts.

    python -m workloads allreduce --algo ring --rank 0 --peers 10.0.0.1:5000,10.0.0.2:5000 \\
        --size 100000
    python -m workloads allreduce --algo innetwork --job plan.json --host h1 --size 100000 --check
    python -m workloads replay --model resnet50 --scale 100 --algo ring --rank 0 --peers ... \\
        --out r0.json
    python -m workloads plot results/*.json --out replay.png

TCP algorithms (ring, torus, hier, topk, hybrid) run one process per rank and need every
rank's ``host:port``. Their RoCE v2 versions (ring-roce, torus-roce, hier-roce) run one
process per host address (its UDP port, 4791 on a network, is shared by the ranks there):
``--rank`` lists the host's ranks and ``--peers`` gives every rank's ``host:port``.
In-network runs one agent per host (it owns UDP port 4791) serving all the
host's workers of the job plan (``python -m controller job show NAME --json > plan.json``);
``--hierarchical`` sums ``--gpus`` modelled GPUs per host first over ``--intra-bw``.
Inputs are deterministic per rank (``--seed``), so ``--check`` can verify the result exactly.
``--tdf N`` runs the host side of a time-dilated experiment (the links carry bw/N): every
duration given (``--timeout``, ``--rto``, ``--max-rto``, ``--dead-after``,
``--intra-latency``) is in emulated seconds, and every time reported is emulated, with the
factor (``tdf``) and the real seconds beside it.
Exit status: 0 success, 1 a check failed, 2 bad usage or a failed run.
The experiment matrix that starts a network and runs these over it is ``python -m experiment
matrix`` (``make experiments``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.random import default_rng

import stackdump
from algorithms import registry
from protocol.netreduce import PROGRAM_ELEMS
from vtime import VirtualClock, parse_tdf, rate_arg
from workloads.agent import HostAgent, load_job, local_ranks
from workloads.comm import CommError, Communicator, PointToPoint
from workloads.errors import WorkloadError
from workloads.innetwork import (
    AGG_MAX_RTO,
    AGG_RTO,
    AggregationChannel,
    IntraHost,
    hierarchical_allreduce,
    innetwork_allreduce,
)
from workloads.profiles import PROFILES, get_profile, scaled_flops_per_s
from workloads.replay import ReplayConfig, make_reducer, replay
from workloads.results import (
    CpuLoad,
    CpuMeter,
    RunRecord,
    cpu_saturated,
    plot,
    read_json,
    write_json,
)
from workloads.roce import CC_STARTS, ROCE_V2_PORT, SLOW_START
from workloads.rocecomm import (
    DEFAULT_MAX_RTO,
    DEFAULT_RTO,
    DEFAULT_WINDOW,
    RoceCommunicator,
    open_ranks,
    run_local,
)
from workloads.schedule import SPARSE, make_schedule
from workloads.sparse import block_hosts, hitopk_reference

log = logging.getLogger("workloads")
T = TypeVar("T")

TCP_ALGOS = registry.names(transport=registry.TCP)
ROCE_ALGOS = registry.names(transport=registry.ROCE)
ALL_ALGOS = TCP_ALGOS + ROCE_ALGOS + ("innetwork",)


def parse_algo(text: str) -> str:
    """``--algo``: a registry name or alias, as its canonical name (one of ALL_ALGOS)."""
    try:
        name = registry.canonical(text)
    except registry.UnknownAlgorithmError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if name not in ALL_ALGOS:
        raise argparse.ArgumentTypeError(
            f"--algo {text}: choose one of {', '.join(ALL_ALGOS)} (innetwork-hier is "
            "innetwork with --hierarchical)")
    return name


class UsageError(WorkloadError, ValueError):
    """Bad command-line input (reported without a traceback)."""


#: NVLink 2.0 on a V100: 150 GB/s per GPU (bits/s, as every rate of the testbed).
DEFAULT_INTRA_BW_BPS = 150e9 * 8


def intra_host(args: argparse.Namespace) -> IntraHost:
    """The modelled intra-host link of ``--hierarchical``: ``--intra-bw`` is bits/s (units as
    every rate: ``150GB/s``, ``1.2T``), :class:`IntraHost` counts bytes/s."""
    return IntraHost(args.intra_bw / 8, args.intra_latency)


def parse_tdf_arg(text: str) -> float:
    """``--tdf``: a time-dilation factor >= 1."""
    try:
        return parse_tdf(text, "--tdf")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_peers(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"peer {item!r} is not HOST:PORT")
        out.append((host, int(port)))
    return out


def make_input(rank: int, size: int, dtype: str, seed: int) -> np.ndarray:
    """Rank ``rank``'s deterministic input; floats lie on a 2^-8 grid so every algorithm's
    sum is exact and comparable bit for bit."""
    rng = default_rng(seed * 100003 + rank)
    if dtype == "int32":
        return rng.integers(-(2**16), 2**16, size=size, dtype=np.int32)
    return (rng.integers(-(2**12), 2**12, size=size) / 256.0).astype(np.float32)


def expected_result(args: argparse.Namespace, workers: int) -> np.ndarray:
    xs = [make_input(r, args.size, args.dtype, args.seed) for r in range(workers)]
    if args.algo in ("topk", "hybrid"):
        hosts = block_hosts(workers, args.gpus_per_host)
        sched = make_schedule(args.sparse_epochs, args.density, hosts)
        if args.algo == "topk" or sched.mode(args.epoch) == SPARSE:
            return hitopk_reference(xs, hosts, args.density)
    total = xs[0].copy()
    for x in xs[1:]:
        total = total + x
    return total


# ------------------------------------------------------------------- all-reduce


def _tcp_comm(args: argparse.Namespace, clock: VirtualClock) -> Communicator:
    if args.rank is None or not args.peers:
        raise UsageError(f"--algo {args.algo} needs --rank and --peers")
    peers = parse_peers(args.peers)
    if len(args.rank) != 1:
        raise UsageError(f"--rank {','.join(map(str, args.rank))}: a TCP rank runs alone "
                         "(one process per rank)")
    rank = args.rank[0]
    try:
        return Communicator(rank, peers, timeout=args.timeout, connect_timeout=args.timeout,
                            clock=clock)
    except CommError as err:
        raise UsageError(f"cannot connect rank {rank}: {err}") from None


def _run_p2p(args: argparse.Namespace, clock: VirtualClock,
             work: Callable[[PointToPoint], T]) -> list[T]:
    """``work(comm)`` for this process's ranks: the one TCP rank, or every local RoCE rank
    (in threads, sharing the host's endpoint, which is drained and closed afterwards)."""
    if args.algo in TCP_ALGOS:
        with _tcp_comm(args, clock) as comm:
            return [work(comm)]
    if args.rank is None or not args.peers:
        raise UsageError(f"--algo {args.algo} needs --rank and --peers")
    peers = parse_peers(args.peers)
    try:
        host, comms = open_ranks(args.rank, peers, clock=clock, timeout=args.timeout,
                                 window=args.window or DEFAULT_WINDOW,
                                 rto=DEFAULT_RTO if args.rto is None else args.rto,
                                 max_rto=DEFAULT_MAX_RTO if args.max_rto is None
                                 else args.max_rto, start=args.cc_start)
    except ValueError as err:
        raise UsageError(str(err)) from None
    with host:
        return run_local(comms, work, args.timeout * (max(1, getattr(args, "iters", 1)) + 2))


def _transport_counts(comm: PointToPoint) -> dict[str, int]:
    """A RoCE rank's retransmissions, timeouts and NAKs (TCP's are the kernel's: none)."""
    return comm.transport_stats() if isinstance(comm, RoceCommunicator) else {}


def _agent(args: argparse.Namespace, clock: VirtualClock) -> HostAgent:
    if not args.job:
        raise UsageError("--algo innetwork needs --job PLAN.json (controller job show --json)")
    job = load_job(args.job, elems=args.elems, first_psn=args.first_psn)
    ranks = local_ranks(job, args.host, args.rank)
    bind = (args.bind, args.port) if args.bind else None
    return HostAgent(job, ranks, bind=bind, rto=AGG_RTO if args.rto is None else args.rto,
                     max_rto=AGG_MAX_RTO if args.max_rto is None else args.max_rto,
                     dead_after=args.dead_after,
                     timeout=args.timeout, window=args.window, clock=clock,
                     start=args.cc_start)


def _summary(algo: str, rank: int, workers: int, stats: list[Any], ok: bool | None,
             load: CpuLoad, tdf: float) -> dict[str, Any]:
    """One rank's row: ``seconds`` emulated (per timed call), ``real_seconds`` the same
    intervals on the machine's clock, ``tdf`` the factor between them; CPU use is real."""
    cpu = load.utilization
    return {
        "algorithm": algo, "rank": rank, "workers": workers,
        "elements": stats[0].elements if stats else 0,
        "seconds": [round(s.seconds, 6) for s in stats],
        "real_seconds": [round(s.seconds * tdf, 6) for s in stats],
        "tdf": tdf,
        "bytes_sent": sum(s.bytes_sent for s in stats),
        "payload_sent": sum(s.payload_sent for s in stats),
        "retransmissions": sum(getattr(s, "retransmissions", 0) for s in stats),
        "timeouts": sum(getattr(s, "timeouts", 0) for s in stats),
        "spurious_timeouts": sum(getattr(s, "spurious_timeouts", 0) for s in stats),
        "lone_timeouts": sum(getattr(s, "lone_timeouts", 0) for s in stats),
        "naks": sum(getattr(s, "naks", 0) for s in stats),
        "check": ok, "cpu_utilization": round(cpu, 3),
        "cpu_seconds": round(load.cpu_seconds, 3),
        "cpu_saturated": cpu_saturated(load),
    }


def _p2p_allreduce(args: argparse.Namespace, clock: VirtualClock) -> list[dict[str, Any]]:
    """This process's ranks' timed all-reduces over TCP or RoCE (ring, torus, hybrid ...):
    one summary per rank."""

    def work(comm: PointToPoint) -> dict[str, Any]:
        reducer = make_reducer(args.algo, comm=comm, gpus_per_host=args.gpus_per_host,
                               density=args.density, sparse_epochs=args.sparse_epochs)
        x = make_input(comm.rank, args.size, args.dtype, args.seed)
        stats, result = [], x
        comm.barrier()
        before = _transport_counts(comm)
        meter = CpuMeter(clock)
        for i in range(args.iters):
            result, st = reducer(x, args.epoch if args.algo == "hybrid" else i, 0)
            stats.append(st)
        load = meter.stop()
        after = _transport_counts(comm)
        ok = bool(np.array_equal(result, expected_result(args, comm.size))) \
            if args.check else None
        comm.barrier()
        row = _summary(args.algo, comm.rank, comm.size, stats, ok, load, clock.tdf)
        row.update({k: v - before[k] for k, v in after.items()})
        if after:  # everything resent, the barriers included
            row["retransmissions_all"] = _transport_counts(comm)["retransmissions"]
        if isinstance(comm, RoceCommunicator):
            row["rtt_min_us"] = round(comm.smallest_rtt() * 1e6, 3)
        return row

    return _run_p2p(args, clock, work)


def _innetwork_allreduce(args: argparse.Namespace, clock: VirtualClock) -> list[dict[str, Any]]:
    """The timed in-network all-reduces of this agent's workers: one summary per worker."""
    rows: list[dict[str, Any]] = []
    with _agent(args, clock) as agent:
        workers = agent.job.size * (args.gpus if args.hierarchical else 1)
        intra = intra_host(args)

        def work(rank: int, ch: AggregationChannel
                 ) -> tuple[np.ndarray | None, list[Any], CpuLoad]:
            stats, result = [], None
            if args.barrier:
                # Like the TCP barrier: a one-element all-reduce lines every worker up,
                # so the timed calls do not include the other agents' start-up.
                innetwork_allreduce(ch, np.zeros(1, np.int32))
            # the inputs are made before the meter starts, as the TCP ranks' are: it
            # measures the all-reduce, not the making of its input
            local = [make_input(rank * args.gpus + g, args.size, args.dtype, args.seed)
                     for g in range(args.gpus)] if args.hierarchical else []
            x = None if args.hierarchical else make_input(rank, args.size, args.dtype,
                                                           args.seed)
            meter = CpuMeter(clock)  # the whole process (all local workers)
            for _ in range(args.iters):
                if x is None:
                    result, st = hierarchical_allreduce(ch, local, intra)
                else:
                    result, st = innetwork_allreduce(ch, x)
                stats.append(st)
            return result, stats, meter.stop()

        out = agent.run(work, timeout=args.timeout * max(1, args.iters))
        expected = expected_result(args, workers) if args.check else None
        for rank, (got, stats, load) in sorted(out.items()):
            ok = (got is not None and bool(np.array_equal(got, expected))
                  if expected is not None else None)
            rows.append(_summary("innetwork-hier" if args.hierarchical else "innetwork",
                                 rank, workers, stats, ok, load, clock.tdf))
    # everything the transport resent in this process, the barrier and the final drain
    # included: with nothing lost each one reaches the switch as a duplicate
    for row in rows:
        req = agent.channels[row["rank"]].req
        row["retransmissions_all"] = req.stats.retransmitted
        # the smallest round trip the worker's connection sampled (emulated, us)
        row["rtt_min_us"] = round(req.stats.rtt_min * 1e6, 3)
    return rows


def cmd_allreduce(args: argparse.Namespace) -> int:
    """Every rank (or agent) lines up at a barrier, then the timed calls run; CPU use is
    measured over the timed calls only (not imports, connection set-up or the check)."""
    clock = VirtualClock(args.tdf)
    if args.algo in TCP_ALGOS + ROCE_ALGOS:
        rows = _p2p_allreduce(args, clock)
    else:
        rows = _innetwork_allreduce(args, clock)
    for row in rows:
        print(json.dumps(row, sort_keys=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, sort_keys=True)
    return 1 if any(r["check"] is False for r in rows) else 0


# ------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    profile = get_profile(args.model, args.scale)
    config = ReplayConfig(iterations=args.iters, warmup=args.warmup,
                          bucket_bytes=int(args.bucket_mb * 1e6),
                          flops_per_s=args.flops or scaled_flops_per_s(args.scale),
                          seed=args.seed, timeout=args.timeout)
    clock = VirtualClock(args.tdf)
    records: list[RunRecord] = []
    if args.algo in TCP_ALGOS + ROCE_ALGOS:

        def p2p_work(comm: PointToPoint) -> RunRecord:
            reducer = make_reducer(args.algo, comm=comm, gpus_per_host=args.gpus_per_host,
                                   density=args.density, sparse_epochs=args.sparse_epochs,
                                   iters_per_epoch=args.iters_per_epoch)
            record = replay(profile, reducer, config, algorithm=args.algo, rank=comm.rank,
                            workers=comm.size, barrier=comm.barrier, scale=args.scale,
                            clock=clock)
            comm.barrier()
            return record

        records.extend(_run_p2p(args, clock, p2p_work))
    else:
        algo = "innetwork-hier" if args.hierarchical else "innetwork"
        intra = intra_host(args)
        with _agent(args, clock) as agent:
            workers = agent.job.size * (args.gpus if args.hierarchical else 1)

            def work(rank: int, ch: AggregationChannel) -> RunRecord:
                reducer = make_reducer(algo, channel=ch, gpus_per_host=args.gpus, intra=intra)
                # A one-element all-reduce lines every worker up before the clock starts.
                return replay(profile, reducer, config, algorithm=algo, rank=rank,
                              workers=workers, scale=args.scale, clock=clock,
                              barrier=lambda: innetwork_allreduce(ch, np.zeros(1, np.int32)))

            records.extend(r for _, r in sorted(agent.run(work).items()))
    for r in records:
        print(json.dumps({"algorithm": r.algorithm, "model": r.model, "rank": r.rank,
                          "iteration_s": round(r.mean_iteration_s, 6),
                          "comm_s": round(r.mean_comm_s, 6), "compute_s": round(r.compute_s, 6),
                          "real_iteration_s": round(r.mean_iteration_s * r.tdf, 6),
                          "cpu_utilization": round(r.cpu_utilization, 3),
                          "retransmissions": r.retransmissions,
                          "tdf": r.tdf, "network_bound": r.network_bound}, sort_keys=True))
    # "time" is when the file was written (a wall-clock stamp, not a measurement)
    meta = {"argv": sys.argv[1:], "time": time.time(), "tdf": clock.tdf}
    if args.out:
        write_json(args.out, records, meta)
    if args.plot:
        plot(records, args.plot, f"{args.model} /{args.scale:g}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    records = read_json(args.files)
    out = plot(records, args.out, args.title)
    print(out)
    return 0


# ------------------------------------------------------------------- parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algo", type=parse_algo, required=True,
                   help=f"one of {', '.join(ALL_ALGOS)} (or an alias: ina, hitopk, ...)")
    p.add_argument("--rank", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="this process's rank (TCP) or the local ranks served (RoCE, "
                   "in-network)")
    p.add_argument("--peers", help="TCP and RoCE: HOST:PORT of every rank, in rank order")
    p.add_argument("--gpus-per-host", type=int, default=1,
                   help="TCP and RoCE: consecutive ranks per host (torus rows, hierarchical "
                   "ring hosts, top-k hosts)")
    p.add_argument("--density", type=float, default=0.01, help="top-k density")
    p.add_argument("--sparse-epochs", type=int, default=1, help="hybrid: sparse epochs")
    p.add_argument("--job", help="in-network: the job plan JSON")
    p.add_argument("--host", help="in-network: serve this host's workers of the job")
    p.add_argument("--bind", help="in-network: bind address (default: the host's job IP)")
    p.add_argument("--port", type=int, default=ROCE_V2_PORT)
    p.add_argument("--elems", type=int, default=None,
                   help="NR_ELEMS of the switch program (default: the job plan's, else "
                        f"{PROGRAM_ELEMS}); given, it must agree with the plan")
    p.add_argument("--first-psn", type=lambda s: int(s, 0), default=0)
    p.add_argument("--rto", type=float, default=None,
                   help="in-network and RoCE: lowest retransmission timeout (emulated s; "
                        f"default in-network {AGG_RTO:g}, RoCE {DEFAULT_RTO:g})")
    p.add_argument("--max-rto", type=float, default=None,
                   help="in-network and RoCE: highest retransmission timeout and backoff "
                        f"(emulated s; default in-network {AGG_MAX_RTO:g}, RoCE "
                        f"{DEFAULT_MAX_RTO:g})")
    p.add_argument("--window", type=int, default=None,
                   help="in-network and RoCE: packets in flight per connection (default: the "
                        f"job's credits x packets per message; RoCE {DEFAULT_WINDOW})")
    p.add_argument("--cc-start", choices=CC_STARTS, default=SLOW_START,
                   help="in-network and RoCE: where the congestion window starts: slow (slow "
                   "start from two ACK intervals, the default) or line (the whole window at "
                   "once, as RoCE NICs start at line rate; the papers' and ns-3's setting)")
    p.add_argument("--dead-after", type=float, default=None,
                   help="in-network: fail a connection after this long without progress "
                        "(emulated s; default 30 s of real time, however dilated)")
    p.add_argument("--hierarchical", action="store_true",
                   help="in-network: reduce --gpus modelled GPUs inside the host first")
    p.add_argument("--gpus", type=int, default=1, help="hierarchical: GPUs per host")
    p.add_argument("--intra-bw", type=rate_arg, default=DEFAULT_INTRA_BW_BPS, metavar="RATE",
                   help="hierarchical: rate between a host's GPUs, per GPU: 150GB/s (bytes), "
                   "1.2T (bits; a bare number is Mbit/s); default 150GB/s")
    p.add_argument("--intra-latency", type=float, default=0.0,
                   help="hierarchical: intra-host seconds per step (emulated)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="bound of every wait, connection and run (emulated s)")
    p.add_argument("--tdf", type=parse_tdf_arg, default=1.0,
                   help="time-dilation factor: the emulated world runs this many times slower "
                        "than real time (links at bw/TDF); durations given and reported are "
                        "emulated (default 1: real time)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workloads",
                                     description="Host workloads of the INA testbed.")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("allreduce", help="all-reduce a synthetic tensor")
    _common(a)
    a.add_argument("--size", type=int, required=True, help="elements per worker")
    a.add_argument("--dtype", choices=("float32", "int32"), default="float32")
    a.add_argument("--iters", type=int, default=1)
    a.add_argument("--epoch", type=int, default=0, help="hybrid: the epoch to run")
    a.add_argument("--check", action="store_true", help="compare with the exact result")
    a.add_argument("--barrier", action="store_true",
                   help="in-network: a one-element all-reduce before the clock starts (TCP "
                        "ranks always meet at a barrier); off by default so that the switch "
                        "counters count exactly the tensor's packets")
    a.add_argument("--json", help="write the per-rank summary here")
    a.set_defaults(func=cmd_allreduce)
    r = sub.add_parser("replay", help="replay a model's gradient traffic")
    _common(r)
    r.add_argument("--model", choices=sorted(PROFILES), required=True)
    r.add_argument("--scale", type=float, default=100.0, help="shrink the model this much")
    r.add_argument("--iters", type=int, default=5)
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--iters-per-epoch", type=int, default=1, help="hybrid: epoch length")
    r.add_argument("--bucket-mb", type=float, default=0.25, help="fusion bucket size (MB)")
    r.add_argument("--flops", type=float, default=None,
                   help="modelled accelerator FLOP/s (default: a V100 slowed --scale times, "
                        "which keeps real compute times next to links slowed as much)")
    r.add_argument("--out", help="results JSON")
    r.add_argument("--plot", help="plot PNG")
    r.set_defaults(func=cmd_replay)
    p = sub.add_parser("plot", help="plot results JSON files")
    p.add_argument("files", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="")
    p.set_defaults(func=cmd_plot)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if getattr(args, "size", 1) < 1:
        parser.error("--size must be >= 1")
    try:
        return int(args.func(args))
    except (WorkloadError, ValueError, TimeoutError) as err:
        # the package's errors, and bad values / deadlines from the libraries under it
        print(f"python -m workloads {args.cmd}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    stackdump.enable()  # a parent that gives up waiting gets every thread's stack
    sys.exit(main())
