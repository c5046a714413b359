"""``python -m train``: compare collectives by training, and the per-process roles.

Subcommands:

* ``compare``      - train once per collective and write ``<collective>.json/.png`` plus
  ``compare.json/.png`` to ``--outdir`` (default ``results/train``); on loopback threads by
  default, as loopback processes with ``--processes``, on a spine-leaf it starts itself with
  ``--topo spineleaf`` (programmed by the controller, in-network jobs through the switches,
  a data-server host, plus the data-traffic interference measurement; needs root), or on a
  running Mininet network with ``--rundir DIR`` (needs root);
* ``worker``       - one rank of a job (started by the launcher);
* ``dataserver``   - the shard server (runs until SIGTERM/SIGINT);
* ``interference`` - one rank of the data-traffic vs all-reduce measurement.

Every subcommand takes ``--tdf N`` (time dilation: the emulated world runs N times slower
than real time); timeouts and latencies given are then emulated seconds and the times
reported are emulated, with the factor and the real training time beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from experiment.argtypes import choice, tdf_option
from train.cache import MultiLevelCache
from train.data import load_digits_split, make_shards, shards_of_rank
from train.dataserver import DataServer, ShardClient
from train.errors import TrainError
from train.exchange import COLLECTIVES, ExchangeOptions, IntAggregator, channel_aggregator
from train.interference import measure_data_interference
from train.launch import execute, plan_from_rundir, plan_loopback
from train.report import write_comparison, write_experiment, write_json
from train.trainer import Experiment, TrainConfig, combine, run_loopback, train_rank
from vtime import VirtualClock, delay_arg, format_delay, format_rate, parse_tdf, rate_arg
from workloads.comm import Communicator
from workloads.errors import WorkloadError

if TYPE_CHECKING:
    from train.testbed import TestbedOptions

log = logging.getLogger("train")

DEFAULT_OUTDIR = Path("results/train")


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _addresses(text: str) -> list[tuple[str, int]]:
    return [_address(t) for t in text.split(",") if t]


def _collectives(text: str) -> list[str]:
    """Training names (aliases of the algorithm registry resolved: ``ring`` -> fp32-ring)."""
    from algorithms.registry import UnknownAlgorithmError, training_exchange

    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no collective given; choose from "
                                         f"{', '.join(COLLECTIVES)}")
    try:
        return [training_exchange(n).name for n in names]
    except UnknownAlgorithmError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _tdf(text: str) -> float:
    """``--tdf``: a time-dilation factor >= 1."""
    try:
        return parse_tdf(text, "--tdf")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gradient_elements() -> int:
    """float32 in the digits MLP's gradient (its parameters): what each step exchanges."""
    from train.model import MLPShape

    return MLPShape(64, TrainConfig().hidden, 10).size


def _engine(text: str) -> str:
    """``--engine``: the built-in target's packet engines (Mininet's module names them:
    imported only when the option is given, not by every rank's process)."""
    from topo.nodes import ENGINES

    return choice("--engine", ENGINES)(text)


def _timer_bounds(text: str) -> tuple[float, float]:
    """``--agg-timers LOW,HIGH``: two positive seconds, the lowest first."""
    low, sep, high = text.partition(",")
    try:
        bounds = (float(low), float(high)) if sep else None
    except ValueError:
        bounds = None
    if bounds is None or not 0 < bounds[0] <= bounds[1] < float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected LOW,HIGH seconds with 0 < LOW <= HIGH")
    return bounds


def _add_tdf(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tdf", type=_tdf, default=1.0,
                   help="time-dilation factor (>= 1; 1 = real time): timeouts, latencies and "
                        "reported times are emulated seconds")


def _add_training_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--workers", type=int, default=4, help="ranks (loopback runs)")
    p.add_argument("--batch", type=int, default=32, help="global batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--density", type=float, default=0.05, help="MSTopK density")
    p.add_argument("--sparse-epochs", type=int, default=2, help="hybrid: sparse epochs")
    p.add_argument("--ranks-per-host", type=int, default=None,
                   help="grid of the torus / HiTopK hosts (default: automatic)")
    p.add_argument("--frac-bits", type=int, default=20, help="fixed point: first scale")
    p.add_argument("--shards", type=int, default=32, help="dataset shards")


