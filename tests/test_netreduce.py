"""Packet-level tests of p4src/netreduce.p4 on the built-in target (PTF style).

One scenario per test: frames go into `Pipeline.process`, and the frames that come out are
compared byte for byte with frames built independently from docs/protocol.md.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from bench.netreduce_job import Worker, make_workers
from protocol import netreduce as nr
from softswitch import ir
from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry
from softswitch.errors import P4Error
from softswitch.frontend import compile_file
from softswitch.pipeline import Pipeline
from tests.netreduce_sizes import NETREDUCE, SMALL_ELEMS, netreduce_with
from workloads.netreduce_headers import (
    FLAG_OVERFLOW,
    FLAG_RESULT,
    INT32_MAX,
    INT32_MIN,
    split_message,
    worker_packet,
)

# NETREDUCE_P4 points the packet tests at another build of the program (e.g. an older
# revision, to show that a regression test fails there).
P4 = Path(os.environ.get("NETREDUCE_P4")
          or NETREDUCE)
E = SMALL_ELEMS
SW_MAC = "02:aa:00:00:00:01"
ROOT, LEAF = 0, 1
PARENT = 255

# Drop reasons (docs/protocol.md section 6).
UNKNOWN_JOB, NON_MEMBER, MALFORMED, OUT_OF_RANGE, CREDIT, STALE, UNBOUND = 1, 2, 3, 4, 5, 6, 7
FAULT, ARP_DROP, TTL_DROP = 9, 10, 12

Frames = list[tuple[int, bytes]]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> ir.Program:
    """The program at E = 32 (the packet tests' size)."""
    return compile_file(str(netreduce_with(E, tmp_path_factory.mktemp("program"), P4)))


@pytest.fixture()
def pipe(program: ir.Program) -> Pipeline:
    return Pipeline.from_program(program)


def ip_int(addr: str) -> int:
    return int(ipaddress.IPv4Address(addr))


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def insert(pipe: Pipeline, table: str, keys: Sequence[int], action: str,
           args: Sequence[int], *, modify: bool = False) -> None:
    """Add an exact-match entry (arguments beyond what the action takes are left off, so
    the same tests configure older builds of the program)."""
    t = pipe.tables[table]
    assert t.action_params is not None
    args = tuple(args)[: len(t.action_params.get(action, args))]
    entry = TableEntry(matches=tuple(FieldMatch(value=k) for k in keys),
                       action=ActionCall(action, tuple(args)))
    if modify:
        t.modify(entry)
    else:
        t.insert(entry)


def worker_window(frame: bytes, window: int) -> bytes:
    """A worker's first packet with the tag's window field (credits it sends under)."""
    pkt = Ether(frame)
    pkt["NRTag"].window = window
    return bytes(pkt)


def counter(pipe: Pipeline, name: str, index: int) -> int:
    return pipe.counters[name].packets[index]


def job_drops(pipe: Pipeline, job: int, reason: int) -> int:
    per_job = (pipe.counters[nr.AggregationIngressNames.JOB_DROPS].size
               // pipe.counters[nr.AggregationIngressNames.CONTRIBUTIONS].size)
    return counter(pipe, nr.AggregationIngressNames.JOB_DROPS, job * per_job + reason)


def saturate(v: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, v))


def sums(*vectors: Sequence[int]) -> list[int]:
    return [saturate(sum(col)) for col in zip(*vectors, strict=True)]


class Job:
    """One aggregation job on one switch, configured as docs/protocol.md section 5 says.

    Rank k's connection goes to worker k+1 (a ring inside ``workers``); each worker sends
    its messages with its own PSN base, so every result needs its own PSN rewrite.
    """

    def __init__(self, pipe: Pipeline, job: int, workers: Sequence[Worker], *,
                 slot_base: int = 0, slot_count: int = 16, credits: int = 2,
                 conn_base: int = 0, mcast_grp: int = 1, role: int = ROOT,
                 upstream_port: int = 0, elems: int = E) -> None:
        self.pipe, self.job, self.workers = pipe, job, list(workers)
        self.credits = credits
        # results advertise the job's credits (older builds of the program send 0)
        conn_params = pipe.tables[nr.AggregationIngressNames.CONN_TABLE].action_params
        assert conn_params is not None
        hardened = len(conn_params[nr.AggregationIngressNames.SET_CONN]) > 4
        self.advertised = credits if hardened else 0
        self.elems = elems
        n = len(self.workers)
        # Worker 2 starts just below the 24-bit PSN wrap.
        self.next_psn = [(0xFFFFFE if k == 2 else 1000 * (k + 1)) for k in range(n)]
        insert(pipe, nr.AggregationIngressNames.JOB_TABLE, [job],
               nr.AggregationIngressNames.SET_JOB,
               [slot_base, slot_count, n, (1 << n) - 1, credits, role, mcast_grp,
                upstream_port])
        replicas = []
        for k, w in enumerate(self.workers):
            r = self.peer(k)
            insert(pipe, nr.AggregationIngressNames.CONN_TABLE, [ip_int(w.ip), ip_int(r.ip),
                   self.qp(k)], nr.AggregationIngressNames.SET_CONN,
                   [job, conn_base + k, k, r.port, w.port, 0])
            insert(pipe, nr.AggregationEgressNames.RESULT_REWRITE, [job, k],
                   nr.AggregationEgressNames.TO_WORKER,
                   [mac_int(SW_MAC), mac_int(r.mac), ip_int(w.ip), ip_int(r.ip), w.sport,
                    self.qp(k), conn_base + k])
            replicas.append((r.port, k))
        pipe.pre.set_group(mcast_grp, replicas)

    def peer(self, k: int) -> Worker:
        return self.workers[(k + 1) % len(self.workers)]

    def qp(self, k: int) -> int:
        """The receiver's QP number of rank k's connection."""
        return 0x1000 * (self.job + 1) + k

    def va(self, k: int, msg: int) -> int:
        return 0x7F00_0000_0000 + (k << 24) + (msg << 12)

    def rkey(self, k: int) -> int:
        return 0x40 + k

    def message(self, k: int, values: Sequence[int], *, msg: int = 0, slot: int = 0,
                version: int = 0, psn: int | None = None) -> list[bytes]:
        """Rank k's packets for one message (PSNs taken from its connection)."""
        w, r = self.workers[k], self.peer(k)
        parts = split_message(values, self.elems)
        if psn is None:
            psn = self.next_psn[k]
            self.next_psn[k] = (psn + len(parts)) & 0xFFFFFF
        return [bytes(worker_packet(
            src_mac=w.mac, dst_mac=SW_MAC, src_ip=w.ip, dst_ip=r.ip, sport=w.sport,
            dqpn=self.qp(k), psn=(psn + i) & 0xFFFFFF, pkt_idx=i, npkts=len(parts),
            elems=part, job=self.job, msg=msg, slot=slot, version=version,
            va=self.va(k, msg), rkey=self.rkey(k), rank=k))
            for i, part in enumerate(parts)]

    def result(self, k: int, pkt_idx: int, npkts: int, elems: Sequence[int], *, psn: int,
               msg: int = 0, slot: int = 0, version: int = 0,
               overflow: bool = False) -> tuple[int, bytes]:
        """What the receiver of rank k's connection must get for one result packet."""
        w, r = self.workers[k], self.peer(k)
        return r.port, bytes(worker_packet(
            src_mac=SW_MAC, dst_mac=r.mac, src_ip=w.ip, dst_ip=r.ip, sport=w.sport,
            dqpn=self.qp(k), psn=(psn + pkt_idx) & 0xFFFFFF, pkt_idx=pkt_idx,
            npkts=npkts, elems=elems, job=self.job, msg=msg, slot=slot, version=version,
            va=self.va(k, msg), rkey=self.rkey(k), rank=k,
            flags=FLAG_RESULT | (FLAG_OVERFLOW if overflow else 0),
            resv7=int(overflow), window=self.advertised))

    def send(self, port_frames: Sequence[tuple[int, bytes]]) -> Frames:
        out: Frames = []
        for k, frame in port_frames:
            out += self.pipe.process(self.workers[k].port, frame)
        return out


def all_results(job: Job, pkt_idx: int, npkts: int, elems: Sequence[int],
                psns: Sequence[int], **kw: Any) -> Frames:
    return sorted(job.result(k, pkt_idx, npkts, elems, psn=psns[k], **kw)
                  for k in range(len(job.workers)))


def values(k: int, n: int) -> list[int]:
    return [(k + 1) * 1000 + (j if j % 2 else -j) for j in range(n)]


def add_route(pipe: Pipeline, w: Worker) -> None:
    pipe.tables[nr.Ipv4ForwardingNames.IPV4_LPM].insert(TableEntry(
        matches=(FieldMatch(value=ip_int(w.ip), prefix_len=32),),
        action=ActionCall(nr.Ipv4ForwardingNames.SET_NHOP,
                          (mac_int(SW_MAC), mac_int(w.mac), w.port))))


# ------------------------------------------------------------------------ forwarding


def test_routes_ordinary_ipv4(pipe: Pipeline) -> None:
    """A UDP packet is routed by LPM with new MACs, TTL - 1 and a fixed checksum."""
    ws = make_workers(2)
    add_route(pipe, ws[1])
    pkt = Ether(src=ws[0].mac, dst=SW_MAC) / IP(src=ws[0].ip, dst=ws[1].ip, ttl=9) / \
        UDP(sport=5, dport=6) / (b"x" * 20)
    out = pipe.process(ws[0].port, bytes(pkt))
    exp = Ether(src=SW_MAC, dst=ws[1].mac) / IP(src=ws[0].ip, dst=ws[1].ip, ttl=8) / \
        UDP(sport=5, dport=6, chksum=Ether(bytes(pkt))[UDP].chksum) / (b"x" * 20)
    assert out == [(ws[1].port, bytes(exp))]


def test_ecmp_spreads_flows_over_group(pipe: Pipeline) -> None:
    """Flows to an ECMP route use both members, each flow always the same one."""
    pipe.tables[nr.Ipv4ForwardingNames.IPV4_LPM].insert(TableEntry(
        matches=(FieldMatch(value=ip_int("10.9.0.0"), prefix_len=16),),
        action=ActionCall(nr.Ipv4ForwardingNames.SET_ECMP, (7, 2))))
    for member, port in ((0, 20), (1, 21)):
        insert(pipe, nr.Ipv4ForwardingNames.ECMP_NHOP, [7, member], nr.Ipv4ForwardingNames.SET_NHOP,
               [mac_int(SW_MAC), 0x020000000100 + port, port])
    ports = []
    for sport in range(1000, 1032):
        pkt = bytes(Ether() / IP(src="10.0.0.1", dst="10.9.1.1") / UDP(sport=sport, dport=80))
        first = pipe.process(1, pkt)
        assert pipe.process(1, pkt) == first and len(first) == 1
        ports.append(first[0][0])
    assert set(ports) == {20, 21}


def test_ttl_expired_dropped_and_counted(pipe: Pipeline) -> None:
    """A packet arriving with TTL 1 is dropped and counted as TTL."""
    ws = make_workers(2)
    add_route(pipe, ws[1])
    pkt = Ether() / IP(src=ws[0].ip, dst=ws[1].ip, ttl=1) / UDP()
    assert pipe.process(1, bytes(pkt)) == []
    assert counter(pipe, nr.SwitchCounters.INGRESS_DROPS, TTL_DROP) == 1


def test_arp_dropped_and_counted(pipe: Pipeline) -> None:
    """ARP is dropped (hosts use static ARP) and counted."""
    assert pipe.process(1, bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP())) == []
    assert counter(pipe, nr.SwitchCounters.INGRESS_DROPS, ARP_DROP) == 1


