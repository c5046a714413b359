"""Run the ingress and the egress of a frame apart on the built-in target, to replay the
egress orders of a multi-threaded BMv2 (whose per-port egress threads run packets of
different ports in any order) in a deterministic test.

The built-in target's synchronous mode runs every egress right after its ingress; this
helper drives the same V1Switch steps (``_ingress_pass``, ``_after_ingress``,
``_egress_pass``, ``_after_egress``) and lets a test hold a packet between them.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from softswitch.engine.runtime import PacketCtx
from softswitch.pipeline import Pipeline


class DeferredEgress:
    """A pipeline whose egress passes the test schedules."""

    def __init__(self, pipe: Pipeline) -> None:
        self.sw: Any = pipe._switch

    def ingress(self, port: int, frame: bytes) -> list[Any]:
        """Parser and ingress of ``frame``; returns the packets queued for egress."""
        sw = self.sw
        hdr, meta, sm = sw.new_hdr(), sw.new_meta(), sw.new_sm()
        n = len(frame)
        sm.ingress_port = port
        sm.packet_length = n
        if sw._has_ts:
            sm.ingress_global_timestamp = sw._now_us()
        from softswitch.v1model import _Job

        job = _Job(hdr, meta, sm, PacketCtx(frame, 0, n, n), port)
        ingress_q: deque[Any] = deque()
        egress_q: deque[Any] = deque()
        sw._ingress_pass(job)
        sw._after_ingress(job, ingress_q, egress_q)
        assert not ingress_q, "resubmission is not supported here"
        return list(egress_q)

    def egress(self, jobs: list[Any]) -> list[tuple[int, bytes]]:
        """The egress passes of ``jobs`` now, in the given order."""
        out: list[tuple[int, bytes]] = []
        ingress_q: deque[Any] = deque()
        egress_q: deque[Any] = deque(jobs)
        while egress_q:
            j = egress_q.popleft()
            self.sw._egress_pass(j)
            self.sw._after_egress(j, ingress_q, egress_q, out)
        return out

    def run(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Ingress and egress back to back (the synchronous order)."""
        return self.egress(self.ingress(port, frame))