def _config(args: argparse.Namespace, collective: str, workers: int) -> TrainConfig:
    return TrainConfig(
        collective=collective, epochs=args.epochs, workers=workers, global_batch=args.batch,
        lr=args.lr, seed=args.seed, num_shards=args.shards,
        exchange=ExchangeOptions(args.density, args.sparse_epochs, args.ranks_per_host,
                                 args.frac_bits),
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m train", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    cmp_ = sub.add_parser("compare", help="train with each collective and compare")
    cmp_.add_argument("--collectives", type=_collectives,
                      default=["fp32-ring", "inswitch", "mstopk", "hybrid"])
    _add_training_options(cmp_)
    cmp_.add_argument("--outdir", type=Path, default=DEFAULT_OUTDIR)
    cmp_.add_argument("--rundir", type=Path, default=None,
                      help="run on the Mininet network of this run directory (root)")
    cmp_.add_argument("--data-host", default=None, help="Mininet host of the data server")
    cmp_.add_argument("--processes", action="store_true",
                      help="loopback: one process per rank instead of threads")
    cmp_.add_argument("--server-latency", type=float, default=0.0,
                      help="loopback: seconds the data server waits per shard (slow NFS)")
    cmp_.add_argument("--timeout", type=float, default=300.0)
    cmp_.add_argument("--tdf", type=tdf_option, default=None, metavar="auto|N",
                      help="time-dilation factor (>= 1; 1 = real time): timeouts, latencies and "
                           "reported times are emulated seconds. With --topo the default is "
                           "auto: calibrated for the network as make run does; else 1")
    cmp_.add_argument("--job-plan", type=Path, default=None,
                      help="with --rundir: run `inswitch` through the switch with this job "
                           "plan (python -m controller job show --json); one rank per host")
    net = cmp_.add_argument_group("own network (--topo spineleaf; root)")
    net.add_argument("--topo", choices=["spineleaf"], default=None,
                     help="start a spine-leaf with a data-server host, program it, train on it")
    net.add_argument("--spines", type=int, default=2)
    net.add_argument("--leaves", type=int, default=2)
    net.add_argument("--hosts", type=int, default=2, help="worker hosts per leaf")
    net.add_argument("--bw", type=rate_arg, default=10e6, metavar="RATE",
                     help="link rate: 100G, 25G, 500k (k/M/G/T bit/s; a bare number is Mbit/s; "
                          "default 10)")
    net.add_argument("--delay", type=delay_arg, default=None, metavar="DELAY",
                     help="every link's delay: 2us, 1.5ms (default none)")
    net.add_argument("--target", default="softswitch", help="softswitch | bmv2 | auto")
    net.add_argument("--engine", type=_engine, default=None, metavar="python|c",
                     help="built-in target's packet engine (default: make run's, the C data "
                          "path unless $SOFTSWITCH_ENGINE says otherwise)")
    net.add_argument("--recalibrate", action="store_true",
                     help="with --tdf auto: measure this machine again")
    net.add_argument("--net-rundir", type=Path, default=None,
                     help="run directory of the network (default run/<time>)")
    net.add_argument("--name-prefix", default="",
                     help="put before every node name (to run beside another network)")
    net.add_argument("--grpc-base-port", type=int, default=None,
                     help="P4Runtime port of device 0 (default 9559)")
    net.add_argument("--interference-repeats", type=int, default=10,
                     help="all-reduces per phase of the interference measurement (0: skip)")
    net.add_argument("--interference-elements", type=int, default=None,
                     help="float32 per all-reduce there (default: the model's gradient)")
    cmp_.add_argument("--plot", type=Path, default=None,
                      help="also write the accuracy-vs-time comparison plot to this path")

    wrk = sub.add_parser("worker", help="one rank of a training job")
    wrk.add_argument("--rank", type=int, required=True)
    wrk.add_argument("--addresses", type=_addresses, required=True)
    wrk.add_argument("--data-server", type=_address, required=True)
    wrk.add_argument("--config", type=Path, required=True)
    wrk.add_argument("--cache-dir", type=Path, required=True)
    wrk.add_argument("--out", type=Path, required=True)
    wrk.add_argument("--timeout", type=float, default=60.0)
    wrk.add_argument("--job-plan", type=Path, default=None,
                     help="inswitch: the controller's job plan (job show --json)")
    wrk.add_argument("--roce-ip", default=None, help="inswitch: this host's IP for RoCE")
    wrk.add_argument("--agg-timers", type=_timer_bounds, default=None, metavar="LOW,HIGH",
                     help="inswitch: the agents' retransmission timer bounds, emulated "
                          "seconds (default: the agents' own)")
    _add_tdf(wrk)

    srv = sub.add_parser("dataserver", help="serve the dataset shards over TCP")
    srv.add_argument("--host", default="0.0.0.0")
    srv.add_argument("--port", type=int, default=46999)
    srv.add_argument("--num-shards", type=int, default=32)
    srv.add_argument("--latency", type=float, default=0.0)
    srv.add_argument("--ready-file", type=Path, default=None)
    _add_tdf(srv)

    itf = sub.add_parser("interference", help="all-reduce time with and without data traffic")
    itf.add_argument("--rank", type=int, required=True)
    itf.add_argument("--addresses", type=_addresses, required=True)
    itf.add_argument("--data-server", type=_address, required=True)
    itf.add_argument("--elements", type=int, default=1 << 18)
    itf.add_argument("--repeats", type=int, default=5)
    itf.add_argument("--num-shards", type=int, default=32)
    itf.add_argument("--out", type=Path, required=True)
    itf.add_argument("--timeout", type=float, default=60.0)
    _add_tdf(itf)
    return parser


def _report_run(exp: Experiment, outdir: Path) -> None:
    json_path, png_path = write_experiment(exp, outdir)
    emulated = f" (emulated, TDF {exp.tdf:g})" if exp.tdf != 1 else ""
    print(f"{exp.config.collective:20s} {exp.implementation:20s} acc "
          f"{100 * exp.final_accuracy:6.2f} %  train {format_delay(exp.history[-1].wall_s)}"
          f"{emulated}  "
          f"identical models: {exp.consistent}  -> {json_path}, {png_path}", flush=True)
    if exp.faithful is not None:
        print(f"{'':20s} fidelity: {exp.network['fidelity']['summary']}", flush=True)


def _finish(args: argparse.Namespace, experiments: list[Experiment],
            extra: dict[str, object] | None = None, title: str | None = None) -> int:
    json_path, png_path = write_comparison(experiments, args.outdir, extra, title)
    print(f"comparison -> {json_path}, {png_path}")
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png_path, args.plot)
        print(f"plot -> {args.plot}")
    unfaithful = [e.config.collective for e in experiments if e.faithful is False]
    if unfaithful:
        # written and marked (hollow on the plot), but not a result to publish
        print(f"error: the emulation did not keep up in {', '.join(unfaithful)} (see "
              "fidelity above): the comparison is not fit to publish; raise --tdf",
              file=sys.stderr)
        return 1
    return 0


