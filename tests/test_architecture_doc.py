"""docs/architecture.md's map of the packages matches the imports: the list under the
picture (what each package imports above the bottom line) is read from the document and
compared with the import graph of the code (grimp, import-linter's own graph builder)."""

from __future__ import annotations

import re
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]
BOTTOM = {"protocol", "algorithms", "p4schema", "vtime", "stackdump"}
MAPPED = ["train", "experiment", "sim", "liveview", "topo", "controller", "workloads",
          "softswitch", "fabricspec"]


def _documented() -> dict[str, set[str]]:
    """``{package: the packages above the bottom line it imports}`` from the document."""
    text = (REPO / "docs" / "architecture.md").read_text()
    found: dict[str, set[str]] = {}
    for names, targets in re.findall(r"^- (`\w+`(?:, `\w+`)*) -> ([^\n(]*)", text, re.M):
        imported = set() if targets.startswith("nothing") else {
            t.strip() for t in targets.split(",")}
        for name in re.findall(r"`(\w+)`", names):
            found[name] = imported
    return found


def _imported() -> dict[str, set[str]]:
    """The same, from the code: every module of a package and what it imports directly."""
    graph = grimp.build_graph(*MAPPED, *sorted(BOTTOM))
    found: dict[str, set[str]] = {}
    for package in MAPPED:
        tops: set[str] = set()
        for module in graph.find_children(package) | graph.find_descendants(package) | {package}:
            tops |= {m.split(".")[0] for m in graph.find_modules_directly_imported_by(module)}
        found[package] = tops & set(MAPPED) - {package}
    return found


def test_the_package_map_lists_every_import_above_the_bottom_line() -> None:
    assert _documented() == _imported()
