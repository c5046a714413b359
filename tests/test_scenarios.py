"""Scenario files: checking (errors name file, line, field and value), assertions, JUnit XML
(the shipped examples run end to end, which needs root: tests/test_scenarios_net.py)."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from experiment.session import AllreduceRun, RankOutcome
from scenarios.__main__ import main
from scenarios.junit import junit_xml
from scenarios.model import ScenarioError, load_scenario
from scenarios.runner import Case, ScenarioReport, evaluate

EXAMPLES = Path(__file__).resolve().parent.parent / "scenarios" / "examples"
PASSING = ("rack-exact", "rack-loss", "rack-restart")

GOOD = """\
name: t
topology: {kind: rack, hosts: 3}
jobs:
  - name: j1
    hosts: [h1, h2]
faults:
  - at: 2
    loss: {switch: s1, port: 1, rate: 0.05}
  - at: 5
    restart: {switch: s1}
assertions:
  - exact: all
  - time_ratio: {numerator: j1.ring, denominator: j1.innetwork, min: 1, max: 3}
  - no_drops: {reason: malformed}
"""


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_examples_are_valid() -> None:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        sc = load_scenario(path)
        assert sc.name == path.stem and sc.jobs and sc.assertions
    names = {p.stem for p in EXAMPLES.glob("*.yaml")}
    assert names == {*PASSING, "broken"}


def test_a_good_file_reads_back() -> None:
    sc = load_scenario(EXAMPLES / "rack-restart.yaml")
    assert [j.name for j in sc.jobs] == ["j1", "j2"] and sc.jobs[1].start == 6
    assert [(f.at, f.action, f.switch) for f in sc.faults] == [(5.0, "restart", "s1")]
    assert sc.assertions[0].jobs == ("j1", "j2")


def test_tdf_dilates_the_scenario(tmp_path: Path) -> None:
    """A scenario's tdf (default 1) is read as a number; its times stay emulated seconds."""
    assert load_scenario(_write(tmp_path, GOOD)).tdf == 1.0
    sc = load_scenario(_write(tmp_path, "tdf: 4\n" + GOOD))
    assert sc.tdf == 4.0 and [f.at for f in sc.faults] == [2.0, 5.0]


def test_link_rates_and_delays_take_units(tmp_path: Path) -> None:
    """A scenario's bw/fabric_bw take k/M/G/T (a bare number is Mbit/s), delay ns/us/ms/s."""
    sc = load_scenario(_write(tmp_path, GOOD.replace(
        "{kind: rack, hosts: 3}", "{kind: spineleaf, hosts: 1, bw: 20M, fabric_bw: 500k, "
        "delay: 2us}").replace("h1, h2]", "h1, h2]\n    algorithms: [ring]").split("faults:")[0]
        + "assertions:\n  - exact: all\n"))
    assert (sc.topology.bw, sc.topology.fabric_bw, sc.topology.delay) == (20.0, 0.5, "2us")
    assert load_scenario(_write(tmp_path, GOOD.replace("hosts: 3}", "hosts: 3, bw: 3}"))
                         ).topology.bw == 3.0


