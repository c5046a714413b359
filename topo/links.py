"""Emulated links: htb rate limits through Mininet's TCLink, and netem only where it exists.

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

from mininet.link import TCLink

from topo.topologies import LinkShape

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 10.0


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


class ShapedLink(TCLink):
    """A TCLink (veth pair, htb rate limit on both ends, checksum offloads off) that leaves
    out netem's delay/loss when ``netem`` is False instead of failing half-way."""

    def __init__(self, node1: Any, node2: Any, netem: bool = True, **params: Any) -> None:
        params.pop("kind", None)  # the topology's own link label
        if not netem:
            for key in ("delay", "jitter", "loss", "max_queue_size"):
                params.pop(key, None)
        # Checksum offloads off on both ends: the switch sees and forwards final checksums.
        params.setdefault("txo", False)
        params.setdefault("rxo", False)
        super().__init__(node1, node2, **params)
