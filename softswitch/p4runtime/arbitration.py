"""Master arbitration over StreamChannel sessions (default role only).

The primary is the connected session with the highest election id; every change of primary
is announced to all sessions, and a session that (re)arbitrates without changing the
primary gets its own answer: OK for the primary, ALREADY_EXISTS for a backup, NOT_FOUND when
no session is primary.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from softswitch.p4runtime.status import StatusError, invalid


def election_value(eid: p4runtime_pb2.Uint128) -> int:
    return (eid.high << 64) | eid.low


def election_proto(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


_ids = itertools.count(1)


@dataclass(eq=False)
class Session:
    """One StreamChannel: where its responses go and its arbitration state."""

    peer: str = ""
    sid: int = field(default_factory=lambda: next(_ids))
    # responses to send; a StatusError ends the stream with its status, None ends it with OK
    outbox: queue.Queue[p4runtime_pb2.StreamMessageResponse | StatusError | None] = field(
        default_factory=queue.Queue
    )
    election_id: int | None = None  # None until arbitrated (or arbitrated without an id)
    arbitrated: bool = False

    def send(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        self.outbox.put(msg)


class PrimaryElection:
    """Tracks sessions and elects the primary; thread-safe."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._primary: Session | None = None

    @property
    def primary(self) -> Session | None:
        return self._primary

    def sessions(self) -> list[Session]:
        with self._lock:
            return list(self._sessions)

    def update(self, session: Session, req: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        """Apply an arbitration request from ``session``; raises StatusError (the stream
        is then closed with that status) and sends the resulting notifications."""
        if req.device_id != self.device_id:
            raise StatusError(
                grpc.StatusCode.NOT_FOUND,
                f"device id {req.device_id} does not match this switch ({self.device_id})",
            )
        if req.HasField("role") and (req.role.name or req.role.id or req.role.HasField("config")):
            raise StatusError(
                grpc.StatusCode.UNIMPLEMENTED, "only the default role is supported"
            )
        eid = election_value(req.election_id) if req.HasField("election_id") else None
        with self._lock:
            if eid is not None:
                for other in self._sessions:
                    if other is not session and other.election_id == eid:
                        raise invalid(f"election id {eid} is already used by another client")
            session.election_id = eid
            session.arbitrated = True
            if session not in self._sessions:
                self._sessions.append(session)
            changed = self._elect()
            targets = list(self._sessions) if changed else [session]
            self._notify(targets)

    def remove(self, session: Session) -> None:
        with self._lock:
            if session not in self._sessions:
                return
            self._sessions.remove(session)
            if self._elect():
                self._notify(list(self._sessions))

    def is_primary_election(self, eid: p4runtime_pb2.Uint128) -> bool:
        with self._lock:
            return self._primary is not None and self._primary.election_id == election_value(eid)

    def _elect(self) -> bool:
        candidates = [s for s in self._sessions if s.election_id is not None]
        new = max(candidates, key=lambda s: s.election_id or 0, default=None)
        changed = new is not self._primary
        self._primary = new
        return changed

    def _highest(self) -> int | None:
        ids = [s.election_id for s in self._sessions if s.election_id is not None]
        return max(ids) if ids else None

    def _notify(self, targets: list[Session]) -> None:
        highest = self._highest()
        for s in targets:
            msg = p4runtime_pb2.StreamMessageResponse()
            arb = msg.arbitration
            arb.device_id = self.device_id
            if highest is not None:
                arb.election_id.CopyFrom(election_proto(highest))
            if self._primary is None:
                arb.status.code = code_pb2.NOT_FOUND
                arb.status.message = "no primary client"
            elif s is self._primary:
                arb.status.code = code_pb2.OK
                arb.status.message = "primary"
            else:
                arb.status.code = code_pb2.ALREADY_EXISTS
                arb.status.message = "backup; a client with a higher election id is primary"
            s.send(msg)
