"""C preprocessing of P4 source (``#include``, ``#define``, ``#if``) with pcpp.

The parser sees one flat text; error messages must still point into the file the user
wrote, so the output keeps a map from each output line back to the original FILE:LINE
(rebuilt from the ``#line`` markers pcpp writes, which are then removed).
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

# ply imports pcpp's generated lexer and parser tables when the first Preprocessor is made:
# imported at module load, so that a program compiled on a P4Runtime server thread (a
# pipeline push) imports nothing (threads importing at once can deadlock)
import pcpp.lextab  # noqa: F401
import pcpp.parsetab  # noqa: F401
from pcpp import Preprocessor

from softswitch.errors import P4Error
from softswitch.ir import Loc

log = logging.getLogger(__name__)

#: Directory holding the project's own core.p4 and v1model.p4.
P4INCLUDE = Path(__file__).resolve().parent.parent / "p4include"

_LINE_RE = re.compile(r'^\s*#\s*(?:line\s+)?(\d+)(?:\s+"((?:[^"\\]|\\.)*)")?.*$')


@dataclass(frozen=True)
class Preprocessed:
    """Preprocessed text plus, for each of its lines (0-based), the original file and line."""

    text: str
    origins: tuple[tuple[str, int], ...]
    #: Absolute paths of every file #included (also those that only define macros).
    included: tuple[str, ...] = ()

    def loc(self, line: int, col: int) -> Loc:
        """Original location of 1-based output ``line`` and column ``col``."""
        if 1 <= line <= len(self.origins):
            file, orig = self.origins[line - 1]
            return Loc(file, orig, col)
        if self.origins:
            file, orig = self.origins[-1]
            return Loc(file, orig + 1, col)
        return Loc("<string>", line, col)


class _P4Preprocessor(Preprocessor):
    """pcpp with errors turned into :class:`P4Error` instead of stderr output."""

    def __init__(self, main_file: str = "<string>") -> None:
        super().__init__()
        self.problems: list[P4Error] = []
        self.passthru_unfound_includes = False
        self.opened: list[str] = []
        self.main_file = main_file
        self._include_loc: Loc | None = None

    # pcpp is untyped: its tokens are ply LexTokens, typed as Any here
    def include(  # noqa: D102 (pcpp hook)
        self, tokens: list[Any], original_line: list[Any]
    ) -> Iterator[Any]:
        # remember where this #include is (file, line, column of the name) for "not found"
        col, seen_keyword = 1, False
        for tok in original_line:
            if seen_keyword and tok.type != "CPP_WS":
                break
            seen_keyword = seen_keyword or tok.value == "include"
            col += len(tok.value)
        line = original_line[0].lineno if original_line else 1
        source = self.source or self.main_file
        self._include_loc = Loc(_display_path(str(source), self.main_file), line, col)
        yield from super().include(tokens, original_line)

    def on_file_open(  # noqa: D102 (pcpp hook)
        self, is_system_include: bool, includepath: str
    ) -> TextIO:
        handle = super().on_file_open(is_system_include, includepath)
        self.opened.append(includepath)  # only reached when the open succeeded
        return handle

    def on_error(self, file: str, line: int, msg: str) -> None:  # noqa: D102 (pcpp hook)
        self.problems.append(P4Error(f"preprocessor: {msg}", Loc(str(file), int(line), 1)))
        self.return_code += 1

    def on_directive_unknown(
        self, directive: Any, toks: Any, ifpassthru: bool, precedingtoks: Any
    ) -> Any:  # noqa: D102 (pcpp hook)
        # pcpp only prints #error to stderr and goes on; a program that says it cannot be
        # built (nr_elems.p4's size check, say) must not compile.
        if directive.value == "error":
            text = "".join(tok.value for tok in toks).strip()
            self.problems.append(
                P4Error(f"#error {text}", Loc(str(directive.source), int(directive.lineno), 1))
            )
            self.return_code += 1
            return True
        return super().on_directive_unknown(directive, toks, ifpassthru, precedingtoks)

    def on_include_not_found(
        self, is_malformed: bool, is_system_include: bool, curdir: str, includepath: str
    ) -> None:  # noqa: D102 (pcpp hook)
        raise P4Error(f"cannot find include file '{includepath}'", self._include_loc)

    def on_comment(self, tok: object) -> bool:  # noqa: D102 (pcpp hook)
        return False  # drop comments


def preprocess(
    text: str, filename: str = "<string>", include_dirs: Sequence[str | Path] = ()
) -> Preprocessed:
    """Run the C preprocessor over ``text``; ``include_dirs`` are searched before ours."""
    pp = _P4Preprocessor(filename)
    pp.line_directive = "#line"
    parent = Path(filename).parent if filename and not filename.startswith("<") else None
    if parent is not None:
        pp.add_path(str(parent))
    for d in include_dirs:
        pp.add_path(str(d))
    pp.add_path(str(P4INCLUDE))
    try:
        pp.parse(text, source=filename)
        out = io.StringIO()
        pp.write(out)
    except P4Error:
        raise
    except Exception as exc:  # pcpp raises assorted exceptions on malformed directives
        raise P4Error(f"preprocessor failure: {exc}", Loc(filename, 1, 1)) from exc
    if pp.problems:
        raise pp.problems[0]
    result = _strip_line_markers(out.getvalue(), filename)
    return Preprocessed(result.text, result.origins, tuple(dict.fromkeys(pp.opened)))


def _display_path(reported: str, main: str) -> str:
    """Path for messages: the main file as the user named it; others in the same style."""
    if reported.startswith("<") or main.startswith("<"):
        return reported
    try:
        same = os.path.abspath(reported) == os.path.abspath(main)
    except (OSError, ValueError):
        return reported
    if same:
        return main
    return os.path.abspath(reported) if os.path.isabs(main) else reported


def _strip_line_markers(raw: str, filename: str) -> Preprocessed:
    """Remove ``#line`` markers, remembering where every remaining line came from."""
    lines: list[str] = []
    origins: list[tuple[str, int]] = []
    cur_file, cur_line = filename, 1
    for line in raw.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("#"):
            m = _LINE_RE.match(line)
            if m:
                cur_line = int(m.group(1))
                if m.group(2) is not None:
                    cur_file = _display_path(m.group(2), filename)
                continue
            # any other directive left over (e.g. #pragma) is dropped from the P4 text
            lines.append("")
            origins.append((cur_file, cur_line))
            cur_line += 1
            continue
        lines.append(line)
        origins.append((cur_file, cur_line))
        cur_line += 1
    return Preprocessed("\n".join(lines), tuple(origins))
