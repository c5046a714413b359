"""Interface counters of switches that run on other servers (``make run servers=...``).

Their ports live in those servers' kernels, so ``/sys/class/net`` here does not have them:
one ``ssh`` per server and sample reads them all there, with the ssh command the run wrote
into ``<rundir>/cluster.json`` (topo/cluster.py).
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

SSH_TIMEOUT_S = 5.0


def load_cluster(rundir: Path) -> dict[str, object] | None:
    """``cluster.json`` of a run across servers, or None (a run on one machine)."""
    try:
        data = json.loads((rundir / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def remote_switches(cluster: Mapping[str, object]) -> dict[str, list[str]]:
    """{server: its nodes} of the servers reached over ssh (not the master's own)."""
    ssh = cluster.get("ssh")
    placement = cluster.get("placement")
    if not isinstance(ssh, dict) or not isinstance(placement, dict):
        return {}
    out: dict[str, list[str]] = {}
    for node, server in placement.items():
        if server in ssh:
            out.setdefault(str(server), []).append(str(node))
    return out


def read_remote_interfaces(ssh: Sequence[str], intfs: Iterable[str], files: Sequence[str],
                           root: str = "/sys/class/net") -> dict[str, dict[str, int]]:
    """{intf: {counter: value}} of ``intfs`` on the server ``ssh`` reaches (those missing or
    unreadable are left out)."""
    names = [i for i in intfs if i and "/" not in i]
    if not names:
        return {}
    script = (f"cd {shlex.quote(root)} 2>/dev/null || exit 0; for i in "
              + " ".join(shlex.quote(n) for n in names)
              + '; do [ -d "$i/statistics" ] || continue; printf "%s" "$i"; for f in '
              + " ".join(shlex.quote(f) for f in files)
              + '; do printf " %s" "$(cat "$i/statistics/$f")"; done; echo; done')
    try:
        res = subprocess.run([*ssh, script], capture_output=True, text=True,
                             timeout=SSH_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("remote counters: %s", exc)
        return {}
    out = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) != len(files) + 1:
            continue
        try:
            out[parts[0]] = {f: int(v) for f, v in zip(files, parts[1:], strict=True)}
        except ValueError:
            continue
    return out
