"""The committed pipeline as P4Runtime sees it, and Write/Read of every entity kind.

:class:`PipelineState` pairs the engine ``Pipeline`` with its P4Info index and keeps what
the engine does not store itself: entry metadata (cookies), the PRE configuration as
written, meter configurations and digest configurations. All methods must be called with
the switch lock held, which is what makes each update atomic relative to packets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from softswitch.errors import TableError
from softswitch.p4runtime import tables as tt
from softswitch.p4runtime.codec import decode, encode
from softswitch.p4runtime.schema import P4InfoById
from softswitch.p4runtime.status import StatusError, invalid, not_found, unimplemented

log = logging.getLogger(__name__)

Update = p4runtime_pb2.Update
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE


def _bitwidth(type_spec: Any) -> int:
    """Width of a bitstring P4DataTypeSpec (0 when unknown)."""
    bs = type_spec.bitstring
    kind = bs.WhichOneof("type_spec")
    if kind == "bit":
        return bs.bit.bitwidth
    if kind == "int":
        return bs.int.bitwidth
    if kind == "varbit":
        return bs.varbit.max_bitwidth
    return 0


def _replicas(msg_replicas: Any) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for r in msg_replicas:
        if r.WhichOneof("port_kind") == "port":
            port = int.from_bytes(r.port, "big") if r.port else 0
        else:
            port = r.egress_port
        pair = (port, r.instance)
        if pair in seen:
            raise invalid(f"duplicate replica (port {port}, instance {r.instance})")
        seen.add(pair)
        out.append(pair)
    return out


class PipelineState:
    """A committed pipeline plus the P4Runtime-side state that lives beside it."""

    def __init__(
        self,
        pipeline: Any,
        p4info: p4info_pb2.P4Info,
        device_config: bytes,
        cookie: int | None,
    ) -> None:
        self.pipeline = pipeline
        self.p4info = p4info
        self.schema = P4InfoById(p4info)
        self.device_config = device_config
        self.cookie = cookie
        self.entry_metadata: dict[tuple[str, tt.MatchKey, int], bytes] = {}
        self.mcast_groups: dict[int, p4runtime_pb2.MulticastGroupEntry] = {}
        self.clone_sessions: dict[int, p4runtime_pb2.CloneSessionEntry] = {}
        self.digest_configs: dict[int, p4runtime_pb2.DigestEntry.Config] = {}
        self.defaults_written: set[int] = set()  # tables whose default entry a client set

    # ===================================================================== writes
    def write(self, update: p4runtime_pb2.Update) -> None:
        """Apply one update; raises StatusError."""
        if update.type == Update.UNSPECIFIED:
            raise invalid("update type is UNSPECIFIED")
        kind = update.entity.WhichOneof("entity")
        if kind is None:
            raise invalid("the update's entity is empty")
        handler = getattr(self, f"_write_{kind}", None)
        if handler is None:
            raise unimplemented(f"writing {kind} is not supported")
        try:
            handler(update.type, getattr(update.entity, kind))
        except TableError as exc:
            raise tt.table_error(exc) from None

    def _write_table_entry(self, utype: int, msg: p4runtime_pb2.TableEntry) -> None:
        info = self.schema.table(msg.table_id)
        table = tt.engine_table(self.pipeline, info)
        if msg.is_const:
            raise invalid("is_const must be false in a write (const entries come from the program)")
        if msg.HasField("time_since_last_hit"):
            raise invalid("time_since_last_hit is read-only: it must not be set in a write")
        if msg.is_default_action:
            self._write_default(utype, info, table, msg)
            return
        if utype == Update.DELETE:
            key = tt.decode_matches(info, msg.match)
            tt.check_priority(info, msg.priority)
            entry = tt.find_entry(table, key, msg.priority, info)
            table.delete(entry)
            self.entry_metadata.pop((info.name, entry.matches, msg.priority), None)
            return
        if utype == Update.INSERT and not info.proto.match_fields:
            raise invalid(
                f"table {info.name!r} has no match key: only its default entry can be set"
            )
        entry = tt.build_entry(self.schema, info, msg)
        if utype == Update.INSERT:
            table.insert(entry)
        else:
            table.modify(entry)
        stored = table.find(entry.matches, entry.priority)
        mkey = (info.name, stored.matches if stored is not None else entry.matches, entry.priority)
        if msg.metadata:
            self.entry_metadata[mkey] = msg.metadata
        else:
            self.entry_metadata.pop(mkey, None)

    def _write_default(self, utype: int, info: tt.TableInfo, table: Any, msg: Any) -> None:
        if utype != Update.MODIFY:
            raise invalid("the default entry can only be modified (not inserted or deleted)")
        if len(msg.match) or msg.priority:
            raise invalid("the default entry has no match fields and no priority")
        if getattr(table, "const_default_action", False):
            raise StatusError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"the default action of table {info.name!r} is const",
            )
        self.defaults_written.add(msg.table_id)
        which = msg.action.WhichOneof("type")
        if which is None:
            table.reset_default()
            return
        if which != "action":
            raise unimplemented("default entries with action profile members/groups")
        call = tt.decode_action(self.schema, info, msg.action.action, default=True)
        table.set_default(call)

    def _write_register_entry(self, utype: int, msg: p4runtime_pb2.RegisterEntry) -> None:
        if utype != Update.MODIFY:
            raise invalid("register entries can only be modified")
        reg_info = self.schema.register(msg.register_id)
        name = reg_info.preamble.name
        reg = self._extern(self.pipeline.registers, name, "register")
        width = _bitwidth(reg_info.type_spec) or getattr(reg, "width", 0)
        if msg.data.WhichOneof("data") != "bitstring":
            raise invalid(f"register {name!r}: data must be a bitstring")
        value = decode(msg.data.bitstring, width, f"register {name!r} value")
        size = reg_info.size or getattr(reg, "size", 0)
        if msg.HasField("index"):
            self._check_index(msg.index.index, size, name)
            reg.write(msg.index.index, value)
        else:
            for i in range(size):
                reg.write(i, value)

    def _write_counter_entry(self, utype: int, msg: p4runtime_pb2.CounterEntry) -> None:
        if utype != Update.MODIFY:
            raise invalid("counter entries can only be modified")
        info = self.schema.counter(msg.counter_id)
        name = info.preamble.name
        ctr = self._extern(self.pipeline.counters, name, "counter")
        size = info.size or len(ctr.packets)
        indices = [msg.index.index] if msg.HasField("index") else range(size)
        for i in indices:
            self._check_index(i, size, name)
            ctr.write(i, msg.data.packet_count, msg.data.byte_count)

    def _write_direct_counter_entry(self, utype: int, msg: Any) -> None:
        if utype != Update.MODIFY:
            raise invalid("direct counter entries can only be modified")
        for entry, _info in self._direct_targets(msg.table_entry, "counter"):
            entry.packets = msg.data.packet_count
            entry.bytes = msg.data.byte_count

    def _write_meter_entry(self, utype: int, msg: p4runtime_pb2.MeterEntry) -> None:
        if utype != Update.MODIFY:
            raise invalid("meter entries can only be modified")
        info = self.schema.meter(msg.meter_id)
        name = info.preamble.name
        meter = self._extern(self.pipeline.meters, name, "meter")
        size = info.size or getattr(meter, "size", 0)
        indices = [msg.index.index] if msg.HasField("index") else range(size)
        for i in indices:
            self._check_index(i, size, name)
            if msg.HasField("config"):
                self._check_meter_config(msg.config, name)
                meter.set_config(i, tt.meter_config_from_proto(msg.config))
            else:
                meter.set_config(i, None)

    def _write_direct_meter_entry(self, utype: int, msg: Any) -> None:
        if utype != Update.MODIFY:
            raise invalid("direct meter entries can only be modified")
        table = None
        for entry, info in self._direct_targets(msg.table_entry, "meter"):
            table = table or tt.engine_table(self.pipeline, info)
            if msg.HasField("config"):
                self._check_meter_config(msg.config, info.name)
                table.set_meter_config(entry, tt.meter_config_from_proto(msg.config))
            else:
                table.set_meter_config(entry, None)

    @staticmethod
    def _check_meter_config(cfg: p4runtime_pb2.MeterConfig, name: str) -> None:
        if cfg.cir < 0 or cfg.pir < 0 or cfg.cburst < 0 or cfg.pburst < 0:
            raise invalid(f"meter {name!r}: negative rate or burst")
        if cfg.pir < cfg.cir:
            raise invalid(f"meter {name!r}: PIR {cfg.pir} is below CIR {cfg.cir}")

    def _write_packet_replication_engine_entry(self, utype: int, msg: Any) -> None:
        pre = self.pipeline.pre
        kind = msg.WhichOneof("type")
        if kind == "multicast_group_entry":
            g = msg.multicast_group_entry
            gid = g.multicast_group_id
            if _pre_delete(utype, gid, "multicast group", self.mcast_groups, pre.delete_group):
                return
            if utype == Update.INSERT:
                pre.insert_group(gid, _replicas(g.replicas))
            else:
                pre.modify_group(gid, _replicas(g.replicas))
            self.mcast_groups[gid] = p4runtime_pb2.MulticastGroupEntry()
            self.mcast_groups[gid].CopyFrom(g)
        elif kind == "clone_session_entry":
            c = msg.clone_session_entry
            sid = c.session_id
            if _pre_delete(utype, sid, "clone session", self.clone_sessions,
                           pre.delete_clone_session):
                return
            op = pre.insert_clone_session if utype == Update.INSERT else pre.modify_clone_session
            op(sid, _replicas(c.replicas), c.packet_length_bytes, c.class_of_service)
            self.clone_sessions[sid] = p4runtime_pb2.CloneSessionEntry()
            self.clone_sessions[sid].CopyFrom(c)
        else:
            raise invalid("packet replication engine entry has no multicast group or clone session")

    def _write_digest_entry(self, utype: int, msg: p4runtime_pb2.DigestEntry) -> None:
        self._digest_known(msg.digest_id)
        exists = msg.digest_id in self.digest_configs
        if utype == Update.INSERT and exists:
            raise StatusError(ALREADY_EXISTS, f"digest {msg.digest_id} is already configured")
        if utype in (Update.MODIFY, Update.DELETE) and not exists:
            raise not_found(f"digest {msg.digest_id} is not configured")
        if utype == Update.DELETE:
            del self.digest_configs[msg.digest_id]
            return
        cfg = p4runtime_pb2.DigestEntry.Config()
        cfg.CopyFrom(msg.config)
        self.digest_configs[msg.digest_id] = cfg

    def _write_action_profile_member(self, utype: int, msg: Any) -> None:
        self._profile_write("member", utype, msg)

    def _write_action_profile_group(self, utype: int, msg: Any) -> None:
        self._profile_write("group", utype, msg)

    def _profile(self, profile_id: int) -> tuple[p4info_pb2.ActionProfile, Any]:
        """The P4Info action profile and the engine's ActionProfile/ActionSelector."""
        prof = self.schema.action_profile(profile_id)
        profiles = getattr(self.pipeline, "action_profiles", None) or {}
        ap = profiles.get(prof.preamble.name)
        if ap is None:
            for tid in prof.table_ids:
                info = self.schema.tables.get(tid)
                table = self.pipeline.tables.get(info.name) if info is not None else None
                ap = getattr(table, "implementation", None)
                if ap is not None:
                    break
        if ap is None:
            raise StatusError(
                grpc.StatusCode.INTERNAL,
                f"action profile {prof.preamble.name!r} is not in the pipeline",
            )
        return prof, ap

    def _profile_write(self, what: str, utype: int, msg: Any) -> None:
        prof, ap = self._profile(msg.action_profile_id)
        if what == "member":
            if utype == Update.DELETE:
                ap.delete_member(msg.member_id)
                return
            table_info = self.schema.tables.get(prof.table_ids[0]) if prof.table_ids else None
            call = tt.decode_action(self.schema, table_info, msg.action, default=False)
            op = ap.insert_member if utype == Update.INSERT else ap.modify_member
            op(msg.member_id, call)
            return
        if not hasattr(ap, "insert_group"):
            raise invalid(f"action profile {prof.preamble.name!r} has no selector: no groups")
        if utype == Update.DELETE:
            ap.delete_group(msg.group_id)
            return
        if msg.max_size and len(msg.members) > msg.max_size:
            raise StatusError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"group {msg.group_id}: {len(msg.members)} members exceed max_size {msg.max_size}",
            )
        members = [(m.member_id, m.weight or 1) for m in msg.members]
        op = ap.insert_group if utype == Update.INSERT else ap.modify_group
        op(msg.group_id, members)

    # ---------------------------------------------------------------- helpers
    def _digest_known(self, digest_id: int) -> None:
        """A DigestEntry for an id the P4Info lacks is NOT_FOUND, as BMv2 answers (the
        specification leaves this code open; a DigestListAck's is INVALID_ARGUMENT)."""
        if digest_id not in self.schema.digests:
            raise not_found(f"no digest with id {digest_id} in the P4Info")

    @staticmethod
    def _extern(objects: dict[str, Any], name: str, kind: str) -> Any:
        obj = objects.get(name)
        if obj is None:
            raise StatusError(
                grpc.StatusCode.INTERNAL, f"{kind} {name!r} is in P4Info but not in the pipeline"
            )
        return obj

    @staticmethod
    def _check_index(index: int, size: int, name: str) -> None:
        """A negative index is INVALID_ARGUMENT, one past the end OUT_OF_RANGE (specification)."""
        if index < 0:
            raise invalid(f"index {index} of {name!r} is negative")
        if index >= size:
            raise StatusError(
                OUT_OF_RANGE, f"index {index} out of range for {name!r} (size {size})"
            )

    def _direct_targets(self, te: p4runtime_pb2.TableEntry, kind: str) -> list[tuple[Any, Any]]:
        info = self.schema.table(te.table_id)
        if (info.direct_counter if kind == "counter" else info.direct_meter) is None:
            raise invalid(f"table {info.name!r} has no direct {kind}")
        table = tt.engine_table(self.pipeline, info)
        table.sync_counters()  # the C engine's pending counts, before a read or a write
        if te.is_default_action:
            raise unimplemented(f"direct {kind} of a default entry")
        if not len(te.match) and info.proto.match_fields:
            return [(e, info) for e in table.entries()]
        key = tt.decode_matches(info, te.match)
        return [(tt.find_entry(table, key, te.priority, info), info)]

    # ====================================================================== reads
    def read(self, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        """Every stored entity matching ``entity`` (zero ids and unset fields are wildcards)."""
        kind = entity.WhichOneof("entity")
        if kind is None:
            raise invalid("the read request has an empty entity")
        handler = getattr(self, f"_read_{kind}", None)
        if handler is None:
            raise unimplemented(f"reading {kind} is not supported")
        try:
            return list(handler(getattr(entity, kind)))
        except TableError as exc:
            raise tt.table_error(exc) from None

    def _read_table_entry(self, req: p4runtime_pb2.TableEntry) -> Iterator[p4runtime_pb2.Entity]:
        infos = (
            [self.schema.table(req.table_id)]
            if req.table_id
            else list(self.schema.tables.values())
        )
        with_counters = True  # direct counters are always reported, as PI does
        for info in infos:
            table = tt.engine_table(self.pipeline, info)
            table.sync_counters()  # the C engine's pending counts
            if req.is_default_action:
                yield p4runtime_pb2.Entity(
                    table_entry=tt.default_entry_to_proto(self.schema, info, table)
                )
                continue
            if req.table_id and len(req.match):
                key = tt.decode_matches(info, req.match)
                entry = table.find(key, req.priority)
                entries = [entry] if entry is not None else []
            else:
                entries = table.entries()
            for entry in entries:
                meta = self.entry_metadata.get((info.name, entry.matches, entry.priority), b"")
                te = tt.entry_to_proto(self.schema, info, entry, meta, with_counters)
                yield p4runtime_pb2.Entity(table_entry=te)

    def _indices(self, req: Any, size: int, name: str) -> Sequence[int]:
        """The one index a read names (checked against ``size``), or all of them."""
        if req.HasField("index"):
            self._check_index(req.index.index, size, name)
            return [req.index.index]
        return range(size)

    def _read_register_entry(
        self, req: p4runtime_pb2.RegisterEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        infos = (
            [self.schema.register(req.register_id)]
            if req.register_id
            else list(self.schema.registers.values())
        )
        for info, reg, i in self._indexed_targets(req, infos, self.pipeline.registers, "register"):
            out = p4runtime_pb2.RegisterEntry(register_id=info.preamble.id)
            out.index.index = i
            out.data.CopyFrom(p4data_pb2.P4Data(bitstring=encode(reg.read(i))))
            yield p4runtime_pb2.Entity(register_entry=out)

    def _indexed_targets(
        self, req: Any, infos: list[Any], objects: dict[str, Any], kind: str
    ) -> Iterator[tuple[Any, Any, int]]:
        """(P4Info object, extern, index) for each index a register or meter read names:
        the one index it gives, or every index of each extern."""
        for info in infos:
            name = info.preamble.name
            obj = self._extern(objects, name, kind)
            size = info.size or getattr(obj, "size", 0)
            for i in self._indices(req, size, name):
                yield info, obj, i

    def _read_counter_entry(
        self, req: p4runtime_pb2.CounterEntry
    ) -> Iterator[p4runtime_pb2.Entity]:
        infos = (
            [self.schema.counter(req.counter_id)]
            if req.counter_id
            else list(self.schema.counters.values())
        )
        for info in infos:
            name = info.preamble.name
            ctr = self._extern(self.pipeline.counters, name, "counter")
            size = info.size or len(ctr.packets)
            unit = info.spec.unit
            for i in self._indices(req, size, name):
                out = p4runtime_pb2.CounterEntry(counter_id=info.preamble.id)
                out.index.index = i
                if unit in (p4info_pb2.CounterSpec.PACKETS, p4info_pb2.CounterSpec.BOTH):
                    out.data.packet_count = ctr.packets[i]
                if unit in (p4info_pb2.CounterSpec.BYTES, p4info_pb2.CounterSpec.BOTH):
                    out.data.byte_count = ctr.bytes[i]
                if unit == p4info_pb2.CounterSpec.UNSPECIFIED:
                    out.data.packet_count = ctr.packets[i]
                    out.data.byte_count = ctr.bytes[i]
                yield p4runtime_pb2.Entity(counter_entry=out)

    def _read_direct_counter_entry(self, req: Any) -> Iterator[p4runtime_pb2.Entity]:
        for info, entry in self._direct_read_targets(req, "counter"):
            out = p4runtime_pb2.DirectCounterEntry()
            out.table_entry.CopyFrom(tt.entry_to_proto(self.schema, info, entry, b"", False))
            out.data.packet_count = entry.packets
            out.data.byte_count = entry.bytes
            yield p4runtime_pb2.Entity(direct_counter_entry=out)

    def _direct_read_targets(self, req: Any, kind: str) -> Iterator[tuple[Any, Any]]:
        """(table, entry) for each entry a direct counter/meter read names: of the table
        it names, or of every table with such a resource."""
        te = req.table_entry
        if te.table_id:
            infos = [self.schema.table(te.table_id)]
        else:
            infos = [t for t in self.schema.tables.values()
                     if getattr(t, f"direct_{kind}") is not None]
        for info in infos:
            probe = p4runtime_pb2.TableEntry(table_id=info.proto.preamble.id, priority=te.priority)
            probe.match.extend(te.match)
            for entry, _ in self._direct_targets(probe, kind):
                yield info, entry

    def _read_meter_entry(self, req: p4runtime_pb2.MeterEntry) -> Iterator[p4runtime_pb2.Entity]:
        infos = (
            [self.schema.meter(req.meter_id)]
            if req.meter_id
            else list(self.schema.meters.values())
        )
        for info, meter, i in self._indexed_targets(req, infos, self.pipeline.meters, "meter"):
            out = p4runtime_pb2.MeterEntry(meter_id=info.preamble.id)
            out.index.index = i
            cfg = meter.get_config(i)
            if cfg is not None:
                out.config.CopyFrom(tt.meter_config_to_proto(cfg))
            yield p4runtime_pb2.Entity(meter_entry=out)

    def _read_direct_meter_entry(self, req: Any) -> Iterator[p4runtime_pb2.Entity]:
        for info, entry in self._direct_read_targets(req, "meter"):
            out = p4runtime_pb2.DirectMeterEntry()
            out.table_entry.CopyFrom(tt.entry_to_proto(self.schema, info, entry, b"", False))
            if getattr(entry, "meter", None) is not None:
                out.config.CopyFrom(tt.meter_config_to_proto(entry.meter))
            yield p4runtime_pb2.Entity(direct_meter_entry=out)

    def _read_packet_replication_engine_entry(self, req: Any) -> Iterator[p4runtime_pb2.Entity]:
        kind = req.WhichOneof("type")
        if kind == "multicast_group_entry":
            gid = req.multicast_group_entry.multicast_group_id
            groups = [gid] if gid else sorted(self.mcast_groups)
            for g in groups:
                if g in self.mcast_groups:
                    ent = p4runtime_pb2.Entity()
                    ent.packet_replication_engine_entry.multicast_group_entry.CopyFrom(self.mcast_groups[g])
                    yield ent
        elif kind == "clone_session_entry":
            sid = req.clone_session_entry.session_id
            sessions = [sid] if sid else sorted(self.clone_sessions)
            for s in sessions:
                if s in self.clone_sessions:
                    ent = p4runtime_pb2.Entity()
                    ent.packet_replication_engine_entry.clone_session_entry.CopyFrom(self.clone_sessions[s])
                    yield ent
        else:
            yield from self._read_packet_replication_engine_entry(
                p4runtime_pb2.PacketReplicationEngineEntry(
                    multicast_group_entry=p4runtime_pb2.MulticastGroupEntry()
                )
            )
            yield from self._read_packet_replication_engine_entry(
                p4runtime_pb2.PacketReplicationEngineEntry(
                    clone_session_entry=p4runtime_pb2.CloneSessionEntry()
                )
            )

    def _read_digest_entry(self, req: p4runtime_pb2.DigestEntry) -> Iterator[p4runtime_pb2.Entity]:
        ids = [req.digest_id] if req.digest_id else sorted(self.digest_configs)
        for did in ids:
            if req.digest_id:
                self._digest_known(did)
            cfg = self.digest_configs.get(did)
            if cfg is not None:
                yield p4runtime_pb2.Entity(
                    digest_entry=p4runtime_pb2.DigestEntry(digest_id=did, config=cfg)
                )

    def _profiles_for(self, profile_id: int) -> list[tuple[p4info_pb2.ActionProfile, Any]]:
        ids = [profile_id] if profile_id else sorted(self.schema.action_profiles)
        return [self._profile(pid) for pid in ids]

    def _read_action_profile_member(self, req: Any) -> Iterator[p4runtime_pb2.Entity]:
        for prof, ap in self._profiles_for(req.action_profile_id):
            ids = [req.member_id] if req.member_id else sorted(ap.members)
            for mid in ids:
                call = ap.members.get(mid)
                if call is None:
                    continue
                out = p4runtime_pb2.ActionProfileMember(
                    action_profile_id=prof.preamble.id, member_id=mid
                )
                out.action.CopyFrom(tt.encode_action(self.schema, call))
                yield p4runtime_pb2.Entity(action_profile_member=out)

    def _read_action_profile_group(self, req: Any) -> Iterator[p4runtime_pb2.Entity]:
        for prof, ap in self._profiles_for(req.action_profile_id):
            groups = getattr(ap, "groups", {})
            ids = [req.group_id] if req.group_id else sorted(groups)
            for gid in ids:
                members = groups.get(gid)
                if members is None:
                    continue
                out = p4runtime_pb2.ActionProfileGroup(
                    action_profile_id=prof.preamble.id, group_id=gid
                )
                for mid, weight in members:
                    out.members.add(member_id=mid, weight=weight)
                yield p4runtime_pb2.Entity(action_profile_group=out)

    # =================================================================== digests
    def digest_lists(
        self, digests: list[tuple[str, tuple[int, ...]]], next_list_id: Any
    ) -> list[p4runtime_pb2.DigestList]:
        """DigestList messages (one per configured digest) for drained engine digests."""
        by_id: dict[int, p4runtime_pb2.DigestList] = {}
        for name, values in digests:
            d = self.schema.digest_by_name(name)
            if d is None or d.preamble.id not in self.digest_configs:
                continue
            lst = by_id.get(d.preamble.id)
            if lst is None:
                lst = p4runtime_pb2.DigestList(digest_id=d.preamble.id, list_id=next_list_id())
                by_id[d.preamble.id] = lst
            data = lst.data.add()
            for v in values:
                data.struct.members.add(bitstring=encode(v))
        return list(by_id.values())


def _pre_delete(utype: int, ident: int, what: str, stored: dict[int, Any],
                delete: Callable[[int], object]) -> bool:
    """The checks a multicast group's or clone session's write shares (id 0 is reserved;
    INSERT needs it absent, MODIFY and DELETE present); a DELETE is done here (True)."""
    if ident == 0:
        raise invalid(f"{what} id 0 is reserved")
    _check_presence(utype, ident in stored, f"{what} {ident}")
    if utype != Update.DELETE:
        return False
    delete(ident)
    del stored[ident]
    return True


def _check_presence(utype: int, exists: bool, what: str) -> None:
    """INSERT needs ``what`` absent, MODIFY and DELETE need it present (P4Runtime codes)."""
    if utype == Update.INSERT and exists:
        raise StatusError(ALREADY_EXISTS, f"{what} already exists")
    if utype in (Update.MODIFY, Update.DELETE) and not exists:
        raise not_found(f"{what} does not exist")


def carry_state(old: PipelineState, new: PipelineState) -> None:
    """Replay the forwarding state of ``old`` into ``new`` (not yet installed), for
    RECONCILE_AND_COMMIT: action profile members and groups, table entries (with their
    direct counters and meters), default entries a client set, PRE entries, digest configs and
    meter configs through the same checks as a Write; counter and register values copied
    by name. Raises INVALID_ARGUMENT naming the first piece of state that does not fit."""
    for utype, ent in _replay_updates(old):
        try:
            new.write(p4runtime_pb2.Update(type=utype, entity=ent))
        except StatusError as err:
            raise invalid(
                f"the forwarding state cannot be kept with the new config: "
                f"{ent.WhichOneof('entity')}: {err.message}"
            ) from None
    for kind in ("counters", "registers"):
        olds, news = getattr(old.pipeline, kind, {}), getattr(new.pipeline, kind, {})
        for name, obj in olds.items():
            target = news.get(name)
            if target is not None:  # else gone from the program: nothing refers to it
                _copy_values(kind, name, obj, target)


def _replay_updates(
    old: PipelineState,
) -> list[tuple[p4runtime_pb2.Update.Type.ValueType, p4runtime_pb2.Entity]]:
    """The writes that rebuild ``old``'s forwarding state, in an order that satisfies
    their references: members, groups, entries (not const ones), the defaults a client
    set, PRE entries, digest configs, meter configs."""
    updates: list[tuple[p4runtime_pb2.Update.Type.ValueType, p4runtime_pb2.Entity]] = []
    for kind in ("action_profile_member", "action_profile_group", "table_entry"):
        wildcard = p4runtime_pb2.Entity()
        getattr(wildcard, kind).SetInParent()
        for ent in old.read(wildcard):
            if kind == "table_entry" and ent.table_entry.is_const:
                continue
            updates.append((Update.INSERT, ent))
    for tid in sorted(old.defaults_written):
        probe = p4runtime_pb2.TableEntry(table_id=tid, is_default_action=True)
        updates.extend(
            (Update.MODIFY, e) for e in old.read(p4runtime_pb2.Entity(table_entry=probe))
        )
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    for ent in old.read(p4runtime_pb2.Entity(packet_replication_engine_entry=pre)):
        updates.append((Update.INSERT, ent))
    for did, cfg in old.digest_configs.items():
        updates.append((Update.INSERT, p4runtime_pb2.Entity(
            digest_entry=p4runtime_pb2.DigestEntry(digest_id=did, config=cfg))))
    for ent in old.read(p4runtime_pb2.Entity(meter_entry=p4runtime_pb2.MeterEntry())):
        if ent.meter_entry.HasField("config"):
            updates.append((Update.MODIFY, ent))
    return updates


def _copy_values(kind: str, name: str, obj: Any, target: Any) -> None:
    """A counter's or register's values into the same object of the new program, which
    must have the same size and width."""
    if target.size != obj.size or getattr(target, "width", 0) != getattr(obj, "width", 0):
        raise invalid(f"the forwarding state cannot be kept: {kind[:-1]} {name!r} changed shape")
    # In place: the generated data-plane code may hold these very lists.
    if kind == "counters":
        target.packets[:] = obj.packets
        target.bytes[:] = obj.bytes
    else:
        target.values[:] = obj.values