def test_json_works_too(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
        {"name": "j", "topology": {"kind": "spineleaf", "spines": 1, "hosts": 2},
         "jobs": [{"name": "a", "algorithms": ["ring"]}],
         "assertions": [{"exact": "a"}]}
        """, "s.json")
    sc = load_scenario(path)
    assert sc.topology.kind == "spineleaf" and sc.jobs[0].algorithms == ("ring",)


@pytest.mark.parametrize("change, message", [
    (("jobs:", "jobz: 1\njobs:"), r"s.yaml:3: jobz: 1: unknown field \(known: assertions, "),
    (("hosts: [h1, h2]", "hosts: [h1, h9]"),
     r"s.yaml:5: jobs\[0\].hosts\[1\]: 'h9': no such host \(hosts: h1, h2, h3\)"),
    (("port: 1,", "port: 9,"),
     r"s.yaml:8: faults\[0\].loss.port: 9: a port of switch s1 \(ports: 1, 2, 3\)"),
    (("rate: 0.05", "rate: 5"),
     r"s.yaml:8: faults\[0\].loss.rate: 5: a fraction of packets, 0 < rate <= 1"),
    (("restart: {switch: s1}", "restart: {switch: s7}"),
     r"s.yaml:10: faults\[1\].restart.switch: 's7': a switch \(s1\)"),
    (("at: 5", "at: -1"), r"s.yaml:9: faults\[1\].at: -1: seconds after the scenario's start"),
    (("numerator: j1.ring", "numerator: j2.ring"),
     r"s.yaml:13: assertions\[1\].time_ratio.numerator: 'j2.ring': JOB.ALGORITHM of a run"),
    (("min: 1, max: 3", "min: 4, max: 3"),
     r"s.yaml:13: assertions\[1\].time_ratio.min: 4.0: above max \(3\)"),
    (("reason: malformed", "reason: gremlins"),
     r"s.yaml:14: assertions\[2\].no_drops.reason: 'gremlins': a drop reason: unknown_job, "),
    (("kind: rack", "kind: torus"),
     r"s.yaml:2: topology.kind: 'torus': one of rack, spineleaf"),
    (("  - exact: all\n", "  - exactly: all\n"),
     r"s.yaml:12: assertions\[0\].exactly: 'all': unknown assertion"),
    (("    loss: {switch: s1, port: 1, rate: 0.05}\n", ""),
     r"s.yaml:7: faults\[0\]: \{'at': 2\}: needs exactly one of loss, clear, restart"),
    (("  - name: j1\n", "  - name: 1j\n"), r"s.yaml:4: jobs\[0\].name: '1j': a name of letters"),
    (("name: t\n", "name: t\ntimeout: [1]\n"), r"s.yaml:2: timeout: \[1\]: seconds, above 0"),
    (("name: t\n", "name: t\ntdf: 0.5\n"),
     r"s.yaml:2: tdf: 0.5: a time-dilation factor, at least 1"),
    (("hosts: 3}", "hosts: 3, bw: 10X}"),
     r"s.yaml:2: topology.bw: '10X': a rate such as 10M or 1G \(a number is Mbit/s\)"),
    (("hosts: 3}", "hosts: 3, delay: 2}"),
     r"s.yaml:2: topology.delay: 2: a delay with its unit, such as 2us or 1ms"),
])
def test_errors_name_file_line_field_and_value(tmp_path: Path, change: tuple[str, str],
                                                message: str) -> None:
    old, new = change
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_topology_file_fields(tmp_path: Path) -> None:
    """A topology file excludes the built-in fields; a shipped or own file is loaded with its
    parameters and its node names checked."""
    text = GOOD.replace("topology: {kind: rack, hosts: 3}", "topology: {file: x.yaml, hosts: 3}")
    with pytest.raises(ScenarioError, match=r"s.yaml:2: topology.hosts: 3: with a topology "
                       r"file, set this in the file"):
        load_scenario(_write(tmp_path, text))
    # a shipped topology by name, with parameters; node names checked against it
    text = GOOD.replace("topology: {kind: rack, hosts: 3}",
                        "topology: {file: rack, params: {hosts: 3, bw: 10}}")
    sc = load_scenario(_write(tmp_path, text))
    assert sc.topology.file == "rack" and sc.topology.params == {"hosts": 3, "bw": 10}
    assert sc.switches == ("s1",)
    with pytest.raises(ScenarioError, match=r"s.yaml:5: jobs\[0\].hosts\[1\]: 'h2': no such "
                       r"host \(hosts: h1\)"):
        load_scenario(_write(tmp_path, text.replace("hosts: 3,", "hosts: 1,")))
    with pytest.raises(ScenarioError, match=r"s.yaml:2: topology.file: 'nope.yaml': cannot "
                       r"be built: .*nope.yaml"):
        load_scenario(_write(tmp_path, text.replace("file: rack", "file: nope.yaml")))
    own = tmp_path / "mine.yaml"
    own.write_text((Path(__file__).resolve().parent.parent / "topo" / "files" /
                    "rack.yaml").read_text())
    sc = load_scenario(_write(tmp_path, text.replace("file: rack", "file: mine.yaml")))
    assert sc.topology.file == str(own)


def test_missing_and_unparsable(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"s.yaml:1: jobs: \(missing\): required"):
        load_scenario(_write(tmp_path, "topology: {kind: rack}\nassertions: [{exact: all}]\n"))
    with pytest.raises(ScenarioError,
                       match=r"s.yaml:3:2: not valid YAML/JSON: expected ',' or ']', but got ':'"):
        load_scenario(_write(tmp_path, "name: x\njobs: [a\nb: ]: c\n"))
    with pytest.raises(ScenarioError, match=r"nope.yaml: no such file"):
        load_scenario(tmp_path / "nope.yaml")
    with pytest.raises(ScenarioError, match=r"s.yaml:1: \(top level\): \[1, 2\]: expected a "
                       "mapping"):
        load_scenario(_write(tmp_path, "[1, 2]\n"))


def test_check_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *map(str, sorted(EXAMPLES.glob("*.yaml")))]) == 0
    assert capsys.readouterr().out.count(": ok (") == 4
    bad = _write(tmp_path, GOOD.replace("port: 1,", "port: 9,"))
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and f"{bad}:8: faults[0].loss.port: 9:" in err
    assert len(err.splitlines()) == 1


def _run(algo: str, seconds: float, exact: bool = True) -> AllreduceRun:
    ranks = tuple(RankOutcome(r, f"h{r + 1}", seconds, 100, exact, 0,
                              None if exact else "result differs from the exact sum")
                  for r in range(2))
    return AllreduceRun(algo, 16, ranks)


def test_assertions_evaluate() -> None:
    sc = load_scenario(EXAMPLES / "broken.yaml")
    exact, ratio, no_fault = sc.assertions
    runs = {"j1.innetwork": _run("innetwork", 0.5), "j1.ring": _run("ring", 1.0)}
    assert evaluate(exact, runs, {}, {}).ok
    case = evaluate(ratio, runs, {}, {})
    assert case.failure == ("expected >= 50, got 2: j1.ring took 1.000 s, j1.innetwork "
                            "0.500 s: ratio 2.000")
    drops = {("sns1", "fault"): 7, ("sns1", "malformed"): 1}
    case = evaluate(no_fault, runs, drops, {}, prefix="sn")
    assert case.failure == "expected none, got 7: 7 fault drops (sns1 7)"
    assert evaluate(no_fault, runs, {("sns1", "malformed"): 1}, {}, prefix="sn").ok
    bad = dict(runs, **{"j1.ring": _run("ring", 1.0, exact=False)})
    failure = evaluate(exact, bad, {}, {}).failure
    assert failure is not None and "j1.ring: rank 0 (h1): result differs" in failure
    assert evaluate(ratio, bad, {}, {}).failure == "cannot measure: j1.ring was not exact"


def test_junit_xml_is_readable() -> None:
    sc = load_scenario(EXAMPLES / "broken.yaml")
    report = ScenarioReport(sc, [
        Case("setup", "start the network and program the fabric", 3.0, output="rundir x"),
        Case("jobs", "j1 ring all-reduce", 1.5, error="rank 1 (h2): no result within 5 s"),
        Case("assertions", "assertions[1]: time", failure="expected >= 50, got 2: ..."),
    ], seconds=4.5, rundir="/tmp/x")
    root = ET.fromstring(junit_xml([report]))
    assert root.tag == "testsuites" and root.get("failures") == "1" and root.get("errors") == "1"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "broken" and suite.get("tests") == "3"
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == ["scenario.broken.setup",
                                                   "scenario.broken.jobs",
                                                   "scenario.broken.assertions"]
    assert cases[0].findtext("system-out") == "rundir x" and cases[0].find("failure") is None
    assert _attr(cases[1].find("error"), "message") == "rank 1 (h2): no result within 5 s"
    assert _attr(cases[2].find("failure"), "message") == "expected >= 50, got 2: ..."


def test_a_scenario_whose_programming_fails_reports_it_and_stops_the_network(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner starts through the experiment lifecycle: a pipeline push that fails is
    the setup's error, the assertions are not evaluated, and the network is stopped."""
    from controller.errors import ControllerError
    from experiment.lifecycle import ExperimentNetwork
    from scenarios.runner import RunOptions, run_scenario
    from tests.test_experiment_lifecycle import FakeController, FakeNetwork

    network = FakeNetwork(tmp_path / "run")
    controller = FakeController(fail_push=ControllerError("s1: pipeline refused"))
    starts: list[dict[str, Any]] = []

    def start(*args: Any, **kw: Any) -> FakeNetwork:
        starts.append(kw)
        return network

    def on_fakes(*args: Any, **kw: Any) -> ExperimentNetwork:
        return ExperimentNetwork(*args, **kw, start_network=start,
                                 connect=lambda net: controller)

    monkeypatch.setattr("scenarios.runner.ExperimentNetwork", on_fakes)
    scenario = load_scenario(_write(tmp_path, GOOD))
    report = run_scenario(scenario, RunOptions(runs_root=tmp_path / "runs", name_prefix="scf"))
    setup = report.cases[0]
    assert setup.error == "controller: s1: pipeline refused"
    assert starts and starts[0]["progress"] is False
    assert controller.calls == ["push_pipeline"] and controller.closed == 1
    assert network.stops == 1
    assert [c.error for c in report.cases[1:]] == ["not evaluated: the scenario did not run"] * 3
    assert not report.ok


def _attr(element: ET.Element | None, name: str) -> str:
    """An attribute the report must have."""
    assert element is not None
    value = element.get(name)
    assert value is not None, name
    return value
