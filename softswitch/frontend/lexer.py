"""Tokeniser for P4_16 that knows which identifiers name types.

P4's grammar is LALR(1) only if the lexer separates type names from other identifiers (p4c
does this with its symbol table). We tokenise the whole preprocessed text first, find the
declared type names (headers, structs, enums, typedefs, externs, parsers, controls,
packages; type parameters only inside their declaration) and then classify identifiers.
Annotation bodies are kept as one raw token, as their content is not P4 expression syntax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from softswitch.errors import P4Error
from softswitch.frontend.preprocess import Preprocessed

_PUNCT = sorted(
    [
        "|+|=", "|-|=", "<<=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
        "&&&", "|+|", "|-|", "{#}", "<<", "<=", ">=", "==", "!=", "&&", "||", "++", "..",
        "(", ")", "{", "}", "[", "]", "<", ">", ";", ":", ",", ".", "=", "+", "-", "*", "/",
        "%", "&", "|", "^", "~", "!", "?", "@",
    ],
    key=len,
    reverse=True,
)  # fmt: skip

#: Compound assignment operators (P4_16 1.2.5), one terminal for all of them.
_COMPOUND_ASSIGN = {"|+|=", "|-|=", "<<=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^="}

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*|/\*(?:.|\n)*?\*/)
  | (?P<int>(?:\d+[ws])?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[dD][0-9_]+|\d[0-9_]*))
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<punct>"""
    + "|".join(re.escape(p) for p in _PUNCT)
    + r""")
    """,
    re.VERBOSE,
)

#: Words that are keywords only where the grammar expects them (p4c's nonTypeName).
_TYPE_DECL_KEYWORDS = {"header", "header_union", "struct", "parser", "control", "package"}


@dataclass
class RawTok:
    """One token before identifier classification."""

    kind: str  # "id", "int", "str", "punct", "annbody"
    text: str
    line: int
    col: int
    pos: int
    end_line: int = 0
    end_col: int = 0


def tokenize(pre: Preprocessed) -> list[RawTok]:
    """Split preprocessed text into raw tokens (annotation bodies kept as one token)."""
    text = pre.text
    toks: list[RawTok] = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise P4Error(
                f"syntax error: unexpected character {text[pos]!r}",
                pre.loc(line, pos - line_start + 1),
            )
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "nl":
            line += 1
            line_start = m.end()
        elif kind == "comment":
            nls = value.count("\n")
            if nls:
                line += nls
                line_start = pos + value.rfind("\n") + 1
        elif kind != "ws":
            toks.append(RawTok(kind, value, line, pos - line_start + 1, pos))
            if kind == "punct" and value == "(" and _annotation_open(toks):
                # collect the balanced annotation body as one raw token
                body_start = m.end()
                depth, p = 1, body_start
                while p < n and depth:
                    c = text[p]
                    if c == '"':
                        sm = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(text, p)
                        p = sm.end() if sm else p + 1
                        continue
                    if c == "(":
                        depth += 1
                    elif c == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    p += 1
                if depth:
                    raise P4Error(
                        "syntax error: unterminated annotation", pre.loc(line, toks[-1].col)
                    )
                body = text[body_start:p]
                if body.strip():
                    toks.append(
                        RawTok("annbody", body, line, body_start - line_start + 1, body_start)
                    )
                line += body.count("\n")
                if "\n" in body:
                    line_start = body_start + body.rfind("\n") + 1
                toks.append(RawTok("punct", ")", line, p - line_start + 1, p))
                pos = p + 1
                continue
        pos = m.end()
    return toks


def _annotation_open(toks: list[RawTok]) -> bool:
    """True when the '(' just appended follows ``@ name`` (an annotation body starts)."""
    return (
        len(toks) >= 3
        and toks[-3].kind == "punct"
        and toks[-3].text == "@"
        and toks[-2].kind == "id"
    )


def _matching_close(toks: list[RawTok], i: int) -> int:
    """Index of the '>' closing the '<' at ``i`` (nested angle brackets counted), or -1."""
    depth = 0
    for j in range(i, min(len(toks), i + 200)):
        t = toks[j]
        if t.kind != "punct":
            continue
        if t.text == "<":
            depth += 1
        elif t.text == ">":
            depth -= 1
            if depth == 0:
                return j
        elif t.text in (";", "{", "}", "(", ")", "="):
            return -1
    return -1


def _decl_start(toks: list[RawTok], i: int) -> int:
    """Index of the first token of the declaration containing token ``i``."""
    j = i - 1
    depth = 0
    while j >= 0:
        t = toks[j]
        if t.kind == "punct":
            if t.text == ")":
                depth += 1
            elif t.text == "(":
                depth -= 1
            elif t.text in (";", "{", "}") and depth <= 0:
                return j + 1
        j -= 1
    return 0


