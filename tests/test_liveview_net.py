"""The live view of a real network in headless Chromium (needs root).

A 1-spine, 2-leaf spine-leaf of built-in switches (prefix ``lv``, gRPC ports found free) runs
``experiment.session``'s in-network and ring all-reduces while the page is open: it must draw
every node and link, and its numbers (the job's completed slots, the links' byte counts) must
change while the job runs. With ``LIVEVIEW_SCREENSHOT=PATH`` the test also writes the
screenshot the README shows (``LIVEVIEW_SCREENSHOT=docs/img/liveview.png``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment.run import PROGRAM_ELEMS
from experiment.session import ExperimentOptions, run_experiment
from liveview.server import LiveServer
from liveview.sources import link_id
from tests.browser import headless_chromium, wait_for
from topo.cleanup import remove_interfaces, switch_interfaces
from topo.network import start_network
from topo.nodes import free_port_base
from topo.topologies import SpineLeafTopo

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
]

PREFIX = "lv"
PROGRAM = Path(__file__).resolve().parent.parent / "p4src" / "netreduce.p4"
# How often the live view reads the switches, and the test the page (twice as often), and
# the all-reduces' size: the page must show two distinct completion counts while the
# in-network one runs. 131072 elements read every 0.5 s showed one on a fresh-clone run
# ([0, 1566]), every 0.25 s two ([0, 1196, 1566]); 262144 every 0.25 s four.
POLL_S = 0.25
ELEMENTS = 262144

# JavaScript reading what the page shows (the DOM, not only the page's data)
COMPLETIONS = ("return [...document.querySelectorAll('#jobs .completions')]"
               ".reduce((n, td) => n + Number(td.textContent), 0)")
TX_BYTES = ("return [...document.querySelectorAll('#links .tx-bytes')]"
            ".reduce((n, td) => n + (Number(td.textContent) || 0), 0)")
BUSIEST = ("return Math.max(0, ...(window.live.last ? window.live.last.links : [])"
           ".map(l => l.utilization || 0))")


def _free_port_base(count: int) -> int:
    return free_port_base(count, 27000)


@pytest.fixture
def topo() -> Iterator[SpineLeafTopo]:
    topo = SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=2, host_bw=3, name_prefix=PREFIX,
                         grpc_base_port=_free_port_base(3))
    yield topo
    remove_interfaces(switch_interfaces(topo.switches()))


def test_live_view_of_a_running_job(topo: SpineLeafTopo, tmp_path: Path) -> None:
    """Every node and link is drawn; the completed slots and link byte counts shown change
    while the all-reduces run; the page names the job and its switches."""
    with start_network(topo, "softswitch", tmp_path / "run", PROGRAM, progress=False,
                       start_timeout=60) as network, \
            LiveServer(network.rundir.path, 0, interval_s=POLL_S) as server, \
            headless_chromium(1400, 900) as driver:
        driver.get(server.url)
        wait_for(driver, "return window.live && window.live.received >= 1")
        t = network.topology
        nodes = driver.execute_script("return window.live.cy.nodes().map(n => n.id())")
        edges = driver.execute_script("return window.live.cy.edges().map(e => e.id())")
        assert sorted(nodes) == sorted([s.name for s in t.switches] + [h.name for h in t.hosts])
        assert sorted(edges) == sorted(link_id(ln.node1, ln.port1, ln.node2, ln.port2)
                                       for ln in t.links)

        outcome: dict[str, Any] = {}

        def job() -> None:
            try:
                outcome["result"] = run_experiment(network, ExperimentOptions(
                    elements=ELEMENTS, elems=PROGRAM_ELEMS, measure_seconds=0.0))
            except Exception as exc:  # reported by the assertion below
                outcome["error"] = exc

        thread = threading.Thread(target=job, daemon=True)
        thread.start()
        seen_completions: set[int] = set()
        seen_tx: set[int] = set()
        best = -1.0
        job_texts: list[str] = []
        screenshot = tmp_path / "liveview.png"
        while thread.is_alive():
            seen_completions.add(int(driver.execute_script(COMPLETIONS)))
            seen_tx.add(int(driver.execute_script(TX_BYTES)))
            busiest = float(driver.execute_script(BUSIEST))
            completions = max(seen_completions)
            if completions > 0 and busiest > best:  # the busiest moment of the job, drawn
                best = busiest
                driver.save_screenshot(str(screenshot))
            if completions > 0:
                job_texts.append(driver.find_element("css selector", "#jobs").text)
            time.sleep(POLL_S / 2)
        thread.join()
        assert "error" not in outcome, outcome.get("error")
        assert outcome["result"].exact, outcome["result"].to_dict()
        # the numbers moved while the job ran: several distinct non-zero values each
        assert len(seen_completions - {0}) >= 2, sorted(seen_completions)
        assert len(seen_tx - {0}) >= 3, sorted(seen_tx)
        # the jobs panel named the job and every switch of its tree while it ran
        named = [text for text in job_texts if "allreduce (id" in text and "4 workers" in text
                 and all(sw.name in text for sw in t.switches)]
        assert named, job_texts[-3:]
        assert best >= 0 and screenshot.stat().st_size > 10_000
        target = os.environ.get("LIVEVIEW_SCREENSHOT")
        if target:
            Path(target).write_bytes(screenshot.read_bytes())
