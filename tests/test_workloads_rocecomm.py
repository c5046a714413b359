"""The RoCE v2 point-to-point transport of the baselines (workloads/rocecomm.py) on loopback:
each rank its own endpoint on its own 127.0.0.x address, real UDP datagrams; loss is
injected by dropping chosen datagrams before they reach the socket."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from algorithms import registry
from protocol.netreduce import NR_MAGIC, link_qpn, worker_qpn
from workloads.__main__ import main
from workloads.collectives import (
    hierarchical_ring_allreduce,
    ring_allreduce,
    torus2d_allreduce,
)
from workloads.loopback import run_roce_ranks
from workloads.roce import (
    LINE_RATE,
    OP_ACK,
    SLOW_START,
    WRITE_OPCODES,
    Requester,
    RoceEndpoint,
    parse_bth,
)
from workloads.rocecomm import (
    MAGIC,
    PeerPorts,
    RoceCommError,
    RoceCommunicator,
    RoceHost,
    _unframe,
    open_ranks,
    p2p_qpn,
    run_local,
)

Drop = Callable[[bytes], bool]


def lossy(monkeypatch: pytest.MonkeyPatch, ep: RoceEndpoint, drop: Drop) -> None:
    """Datagrams ``drop`` picks never leave ``ep`` (the sender believes they were sent)."""
    send_many, send_raw = ep.send_many, ep.send_raw

    def many(ip: str, datagrams: Sequence[bytes]) -> int:
        kept = [i for i, d in enumerate(datagrams) if not drop(d)]
        sent = send_many(ip, [datagrams[i] for i in kept])
        return len(datagrams) if sent == len(kept) else kept[sent]

    def raw(ip: str, datagram: bytes) -> bool:
        return True if drop(datagram) else send_raw(ip, datagram)

    monkeypatch.setattr(ep, "send_many", many)
    monkeypatch.setattr(ep, "send_raw", raw)


def drop_once(predicate: Callable[[int, int], bool]) -> Drop:
    """Drops each datagram whose (opcode, PSN) ``predicate`` picks, the first time only."""
    seen: set[tuple[int, int]] = set()

    def drop(datagram: bytes) -> bool:
        hdr = parse_bth(datagram)
        key = (hdr.opcode, hdr.psn)
        if predicate(*key) and key not in seen:
            seen.add(key)
            return True
        return False

    return drop


class Pair:
    """Two ranks, each with its own host (endpoint) on its own loopback address."""

    def __init__(self) -> None:
        self.hosts = [RoceHost((f"127.0.0.{2 + r}", 0)) for r in range(2)]
        addresses = [h.address for h in self.hosts]
        self.comms = [h.communicator(r, addresses, timeout=20.0)
                      for r, h in enumerate(self.hosts)]

    def close(self) -> None:
        for h in self.hosts:
            h.close(drain_timeout=5.0)


@pytest.fixture()
def pair() -> Iterator[Pair]:
    p = Pair()
    yield p
    p.close()


def inputs(rank: int, n: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(1000 + rank)
    if dtype == "int32":
        return rng.integers(-(2**30), 2**30, size=n, dtype=np.int32)
    return (rng.integers(-(2**12), 2**12, size=n) / 256.0).astype(np.float32)


# ------------------------------------------------------------------------ wire


def test_qp_numbers_never_meet_the_aggregation_ranges() -> None:
    """The switch takes a RoCE packet for aggregation only by (IPs, QP) in conn_table: the
    point-to-point QPs lie outside every QP the controller installs, and a message's first
    bytes are never the aggregation tag's magic."""
    agg = {worker_qpn(j, k, rx) for j in range(64) for k in range(256) for rx in (False, True)}
    agg |= {link_qpn(j, c, d) for j in range(64) for c in range(256) for d in (False, True)}
    p2p = {p2p_qpn(s, d, rx) for s in range(0, 1024, 7) for d in range(0, 1024, 5)
           for rx in (False, True)}
    assert not agg & p2p
    assert len(p2p) == len({(s, d, rx) for s in range(0, 1024, 7) for d in range(0, 1024, 5)
                            for rx in (False, True)})
    assert int.from_bytes(MAGIC, "big") != NR_MAGIC
    with pytest.raises(ValueError, match="ranks must be below 1024"):
        p2p_qpn(1024, 0, True)


