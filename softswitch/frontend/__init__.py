"""Front end of the built-in P4 target: P4_16 source -> checked :class:`softswitch.ir.Program`.

Stages: C preprocessing (:mod:`.preprocess`), tokenising with type-name detection
(:mod:`.lexer`), LALR parsing (:mod:`.parser`, grammar in ``p4.lark``), the typed syntax
tree (:mod:`.syntax`, built by :mod:`.syntax_build`), then name resolution, type checking and
constant folding by the checker's visitors (:mod:`.check`). Every problem is raised as
:class:`softswitch.errors.P4Error`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from softswitch import ir
from softswitch.bmv2_rules import check_bmv2_control_flow
from softswitch.errors import P4Error
from softswitch.frontend.check import Checker
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocess import P4INCLUDE, preprocess
from softswitch.frontend.syntax_build import build_syntax

log = logging.getLogger(__name__)

__all__ = ["compile_file", "compile_source", "P4INCLUDE"]


def compile_source(
    text: str, filename: str = "<string>", include_dirs: Sequence[str | Path] = ()
) -> ir.Program:
    """Compile P4_16 source text; ``filename`` is used in messages and for relative includes."""
    with _cyclic_gc_paused():
        pre = preprocess(text, filename, include_dirs)
        tree = parse(pre)
        try:
            program = Checker(pre, filename).program(build_syntax(tree, pre))
        except RecursionError:
            raise P4Error("program is too deeply nested", ir.Loc(filename, 1, 1)) from None
        check_bmv2_control_flow(program)  # what p4c's BMv2 back end refuses, refused here too
    return program


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """A compile allocates ~10^5 short-lived objects (tokens, parse and syntax trees); the
    cyclic collector ran over the growing heap again and again meanwhile: ~20 % of the
    compile time of netreduce.p4 (docs/benchmarks.md, bench_revisions). Its garbage is freed
    by reference counting or at the next collection after the compile."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def compile_file(path: str | Path, include_dirs: Sequence[str | Path] = ()) -> ir.Program:
    """Compile the P4_16 program in ``path``."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise P4Error(f"cannot read '{p}': {exc.strerror}") from None
    log.debug("compiling %s", p)
    return compile_source(text, str(path), include_dirs)
