"""Differential testing: the same frames through the built-in target and BMv2, compared.

A :class:`Case` is a program, a sequence of steps (P4Runtime updates, register writes,
frames in) and the counters/registers to read afterwards. Cases come from STF files
(:func:`case_from_stf`: the control-plane commands are applied to a reference pipeline
and turned into the P4Runtime updates they amount to), from seeded random frames
(:func:`random_case`) and from netreduce.p4 aggregation traces with loss and
retransmission (:func:`netreduce_case`).

Targets:

* :class:`BuiltinTarget`: a :class:`~softswitch.pipeline.Pipeline` configured through the
  P4Runtime server's own write path (``PipelineState.write``), frames in process;
* :class:`ProcessTarget`: ``simple_switch_grpc`` running the p4c-compiled JSON inside a
  network namespace the harness creates (veth pairs ``sN``/``hN``, port N), configured over
  P4Runtime (gRPC on a unix socket, so nothing listens outside the namespace), frames sent
  and captured on the ``hN`` ends by a helper process in the namespace; registers read and
  written with ``simple_switch_CLI`` (BMv2's Thrift API: PI has no register access). The
  same class runs the built-in switch process (``kind="softswitch"``), which must match
  the in-process pipeline exactly: that checks the harness wherever the tests run as root.

:func:`compare` reports every difference: per port the frames in order (BMv2 reorders
only across ports), then counters and registers.

``python -m tests.difftest PROG.p4 [--stf FILE] [--random N] [--seed S]`` (root, needs
p4c and simple_switch_grpc) prints the differences.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.bmv2_runtime import cli_interpreter

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
Update = p4runtime_pb2.Update
MAX_READ_INDICES = 1024  # registers/counters larger than this are compared in their first part
SETTLE_S = 0.05  # after a frame came out, how long the pump waits for more before the next send
# With WANT, how long the pump waits for that many frames before the next send: the next frame
# goes in only after this one's came out, however slow the target (BMv2 beside busy networks
# fell behind a 2 ms pace and a port's frames came out of order); only a frame the target does
# not send (a difference, reported) costs the wait.
WANT_WAIT_S = 2.0
MIN_FRAME = 14  # AF_PACKET (and so a switch on a veth) never sees a shorter frame


# ============================================================================ cases


@dataclass
class Step:
    """One thing that happens to the switch, in order."""

    kind: str  # "updates", "packet", "register"
    updates: list[p4runtime_pb2.Update] = field(default_factory=list)
    port: int = 0
    frame: bytes = b""
    register: tuple[str, int, int] | None = None  # (name, index, value)


@dataclass
class Case:
    name: str
    program: Path
    steps: list[Step]
    counters: list[str] = field(default_factory=list)
    registers: list[str] = field(default_factory=list)

    @property
    def ports(self) -> list[int]:
        """Every port a frame enters on or a replica may leave on (the veths to create)."""
        ports = {s.port for s in self.steps if s.kind == "packet"}
        for s in self.steps:
            for u in s.updates:
                pre = u.entity.packet_replication_engine_entry
                for r in pre.multicast_group_entry.replicas:
                    ports.add(r.egress_port)
                for r in pre.clone_session_entry.replicas:
                    ports.add(r.egress_port)
        return sorted(p for p in ports | set(range(8)) if p < 511)


@dataclass
class Outcome:
    """What a target did: frames per egress port in order, then counters and registers."""

    outputs: dict[int, list[bytes]]
    counters: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    registers: dict[str, list[int]] = field(default_factory=dict)
    # the egress ports of each packet step's frames, in step order (the built-in target's:
    # how many frames the other target's run waits for after each send)
    sent: list[list[int]] = field(default_factory=list)


def _reference(program: Path) -> tuple[Any, p4info_pb2.P4Info, Any]:
    from softswitch.frontend import compile_file
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.entities import PipelineState
    from softswitch.pipeline import Pipeline

    prog = compile_file(program)
    pipeline = Pipeline(prog)
    p4info = build_p4info(prog)
    return pipeline, p4info, PipelineState(pipeline, p4info, b"", None)


def snapshot(state: Any) -> dict[tuple[Any, ...], p4runtime_pb2.Entity]:
    """The control-plane state of a pipeline as P4Runtime entities, keyed for diffing:
    table entries (not const ones), default actions, multicast groups, clone sessions."""
    out: dict[tuple[Any, ...], p4runtime_pb2.Entity] = {}
    pipeline = state.pipeline
    for table in state.p4info.tables:
        if table.is_const_table:
            continue
        req = p4runtime_pb2.Entity()
        req.table_entry.table_id = table.preamble.id
        for ent in state.read(req):
            te = ent.table_entry
            key = tuple(sorted(m.SerializeToString(deterministic=True) for m in te.match))
            out[("entry", te.table_id, key, te.priority)] = ent
        req.table_entry.is_default_action = True
        for ent in state.read(req):
            out[("default", table.preamble.id)] = ent
    for gid in pipeline.pre.groups():
        ent = p4runtime_pb2.Entity()
        mg = ent.packet_replication_engine_entry.multicast_group_entry
        mg.multicast_group_id = gid
        for port, rid in pipeline.pre.group_replicas(gid) or ():
            mg.replicas.add(egress_port=port, instance=rid)
        out[("mcast", gid)] = ent
    for session in pipeline.pre.clone_sessions():
        ent = p4runtime_pb2.Entity()
        cs = ent.packet_replication_engine_entry.clone_session_entry
        cs.session_id = session.session_id
        cs.packet_length_bytes = session.packet_length_bytes
        for port, rid in session.replicas:
            cs.replicas.add(egress_port=port, instance=rid)
        out[("clone", session.session_id)] = ent
    return out


def diff_updates(
    before: dict[tuple[Any, ...], p4runtime_pb2.Entity],
    after: dict[tuple[Any, ...], p4runtime_pb2.Entity],
) -> list[p4runtime_pb2.Update]:
    """The P4Runtime updates that turn state ``before`` into ``after``."""
    ups: list[p4runtime_pb2.Update] = []
    for key in before.keys() - after.keys():
        ups.append(Update(type=Update.DELETE, entity=before[key]))
    for key, ent in after.items():
        if key not in before:
            utype = Update.MODIFY if key[0] == "default" else Update.INSERT
            ups.append(Update(type=utype, entity=ent))
        elif before[key].SerializeToString(deterministic=True) != ent.SerializeToString(
            deterministic=True
        ):
            ups.append(Update(type=Update.MODIFY, entity=ent))
    return ups


def _readable(p4info: p4info_pb2.P4Info) -> tuple[list[str], list[str]]:
    counters = [c.preamble.name for c in p4info.counters]
    registers = [r.preamble.name for r in p4info.registers]
    return counters, registers


def case_from_stf(program: Path, stf: Path, min_frame: int = MIN_FRAME) -> Case:
    """The STF file's commands and packets as steps (its expectations are not used: the
    two targets are compared with each other); frames shorter than ``min_frame`` are left
    out (a switch on a veth never receives them)."""
    from softswitch import stf as stf_mod

    pipeline, p4info, state = _reference(program)
    runner = stf_mod.StfRunner(pipeline)
    steps: list[Step] = []
    before = snapshot(state)
    for line in stf_mod.parse_stf(stf.read_text(), str(stf)):
        cmd = line.command
        if isinstance(cmd, stf_mod.Packet):
            if len(cmd.data) < min_frame:
                log.info("%s:%d: %d-byte frame left out (no veth carries it)", stf, line.line,
                         len(cmd.data))
                continue
            steps.append(Step("packet", port=cmd.port, frame=cmd.data))
        elif isinstance(cmd, stf_mod.RegisterWrite):
            steps.append(Step("register", register=(cmd.register, cmd.index, cmd.value)))
        elif isinstance(cmd, stf_mod.Expect | stf_mod.CheckCounter | stf_mod.Wait):
            continue
        else:
            runner.run([line])
            after = snapshot(state)
            ups = diff_updates(before, after)
            if ups:
                steps.append(Step("updates", updates=ups))
            before = after
    counters, registers = _readable(p4info)
    return Case(f"{program.stem}/{stf.name}", program, steps, counters, registers)


def random_frames(seed: int, n: int, ports: Iterable[int], base: Case | None = None) -> list[Step]:
    """Seeded frames: mutations of the base case's frames (when given) and random bytes,
    14 to 200 bytes, entering on random ports."""
    rng = random.Random(seed)
    ports = list(ports)
    seeds = [s.frame for s in (base.steps if base else []) if s.kind == "packet"]
    out = []
    for _ in range(n):
        if seeds and rng.random() < 0.7:
            frame = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 4)):
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            if rng.random() < 0.2:
                frame = frame[: rng.randint(14, len(frame))]
        else:
            frame = bytearray(rng.randbytes(rng.randint(14, 200)))
        out.append(Step("packet", port=rng.choice(ports), frame=bytes(frame)))
    return out


def random_case(program: Path, seed: int, n: int, stf: Path | None = None) -> Case:
    """Random frames after the STF file's control-plane setup (if any)."""
    base = case_from_stf(program, stf) if stf is not None else None
    setup = [s for s in base.steps if s.kind != "packet"] if base else []
    ports = sorted({s.port for s in base.steps if s.kind == "packet"}) if base else [0, 1, 2]
    steps = setup + random_frames(seed, n, ports or [1], base)
    if base is None:
        _pipeline, p4info, _state = _reference(program)
        counters, registers = _readable(p4info)
    else:
        counters, registers = base.counters, base.registers
    return Case(f"{program.stem}/random-{seed}", program, steps, counters, registers)


