"""p4c's BMv2 outputs of a program for the tests, compiled once per program and session,
and across sessions through the testbed's p4c cache (:mod:`topo.p4c_cache`: keyed by p4c's
version, the flags and the *preprocessed* program, so a hit is exactly what p4c would write
again). Several tests ask p4c about the same program (does it compile, without warnings,
with which P4Info, for the differential runs); p4c takes 10-20 s for netreduce.p4, so they
share one compile.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from topo import p4c_cache

FLAGS = p4c_cache.BMV2_FLAGS
STDERR = "p4c.stderr"  # kept with the outputs: the warnings check reads it from a hit too


class P4cFailed(RuntimeError):
    """p4c refused the program (the message is its error output)."""


@dataclass(frozen=True)
class P4cOutputs:
    p4info: str  # P4Info, protobuf text format
    json: bytes  # the BMv2 JSON
    stderr: str  # what p4c printed (warnings)


@functools.lru_cache(maxsize=64)
def p4c_outputs(program: Path) -> P4cOutputs:
    """``p4c`` with the testbed's BMv2 flags of ``program``; P4cFailed when p4c refuses it."""
    outputs = ("p4info.txtpb", f"{program.stem}.json", STDERR)
    with tempfile.TemporaryDirectory(prefix="tests-p4c-") as tmp:
        out = Path(tmp)

        def run_p4c() -> None:
            proc = subprocess.run(["p4c", *FLAGS, "-o", str(out), "--p4runtime-files",
                                   str(out / "p4info.txtpb"), str(program)],
                                  capture_output=True, text=True, timeout=600, check=False)
            if proc.returncode != 0:
                raise P4cFailed(f"p4c {program}: {proc.stderr.strip() or proc.stdout.strip()}")
            (out / STDERR).write_text(proc.stderr)

        p4c_cache.cached(list(FLAGS), program, out, outputs, run_p4c)
        return P4cOutputs((out / "p4info.txtpb").read_text(),
                          (out / f"{program.stem}.json").read_bytes(), (out / STDERR).read_text())