def test_fault_injection_drops_on_ingress_port(pipe: Pipeline) -> None:
    """A port with loss threshold 65536 drops everything and counts FAULT."""
    ws = make_workers(2)
    add_route(pipe, ws[1])
    insert(pipe, nr.PortLossNames.INGRESS, [ws[0].port], nr.PortLossNames.INGRESS_ACTION,
           [65536])
    pkt = Ether() / IP(src=ws[0].ip, dst=ws[1].ip) / UDP()
    assert pipe.process(ws[0].port, bytes(pkt)) == []
    assert pipe.process(3, bytes(pkt)) != []
    assert counter(pipe, nr.SwitchCounters.INGRESS_DROPS, FAULT) == 1


def test_fault_injection_drops_on_egress_port(pipe: Pipeline) -> None:
    """An egress port with threshold 65536 drops what leaves on it; 0 drops nothing."""
    ws = make_workers(3)
    add_route(pipe, ws[1])
    add_route(pipe, ws[2])
    insert(pipe, nr.PortLossNames.EGRESS, [ws[1].port], nr.PortLossNames.EGRESS_ACTION,
           [65536])
    insert(pipe, nr.PortLossNames.EGRESS, [ws[2].port], nr.PortLossNames.EGRESS_ACTION, [0])
    assert pipe.process(1, bytes(Ether() / IP(dst=ws[1].ip) / UDP())) == []
    assert len(pipe.process(1, bytes(Ether() / IP(dst=ws[2].ip) / UDP()))) == 1
    assert counter(pipe, nr.SwitchCounters.EGRESS_DROPS, FAULT) == 1


