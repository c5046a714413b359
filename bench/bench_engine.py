"""Packets per second of the built-in target's pipeline alone (no ports, no gRPC).

Runs ``bench.pipeline_rate.bench_pipeline`` on tests/p4/ipv4_forward.p4 (basic.p4 style:
LPM on the IPv4 destination, TTL decrement, checksum update) with one route installed and a
routed IPv4/UDP frame, so every packet takes the full hit path: parse, LPM hit, action,
checksum update, deparse.

Then p4src/netreduce.p4 (the testbed's aggregation program) with one configured job of P
workers (bench/netreduce_job.py) fed a stream of contributions, message after message:
every packet is parsed (Ethernet/IPv4/UDP/BTH/RETH/tag/32 elements), checked against the
job and connection tables, summed into a slot copy; the last of each message completes
it and is multicast back as P result packets.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

from bench.harness import BenchSkipped

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "p4" / "ipv4_forward.p4"
DEFAULT_SECONDS = 2.0
INGRESS_PORT = 1
EGRESS_PORT = 2
DST_IP = "10.0.2.2"
NEXT_HOP_MAC = 0x000000000202
PAYLOAD_BYTES = 64
NR_WORKERS = (2, 4, 8)  # aggregation benchmark: workers per job
NR_PACKETS_PER_S_GUESS = 10000  # sizes the message stream to about ``seconds``
PAYLOAD_ELEMS = (32, 256)  # per-packet cost against payload size (issue 13)
PAYLOAD_WORKERS = 4
PAYLOAD_ROUNDS = 5
ENGINES = ("python", "c")  # side-by-side rows of the compiled data path (issue 28)
ENGINE_ELEMS = 256
ENGINE_WORKERS = 4
ENGINE_ROUNDS = 5


def _require(module: str, attr: str) -> Any:
    """``module.attr``, or a skip naming the piece that is not there yet."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise BenchSkipped(f"{module} is not available yet ({exc})") from exc
    if not hasattr(mod, attr):
        raise BenchSkipped(f"{module}.{attr} is not available yet")
    return getattr(mod, attr)


