"""Run a directory of p4c-style test programs (``*.p4`` with optional ``*.stf``) and tabulate.

p4c checks BMv2 on ``testdata/p4_16_samples``: every v1model program must compile and, where
a ``PROG.stf`` sits beside ``PROG.p4``, the STF test must pass. Pointed at such a directory
(a p4c checkout, or any folder laid out the same way), this module runs each program through
``python -m softswitch compile`` / ``stf`` in a child process with a time limit, so that one
hanging or crashing program cannot stop the run, and prints one row per program plus totals::

    python -m softswitch.conformance ~/p4c/testdata/p4_16_samples
    python -m softswitch.conformance --errors ~/p4c/testdata/p4_16_errors

With ``--errors`` every program is expected to be rejected, cleanly (no traceback).
``--in-process`` runs the programs in this process instead (minutes instead of most of an
hour for p4c's whole test data on a slow machine).

Outcomes of one program:

``pass``         compiled and its STF test passed (or it has no STF file)
``stf-fail``     compiled, but the STF test failed (an expectation was not met)
``stf-error``    compiled, but the STF file could not be run (bad or unsupported directive)
``unsupported``  rejected with "... is not supported by the built-in target"
``rejected``     rejected with another compile error (a front-end bug unless p4c rejects it too)
``crash``        a Python traceback: always a bug
``timeout``      did not finish within the time limit
"""

from __future__ import annotations

import argparse
import fnmatch
import logging
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

OUTCOMES = ("pass", "stf-fail", "stf-error", "unsupported", "rejected", "crash", "timeout")

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_V1MODEL_RE = re.compile(r"^\s*#\s*include\s+[<\"]v1model\.p4[>\"]", re.MULTILINE)
_UNSUPPORTED = "is not supported by the built-in target"


@dataclass(frozen=True)
class Result:
    """The outcome of one program; ``detail`` is the first line that explains it."""

    program: Path
    stf: Path | None
    outcome: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "pass"


def find_programs(directory: Path, pattern: str = "*", v1model_only: bool = True) -> list[Path]:
    """The test programs in ``directory``: ``*.p4`` files that no other file there includes
    (fragments such as ``arith-skeleton.p4`` are left out), optionally only v1model ones."""
    files = sorted(p for p in directory.glob("*.p4") if p.is_file())
    texts = {p: p.read_text(encoding="utf-8", errors="replace") for p in files}
    included = {Path(m).name for text in texts.values() for m in _INCLUDE_RE.findall(text)}
    programs = []
    for p in files:
        if p.name in included or not fnmatch.fnmatch(p.name, pattern):
            continue
        if v1model_only and not _V1MODEL_RE.search(texts[p]):
            continue
        programs.append(p)
    return programs