def test_non_aggregation_roce_is_routed(pipe: Pipeline) -> None:
    """An RDMA WRITE from an unconfigured connection without a tag is just routed."""
    ws = make_workers(2)
    add_route(pipe, ws[1])
    pkt = worker_packet(src_mac=ws[0].mac, dst_mac=SW_MAC, src_ip=ws[0].ip, dst_ip=ws[1].ip,
                        sport=5, dqpn=77, psn=3, pkt_idx=1, npkts=3, elems=[1] * E)
    out = pipe.process(ws[0].port, bytes(pkt))
    exp = Ether(bytes(pkt))
    exp[Ether].src, exp[Ether].dst = SW_MAC, ws[1].mac
    exp[IP].ttl -= 1
    del exp[IP].chksum
    assert out == [(ws[1].port, bytes(exp))]


# ----------------------------------------------------------------------- aggregation


def test_single_packet_message_sums_to_every_worker(pipe: Pipeline) -> None:
    """Three workers' WRITE Only packets come back summed on every connection."""
    ws = make_workers(3)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    msgs = [job.message(k, values(k, E)) for k in range(3)]
    assert job.send([(0, msgs[0][0]), (1, msgs[1][0])]) == []
    out = job.send([(2, msgs[2][0])])
    total = sums(*(values(k, E) for k in range(3)))
    assert sorted(out) == all_results(job, 0, 1, total, psns)
    assert counter(pipe, nr.AggregationIngressNames.CONTRIBUTIONS, 1) == 3
    assert counter(pipe, nr.AggregationIngressNames.COMPLETIONS, 1) == 1
    assert counter(pipe, nr.AggregationEgressNames.RESULTS_SENT, 1) == 3


