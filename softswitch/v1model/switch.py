"""The v1model architecture on top of the compiled program, as BMv2's simple_switch runs it.

Facts taken from BMv2 (``targets/simple_switch/simple_switch.cpp`` and ``bm_sim``) that this
module relies on:

* Receive: all metadata zeroed; ``ingress_port``, ``packet_length`` (frame length),
  ``instance_type = NORMAL`` and ``ingress_global_timestamp`` (µs since start) set.
* Parser: on an error parsing stops, ``parser_error`` gets the error and the packet still
  runs ingress; the bytes consumed so far are removed and the rest is the payload. Checksum
  verification (the verifyChecksum control) runs after parsing either way and sets
  ``checksum_error``. An explicit ``transition reject`` stops parsing with NoError (p4c's
  BMv2 back end does not support it beyond that).
* After ingress, in this order: ingress clone (the *original* frame is parsed again, then
  all metadata is reset, the clone's field list copied and ``instance_type =
  INGRESS_CLONE``; one copy per session replica), digest, resubmit (original frame back to
  ingress, metadata reset except the field list, ``instance_type = RESUBMIT``,
  ``packet_length`` = original length; the packet goes no further), multicast when
  ``mcast_grp != 0`` (full copies per replica with ``egress_rid`` and ``instance_type =
  REPLICATION``; the original is discarded), drop when ``egress_spec == 511``, else
  ``instance_type = NORMAL`` and enqueue to ``egress_spec``.
* Egress: ``egress_port`` = queue port, ``egress_spec`` = 512 truncated to 9 bits (0),
  ``packet_length`` = the packet-length register (frame length adjusted by
  setValid/setInvalid), ``egress_global_timestamp``. After egress: egress clone (headers
  kept, metadata reset, field list copied, ``instance_type = EGRESS_CLONE``; done even if
  the original is then dropped), drop when ``egress_spec == 511``, computeChecksum and
  deparser, then recirculate (the deparsed frame back to ingress with metadata reset except
  the field list, ``instance_type = RECIRC``, ``ingress_port`` 0) or transmit.
* Clone/resubmit/recirculate requests are per-packet "registers" that replicas do not
  inherit (BMv2 clears them on copies). A clone request holds the session id as BMv2
  stores it: 16 bits with the top bit used as a "requested" flag, so session ``s`` means
  ``s & 0x7FFF``; ``clone(I2E|E2E, s)`` acts where it is handled (see
  :mod:`softswitch.v1model.primitives`).
* Counters and meters count BMv2's ``ingress_length``: the frame length as received
  (kept by resubmitted, cloned and multicast copies; a recirculated packet's is the length
  of the frame that re-enters).
* ``assert``/``assume`` failure: BMv2 logs and aborts the whole switch. An emulated switch
  should keep running, so the packet (with whatever copies it spawned in that pass) is
  dropped, an error is logged and :attr:`V1Switch.assertion_failures` counts it.

Speed: the header/metadata objects of the first pass of a packet are reused from packet
to packet (reset, not reallocated), and timestamps are taken only when the program
reads them.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from softswitch import ir
from softswitch.engine.codegen import CompiledProgram
from softswitch.engine.pre import PacketReplicationEngine
from softswitch.engine.runtime import P4AssertionFailed, PacketCtx
from softswitch.engine.trace import PacketTrace, PacketTracer
from softswitch.errors import P4Error
from softswitch.v1model.primitives import DROP_PORT

log = logging.getLogger(__name__)

PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_INGRESS_CLONE = 1
PKT_INSTANCE_TYPE_EGRESS_CLONE = 2
PKT_INSTANCE_TYPE_COALESCED = 3
PKT_INSTANCE_TYPE_RECIRC = 4
PKT_INSTANCE_TYPE_REPLICATION = 5
PKT_INSTANCE_TYPE_RESUBMIT = 6

MAX_PASSES = 256  # ingress+egress runs per received frame before giving up (loops)
MIRROR_SESSION_ID_MASK = 0x7FFF  # BMv2 RegisterAccess: bit 15 flags "clone requested"

_REQUIRED_SM = (
    "ingress_port",
    "egress_spec",
    "egress_port",
    "instance_type",
    "packet_length",
    "mcast_grp",
    "egress_rid",
    "parser_error",
    "checksum_error",
)
_MASK48 = (1 << 48) - 1


class _Job:
    """A packet between stages: its PHV objects, raw bytes and per-packet registers;
    ``port`` is the egress port (egress jobs) or the ingress port (ingress jobs)."""

    __slots__ = ("hdr", "meta", "sm", "ctx", "port")

    def __init__(self, hdr: Any, meta: Any, sm: Any, ctx: PacketCtx, port: int = 0) -> None:
        self.hdr = hdr
        self.meta = meta
        self.sm = sm
        self.ctx = ctx
        self.port = port


class JobSink(Protocol):
    """Where the pass methods put egress-bound jobs (only ``append``): the synchronous
    switch's egress deque, or the queued switch's enqueueing sink."""

    def append(self, job: _Job, /) -> None: ...


class V1Switch:
    """Runs one frame through parser, ingress, PRE, egress and deparser."""

    def __init__(
        self,
        compiled: CompiledProgram,
        pre: PacketReplicationEngine,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.compiled = compiled
        self.pre = pre
        blocks = compiled.blocks
        params = compiled.block_params["parser"]
        if len(params) != 4:
            raise P4Error("the v1model parser must take (packet_in, H, M, standard_metadata_t)")
        self.hdr_t, self.meta_t, self.sm_t = params[1].type, params[2].type, params[3].type
        sm_t = ir.strip_newtype(self.sm_t)
        names = {f.name for f in getattr(sm_t, "fields", [])}
        missing = [f for f in _REQUIRED_SM if f not in names]
        if missing:
            raise P4Error(f"standard_metadata_t lacks field(s) {', '.join(missing)}")
        used = _read_fields(compiled.code, names)
        self._has_ts = "ingress_global_timestamp" in used
        self._has_ets = "egress_global_timestamp" in used
        self._has_queue = {"enq_timestamp", "deq_timedelta"} <= names and bool(
            {"enq_timestamp", "deq_timedelta"} & used
        )
        self.new_hdr = compiled.namespace[compiled._cls_names[id(ir.strip_newtype(self.hdr_t))]]  # noqa: SLF001
        self.new_meta = compiled.namespace[compiled._cls_names[id(ir.strip_newtype(self.meta_t))]]  # noqa: SLF001
        self.new_sm = compiled.namespace[compiled._cls_names[id(sm_t)]]  # noqa: SLF001
        self.parse = blocks["parser"]
        self.verify = blocks["verify_checksum"]
        self.ingress = blocks["ingress"]
        self.egress = blocks["egress"]
        self.compute = blocks["compute_checksum"]
        self.deparse = blocks["deparser"]
        self.field_lists = compiled.field_lists
        self.digests: deque[tuple[str, tuple[int, ...]]] = deque()
        self.clock_ns = clock_ns
        self._t0 = clock_ns()
        self.assertion_failures = 0
        # PHV objects for the first pass of a packet, reset and reused (a stack, so a
        # re-entrant call simply allocates its own)
        self._spare_phv: list[tuple[Any, Any, Any]] = []

    # ------------------------------------------------------------------ helpers

    def _now_us(self) -> int:
        return ((self.clock_ns() - self._t0) // 1000) & _MASK48

    def _copy_fl(self, fl: int | None, dst_meta: Any, src_meta: Any) -> None:
        if fl is None or fl < 0:
            return
        copier = self.field_lists.get(fl)
        if copier is not None:
            copier(dst_meta, src_meta)

    def _fresh(self, data: bytes, port: int, instance_type: int, length: int) -> _Job:
        ctx = PacketCtx(data=data, ingress_length=length, length_reg=length)
        sm = self.new_sm()
        sm.ingress_port = port
        sm.instance_type = instance_type
        sm.packet_length = length
        return _Job(self.new_hdr(), self.new_meta(), sm, ctx, port)

    # ------------------------------------------------------------------ process

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """All frames transmitted because ``frame`` arrived on ``port``, in order."""
        spare = self._spare_phv
        if spare:
            hdr, meta, sm = phv = spare.pop()
            hdr._reset()
            meta._reset()
            sm._reset()
        else:
            phv = (hdr, meta, sm) = (self.new_hdr(), self.new_meta(), self.new_sm())
        try:
            n = len(frame)
            sm.ingress_port = port
            sm.packet_length = n
            if self._has_ts:
                sm.ingress_global_timestamp = self._now_us()
            job = _Job(hdr, meta, sm, PacketCtx(frame, 0, n, n), port)
            return self._run(job)
        finally:
            spare.append(phv)

    def _run(self, job: _Job) -> list[tuple[int, bytes]]:
        """Ingress and egress passes of ``job`` and of every copy it spawns.

        The usual packet (unicast or dropped, no clone, digest, resubmit, multicast or
        recirculation) goes straight through; anything else continues in the general
        loop over the ingress and egress queues."""
        out: list[tuple[int, bytes]] = []
        ingress_q: deque[_Job] = deque()
        egress_q: deque[_Job] = deque()
        try:
            if self._ingress_pass(job):
                self._after_ingress(job, ingress_q, egress_q)
            else:
                sm = job.sm
                if sm.egress_spec == DROP_PORT:
                    return out
                sm.instance_type = PKT_INSTANCE_TYPE_NORMAL
                job.port = sm.egress_spec
                if self._egress_pass(job):
                    self._after_egress(job, ingress_q, egress_q, out)
                elif sm.egress_spec != DROP_PORT:
                    out.append((job.port, self._emit(job)))
                    return out
        except P4AssertionFailed as exc:
            self._assertion_failed(exc)
        passes = 1
        while ingress_q or egress_q:
            passes += 1
            if passes > MAX_PASSES:
                log.warning(
                    "packet from port %d exceeded %d passes; dropping the rest",
                    job.port,
                    MAX_PASSES,
                )
                break
            try:
                if ingress_q:
                    j = ingress_q.popleft()
                    self._ingress_pass(j)
                    self._after_ingress(j, ingress_q, egress_q)
                else:
                    j = egress_q.popleft()
                    self._egress_pass(j)
                    self._after_egress(j, ingress_q, egress_q, out)
            except P4AssertionFailed as exc:
                self._assertion_failed(exc)
        return out

    # hooks for the queued switch (softswitch.traffic_manager); the tracing switch fills
    # them in, the synchronous path never calls them
    def _frame_begin(self, port: int, length: int) -> None:
        pass

    def _frame_end(self) -> None:
        pass

    def _frame_drop(self, reason: str) -> None:
        pass

    def _assertion_failed(self, exc: P4AssertionFailed) -> None:
        self.assertion_failures += 1
        log.error("assert/assume failed at %s; packet dropped", exc)

    def _ingress_pass(self, job: _Job) -> bool:
        """Parser, checksum verification and ingress; True when the packet asked for
        more than unicast or drop."""
        hdr, meta, sm, ctx = job.hdr, job.meta, job.sm, job.ctx
        sm.parser_error = self.parse(ctx, hdr, meta, sm)
        self.verify(ctx, hdr, meta)
        sm.checksum_error = ctx.checksum_error
        self.ingress(ctx, hdr, meta, sm)
        return bool(
            sm.mcast_grp
            or ctx.clone_session is not None
            or ctx.digest is not None
            or ctx.resubmit_fl is not None
        )

    def _after_ingress(self, job: _Job, ingress_q: deque[_Job], egress_q: JobSink) -> None:
        """What BMv2 does after ingress: clone, learn, resubmit, multicast or enqueue."""
        hdr, meta, sm, ctx = job.hdr, job.meta, job.sm, job.ctx
        frame = ctx.data
        if ctx.clone_session is not None:
            sid, fl = ctx.clone_session, ctx.clone_fl
            ctx.clone_session = ctx.clone_fl = None
            session = self.pre.clone_session(sid & MIRROR_SESSION_ID_MASK)
            if session is not None:
                for eport, rid in session.replicas:
                    c = self._fresh(
                        frame, job.port, PKT_INSTANCE_TYPE_INGRESS_CLONE, ctx.ingress_length
                    )
                    self.parse(c.ctx, c.hdr, c.meta, c.sm)
                    c.meta = self.new_meta()
                    c.sm = self.new_sm()
                    self._copy_fl(fl, c.meta, meta)
                    c.sm.instance_type = PKT_INSTANCE_TYPE_INGRESS_CLONE
                    c.sm.egress_rid = rid
                    c.ctx.truncate = session.packet_length_bytes
                    c.port = eport
                    egress_q.append(c)

        if ctx.digest is not None:
            self.digests.append(ctx.digest)
            ctx.digest = None

        if ctx.resubmit_fl is not None:
            r = self._fresh(frame, 0, PKT_INSTANCE_TYPE_RESUBMIT, ctx.ingress_length)
            r.sm.ingress_port = 0
            self._copy_fl(ctx.resubmit_fl, r.meta, meta)
            ingress_q.appendleft(r)
            return

        mgid = sm.mcast_grp
        if mgid:
            sm.instance_type = PKT_INSTANCE_TYPE_REPLICATION
            replicas = self.pre.replicas(mgid)
            last = len(replicas) - 1
            for i, (eport, rid) in enumerate(replicas):
                sm.egress_rid = rid
                if i == last:
                    # the original is discarded after replication, so the last replica
                    # takes its PHV objects instead of a copy (nothing reads them again)
                    egress_q.append(_Job(hdr, meta, sm, _copy_ctx(ctx), eport))
                else:
                    c = _Job(hdr._copy(), meta._copy(), sm._copy(), _copy_ctx(ctx), eport)
                    egress_q.append(c)
            return

        if sm.egress_spec == DROP_PORT:
            return
        sm.instance_type = PKT_INSTANCE_TYPE_NORMAL
        job.port = sm.egress_spec
        egress_q.append(job)

    def _egress_pass(self, job: _Job) -> bool:
        """The egress control; True when it asked for a clone, recirculation or
        truncation."""
        hdr, meta, sm, ctx = job.hdr, job.meta, job.sm, job.ctx
        if self._has_ets:
            sm.egress_global_timestamp = self._now_us()
        if self._has_queue:
            sm.enq_timestamp = self._now_us() & 0xFFFFFFFF
            sm.deq_timedelta = 0
        sm.egress_port = job.port
        sm.egress_spec = (DROP_PORT + 1) & 0x1FF
        sm.packet_length = ctx.length_reg & 0xFFFFFFFF
        self.egress(ctx, hdr, meta, sm)
        return ctx.clone_session is not None or ctx.recirculate_fl is not None or bool(ctx.truncate)

    def _emit(self, job: _Job) -> bytes:
        """computeChecksum and the deparser: the frame as it leaves (or recirculates)."""
        ctx = job.ctx
        self.compute(ctx, job.hdr, job.meta)
        frame = self.deparse(ctx, job.hdr)  # headers + payload
        if ctx.truncate and len(frame) > ctx.truncate:
            frame = frame[: ctx.truncate]
        return frame

    def _after_egress(
        self, job: _Job, ingress_q: deque[_Job], egress_q: JobSink, out: list[tuple[int, bytes]]
    ) -> None:
        """What BMv2 does after egress: clone, drop, deparse, recirculate or transmit."""
        hdr, meta, sm, ctx = job.hdr, job.meta, job.sm, job.ctx
        if ctx.clone_session is not None:
            sid, fl = ctx.clone_session, ctx.clone_fl
            ctx.clone_session = ctx.clone_fl = None
            session = self.pre.clone_session(sid & MIRROR_SESSION_ID_MASK)
            if session is not None:
                for eport, rid in session.replicas:
                    cmeta = self.new_meta()
                    csm = self.new_sm()
                    self._copy_fl(fl, cmeta, meta)
                    csm.instance_type = PKT_INSTANCE_TYPE_EGRESS_CLONE
                    csm.egress_rid = rid
                    cctx = _copy_ctx(ctx)
                    cctx.truncate = session.packet_length_bytes
                    egress_q.append(_Job(hdr._copy(), cmeta, csm, cctx, eport))

        if sm.egress_spec == DROP_PORT:
            return
        frame = self._emit(job)
        if ctx.recirculate_fl is not None:
            r = self._fresh(frame, 0, PKT_INSTANCE_TYPE_RECIRC, len(frame))
            self._copy_fl(ctx.recirculate_fl, r.meta, meta)
            ingress_q.appendleft(r)
            return
        out.append((job.port, frame))


def _read_fields(source: str, names: set[str]) -> set[str]:
    """The standard_metadata fields the generated code mentions (whole-struct copies and
    field lists spell every field out, so a field not mentioned is never read)."""
    return {n for n in names if f".{n}" in source}


def _copy_ctx(ctx: PacketCtx) -> PacketCtx:
    """A replica's registers: same bytes and length, no pending requests (BMv2 clears
    them on copies)."""
    return PacketCtx(
        data=ctx.data, pos=ctx.pos, ingress_length=ctx.ingress_length, length_reg=ctx.length_reg
    )


class TracingV1Switch(V1Switch):
    """:class:`V1Switch` over the instrumented code (``compile_program(trace=True)``):
    the same packet handling, plus one :class:`PacketTrace` per received frame with the
    pass boundaries and the fate of every copy. Every pass takes the general path of
    :meth:`V1Switch._run`, so each decision is seen (and reported) in one place."""

    def __init__(
        self,
        compiled: CompiledProgram,
        pre: PacketReplicationEngine,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if compiled.tracer is None:
            raise ValueError("TracingV1Switch needs a program compiled with trace=True")
        super().__init__(compiled, pre, clock_ns)
        self.tracer: PacketTracer = compiled.tracer
        self.last_trace: PacketTrace | None = None

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        tr = self.tracer
        tr.begin(port, len(frame))
        try:
            return super().process(port, frame)
        finally:
            self.last_trace = tr.end()

    def _frame_begin(self, port: int, length: int) -> None:
        self.tracer.begin(port, length)

    def _frame_end(self) -> None:
        self.last_trace = self.tracer.end()

    def _frame_drop(self, reason: str) -> None:
        self.tracer.drop(reason)

    def _ingress_pass(self, job: _Job) -> bool:
        hdr, meta, sm, ctx = job.hdr, job.meta, job.sm, job.ctx
        self.tracer.begin_pass("ingress", job.port, sm.instance_type)
        sm.parser_error = self.parse(ctx, hdr, meta, sm)
        self.verify(ctx, hdr, meta)
        sm.checksum_error = ctx.checksum_error
        if ctx.checksum_error:
            self.tracer.decision("checksum_error = 1 (verify_checksum failed)")
        self.ingress(ctx, hdr, meta, sm)
        return True

    def _after_ingress(self, job: _Job, ingress_q: deque[_Job], egress_q: JobSink) -> None:
        tr = self.tracer
        sm, ctx = job.sm, job.ctx
        self._trace_clone("ingress", ctx)
        if ctx.digest is not None:
            tr.decision(f"digest {ctx.digest[0]} {ctx.digest[1]}")
        if ctx.resubmit_fl is not None:
            tr.decision("resubmit")
        elif sm.mcast_grp:
            replicas = self.pre.replicas(sm.mcast_grp)
            if not replicas:
                tr.drop(f"multicast group {sm.mcast_grp} unknown or empty")
            else:
                copies = ", ".join(f"port {p} rid {r}" for p, r in replicas)
                tr.decision(f"multicast group {sm.mcast_grp}: {copies}")
        elif sm.egress_spec == DROP_PORT:
            tr.drop(self._drop_reason("ingress", sm))
        else:
            tr.decision(f"to egress port {sm.egress_spec}")
        super()._after_ingress(job, ingress_q, egress_q)

    def _trace_clone(self, where: str, ctx: Any) -> None:
        """Record a pending clone request and where its copies will go."""
        if ctx.clone_session is None:
            return
        sid = ctx.clone_session & MIRROR_SESSION_ID_MASK
        session = self.pre.clone_session(sid)
        if session is None:
            self.tracer.decision(f"clone to session {sid}: no such session, no copy")
        else:
            ports = ", ".join(str(p) for p, _ in session.replicas) or "none"
            self.tracer.decision(f"{where} clone to session {sid} -> port(s) {ports}")

    def _drop_reason(self, where: str, sm: Any) -> str:
        why = f"egress_spec == {DROP_PORT} at the end of {where}"
        marks = [n for n in self.tracer.pass_notes if n.startswith("mark_to_drop")]
        why += f" ({marks[-1]})" if marks else " (set by the program)"
        if where == "ingress" and sm.parser_error:
            why += f"; parser error {self.tracer.error_name(sm.parser_error)}"
        return why

    def _egress_pass(self, job: _Job) -> bool:
        sm = job.sm
        extra = f" rid={sm.egress_rid}" if sm.egress_rid else ""
        self.tracer.begin_pass("egress", job.port, sm.instance_type, extra)
        super()._egress_pass(job)
        return True

    def _after_egress(
        self, job: _Job, ingress_q: deque[_Job], egress_q: JobSink, out: list[tuple[int, bytes]]
    ) -> None:
        tr = self.tracer
        sm, ctx = job.sm, job.ctx
        self._trace_clone("egress", ctx)
        if sm.egress_spec == DROP_PORT:
            tr.drop(self._drop_reason("egress", sm))
            super()._after_egress(job, ingress_q, egress_q, out)
            return
        recirc = ctx.recirculate_fl is not None
        before = len(out)
        super()._after_egress(job, ingress_q, egress_q, out)
        if recirc:
            tr.decision("recirculate")
        for port, frame in out[before:]:
            tr.output(port, len(frame))

    def _assertion_failed(self, exc: P4AssertionFailed) -> None:
        self.tracer.drop(f"assert/assume failed at {exc}")
        super()._assertion_failed(exc)
