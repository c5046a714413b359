"""The loss cells' host worker: one process per host for a whole cell, one new job per
all-reduce.

Starting four ``python -m workloads allreduce`` processes (interpreter, numpy, the agent's
linger after its last ACK) cost 2-3 s per all-reduce, far more than the all-reduce itself,
and none of it is what the loss cells test. ``python -m reliability.worker --host H`` runs
inside host ``H``'s namespace and reads one JSON line per all-reduce on stdin,
``{"plan": PATH, "seed": N, "size": N, "timeout": S}``: it opens a fresh
:class:`workloads.agent.HostAgent` on the new job (the previous job's agent closed first),
lines the workers up with a one-element all-reduce, all-reduces its deterministic float32
input, compares the result with the exact sum of every rank's input, waits until its own
messages are acknowledged (then no peer needs anything of this job from it any more) and
prints one JSON line per local rank. Its first retransmission timer is the highest one,
not roce.INITIAL_RTO's second: the hosts are running before the job starts. The campaign
sends the next job only after every host answered, so the agent's linger is not needed
between jobs; at the end of its input the worker closes the last agent with the usual
linger.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random import default_rng

import stackdump
from workloads.agent import HostAgent, load_job, local_ranks
from workloads.errors import WorkloadError
from workloads.innetwork import AGG_MAX_RTO, AGG_RTO, AggregationChannel, innetwork_allreduce

log = logging.getLogger("reliability.worker")


def worker_input(rank: int, size: int, seed: int) -> np.ndarray:
    """Rank ``rank``'s float32 input of an all-reduce: values on a 2^-8 grid in [-16, 16), so
    the fixed-point sum of a few ranks is exact and comparable bit for bit."""
    rng = default_rng(seed * 100003 + rank)
    return (rng.integers(-(2**12), 2**12, size=size) / 256.0).astype(np.float32)


def exact_sum(ranks: int, size: int, seed: int) -> np.ndarray:
    """The exact sum of every rank's :func:`worker_input`."""
    total = np.zeros(size, dtype=np.float32)
    for r in range(ranks):
        total = total + worker_input(r, size, seed)
    return total


def _row(rank: int, host: str, **fields: Any) -> dict[str, Any]:
    return {"rank": rank, "host": host, "seconds": 0.0, "check": None, "retransmissions": 0,
            "timeouts": 0, "spurious_timeouts": 0, "naks": 0, "lone_timeouts": 0,
            "error": None, **fields}


def one_job(args: argparse.Namespace, request: dict[str, Any]) -> tuple[HostAgent | None,
                                                                       list[dict[str, Any]]]:
    """The all-reduce ``request`` asks for: the agent (left open: its peers may still
    need its ACKs until every host answered) and one row per local rank."""
    seed, size = int(request["seed"]), int(request["size"])
    timeout = float(request["timeout"])
    job = load_job(request["plan"], elems=args.elems)
    ranks = local_ranks(job, args.host, None)
    # every host is up and waiting before the job starts: the first timer need not cover
    # processes starting one by one (roce.INITIAL_RTO), the highest one will do
    agent = HostAgent(job, ranks, rto=args.rto, max_rto=args.max_rto, timeout=timeout,
                      initial_rto=max(args.rto, args.max_rto))
    expected = exact_sum(job.size, size, seed)

    def work(rank: int, ch: AggregationChannel) -> dict[str, Any]:
        innetwork_allreduce(ch, np.zeros(1, np.int32))  # the barrier
        x = worker_input(rank, size, seed)
        got, st = innetwork_allreduce(ch, x)
        ch.flush(timeout)  # our messages acknowledged: the peer has every result
        return _row(rank, args.host, seconds=round(st.seconds, 4),
                    check=bool(np.array_equal(got, expected)),
                    retransmissions=st.retransmissions, timeouts=st.timeouts,
                    spurious_timeouts=st.spurious_timeouts, naks=st.naks,
                    lone_timeouts=st.lone_timeouts)

    try:
        out = agent.run(work, timeout=timeout)
    except WorkloadError as err:
        return agent, [_row(r, args.host, error=str(err)) for r in ranks]
    return agent, [out[r] for r in ranks]


def serve(args: argparse.Namespace) -> int:
    """One all-reduce per input line, until the input ends."""
    agent: HostAgent | None = None
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            if agent is not None:
                agent.close(linger=0.0)  # every host answered: the last job is over
                agent = None
            t0 = time.monotonic()
            try:
                agent, rows = one_job(args, json.loads(line))
            except (WorkloadError, ValueError, KeyError, OSError) as err:
                rows = [_row(-1, args.host, error=f"{type(err).__name__}: {err}")]
            for row in rows:
                row["wall"] = round(time.monotonic() - t0, 4)
                print(json.dumps(row, sort_keys=True), flush=True)
    finally:
        if agent is not None:
            agent.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reliability.worker",
                                description=__doc__.splitlines()[0])
    p.add_argument("--host", required=True, help="this host's name in the job plans")
    p.add_argument("--elems", type=int, required=True, help="int32 elements per packet")
    p.add_argument("--rto", type=float, default=AGG_RTO, help="lowest retransmission timer (s)")
    p.add_argument("--max-rto", type=float, default=AGG_MAX_RTO,
                   help="highest retransmission timer (s)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return serve(args)


if __name__ == "__main__":
    stackdump.enable()  # a campaign that gives up waiting gets every thread's stack
    sys.exit(main())