def exchange_a_message_of_2_5_packets(pipe: Pipeline) -> None:
    """Three workers of job 2 send a 2.5-packet message each, packet by packet in turn; the
    results must be every slot's exact sum, padded (shared with the C packet loop's test)."""
    ws = make_workers(3)
    job = Job(pipe, 2, ws)
    n = 2 * E + E // 2
    psns = list(job.next_psn)
    msgs = [job.message(k, values(k, n), slot=3) for k in range(3)]
    out: Frames = []
    for i in range(3):
        out += job.send([(k, msgs[k][i]) for k in range(3)])
    total = split_message(sums(*(values(k, n) for k in range(3))), E)
    expected = []
    for i in range(3):
        expected += all_results(job, i, 3, total[i], psns, slot=3)
    assert sorted(out) == sorted(expected)


def test_multi_packet_message_not_multiple_of_e(pipe: Pipeline) -> None:
    """A 2.5-packet message: three slots, PSN-located, padded, each summed (PSN wraps)."""
    exchange_a_message_of_2_5_packets(pipe)


def test_duplicate_before_completion_not_added_twice(pipe: Pipeline) -> None:
    """A contribution resent before the slot completes is dropped and counted."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    a, b = job.message(0, values(0, E)), job.message(1, values(1, E))
    assert job.send([(0, a[0]), (0, a[0])]) == []
    out = job.send([(1, b[0])])
    assert sorted(out) == all_results(job, 0, 1, sums(values(0, E), values(1, E)), psns)
    assert counter(pipe, nr.AggregationIngressNames.DUPLICATES, 1) == 1
    assert counter(pipe, nr.AggregationIngressNames.CONTRIBUTIONS, 1) == 2


def test_retransmission_after_completion_gets_stored_result(pipe: Pipeline) -> None:
    """A packet resent after completion gets the result on its own connection only."""
    ws = make_workers(3)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    msgs = [job.message(k, values(k, E)) for k in range(3)]
    job.send([(k, msgs[k][0]) for k in range(3)])
    total = sums(*(values(k, E) for k in range(3)))
    out = job.send([(1, msgs[1][0])])
    assert out == [job.result(1, 0, 1, total, psn=psns[1])]
    assert counter(pipe, nr.AggregationIngressNames.DUPLICATES, 1) == 1


def test_lost_result_recovered_by_retransmission(pipe: Pipeline) -> None:
    """A result lost on an egress port is recovered when the sender retransmits."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    insert(pipe, nr.PortLossNames.EGRESS, [ws[1].port], nr.PortLossNames.EGRESS_ACTION,
           [65536])
    a, b = job.message(0, values(0, E)), job.message(1, values(1, E))
    out = job.send([(0, a[0]), (1, b[0])])
    total = sums(values(0, E), values(1, E))
    assert out == [job.result(1, 0, 1, total, psn=psns[1])]  # rank 0's result was lost
    pipe.tables[nr.PortLossNames.EGRESS].delete(TableEntry(
        matches=(FieldMatch(value=ws[1].port),), action=None))
    assert job.send([(0, a[0])]) == [job.result(0, 0, 1, total, psn=psns[0])]


def test_lost_first_packet_recovered(pipe: Pipeline) -> None:
    """Without its first packet a message's later packets are UNBOUND; go-back-N heals."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    n = 2 * E
    a, b = job.message(0, values(0, n)), job.message(1, values(1, n))
    job.send([(1, b[0]), (1, b[1])])
    assert job.send([(0, a[1])]) == []            # a[0] was lost
    assert job_drops(pipe, 1, UNBOUND) == 1
    out = job.send([(0, a[0]), (0, a[1])])        # the retransmission
    total = split_message(sums(values(0, n), values(1, n)), E)
    assert sorted(out) == sorted(all_results(job, 0, 2, total[0], psns)
                                 + all_results(job, 1, 2, total[1], psns))


def test_lost_middle_packet_recovered(pipe: Pipeline) -> None:
    """A lost middle packet: its slot waits; resent packets complete or fetch results."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    n = 3 * E
    a, b = job.message(0, values(0, n)), job.message(1, values(1, n))
    total = split_message(sums(values(0, n), values(1, n)), E)
    job.send([(1, f) for f in b])
    out = job.send([(0, a[0]), (0, a[2])])        # a[1] lost
    assert sorted(out) == sorted(all_results(job, 0, 3, total[0], psns)
                                 + all_results(job, 2, 3, total[2], psns))
    out = job.send([(0, a[1]), (0, a[2])])        # go-back-N from the NAKed PSN
    assert sorted(out) == sorted(all_results(job, 1, 3, total[1], psns)
                                 + [job.result(0, 2, 3, total[2], psn=psns[0])])


def test_two_jobs_at_once_are_isolated(pipe: Pipeline) -> None:
    """Two interleaved jobs with their own slots and groups get their own sums."""
    ws = make_workers(4)
    j1 = Job(pipe, 1, ws[:2], slot_base=0, conn_base=0, mcast_grp=1)
    j2 = Job(pipe, 2, ws[2:], slot_base=16, conn_base=10, mcast_grp=2)
    p1, p2 = list(j1.next_psn), list(j2.next_psn)
    m1 = [j1.message(k, values(k, E)) for k in range(2)]
    m2 = [j2.message(k, values(k + 5, E)) for k in range(2)]
    assert j1.send([(0, m1[0][0])]) == [] and j2.send([(0, m2[0][0])]) == []
    out1 = j1.send([(1, m1[1][0])])
    out2 = j2.send([(1, m2[1][0])])
    assert sorted(out1) == all_results(j1, 0, 1, sums(values(0, E), values(1, E)), p1)
    assert sorted(out2) == all_results(j2, 0, 1, sums(values(5, E), values(6, E)), p2)
    assert counter(pipe, nr.AggregationIngressNames.COMPLETIONS, 1) == 1
    assert counter(pipe, nr.AggregationIngressNames.COMPLETIONS, 2) == 1


