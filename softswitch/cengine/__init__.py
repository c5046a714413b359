"""The compiled data path of the built-in target: the program's blocks generated as C,
compiled with the system compiler, cached by source hash and run one C call per frame.

The Python engine (:mod:`softswitch.engine`) stays the reference and the fallback: a
program (or a switch mode) that the C engine does not take runs on Python, with one log
line that names the construct and where it is in the P4 source.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from softswitch.cengine.errors import CBuildError, CUnsupported
from softswitch.engine.compiled import CompiledProgram
from softswitch.engine.pre import PacketReplicationEngine

log = logging.getLogger(__name__)

ENGINES = ("python", "c")


def default_engine() -> str:
    """The engine of a pipeline that names none: ``$SOFTSWITCH_ENGINE`` or "python" (so
    that a whole test run or a topology can be switched to the C engine at once)."""
    return os.environ.get("SOFTSWITCH_ENGINE") or "python"


def check_engine(engine: str) -> None:
    """ValueError naming the choices unless ``engine`` is one of :data:`ENGINES`."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: choose from {', '.join(ENGINES)}")


def c_switch(
    compiled: CompiledProgram,
    pre: PacketReplicationEngine,
    clock_ns: Callable[[], int],
    *,
    mode: str = "sync",
    trace: bool = False,
) -> Any | None:
    """A C-engine switch for ``compiled``, or None (logged once, with the reason) when the
    program or the switch mode needs the Python engine."""
    source = compiled.program.source_file
    if trace:
        log.warning("%s: C engine: packet traces need the Python engine; using Python", source)
        return None
    if mode != "sync":
        log.warning(
            "%s: C engine: egress order %r needs the Python engine; using Python", source, mode
        )
        return None
    from softswitch.cengine.switch import CV1Switch

    try:
        switch = CV1Switch(compiled, pre, clock_ns)
    except CUnsupported as exc:
        where = f" at {exc.loc}" if exc.loc is not None else ""
        log.warning(
            "%s: C engine does not support %s%s; using the Python engine",
            source,
            exc.construct,
            where,
        )
        return None
    except CBuildError as exc:
        log.error("%s: %s; using the Python engine", source, exc)
        return None
    log.info("%s: running on the C engine", source)
    return switch


def prebuild(program: Any) -> Path | None:
    """Compile the C data path of ``program`` (an ``ir.Program``) into the cache that the
    switches load from, without loading it, and return where it is; None (logged with the
    reason) when the program needs the Python engine. A network calls this once before
    its switches start, so they share one compile instead of each running the compiler
    at the same time. The source is the one :class:`~softswitch.pipeline.Pipeline` builds
    (it depends on the program only, not on the switch's flags)."""
    from softswitch.cengine import build as cbuild
    from softswitch.cengine.v1c import CDEF, generate
    from softswitch.engine.codegen import compile_program
    from softswitch.v1model import V1MODEL

    try:
        compiled = compile_program(program, V1MODEL, log_enabled=False, trace=False)
        source, _gen = generate(program, compiled)
        return cbuild.prebuild(source, CDEF)
    except CUnsupported as exc:
        where = f" at {exc.loc}" if exc.loc is not None else ""
        log.warning("%s: C engine does not support %s%s; the switches will run it on Python",
                    program.source_file, exc.construct, where)
    except CBuildError as exc:
        log.error("%s: %s; the switches will run it on Python", program.source_file, exc)
    return None


__all__ = ["ENGINES", "CBuildError", "CUnsupported", "c_switch", "check_engine",
           "default_engine", "prebuild"]