def test_messages_arrive_whole_and_in_order(pair: Pair) -> None:
    """Arrays of every shape and size (one byte to many packets) arrive bit for bit, in send
    order per tag, and tags can be taken in any order."""
    a, b = pair.comms
    sent: list[np.ndarray] = [
        np.arange(5000, dtype=np.float32).reshape(50, 100),
        np.zeros(0, dtype=np.uint8),
        np.array(7, dtype=np.int64),
        np.arange(3, dtype=np.float64) / 3,
        (np.arange(1 << 16, dtype=np.int32) * 7919)]
    for i, arr in enumerate(sent):
        a.send(1, arr, tag=10 + i % 2)
    got: dict[int, list[np.ndarray]] = {10: [], 11: []}
    for tag in (11, 11, 10, 10, 10):
        got[tag].append(b.recv(0, tag))
    assert [x.dtype for x in got[10]] == [sent[0].dtype, sent[2].dtype, sent[4].dtype]
    for want, have in zip(sent[0::2], got[10], strict=True):
        assert have.shape == want.shape and np.array_equal(have, want)
    for want, have in zip(sent[1::2], got[11], strict=True):
        assert have.shape == want.shape and np.array_equal(have, want)
    t = a.traffic()
    assert t.messages_sent == 5 and t.payload_sent == sum(x.nbytes for x in sent)
    assert b.traffic().payload_received == t.payload_sent


@pytest.mark.parametrize("what", ["middle", "last", "ack"])
def test_lost_packets_are_recovered(monkeypatch: pytest.MonkeyPatch, pair: Pair,
                                    what: str) -> None:
    """A dropped data packet in the middle of a message (recovered by NAK and go-back-N),
    its last packet (by the retransmission timeout) or the receiver's ACK: the message still
    arrives whole, and the sender says it retransmitted."""
    a, b = pair.comms
    if what == "ack":
        # the ACK of the message's last packet (PSN 9): only a timeout can repair it
        lossy(monkeypatch, pair.hosts[1].endpoint,
              drop_once(lambda op, psn: op == OP_ACK and psn == 9))
    else:
        target = 3 if what == "middle" else 9
        lossy(monkeypatch, pair.hosts[0].endpoint,
              drop_once(lambda op, psn: op in WRITE_OPCODES and psn == target))
    x = np.arange(2400, dtype=np.float32)  # 10 packets of 1024 bytes with the header
    a.send(1, x, tag=1)
    assert np.array_equal(b.recv(0, 1), x)
    assert pair.hosts[0].endpoint.drain(10.0)  # acknowledged in the end
    stats = a.transport_stats()
    a.send(1, x + 1, tag=2)  # the connection goes on after the repair
    assert np.array_equal(b.recv(0, 2), x + 1)
    assert stats["retransmissions"] >= 1
    if what == "middle":
        assert stats["naks"] >= 1
    else:
        assert stats["timeouts"] >= 1


def test_malformed_messages_are_refused() -> None:
    """A message without the header, with another magic or with the wrong length."""
    with pytest.raises(RoceCommError, match="has no header"):
        _unframe(b"R", 3)
    with pytest.raises(RoceCommError, match="malformed message from rank 3"):
        _unframe(b"NR\x01\x00" + bytes(4), 3)
    with pytest.raises(RoceCommError, match="do not make"):
        _unframe(MAGIC + b"\x01\x01" + (2).to_bytes(8, "big") + bytes(4), 3)


def test_a_barrier_message_lost_before_the_peer_was_up_is_repaired_in_the_barrier(
        monkeypatch: pytest.MonkeyPatch, pair: Pair) -> None:
    """Rank 0's barrier message is lost (as when the peer's endpoint is not up yet): the
    barrier resends it before it returns, so the work after it (the timed all-reduce) sees no
    NAK and no go-back-N. Before, rank 0 left the barrier with it unacknowledged, its first
    data packet drew the peer's NAK and the whole window was resent inside the timed part."""
    lossy(monkeypatch, pair.hosts[0].endpoint,
          drop_once(lambda op, psn: op in WRITE_OPCODES and psn == 0))
    a, b = pair.comms
    x = np.arange(2400 * 8, dtype=np.float32)  # 80 packets
    errors: list[BaseException] = []
    counts: list[dict[str, int]] = []

    def rank0() -> None:  # leaves the barrier and sends at once, as a timed all-reduce does
        try:
            a.barrier()
            counts.append(a.transport_stats())
            a.send(1, x, tag=1)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=rank0, name="rank0")
    thread.start()
    b.barrier()
    assert np.array_equal(b.recv(0, 1), x)
    thread.join(20.0)
    assert not thread.is_alive() and not errors, errors
    assert pair.hosts[0].endpoint.drain(10.0)
    assert counts[0]["retransmissions"] >= 1  # the lost message was resent in the barrier
    after = a.transport_stats()
    assert (after["retransmissions"], after["naks"]) == (counts[0]["retransmissions"],
                                                         counts[0]["naks"])


