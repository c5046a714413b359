"""Run a training job as separate processes: one data server and one process per rank.

The same launcher serves two cases:

* **Mininet** (:func:`plan_from_rundir`): ranks and the data server run inside the emulated
  hosts' network namespaces (entered with ``nsenter --net=/proc/<host shell pid>/ns/net``,
  the shells recorded in the run directory's ``pids.json``), listen on the hosts' IPs from
  ``topology.json``, and every byte - gradients and shards alike - crosses the emulated
  links. A host with ``gpus = g`` runs ``g`` ranks (ranks numbered host by host). Needs root
  and a running network (``make run``).
* **loopback** (:func:`plan_loopback`): the same processes on 127.0.0.1, for tests.

Each rank writes its :class:`~train.trainer.RankResult` as JSON; :func:`execute` collects
them. Every process is started in its own session and is killed by its process group if the
job does not finish by the deadline.

Time dilation: a plan's ``tdf`` goes to every process it starts (``--tdf``), and the
launcher's own deadline is in emulated seconds of the same factor, so a dilated job gets
``TDF`` times as long in real time.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from train.errors import TrainError
from train.trainer import RankResult
from vtime import VirtualClock

log = logging.getLogger(__name__)

DEFAULT_BASE_PORT = 47000
DEFAULT_DATA_PORT = 46999


class LaunchError(TrainError, RuntimeError):
    """A process of the job could not be started, failed, or did not finish in time."""


@dataclass(frozen=True)
class Proc:
    """One process to start: ``argv`` run inside the network namespace of ``netns_pid``."""

    name: str
    argv: tuple[str, ...]
    netns_pid: int | None = None

    def command(self) -> list[str]:
        """The full argv, with ``nsenter`` in front when a namespace is given."""
        if self.netns_pid is None:
            return list(self.argv)
        return ["nsenter", f"--net=/proc/{self.netns_pid}/ns/net", "--", *self.argv]


@dataclass(frozen=True)
class LaunchPlan:
    """Everything :func:`execute` starts, and where the results will be."""

    server: Proc
    server_ready: Path
    workers: tuple[Proc, ...]
    rank_files: tuple[Path, ...]
    addresses: tuple[tuple[str, int], ...]
    data_address: tuple[str, int]
    ranks_per_host: int | None = None  # the hosts' ``gpus`` when all hosts have the same
    tdf: float = 1.0  # time-dilation factor of every process (timeouts: emulated seconds)


def _python() -> list[str]:
    return [sys.executable, "-m", "train"]


def _tdf_argv(tdf: float) -> tuple[str, ...]:
    """``--tdf N`` for a dilated run (nothing at real time: the argv stays as it was)."""
    return ("--tdf", f"{tdf:g}") if tdf != 1 else ()


def _worker_argv(
    rank: int, addresses: Sequence[tuple[str, int]], data: tuple[str, int], config: Path,
    cache_dir: Path, out: Path, timeout: float, job_plan: Path | None, tdf: float = 1.0,
    agg_timers: tuple[float, float] | None = None,
) -> tuple[str, ...]:
    switch: tuple[str, ...] = (
        ("--job-plan", str(job_plan), "--roce-ip", addresses[rank][0]) if job_plan else ())
    if job_plan and agg_timers is not None:
        switch += ("--agg-timers", f"{agg_timers[0]:.9g},{agg_timers[1]:.9g}")
    return (
        *_python(), "worker", "--rank", str(rank),
        "--addresses", ",".join(f"{h}:{p}" for h, p in addresses),
        "--data-server", f"{data[0]}:{data[1]}", "--config", str(config),
        "--cache-dir", str(cache_dir), "--out", str(out), "--timeout", str(timeout), *switch,
        *_tdf_argv(tdf),
    )


def _server_argv(address: tuple[str, int], ready: Path, num_shards: int,
                 latency_s: float, tdf: float = 1.0) -> tuple[str, ...]:
    return (*_python(), "dataserver", "--host", address[0], "--port", str(address[1]),
            "--ready-file", str(ready), "--num-shards", str(num_shards),
            "--latency", str(latency_s), *_tdf_argv(tdf))


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago (loopback tests only)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def plan_loopback(config: Path, workdir: Path, workers: int, num_shards: int,
                  timeout: float = 60.0, latency_s: float = 0.0, tdf: float = 1.0
                  ) -> LaunchPlan:
    """A plan that runs everything on 127.0.0.1."""
    ports = free_ports(workers + 1)
    addresses = tuple(("127.0.0.1", p) for p in ports[:workers])
    data = ("127.0.0.1", ports[-1])
    return _plan(config, workdir, addresses, [None] * workers, data, None, num_shards, timeout,
                 latency_s, tdf=tdf)


def _plan(config: Path, workdir: Path, addresses: tuple[tuple[str, int], ...],
          netns: Sequence[int | None], data: tuple[str, int], data_ns: int | None,
          num_shards: int, timeout: float, latency_s: float,
          job_plan: Path | None = None, tdf: float = 1.0,
          agg_timers: tuple[float, float] | None = None) -> LaunchPlan:
    ready = workdir / "dataserver.ready"
    rank_files = tuple(workdir / f"rank{r}.json" for r in range(len(addresses)))
    workers = tuple(
        Proc(f"rank{r}", _worker_argv(r, addresses, data, config, workdir / f"cache-rank{r}",
                                      rank_files[r], timeout, job_plan, tdf, agg_timers),
             netns[r])
        for r in range(len(addresses))
    )
    server = Proc("dataserver", _server_argv(data, ready, num_shards, latency_s, tdf), data_ns)
    return LaunchPlan(server, ready, workers, rank_files, addresses, data, tdf=tdf)


def plan_from_rundir(rundir: Path, config: Path, workdir: Path, num_shards: int,
                     data_host: str | None = None, base_port: int = DEFAULT_BASE_PORT,
                     timeout: float = 120.0, job_plan: Path | None = None,
                     tdf: float = 1.0, agg_timers: tuple[float, float] | None = None
                     ) -> LaunchPlan:
    """A plan for the running network in ``rundir``: ``gpus`` ranks on every host (host by
    host, in topology order; hosts with ``gpus = 0``, such as the topology's data-server
    host, run none), the data server on ``data_host`` (default: the first host with no
    workers, else the last host).

    With ``job_plan`` (the controller's NetReduce job) the ranks aggregate through the
    switch; each host's RoCE endpoint owns UDP port 4791, so that needs one rank per host.
    ``agg_timers``: the in-network agents' retransmission timer bounds (lowest, highest;
    emulated seconds) for a dilated network, whose own round trip is far below the
    agents' real-time defaults (None: the defaults).
    """
    from topo.errors import TopologyFileError
    from topo.rundir import PIDS_FILE, load_topology, read_pids

    try:
        topology = load_topology(rundir)
        _, processes = read_pids(Path(rundir) / PIDS_FILE)
    except TopologyFileError as exc:
        raise LaunchError(str(exc)) from exc
    shells = {p.name: p.pid for p in processes if p.kind == "host-shell"}
    if not topology.hosts:
        raise LaunchError(f"{rundir}: the topology has no hosts")
    addresses: list[tuple[str, int]] = []
    netns: list[int | None] = []
    for host in topology.hosts:
        if host.name not in shells:
            raise LaunchError(f"{rundir}: no shell recorded for host {host.name} in {PIDS_FILE}")
        for slot in range(host.gpus):
            addresses.append((host.ip, base_port + slot))
            netns.append(shells[host.name])
    if not addresses:
        raise LaunchError(f"{rundir}: no host of the topology runs workers (all have gpus = 0)")
    idle = [h for h in topology.hosts if h.gpus == 0]
    try:
        server_host = (topology.host(data_host) if data_host
                       else idle[0] if idle else topology.hosts[-1])
    except KeyError as exc:
        raise LaunchError(f"{rundir}: {exc.args[0]}") from None
    if job_plan is not None and len({ip for ip, _ in addresses}) != len(addresses):
        raise LaunchError("in-switch training through the switch needs one rank per host "
                          "(each host has one RoCE endpoint); use hosts with gpus = 1")
    plan = _plan(config, workdir, tuple(addresses), netns,
                 (server_host.ip, DEFAULT_DATA_PORT), shells[server_host.name], num_shards,
                 timeout, 0.0, job_plan, tdf, agg_timers)
    gpus = {h.gpus for h in topology.hosts if h.gpus > 0}
    return dataclasses.replace(plan, ranks_per_host=gpus.pop() if len(gpus) == 1 else None)


def _start(proc: Proc, log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        try:
            return subprocess.Popen(proc.command(), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=Path(__file__).resolve().parent.parent)
        except OSError as exc:
            raise LaunchError(f"cannot start {proc.name}: {exc}") from exc


def _stop(popen: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the process group, SIGKILL after ``grace`` real seconds: how long a process
    takes to exit is the machine's business, not the emulated world's."""
    if popen.poll() is not None:
        return
    try:
        os.killpg(popen.pid, signal.SIGTERM)
        popen.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(grace)
    except ProcessLookupError:
        pass