def netreduce_case(seed: int, workers: int = 3, messages: int = 12, loss: float = 0.15) -> Case:
    """A recorded in-network aggregation job on p4src/netreduce.p4: every worker's
    contributions, with ``loss`` of them lost and retransmitted later (duplicates after
    the message completed included), so both the normal path and the protocol's
    retransmission paths run."""
    from bench.netreduce_job import AggregationJob, make_workers, program

    source = program()  # E = 32: short packets
    pipeline, p4info, state = _reference(source)
    before = snapshot(state)
    job = AggregationJob(1, make_workers(workers))
    job.configure(pipeline)
    setup = [Step("updates", updates=diff_updates(before, snapshot(state)))]
    rng = random.Random(seed)
    frames = job.stream(messages)
    steps: list[Step] = []
    lost: list[tuple[int, bytes]] = []
    for port, frame in frames:
        if rng.random() < loss:
            lost.append((port, frame))  # the sender retransmits it later
        else:
            steps.append(Step("packet", port=port, frame=frame))
        if lost and rng.random() < 0.3:
            p, f = lost.pop(rng.randrange(len(lost)))
            steps.append(Step("packet", port=p, frame=f))
    steps += [Step("packet", port=p, frame=f) for p, f in lost]
    # a few duplicates of already completed contributions (late retransmissions)
    for port, frame in rng.sample(frames, min(4, len(frames))):
        steps.append(Step("packet", port=port, frame=frame))
    counters, registers = _readable(p4info)
    return Case(f"netreduce/job-seed{seed}", source, setup + steps, counters, registers)


