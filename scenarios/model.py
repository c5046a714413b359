"""Scenario files: what they hold and how they are checked.

A scenario (YAML, or JSON, which YAML reads too) is a topology, jobs, faults over time and
assertions; docs/scenarios.md documents every field. :func:`load_scenario` returns a
:class:`Scenario` or raises :class:`ScenarioError` whose message names the file, the line,
the field's path and the offending value, e.g. ``ci.yaml:12: faults[0].loss.port: 9: switch
s1 has no port 9 (ports: 1, 2, 3)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtime import UnitError, parse_delay, parse_rate

ALGORITHMS = ("innetwork", "ring")
TARGETS = ("auto", "softswitch", "bmv2")
KINDS = ("rack", "spineleaf")
DIRECTIONS = ("in", "out", "both")
DEFAULT_TIMEOUT_S = 300.0


class ScenarioError(Exception):
    """A scenario file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class TopologySpec:
    kind: str = "rack"
    hosts: int | None = None  # rack: hosts (default 4); spineleaf: hosts per leaf (default 2)
    spines: int = 2
    leaves: int = 2
    gpus: int = 1
    bw: float = 10.0  # host links, Mbit/s
    fabric_bw: float | None = None
    delay: str | None = None
    loss: float | None = None
    file: str | None = None  # a topology file or shipped name (needs topo.topofile)
    params: dict[str, Any] = field(default_factory=dict)  # the file's parameters


@dataclass(frozen=True)
class JobSpec:
    name: str
    hosts: tuple[str, ...] = ()  # empty: every host
    algorithms: tuple[str, ...] = ALGORITHMS
    elements: int = 8192
    credits: int = 2
    slots: int = 64
    iters: int = 1
    start: float = 0.0  # not before this many seconds after the scenario's start


@dataclass(frozen=True)
class FaultSpec:
    at: float
    action: str  # "loss" | "clear" | "restart"
    switch: str | None = None
    port: int | None = None
    rate: float = 0.0  # loss: fraction of packets
    direction: str = "both"

    def describe(self) -> str:
        where = f"{self.switch}" + (f" port {self.port}" if self.port is not None else "")
        if self.action == "loss":
            return f"t={self.at:g}s loss {self.rate:g} on {where} ({self.direction})"
        if self.action == "clear":
            return f"t={self.at:g}s clear loss on {where if self.switch else 'every switch'}"
        return f"t={self.at:g}s restart {self.switch}"


@dataclass(frozen=True)
class AssertionSpec:
    kind: str  # "exact" | "time_ratio" | "max_seconds" | "drops"
    source: str  # "assertions[i]" (for reports)
    jobs: tuple[str, ...] = ()  # exact: these jobs (empty: all)
    numerator: str | None = None  # "JOB.ALGO"
    denominator: str | None = None
    run: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    reason: str | None = None
    switch: str | None = None
    job: str | None = None

    def describe(self) -> str:
        if self.kind == "exact":
            return f"exact results of {', '.join(self.jobs) if self.jobs else 'every job'}"
        bound = _bounds(self.minimum, self.maximum)
        if self.kind == "time_ratio":
            return f"time {self.numerator} / {self.denominator} {bound}"
        if self.kind == "max_seconds":
            return f"time of {self.run} {bound} s"
        where = f" at {self.switch}" if self.switch else ""
        of = f" of job {self.job}" if self.job else ""
        if self.maximum == 0 and self.minimum is None:
            return f"no {self.reason} drops{of}{where}"
        return f"{self.reason} drops{of}{where} {bound}"


