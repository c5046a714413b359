"""CPU per packet of the RoCE transport the in-network agents use (workloads/roce.py).

Two endpoints on 127.0.0.1 in one process, each a requester to the other and a responder
from it; each side's application thread posts ``MESSAGES`` messages
of 64 packets of 1,008 bytes (E = 252) with 4 messages in flight and takes as many. The
figure is the process's CPU time over the packets sent (each also received once), so it
holds both ends' Python work, ACKs included, and the loopback's kernel path. Why: the
agents were the next bottleneck once the switches ran on C (bench/findings.md); this is
the loop to measure their data path in. Median of ``ROUNDS`` runs. Not included: the
aggregation channel's ``note_arrived`` per result packet (a result there exists only after
the worker's own packet was sent; two unsynchronised peers here give no such order, and
a requester fed the peer's packets as results could wait for one that came early).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from workloads.roce import Address, Requester, Responder, RoceEndpoint, write_packets

MESSAGES = 300
PACKETS, CREDITS, PAYLOAD = 64, 4, 1008
ROUNDS = 5


def _one_run(messages: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one exchange of ``messages`` each way."""
    ports: dict[str, int] = {}

    def resolve(ip: str) -> Address:
        return ("127.0.0.1", ports[ip])

    eps = {name: RoceEndpoint(("127.0.0.1", 0), resolve=resolve) for name in ("a", "b")}
    for name, ep in eps.items():
        ports[name] = ep.address[1]
    qpn = {"a": 0x10, "b": 0x20}
    chunk = bytes(PAYLOAD)
    try:
        sides: dict[str, tuple[RoceEndpoint, Requester, Responder]] = {}
        for me, peer in (("a", "b"), ("b", "a")):
            ep = eps[me]
            req = ep.requester(qpn[me], qpn[peer] + 1, peer, window=PACKETS * CREDITS)
            resp = ep.responder(qpn[me] + 1, qpn[peer], peer)
            sides[me] = (ep, req, resp)

        threads = [threading.Thread(target=_exchange, args=(*sides[n], messages, chunk),
                                    name=f"bench-{n}") for n in eps]
        t0, c0 = time.monotonic(), time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.process_time() - c0, time.monotonic() - t0
    finally:
        for ep in eps.values():
            ep.close()


def _exchange(ep: RoceEndpoint, req: Requester, resp: Responder, messages: int,
              chunk: bytes) -> None:
    """One side's application: posts ``messages`` messages, CREDITS in flight, and takes
    as many results."""
    sent = got = 0
    while got < messages:
        while sent < messages and sent - got < CREDITS:
            req.post(lambda psn: write_packets(req.remote_qpn, psn, [chunk] * PACKETS,
                                               0x1000, 7))
            sent += 1
        ep.wait(lambda: resp.has_message  # noqa: B023
                or (sent < messages and sent - got < CREDITS),  # noqa: B023
                ep.clock.now() + 60.0, "messages")
        with ep.cv:
            while resp.take() is not None:
                got += 1


def run(messages: int = MESSAGES) -> list[dict[str, Any]]:
    packets = 2 * messages * PACKETS
    cpu, wall = zip(*(_one_run(messages) for _ in range(ROUNDS)), strict=True)
    per_packet = statistics.median(cpu) / packets * 1e6
    notes = (f"2 endpoints in one process on 127.0.0.1, {messages} messages of {PACKETS} x "
             f"{PAYLOAD} B each way, {CREDITS} in flight; process CPU over packets sent; "
             f"median of {ROUNDS}")
    return [
        {"name": "RoCE transport, loopback", "metric": "CPU per packet", "value": per_packet,
         "unit": "us", "notes": notes},
        {"name": "RoCE transport, loopback", "metric": "throughput",
         "value": packets / statistics.median(wall), "unit": "pkt/s", "notes": notes},
    ]