def test_non_member_tagged_packet_dropped_and_counted(pipe: Pipeline) -> None:
    """A tagged first packet of an unconfigured connection is dropped as NON_MEMBER."""
    ws = make_workers(3)
    job = Job(pipe, 1, ws[:2])
    stranger = job.message(0, values(0, E))[0]
    pkt = Ether(stranger)
    pkt[IP].src = ws[2].ip
    del pkt[IP].chksum
    assert pipe.process(ws[2].port, bytes(pkt)) == []
    assert counter(pipe, nr.SwitchCounters.INGRESS_DROPS, NON_MEMBER) == 1
    assert job_drops(pipe, 1, NON_MEMBER) == 1


def test_rank_outside_member_bitmap_dropped(pipe: Pipeline) -> None:
    """A configured connection whose rank is not in the job's bitmap is NON_MEMBER."""
    ws = make_workers(3)
    job = Job(pipe, 1, ws)
    insert(pipe, nr.AggregationIngressNames.JOB_TABLE, [5], nr.AggregationIngressNames.SET_JOB,
           [32, 16, 2, 0b011, 2, ROOT, 1, 0])
    pipe.tables[nr.AggregationIngressNames.CONN_TABLE].modify(TableEntry(
        matches=tuple(FieldMatch(value=v) for v in
                      (ip_int(ws[2].ip), ip_int(ws[0].ip), job.qp(2))),
        action=ActionCall(nr.AggregationIngressNames.SET_CONN,
                          (5, 2, 2, ws[0].port, ws[2].port, 0))))
    frame = bytes(worker_packet(src_mac=ws[2].mac, dst_mac=SW_MAC, src_ip=ws[2].ip,
                                dst_ip=ws[0].ip, sport=1, dqpn=job.qp(2), psn=1, pkt_idx=0,
                                npkts=1, elems=[1] * E, job=5))
    assert pipe.process(ws[2].port, frame) == []
    assert job_drops(pipe, 5, NON_MEMBER) == 1


def test_unknown_job_dropped_and_counted(pipe: Pipeline) -> None:
    """A connection bound to a job without a job_table entry is UNKNOWN_JOB."""
    ws = make_workers(2)
    insert(pipe, nr.AggregationIngressNames.CONN_TABLE, [ip_int(ws[0].ip), ip_int(ws[1].ip), 9],
           nr.AggregationIngressNames.SET_CONN, [7, 0, 0, ws[1].port, ws[0].port, 0])
    frame = bytes(worker_packet(src_mac=ws[0].mac, dst_mac=SW_MAC, src_ip=ws[0].ip,
                                dst_ip=ws[1].ip, sport=1, dqpn=9, psn=1, pkt_idx=0, npkts=1,
                                elems=[1] * E, job=7))
    assert pipe.process(ws[0].port, frame) == []
    assert job_drops(pipe, 7, UNKNOWN_JOB) == 1


@pytest.mark.parametrize("field,value", [("npkts", 0), ("pkt_idx", 1), ("job", 3)])
def test_malformed_tag_dropped_and_counted(pipe: Pipeline, field: str, value: int) -> None:
    """A tag with npkts 0, a non-zero packet index or another job's id is MALFORMED."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    pkt = Ether(job.message(0, values(0, E))[0])
    setattr(pkt["NRTag"], field, value)
    assert pipe.process(ws[0].port, bytes(pkt)) == []
    assert job_drops(pipe, 1, MALFORMED) == 1
    assert counter(pipe, nr.AggregationIngressNames.CONTRIBUTIONS, 1) == 0


def test_out_of_range_slot_dropped(pipe: Pipeline) -> None:
    """A message whose slots run past the job's slot_count is OUT_OF_RANGE."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, slot_count=4)
    frames = job.message(0, values(0, 2 * E), slot=3)
    assert job.send([(0, frames[0])]) == []
    assert job_drops(pipe, 1, OUT_OF_RANGE) == 1


