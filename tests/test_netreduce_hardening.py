"""Regression tests of issue 16: netreduce.p4 exact and live under reordering, a
multi-threaded egress, hostile hosts and lost packets (docs/protocol.md section 9).

Each test replays the exact packet sequence of one finding on the built-in target and
fails on the program before the fix (run it there with ``NETREDUCE_P4=<old netreduce.p4>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP, IPOption_RR
from scapy.layers.l2 import Ether

from bench.netreduce_job import make_workers
from protocol import netreduce as nr
from protocol.netreduce import FLAG_SWITCH
from softswitch import ir
from softswitch.frontend import compile_file
from softswitch.pipeline import Pipeline
from tests.netreduce_sizes import netreduce_with
from tests.test_netreduce import (
    CREDIT,
    LEAF,
    LEAF_UP_PORT,
    P4,
    RESEND_NS,
    STALE,
    SW_MAC,
    UNBOUND,
    E,
    Fabric,
    Job,
    add_route,
    all_results,
    counter,
    insert,
    ip_int,
    job_drops,
    sums,
    values,
    worker_window,
)
from workloads.netreduce_headers import split_message

WRONG_PORT, FORGED_SWITCH, REPEAT_RESULT, BAD_INDEX = 15, 16, 18, 19
SENT_AT = "SwitchIngress.agg.slot_sent_at"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> ir.Program:
    """The program at E = 32 (the packet tests' size)."""
    return compile_file(str(netreduce_with(E, tmp_path_factory.mktemp("program"), P4)))


@pytest.fixture()
def pipe(program: ir.Program) -> Pipeline:
    return Pipeline.from_program(program)


def register(pipe: Pipeline, name: str, index: int) -> int:
    return pipe.registers[name].read(index)


# ------------------------------------------------------------------ 1. stale PSN / RETH


def test_result_psn_when_recording_packet_tail_dropped(program: ir.Program) -> None:
    """Finding 1: rank 0's absorbed packet finds its port's egress queue full (BMv2 tail
    drop); the result replica for rank 0's connection must still carry the PSN and RETH
    of this message, not those of the copy's previous use (message m - 2C)."""
    pipe = Pipeline.from_program(program, egress_order="fifo")
    ws = make_workers(3)
    job = Job(pipe, 1, ws, credits=1, slot_count=4)
    add_route(pipe, ws[0])
    # messages 0 and 1 use copies 0 and 1 of slot 0; message 2 reuses copy 0
    for m in range(2):
        for k in range(3):
            pipe.process(ws[k].port, job.message(k, values(k, E), msg=m, version=m % 2)[0])
    psns = list(job.next_psn)
    frames = [job.message(k, values(k, E), msg=2)[0] for k in range(3)]
    blocker = bytes(Ether(src=ws[1].mac, dst=SW_MAC) / IP(src=ws[1].ip, dst=ws[0].ip)
                    / UDP(sport=1, dport=2) / (b"z" * 30))
    pipe.set_queue_depth(1, port=ws[0].port)
    pipe.receive(ws[1].port, blocker)              # fills rank 0's port queue
    pipe.receive(ws[0].port, frames[0])            # absorbed: tail-dropped if queued
    assert [port for port, _f in pipe.transmit()] == [ws[0].port]
    pipe.set_queue_depth(64)
    out = []
    for k in (1, 2):
        pipe.receive(ws[k].port, frames[k])
        out += pipe.transmit()
    total = sums(*(values(k, E) for k in range(3)))
    assert sorted(out) == all_results(job, 0, 1, total, psns, msg=2)


@pytest.mark.parametrize("seed", range(6))
def test_results_exact_under_random_egress_order(program: ir.Program, seed: int) -> None:
    """Finding 1: with BMv2-like random egress order (replicas of different ports in any
    order, egress after later packets' ingress), every result of six messages carries its
    own message's PSN and RETH."""
    pipe = Pipeline.from_program(program, egress_order="random", egress_seed=seed)
    ws = make_workers(3)
    job = Job(pipe, 1, ws, credits=1, slot_count=4)
    total = sums(*(values(k, E) for k in range(3)))
    for m in range(6):
        psns = list(job.next_psn)
        out = []
        for k in (m % 3, (m + 1) % 3, (m + 2) % 3):
            out += pipe.process(ws[k].port, job.message(k, values(k, E), msg=m,
                                                         version=m % 2)[0])
        out += pipe.transmit()
        assert sorted(out) == all_results(job, 0, 1, total, psns, msg=m, version=m % 2)


def test_result_never_sent_with_another_messages_binding(pipe: Pipeline) -> None:
    """A host that breaks the credit rule (rank 1 opens message 4 on binding 0 while
    message 0 is still open) loses only its own result of message 0: that replica is
    dropped as STALE_RESULT instead of leaving with message 4's PSN; rank 0's result is
    correct."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=4, slot_count=8)
    psns = list(job.next_psn)
    m0 = [job.message(k, values(k, E), msg=0, slot=0)[0] for k in range(2)]
    assert job.send([(1, m0[1])]) == []
    m4 = job.message(1, values(1, E), msg=4, slot=0, version=1)[0]
    assert job.send([(1, m4)]) == []
    out = job.send([(0, m0[0])])
    total = sums(values(0, E), values(1, E))
    assert out == [job.result(0, 0, 1, total, psn=psns[0])]
    assert counter(pipe, nr.SwitchCounters.EGRESS_DROPS, 17) == 1


# -------------------------------------------------------- 2. delayed older first packet


def test_delayed_old_first_packet_takes_no_credit_or_binding(pipe: Pipeline) -> None:
    """Finding 2: a copy of message 0's first packet, delayed until message 4 has taken
    binding 0, is dropped as STALE: no credit, and message 4 stays bound."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=4, slot_count=8)
    probe = None
    for m in range(4):
        for k in range(2):
            frames = job.message(k, values(k, E), msg=m, slot=m * 2)
            if m == 0 and k == 0:
                probe = frames[0]
            job.send([(k, frames[0])])
    assert probe is not None
    psns = list(job.next_psn)
    m4 = [job.message(k, values(k, 2 * E), msg=4, slot=0, version=1) for k in range(2)]
    assert job.send([(0, m4[0][0])]) == []
    started = register(pipe, nr.AggregationIngressNames.CONN_STARTED, 0)
    assert job.send([(0, probe), (0, m4[0][1])]) == []
    assert job_drops(pipe, 1, STALE) == 1
    assert job_drops(pipe, 1, UNBOUND) == 0
    assert register(pipe, nr.AggregationIngressNames.CONN_STARTED, 0) == started
    out = job.send([(1, m4[1][0]), (1, m4[1][1])])
    total = split_message(sums(values(0, 2 * E), values(1, 2 * E)), E)
    expected = []
    for i in range(2):
        expected += all_results(job, i, 2, total[i], psns, msg=4, version=1)
    assert sorted(out) == sorted(expected)


# -------------------------------------------------------------------------- 3. spoofing


def test_spoofed_contribution_from_other_port_changes_nothing(pipe: Pipeline) -> None:
    """Finding 3: a host on another port sends rank 0's first packet (its addresses, QP
    and a PSN of its choosing) with its own values: dropped WRONG_PORT, and the result
    is the honest sum with rank 0's own PSN."""
    ws = make_workers(4)
    job = Job(pipe, 1, ws[:3])
    attacker = ws[3]
    psns = list(job.next_psn)
    forged = Ether(job.message(0, [10**6] * E, psn=psns[0] + 7)[0])
    forged[Ether].src = attacker.mac
    assert pipe.process(attacker.port, bytes(forged)) == []
    out = job.send([(k, job.message(k, values(k, E))[0]) for k in range(3)])
    total = sums(*(values(k, E) for k in range(3)))
    assert sorted(out) == all_results(job, 0, 1, total, psns)
    assert job_drops(pipe, 1, WRONG_PORT) == 1
    assert counter(pipe, nr.SwitchCounters.INGRESS_DROPS, WRONG_PORT) == 1
    assert counter(pipe, nr.AggregationIngressNames.DUPLICATES, 1) == 0


def test_member_cannot_set_switch_flag(pipe: Pipeline) -> None:
    """Finding 3: a member's own packet with the SWITCH flag would skip bindings and
    credits; it is dropped FORGED_SWITCH and adds nothing."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws)
    pkt = Ether(job.message(0, values(0, E))[0])
    pkt["NRTag"].flags = int(pkt["NRTag"].flags) | FLAG_SWITCH
    assert pipe.process(ws[0].port, bytes(pkt)) == []
    assert job_drops(pipe, 1, FORGED_SWITCH) == 1
    assert counter(pipe, nr.AggregationIngressNames.CONTRIBUTIONS, 1) == 0


def test_forged_parent_result_from_host_port_ignored(program: ir.Program) -> None:
    """Finding 3: while a leaf waits for the spine, a worker forges the spine's result
    (spine addresses and QP, SWITCH|RESULT) from its host port: dropped, and the workers
    get the real global sum."""
    fab = Fabric(program)
    loss = nr.PortLossNames.EGRESS
    insert(fab.leaves[0], loss, [LEAF_UP_PORT], nr.PortLossNames.EGRESS_ACTION, [65536])
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, E)) for k in range(2)] for i in range(2)]
    psns = [[5000, 5100], [10000, 10100]]
    for k in range(2):
        assert fab.send(0, k, msgs[0][k][0]) == []     # leaf 0 complete, partial lost
    partial = Ether(msgs[0][0][0])
    partial[IP].src, partial[IP].dst = fab.spine_ip, fab.leaf_ip[0]
    partial["BTH"].dqpn = 0x900
    partial["NRTag"].flags = 0x08 | 0x04
    partial["NRData"].elems = [7] * E
    del partial[IP].chksum
    out = fab.leaves[0].process(fab.jobs[0].workers[0].port, bytes(partial))
    assert out == []
    assert job_drops(fab.leaves[0], 1, WRONG_PORT) == 1
    fab.leaves[0].tables[loss].clear()
    fab.now_ns += RESEND_NS
    delivered = fab.send(0, 0, msgs[0][0][0])
    for k in range(2):
        delivered += fab.send(1, k, msgs[1][k][0])
    total = sums(*(values(w, E) for w in range(4)))
    expected = [(i, port, f) for i in range(2)
                for port, f in all_results(fab.jobs[i], 0, 1, total, psns[i])]
    assert sorted(delivered) == sorted(expected)


# -------------------------------------------------------------------- 4. amplification


def lost_uplink_cost(fab: Fabric, retransmissions: int) -> int:
    """Packets the switches send because leaf 0's partial was lost once: the leaf's
    workers retransmit ``retransmissions`` times each while the spine's answer is on its
    way (uplink packets are delivered only after all of them)."""
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, E)) for k in range(2)] for i in range(2)]
    loss = nr.PortLossNames.EGRESS
    insert(fab.leaves[0], loss, [LEAF_UP_PORT], nr.PortLossNames.EGRESS_ACTION, [65536])
    for i in range(2):
        for k in range(2):
            fab.send(i, k, msgs[i][k][0])
    fab.leaves[0].tables[loss].clear()
    sent = 0
    uplink = []
    fab.now_ns += RESEND_NS
    for _ in range(retransmissions):
        for k in range(2):
            for port, frame in fab.leaves[0].process(fab.jobs[0].workers[k].port, msgs[0][k][0]):
                sent += 1
                if port == LEAF_UP_PORT:
                    uplink.append(frame)
    for frame in uplink:
        for port, down in fab.spine.process(1, frame):
            sent += 1
            sent += len(fab.leaves[port - 1].process(LEAF_UP_PORT, down))
    return sent


def test_lost_uplink_partial_not_amplified(program: ir.Program) -> None:
    """Finding 4: one lost partial, three retransmissions by each of the leaf's two
    workers before the spine answers: one partial goes up, the spine's completion sends
    one result to each leaf, each leaf one to each of its two workers: 7 packets, what
    the message costs without loss (the program before the fix sent 27)."""
    fab = Fabric(program)
    assert lost_uplink_cost(fab, 3) == 7
    assert counter(fab.leaves[0], nr.AggregationEgressNames.PARTIALS_SENT, 1) == 2


def test_repeated_parent_result_dropped_at_final_copy(program: ir.Program) -> None:
    """Finding 4: a second copy of the spine's result for a final leaf copy is dropped
    (REPEAT_RESULT) instead of multicast again."""
    fab = Fabric(program)
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, E)) for k in range(2)] for i in range(2)]
    results = []
    for i in range(2):
        for k in range(2):
            for port, frame in fab.leaves[i].process(fab.jobs[i].workers[k].port, msgs[i][k][0]):
                if port == LEAF_UP_PORT:
                    results += fab.spine.process(1 + i, frame)
    down0 = [f for port, f in results if port == 1]
    assert len(down0) == 1
    assert len(fab.leaves[0].process(LEAF_UP_PORT, down0[0])) == 2
    assert fab.leaves[0].process(LEAF_UP_PORT, down0[0]) == []
    assert job_drops(fab.leaves[0], 1, REPEAT_RESULT) == 1


# -------------------------------------------------------------------- 5. register indices


def test_slot_range_past_the_switch_never_indexes_outside(pipe: Pipeline) -> None:
    """Finding 5: a job entry whose range runs past NR_SLOTS (a control-plane mistake)
    and a tag pointing there: dropped BAD_INDEX, nothing is added or sent."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, slot_base=1020, slot_count=16)
    out = job.send([(k, job.message(k, values(k, E), slot=8)[0]) for k in range(2)])
    assert out == []
    assert job_drops(pipe, 1, BAD_INDEX) == 2
    assert counter(pipe, nr.AggregationIngressNames.CONTRIBUTIONS, 1) == 0


def test_connection_index_past_the_switch_dropped(pipe: Pipeline) -> None:
    """Finding 5: a connection index >= NR_CONNS from the table is never used."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, conn_base=5000)
    out = job.send([(k, job.message(k, values(k, E))[0]) for k in range(2)])
    assert out == []
    assert job_drops(pipe, 1, BAD_INDEX) == 2


# -------------------------------------------------------------------- 6. IPv4 options


def test_ipv4_with_options_routed_with_valid_checksum(pipe: Pipeline) -> None:
    """Finding 6: a UDP packet with a record-route option is routed, options untouched,
    TTL decremented and the checksum right over the whole header."""
    ws = make_workers(2)
    add_route(pipe, ws[1])
    ip = IP(src=ws[0].ip, dst=ws[1].ip, ttl=9, options=[IPOption_RR(routers=["1.2.3.4"])])
    frame = bytes(Ether(src=ws[0].mac, dst=SW_MAC) / ip / UDP(sport=5, dport=6) / (b"x" * 20))
    assert Ether(frame)[IP].ihl > 5
    out = pipe.process(ws[0].port, frame)
    want = Ether(src=SW_MAC, dst=ws[1].mac) / IP(bytes(Ether(frame)[IP]))
    want[IP].ttl = 8
    del want[IP].chksum
    assert out == [(ws[1].port, bytes(Ether(bytes(want))))]


def test_ipv4_options_bad_checksum_still_dropped(pipe: Pipeline) -> None:
    """The checksum over the options is verified: a corrupted option byte is a bad
    checksum."""
    ws = make_workers(2)
    add_route(pipe, ws[1])
    ip = IP(src=ws[0].ip, dst=ws[1].ip, options=[IPOption_RR(routers=["1.2.3.4"])])
    raw = bytearray(bytes(Ether(src=ws[0].mac, dst=SW_MAC) / ip / UDP() / (b"y" * 8)))
    raw[14 + 20 + 3] ^= 0x01  # inside the option
    assert pipe.process(ws[0].port, bytes(raw)) == []
    assert counter(pipe, nr.SwitchCounters.INGRESS_DROPS, 14) == 1


# ------------------------------------------------------------------ 7. credits mid-job


def test_credits_lowered_mid_job_admit_messages_already_sent(pipe: Pipeline) -> None:
    """Finding 7: with messages 0 and 1 in flight under credits 4, the controller lowers
    the job to 1 credit; message 2, sent before the worker learnt it, is not refused,
    and the results advertise the new limit."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=4, slot_count=4)
    frames = {(k, m): job.message(k, values(k, E), msg=m, slot=m)[0]
              for m in range(3) for k in range(2)}
    for m in range(2):
        job.send([(0, worker_window(frames[(0, m)], 4))])
    insert(pipe, nr.AggregationIngressNames.JOB_TABLE, [1], nr.AggregationIngressNames.SET_JOB,
           [0, 4, 2, 0b11, 1, 0, 1, 0], modify=True)
    job.send([(0, worker_window(frames[(0, 2)], 4))])
    assert job_drops(pipe, 1, CREDIT) == 0
    out = job.send([(1, worker_window(frames[(1, m)], 4)) for m in range(3)])
    assert len(out) == 6
    tags = [Ether(f)["NRTag"] for _, f in out]
    assert {t.window for t in tags} == {1}
    assert sorted(t.msg for t in tags) == [0, 0, 1, 1, 2, 2]


# ------------------------------------------------------- credits after a switch restart

BIND_OPEN = "bind_open"


def _open_bindings(pipe: Pipeline, conn: int) -> int:
    """Credits the connection holds: its bindings not yet closed."""
    return sum(register(pipe, BIND_OPEN, conn * 4 + b) for b in range(4))


def test_old_messages_bound_after_a_restart_return_their_credits(pipe: Pipeline) -> None:
    """A restarted switch (empty registers). Worker 0's ACKs died with the old switch, so
    it sends messages 0 and 1 again; worker 1 has their results and never does. Each took
    one of worker 0's two credits and can never become final here: before, message 2 was
    refused for credit for ever (the reliability campaign's leaf restarts that hung with
    CREDIT drops). A worker opens message m only with the results of every message up to
    m - window, so bindings that old are settled and return their credits."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=2, slot_count=2)
    for m in range(2):
        frame = worker_window(job.message(0, values(0, E), msg=m, slot=m)[0], 2)
        assert job.send([(0, frame)]) == []
    assert _open_bindings(pipe, 0) == 2
    out = []
    for m in (2, 3):
        for k in range(2):
            frame = job.message(k, values(k, E), msg=m, slot=m % 2, version=1)[0]
            out += job.send([(k, worker_window(frame, 2))])
    assert job_drops(pipe, 1, CREDIT) == 0
    assert sorted(Ether(f)["NRTag"].msg for _, f in out) == [2, 2, 3, 3]
    assert [_open_bindings(pipe, c) for c in range(2)] == [1, 1]  # message 3's, until the next


def test_a_window_free_tag_closes_no_binding_early(pipe: Pipeline) -> None:
    """A tag that declares no window (0) closes a binding only when its message is done:
    with one credit, a second message waits for the first (test_credits_bound_...), and
    with two, a third one does."""
    ws = make_workers(2)
    job = Job(pipe, 1, ws, credits=2, slot_count=3)
    for m in range(2):
        job.send([(0, job.message(0, values(0, E), msg=m, slot=m)[0])])
    assert job.send([(0, job.message(0, values(0, E), msg=2, slot=2)[0])]) == []
    assert job_drops(pipe, 1, CREDIT) == 1
    assert _open_bindings(pipe, 0) == 2


# ------------------------------------------------------- 8. a restart after a partial result

Frames3 = list[tuple[int, int, bytes]]  # (leaf, port, frame) delivered to workers


def _first_round(fab: Fabric) -> tuple[list[list[list[bytes]]], list[list[int]], list[int]]:
    """Every worker's one-packet message 0: (messages, PSNs, the global total)."""
    psns = [list(j.next_psn) for j in fab.jobs]
    msgs = [[fab.jobs[i].message(k, values(2 * i + k, E)) for k in range(2)] for i in range(2)]
    return msgs, psns, sums(*(values(w, E) for w in range(4)))


def _retransmit_until_answered(fab: Fabric, leaf: int, ranks: Sequence[int],
                               msgs: list[list[list[bytes]]]) -> list[tuple[int, int, bytes]]:
    """The ranks' workers on ``leaf`` time out and resend message 0, one worker timeout
    (NR_RESEND_US) apart, until something reaches a worker (at most five rounds)."""
    for _ in range(5):
        fab.now_ns += RESEND_NS
        for k in ranks:
            delivered = fab.send(leaf, k, msgs[leaf][k][0])
            if delivered:
                return delivered
    return []


def spine_restart(fab: Fabric) -> tuple[Frames3, Frames3]:
    """The spine multicast message 0's total, leaf 0 got it (final, its workers done), and
    the spine was killed before the copy for leaf 1 left; restarted, it gets leaf 1's
    resends. Returns what reached leaf 1's workers, and what should have."""
    msgs, psns, total = _first_round(fab)
    partials = []
    for i in range(2):
        for k in range(2):
            partials += [(i, f) for _, f in
                         fab.leaves[i].process(fab.jobs[i].workers[k].port, msgs[i][k][0])]
    down = [out for i, f in partials for out in fab.spine.process(1 + i, f)]
    assert sorted(port for port, _ in down) == [1, 2]
    leaf0 = [(0, port, f) for port, f in
             fab.leaves[0].process(LEAF_UP_PORT, next(f for port, f in down if port == 1))]
    assert sorted(leaf0) == [(0, port, f) for port, f in
                             all_results(fab.jobs[0], 0, 1, total, psns[0])]
    fab.restart_spine()
    delivered = _retransmit_until_answered(fab, 1, (0, 1), msgs)
    return sorted(delivered), [(1, port, f) for port, f in
                               all_results(fab.jobs[1], 0, 1, total, psns[1])]


def leaf_restart(fab: Fabric) -> tuple[Frames3, Frames3]:
    """Leaf 0 multicast message 0's total and was killed before the copy for rank 1's
    connection left (rank 0's receiver got its copy, so rank 0 is done); restarted, it
    gets rank 1's resends. Returns what reached a worker, and what should have."""
    msgs, psns, total = _first_round(fab)
    for i, k in ((1, 0), (1, 1), (0, 0)):
        fab.send(i, k, msgs[i][k][0])
    up = fab.leaves[0].process(fab.jobs[0].workers[1].port, msgs[0][1][0])
    down = [out for _, f in up for out in fab.spine.process(1, f)]
    for port, f in down:
        if port == 2:
            assert len(fab.leaves[1].process(LEAF_UP_PORT, f)) == 2
    results = fab.leaves[0].process(LEAF_UP_PORT, next(f for port, f in down if port == 1))
    assert sorted(results) == all_results(fab.jobs[0], 0, 1, total, psns[0])
    fab.restart_leaf(0)
    delivered = _retransmit_until_answered(fab, 0, (1,), msgs)
    port, frame = fab.jobs[0].result(1, 0, 1, total, psn=psns[0][1])
    return delivered, [(0, port, frame)]


def test_spine_restart_after_its_result_reached_one_leaf(program: ir.Program) -> None:
    """Rule 8: after spine_restart's kill, the restarted spine has leaf 1's partial again
    but leaf 0 never sends one: before, leaf 1's resends only counted as duplicates and
    the job hung (the reliability campaign's spine kill under load). Now the waiting spine
    pulls its children, leaf 0 answers with the total (TOTAL) and leaf 1's workers get
    the exact sum."""
    fab = Fabric(program)
    delivered, expected = spine_restart(fab)
    assert delivered == expected
    pulls = nr.AggregationEgressNames.PULLS_SENT
    # one pull to each leaf, one TOTAL back from leaf 0
    assert (counter(fab.spine, pulls, 1), counter(fab.leaves[0], pulls, 1)) == (2, 1)
    assert counter(fab.leaves[1], pulls, 1) == 0   # waiting, not final: it does not answer
    assert job_drops(fab.leaves[0], 1, REPEAT_RESULT) == 1  # the spine's multicast, back


def test_leaf_restart_after_its_result_reached_one_worker(program: ir.Program) -> None:
    """Rule 8: after leaf_restart's kill, the restarted leaf collects rank 1's resends
    alone: before, they were counted as duplicates for ever. Now the waiting leaf pulls
    its parent, whose final copy answers, and rank 1's receiver gets the exact sum."""
    fab = Fabric(program)
    delivered, expected = leaf_restart(fab)
    assert delivered == expected
    assert counter(fab.leaves[0], nr.AggregationEgressNames.PULLS_SENT, 1) == 1
    assert counter(fab.spine, nr.AggregationEgressNames.PULLS_SENT, 1) == 0


def test_pull_never_reaches_a_worker(pipe: Pipeline) -> None:
    """A switch pulls its job's multicast group when a child switch waits; a group can hold
    workers too, and their copies are dropped in the egress: a pull is not a result.
    Here rank 2 of a leaf job is a child switch's link; rank 0 (a worker) has contributed
    and is bound, rank 3 is missing, and the child resends its partial."""
    now = [1_000_000_000]
    pipe.set_clock(lambda: now[0])
    job = Job(pipe, 1, make_workers(4), role=LEAF, upstream_port=LEAF_UP_PORT)
    child, peer = job.workers[2], job.peer(2)
    insert(pipe, nr.AggregationIngressNames.CONN_TABLE, [ip_int(child.ip), ip_int(peer.ip),
           job.qp(2)], nr.AggregationIngressNames.SET_CONN,
           [1, 2, 2, peer.port, child.port, 1], modify=True)
    assert job.send([(0, job.message(0, values(0, E))[0])]) == []
    partial = Ether(job.message(2, values(2, E))[0])
    partial["NRTag"].flags |= FLAG_SWITCH
    frame = bytes(partial)
    assert pipe.process(child.port, frame) == []      # absorbed: rank 3 missing
    assert register(pipe, SENT_AT, 0) == 0
    now[0] += RESEND_NS
    # the pull goes to the group: rank 0's receiver would have got the partial as a result
    assert pipe.process(child.port, frame) == []
    assert counter(pipe, nr.AggregationIngressNames.DUPLICATES, 1) == 1
    assert counter(pipe, nr.AggregationEgressNames.RESULTS_SENT, 1) == 0
    assert register(pipe, SENT_AT, 0) != 0   # the pull was sent (and paces the next one)


def test_p4c_compiles_without_warnings(tmp_path: Path) -> None:
    """p4c accepts the program without warnings (the shadowed slot_count and the unused
    flags are gone); needs p4c on PATH."""
    import shutil

    from tests.p4c_build import p4c_outputs

    if shutil.which("p4c") is None:
        pytest.skip("p4c is not installed on this machine")
    stderr = p4c_outputs(P4).stderr
    assert "warning" not in stderr.lower(), stderr
