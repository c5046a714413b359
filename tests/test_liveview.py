"""The live view without a network: its snapshot arithmetic, its HTTP routes and server-sent
events, the ``$INA_LIVE_PORT`` option, and the page in headless Chromium against a fake
``/sys/class/net`` (the test with a real network and a running job is test_liveview_net.py)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from liveview import live_view, port_from_env, port_or_announce
from liveview.server import LiveServer, LiveViewError
from liveview.sources import Collector, link_id
from tests.browser import headless_chromium, wait_for
from tests.liveview_fakes import FakeNet


@pytest.fixture
def net(tmp_path: Path) -> FakeNet:
    return FakeNet(tmp_path)


def _collector(net: FakeNet) -> Collector:
    return Collector(net.rundir.path, sysfs=net.sysfs, p4runtime=False)


def test_snapshot_rates_and_utilisation_follow_the_counters(net: FakeNet) -> None:
    """Two samples 1 Mbyte apart on l1's port to h1 give that link its rate and utilisation;
    the other links stay idle, and the switch totals add up the ports."""
    col = _collector(net)
    first = col.snapshot()
    assert all(row["mbit_out"] is None for row in first["links"])  # no interval yet
    l1 = net.topology.switch("l1")
    net.add(l1.port_to("h1").intf, tx_bytes=1_250_000, tx_packets=1000, rx_bytes=125_000)
    time.sleep(0.2)  # interval_s is rounded to ms: keep the interval well above that
    second = col.snapshot()
    seconds = second["interval_s"]
    rows = {row["id"]: row for row in second["links"]}
    row = rows[link_id("h1", 0, "l1", 1)]
    assert (row["switch"], row["port"], row["peer"], row["kind"]) == ("l1", 1, "h1", "host")
    assert row["tx_bytes"] == 1_250_000 and row["rx_bytes"] == 125_000
    assert row["mbit_out"] == pytest.approx(10.0 / seconds, rel=0.05)
    assert row["mbit_in"] == pytest.approx(1.0 / seconds, rel=0.05)
    assert row["utilization"] == pytest.approx(row["mbit_out"] / 10.0)
    assert all(r["mbit_out"] == 0.0 for i, r in rows.items() if i != row["id"])
    assert len(rows) == len(net.topology.links)
    assert second["switches"]["l1"]["interfaces"]["tx_packets"] == 1000
    assert second["switches"]["l2"]["interfaces"]["tx_packets"] == 0
    assert second["jobs"] == [] and second["errors"] == []


def test_rates_are_the_emulated_networks_under_time_dilation(tmp_path: Path) -> None:
    """At TDF 4 the bytes of a real interval took a quarter of it in emulated time: the page
    shows four times the real rate (the emulated one) and says the run is dilated."""
    net = FakeNet(tmp_path, tdf=4.0)
    col = _collector(net)
    col.snapshot()
    l1 = net.topology.switch("l1")
    net.add(l1.port_to("h1").intf, tx_bytes=1_250_000)
    time.sleep(0.2)
    snap = col.snapshot()
    row = {r["id"]: r for r in snap["links"]}[link_id("h1", 0, "l1", 1)]
    assert row["mbit_out"] == pytest.approx(4 * 10.0 / snap["interval_s"], rel=0.05)
    assert snap["tdf"] == 4.0 and col.graph()["tdf"] == 4.0


def test_switch_stats_file_is_read(net: FakeNet) -> None:
    """A softswitch stats file beside the switch's log shows up as that switch's counters."""
    from softswitch.stats import build_document, write_atomic

    sw = net.topology.switch("l2")
    doc = build_document({1: ("l2-eth1", {"rx_packets": 5, "tx_packets": 7, "dropped": 2,
                                          "malformed": 1, "tx_drops": 0, "rx_errors": 0})},
                         {}, name="softswitch", device_id=sw.device_id, now=10.0, started=4.0,
                         reason="periodic")
    assert sw.log is not None
    write_atomic(sw.log.replace(".log", ".stats.json"), doc)
    snap = _collector(net).snapshot()
    assert snap["switches"]["l2"]["stats"] == {"rx_packets": 5, "tx_packets": 7, "dropped": 2,
                                               "tx_drops": 0, "malformed": 1, "rx_errors": 0,
                                               "uptime_s": 6.0}
    assert snap["switches"]["l1"]["stats"] is None


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read()


def test_routes_and_event_stream(net: FakeNet) -> None:
    """The page, its static files, the graph from topology.json (every node and link) and
    one server-sent event carrying a snapshot; unknown paths are 404."""
    with LiveServer(net.rundir.path, 0, 0.2, collector=_collector(net)) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, ctype, body = _get(server.url)
        assert status == 200 and ctype.startswith("text/html") and b"cytoscape.min.js" in body
        status, _, body = _get(server.url + "static/cytoscape.min.js")
        assert status == 200 and b"Cytoscape Consortium" in body[:400]
        status, _, body = _get(server.url + "static/cytoscape.LICENSE.txt")
        assert status == 200 and b"Permission is hereby granted" in body
        graph = json.loads(_get(server.url + "api/graph")[2])
        nodes = {e["data"]["id"] for e in graph["elements"] if e["group"] == "nodes"}
        edges = {e["data"]["id"] for e in graph["elements"] if e["group"] == "edges"}
        topo = net.topology
        assert nodes == {s.name for s in topo.switches} | {h.name for h in topo.hosts}
        assert edges == {link_id(ln.node1, ln.port1, ln.node2, ln.port2) for ln in topo.links}
        assert graph["roots"] == ["sp1", "sp2"]
        for path in ("nope", "static/../server.py", "static/.hidden.js", "static/missing.js"):
            assert _get(server.url + path)[0] == 404, path
        with urllib.request.urlopen(server.url + "events", timeout=10) as resp:
            assert resp.headers["Content-Type"] == "text/event-stream"
            line = resp.readline()
        assert line.startswith(b"data: ")
        snap = json.loads(line[len(b"data: "):])
        assert snap["seq"] >= 1 and len(snap["links"]) == len(topo.links)
        assert json.loads(_get(server.url + "api/snapshot")[2])["seq"] >= snap["seq"]


def test_port_taken_and_missing_topology_are_clear_errors(net: FakeNet, tmp_path: Path) -> None:
    with LiveServer(net.rundir.path, 0, collector=_collector(net)) as server:
        port = server.httpd.server_address[1]
        with pytest.raises(LiveViewError, match=f"cannot listen on 127.0.0.1:{port}"):
            LiveServer(net.rundir.path, port, collector=_collector(net))
        said: list[str] = []
        with live_view(net.rundir.path, port, said.append) as none:
            assert none is None
        assert said and said[0].startswith("live view not started:")
    with pytest.raises(LiveViewError, match="empty: no such file .is a network running"):
        LiveServer(tmp_path / "empty", 0)


def test_port_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INA_LIVE_PORT", raising=False)
    assert port_from_env() == 0 and port_from_env(default=None) is None
    for text, want in (("8080", 8080), ("0", 0), ("off", None), (" OFF ", None)):
        monkeypatch.setenv("INA_LIVE_PORT", text)
        assert port_from_env() == want, text
    monkeypatch.setenv("INA_LIVE_PORT", "web")
    with pytest.raises(ValueError, match="INA_LIVE_PORT='web': expected a port number"):
        port_from_env()
    said: list[str] = []
    assert port_or_announce(0, said.append) is None
    assert said == ["live view not started: INA_LIVE_PORT='web': expected a port number, 0 "
                    "or off"]
    monkeypatch.setenv("INA_LIVE_PORT", "70000")
    with pytest.raises(ValueError, match="INA_LIVE_PORT=70000: a port is 0..65535"):
        port_from_env()


def test_page_in_headless_chromium_draws_everything_and_updates(net: FakeNet) -> None:
    """In a real browser: every node and link of topology.json is drawn, the links table has
    a row per link, and the numbers change when the counters do."""
    topo = net.topology
    l1 = topo.switch("l1")
    with LiveServer(net.rundir.path, 0, 0.2, collector=_collector(net)) as server, \
            headless_chromium() as driver:
        driver.get(server.url)
        wait_for(driver, "return window.live && window.live.received >= 2")
        nodes = driver.execute_script("return window.live.cy.nodes().map(n => n.id())")
        edges = driver.execute_script("return window.live.cy.edges().map(e => e.id())")
        assert sorted(nodes) == sorted([s.name for s in topo.switches] +
                                       [h.name for h in topo.hosts])
        assert sorted(edges) == sorted(link_id(ln.node1, ln.port1, ln.node2, ln.port2)
                                       for ln in topo.links)
        rows = driver.execute_script(
            "return [...document.querySelectorAll('#links tbody tr')].map(r => r.dataset.link)")
        assert sorted(rows) == sorted(edges)
        # every node was placed inside the drawing area by the layout
        box = driver.execute_script(
            "const e = document.getElementById('graph'); return [e.clientWidth, e.clientHeight]")
        for x, y in driver.execute_script(
                "return window.live.cy.nodes().map(n => [n.renderedPosition('x'), "
                "n.renderedPosition('y')])"):
            assert 0 <= x <= box[0] and 0 <= y <= box[1]
        link = link_id("l1", 3, "sp1", 1)
        cell = f"document.querySelector('tr[data-link=\"{link}\"] .tx-bytes').textContent"
        assert driver.execute_script(f"return {cell}") == "0"
        stop = threading.Event()

        def traffic() -> None:  # 2 Mbit/s out of l1 towards sp1 while the page is watched
            while not stop.wait(0.1):
                net.add(l1.port_to("sp1").intf, tx_bytes=25_000, tx_packets=20)

        thread = threading.Thread(target=traffic, daemon=True)
        thread.start()
        try:
            wait_for(driver, f"return {cell} !== '0'")
            label = wait_for(driver, f"const l = window.live.cy.getElementById('{link}')"
                                     ".data('label'); return l && l !== '0.00 (0 %)' && l")
            packets = driver.execute_script(
                "return document.querySelector('tr[data-switch=\"l1\"] .tx-packets')"
                ".textContent")
        finally:
            stop.set()
            thread.join()
        assert int(driver.execute_script(f"return {cell}")) > 0
        assert label.endswith("%)") and float(label.split()[0]) > 0
        assert int(packets) > 0


def test_make_run_options(monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m experiment.run``: --live-port PORT|off and --no-live, else $INA_LIVE_PORT, else
    a free port; a bad value is a usage error naming the option."""
    from experiment.run import parse_args

    monkeypatch.delenv("INA_LIVE_PORT", raising=False)
    assert parse_args([]).live_port == 0
    assert parse_args(["--live-port", "8080"]).live_port == 8080
    assert parse_args(["--live-port", "off"]).live_port is None
    assert parse_args(["--no-live"]).live_port is None
    monkeypatch.setenv("INA_LIVE_PORT", "off")
    assert parse_args([]).live_port is None
    assert parse_args(["--live-port", "9000"]).live_port == 9000
    for argv, env, message in (
            (["--live-port", "70000"], "0", "--live-port: 70000 is not a port (0..65535"),
            ([], "web", "--live-port: 'web' is not a port number (0..65535, 0 = a free one), "
             "or off; the default comes from $INA_LIVE_PORT")):
        monkeypatch.setenv("INA_LIVE_PORT", env)
        with pytest.raises(SystemExit) as exc:
            parse_args(argv)
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