def test_a_silent_peer_is_a_clear_timeout(pair: Pair) -> None:
    with pytest.raises(RoceCommError, match="a message from rank 1 with tag 0x5"):
        pair.comms[0].recv(1, 5, timeout=0.2)


# ------------------------------------------------------------------------ collectives


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("algo", ["ring", "torus", "hier"])
def test_collectives_over_roce_are_exact(algo: str, dtype: str) -> None:
    """Ring, 2D torus (2 x 2) and hierarchical ring (2 GPUs per host) over RoCE give every
    rank the exact numpy sum, bit for bit, for a size no packet or chunk divides."""
    n = 10007
    xs = [inputs(r, n, dtype) for r in range(4)]
    want = np.sum(np.stack(xs), axis=0, dtype=xs[0].dtype)
    runs: dict[str, Callable[[RoceCommunicator, np.ndarray], tuple[np.ndarray, Any]]] = {
        "ring": lambda c, x: ring_allreduce(c, x),
        "torus": lambda c, x: torus2d_allreduce(c, x, 2, 2),
        "hier": lambda c, x: hierarchical_ring_allreduce(c, x, 2)}
    run = runs[algo]
    out = run_roce_ranks(4, lambda c: run(c, xs[c.rank]))
    for result, stats in out:
        assert result.dtype == want.dtype and np.array_equal(result, want)
        assert stats.algorithm == {"torus": "torus2d"}.get(algo, algo)
    # the hierarchical ring: only the hosts' first ranks cross hosts, so they send more
    if algo == "hier":
        assert out[0][1].payload_sent > out[1][1].payload_sent