def _bounds(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"within [{lo:g}, {hi:g}]"
    return f">= {lo:g}" if lo is not None else f"<= {hi:g}"


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    topology: TopologySpec
    jobs: tuple[JobSpec, ...]
    faults: tuple[FaultSpec, ...] = ()
    assertions: tuple[AssertionSpec, ...] = ()
    description: str = ""
    target: str = "softswitch"
    elems: int = 32
    timeout_s: float = DEFAULT_TIMEOUT_S
    switches: tuple[str, ...] = ()  # the topology's switch names (unprefixed)
    # time dilation: the network's clocks run tdf times slower than real time; every time
    # in the file (fault times, job starts, the timeout) is emulated seconds
    tdf: float = 1.0


# ----------------------------------------------------------------------------- reading


class _Doc:
    """The parsed file with each value's line, for error messages."""

    def __init__(self, path: Path, text: str) -> None:
        import yaml

        self.path = path
        self.lines: dict[str, int] = {}
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
            problem = getattr(exc, "problem", None) or str(exc)
            raise ScenarioError(f"{where}: not valid YAML/JSON: {problem}") from None
        if node is not None:
            self._index(node, "")

    def _index(self, node: Any, path: str) -> None:
        self.lines[path] = node.start_mark.line + 1
        if node.id == "mapping":
            for key, value in node.value:
                self._index(value, f"{path}.{key.value}" if path else str(key.value))
        elif node.id == "sequence":
            for i, value in enumerate(node.value):
                self._index(value, f"{path}[{i}]")

    def error(self, path: str, value: Any, why: str) -> ScenarioError:
        line = self.lines.get(path)
        probe = path
        while line is None and probe:  # a missing key: the line of its parent
            probe = probe.rsplit(".", 1)[0] if "." in probe else ""
            line = self.lines.get(probe)
        where = f"{self.path}:{line}" if line else str(self.path)
        shown = "(missing)" if value is _MISSING else repr(value)
        return ScenarioError(f"{where}: {path}: {shown}: {why}")


_MISSING = object()


class _Fields:
    """Typed reads of one mapping of the document; unknown keys are errors."""

    def __init__(self, doc: _Doc, data: Any, path: str) -> None:
        self.doc, self.path = doc, path
        if not isinstance(data, Mapping):
            raise doc.error(path or "(top level)", data, "expected a mapping")
        self.data = dict(data)
        self.used: set[str] = set()

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, check: Callable[[Any], Any], why: str, default: Any = _MISSING
            ) -> Any:
        self.used.add(key)
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None and default is None:
            if default is _MISSING:
                raise self.doc.error(self.sub(key), _MISSING, f"required ({why})")
            return default
        try:
            out = check(value)
        except (TypeError, ValueError):
            out = None
        if out is None:
            raise self.doc.error(self.sub(key), value, why)
        return out

    def done(self) -> None:
        unknown = sorted(set(map(str, self.data)) - self.used)
        if unknown:
            key = unknown[0]
            raise self.doc.error(self.sub(key), self.data[key],
                                 f"unknown field (known: {', '.join(sorted(self.used))})")


def _int(lo: int, hi: int | None = None) -> Callable[[Any], int | None]:
    def check(v: Any) -> int | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        return v if v >= lo and (hi is None or v <= hi) else None
    return check


def _num(lo: float, hi: float | None = None, open_lo: bool = False
         ) -> Callable[[Any], float | None]:
    def check(v: Any) -> float | None:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return None
        ok = (v > lo if open_lo else v >= lo) and (hi is None or v <= hi)
        return float(v) if ok else None
    return check


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v.strip() else None


def _rate_mbit(v: Any) -> float | None:
    """A link rate as topology files write it (``100M``, ``1G``; a number is Mbit/s), in
    Mbit/s (what the topologies' ``host_bw`` reads as a number)."""
    try:
        return parse_rate(v) / 1e6
    except (UnitError, AttributeError):
        return None


def _delay(v: Any) -> str | None:
    """A link delay with its unit (``2us``, ``1ms``), kept as written."""
    try:
        parse_delay(v)
    except UnitError:
        return None
    return str(v)