def _compare_testbed(args: argparse.Namespace) -> int:
    from train.testbed import TestbedOptions, TrainingTestbed

    if not args.verbose:  # the controller's and Mininet's step-by-step logs
        for name in ("controller", "topo"):
            logging.getLogger(name).setLevel(logging.WARNING)
    opts = TestbedOptions(spines=args.spines, leaves=args.leaves, hosts_per_leaf=args.hosts,
                          bw_mbit=args.bw / 1e6, delay_s=args.delay,
                          target=_target(args.target), engine=args.engine,
                          rundir=args.net_rundir, name_prefix=args.name_prefix,
                          grpc_base_port=args.grpc_base_port, timeout_s=args.timeout)
    tdf, why, overhead = _testbed_tdf(args, opts)
    opts = dataclasses.replace(opts, tdf=tdf, overhead_s=overhead)
    print(f"time dilation: TDF {tdf:g} ({why})", flush=True)
    link = format_rate(args.bw) + (f", {format_delay(args.delay)}" if args.delay else "")
    experiments: list[Experiment] = []
    extra: dict[str, object] = {}
    with TrainingTestbed(opts) as testbed:
        workers = len(testbed.worker_hosts)
        print(f"spine-leaf {args.spines}x{args.leaves}x{args.hosts} at {link} on "
              f"{testbed.topology.target}: workers {', '.join(testbed.worker_hosts)}, data "
              f"server {testbed.data_host}, run directory {testbed.rundir}", flush=True)
        for name in args.collectives:
            exp = testbed.run(_config(args, name, workers), args.outdir / "runs" / name)
            _report_run(exp, args.outdir)
            experiments.append(exp)
        if args.interference_repeats > 0:
            elements = args.interference_elements or _gradient_elements()
            result = testbed.interference(args.outdir / "runs" / "interference", elements,
                                          args.interference_repeats, args.shards, args.timeout)
            write_json(args.outdir / "interference.json", result)
            extra["interference"] = {k: v for k, v in result.items() if k != "ranks"}
            print(f"interference: {elements}-element ring all-reduce "
                  f"{format_delay(result['quiet_allreduce_s'])} quiet, "
                  f"{format_delay(result['loaded_allreduce_s'])} while shards stream from "
                  f"{testbed.data_host} (x{result['slowdown']:.2f})", flush=True)
        extra["network"] = {"topology": "spineleaf", "spines": args.spines,
                            "leaves": args.leaves, "hosts_per_leaf": args.hosts,
                            "link_bw_mbit": args.bw / 1e6, "link_bw": format_rate(args.bw),
                            "delay_s": args.delay or 0.0, "tdf": tdf, "tdf_why": why,
                            "engine": opts.switch_engine(), "target": testbed.topology.target,
                            "worker_hosts": testbed.worker_hosts,
                            "data_host": testbed.data_host, "rundir": str(testbed.rundir)}
        dilated = f", TDF {tdf:g}" if tdf != 1 else ""
        title = (f"digits MLP, {workers} workers on a {args.spines}x{args.leaves} spine-leaf "
                 f"({link} links, {testbed.topology.target}{dilated})")
    return _finish(args, experiments, extra, title)


