"""Emulated links: htb rate limits through Mininet's TCLink, and netem only where it exists.

Each rate limit serves acknowledgements (TCP pure ACKs, RoCE ACK/NAKs) before data
(:func:`ack_first_htb_cmds`), so one flow's queue does not stall the opposite flow.

Many kernels (this project's CI included) ship without ``sch_netem``: ``tc qdisc add ... netem``
fails there, and Mininet would print a tc error per interface and leave the link half
configured. :func:`netem_available` probes once per process in a throwaway network namespace;
:class:`ShapedLink` drops delay/loss when netem is missing, and :func:`shaping_warning` says so
(the P4 program's data-plane loss knob then stands in for link loss).

Topologies describe links in emulated units (bits/s, seconds); :func:`real_link_params` is
the one place that turns them into what htb and netem are given (Mbit/s, a tc time string),
through the run's :class:`~vtime.VirtualClock`: a time-dilated run shapes ``bw / TDF`` and
delays ``delay * TDF``. A rate the real link cannot carry is refused there, naming the
dilation that would make it possible.
"""

from __future__ import annotations

import functools
import logging
import math
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

from mininet.link import TCIntf, TCLink
from mininet.node import Switch

from topo.errors import TopologyError
from topo.topologies import LinkShape
from vtime import REAL_TIME, VirtualClock, format_delay, format_rate

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 10.0
#: The highest real rate a link is shaped to: Mininet's TCIntf ignores a larger ``bw`` (with
#: a console message), and one veth pair on this machine carries far less anyway.
MAX_REAL_BW_MBIT = float(TCIntf.bwParamMax)


class LinkRateError(TopologyError):
    """An emulated link that the real one cannot stand for at the run's time dilation."""


def netem_delay(seconds: float) -> str:
    """A delay as tc's netem reads it: microseconds with three decimals (``2us`` -> ``2.000us``,
    ``1ms`` -> ``1000.000us``). tc reads a bare number as microseconds, and tc 6.1 refuses
    ``ns``, so the unit is always written and is ``us``."""
    return f"{seconds * 1e6:.3f}us"


def real_link_params(shape: LinkShape, clock: VirtualClock = REAL_TIME
                     ) -> tuple[float | None, str | None]:
    """(htb rate in Mbit/s or None for unshaped, netem delay string or None) that make the
    real link stand for ``shape`` under ``clock``: ``bw / TDF`` and ``delay * TDF``. Raises
    :class:`LinkRateError` when the real rate is above :data:`MAX_REAL_BW_MBIT`, with the
    time-dilation factor that would bring it under."""
    bw_mbit = None
    if shape.bw_bps is not None:
        bw_mbit = clock.real_rate(shape.bw_bps) / 1e6
        if bw_mbit > MAX_REAL_BW_MBIT:
            need = math.ceil(clock.tdf * bw_mbit / MAX_REAL_BW_MBIT)
            dilated = f" at tdf={clock.tdf:g} that is {format_rate(bw_mbit * 1e6)}," \
                if clock.tdf != 1 else ""
            raise LinkRateError(
                f"link rate {format_rate(shape.bw_bps)}:{dilated} above the "
                f"{format_rate(MAX_REAL_BW_MBIT * 1e6)} a real link (htb through Mininet) can "
                f"be shaped to; emulate it with time dilation, tdf={need} or more (real links "
                "then carry bw / tdf), or choose a lower rate")
    delay = None
    if shape.delay_s:  # None or 0: no netem delay
        delay = netem_delay(clock.real_delay(shape.delay_s))
    return bw_mbit, delay