def test_overflow_saturates_and_is_flagged(pipe: Pipeline) -> None:
    """Saturating adds clamp to int32 and the result carries both overflow marks."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    psns = list(job.next_psn)
    a = [INT32_MAX - 5, INT32_MIN + 1, 7] + [0] * (E - 3)
    b = [10, -10, 8] + [0] * (E - 3)
    fa, fb = job.message(0, a), job.message(1, b)
    job.send([(0, fa[0])])
    out = job.send([(1, fb[0])])
    total = [INT32_MAX, INT32_MIN, 15] + [0] * (E - 3)
    assert sorted(out) == all_results(job, 0, 1, total, psns, overflow=True)


def test_credits_bound_messages_in_flight(pipe: Pipeline) -> None:
    """With one credit a second message is refused until the first completes."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=1)
    m0 = [job.message(k, values(k, E), msg=0, slot=0) for k in range(2)]
    m1 = [job.message(k, values(k + 2, E), msg=1, slot=1) for k in range(2)]
    p1 = [Ether(m1[k][0])["BTH"].psn for k in range(2)]
    job.send([(0, m0[0][0])])
    assert job.send([(0, m1[0][0])]) == []
    assert job_drops(pipe, 1, CREDIT) == 1
    job.send([(1, m0[1][0])])                      # message 0 completes: credit back
    job.send([(0, m1[0][0])])
    out = job.send([(1, m1[1][0])])
    assert sorted(out) == all_results(job, 0, 1, sums(values(2, E), values(3, E)), p1,
                                      msg=1, slot=1)


def test_stale_packet_cannot_corrupt_reused_slot(pipe: Pipeline) -> None:
    """A late copy of message 0 reaching slot copy 0 now used by message 2 is STALE."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=1)
    frames = {}
    for m in range(3):
        frames[m] = [job.message(k, values(k + m, E), msg=m, version=m % 2) for k in range(2)]
    for m in range(2):
        job.send([(0, frames[m][0][0]), (1, frames[m][1][0])])
    p2 = [Ether(frames[2][k][0])["BTH"].psn for k in range(2)]
    job.send([(0, frames[2][0][0])])
    assert job.send([(1, frames[0][1][0])]) == []
    assert job_drops(pipe, 1, STALE) == 1
    out = job.send([(1, frames[2][1][0])])
    assert sorted(out) == all_results(job, 0, 1, sums(values(2, E), values(3, E)), p2, msg=2)


def test_alternating_versions_keep_previous_result(pipe: Pipeline) -> None:
    """While message 1 fills the other copy, a resend of message 0 gets its result."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=1)
    p0 = list(job.next_psn)
    m0 = [job.message(k, values(k, E), msg=0) for k in range(2)]
    m1 = [job.message(k, values(k + 4, E), msg=1, version=1) for k in range(2)]
    job.send([(0, m0[0][0]), (1, m0[1][0])])
    job.send([(0, m1[0][0])])
    out = job.send([(1, m0[1][0])])
    assert out == [job.result(1, 0, 1, sums(values(0, E), values(1, E)), psn=p0[1])]


def test_later_packet_without_binding_dropped(pipe: Pipeline) -> None:
    """A middle packet whose PSN matches no binding of its connection is UNBOUND."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    frames = job.message(0, values(0, 3 * E))
    assert job.send([(0, frames[1])]) == []
    assert job_drops(pipe, 1, UNBOUND) == 1


def test_elems_64_build_aggregates(tmp_path: Path) -> None:
    """The program compiled with NR_ELEMS 64 aggregates 64-element packets."""
    wrapper = tmp_path / "nr64.p4"
    wrapper.write_text(f'#define NR_ELEMS 64\n#include "{P4}"\n')
    pipe64 = Pipeline.from_file(str(wrapper))
    job = Job(pipe64, 1, make_workers(2), elems=64)
    psns = list(job.next_psn)
    a, b = job.message(0, values(0, 64)), job.message(1, values(1, 64))
    job.send([(0, a[0])])
    out = job.send([(1, b[0])])
    assert len(out[0][1]) == 14 + 20 + 8 + 12 + 16 + 16 + 4 * 64 + 4
    assert sorted(out) == all_results(job, 0, 1, sums(values(0, 64), values(1, 64)), psns)


@pytest.fixture(scope="module")
def pipe256_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """netreduce.p4 with full-MTU packets (NR_ELEMS 256): the whole-payload array path."""
    wrapper = tmp_path_factory.mktemp("e256") / "nr256.p4"
    wrapper.write_text(f'#define NR_ELEMS 256\n#include "{P4}"\n')
    return wrapper


def test_elems_256_sums_saturates_and_resends_stored_result(pipe256_program: Path) -> None:
    """At E = 256 (payload held as one array, summed as one array operation) a two-packet
    message of three workers sums exactly, saturates with both overflow marks, and a
    first packet resent after completion gets the stored result on its own connection."""
    pipe = Pipeline.from_file(str(pipe256_program))
    n = 256
    job = Job(pipe, 1, make_workers(3), elems=n)
    psns = list(job.next_psn)
    vals = [values(k, 2 * n - 10) for k in range(3)]
    vals[0][:2] = [INT32_MAX - 5, INT32_MIN + 1]
    vals[1][:2] = [10, -10]
    vals[2][:2] = [0, 0]  # the switch saturates in arrival order; keep the order moot
    msgs = [job.message(k, vals[k]) for k in range(3)]
    for i in range(2):
        out = job.send([(k, msgs[k][i]) for k in range(3)])
        total = sums(*vals)[i * n:(i + 1) * n]
        total += [0] * (n - len(total))
        assert sorted(out) == all_results(job, i, 2, total, psns, overflow=i == 0)
    assert len(out[0][1]) == 14 + 20 + 8 + 12 + 4 * n + 4
    again = job.send([(2, msgs[2][0])])
    first = sums(*vals)[:n]
    assert again == [job.result(2, 0, 2, first, psn=psns[2], overflow=True)]
    assert counter(pipe, nr.AggregationIngressNames.COMPLETIONS, 1) == 2


def test_elems_outside_the_supported_sizes_is_a_compile_error(tmp_path: Path) -> None:
    """NR_ELEMS 250 (not a multiple of 4) and 260 (over 256) stop with the rule, at the
    #error line of nr_elems.p4."""
    for bad in (250, 260):
        wrapper = tmp_path / f"nr{bad}.p4"
        wrapper.write_text(f'#define NR_ELEMS {bad}\n#include "{P4}"\n')
        with pytest.raises(P4Error, match=r"nr_elems\.p4:\d+:\d+.*multiple of 4 from 4 to 256"):
            Pipeline.from_file(str(wrapper))