def _target(name: str) -> str:
    """The target the network will run (``auto`` resolved): the calibration and the
    engine default need the name."""
    from topo.errors import TopoError
    from topo.nodes import TARGETS, choose_target

    try:
        cls = choose_target(name)[0]
    except TopoError as exc:
        raise ValueError(f"--target: {exc}") from None
    return next(n for n, c in TARGETS.items() if c is cls)


def _testbed_tdf(args: argparse.Namespace, opts: TestbedOptions
                 ) -> tuple[float, str, float]:
    """The TDF of the network ``compare --topo`` starts, why, and the calibrated fixed
    real-time cost of a collective on it (0: not calibrated): ``--tdf N``, or (auto, the
    default) ``make run``'s calibrated choice for this network, the target and engine and
    a gradient-sized collective."""
    from experiment.calibrate import CalibrationError, fixed_cost
    from experiment.dilation import AUTO, switch_hops
    from experiment.dilation import resolve as resolve_dilation
    from experiment.run import calibration_rundir
    from protocol.netreduce import PROGRAM_ELEMS
    from topo.errors import TopoError

    option = AUTO if args.tdf is None else args.tdf
    elements = _gradient_elements()
    try:
        spec = opts.topology().spec
        dilation = resolve_dilation(option, opts.target, opts.program, spec,
                                    PROGRAM_ELEMS, elements=elements, refresh=args.recalibrate,
                                    rundir=calibration_rundir(args.net_rundir),
                                    announce=print, engine=opts.switch_engine())
    except (TopoError, CalibrationError) as exc:
        raise ValueError(f"--tdf {option}: {exc}") from None
    overhead = (fixed_cost(dilation.costs, switch_hops(spec))
                if dilation.costs is not None else 0.0)
    return dilation.tdf, dilation.why, overhead


def _compare(args: argparse.Namespace) -> int:
    from experiment.dilation import AUTO

    if args.topo is not None:
        if args.rundir is not None:
            raise ValueError("--topo starts its own network; --rundir uses a running one")
        return _compare_testbed(args)
    if args.tdf == AUTO and args.rundir is not None:
        raise ValueError("--tdf auto: calibrates only a network this command starts (--topo); "
                         "give the running network's factor")
    args.tdf = 1.0 if args.tdf in (None, AUTO) else args.tdf
    experiments: list[Experiment] = []
    for name in args.collectives:
        if args.rundir is not None:
            exp = _run_processes(args, name, mininet=True)
        elif args.processes:
            exp = _run_processes(args, name, mininet=False)
        else:
            with tempfile.TemporaryDirectory(prefix="train-cache-") as tmp:
                exp = run_loopback(_config(args, name, args.workers), tmp,
                                   args.server_latency, timeout=args.timeout,
                                   clock=VirtualClock(args.tdf))
        _report_run(exp, args.outdir)
        experiments.append(exp)
    return _finish(args, experiments)


