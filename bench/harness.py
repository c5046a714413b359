"""Discovery, execution and reporting of benchmark modules.

A benchmark module is ``bench/bench_<name>.py`` with ``run() -> list[dict]`` (optionally
``run(seconds=...)``); each row has the keys of :data:`ROW_KEYS`. A module that cannot run yet
(a piece of the project or a system tool is missing) raises :class:`BenchSkipped` with the
reason, so the report lists it as skipped instead of failing the whole run.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import pkgutil
import platform
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

ROW_KEYS: tuple[str, ...] = ("name", "metric", "value", "unit", "notes")
MODULE_PREFIX = "bench_"


class BenchSkipped(Exception):
    """A benchmark that cannot run on this checkout or machine yet; the message says why."""


@dataclass
class BenchResult:
    """What one benchmark module produced: rows, or the reason it was skipped or failed."""

    module: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None


def discover(package_dir: Path | None = None) -> list[str]:
    """Names (``bench_engine``, ...) of the benchmark modules in ``bench/``, sorted."""
    where = package_dir or Path(__file__).resolve().parent
    return sorted(
        info.name
        for info in pkgutil.iter_modules([str(where)])
        if info.name.startswith(MODULE_PREFIX) and not info.ispkg
    )


def _normalise_rows(module: str, rows: object) -> list[dict[str, Any]]:
    """Checks a module's rows and fills missing optional keys, so the table is uniform."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"{module}.run() must return a list of dicts, got {type(rows).__name__}")
    out = []
    for row in rows:
        missing = [k for k in ("name", "metric", "value") if k not in row]
        if missing:
            raise TypeError(f"{module}.run() returned a row without {', '.join(missing)}: {row!r}")
        out.append({"unit": "", "notes": "", **row})
    return out


def call_run(run: Callable[..., object], seconds: float | None) -> object:
    """Calls ``run``, passing ``seconds`` only where the module's ``run`` accepts it."""
    if seconds is not None and "seconds" in inspect.signature(run).parameters:
        return run(seconds=seconds)
    return run()


def run_module(name: str, seconds: float | None = None, package: str = "bench") -> BenchResult:
    """Imports and runs one benchmark module; a skip or an error is recorded, never raised."""
    result = BenchResult(module=name)
    try:
        module: ModuleType = importlib.import_module(f"{package}.{name}")
        run = getattr(module, "run", None)
        if not callable(run):
            raise TypeError(f"{name} has no run() function")
        result.rows = _normalise_rows(name, call_run(run, seconds))
    except BenchSkipped as skip:
        result.skipped = str(skip) or "no reason given"
    except Exception as exc:  # a broken benchmark must not hide the others' results
        log.debug("benchmark %s failed:\n%s", name, traceback.format_exc())
        result.error = f"{type(exc).__name__}: {exc}"
    return result


def machine_info() -> dict[str, str]:
    """The facts a reader needs to compare numbers between machines."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count() or "?"),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def _cell(value: object) -> str:
    """A table cell: numbers with sensible precision, pipes escaped."""
    if isinstance(value, float):
        text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def load_store(path: Path) -> dict[str, dict[str, Any]]:
    """Results of earlier runs by module (``docs/benchmarks.json``), so that a run of a few
    modules (``--only``) updates their rows and keeps the others'."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def update_store(
    store: dict[str, dict[str, Any]], results: Sequence[BenchResult], command: str, date: str
) -> None:
    """Record ``results`` (each module replaces its earlier entry) with when and how they ran."""
    for r in results:
        store[r.module] = {
            "rows": r.rows,
            "skipped": r.skipped,
            "error": r.error,
            "date": date,
            "command": command,
        }


def stored_results(store: dict[str, dict[str, Any]]) -> list[BenchResult]:
    """The store's entries as results, in module order."""
    return [
        BenchResult(name, list(e.get("rows") or []), e.get("skipped"), e.get("error"))
        for name, e in sorted(store.items())
    ]


def render_markdown(
    results: Sequence[BenchResult],
    machine: dict[str, str],
    command: str,
    date: str,
    runs: dict[str, str] | None = None,
    findings: str | None = None,
) -> str:
    """The text of docs/benchmarks.md; ``runs`` (module -> "date, command") is listed when
    the table mixes modules measured by different runs; ``findings`` (hand-written
    Markdown, bench/findings.md) follows the table."""
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m bench`); do not edit by hand.",
        "",
        "## Machine",
        "",
        *[f"- {key}: {value}" for key, value in machine.items()],
        f"- date: {date}",
        f"- command: `{command}`",
        "",
        "## Results",
        "",
    ]
    rows = [(r.module, row) for r in results for row in r.rows]
    if rows:
        lines += [
            "| module | " + " | ".join(ROW_KEYS) + " |",
            "| --- | " + " | ".join("---:" if k == "value" else "---" for k in ROW_KEYS) + " |",
        ]
        for module, row in rows:
            cells = [module] + [_cell(row.get(k, "")) for k in ROW_KEYS]
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("No benchmark produced results.")
    if findings:
        lines += ["", findings.strip()]
    not_run = [r for r in results if r.skipped is not None or r.error is not None]
    if not_run:
        lines += ["", "## Not run", ""]
        for r in not_run:
            if r.skipped is not None:
                lines.append(f"- {r.module}: skipped: {_cell(r.skipped)}")
            else:
                lines.append(f"- {r.module}: error: {_cell(r.error)}")
    if runs and len(set(runs.values())) > 1:
        lines += ["", "## When each module ran", ""]
        lines += [f"- {module}: {_cell(when)}" for module, when in sorted(runs.items())]
    return "\n".join(lines) + "\n"