def check_link_shapes(shapes: Iterable[LinkShape], clock: VirtualClock = REAL_TIME) -> None:
    """Every shape's :func:`real_link_params`, before a network is built: a rate the real
    links cannot carry is refused up front, not half-way through Mininet's setup."""
    for shape in shapes:
        real_link_params(shape, clock)


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
        delay = f"delay={format_delay(shape.delay_s)}" if shape.delay_s else None
        if delay is not None and delay not in wanted:
            wanted.append(delay)
        if shape.loss is not None and f"loss={shape.loss:g}%" not in wanted:
            wanted.append(f"loss={shape.loss:g}%")
    if not wanted:
        return None
    return (
        f"netem is not available in this kernel: link {' '.join(wanted)} will NOT be emulated "
        "by the links (only their rate is); the P4 program's data-plane loss knob will be "
        "used instead to drop packets"
    )


#: htb classes under a link's rate class 5:1: acknowledgements first, then everything else.
ACK_CLASS, DATA_CLASS = "5:10", "5:11"
#: The acknowledgement class's guaranteed share of the rate (it may borrow all of it).
ACK_SHARE = 0.1
#: u32 matches (offsets from the IPv4 header) that put a packet in the acknowledgement class.
ACK_MATCHES = (
    # TCP pure ACK: 20-byte IP header, total length < 64 (52 with timestamps), flags = ACK
    "match ip protocol 6 0xff match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 "
    "match u8 0x10 0xff at 33",
    # RoCE v2 ACK/NAK: UDP to 4791, BTH opcode 0x11 (Acknowledge)
    "match ip protocol 17 0xff match u8 0x05 0x0f at 0 match ip dport 4791 0xffff "
    "match u8 0x11 0xff at 28",
)


#: htb's quantum (bytes a class may send per round) is rate / r2q unless given, and htb warns
#: (Mininet logs it as an ERROR) when that is below one frame or above 200,000 bytes, as it
#: is for the slow real links of a dilated run: given, within those bounds.
HTB_QUANTUM_MIN, HTB_QUANTUM_MAX, HTB_R2Q = 1514, 200_000, 10


def htb_quantum(mbit: float) -> int:
    """The quantum of an htb class of ``mbit`` Mbit/s: htb's own choice (rate / r2q, bytes),
    kept between one full frame and htb's upper bound."""
    return int(min(HTB_QUANTUM_MAX, max(HTB_QUANTUM_MIN, mbit * 1e6 / 8 / HTB_R2Q)))


def ack_first_htb_cmds(bw_mbit: float) -> list[str]:
    """tc commands (Mininet's ``TCIntf.tc`` format: tc binary, then device) for an htb rate
    limit of ``bw_mbit`` whose two leaf classes serve acknowledgements before data.

    Why: on a ring every link carries one flow's data and the opposite flow's ACKs. In one
    FIFO those ACKs wait behind the standing data queue and the opposite flow idles
    (docs/scale.md measured the ring 13-31 % slower than the link allows); served first, the
    ACKs cost only their bytes. The data class keeps htb's default 1000-packet queue, which
    in-network jobs with large credit windows need."""
    ack = bw_mbit * ACK_SHARE
    cmds = [
        "%s qdisc add dev %s root handle 5:0 htb default " + DATA_CLASS.split(":")[1],
        "%s class add dev %s parent 5:0 classid 5:1 htb " + f"rate {bw_mbit:f}Mbit burst 15k"
        + f" quantum {htb_quantum(bw_mbit)}",
        "%s class add dev %s parent 5:1 classid " + ACK_CLASS
        + f" htb rate {ack:f}Mbit ceil {bw_mbit:f}Mbit burst 15k prio 0"
        + f" quantum {htb_quantum(ack)}",
        "%s class add dev %s parent 5:1 classid " + DATA_CLASS
        + f" htb rate {bw_mbit - ack:f}Mbit ceil {bw_mbit:f}Mbit burst 15k prio 1"
        + f" quantum {htb_quantum(bw_mbit - ack)}",
    ]
    cmds += ["%s filter add dev %s parent 5:0 protocol ip "
             + f"prio {prio} u32 {match} flowid {ACK_CLASS}"
             for prio, match in enumerate(ACK_MATCHES, start=1)]
    return cmds