#: Told about every process started (the popen and its name): the experiment lifecycle
#: records and tracks them (experiment.lifecycle.ExperimentNetwork.track).
OnStart = Callable[[subprocess.Popen[bytes], str], object]


def execute(plan: LaunchPlan, timeout: float, logdir: Path,
            on_start: OnStart | None = None) -> list[RankResult]:
    """Start the data server, then every rank; wait for all ranks; return their results."""
    try:
        return [RankResult.from_dict(d) for d in execute_raw(plan, timeout, logdir, on_start)]
    except ValueError as exc:
        raise LaunchError(f"cannot read a rank's result: {exc}") from exc


def execute_raw(plan: LaunchPlan, timeout: float, logdir: Path,
                on_start: OnStart | None = None) -> list[dict[str, object]]:
    """Like :func:`execute` for any per-rank role: the JSON document each rank wrote.
    ``timeout`` is emulated seconds of the plan's ``tdf``."""
    for path in (plan.server_ready, *plan.rank_files):
        path.unlink(missing_ok=True)
    server = _start(plan.server, logdir / "dataserver.log")
    if on_start is not None:
        on_start(server, plan.server.name)
    started: list[subprocess.Popen[bytes]] = []
    clock = VirtualClock(plan.tdf)
    deadline = clock.now() + timeout
    try:
        _wait_server_ready(plan, server, clock, deadline, logdir)
        for proc in plan.workers:
            started.append(_start(proc, logdir / f"{proc.name}.log"))
            if on_start is not None:
                on_start(started[-1], proc.name)
        for proc, popen in zip(plan.workers, started, strict=True):
            _wait_rank(proc, popen, clock, deadline, timeout, logdir)
    finally:
        for popen in started:
            _stop(popen)
        _stop(server)
    try:
        return [json.loads(p.read_text()) for p in plan.rank_files]
    except (OSError, ValueError) as exc:
        raise LaunchError(f"cannot read a rank's result: {exc}") from exc


