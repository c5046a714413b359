"""Emulated links: tbf rate limits through Mininet's TCLink, and netem only where it exists.

Many kernels (this project's CI included) ship without ``sch_netem``: ``tc qdisc add ... netem``
fails there, and Mininet would print a tc error per interface and leave the link half
configured. :func:`netem_available` probes once per process in a throwaway network namespace;
:class:`ShapedLink` drops delay/loss when netem is missing, and :func:`shaping_warning` says so
(the P4 program's data-plane loss knob then stands in for link loss).
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

from mininet.link import TCIntf, TCLink

from topo.topologies import LinkShape

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 10.0
#: A shaped link queues what it sends in this many milliseconds (tbf's latency). The length
#: trades the opposite TCP flow's ACKs waiting behind a long queue against TCP losses (and
#: 200 ms retransmission timeouts) at a short one; 150 ms held at 1 and 3 Mbit/s where
#: fixed frame counts did not (docs/scale.md). htb's pfifo held 1000 frames (4 s at 3 Mbit/s).
QUEUE_MS = 150.0
FRAME_BYTES = 1514
#: tbf's bucket: two full-size frames. Mininet's 15000 bytes let a link send 10 frames at
#: once after every idle moment, faster than its rate (a ring step's first frames).
BURST_BYTES = 2 * FRAME_BYTES


@functools.cache
def netem_available() -> bool:
    """True when a netem qdisc can be created. The probe runs ``tc`` on the loopback device
    of a fresh, anonymous network namespace (``unshare --net``), which vanishes with it, so
    nothing on the machine changes. Needs root; without it the answer is False."""
    unshare, tc = shutil.which("unshare"), shutil.which("tc")
    if unshare is None or tc is None:
        log.debug("netem probe: unshare or tc not on PATH")
        return False
    argv = [unshare, "--net", tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("netem probe failed to run: %s", exc)
        return False
    if res.returncode != 0:
        log.debug("netem probe: %s", (res.stderr or res.stdout).strip())
    return res.returncode == 0


def shaping_warning(shapes: Iterable[LinkShape], netem: bool) -> str | None:
    """The warning to show when delay or loss was asked for but netem is missing."""
    if netem:
        return None
    wanted = []
    for shape in shapes:
        if shape.delay is not None and f"delay={shape.delay}" not in wanted:
            wanted.append(f"delay={shape.delay}")
        if shape.loss is not None and f"loss={shape.loss:g}%" not in wanted:
            wanted.append(f"loss={shape.loss:g}%")
    if not wanted:
        return None
    return (
        f"netem is not available in this kernel: link {' '.join(wanted)} will NOT be emulated "
        "by the links (only their rate is); the P4 program's data-plane loss knob will be "
        "used instead to drop packets"
    )


class ShapedIntf(TCIntf):
    """Mininet's TCIntf with tbf shaping of ``BURST_BYTES`` and a ``QUEUE_MS`` queue
    (Mininet's own tbf has a 15000-byte bucket and a 15000-byte queue)."""

    def bwCmds(self, bw: float | None = None, speedup: float = 0, use_hfsc: bool = False,  # noqa: N802
               use_tbf: bool = False, latency_ms: float | None = None,
               enable_ecn: bool = False, enable_red: bool = False) -> tuple[list[str], str]:
        if not bw or not use_tbf or enable_ecn or enable_red or not 0 < bw <= self.bwParamMax:
            return super().bwCmds(bw, speedup, use_hfsc, use_tbf, latency_ms, enable_ecn,
                                  enable_red)
        latency = latency_ms if latency_ms is not None else QUEUE_MS
        return ([f"%s qdisc add dev %s root handle 5: tbf rate {bw:f}Mbit "
                 f"burst {BURST_BYTES} latency {latency:f}ms"], " parent 5:1 ")


class ShapedLink(TCLink):
    """A TCLink (veth pair, tbf rate limit on both ends, checksum offloads off) that leaves
    out netem's delay/loss when ``netem`` is False instead of failing half-way.

    Shaping is tbf, not Mininet's default htb: with htb (rate = ceil, burst 15k) the links
    of a TCP ring all-reduce idled 15-30 % of the time in bursts of 20-80 ms (the switches
    read every frame within 4.4 ms of its arrival, TCP had data in flight 98 % of the time,
    no loss), and the ring ran 13-31 % slower than ns-3 and the cost model; with this tbf
    it measured within 2 % at 1 Mbit/s (run alone) and 4-7 % for 1 MiB at 3 Mbit/s, though
    not in every cell (docs/scale.md, "Validation")."""

    def __init__(self, node1: Any, node2: Any, netem: bool = True, **params: Any) -> None:
        params.pop("kind", None)  # the topology's own link label
        if not netem:
            for key in ("delay", "jitter", "loss", "max_queue_size"):
                params.pop(key, None)
        if params.get("bw") and not params.get("use_hfsc"):
            params.setdefault("use_tbf", True)
        params.setdefault("cls1", ShapedIntf)
        params.setdefault("cls2", ShapedIntf)
        # Checksum offloads off on both ends: the switch sees and forwards final checksums.
        params.setdefault("txo", False)
        params.setdefault("rxo", False)
        super().__init__(node1, node2, **params)