def test_ranks_on_one_address_share_one_endpoint() -> None:
    """Two hosts of two ranks each: a host's ranks share one endpoint (one port), told apart
    by their QP numbers; the ring over all four is exact."""
    ports = [RoceHost(("127.0.0.2", 0)), RoceHost(("127.0.0.3", 0))]
    addresses = [ports[r // 2].address for r in range(4)]
    for h in ports:
        h.close()
    hosts = []
    try:
        comms: list[RoceCommunicator] = []
        for first in (0, 2):
            host, mine = open_ranks([first, first + 1], addresses, timeout=20.0)
            hosts.append(host)
            comms += mine
        xs = [inputs(r, 3001, "float32") for r in range(4)]
        out = run_local(comms, lambda c: ring_allreduce(c, xs[c.rank])[0], 40.0)
        want = np.sum(np.stack(xs), axis=0)
        assert all(np.array_equal(o, want) for o in out)
    finally:
        for host in hosts:
            host.close(drain_timeout=5.0)


def test_a_failing_rank_is_reported() -> None:
    def work(c: RoceCommunicator) -> None:
        if c.rank == 1:
            raise ValueError("rank one broke")
        c.recv(1, 9, timeout=0.5)

    with pytest.raises(RoceCommError, match="rank 1 failed: rank one broke"):
        run_roce_ranks(2, work, timeout=5.0)


# ------------------------------------------------------------------------ set-up errors


def test_bad_peers_name_the_field_and_value() -> None:
    ports = PeerPorts()
    with pytest.raises(ValueError, match="peers: address 127.0.0.9 is listed with ports 5 and 6"):
        ports.learn([("127.0.0.9", 5), ("127.0.0.9", 6)])
    with pytest.raises(ValueError, match="local RoCE ranks must share one address"):
        open_ranks([0, 1], [("127.0.0.2", 4791), ("127.0.0.3", 4791)])
    with pytest.raises(ValueError, match="rank 5 out of range for 2 peers"):
        open_ranks([5], [("127.0.0.2", 4791), ("127.0.0.3", 4791)])


def test_registry_finds_each_baseline_on_each_transport() -> None:
    """One name per (algorithm, transport); bad transports name the value."""
    assert registry.on_transport("ring", registry.ROCE).name == "ring-roce"
    assert registry.on_transport("torus2d", "roce").name == "torus-roce"
    assert registry.on_transport("hier-roce", "tcp").name == "hier"
    assert registry.on_transport("ring-roce", "tcp").name == "ring"
    assert registry.names(transport=registry.ROCE) == ("ring-roce", "torus-roce", "hier-roce")
    with pytest.raises(ValueError, match="transport 'rdma': choose from tcp, roce"):
        registry.on_transport("ring", "rdma")
    with pytest.raises(ValueError, match="transport 'roce': algorithm 'topk' runs over tcp"):
        registry.on_transport("topk", "roce")


# ------------------------------------------------------------------------ command line


def test_cli_runs_a_roce_ring_with_its_ranks_in_one_process(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m workloads allreduce --algo ring-roce`` with three local ranks on one
    address: every rank checks the exact sum and reports RoCE's counters."""
    with RoceHost(("127.0.0.4", 0)) as probe:
        port = probe.address[1]  # free a moment ago; the process binds it again
    peers = ",".join([f"127.0.0.4:{port}"] * 3)
    code = main(["allreduce", "--algo", "ring-roce", "--rank", "0,1,2", "--peers", peers,
                 "--size", "5000", "--check", "--iters", "2", "--timeout", "20"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [r["rank"] for r in rows] == [0, 1, 2]
    assert all(r["check"] is True and r["algorithm"] == "ring-roce" for r in rows)
    assert all(len(r["seconds"]) == 2 and "naks" in r for r in rows)
    assert all(r["rtt_min_us"] > 0 for r in rows)  # the smallest round trip sampled


def test_cli_cc_start_line_starts_every_connection_with_its_whole_window(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--cc-start line`` reaches every RoCE connection: each one's first window is the
    whole window (the default slow-starts from two ACK intervals), and the ring is exact."""
    starts: list[tuple[str, float, int]] = []
    made = RoceEndpoint.requester

    def spy(self: RoceEndpoint, *args: Any, **kwargs: Any) -> Requester:
        req = made(self, *args, **kwargs)
        starts.append((kwargs.get("start", SLOW_START), req.cwnd, req.window))
        return req

    monkeypatch.setattr(RoceEndpoint, "requester", spy)
    with RoceHost(("127.0.0.4", 0)) as probe:
        port = probe.address[1]
    peers = ",".join([f"127.0.0.4:{port}"] * 2)
    code = main(["allreduce", "--algo", "ring-roce", "--rank", "0,1", "--peers", peers,
                 "--size", "5000", "--check", "--timeout", "20", "--window", "48",
                 "--cc-start", "line"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and all(r["check"] is True for r in rows)
    assert starts == [(LINE_RATE, 48.0, 48)] * 2
    with pytest.raises(SystemExit):
        main(["allreduce", "--algo", "ring-roce", "--cc-start", "fast"])
    assert "--cc-start: invalid choice: 'fast'" in capsys.readouterr().err


def test_cli_unknown_algorithm_names_the_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["allreduce", "--size", "10", "--algo", "ring-rdma"])
    assert "unknown algorithm 'ring-rdma'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--algo", "ring", "--rank", "0,1", "--peers", "127.0.0.1:1,127.0.0.1:2"],
     "--rank 0,1: a TCP rank runs alone"),
    (["--algo", "ring-roce", "--rank", "0,1", "--peers", "127.0.0.2:1,127.0.0.3:1"],
     "local RoCE ranks must share one address"),
    (["--algo", "ring-roce", "--rank", "0", "--peers", "127.0.0.2:1,127.0.0.2:2"],
     "peers: address 127.0.0.2 is listed with ports 1 and 2"),
])
def test_cli_bad_values_name_the_field(capsys: pytest.CaptureFixture[str],
                                       argv: list[str], message: str) -> None:
    assert main(["allreduce", "--size", "10", *argv]) == 2
    assert message in capsys.readouterr().err