def _wait_server_ready(plan: LaunchPlan, server: subprocess.Popen[bytes], clock: VirtualClock,
                       deadline: float, logdir: Path) -> None:
    """Until the data server says it is ready (it must not exit, nor take past
    ``deadline``)."""
    while not plan.server_ready.exists():
        if server.poll() is not None:
            raise LaunchError(f"data server exited ({server.returncode}); see {logdir}")
        if clock.now() > deadline:
            raise LaunchError("data server did not become ready in time")
        # the poll is the machine's business, 50 ms of real time: an emulated 50 ms was
        # 1,000 s of real time at TDF 20,000
        clock.sleep(clock.emulated(0.05))


def _wait_rank(proc: Proc, popen: subprocess.Popen[bytes], clock: VirtualClock, deadline: float,
               timeout: float, logdir: Path) -> None:
    """A rank must end by ``deadline`` with status 0."""
    try:
        code = popen.wait(clock.real(max(0.1, deadline - clock.now())))
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{proc.name} did not finish within {timeout:g} s") from None
    if code != 0:
        raise LaunchError(f"{proc.name} exited with {code}; see {logdir}/{proc.name}.log")


def interference_plan(plan: LaunchPlan, workdir: Path, elements: int, repeats: int,
                      num_shards: int, timeout: float) -> LaunchPlan:
    """The same hosts, addresses and data server as ``plan``, every rank running the
    data-traffic vs all-reduce measurement (``python -m train interference``) instead of
    training; results go to ``workdir/interference-rank<R>.json``."""
    files = tuple(workdir / f"interference-rank{r}.json" for r in range(len(plan.addresses)))
    peers = ",".join(f"{h}:{p}" for h, p in plan.addresses)
    data = f"{plan.data_address[0]}:{plan.data_address[1]}"
    workers = tuple(
        Proc(f"interference{r}", (*_python(), "interference", "--rank", str(r),
                                  "--addresses", peers, "--data-server", data,
                                  "--elements", str(elements), "--repeats", str(repeats),
                                  "--num-shards", str(num_shards), "--out", str(files[r]),
                                  "--timeout", str(timeout), *_tdf_argv(plan.tdf)),
             w.netns_pid)
        for r, w in enumerate(plan.workers)
    )
    return dataclasses.replace(plan, workers=workers, rank_files=files)