def test_port_and_direct_counters(pipe: Pipeline) -> None:
    """Per-port rx/tx counters and the connection table's direct counter count packets."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    a, b = job.message(0, values(0, E)), job.message(1, values(1, E))
    job.send([(0, a[0]), (1, b[0])])
    assert counter(pipe, nr.SwitchCounters.PORT_RX, ws[0].port) == 1
    assert counter(pipe, nr.SwitchCounters.PORT_RX, ws[1].port) == 1
    assert counter(pipe, nr.SwitchCounters.PORT_TX, ws[0].port) == 1
    assert counter(pipe, nr.SwitchCounters.PORT_TX, ws[1].port) == 1
    hits = [e.packets for e in pipe.tables[nr.AggregationIngressNames.CONN_TABLE].entries()]
    assert sorted(hits) == [1, 1]


# ------------------------------------------------------------------ leaf -> spine -> leaf


LEAF_UP_PORT = 10
RESEND_NS = 10_000_000  # NR_RESEND_US: a leaf re-sends a partial at most this often
SPINE_MAC = "02:bb:00:00:00:01"


class Fabric:
    """Two leaves (two workers each) under one spine, wired in-process."""

    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.now_ns = 1_000_000_000  # one clock for all three switches, advanced by tests
        self.leaf_ip = ["10.1.0.1", "10.1.0.2"]
        self.leaf_mac = ["02:cc:00:00:00:01", "02:cc:00:00:00:02"]
        self.spine_ip = "10.2.0.1"
        self.spine = self._spine()
        # what each switch received through send() since the last restart: ("spine" or the
        # leaf's index, port, frame), for replaying on another target
        self.received: list[tuple[str | int, int, bytes]] = []
        self.leaves: list[Pipeline] = []
        self.jobs: list[Job] = []
        for i in range(2):
            leaf, job = self._leaf(i)
            job.next_psn = [5000 * (i + 1) + 100 * k for k in range(2)]
            self.leaves.append(leaf)
            self.jobs.append(job)

    def _switch(self) -> Pipeline:
        pipe = Pipeline.from_program(self.program)
        pipe.set_clock(lambda: self.now_ns)
        return pipe

    def _leaf(self, i: int) -> tuple[Pipeline, Job]:
        leaf = self._switch()
        return leaf, self.configure_leaf(leaf, i)

    def configure_leaf(self, leaf: Pipeline, i: int) -> Job:
        """Leaf ``i``'s entries (its job, the parent's downlink, the uplink rewrite)."""
        job = Job(leaf, 1, make_workers(2, first=1 + 2 * i), role=LEAF,
                  upstream_port=LEAF_UP_PORT)
        insert(leaf, nr.AggregationIngressNames.CONN_TABLE,
               [ip_int(self.spine_ip), ip_int(self.leaf_ip[i]), 0x900 + i],
               nr.AggregationIngressNames.SET_CONN,
               [1, 50, PARENT, LEAF_UP_PORT, LEAF_UP_PORT, 1])
        insert(leaf, nr.AggregationEgressNames.RESULT_REWRITE, [1, PARENT],
               nr.AggregationEgressNames.TO_SWITCH,
               [mac_int(self.leaf_mac[i]), mac_int(SPINE_MAC), ip_int(self.leaf_ip[i]),
                ip_int(self.spine_ip), 4791, 0x800 + i])
        return job

    def _spine(self) -> Pipeline:
        spine = self._switch()
        self.configure_spine(spine)
        return spine

    def configure_spine(self, spine: Pipeline) -> None:
        """The spine's entries: the job (root), both leaves' uplinks, the result group."""
        insert(spine, nr.AggregationIngressNames.JOB_TABLE, [1],
               nr.AggregationIngressNames.SET_JOB,
               [0, 16, 2, 0b11, 2, ROOT, 1, 0])
        for i in range(2):
            insert(spine, nr.AggregationIngressNames.CONN_TABLE,
                   [ip_int(self.leaf_ip[i]), ip_int(self.spine_ip), 0x800 + i],
                   nr.AggregationIngressNames.SET_CONN, [1, i, i, 1 + i, 1 + i, 1])
            insert(spine, nr.AggregationEgressNames.RESULT_REWRITE, [1, i],
                   nr.AggregationEgressNames.TO_SWITCH,
                   [mac_int(SPINE_MAC), mac_int(self.leaf_mac[i]), ip_int(self.spine_ip),
                    ip_int(self.leaf_ip[i]), 4791, 0x900 + i])
        spine.pre.set_group(1, [(1, 0), (2, 1)])

    def restart_spine(self) -> None:
        """The spine killed and started again: empty registers, the controller's entries."""
        self.spine = self._spine()
        self.received = []

    def restart_leaf(self, i: int) -> None:
        """Leaf ``i`` killed and started again (its workers keep their PSNs)."""
        leaf, job = self._leaf(i)
        job.next_psn = self.jobs[i].next_psn
        self.leaves[i], self.jobs[i] = leaf, job
        self.received = []

    def send(self, leaf: int, rank: int, frame: bytes) -> list[tuple[int, int, bytes]]:
        """Inject a worker frame; return (leaf, port, frame) delivered to worker ports."""
        delivered = []
        pending = [("leaf", leaf, self.jobs[leaf].workers[rank].port, frame)]
        while pending:
            kind, idx, port, data = pending.pop(0)
            self.received.append((idx if kind == "leaf" else "spine", port, data))
            if kind == "leaf":
                for out_port, out in self.leaves[idx].process(port, data):
                    if out_port == LEAF_UP_PORT:
                        pending.append(("spine", 0, 1 + idx, out))
                    else:
                        delivered.append((idx, out_port, out))
            else:
                for out_port, out in self.spine.process(port, data):
                    pending.append(("leaf", out_port - 1, LEAF_UP_PORT, out))
        return delivered