# ============================================================================ targets


class BuiltinTarget:
    """The built-in target in process, configured through the P4Runtime write path."""

    name = "built-in"

    def __init__(self, program: Path) -> None:
        self.pipeline, self.p4info, self.state = _reference(program)

    def __enter__(self) -> BuiltinTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def run(self, case: Case) -> Outcome:
        outputs: dict[int, list[bytes]] = {}
        sent: list[list[int]] = []
        for step in case.steps:
            if step.kind == "updates":
                for u in step.updates:
                    self.state.write(u)
            elif step.kind == "register":
                assert step.register is not None
                name, index, value = step.register
                self.pipeline.registers[name].write(index, value)
            else:
                sent.append([])
                for port, data in self.pipeline.process(step.port, step.frame):
                    outputs.setdefault(port, []).append(data)
                    sent[-1].append(port)
        out = Outcome(outputs, sent=sent)
        units = {c.preamble.name: c.spec.unit for c in self.p4info.counters}
        for name in case.counters:
            c = self.pipeline.counters[name]
            n = min(len(c.packets), MAX_READ_INDICES)
            # what P4Runtime reports for the counter's unit (the other number reads as 0)
            keep_p = units[name] != p4info_pb2.CounterSpec.BYTES
            keep_b = units[name] != p4info_pb2.CounterSpec.PACKETS
            out.counters[name] = [
                (c.packets[i] if keep_p else 0, c.bytes[i] if keep_b else 0) for i in range(n)
            ]
        for name in case.registers:
            r = self.pipeline.registers[name]
            out.registers[name] = [r.read(i) for i in range(min(r.size, MAX_READ_INDICES))]
        return out


