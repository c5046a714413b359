"""One switch as the controller sees it: its connection, its pipeline and its wanted state.

A :class:`ManagedSwitch` owns a :class:`P4Client` and the :class:`ControlPlaneSchema` of the
program it runs. The layer above hands it the complete list of entities that should be on the device
(:meth:`ManagedSwitch.sync`); the switch reads what is there and writes only the difference, so the
same call serves first configuration, a controller restart (nothing running is touched when
nothing changed) and recovery after the switch process restarted (the pipeline is pushed
again when its cookie is missing, then everything is inserted). With ``reconnect`` set in the
options a broken stream starts a background reconnect with back-off followed by that sync.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller import entities as ents
from controller.errors import SchemaError
from controller.p4client import ArbitrationAnswer, P4Client, P4RuntimeRequestError
from controller.schema import ControlPlaneSchema, load_p4info

log = logging.getLogger(__name__)
Update: TypeAlias = p4runtime_pb2.Update


@dataclass(frozen=True)
class SwitchOptions:
    """How to reach and program one device (use ``dataclasses.replace`` for variants)."""

    name: str
    address: str
    device_id: int
    election_id: int = 1
    p4info: Path | None = None
    device_config: Path | None = None
    connect_timeout_s: float = 5.0
    rpc_timeout_s: float = 10.0
    reconnect: bool = False
    reconnect_deadline_s: float = 120.0
    request_log: Path | None = None  # append a text dump of every Write/SetPipeline here


@dataclass
class SyncReport:
    """What one :meth:`ManagedSwitch.sync` changed."""

    pipeline_pushed: bool = False
    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return self.inserted + self.modified + self.deleted


def pipeline_cookie(p4info: p4info_pb2.P4Info, device_config: bytes) -> int:
    """A 63-bit digest of the pipeline, stored as its P4Runtime cookie."""
    digest = hashlib.sha256(p4info.SerializeToString(deterministic=True) + device_config)
    return int.from_bytes(digest.digest()[:8], "big") >> 1


class ManagedSwitch:
    """One device: connection, pipeline, and the state the controller wants on it."""

    def __init__(self, options: SwitchOptions) -> None:
        self.options = options
        self.client = P4Client(
            options.address, options.device_id, options.election_id,
            timeout_s=options.rpc_timeout_s,
            on_stream_down=self._on_stream_down,
            on_arbitration=self._on_arbitration,
        )
        self._p4info: p4info_pb2.P4Info | None = None
        self._cookie_memo: tuple[p4info_pb2.P4Info, bytes, int] | None = None
        self._device_config: bytes | None = None
        self.schema: ControlPlaneSchema | None = None
        self._desired: list[p4runtime_pb2.Entity] = []
        self._lock = threading.RLock()
        self._reconnecting = threading.Event()
        self._stopped = threading.Event()
        self.on_recovered: Callable[[ManagedSwitch, SyncReport], None] | None = None
        self.on_primary_change: Callable[[ManagedSwitch, ArbitrationAnswer], None] | None = None
        self.recoveries = 0
        if options.p4info is not None:
            self.load_program(options.p4info, options.device_config)

    @property
    def name(self) -> str:
        return self.options.name

    def __repr__(self) -> str:
        o = self.options
        return f"ManagedSwitch({o.name!r}, {o.address}, device_id={o.device_id})"

    # ---------------------------------------------------------------- program
    def load_program(self, p4info: Path | p4info_pb2.P4Info, device_config: Path | bytes | None
                     ) -> None:
        """Set the pipeline this switch should run (P4Info and device config)."""
        info = p4info if isinstance(p4info, p4info_pb2.P4Info) else load_p4info(p4info)
        if isinstance(device_config, Path):
            device_config = device_config.read_bytes()
        self._p4info = info
        self._device_config = device_config
        self.schema = ControlPlaneSchema(info)

    def require_schema(self) -> ControlPlaneSchema:
        if self.schema is None:
            raise SchemaError(f"switch {self.name}: no P4Info known (push a pipeline first)")
        return self.schema

    @property
    def cookie(self) -> int | None:
        if self._p4info is None or self._device_config is None:
            return None
        # every sync compares it, and serializing the P4Info took a fifth of a job's
        # create-and-delete (the reliability campaign makes thousands): kept while the
        # pipeline objects are the same (set_pipeline and fetch_p4info replace them)
        memo = self._cookie_memo
        if memo is None or memo[0] is not self._p4info or memo[1] is not self._device_config:
            memo = (self._p4info, self._device_config,
                    pipeline_cookie(self._p4info, self._device_config))
            self._cookie_memo = memo
        return memo[2]

    # ------------------------------------------------------------- connection
    def connect(self) -> ArbitrationAnswer:
        """Connect and arbitrate; raises P4RuntimeRequestError (UNAVAILABLE: unreachable)."""
        self._stopped.clear()
        arb = self.client.connect(self.options.connect_timeout_s)
        log.info("%s: connected to %s (%s, election id %d)", self.name, self.options.address,
                 "primary" if arb.primary else "backup", self.options.election_id)
        return arb

    def close(self) -> None:
        self._stopped.set()
        self.client.close()

    @property
    def is_primary(self) -> bool:
        return self.client.is_primary

    def require_primary(self, operation: str) -> None:
        arb = self.client.arbitration
        if arb is None or not arb.primary:
            who = (
                f"election id {arb.election_id}"
                if arb is not None and arb.election_id
                else "another client"
            )
            raise P4RuntimeRequestError(
                operation, grpc.StatusCode.PERMISSION_DENIED,
                f"switch {self.name}: this controller (election id {self.options.election_id}) "
                f"is a backup; {who} is primary",
            )

    # ---------------------------------------------------------------- pipeline
    def device_cookie(self) -> int | None:
        """The cookie of the pipeline on the device; None when it has none (or no pipeline)."""
        config = self.client.get_pipeline(
            p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY
        )
        if config is None or not config.HasField("cookie"):
            return None
        return config.cookie.cookie or None

    def push_pipeline(self) -> None:
        """SetForwardingPipelineConfig(VERIFY_AND_COMMIT) with our P4Info and device config."""
        if self._p4info is None or self._device_config is None:
            raise SchemaError(f"switch {self.name}: no P4Info/device config to push")
        self.require_primary("SetForwardingPipelineConfig")
        self._log_request("SetForwardingPipelineConfig", f"cookie {self.cookie}")
        self.client.set_pipeline(self._p4info, self._device_config, cookie=self.cookie or 0)
        log.info("%s: pipeline pushed (cookie %x)", self.name, self.cookie or 0)

    def ensure_pipeline(self, force: bool = False) -> bool:
        """Push the pipeline unless the device already runs it (same cookie); True if pushed."""
        if not force and self.cookie is not None and self.device_cookie() == self.cookie:
            return False
        self.push_pipeline()
        return True

    def fetch_p4info(self) -> ControlPlaneSchema:
        """Adopt the P4Info the device runs (for switches we did not program)."""
        config = self.client.get_pipeline()
        if config is None or not config.HasField("p4info"):
            raise SchemaError(f"switch {self.name}: the device has no pipeline")
        self._p4info = config.p4info
        self.schema = ControlPlaneSchema(config.p4info)
        return self.schema

    # ------------------------------------------------------------------ writes
    def write(self, updates: Sequence[Update]) -> None:
        self.require_primary("Write")
        if self.options.request_log is not None:
            for u in updates:
                self._log_request("Write", text_format.MessageToString(u, as_one_line=True))
        self.client.write(updates)

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        return self.client.read(entities)

    def _log_request(self, operation: str, text: str) -> None:
        path = self.options.request_log
        if path is None:
            return
        with path.open("a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {self.name} {operation} {text}\n")

    # -------------------------------------------------------------------- sync
    @property
    def desired(self) -> list[p4runtime_pb2.Entity]:
        with self._lock:
            return list(self._desired)

    def sync(self, desired: Sequence[p4runtime_pb2.Entity] | None = None,
             push_pipeline: bool = True, prune: bool = True) -> SyncReport:
        """Make the device hold exactly ``desired`` (the last one given when None).

        Reads every table (except const ones), the multicast groups and clone sessions,
        then inserts what is missing, modifies what differs and (``prune``) deletes entries
        the controller does not want. Raises P4RuntimeRequestError when a write fails."""
        with self._lock:
            if desired is not None:
                self._desired = list(desired)
            wanted = list(self._desired)
            report = SyncReport()
            if push_pipeline and self._p4info is not None:
                report.pipeline_pushed = self.ensure_pipeline()
            current = self._read_current(wanted)
            want_by_key = {ents.entity_key(e): e for e in wanted}
            inserts: list[p4runtime_pb2.Entity] = []
            modifies: list[p4runtime_pb2.Entity] = []
            for key, ent in want_by_key.items():
                have = current.get(key)
                if have is None:
                    (modifies if ents.is_default_entry(ent) else inserts).append(ent)
                elif ents.same_content(have, ent):
                    report.unchanged += 1
                else:
                    modifies.append(ent)
            deletes = [] if not prune else [
                e for k,
                e in current.items() if k not in want_by_key and not ents.is_default_entry(e)
            ]
            self._apply(Update.DELETE, deletes)
            self._apply(Update.INSERT, inserts)
            self._apply(Update.MODIFY, modifies)
            report.inserted, report.modified, report.deleted = (
                len(inserts),
                len(modifies),
                len(deletes),
            )
            if report.changed or report.pipeline_pushed:
                log.info("%s: sync: %s", self.name, report)
            return report

    def _apply(self, kind: ents.UpdateType, entities: Sequence[p4runtime_pb2.Entity]) -> None:
        for batch in ents.write_order(kind, entities):
            self.write(ents.updates(kind, [_strip(e) for e in batch]))

    def _read_current(
        self, wanted: Sequence[p4runtime_pb2.Entity]
    ) -> dict[ents.EntityKey, p4runtime_pb2.Entity]:
        schema = self.require_schema()
        requests = [
            ents.wildcard_table(table.preamble.id)
            for table in schema.p4info.tables
            if not table.is_const_table
        ]
        requests += [
            ents.wildcard_table(e.table_entry.table_id, default=True)
            for e in wanted
            if ents.is_default_entry(e)
        ]
        requests += [ents.wildcard_pre("multicast_group_entry"),
                     ents.wildcard_pre("clone_session_entry")]
        for profile in schema.p4info.action_profiles:
            for what in ("action_profile_member", "action_profile_group"):
                requests.append(ents.wildcard_profile(what, profile.preamble.id))
        out: dict[ents.EntityKey, p4runtime_pb2.Entity] = {}
        for req in requests:
            try:
                found = self.read([req])
            except P4RuntimeRequestError as err:
                if err.code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND):
                    continue  # e.g. no clone-session reads on this target
                raise
            for e in found:
                if e.WhichOneof("entity") == "table_entry" and e.table_entry.is_default_action \
                        and not req.table_entry.is_default_action:
                    continue
                out[ents.entity_key(e)] = e
        return out

    # --------------------------------------------------------- reconnection
    def _on_arbitration(self, arb: ArbitrationAnswer) -> None:
        if self.on_primary_change is not None:
            self.on_primary_change(self, arb)

    def _on_stream_down(self, error: P4RuntimeRequestError) -> None:
        self.recover_in_background()

    def recover_in_background(self) -> None:
        """Start reconnecting (and re-syncing) unless that is already under way."""
        with self._lock:
            if not self.options.reconnect or self._stopped.is_set() or self._reconnecting.is_set():
                return
            self._reconnecting.set()
        threading.Thread(target=self._recover, name=f"recover-{self.name}", daemon=True).start()

    def _recover(self) -> None:
        """Reconnect with back-off, then push the pipeline and all state again."""
        try:
            deadline = time.monotonic() + self.options.reconnect_deadline_s
            while not self._stopped.is_set() and time.monotonic() < deadline:
                try:
                    self.client.connect_with_retry(max(1.0, deadline - time.monotonic()))
                    if not self.client.is_primary:
                        log.warning("%s: reconnected as backup; not reconciling", self.name)
                        return
                    report = self.sync()
                    self.recoveries += 1
                    log.info("%s: recovered after stream loss: %s", self.name, report)
                    if self.on_recovered is not None:
                        self.on_recovered(self, report)
                    return
                except P4RuntimeRequestError as err:
                    log.warning("%s: recovery attempt failed: %s", self.name, err)
                    time.sleep(0.2)
            log.error("%s: could not recover within %.0f s", self.name,
                      self.options.reconnect_deadline_s)
        finally:
            self._reconnecting.clear()

    def wait_recovered(self, count: int, timeout_s: float) -> bool:
        """Poll until :attr:`recoveries` reaches ``count`` (for tests and the CLI)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.recoveries >= count and not self._reconnecting.is_set():
                return True
            time.sleep(0.05)
        return False


def _strip(e: p4runtime_pb2.Entity) -> p4runtime_pb2.Entity:
    """An entity without read-only data (counters) so that it can be written back."""
    if e.WhichOneof("entity") == "table_entry" and (
        e.table_entry.HasField("counter_data") or e.table_entry.HasField("meter_counter_data")
    ):
        copy = p4runtime_pb2.Entity()
        copy.CopyFrom(e)
        copy.table_entry.ClearField("counter_data")
        copy.table_entry.ClearField("meter_counter_data")
        return copy
    return e
