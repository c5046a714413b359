"""Scenario files end to end (needs root): the shipped examples pass, the deliberately broken
one fails with a readable JUnit report. Networks use the name prefix ``sn``. (Checking,
assertions and the JUnit XML without a network: tests/test_scenarios.py.)"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

import stackdump
from tests.test_scenarios import EXAMPLES, PASSING, _attr


def _cli(
    tmp_path: Path, repo_root: Path, *files: str
) -> tuple[subprocess.CompletedProcess[str], ET.Element]:
    junit = tmp_path / "junit.xml"
    proc = stackdump.run(
        [sys.executable, "-m", "scenarios", "run", *files, "--junit", str(junit),
         "--rundir", str(tmp_path / "run"), "--name-prefix", "sn"],
        600, cwd=repo_root, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert junit.exists(), proc.stdout + proc.stderr
    return proc, ET.parse(junit).getroot()


def _output(case: ET.Element) -> str:
    """A test case's system-out, which the report must have."""
    text = case.findtext("system-out")
    assert text is not None
    return text


@pytest.fixture
def _no_leftovers() -> Iterator[None]:
    from topo.cleanup import remove_interfaces, switch_interfaces

    yield
    remove_interfaces(switch_interfaces(["sns1"]))


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("_no_leftovers")
def test_examples_pass(tmp_path: Path, repo_root: Path) -> None:
    """The three examples in one run: exit 0, a JUnit suite each, no failure or error."""
    files = [str(EXAMPLES / f"{name}.yaml") for name in PASSING]
    proc, root = _cli(tmp_path, repo_root, *files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [s.get("name") for s in root.findall("testsuite")] == list(PASSING)
    assert (root.get("failures"), root.get("errors")) == ("0", "0"), proc.stdout + proc.stderr
    by_suite = {s.get("name"): s for s in root.findall("testsuite")}
    loss = by_suite["rack-loss"]
    fault_case = [c for c in loss.findall("testcase")
                  if _attr(c, "name").startswith("t=1s loss")]
    assert fault_case and "sns1 port 1 drops 0.05 (in)" in _output(fault_case[0])
    drops = [c for c in loss.findall("testcase") if "fault drops" in _attr(c, "name")]
    assert drops and _output(drops[0]).split()[0] != "0"
    restart = [c for c in by_suite["rack-restart"].findall("testcase")
               if c.get("name") == "t=5s restart s1"]
    assert restart and "sns1: recovered" in _output(restart[0])
    assert "PASS" in proc.stdout and "FAIL" not in proc.stdout


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.usefixtures("_no_leftovers")
def test_broken_example_fails_with_a_readable_report(tmp_path: Path, repo_root: Path) -> None:
    proc, root = _cli(tmp_path, repo_root, str(EXAMPLES / "broken.yaml"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "broken"
    assert (suite.get("failures"), suite.get("errors")) == ("2", "0"), proc.stdout + proc.stderr
    failures = {c.get("name"): c.find("failure") for c in suite.findall("testcase")
                if c.find("failure") is not None}
    ratio = failures["assertions[1]: time j1.ring / j1.innetwork >= 50"]
    assert _attr(ratio, "message").startswith("expected >= 50, got ")
    assert "j1.ring took " in _attr(ratio, "message")
    assert _attr(ratio, "type") == "AssertionError"
    drops = failures["assertions[2]: no fault drops"]
    assert _attr(drops, "message").startswith("expected none, got ")
    assert "fault drops (sns1 " in _attr(drops, "message")
    passed = [c.get("name") for c in suite.findall("testcase") if c.find("failure") is None]
    assert "assertions[0]: exact results of j1" in passed
    assert "FAIL  assertions: assertions[1]" in proc.stdout