def _run_processes(args: argparse.Namespace, name: str, mininet: bool) -> Experiment:
    workdir = (args.outdir / "runs" / name).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("cache-rank*"):  # every run starts with cold local caches
        shutil.rmtree(old)
    config_path = workdir / "config.json"
    if mininet:
        job_plan = args.job_plan.resolve() if args.job_plan and name == "inswitch" else None
        plan = plan_from_rundir(args.rundir, config_path, workdir, args.shards, args.data_host,
                                timeout=args.timeout, job_plan=job_plan, tdf=args.tdf)
    else:
        plan = plan_loopback(config_path, workdir, args.workers, args.shards, args.timeout,
                             args.server_latency, tdf=args.tdf)
    config = _config(args, name, len(plan.addresses))
    if args.ranks_per_host is None and plan.ranks_per_host is not None:
        # On Mininet the torus / HiTopK hosts are the emulated hosts.
        config = dataclasses.replace(config, exchange=dataclasses.replace(
            config.exchange, ranks_per_host=plan.ranks_per_host))
    write_json(config_path, config.as_dict())
    results = execute(plan, args.timeout, workdir / "logs")
    return combine(config, results, "mininet" if mininet else "loopback-processes")


def _worker(args: argparse.Namespace) -> int:
    config = TrainConfig.from_dict(json.loads(args.config.read_text()))
    clock = VirtualClock(args.tdf)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(ShardClient(args.data_server, timeout=args.timeout,
                                                 clock=clock))
        comm = stack.enter_context(Communicator(args.rank, args.addresses, timeout=args.timeout,
                                                connect_timeout=args.timeout, clock=clock))
        aggregator = None
        if args.job_plan is not None:
            aggregator = _switch_aggregator(stack, args, clock)
        cache = MultiLevelCache(client.get, args.cache_dir, config.memory_cache_bytes,
                                config.disk_cache_bytes, clock)
        result = train_rank(comm, config, cache, aggregator)
    write_json(args.out, result.as_dict())
    return 0


def _switch_aggregator(stack: contextlib.ExitStack, args: argparse.Namespace,
                       clock: VirtualClock) -> IntAggregator:
    """The real switch's int32 all-reduce for this rank (NetReduce job of the controller)."""
    from workloads.innetwork import AggregationChannel, JobConfig
    from workloads.roce import ROCE_V2_PORT, RoceEndpoint

    if args.roce_ip is None:
        raise ValueError("--job-plan needs --roce-ip (this host's address)")
    job = JobConfig.from_plan(json.loads(args.job_plan.read_text()))
    if job.size != len(args.addresses):
        raise ValueError(f"the job plan has {job.size} workers, the run {len(args.addresses)}")
    endpoint = stack.enter_context(RoceEndpoint((args.roce_ip, ROCE_V2_PORT), clock=clock))
    timers = {} if args.agg_timers is None else {"rto": args.agg_timers[0],
                                                  "max_rto": args.agg_timers[1]}
    channel = AggregationChannel(endpoint, job, args.rank, timeout=args.timeout, **timers)
    stack.callback(channel.flush, args.timeout)  # runs before the endpoint closes
    return channel_aggregator(channel)


def _dataserver(args: argparse.Namespace) -> int:
    shards = make_shards(load_digits_split(args.num_shards), args.num_shards)
    clock = VirtualClock(args.tdf)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with DataServer(shards, args.host, args.port, latency_s=args.latency,
                    clock=clock) as server:
        if args.ready_file is not None:
            args.ready_file.write_text(json.dumps({"address": list(server.address)}))
        log.info("serving %d shards on %s:%d", len(shards), *server.address)
        while not stop.wait(clock.real(0.5)):
            pass
        log.info("stopping after %d bytes served", server.bytes_served)
    return 0


def _interference(args: argparse.Namespace) -> int:
    clock = VirtualClock(args.tdf)
    with ShardClient(args.data_server, timeout=args.timeout, clock=clock) as client, Communicator(
        args.rank, args.addresses, timeout=args.timeout, connect_timeout=args.timeout,
        clock=clock,
    ) as comm:
        names = shards_of_rank(comm.rank, comm.size, args.num_shards)
        result = measure_data_interference(comm, client.get, names, args.elements, args.repeats)
    write_json(args.out, result.as_dict())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for errors, with a one-line message)."""
    args = _parser().parse_args(argv)
    previous = None
    if args.command == "compare":  # its network and ranks come down on SIGTERM too
        from experiment.lifecycle import interrupt_on_sigterm

        previous = interrupt_on_sigterm()
    try:
        return _main(args)
    finally:
        if previous is not None:  # put back for a caller that runs compare in-process
            signal.signal(signal.SIGTERM, previous)


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(name)s: %(message)s")
    handlers = {"compare": _compare, "worker": _worker, "dataserver": _dataserver,
                "interference": _interference}
    try:
        return handlers[args.command](args)
    except (TrainError, WorkloadError, ValueError, OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C (or, for compare, SIGTERM): whatever ran is stopped
        print("interrupted: every process and network it started is stopped", file=sys.stderr)
        return 130