#: The data queue of a host's own interface, packets. A NIC does not drop its own send queue,
#: and a transport sends its window at once: with htb's default (the veth's 1000 packets) an
#: in-network job of 4 credits x 256 packets overflowed it at the sending host (543 and 561
#: packets dropped there at 10 us links, each loss a NAK and a resent window). Enough for
#: several windows of the protocol's largest (1024 packets). TCP keeps only a few packets
#: per socket in the queue (TCP small queues), so it does not fill it; switch-side queues
#: keep htb's default, where an overflow is an emulated switch's.
HOST_QUEUE_PACKETS = 16384


class AckFirstIntf(TCIntf):
    """Mininet's TCIntf with :func:`ack_first_htb_cmds` in place of its single htb class;
    netem (where the kernel has it) goes under both leaf classes. Other shapers (hfsc, tbf,
    RED/ECN) are Mininet's own."""

    def bwCmds(self, bw: float | None = None, **params: Any) -> tuple[list[str], str]:  # noqa: N802
        others = ("use_hfsc", "use_tbf", "enable_ecn", "enable_red", "speedup")
        if bw is None or not 0 < bw <= self.bwParamMax or any(params.get(k) for k in others):
            return super().bwCmds(bw=bw, **params)
        return ack_first_htb_cmds(bw), f" parent {DATA_CLASS} "

    def delayCmds(self, parent: str, **params: Any) -> tuple[list[str], str]:  # noqa: N802
        node = getattr(self, "node", None)
        if params.get("max_queue_size") is None and node is not None \
                and not isinstance(node, Switch):
            params["max_queue_size"] = HOST_QUEUE_PACKETS  # a host's send queue (netem's too)
        queue = params.get("max_queue_size")
        if queue is not None and not any(params.get(k) for k in ("delay", "jitter", "loss")):
            # a queue limit alone needs no netem: a packet FIFO of that length
            return [f"%s qdisc add dev %s {parent} handle 10: pfifo limit {int(queue)}"], \
                " parent 10:1 "
        cmds, leaf = TCIntf.delayCmds(parent, **params)
        if cmds and parent.strip() == f"parent {DATA_CLASS}":
            acks, _ = TCIntf.delayCmds(f" parent {ACK_CLASS} ", **params)
            cmds += [cmd.replace(" handle 10: ", " handle 11: ") for cmd in acks]
        return cmds, leaf


class ShapedLink(TCLink):
    """A TCLink (veth pair, htb rate limit on both ends with acknowledgements served first,
    checksum offloads off) that leaves out netem's delay/loss when ``netem`` is False instead
    of failing half-way. The topology's ``bw_bps``/``delay_s`` (emulated) become TCLink's
    ``bw``/``delay`` through :func:`real_link_params` at ``clock``."""

    def __init__(self, node1: Any, node2: Any, netem: bool = True,
                 clock: VirtualClock = REAL_TIME, **params: Any) -> None:
        super().__init__(node1, node2, cls1=AckFirstIntf, cls2=AckFirstIntf,
                         **tclink_params(params, netem, clock))


def tclink_params(params: dict[str, Any], netem: bool = True,
                  clock: VirtualClock = REAL_TIME) -> dict[str, Any]:
    """Mininet TCLink's keyword options for a topology link's options ``params``: its
    ``bw_bps``/``delay_s`` through :func:`real_link_params`, without netem's delay/jitter/
    loss when ``netem`` is False (its queue limit stays: a pfifo instead), checksum offloads
    off (the switch sees and forwards final checksums), the ``kind`` label dropped."""
    out = {k: v for k, v in params.items() if k not in ("kind", "bw_bps", "delay_s")}
    bw, delay = real_link_params(LinkShape(params.get("bw_bps"), params.get("delay_s")), clock)
    if bw is not None:
        out["bw"] = bw
    if delay is not None:
        out["delay"] = delay
    if not netem:
        for key in ("delay", "jitter", "loss"):
            out.pop(key, None)
    out.setdefault("txo", False)
    out.setdefault("rxo", False)
    return out
