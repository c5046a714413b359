"""JUnit XML of scenario reports, the format CI systems (GitHub Actions reporters, GitLab's
``artifacts:reports:junit``, Jenkins) show as test results.

One ``testsuite`` per scenario; one ``testcase`` per step: ``setup`` (network up and
programmed), each job's all-reduce, each fault, each assertion. A failed assertion is a
``failure`` whose message says what was expected and what was measured; something that
could not be done (a fault, a rank that crashed) is an ``error``. Every case's details are in
its ``system-out``.
"""

from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from scenarios.runner import ScenarioReport


def _suite(report: ScenarioReport) -> ET.Element:
    sc = report.scenario
    failures = sum(1 for c in report.cases if c.failure is not None)
    errors = sum(1 for c in report.cases if c.error is not None)
    suite = ET.Element("testsuite", {
        "name": sc.name, "tests": str(len(report.cases)), "failures": str(failures),
        "errors": str(errors), "skipped": "0", "time": f"{report.seconds:.3f}",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(report.started)),
        "hostname": socket.gethostname(), "file": str(sc.path)})
    props = ET.SubElement(suite, "properties")
    for name, value in (("scenario", str(sc.path)), ("description", sc.description.strip()),
                        ("rundir", report.rundir or ""), ("target", sc.target),
                        ("topology", sc.topology.kind)):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for case in report.cases:
        el = ET.SubElement(suite, "testcase", {
            "classname": f"scenario.{sc.name}.{case.group}", "name": case.name,
            "time": f"{case.seconds:.3f}", "file": str(sc.path)})
        if case.failure is not None:
            f = ET.SubElement(el, "failure", {"message": case.failure, "type": "AssertionError"})
            f.text = f"{case.failure}\n({sc.path}: {case.name})"
        if case.error is not None:
            e = ET.SubElement(el, "error", {"message": case.error, "type": "ScenarioError"})
            e.text = f"{case.error}\n({sc.path}: {case.name})"
        if case.output:
            ET.SubElement(el, "system-out").text = case.output
    return suite


def junit_xml(reports: Sequence[ScenarioReport]) -> str:
    """The JUnit document of one or more scenario runs."""
    root = ET.Element("testsuites", {
        "name": "scenarios",
        "tests": str(sum(len(r.cases) for r in reports)),
        "failures": str(sum(1 for r in reports for c in r.cases if c.failure is not None)),
        "errors": str(sum(1 for r in reports for c in r.cases if c.error is not None)),
        "time": f"{sum(r.seconds for r in reports):.3f}"})
    for report in reports:
        root.append(_suite(report))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def write_junit(path: str | Path, reports: Sequence[ScenarioReport]) -> Path:
    """Writes :func:`junit_xml` to ``path`` (directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(reports), encoding="utf-8")
    return path