def _choice(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: v if v in options else None


def _port_in(ports: tuple[int, ...]) -> Callable[[Any], int | None]:
    return lambda v: v if not isinstance(v, bool) and v in ports else None


def _run_ref(v: Any) -> tuple[str, str] | None:
    if not isinstance(v, str) or v.count(".") != 1:
        return None
    job, algo = v.split(".")
    return (job, algo) if job and algo in ALGORITHMS else None


def load_scenario(path: str | Path) -> Scenario:
    """Reads and checks a scenario file (see the module docstring for the errors)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read: {exc}") from None
    doc = _Doc(path, text)
    top = _Fields(doc, doc.data, "")
    name = top.get("name", _str, "a non-empty string", path.stem)
    description = top.get("description", lambda v: v if isinstance(v, str) else None,
                          "a string", "")
    target = top.get("target", _choice(TARGETS), f"one of {', '.join(TARGETS)}", "softswitch")
    elems = top.get("elems", lambda v: v if v in (16, 32, 64) else None,
                    "elements per aggregation packet: 16, 32 or 64", 32)
    timeout_s = top.get("timeout", _num(0, open_lo=True), "seconds, above 0", DEFAULT_TIMEOUT_S)
    tdf = top.get("tdf", _num(1), "a time-dilation factor, at least 1", 1.0)
    topology = _topology(doc, top.get("topology", lambda v: v, "a mapping"), "topology")
    names = _names(doc, topology)
    jobs = _jobs(doc, top.get("jobs", lambda v: v if isinstance(v, list) and v else None,
                              "a non-empty list of jobs"), names)
    faults = _faults(doc, top.get("faults", lambda v: v if isinstance(v, list) else None,
                                  "a list of faults", []), names)
    assertions = _assertions(doc, top.get(
        "assertions", lambda v: v if isinstance(v, list) and v else None,
        "a non-empty list of assertions"), jobs, names)
    top.done()
    return Scenario(name, path, topology, jobs, faults, assertions, description, target, elems,
                    timeout_s, tuple(names.ports), float(tdf))


def _topology(doc: _Doc, data: Any, path: str) -> TopologySpec:
    f = _Fields(doc, data, path)
    file = f.get("file", _str, "a topology file or a shipped topology's name", None)
    if file is not None:
        params = f.get("params", lambda v: dict(v) if isinstance(v, Mapping) and all(
            isinstance(k, str) for k in v) else None, "a mapping of parameter names to values",
            {})
        other = sorted(set(map(str, f.data)) - {"file", "params"})
        if other:
            raise doc.error(f"{path}.{other[0]}", f.data[other[0]],
                            "with a topology file, set this in the file (or its params)")
        try:
            from topo import topofile  # noqa: F401 (present once files are supported)
        except ImportError:
            raise doc.error(f"{path}.file", file, "topology files are not supported by this "
                            "testbed version: use kind: rack|spineleaf") from None
        beside = doc.path.parent / file
        return TopologySpec(kind="file", file=str(beside) if beside.is_file() else file,
                            params=params)
    spec = TopologySpec(
        kind=f.get("kind", _choice(KINDS), f"one of {', '.join(KINDS)} (or give file)", "rack"),
        hosts=f.get("hosts", _int(1, 64), "an integer 1..64", None),
        spines=f.get("spines", _int(1, 16), "an integer 1..16", 2),
        leaves=f.get("leaves", _int(1, 16), "an integer 1..16", 2),
        gpus=f.get("gpus", _int(1, 8), "an integer 1..8", 1),
        bw=f.get("bw", _rate_mbit, "a rate such as 10M or 1G (a number is Mbit/s)", 10.0),
        fabric_bw=f.get("fabric_bw", _rate_mbit, "a rate such as 10M or 1G (a number is Mbit/s)",
                        None),
        delay=f.get("delay", _delay, "a delay with its unit, such as 2us or 1ms", None),
        loss=f.get("loss", _num(0, 100), "percent 0..100", None),
    )
    f.done()
    return spec


def build_topo(spec: TopologySpec, name_prefix: str = "", grpc_base_port: int | None = None
               ) -> Any:
    """The :class:`~topo.topologies.TestbedTopo` of a topology spec (starts nothing)."""
    if spec.file is not None:
        from topo import topofile
        from topo.topologies import FileTopo

        extra = {"grpc_base_port": grpc_base_port} if grpc_base_port is not None else {}
        return FileTopo(topofile.load_spec(topofile.resolve(spec.file), spec.params),
                        name_prefix=name_prefix, **extra)
    from topo.topologies import RackTopo, SpineLeafTopo

    common: dict[str, Any] = {"host_bw": spec.bw, "gpus_per_host": spec.gpus,
                              "delay": spec.delay, "loss": spec.loss, "name_prefix": name_prefix}
    if grpc_base_port is not None:
        common["grpc_base_port"] = grpc_base_port
    if spec.kind == "rack":
        return RackTopo(hosts=spec.hosts or 4, **common)
    return SpineLeafTopo(spines=spec.spines, leaves=spec.leaves, hosts_per_leaf=spec.hosts or 2,
                         fabric_bw=spec.fabric_bw, **common)


@dataclass(frozen=True)
class _Names:
    hosts: tuple[str, ...]
    ports: dict[str, tuple[int, ...]]  # switch -> its port numbers


def _names(doc: _Doc, spec: TopologySpec) -> _Names:
    from topo.errors import TopoError
    from topo.model import describe

    try:
        topo = describe(build_topo(spec), target="softswitch")
    except (TopoError, ValueError) as exc:
        raise doc.error("topology.file" if spec.file else "topology", spec.file or spec.kind,
                        f"cannot be built: {exc}") from None
    return _Names(tuple(h.name for h in topo.hosts),
                  {s.name: tuple(p.port for p in s.ports) for s in topo.switches})


def _jobs(doc: _Doc, items: list[Any], names: _Names) -> tuple[JobSpec, ...]:
    jobs: list[JobSpec] = []
    for i, item in enumerate(items):
        path = f"jobs[{i}]"
        f = _Fields(doc, item, path)
        name = f.get("name", lambda v: v if isinstance(v, str) and v.isidentifier() else None,
                     "a name of letters, digits and _")
        if any(j.name == name for j in jobs):
            raise doc.error(f"{path}.name", name, "another job has this name")
        hosts = f.get("hosts", lambda v: tuple(v) if isinstance(v, list) and v and all(
            isinstance(h, str) for h in v) else None, "a non-empty list of host names", ())
        for k, host in enumerate(hosts):
            if host not in names.hosts:
                raise doc.error(f"{path}.hosts[{k}]", host,
                                f"no such host (hosts: {', '.join(names.hosts)})")
        algos = f.get("algorithms", lambda v: tuple(v) if isinstance(v, list) and v and all(
            a in ALGORITHMS for a in v) and len(set(v)) == len(v) else None,
                      f"a list of distinct algorithms from {', '.join(ALGORITHMS)}", ALGORITHMS)
        job = JobSpec(
            name=name, hosts=hosts, algorithms=algos,
            elements=f.get("elements", _int(1, 1 << 24), "float32 per worker, 1..16777216",
                           8192),
            credits=f.get("credits", _int(1, 4), "an integer 1..4", 2),
            slots=f.get("slots", _int(1, 4096), "an integer 1..4096", 64),
            iters=f.get("iters", _int(1, 100), "an integer 1..100", 1),
            start=f.get("start", _num(0), "seconds, 0 or more", 0.0),
        )
        f.done()
        jobs.append(job)
    return tuple(jobs)


def _faults(doc: _Doc, items: list[Any], names: _Names) -> tuple[FaultSpec, ...]:
    faults = []
    for i, item in enumerate(items):
        path = f"faults[{i}]"
        f = _Fields(doc, item, path)
        at = f.get("at", _num(0), "seconds after the scenario's start, 0 or more")
        actions = [k for k in ("loss", "clear", "restart") if k in f.data]
        if len(actions) != 1:
            raise doc.error(path, item, "needs exactly one of loss, clear, restart")
        action = actions[0]
        body = f.get(action, lambda v: v if isinstance(v, Mapping) else None, "a mapping",
                     {} if action == "clear" else _MISSING)
        b = _Fields(doc, body, f"{path}.{action}")
        required = _MISSING if action != "clear" else None
        switch = b.get("switch", lambda v: v if v in names.ports else None,
                       f"a switch ({', '.join(names.ports)})", required)
        port = None
        if action != "restart":
            ports = names.ports.get(switch or "", ())
            port = b.get("port", _port_in(ports),
                          f"a port of switch {switch} (ports: "
                          f"{', '.join(map(str, ports))})",
                          required if action == "loss" else None)
        rate = b.get("rate", _num(0, 1, open_lo=True), "a fraction of packets, 0 < rate <= 1",
                     required if action == "loss" else 0.0) if action == "loss" else 0.0
        direction = b.get("direction", _choice(DIRECTIONS), f"one of {', '.join(DIRECTIONS)}",
                          "both") if action == "loss" else "both"
        b.done()
        f.done()
        faults.append(FaultSpec(at, action, switch, port, rate, direction))
    return tuple(sorted(faults, key=lambda x: x.at))


def _assertions(doc: _Doc, items: list[Any], jobs: tuple[JobSpec, ...], names: _Names
                ) -> tuple[AssertionSpec, ...]:
    runs = {f"{j.name}.{a}" for j in jobs for a in j.algorithms}
    job_names = tuple(j.name for j in jobs)

    def run_ref(v: Any) -> str | None:
        return v if _run_ref(v) is not None and v in runs else None

    run_why = f"JOB.ALGORITHM of a run the scenario makes ({', '.join(sorted(runs))})"
    out = []
    for i, item in enumerate(items):
        path = f"assertions[{i}]"
        if not isinstance(item, Mapping) or len(item) != 1:
            raise doc.error(path, item, "expected one of {exact: ...}, {time_ratio: ...}, "
                            "{max_seconds: ...}, {no_drops: ...}, {drops: ...}")
        (kind, body), = item.items()
        sub = f"{path}.{kind}"
        if kind == "exact":
            out.append(_exact_assertion(doc, sub, path, body, job_names))
            continue
        if kind not in ("time_ratio", "max_seconds", "no_drops", "drops"):
            raise doc.error(sub, body, "unknown assertion (exact, time_ratio, max_seconds, "
                            "no_drops, drops)")
        f = _Fields(doc, body, sub)
        if kind == "time_ratio":
            spec = AssertionSpec("time_ratio", path,
                                 numerator=f.get("numerator", run_ref, run_why),
                                 denominator=f.get("denominator", run_ref, run_why),
                                 minimum=f.get("min", _num(0), "a number >= 0", None),
                                 maximum=f.get("max", _num(0), "a number >= 0", None))
        elif kind == "max_seconds":
            spec = AssertionSpec("max_seconds", path, run=f.get("run", run_ref, run_why),
                                 maximum=f.get("max", _num(0, open_lo=True), "seconds above 0"))
        else:
            spec = _drops_assertion(f, kind, path, job_names, names)
        f.done()
        if spec.minimum is None and spec.maximum is None:
            raise doc.error(sub, body, "needs min, max or both")
        if (spec.minimum is not None and spec.maximum is not None
                and spec.minimum > spec.maximum):
            raise doc.error(f"{sub}.min", spec.minimum, f"above max ({spec.maximum:g})")
        out.append(spec)
    return tuple(out)


def _exact_assertion(doc: _Doc, sub: str, path: str, body: Any,
                     job_names: tuple[str, ...]) -> AssertionSpec:
    """``exact: all`` or the job name(s) whose every run must be exact."""
    wanted = (job_names if body in ("all", True) else (body,) if isinstance(body, str)
              else tuple(body) if isinstance(body, list) else None)
    if not wanted or any(j not in job_names for j in wanted):
        raise doc.error(sub, body, f"all, or job name(s) from {', '.join(job_names)}")
    return AssertionSpec("exact", path, jobs=tuple(wanted))


def _drops_assertion(f: _Fields, kind: str, path: str, job_names: tuple[str, ...],
                     names: _Names) -> AssertionSpec:
    """``drops`` (a count between min and max) or ``no_drops`` (none) of one reason,
    optionally at one switch or of one job."""
    reason = f.get("reason", _drop_reason, "a drop reason: " + ", ".join(drop_reasons()))
    switch = f.get("switch", lambda v: v if v in names.ports else None,
                   f"a switch ({', '.join(names.ports)})", None)
    job = f.get("job", lambda v: v if v in job_names else None,
                f"a job ({', '.join(job_names)})", None)
    if kind == "no_drops":
        lo, hi = None, 0.0
    else:
        lo = f.get("min", _num(0), "a count >= 0", None)
        hi = f.get("max", _num(0), "a count >= 0", None)
    return AssertionSpec("drops", path, reason=reason, switch=switch, job=job,
                         minimum=lo, maximum=hi)


def drop_reasons() -> list[str]:
    """The drop reasons of netreduce.p4's counters, as the controller names them."""
    from protocol.netreduce import DropReason

    return [r.name.lower() for r in DropReason if r != DropReason.NONE]


def _drop_reason(v: Any) -> str | None:
    return v if isinstance(v, str) and v in drop_reasons() else None