def test_two_level_leaf_spine_leaf_aggregation(program: ir.Program) -> None:
    """Four workers under two leaves get the global sum through the spine."""
    fab = Fabric(program)
    n = 2 * E
    psns = [list(j.next_psn) for j in fab.jobs]
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, n)) for k in range(2)]
            for i in range(2)]
    delivered = []
    for i, k in ((0, 0), (1, 0), (0, 1)):
        for frame in msgs[i][k]:
            delivered += fab.send(i, k, frame)
    assert delivered == []
    assert counter(fab.leaves[0], nr.AggregationEgressNames.PARTIALS_SENT, 1) == 2
    for frame in msgs[1][1]:
        delivered += fab.send(1, 1, frame)
    total = split_message(sums(*(values(w, n) for w in range(4))), E)
    expected = []
    for i in range(2):
        for p in range(2):
            expected += [(i, port, f) for port, f in
                         all_results(fab.jobs[i], p, 2, total[p], psns[i])]
    assert sorted(delivered) == sorted(expected)
    assert counter(fab.spine, nr.AggregationIngressNames.COMPLETIONS, 1) == 2


def test_two_level_retransmission_after_final(program: ir.Program) -> None:
    """After the global result, a worker's resend gets it from its leaf alone."""
    fab = Fabric(program)
    psns = [list(j.next_psn) for j in fab.jobs]
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, E)) for k in range(2)]
            for i in range(2)]
    for i in range(2):
        for k in range(2):
            fab.send(i, k, msgs[i][k][0])
    spine_rx = counter(fab.spine, nr.SwitchCounters.PORT_RX, 1)
    out = fab.send(0, 1, msgs[0][1][0])
    total = sums(*(values(w, E) for w in range(4)))
    port, frame = fab.jobs[0].result(1, 0, 1, total, psn=psns[0][1])
    assert out == [(0, port, frame)]
    assert counter(fab.spine, nr.SwitchCounters.PORT_RX, 1) == spine_rx


def test_two_level_lost_partial_recovered(program: ir.Program) -> None:
    """A partial lost on the uplink is resent when a worker retransmits."""
    fab = Fabric(program)
    psns = [list(j.next_psn) for j in fab.jobs]
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, E)) for k in range(2)]
            for i in range(2)]
    loss = nr.PortLossNames.EGRESS
    insert(fab.leaves[0], loss, [LEAF_UP_PORT], nr.PortLossNames.EGRESS_ACTION, [65536])
    for i in range(2):
        for k in range(2):
            assert fab.send(i, k, msgs[i][k][0]) == []
    fab.leaves[0].tables[loss].delete(TableEntry(
        matches=(FieldMatch(value=LEAF_UP_PORT),), action=None))
    fab.now_ns += RESEND_NS                      # a worker timeout later
    out = fab.send(0, 0, msgs[0][0][0])          # rank 0 of leaf 0 retransmits
    total = sums(*(values(w, E) for w in range(4)))
    expected = [(i, port, f) for i in range(2)
                for port, f in all_results(fab.jobs[i], 0, 1, total, psns[i])]
    assert sorted(out) == sorted(expected)
    assert counter(fab.leaves[0], nr.AggregationEgressNames.PARTIALS_SENT, 1) == 2


# ---------------------------------------------------------------------- reference compiler


def test_p4c_bmv2_compiles_program(tmp_path: Path) -> None:
    """p4c for BMv2/v1model accepts the program (needs p4c on PATH)."""
    from tests.p4c_build import p4c_outputs

    if shutil.which("p4c") is None:
        pytest.skip("p4c is not installed on this machine")
    assert "SwitchIngress.agg.conn_table" in p4c_outputs(P4).p4info
