"""Parsing: preprocessed text -> lark parse tree (the front end's syntax tree).

The LALR parser is built once per process, lazily; tokens come from
:mod:`softswitch.frontend.lexer`. Syntax errors become :class:`P4Error` at the original
source location with a short "unexpected X, expected Y" message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken
from lark.lexer import Lexer, PatternStr

from softswitch.errors import P4Error
from softswitch.frontend.lexer import RawTok, classify_tokens, tokenize
from softswitch.frontend.preprocess import Preprocessed
from softswitch.program_cache import parser_cache_file

log = logging.getLogger(__name__)

_GRAMMAR = Path(__file__).with_name("p4.lark")


class _TokenListLexer(Lexer):
    """A lark 'lexer' that hands over a token list produced by our own tokeniser."""

    def __init__(self, lexer_conf: Any) -> None:
        pass

    def lex(self, data: Any) -> Iterator[Token]:
        yield from data


@functools.lru_cache(maxsize=1)
def _parser() -> tuple[Lark, dict[str, str]]:
    """The LALR parser and the map literal text -> terminal name (built once)."""
    lark = Lark(
        _GRAMMAR.read_text(),
        parser="lalr",
        lexer=_TokenListLexer,
        propagate_positions=True,
        maybe_placeholders=False,
        cache=parser_cache_file(),
    )
    terminals = {
        t.pattern.value: t.name for t in lark.terminals if isinstance(t.pattern, PatternStr)
    }
    return lark, terminals


_NICE = {
    "IDENTIFIER": "identifier",
    "TYPE_IDENTIFIER": "type name",
    "INTEGER": "integer",
    "STRING_LITERAL": "string",
    "R_ANGLE_SHIFT": "'>'",
    "ANNOTATION_BODY": "annotation body",
    "COMPOUND_ASSIGN": "compound assignment",
    "$END": "end of file",
}


def _describe_expected(names: Sequence[str], terminals: dict[str, str]) -> str:
    back = {v: k for k, v in terminals.items()}
    shown = sorted({_NICE.get(n, f"'{back[n]}'" if n in back else n) for n in names})
    # the closing punctuation is usually what is missing: name it first
    if "';'" in shown:
        return "';'"
    first = [s for s in ("')'", "'}'", "']'") if s in shown]
    shown = first + [s for s in shown if s not in first]
    if len(shown) > 4:
        shown = shown[:4] + ["..."]
    return ", ".join(shown)


def _lark_token(ttype: str, t: RawTok) -> Token:
    end = t.col + len(t.text)
    return Token(ttype, t.text, t.pos, t.line, t.col, t.line, end, t.pos + len(t.text))


def parse(pre: Preprocessed) -> Tree:
    """Parse preprocessed text into a lark tree (positions are preprocessed lines)."""
    lark, terminals = _parser()
    toks = [_lark_token(ttype, t) for ttype, t in classify_tokens(pre, tokenize(pre), terminals)]
    try:
        return lark.parse(toks)
    except UnexpectedToken as exc:
        tok = exc.token
        if tok.type == "$END":
            last = toks[-1] if toks else None
            loc = pre.loc(last.line, last.column + len(last.value)) if last else pre.loc(1, 1)
            what = "end of file"
        else:
            loc = pre.loc(tok.line, tok.column)
            what = f"'{tok.value}'"
        expected = _describe_expected(sorted(exc.expected), terminals)
        raise P4Error(f"syntax error: unexpected {what}, expected {expected}", loc) from None
    except UnexpectedInput as exc:
        raise P4Error(f"syntax error: {exc}", pre.loc(exc.line, exc.column)) from None
