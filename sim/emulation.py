"""What the emulated testbed really is, as simulator/model parameters, and its measured rows.

The validation (docs/scale.md) compares the simulator and the cost model with all-reduces
measured on the Mininet spine-leaf (``experiment.matrix``). For that the :class:`Fabric` must
describe the emulation's transports, not an idealised RoCE network. Every number below is
fixed once, from packet formats and independent measurements, never fitted to a row:

* **Link rate.** Mininet's ``TCLink`` shapes each veth end with htb at ``bw`` Mbit/s. htb
  charges a packet its length as the kernel sees it: the Ethernet frame without preamble,
  FCS or inter-frame gap, so ``host_bps = bw·10⁶`` of frame bytes.
* **In-network packets** (``docs/protocol.md`` §2): host links carry RoCE v2 WRITEs of
  ``4·E`` payload bytes in Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 58 header
  bytes; a message's first packet adds RETH + tag (32 bytes over ``msg_pkts`` packets) and
  the receiver returns a 62-byte RoCE ACK per ``min(16, window/2)`` packets on the same host
  links. Leaf-spine packets carry RETH and tag on *every* packet (+32 bytes) and no ACKs
  (the receiver of each connection sits behind the sender's leaf).
* **One spine per job.** The controller (``controller/jobs.py``) places a job on one spine,
  so all of a job's slots cross one leaf-spine link per leaf (the simulator's default
  sprays slots over every spine).
* **Credits.** A worker keeps ``credits`` messages of ``msg_pkts`` packets in flight (the
  transport's congestion window adapts inside it); a credit comes back when its message's
  whole result has arrived, and the next message then goes out.
* **Ring over TCP.** Linux TCP on 1500-byte MTU veths with timestamps: 1448 payload bytes
  in a 1514-byte frame, and a 66-byte ACK per two segments (delayed ACK) travelling the
  other way on the same links. A ring has every directed link carry one data flow and
  one ACK flow, so the ACK share is counted as header: 66 + 33 = 99 bytes per segment.
  The links serve those ACKs before data (``topo.links.ack_first_htb_cmds``), so they cost
  their bytes but never wait behind the standing data queue, which the simulator's FIFO
  links do not model either.
* **Ring over RoCE** (``ring-roce``): full ``PATH_MTU`` payloads in RoCE v2 WRITEs, the
  responder's ACK every :data:`ACK_EVERY` packets counted as header like TCP's.
* **Switch processing.** The Python switch spends ~90 µs per packet and hop under load
  (``python -m bench`` in-process cost plus AF_PACKET I/O; docs/workloads.md, "Performance
  of the in-network path", item 5); it enters as latency per switch crossing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import algorithms
from algorithms.registry import ROCE
from protocol import netreduce as nr
from sim.fabric import Fabric

#: Ethernet + IPv4 + UDP + BTH + ICRC: every in-network packet on a host link.
ROCE_HEADER = nr.ROCE_HEADER_BYTES
#: RETH + aggregation tag: a message's first packet, and every leaf-spine packet.
RETH_TAG = nr.RETH_TAG_BYTES
#: A RoCE ACK: Ethernet + IPv4 + UDP + BTH + AETH + ICRC.
ROCE_ACK = nr.ROCE_ACK_BYTES
#: The receiver ACKs at least every this many packets (workloads/innetwork.py ACK_EVERY).
ACK_EVERY = 16
#: TCP payload per segment on a 1500-byte MTU with the timestamp option.
TCP_MSS = 1500 - 20 - 32
#: Ethernet + IPv4 + TCP with timestamps.
TCP_HEADER = 14 + 20 + 32
#: Segments per TCP ACK (delayed ACK).
TCP_SEGMENTS_PER_ACK = 2
#: Per-packet processing of the built-in Python switch under load, seconds.
SWITCH_DELAY_S = 90e-6


def _sim_name(alg: algorithms.Algorithm) -> str | None:
    """The simulator's schedule for an emulated algorithm: its own, else its family's on
    another transport (``ring-roce`` is the ring's schedule with RoCE packets,
    :func:`fabric_for`)."""
    return alg.sim_name or algorithms.get(alg.kind).sim_name


#: experiment.matrix algorithm names -> sim.schedules names (from the algorithm registry).
ALGORITHM_OF = {a.name: name for a in algorithms.REGISTRY if (name := _sim_name(a)) is not None}


def ina_header_bytes(msg_pkts: int, window: int) -> int:
    """Bytes per in-network packet on a host link beyond its payload, ACK share included."""
    ack_every = max(1, min(ACK_EVERY, window // 2, msg_pkts))
    return round(ROCE_HEADER + RETH_TAG / msg_pkts + ROCE_ACK / ack_every)


def roce_header_bytes() -> int:
    """Bytes per RoCE v2 packet of a long message beyond its payload, the share of the
    responder's ACKs (one per :data:`ACK_EVERY` packets) included."""
    return round(ROCE_HEADER + ROCE_ACK / ACK_EVERY)