def _first_error_line(text: str) -> str:
    """The most telling line of a child's stderr: the error, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln or ln.startswith("FAIL:"):
            return ln
    return lines[-1] if lines else ""


def classify(returncode: int, stdout: str, stderr: str, ran_stf: bool) -> tuple[str, str]:
    """Outcome and detail of one child run of ``python -m softswitch``."""
    if "Traceback (most recent call last)" in stderr:
        return "crash", stderr.strip().splitlines()[-1]
    if returncode == 0:
        return "pass", stdout.strip().splitlines()[-1] if stdout.strip() else ""
    detail = _first_error_line(stderr)
    if _UNSUPPORTED in detail:
        return "unsupported", detail
    if ran_stf and detail.startswith("FAIL:"):
        return "stf-fail", detail
    if ran_stf and re.search(r"\.stf:\d+: error:", detail):
        return "stf-error", detail
    return "rejected", detail


def run_program(
    program: Path,
    timeout: float = 30.0,
    include_dirs: Sequence[Path] = (),
    python: str = sys.executable,
    engine: str = "python",
) -> Result:
    """Compile ``program`` and run its ``.stf`` file when there is one (in a child process)."""
    stf = program.with_suffix(".stf")
    has_stf = stf.is_file()
    cmd = [python, "-m", "softswitch"]
    if has_stf:
        cmd += ["stf", str(program), str(stf), "--engine", engine]
    else:
        cmd += ["compile", str(program)]
    for d in include_dirs:
        cmd += ["-I", str(d)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Result(
            program, stf if has_stf else None, "timeout", f"no result after {timeout:g} s"
        )
    outcome, detail = classify(proc.returncode, proc.stdout, proc.stderr, has_stf)
    detail = detail.replace(f"{program}:", "line ", 1)
    return Result(program, stf if has_stf else None, outcome, detail)


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Timeout


def _run_in_process(
    program: Path, stf: Path | None, dirs: list[str], engine: str = "python"
) -> tuple[str, str]:
    from softswitch.errors import P4Error
    from softswitch.frontend import compile_file
    from softswitch.pipeline import Pipeline
    from softswitch.stf import StfError, StfRunner, parse_stf

    try:
        if stf is not None:
            lines = parse_stf(stf.read_text(encoding="utf-8"), str(stf))
            pipeline = Pipeline.from_file(str(program), dirs, engine=engine)
            result = StfRunner(pipeline).run(lines)
            if not result.passed:
                return "stf-fail", f"FAIL: {result.first_mismatch}"
        else:
            compile_file(program, dirs)
        return "pass", ""
    except (P4Error, StfError) as err:
        return classify(1, "", str(err).splitlines()[0] if str(err) else "", stf is not None)
    except _Timeout:
        raise
    except Exception as err:  # noqa: BLE001 (any escape is a crash of the target)
        return "crash", f"{type(err).__name__}: {err}".splitlines()[0]


def run_program_in_process(
    program: Path,
    timeout: float = 30.0,
    include_dirs: Sequence[Path] = (),
    engine: str = "python",
) -> Result:
    """:func:`run_program` without a child process (much faster: no interpreter start-up
    per program); the same outcomes, with ``crash`` for any exception that escapes and the
    time limit enforced by ``SIGVTALRM``. A program that exhausts memory or the interpreter
    can still stop the whole run, which :func:`run_program` prevents. The time limit counts
    CPU seconds of this process."""
    stf = program.with_suffix(".stf")
    has_stf = stf.is_file()
    dirs = [str(d) for d in include_dirs]
    # CPU time, not wall-clock time: a loaded machine must not turn slow programs into timeouts
    previous = signal.signal(signal.SIGVTALRM, _alarm)
    try:  # the timer fires at most once; wherever it lands, it is caught here
        signal.setitimer(signal.ITIMER_VIRTUAL, timeout)
        try:
            outcome, detail = _run_in_process(program, stf if has_stf else None, dirs, engine)
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    except _Timeout:
        outcome, detail = "timeout", f"no result after {timeout:g} s of CPU time"
    finally:
        signal.signal(signal.SIGVTALRM, previous)
    detail = detail.replace(f"{program}:", "line ", 1)
    return Result(program, stf if has_stf else None, outcome, detail)


def run_directory(
    directory: Path,
    pattern: str = "*",
    timeout: float = 30.0,
    v1model_only: bool = True,
    include_dirs: Sequence[Path] = (),
    in_process: bool = False,
    engine: str = "python",
) -> list[Result]:
    """Run every test program of ``directory``, one after the other (``engine``: the
    packet engine the STF tests run on, "python" or "c")."""
    results = []
    for program in find_programs(directory, pattern, v1model_only):
        log.info("running %s", program.name)
        if in_process:
            results.append(run_program_in_process(program, timeout, include_dirs, engine))
        else:
            results.append(run_program(program, timeout, include_dirs, engine=engine))
    return results


def expected_rejections(results: Sequence[Result]) -> list[Result]:
    """Reinterpret results for programs that must be rejected (p4c's ``p4_16_errors``):
    a clean rejection passes; acceptance or a crash fails."""
    out = []
    for r in results:
        if r.outcome in ("rejected", "unsupported"):
            out.append(Result(r.program, r.stf, "pass", r.detail))
        elif r.outcome == "pass":
            out.append(Result(r.program, r.stf, "rejected", "accepted a program that p4c rejects"))
        else:
            out.append(r)
    return out


def format_table(results: Sequence[Result], width: int = 110, expect_errors: bool = False) -> str:
    """One row per program, then the count of each outcome (``expect_errors``: the results
    of :func:`expected_rejections`, where ``pass`` means rejected cleanly)."""
    if not results:
        return "no test programs found"
    name_w = min(max(len(r.program.name) for r in results), 48)
    rows = []
    for r in results:
        stf = "stf" if r.stf is not None else "-"
        detail = r.detail if r.outcome != "pass" else ""
        row = f"{r.program.name:<{name_w}}  {stf:<3}  {r.outcome:<11}  {detail}"
        rows.append(row[:width].rstrip())
    counts = Counter(r.outcome for r in results)
    with_stf = sum(1 for r in results if r.stf is not None)
    compiled = sum(1 for r in results if r.outcome in ("pass", "stf-fail", "stf-error"))
    stf_pass = sum(1 for r in results if r.stf is not None and r.outcome == "pass")
    rows.append("")
    if expect_errors:
        rows.append(f"{len(results)} programs that p4c rejects: {counts['pass']} rejected cleanly")
    else:
        rows.append(
            f"{len(results)} programs: {compiled} compiled; "
            f"{with_stf} with STF tests, {stf_pass} passed"
        )
    rows.append("  " + ", ".join(f"{k} {counts[k]}" for k in OUTCOMES if counts[k]))
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m softswitch.conformance DIR``; exit status 1 when any program failed."""
    parser = argparse.ArgumentParser(
        prog="python -m softswitch.conformance",
        description="Compile every v1model test program of DIR and run the STF tests beside "
        "them (layout of p4c's testdata/p4_16_samples).",
    )
    parser.add_argument("directory", type=Path, metavar="DIR")
    parser.add_argument(
        "-k", dest="pattern", default="*", help="only programs whose file name matches this glob"
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per program (default 30)"
    )
    parser.add_argument(
        "--all-archs", action="store_true", help="also programs that do not include v1model.p4"
    )
    parser.add_argument(
        "--errors", action="store_true", help="every program must be rejected (p4_16_errors)"
    )
    parser.add_argument(
        "-I", dest="include_dirs", action="append", default=[], type=Path, metavar="DIR"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the programs in this process "
        "(much faster; a crash of the interpreter stops the run)",
    )
    parser.add_argument(
        "--engine",
        choices=("python", "c"),
        default="python",
        help="packet engine of the STF runs: the Python reference (default) or the C path "
        "(programs it cannot take run on Python, logged)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log each program as it starts"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    if not args.directory.is_dir():
        print(f"error: {args.directory} is not a directory", file=sys.stderr)
        return 1
    results = run_directory(
        args.directory,
        args.pattern,
        args.timeout,
        not (args.all_archs or args.errors),
        args.include_dirs,
        args.in_process,
        args.engine,
    )
    if args.errors:
        results = expected_rejections(results)
    print(format_table(results, expect_errors=args.errors))
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