def test_liveview_cli_serves_a_run_directory(net: FakeNet, repo_root: Path) -> None:
    """``python -m liveview --rundir DIR`` prints its URL and serves the graph until stopped;
    a directory without topology.json is a one-line error."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "liveview", "--rundir", str(net.rundir.path)],
                            cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"live view of {net.rundir.path}: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].split()[0]
        graph = json.loads(_get(url + "api/graph")[2])
        assert len(graph["elements"]) == (len(net.topology.switches) + len(net.topology.hosts)
                                          + len(net.topology.links))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    bad = subprocess.run([sys.executable, "-m", "liveview", "--rundir", str(repo_root / "nope")],
                         cwd=repo_root, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip().startswith("error: ") and "no such file" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_slow_p4runtime_reads_do_not_delay_link_rates(net: FakeNet) -> None:
    """P4Runtime is read in its own thread: while a (fake) read takes 1.5 s, snapshots keep
    coming every interval with fresh link counters, and carry the last reading's jobs."""

    class SlowReads(Collector):
        def read_p4runtime(self) -> dict[str, Any]:
            time.sleep(1.5)
            return {"jobs": [{"name": "j"}], "drops": {"l1": {"ingress:fault": 3}},
                    "errors": [], "time": time.time(), "took_ms": 1500.0}

    col = SlowReads(net.rundir.path, sysfs=net.sysfs, p4runtime=False)
    with LiveServer(net.rundir.path, 0, 0.1, collector=col) as server:
        t0 = time.monotonic()
        first = server.wait_newer(-1, timeout_s=5)
        assert first is not None and time.monotonic() - t0 < 1.0
        assert first["jobs"] == [] and first["p4runtime_ms"] is None  # no reading yet
        net.add(net.topology.switch("l1").port_to("h1").intf, tx_bytes=5000)
        snap = server.wait_newer(first["seq"], timeout_s=5)
        assert snap is not None and snap["links"][0]["tx_bytes"] == 5000
        deadline = time.monotonic() + 10
        while snap["p4runtime_ms"] is None and time.monotonic() < deadline:
            snap = server.wait_newer(snap["seq"], timeout_s=5)
            assert snap is not None
        assert snap["jobs"] == [{"name": "j"}] and snap["p4runtime_ms"] == 1500.0
        assert snap["switches"]["l1"]["drops"] == {"ingress:fault": 3}