def routed_frame() -> bytes:
    """An Ethernet/IPv4/UDP frame to DST_IP with a correct IPv4 checksum."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    pkt = (
        Ether(src="00:00:00:00:01:01", dst="00:00:00:00:01:ff")
        / IP(src="10.0.1.1", dst=DST_IP, ttl=64)
        / UDP(sport=4791, dport=4791)
        / bytes(range(PAYLOAD_BYTES))
    )
    return bytes(pkt)


def _bit_width(t: object) -> int | None:
    """Width of a bit<W> type, looking through type definitions (``macAddr_t``)."""
    for _ in range(8):
        width = getattr(t, "width", None)
        if isinstance(width, int):
            return width
        t = getattr(t, "underlying", None)
        if t is None:
            return None
    return None


def _route_action(program: object, table_name: str, action_names: tuple[str, ...]) -> Any:
    """The forwarding action of the LPM table and its arguments (next-hop MAC, egress port)."""
    short_table = table_name.rsplit(".", 1)[-1]
    for control in getattr(program, "controls", {}).values():
        for decl in getattr(control, "locals", []):
            if getattr(decl, "keys", None) is None or getattr(decl, "name", "") != short_table:
                continue
            for ref in decl.actions:
                action = ref.action
                params = [p for p in action.params if getattr(p, "direction", "") == ""]
                if not params:
                    continue
                args = []
                for p in params:
                    width = _bit_width(p.type)
                    if width == 48:
                        args.append(NEXT_HOP_MAC)
                    elif width == 9 or "port" in p.name.lower():
                        args.append(EGRESS_PORT)
                    else:
                        args.append(0)
                short = action.cp_name.lstrip(".").rsplit(".", 1)[-1]
                full = next((n for n in action_names if n.rsplit(".", 1)[-1] == short), None)
                if full is not None:
                    return full, tuple(args)
    raise BenchSkipped(f"{PROGRAM.name}: no forwarding action with parameters in {table_name}")


def build_pipeline() -> Any:
    """The ipv4_forward pipeline with a /32 route to DST_IP towards EGRESS_PORT."""
    pipeline_cls = _require("softswitch.pipeline", "Pipeline")
    _require("softswitch.engine.tables", "TableEntry")
    tables_mod = importlib.import_module("softswitch.engine.tables")
    if not PROGRAM.exists():
        raise BenchSkipped(f"{PROGRAM.relative_to(PROGRAM.parents[2])} does not exist yet")
    pipeline = pipeline_cls.from_file(str(PROGRAM))
    lpm = [
        t
        for t in pipeline.tables.values()
        if len(t.keys) == 1 and t.keys[0].match_kind == tables_mod.MatchKind.LPM
    ]
    if not lpm:
        raise BenchSkipped(f"{PROGRAM.name} has no table with one LPM key")
    table = lpm[0]
    name, args = _route_action(pipeline.program, table.name, table.action_names)
    dst = int.from_bytes(bytes(int(b) for b in DST_IP.split(".")), "big")
    table.insert(
        tables_mod.TableEntry(
            matches=(tables_mod.FieldMatch(value=dst, prefix_len=32),),
            action=tables_mod.ActionCall(name=name, args=args),
        )
    )
    return pipeline


def _frames_argument(bench_pipeline: Any, frame: bytes) -> list[Any]:
    """The frames as bench_pipeline expects them: (port, bytes) pairs unless it takes bytes."""
    param = list(inspect.signature(bench_pipeline).parameters.values())[1]
    annotation = str(param.annotation)
    if "bytes" in annotation and "tuple" not in annotation:
        return [frame]
    return [(INGRESS_PORT, frame)]


def netreduce_rows(workers: int, seconds: float) -> list[dict[str, Any]]:
    """Packets/s of p4src/netreduce.p4 aggregating a stream of one-packet messages from
    ``workers`` workers (every message completes and multicasts P results)."""
    import time

    from bench.netreduce_job import SOURCE, AggregationJob, completions, make_workers, program

    pipeline_cls = _require("softswitch.pipeline", "Pipeline")
    if not SOURCE.exists():
        raise BenchSkipped(f"{SOURCE.name} does not exist")
    NR_PROGRAM = program()
    pipeline = pipeline_cls.from_file(str(NR_PROGRAM))
    job = AggregationJob(1, make_workers(workers))
    job.configure(pipeline)
    messages = max(100, int(seconds * NR_PACKETS_PER_S_GUESS) // workers)
    frames = job.stream(messages)
    process = pipeline.process
    results = 0
    start = time.perf_counter()
    for port, frame in frames:
        results += len(process(port, frame))
    elapsed = time.perf_counter() - start
    done = completions(pipeline, job.job)
    if done != messages or results != messages * workers:
        raise RuntimeError(
            f"netreduce stream: {done}/{messages} messages completed, {results} results"
        )
    pps = len(frames) / elapsed
    notes = (
        f"{NR_PROGRAM.name}, {workers} workers x {messages} one-packet messages "
        f"({len(frames[0][1])} B, {workers} results each)"
    )
    return [
        {"name": f"netreduce P={workers}", "metric": "throughput", "value": pps,
         "unit": "pkt/s", "notes": notes},
        {"name": f"netreduce P={workers}", "metric": "messages aggregated",
         "value": messages / elapsed, "unit": "msg/s", "notes": notes},
    ]


def payload_rows(seconds: float) -> list[dict[str, Any]]:
    """CPU time per packet of p4src/netreduce.p4 built with each of ``PAYLOAD_ELEMS``
    elements per packet, P = 4, in one run: rounds alternate between the sizes and the
    best round counts (the machine is shared; CPU time, not wall time, so that other
    processes' load shows less)."""
    import tempfile
    import time

    from bench.netreduce_job import AggregationJob, completions, make_workers
    from experiment.matrix import program_for

    pipeline_cls = _require("softswitch.pipeline", "Pipeline")
    messages = max(50, int(seconds * NR_PACKETS_PER_S_GUESS) // PAYLOAD_WORKERS // 8)
    total = messages * PAYLOAD_ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        pipelines = {e: pipeline_cls.from_file(str(program_for(e, Path(tmp))))
                     for e in PAYLOAD_ELEMS}
    jobs = {e: AggregationJob(1, make_workers(PAYLOAD_WORKERS), elems=e) for e in PAYLOAD_ELEMS}
    streams = {e: jobs[e].stream(total) for e in PAYLOAD_ELEMS}
    results = dict.fromkeys(PAYLOAD_ELEMS, 0)
    for e in PAYLOAD_ELEMS:
        jobs[e].configure(pipelines[e])
    best = dict.fromkeys(PAYLOAD_ELEMS, float("inf"))
    per_round = messages * PAYLOAD_WORKERS
    for r in range(PAYLOAD_ROUNDS):  # one continuous stream per size, a slice per round
        for e in PAYLOAD_ELEMS:
            process = pipelines[e].process
            chunk = streams[e][r * per_round:(r + 1) * per_round]
            n = 0
            start = time.process_time()
            for port, frame in chunk:
                n += len(process(port, frame))
            best[e] = min(best[e], (time.process_time() - start) / len(chunk))
            results[e] += n
    for e in PAYLOAD_ELEMS:
        done = completions(pipelines[e], jobs[e].job)
        if done != total or results[e] != total * PAYLOAD_WORKERS:
            raise RuntimeError(f"netreduce E={e}: {done}/{total} messages completed, "
                               f"{results[e]} results")
    notes = (f"netreduce.p4 built with NR_ELEMS = E, {PAYLOAD_WORKERS} workers x {messages} "
             f"one-packet messages; CPU time, best of {PAYLOAD_ROUNDS} alternating rounds")
    rows = [{"name": f"netreduce E={e}, P={PAYLOAD_WORKERS}", "metric": "CPU per packet",
             "value": best[e] * 1e6, "unit": "us", "notes": notes} for e in PAYLOAD_ELEMS]
    lo, hi = PAYLOAD_ELEMS[0], PAYLOAD_ELEMS[-1]
    rows.append({"name": f"netreduce E={hi} / E={lo}", "metric": "cost ratio per packet",
                 "value": best[hi] / best[lo], "unit": "x",
                 "notes": f"{hi // lo}x the payload; same run"})
    return rows


def _build_lpm(engine: str) -> Any:
    """The LPM forwarder (ipv4_forward.p4 with one route) on ``engine``."""
    pipeline_cls = _require("softswitch.pipeline", "Pipeline")
    tables_mod = importlib.import_module("softswitch.engine.tables")
    pipeline = pipeline_cls.from_file(str(PROGRAM), engine=engine)
    table = next(
        t
        for t in pipeline.tables.values()
        if len(t.keys) == 1 and t.keys[0].match_kind == tables_mod.MatchKind.LPM
    )
    name, args = _route_action(pipeline.program, table.name, table.action_names)
    dst = int.from_bytes(bytes(int(b) for b in DST_IP.split(".")), "big")
    table.insert(
        tables_mod.TableEntry(
            matches=(tables_mod.FieldMatch(value=dst, prefix_len=32),),
            action=tables_mod.ActionCall(name=name, args=args),
        )
    )
    return pipeline


def _check_engines_agree(outs: dict[str, list[Any]], nr: dict[str, Any], jobs: dict[str, Any],
                         lpm: dict[str, Any], frame: bytes, total: int) -> None:
    """The C engine's outputs equal the Python engine's, every message completed on
    both, and both forward the LPM frame alike."""
    from bench.netreduce_job import completions

    if outs["c"] != outs["python"]:
        raise RuntimeError("netreduce: the C engine's outputs differ from the Python engine's")
    for e in ENGINES:
        done = completions(nr[e], jobs[e].job)
        if done != total:
            raise RuntimeError(f"netreduce on {e}: {done}/{total} messages completed")
    if lpm["c"].process(INGRESS_PORT, frame) != lpm["python"].process(INGRESS_PORT, frame):
        raise RuntimeError("LPM forwarder: the engines forward differently")


def engine_rows(seconds: float) -> list[dict[str, Any]]:
    """CPU time per packet of the Python engine and of the C engine side by side, in one
    run: netreduce.p4 at E = 256, P = 4 (a stream of aggregation messages) and the LPM
    forwarder. Rounds alternate between the engines, the best round counts; the C
    engine's outputs must equal the Python engine's, packet for packet."""
    import tempfile
    import time

    from bench.netreduce_job import AggregationJob, make_workers
    from experiment.matrix import program_for

    pipeline_cls = _require("softswitch.pipeline", "Pipeline")
    messages = max(50, int(seconds * NR_PACKETS_PER_S_GUESS) // ENGINE_WORKERS // 8)
    total = messages * ENGINE_ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        source = program_for(ENGINE_ELEMS, Path(tmp))
        nr = {e: pipeline_cls.from_file(str(source), engine=e) for e in ENGINES}
    if nr["c"].engine != "c":
        raise BenchSkipped("netreduce.p4 does not run on the C engine (see the log)")
    jobs = {e: AggregationJob(1, make_workers(ENGINE_WORKERS), elems=ENGINE_ELEMS)
            for e in ENGINES}  # fmt: skip
    for e in ENGINES:
        jobs[e].configure(nr[e])
    stream = jobs["python"].stream(total)
    lpm = {e: _build_lpm(e) for e in ENGINES}
    frame = routed_frame()
    lpm_n = max(1000, int(seconds * 20000) // ENGINE_ROUNDS)
    best = {(w, e): float("inf") for w in ("nr", "lpm") for e in ENGINES}
    outs: dict[str, list[Any]] = {e: [] for e in ENGINES}
    per_round = messages * ENGINE_WORKERS
    for r in range(ENGINE_ROUNDS):
        for e in ENGINES:
            process = nr[e].process
            chunk = stream[r * per_round:(r + 1) * per_round]
            start = time.process_time()
            got = [process(port, f) for port, f in chunk]
            best["nr", e] = min(best["nr", e], (time.process_time() - start) / len(chunk))
            outs[e] += got
            process = lpm[e].process
            start = time.process_time()
            for _ in range(lpm_n):
                process(INGRESS_PORT, frame)
            best["lpm", e] = min(best["lpm", e], (time.process_time() - start) / lpm_n)
    _check_engines_agree(outs, nr, jobs, lpm, frame, total)
    notes_nr = (f"netreduce.p4 E = {ENGINE_ELEMS}, {ENGINE_WORKERS} workers x {messages} "
                f"messages per round; CPU time, best of {ENGINE_ROUNDS} alternating rounds")
    notes_lpm = (f"{PROGRAM.name}, LPM hit, {len(frame)} B; CPU time, best of "
                 f"{ENGINE_ROUNDS} alternating rounds of {lpm_n} packets")
    rows = []
    for w, label, notes in (("nr", f"netreduce E={ENGINE_ELEMS}, P={ENGINE_WORKERS}", notes_nr),
                            ("lpm", "LPM forwarder", notes_lpm)):  # fmt: skip
        for e in ENGINES:
            rows.append({"name": f"{label}, {e} engine", "metric": "CPU per packet",
                         "value": best[w, e] * 1e6, "unit": "us", "notes": notes})
        rows.append({"name": f"{label}, python / c", "metric": "speed-up",
                     "value": best[w, "python"] / best[w, "c"], "unit": "x", "notes": notes})
    return rows


def run(seconds: float = DEFAULT_SECONDS) -> list[dict[str, Any]]:
    """Measures pipeline throughput; skips while the engine or the program is missing."""
    bench_pipeline = _require("bench.pipeline_rate", "bench_pipeline")
    pipeline = build_pipeline()
    frame = routed_frame()
    out = pipeline.process(INGRESS_PORT, frame)
    if [port for port, _ in out] != [EGRESS_PORT]:
        raise RuntimeError(f"the routed frame was not forwarded to port {EGRESS_PORT}: {out!r}")
    pps = float(bench_pipeline(pipeline, _frames_argument(bench_pipeline, frame), seconds))
    notes = f"{PROGRAM.name}, LPM hit, {len(frame)} B IPv4/UDP, {seconds:g} s"
    rows = [
        {
            "name": "pipeline.process",
            "metric": "throughput",
            "value": pps,
            "unit": "pkt/s",
            "notes": notes,
        },
        {
            "name": "pipeline.process",
            "metric": "time per packet",
            "value": 1e6 / pps if pps else 0.0,
            "unit": "us",
            "notes": notes,
        },
    ]
    for workers in NR_WORKERS:
        rows += netreduce_rows(workers, seconds)
    rows += payload_rows(seconds)
    rows += engine_rows(seconds)
    return rows
