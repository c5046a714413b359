"""Which P4 targets a CI run exercised, from pytest's JUnit XML report.

BMv2 tests (``tests/test_bmv2_*.py``) count as run only when at least one of them was
executed rather than skipped; the other tests run on the built-in target (softswitch). Prints
one line, e.g. ``ci: targets tested: softswitch (812 tests), bmv2 (31 tests; simple_switch_grpc
1.15.0, p4c 1.2.5.16)`` or ``...; bmv2 not tested: <skip reason>``.

    python .ci/targets.py REPORT.xml
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

BMV2_MODULE_PREFIX = "tests.test_bmv2_"


def version(program: str) -> str:
    """The first line of ``program --version`` without the program's name, or why not."""
    path = shutil.which(program)
    if path is None:
        return "not installed"
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"version unknown ({exc})"
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    first = lines[0].strip() if lines else "version unknown"
    return first.removeprefix(program).strip() or first


def tally(report: Path) -> tuple[Counter[str], Counter[str], list[str]]:
    """(executed per target, skipped per target, skip reasons of BMv2 tests)."""
    ran: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    reasons: list[str] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        target = (
            "bmv2" if case.get("classname", "").startswith(BMV2_MODULE_PREFIX) else "softswitch"
        )
        skip = case.find("skipped")
        if skip is None:
            ran[target] += 1
            continue
        skipped[target] += 1
        if target == "bmv2":
            reasons.append((skip.get("message") or "skipped").removeprefix("Skipped: "))
    return ran, skipped, reasons


def summary(report: Path) -> str:
    """The one-line report."""
    ran, skipped, reasons = tally(report)
    parts = []
    if ran["softswitch"]:
        parts.append(f"softswitch ({ran['softswitch']} tests)")
    if ran["bmv2"]:
        parts.append(f"bmv2 ({ran['bmv2']} tests, {skipped['bmv2']} skipped; simple_switch_grpc "
                     f"{version('simple_switch_grpc')}, p4c {version('p4c')})")
    text = "ci: targets tested: " + (", ".join(parts) or "none")
    if not ran["bmv2"]:
        why = Counter(reasons).most_common(1)[0][0] if reasons else "no BMv2 test collected"
        text += f"; bmv2 not tested: {why}"
    return text


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python .ci/targets.py REPORT.xml", file=sys.stderr)
        return 2
    report = Path(argv[0])
    try:
        print(summary(report))
    except (OSError, ET.ParseError) as exc:
        print(f"ci: targets tested: unknown (cannot read {report}: {exc})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
