"""A configured aggregation job on p4src/netreduce.p4 and a valid stream of worker packets.

The benchmark needs what tests/test_netreduce.py sets up (docs/protocol.md section 5: the
job, one connection per rank in a ring, the result rewrite per rank and the multicast group
that returns results) and a long stream of contributions that stays valid from the first
message to the last: message *m* of every worker uses slot ``(m mod C)`` with VERSION
``(m // C) mod 2`` (section 4.4), PSNs run on per connection, and all P contributions of
message *m* arrive before message *m + 1* starts, so every message completes and returns
one result per worker. Built on :mod:`workloads.netreduce_headers` (the protocol's own packet
builder), not on the tests.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiment.matrix import netreduce_wrapper
from protocol import netreduce as nr

REPO = Path(__file__).resolve().parent.parent
# NR_BENCH_PROGRAM: another build of the program (bench_revisions holds the program fixed
# while it compares two revisions of the code that runs it).
SOURCE = Path(os.environ.get("NR_BENCH_PROGRAM") or REPO / "p4src" / "netreduce.p4")
SWITCH_MAC = "02:aa:00:00:00:01"
ROLE_ROOT = int(nr.Role.ROOT)
#: The benchmarks' E, named in their rows: short packets, so that a row measures the switch's
#: per-packet work (the program as written has the full path MTU, nr.PROGRAM_ELEMS).
ELEMS = 32


def program(elems: int = ELEMS, source: Path = SOURCE, dest: Path | None = None) -> Path:
    """``source`` (a netreduce.p4, of this revision or another) built with
    ``NR_ELEMS = elems``: a two-line wrapper in ``dest`` (default build/bench/)."""
    return netreduce_wrapper(elems, dest if dest is not None else REPO / "build" / "bench",
                             source)


@dataclass(frozen=True)
class Worker:
    """A worker host: its switch port, addresses and UDP source port."""

    port: int
    mac: str
    ip: str
    sport: int


def make_workers(n: int, first: int = 1) -> list[Worker]:
    """Workers on ports first..first+n-1 (10.0.0.k, 02:00:00:00:00:kk, source port 49152+k)."""
    return [
        Worker(port=k, mac=f"02:00:00:00:00:{k:02x}", ip=f"10.0.0.{k}", sport=49152 + k)
        for k in range(first, first + n)
    ]


def _ip(addr: str) -> int:
    return int(ipaddress.IPv4Address(addr))


def _mac(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


@dataclass
class AggregationJob:
    """One job of P workers on one (root) switch; rank k's connection goes to rank k+1."""

    job: int
    workers: list[Worker]
    credits: int = 2
    slot_count: int = 16
    mcast_grp: int = 1
    elems: int = ELEMS  # NR_ELEMS the program was built with

    def peer(self, k: int) -> Worker:
        return self.workers[(k + 1) % len(self.workers)]

    def qp(self, k: int) -> int:
        return nr.worker_qpn(self.job, k, receiving=False)

    def configure(self, pipeline: Any) -> None:
        """Install the job, connection and rewrite entries and the result multicast group."""
        from softswitch.engine.tables import ActionCall, FieldMatch, TableEntry

        def insert(table: str, keys: Sequence[int], action: str, args: Sequence[int]) -> None:
            pipeline.tables[table].insert(
                TableEntry(
                    tuple(FieldMatch(value=k) for k in keys), ActionCall(action, tuple(args))
                )
            )

        n = len(self.workers)
        insert(
            nr.AggregationIngressNames.JOB_TABLE,
            [self.job],
            nr.AggregationIngressNames.SET_JOB,
            [0, self.slot_count, n, (1 << n) - 1, self.credits, ROLE_ROOT, self.mcast_grp, 0],
        )
        replicas = []
        for k, w in enumerate(self.workers):
            r = self.peer(k)
            insert(
                nr.AggregationIngressNames.CONN_TABLE,
                [_ip(w.ip), _ip(r.ip), self.qp(k)],
                nr.AggregationIngressNames.SET_CONN,
                [self.job, k, k, r.port, w.port, 0],
            )
            insert(
                nr.AggregationEgressNames.RESULT_REWRITE,
                [self.job, k],
                nr.AggregationEgressNames.TO_WORKER,
                [_mac(SWITCH_MAC), _mac(r.mac), _ip(w.ip), _ip(r.ip), w.sport, self.qp(k), k],
            )
            replicas.append((r.port, k))
        pipeline.pre.set_group(self.mcast_grp, replicas)

    def packet(self, k: int, m: int, psn: int) -> bytes:
        """Rank k's one-packet message ``m`` with PSN ``psn``, built by the protocol's
        packet builder (slow: scapy)."""
        from workloads.netreduce_headers import worker_packet

        w, r = self.workers[k], self.peer(k)
        slot, version = m % self.credits, (m // self.credits) % 2
        return bytes(
            worker_packet(
                src_mac=w.mac,
                dst_mac=SWITCH_MAC,
                src_ip=w.ip,
                dst_ip=r.ip,
                sport=w.sport,
                dqpn=self.qp(k),
                psn=psn,
                pkt_idx=0,
                npkts=1,
                elems=_values(k, self.elems),
                job=self.job,
                msg=m & 0xFFFF,
                slot=slot,
                version=version,
                va=_va(k, m),
                rkey=0x40 + k,
                rank=k,
            )
        )

    def stream(self, messages: int) -> list[tuple[int, bytes]]:
        """``(ingress port, frame)`` of ``messages`` one-packet messages from every worker,
        message by message (each completes before the next starts).

        Frames are the builder's frame of message 0 with the per-message fields patched
        in (PSN, VA, msg, slot, VERSION), which is fast; a few are checked against the
        builder so a layout change cannot go unnoticed."""
        n = len(self.workers)
        first_psn = [1000 * (k + 1) for k in range(n)]
        templates = [bytearray(self.packet(k, 0, first_psn[k])) for k in range(n)]
        out: list[tuple[int, bytes]] = []
        for m in range(messages):
            slot, version = m % self.credits, (m // self.credits) % 2
            for k, w in enumerate(self.workers):
                f = templates[k]
                f[_PSN : _PSN + 3] = ((first_psn[k] + m) & 0xFFFFFF).to_bytes(3, "big")
                f[_VA : _VA + 8] = _va(k, m).to_bytes(8, "big")
                f[_MSG : _MSG + 2] = (m & 0xFFFF).to_bytes(2, "big")
                f[_SLOT : _SLOT + 2] = slot.to_bytes(2, "big")
                f[_FLAGS] = (f[_FLAGS] & ~_FLAG_VERSION) | (_FLAG_VERSION if version else 0)
                out.append((w.port, bytes(f)))
        for m in sorted({0, 1, messages // 2, messages - 1} & set(range(messages))):
            for k in range(n):
                expect = self.packet(k, m, (first_psn[k] + m) & 0xFFFFFF)
                if out[m * n + k][1] != expect:
                    raise RuntimeError(
                        f"patched frame of rank {k} message {m} differs "
                        "from worker_packet(); update the offsets"
                    )
        return out


# byte offsets in a one-packet worker message: Ethernet, IPv4, UDP, BTH (PSN in its last 3
# bytes), RETH (VA first), tag (docs/protocol.md section 3; sizes from the contract)
_PSN = nr.PSN_OFFSET
_VA = nr.RETH_OFFSET
_TAG = nr.TAG_OFFSET
_MSG = _TAG + 4
_SLOT = _TAG + 6
_FLAGS = _TAG + 13
_FLAG_VERSION = nr.FLAG_VERSION


def _values(k: int, elems: int = ELEMS) -> list[int]:
    return [((k + 1) * 7 + j) % 1000 - 500 for j in range(elems)]


def _va(k: int, m: int) -> int:
    return 0x7F00_0000_0000 + (k << 24) + ((m & 0xFFF) << 12)


def completions(pipeline: Any, job: int) -> int:
    """Messages the switch completed for ``job`` (its completions counter)."""
    return pipeline.counters[nr.AggregationIngressNames.COMPLETIONS].packets[job]
