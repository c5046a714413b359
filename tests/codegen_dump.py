"""Dump the Python source the engine generates for every program it compiles, to compare
two versions of the code generator (a refactor must leave the dumps byte-identical).

    python tests/codegen_dump.py OUTDIR [P4C_SAMPLES_DIR]

Programs: p4src/netreduce.p4, every ``*.p4`` under tests/p4/ and the v1model programs of
p4c's ``p4_16_samples`` (default: where tests/p4c_testdata.py finds them, skipped when
absent). Each program the front end accepts is compiled three times (plain, ``trace=True``,
``log_enabled=True``); OUTDIR gets one ``.py`` per compile and STATUS.txt with one line per
compile (the source's hash, or the engine's error). Compare two runs with ``diff -r``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from softswitch.conformance import find_programs
from softswitch.engine.codegen import compile_program
from softswitch.errors import P4Error
from softswitch.frontend import compile_file
from softswitch.v1model import V1MODEL

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script
from tests import p4c_testdata  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = p4c_testdata.p4_16_samples() or Path("p4_16_samples-not-found")
VARIANTS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("plain", {}), ("trace", {"trace": True}), ("log", {"log_enabled": True}))


def programs(samples: Path) -> list[Path]:
    """The programs to dump, in a fixed order."""
    found = [ROOT / "p4src" / "netreduce.p4", *sorted((ROOT / "tests" / "p4").rglob("*.p4"))]
    if samples.is_dir():
        found += find_programs(samples)
    return found


def dump(out: Path, samples: Path = SAMPLES) -> list[str]:
    """Write the dumps into ``out``; the status lines."""
    out.mkdir(parents=True, exist_ok=True)
    status = []
    for p in programs(samples):
        label = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
        try:
            prog = compile_file(str(p))
        except (P4Error, RecursionError) as exc:  # rejected by the front end
            status.append(f"{label}\tfrontend-reject\t{type(exc).__name__}")
            continue
        for variant, kw in VARIANTS:
            try:
                src = compile_program(prog, V1MODEL, **kw).source
            except P4Error as exc:
                status.append(f"{label}\t{variant}\tengine-error\t{exc}")
                continue
            (out / f"{label.replace('/', '_')}.{variant}.py").write_text(src)
            digest = hashlib.sha1(src.encode()).hexdigest()[:12]
            status.append(f"{label}\t{variant}\tok\t{digest}")
    (out / "STATUS.txt").write_text("\n".join(status) + "\n")
    return status


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    lines = dump(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) == 3 else SAMPLES)
    ok = sum("\tok\t" in s for s in lines)
    print(f"{ok} compiles dumped, {len(lines) - ok} other lines in STATUS.txt")