def _decl_end(toks: list[RawTok], i: int) -> int:
    """Index of the ';' or closing '}' that ends the declaration containing token ``i``."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind != "punct":
            continue
        if t.text in ("{", "("):
            depth += 1
        elif t.text in ("}", ")"):
            depth -= 1
            if depth < 0:
                return j
            if depth == 0 and t.text == "}":
                # a body closed; a declaration with a body ends here
                return j
        elif t.text == ";" and depth == 0:
            return j
    return len(toks) - 1


def find_type_names(toks: list[RawTok]) -> tuple[set[str], dict[int, set[str]]]:
    """Global type names, and per token index the type parameters in scope there."""
    names: set[str] = set()
    scoped: dict[int, set[str]] = {}
    n = len(toks)
    for i, t in enumerate(toks):
        if t.kind != "id":
            continue
        prev = toks[i - 1] if i else None
        if prev is not None and prev.kind == "punct" and prev.text == "@":
            continue
        nxt = toks[i + 1] if i + 1 < n else None
        if t.text in _TYPE_DECL_KEYWORDS and nxt is not None and nxt.kind == "id":
            names.add(nxt.text)
        elif t.text == "extern" and nxt is not None and nxt.kind == "id":
            after = toks[i + 2] if i + 2 < n else None
            if after is not None and after.kind == "punct" and after.text == "{":
                names.add(nxt.text)
            elif after is not None and after.kind == "punct" and after.text == "<":
                close = _matching_close(toks, i + 2)
                if close >= 0 and close + 1 < n and toks[close + 1].text == "{":
                    names.add(nxt.text)
        elif t.text == "enum":
            j = i + 1
            while j < n and not (toks[j].kind == "punct" and toks[j].text == "{"):
                j += 1
            if j < n and toks[j - 1].kind == "id":
                names.add(toks[j - 1].text)
        elif t.text in ("typedef", "type"):
            if t.text == "type" and not (
                prev is None or (prev.kind == "punct" and prev.text in (";", "}", ")"))
            ):
                continue
            j = i + 1
            while j < n and not (toks[j].kind == "punct" and toks[j].text == ";"):
                j += 1
            if j < n and toks[j - 1].kind == "id":
                names.add(toks[j - 1].text)
        elif nxt is not None and nxt.kind == "punct" and nxt.text == "<" and prev is not None:
            # a generic declaration `T name<A, B>(` or `extern x<T> {` / `parser P<H>(`
            if not (prev.kind == "id" or (prev.kind == "punct" and prev.text == ">")):
                continue
            close = _matching_close(toks, i + 1)
            if close < 0 or close + 1 >= n or toks[close + 1].text not in ("(", "{"):
                continue
            inner = toks[i + 2 : close]
            params = [x.text for x in inner if x.kind == "id"]
            if not params or any(
                x.kind != "id" and not (x.kind == "punct" and x.text == ",") for x in inner
            ):
                continue
            if any(p in names for p in params):
                continue  # explicit type arguments of a call, not parameters
            start, end = _decl_start(toks, i), _decl_end(toks, close + 1)
            for k in range(start, end + 1):
                if toks[k].kind == "id" and toks[k].text in params:
                    scoped.setdefault(k, set()).update(params)
    return names, scoped


_TYPE_WORDS = {"bit", "int", "varbit", "bool", "tuple", "error", "void", "string", "_", "value_set"}


def _is_call_type_args(
    toks: list[RawTok], i: int, names: set[str], scoped: dict[int, set[str]]
) -> bool:
    """True when the '<' at ``i`` opens explicit type arguments of a call (``f<bit<8>>(x)``)."""
    if i < 1 or toks[i - 1].kind != "id" or toks[i - 1].text in _TYPE_WORDS:
        return False
    if toks[i - 1].text in names or toks[i - 1].text in scoped.get(i - 1, ()):
        return False  # `register<bit<8>>(..)` instantiates a generic type
    if i >= 2:
        pp = toks[i - 2]
        if pp.kind == "id" and pp.text != "return":
            return False  # `T name<` starts a generic declaration
        if pp.kind == "punct" and pp.text == ">":
            return False
    close = _matching_close(toks, i)
    if close < 0 or close + 1 >= len(toks) or toks[close + 1].text != "(":
        return False
    for k in range(i + 1, close):
        x = toks[k]
        if x.kind == "int" or (x.kind == "punct" and x.text in ("<", ">", ",")):
            continue
        if x.kind == "id" and (
            x.text in _TYPE_WORDS or x.text in names or x.text in scoped.get(k, ())
        ):
            continue
        return False
    return True


def classify_tokens(
    pre: Preprocessed, toks: list[RawTok], terminals: Mapping[str, str]
) -> list[tuple[str, RawTok]]:
    """Classify raw tokens into the grammar's terminals (``terminals``: literal -> name);
    the parser turns each (terminal, token) pair into a lark token."""
    names, scoped = find_type_names(toks)
    out: list[tuple[str, RawTok]] = []
    for i, t in enumerate(toks):
        if t.kind == "id":
            prev = toks[i - 1] if i else None
            after_at = prev is not None and prev.kind == "punct" and prev.text == "@"
            if not after_at and t.text in terminals:
                ttype = terminals[t.text]
            elif not after_at and (t.text in names or (i in scoped and t.text in scoped[i])):
                ttype = "TYPE_IDENTIFIER"
            else:
                ttype = "IDENTIFIER"
        elif t.kind == "int":
            ttype = "INTEGER"
        elif t.kind == "str":
            ttype = "STRING_LITERAL"
        elif t.kind == "annbody":
            ttype = "ANNOTATION_BODY"
        elif t.text in _COMPOUND_ASSIGN:
            ttype = "COMPOUND_ASSIGN"
        elif t.text == "<" and _is_call_type_args(toks, i, names, scoped):
            ttype = "TYPE_ARGS_LT"
        elif (
            t.text == ">"
            and i + 1 < len(toks)
            and toks[i + 1].text == ">"
            and (toks[i + 1].pos == t.pos + 1)
        ):
            ttype = "R_ANGLE_SHIFT"
        else:
            ttype = terminals.get(t.text, "")
            if not ttype:
                raise P4Error(f"syntax error: unexpected '{t.text}'", pre.loc(t.line, t.col))
        out.append((ttype, t))
    return out