def bmv2_available() -> str | None:
    """Why BMv2 differential testing cannot run here (None when it can)."""
    for tool in ("p4c", "simple_switch_grpc", "simple_switch_CLI"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    return None


# The frame pump inside the namespace: stdin gets one JSON object {"ports": [...]}, then
# lines "PORT HEX [WANT]" to send and finally "end"; it prints one JSON object with the
# frames captured per port (in arrival order) once no frame arrived for the idle time.
# Between two sends it waits the gap, and while frames keep arriving the settle time, no
# longer: waiting the whole idle time after every frame that came out made a 60-frame case
# take 30 s. With WANT (the frames the built-in target sent for it) it goes on as soon as
# that many came out (waiting up to WANT_WAIT_S for them): the settle time after each frame
# still made a case of 60 multicast frames take 4 s, and the netreduce traces 15-25 s (issue
# 29). A frame the other target sends beyond WANT still arrives, later, and the comparison
# reports it.
PUMP = r"""
import json, select, socket, sys, time
cfg = json.loads(sys.stdin.readline())
idle, gap, settle = cfg["idle"], cfg["gap"], cfg["settle"]
socks = {}
for p in cfg["ports"]:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((f"h{p}", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setblocking(False)
    socks[p] = s
got = {p: [] for p in socks}
errors = []
by_fd = {s.fileno(): p for p, s in socks.items()}

def drain(timeout, extend, want=None):
    end = time.monotonic() + timeout
    seen = sum(map(len, got.values()))
    while True:
        left = end - time.monotonic()
        if left <= 0 or (want is not None and sum(map(len, got.values())) - seen >= want):
            return
        r, _, _ = select.select(list(by_fd), [], [], left)
        for fd in r:
            p = by_fd[fd]
            while True:
                try:
                    data, addr = socks[p].recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] != socket.PACKET_OUTGOING:
                    got[p].append(data.hex())
                    if want is None:
                        end = time.monotonic() + extend

print("ready", flush=True)
for line in sys.stdin:
    line = line.strip()
    if line == "end":
        break
    port, data, *want = line.split()
    try:
        socks[int(port)].send(bytes.fromhex(data))
    except OSError as exc:
        errors.append(f"port {port}: {len(data) // 2}-byte frame not sent: {exc}")
    if want and int(want[0]) > 0:
        drain(cfg["want_wait"], settle, int(want[0]))
    else:
        drain(gap, settle)
drain(idle, idle)
print(json.dumps({"frames": got, "errors": errors}), flush=True)
"""


def _run(
    cmd: list[str], timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def p4c_compile(program: Path) -> tuple[str, bytes]:
    """(P4Info text, BMv2 JSON) from p4c (:func:`tests.p4c_build.p4c_outputs`: once per
    program and session, and through the testbed's p4c cache across sessions)."""
    from tests.p4c_build import p4c_outputs

    built = p4c_outputs(program)
    return built.p4info, built.json


class ProcessTarget:
    """A switch process in a private network namespace (removed on exit, even on error):
    ``bmv2`` (simple_switch_grpc running p4c's JSON) or ``softswitch`` (the built-in
    switch process, which checks the harness itself: it must match the in-process
    pipeline exactly)."""

    def __init__(self, program: Path, ports: Iterable[int], kind: str = "bmv2",
                 gap_s: float = 0.002) -> None:
        if kind not in ("bmv2", "softswitch"):
            raise ValueError(f"kind {kind!r}: choose bmv2 or softswitch")
        self.kind = kind
        self.name = "BMv2" if kind == "bmv2" else "built-in process"
        self.program = program
        self.ports = sorted(set(ports))
        self.gap_s = gap_s
        self.ns = f"dt{uuid.uuid4().hex[:8]}"
        self.tmp = Path(tempfile.mkdtemp(prefix="difftest-"))
        self.proc: subprocess.Popen[str] | None = None
        self.client: Any = None
        self.p4info: p4info_pb2.P4Info | None = None
        self.thrift_port = 9090

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> ProcessTarget:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _artifacts(self) -> tuple[p4info_pb2.P4Info, bytes]:
        from google.protobuf import text_format

        if self.kind == "softswitch":
            from softswitch.device_config import make_device_config
            from softswitch.frontend import compile_file
            from softswitch.p4info import build_p4info

            return build_p4info(compile_file(self.program)), make_device_config(self.program)
        text, config = p4c_compile(self.program)
        return text_format.Parse(text, p4info_pb2.P4Info()), config

    def _argv(self, sock: Path) -> list[str]:
        ifaces = [a for p in self.ports for a in ("-i", f"{p}@s{p}")]
        if self.kind == "softswitch":
            return [sys.executable, "-m", "softswitch", "run", "--no-p4", *ifaces,
                    "--grpc-server-addr", f"unix:{sock}", "--log-file", str(self.tmp / "sw.log")]
        return ["simple_switch_grpc", "--no-p4", "--device-id", "0", *ifaces,
                "--thrift-port", str(self.thrift_port), "--log-file", str(self.tmp / "bmv2"),
                "--", "--grpc-server-addr", f"unix:{sock}"]

    def _start(self) -> None:
        from controller.p4client import P4Client

        self.p4info, config = self._artifacts()
        _run(["ip", "netns", "add", self.ns])
        ns = ["ip", "netns", "exec", self.ns]
        _run([*ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        _run([*ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        _run(["ip", "-n", self.ns, "link", "set", "lo", "up"])
        for p in self.ports:
            _run(["ip", "-n", self.ns, "link", "add", f"s{p}", "type", "veth", "peer", "name",
                  f"h{p}"])
            for end in (f"s{p}", f"h{p}"):
                _run(["ip", "-n", self.ns, "link", "set", end, "up"])
        sock = self.tmp / "grpc.sock"
        cmd = [*ns, *self._argv(sock)]
        log.info("starting %s", " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, cwd=REPO)
        deadline = time.monotonic() + 60
        while not sock.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"{self.name} did not start: {err.strip()[-400:]}")
            time.sleep(0.05)
        self.client = P4Client(f"unix:{sock}", 0, 1, timeout_s=120)
        self.client.connect_with_retry(30)
        self.client.set_pipeline(self.p4info, config)

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # closing is best effort
                log.debug("closing the P4Runtime client failed", exc_info=True)
            self.client = None
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---------------------------------------------------------------- running
    def _translate(self, updates: list[p4runtime_pb2.Update], ours: p4info_pb2.P4Info) -> list[Any]:
        """Our updates with ids mapped by name to p4c's P4Info (normally the same ids)."""
        assert self.p4info is not None
        def ids(info: p4info_pb2.P4Info) -> dict[str, int]:
            out = {}
            for kind in ("tables", "actions", "action_profiles", "counters", "meters", "registers"):
                for e in getattr(info, kind):
                    out[e.preamble.name] = e.preamble.id
            return out
        theirs = ids(self.p4info)
        remap = {i: theirs.get(n, i) for n, i in ids(ours).items()}
        out = []
        for u in updates:
            u2 = Update()
            u2.CopyFrom(u)
            te = u2.entity.table_entry
            if u2.entity.HasField("table_entry"):
                te.table_id = remap.get(te.table_id, te.table_id)
                if te.action.HasField("action"):
                    te.action.action.action_id = remap.get(
                        te.action.action.action_id, te.action.action.action_id
                    )
            out.append(u2)
        return out

    def _cli(self, commands: list[str]) -> str:
        cli = shutil.which("simple_switch_CLI") or "simple_switch_CLI"
        proc = subprocess.run(
            ["ip", "netns", "exec", self.ns, *cli_interpreter(cli), cli, "--thrift-port",
             str(self.thrift_port)],
            input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=120,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"simple_switch_CLI: {proc.stderr.strip()}")
        return proc.stdout

    def run(self, case: Case, ours: p4info_pb2.P4Info,
            expect: Sequence[int] | None = None) -> Outcome:
        """``case`` through the switch process; ``expect``: how many frames each packet step
        should send out (the pump goes on once they came), else it waits them out."""
        wants = iter(expect) if expect is not None else None
        pump = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, "-c", PUMP],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert pump.stdin is not None and pump.stdout is not None
        try:
            pump.stdin.write(
                json.dumps({"ports": self.ports, "idle": 0.5, "gap": self.gap_s,
                            "settle": SETTLE_S, "want_wait": WANT_WAIT_S}) + "\n"
            )
            pump.stdin.flush()
            if pump.stdout.readline().strip() != "ready":
                raise RuntimeError(
                    f"frame pump failed: {pump.stderr.read() if pump.stderr else ''}"
                )
            for step in case.steps:
                if step.kind == "updates":
                    pump.stdin.flush()
                    time.sleep(0.3)  # frames before the update are through the switch
                    self.client.write(self._translate(step.updates, ours))
                elif step.kind == "register":
                    assert step.register is not None
                    self._register_write(*step.register)
                else:
                    want = f" {next(wants)}" if wants is not None else ""
                    pump.stdin.write(f"{step.port} {step.frame.hex()}{want}\n")
            pump.stdin.write("end\n")
            pump.stdin.flush()
            reply = pump.stdout.readline()
            if not reply:
                raise RuntimeError(
                    f"frame pump failed: {pump.stderr.read() if pump.stderr else ''}"
                )
            result = json.loads(reply)
            if result["errors"]:
                raise RuntimeError("; ".join(result["errors"]))
            got = result["frames"]
        finally:
            pump.kill()
            pump.wait()
        outputs = {int(p): [bytes.fromhex(h) for h in frames] for p,
                   frames in got.items() if frames}
        out = Outcome(outputs)
        for name in case.counters:
            out.counters[name] = self._read_counter(name, ours)
        out.registers = self._read_registers(case.registers)
        return out

    def _read_counter(self, name: str, ours: p4info_pb2.P4Info) -> list[tuple[int, int]]:
        assert self.p4info is not None
        cid = next(c.preamble.id for c in self.p4info.counters if c.preamble.name == name)
        ent = p4runtime_pb2.Entity()
        ent.counter_entry.counter_id = cid
        unit = next(c.spec.unit for c in self.p4info.counters if c.preamble.name == name)
        # only the declared unit is compared: BMv2 counts bytes of a PACKETS counter too and
        # reports them, where the built-in server reports 0 (the spec leaves the other
        # number undefined; docs/conformance.md)
        keep_p = unit != p4info_pb2.CounterSpec.BYTES
        keep_b = unit != p4info_pb2.CounterSpec.PACKETS
        values: dict[int, tuple[int, int]] = {}
        for e in self.client.read([ent]):
            ce = e.counter_entry
            values[ce.index.index] = (ce.data.packet_count if keep_p else 0,
                                      ce.data.byte_count if keep_b else 0)
        size = next(c.size for c in self.p4info.counters if c.preamble.name == name)
        return [values.get(i, (0, 0)) for i in range(min(size, MAX_READ_INDICES))]

    def _register_write(self, name: str, index: int, value: int) -> None:
        if self.kind == "bmv2":
            self._cli([f"register_write {name} {index} {value}"])
            return
        from softswitch.p4runtime.codec import encode

        assert self.p4info is not None
        rid = next(r.preamble.id for r in self.p4info.registers if r.preamble.name == name)
        u = Update(type=Update.MODIFY)
        u.entity.register_entry.register_id = rid
        u.entity.register_entry.index.index = index
        u.entity.register_entry.data.bitstring = encode(value)
        self.client.write([u])

    def _read_registers(self, names: list[str]) -> dict[str, list[int]]:
        """Every register of ``names`` at once: on BMv2 one simple_switch_CLI for them all
        (one each took 8 s for netreduce.p4's 39), on the built-in switch process one
        P4Runtime read of every cell."""
        assert self.p4info is not None
        sizes = {r.preamble.name: min(r.size, MAX_READ_INDICES) for r in self.p4info.registers}
        if not names:
            return {}
        if self.kind == "softswitch":
            ids = {r.preamble.name: r.preamble.id for r in self.p4info.registers}
            names_of = {i: n for n, i in ids.items()}
            wanted = []
            for name in names:
                for index in range(sizes[name]):
                    ent = p4runtime_pb2.Entity()
                    ent.register_entry.register_id = ids[name]
                    ent.register_entry.index.index = index
                    wanted.append(ent)
            values: dict[str, dict[int, int]] = {name: {} for name in names}
            for e in self.client.read(wanted):
                cells = values[names_of[e.register_entry.register_id]]
                cells[e.register_entry.index.index] = int.from_bytes(
                    e.register_entry.data.bitstring, "big")
            return {name: [values[name].get(i, 0) for i in range(sizes[name])]
                    for name in names}
        text = self._cli([f"register_read {name}" for name in names])
        read: dict[str, list[int]] = {}
        for line in text.splitlines():
            head, eq, text_values = line.removeprefix("RuntimeCmd: ").partition("=")
            if eq and head.strip() in sizes:
                read[head.strip()] = [int(v) for v in text_values.replace(",", " ").split()][
                    : sizes[head.strip()]]
        missing = [name for name in names if name not in read]
        if missing:
            raise RuntimeError(f"register_read {', '.join(missing)}: no values in "
                               f"{text.strip()[-300:]!r}")
        return {name: read[name] for name in names}


# ============================================================================ comparison


def compare(a: Outcome, b: Outcome, names: tuple[str, str] = ("built-in", "BMv2")) -> list[str]:
    """Every difference between two outcomes, as one line each."""
    diffs: list[str] = []
    for port in sorted(set(a.outputs) | set(b.outputs)):
        fa, fb = a.outputs.get(port, []), b.outputs.get(port, [])
        if fa == fb:
            continue
        if sorted(fa) == sorted(fb):
            diffs.append(f"port {port}: same {len(fa)} frames in a different order")
            continue
        for i in range(max(len(fa), len(fb))):
            x = fa[i].hex() if i < len(fa) else "(none)"
            y = fb[i].hex() if i < len(fb) else "(none)"
            if x != y:
                diffs.append(f"port {port} frame {i}: {names[0]} {x} vs {names[1]} {y}")
                break
        diffs.append(f"port {port}: {len(fa)} frames from {names[0]}, {len(fb)} from {names[1]}")
    for kind in ("counters", "registers"):
        da, db = getattr(a, kind), getattr(b, kind)
        for name in sorted(set(da) | set(db)):
            va, vb = da.get(name), db.get(name)
            if va != vb:
                idx = next((i for i, (x, y) in enumerate(zip(va or [], vb or [], strict=False))
                            if x != y), None)
                where = (
                    f" first at index {idx}: {va[idx]} vs {vb[idx]}"
                    if idx is not None and va and vb
                    else ""
                )
                diffs.append(f"{kind[:-1]} {name} differs{where}")
    return diffs


def differential(case: Case, kind: str = "bmv2") -> list[str]:
    """Run ``case`` on the in-process built-in target and on a switch process (``kind``)
    and return the differences."""
    with BuiltinTarget(case.program) as ours:
        a = ours.run(case)
        p4info = ours.p4info
    # the switch processes have interfaces on case.ports only: a frame the program sends to
    # another port (random frames through source_routing.p4 pick any) leaves neither of them
    attached = set(case.ports)
    a.outputs = {port: frames for port, frames in a.outputs.items() if port in attached}
    expect = [sum(port in attached for port in ports) for ports in a.sent]
    with ProcessTarget(case.program, case.ports, kind) as other:
        b = other.run(case, p4info, expect)
    return compare(a, b, ("built-in", other.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.difftest",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("program", type=Path)
    parser.add_argument("--stf", type=Path)
    parser.add_argument("--random", type=int, default=0, metavar="N", help="N random frames")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    why = bmv2_available()
    if why:
        print(f"difftest: cannot run: {why}", file=sys.stderr)
        return 2
    if args.random:
        case = random_case(args.program, args.seed, args.random, args.stf)
    elif args.stf:
        case = case_from_stf(args.program, args.stf)
    else:
        print("difftest: give --stf FILE or --random N", file=sys.stderr)
        return 2
    diffs = differential(case)
    for d in diffs:
        print(d)
    print(f"{case.name}: {len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
