"""Probes of a running test network from its hosts (one place for the suite's pings)."""

from __future__ import annotations

import sys

from experiment.lifecycle import ExperimentNetwork
from experiment.seams import json_int, json_list, json_object
from experiment.session import collect
from topo.network import Network


def ping_once(network: Network, src: str, dst: str, timeout_s: float = 1.0) -> int:
    """Replies (0 or 1) to one ping from host ``src`` to host ``dst`` within
    ``timeout_s``, sent by ``python -m topo.hostcmd ping`` inside ``src``."""
    proc = ExperimentNetwork.around(network).popen(src, [
        sys.executable, "-m", "topo.hostcmd", "ping", "--dst",
        network.topology.host(dst).ip, "--count", "1", "--timeout", f"{timeout_s:g}"])
    res = collect({"p": proc}, 30.0)["p"]
    assert "error" not in res, res
    return json_int(json_object(json_list(res["results"])[0])["received"])