def tcp_header_bytes() -> int:
    """Bytes per TCP segment beyond its payload, the share of the reverse ACKs included."""
    return round(TCP_HEADER + TCP_HEADER / TCP_SEGMENTS_PER_ACK)


def ina_payload_share(elems: int, msg_pkts: int, window: int, leaf_spine: bool) -> float:
    """Payload bytes per wire byte of in-network packets on their busiest link: a host link
    (header, tag and ACK shares) or, for a job with a spine, a leaf-spine link (RETH + tag
    on every packet), whose packets are then the larger ones."""
    header = ROCE_HEADER + RETH_TAG if leaf_spine else ina_header_bytes(msg_pkts, window)
    return 4 * elems / (4 * elems + header)


def tcp_payload_share() -> float:
    """Payload bytes per wire byte of a TCP stream (full segments, half an ACK each)."""
    return TCP_MSS / (TCP_MSS + tcp_header_bytes())


def fabric_for(algorithm: str, spec: Mapping[str, Any]) -> Fabric:
    """The fabric that describes one emulated run of ``algorithm`` (a matrix name) on the
    network of ``spec`` (a ``experiment.matrix.MatrixSpec`` as a dict; optional
    ``delay_s``, the links' emulated one-way delay, and ``switch_delay_s``, a switch's
    per-packet latency in emulated seconds, default the undilated Python switch's;
    ``roce_window``, the RoCE baselines' packets in flight per connection)."""
    if algorithm not in ALGORITHM_OF:
        raise ValueError(f"no simulator model for emulated algorithm {algorithm!r}; "
                         f"known: {', '.join(ALGORITHM_OF)}")
    fabric_mbit = spec.get("fabric_bw_mbit")
    base = Fabric(spines=int(spec["spines"]), leaves=int(spec["leaves"]),
                  hosts_per_leaf=int(spec["hosts_per_leaf"]), gpus_per_host=int(spec["gpus"]),
                  host_bps=float(spec["bw_mbit"]) * 1e6,
                  fabric_bps=float(fabric_mbit) * 1e6 if fabric_mbit else None,
                  link_delay_s=float(spec.get("delay_s") or 0.0),
                  fabric_extra_hops=int(spec.get("fabric_extra_hops") or 0),
                  switch_delay_s=float(spec.get("switch_delay_s", SWITCH_DELAY_S)))
    if spec.get("intra_bw_mbit"):  # else the Fabric's NVLink default
        base = base.replace(intra_bps=float(spec["intra_bw_mbit"]) * 1e6)
    alg = algorithms.get(algorithm)
    if alg.innetwork:
        msg_pkts, window = int(spec["msg_pkts"]), int(spec["credits"]) * int(spec["msg_pkts"])
        header = ina_header_bytes(msg_pkts, window)
        # leaf-spine packets: RoCE header + RETH + tag (90 bytes), no ACK or tag share
        return base.replace(segment_bytes=4 * int(spec["elems"]), header_bytes=header,
                            switch_header_bytes=max(0, ROCE_HEADER + RETH_TAG - header),
                            ina_spines=1, window=window, message_packets=msg_pkts)
    if alg.transport == ROCE:
        # the RoCE ranks' window where the run gave one (`--window`; figures: the agents'
        # credits x packets), else no bound
        window = int(spec.get("roce_window") or 0)
        return base.replace(segment_bytes=nr.PATH_MTU, header_bytes=roce_header_bytes(),
                            send_window=window,
                            send_ack_every=max(1, min(ACK_EVERY, window // 2)))
    return base.replace(segment_bytes=TCP_MSS, header_bytes=tcp_header_bytes())


def rows_from_matrix(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Validation rows (:mod:`sim.validate`) from a matrix result (``spec`` and ``cells``):
    every successful all-reduce cell of an algorithm the simulator models."""
    spec = doc["spec"]
    rows = []
    for cell in doc["cells"]:
        if cell.get("kind") != "allreduce" or cell.get("algo") not in ALGORITHM_OF:
            continue
        if cell.get("errors") or cell.get("exact") is False or not cell.get("seconds"):
            continue
        fabric = fabric_for(cell["algo"], spec)
        rows.append({
            "algorithm": ALGORITHM_OF[cell["algo"]],
            "workers": int(cell["workers"]),
            "bytes": 4 * int(cell["size"]),
            "seconds": float(cell["seconds"]),
            "density": float(spec.get("density", 0.01)),
            "topology": fabric.to_dict(),
            "emulation": {"algo": cell["algo"], "busiest_util": cell.get("busiest_util"),
                          "machine_busy": cell.get("machine_busy"),
                          "switch_cpu": cell.get("switch_cpu"),
                          "retransmissions": cell.get("retransmissions")},
        })
    return rows


def _link_mbit(link: Mapping[str, Any]) -> float | None:
    """A topology.json link's rate in Mbit/s: ``bw_bps`` (schema 2) or ``bw_mbit`` (1)."""
    if link.get("bw_bps") is not None:
        return float(link["bw_bps"]) / 1e6
    mbit = link.get("bw_mbit")
    return None if mbit is None else float(mbit)


def rows_from_run(rundir: Path) -> list[dict[str, Any]]:
    """Validation rows from a ``make run`` / ``python -m experiment.run`` run directory: its
    ``topology.json`` (switch roles, hosts, link rates) and ``results/experiment.json`` (the
    all-reduces, the job's credits and packets per message, the program's E)."""
    rundir = Path(rundir)
    try:
        topology = json.loads((rundir / "topology.json").read_text())
        result = json.loads((rundir / "results" / "experiment.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{rundir}: not a readable run directory ({exc})") from None
    if not result.get("elems"):
        raise ValueError(f"{rundir}/results/experiment.json does not record the program's E "
                         "(elems); it comes from an older run: run it again")
    roles = [sw.get("role") for sw in topology.get("switches", [])]
    leaves = roles.count("leaf")
    workers = [h for h in topology.get("hosts", []) if int(h.get("gpus", 1)) > 0]
    kinds: dict[str, set[Any]] = {}
    for link in topology.get("links", []):
        kinds.setdefault(link.get("kind"), set()).add(_link_mbit(link))
    if any(len(values) > 1 for values in kinds.values()):
        raise ValueError(f"{rundir}/topology.json: links of one kind have different rates "
                         f"({kinds}); the fabric model has one host and one fabric rate")
    rates = {kind: next(iter(values)) for kind, values in kinds.items()}
    if not leaves or not workers or not rates.get("host"):
        raise ValueError(f"{rundir}/topology.json: needs leaf switches, worker hosts and "
                         "rate-limited host links")
    job = result.get("job", {})
    spec = {"spines": max(1, roles.count("spine")), "leaves": leaves,
            "hosts_per_leaf": len(workers) // leaves, "gpus": int(workers[0].get("gpus", 1)),
            "bw_mbit": float(rates["host"]), "fabric_bw_mbit": rates.get("fabric"),
            "elems": int(result["elems"]), "credits": int(job.get("credits", 1)),
            "msg_pkts": int(job.get("msg_pkts", 1))}
    rows = []
    for run in result.get("runs", []):
        if run.get("algorithm") not in ALGORITHM_OF or not run.get("exact"):
            continue
        fabric = fabric_for(run["algorithm"], spec)
        rows.append({"algorithm": ALGORITHM_OF[run["algorithm"]],
                     "workers": len(run.get("ranks") or workers),
                     "bytes": 4 * int(run["elements"]), "seconds": float(run["seconds"]),
                     "topology": fabric.to_dict(),
                     "emulation": {"kind": topology.get("kind"), "rundir": str(rundir)}})
    return rows


def load_matrix_rows(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Validation rows from one or more matrix JSON files."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a readable matrix result ({exc})") from None
        if not isinstance(doc, dict) or "spec" not in doc or "cells" not in doc:
            raise ValueError(f"{path}: not a matrix result (needs 'spec' and 'cells')")
        rows.extend(rows_from_matrix(doc))
    return rows
