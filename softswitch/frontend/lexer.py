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
                pos, line, line_start = _annotation_body(pre, toks, m.end(), line, line_start)
                continue
        pos = m.end()
    return toks


def _annotation_body(
    pre: Preprocessed, toks: list[RawTok], start: int, line: int, line_start: int
) -> tuple[int, int, int]:
    """Append the balanced annotation body that starts at ``start`` as one raw token, and
    its closing ')'; returns the position after it and the line counters there."""
    text = pre.text
    p = _annotation_close(text, start)
    if p < 0:
        raise P4Error("syntax error: unterminated annotation", pre.loc(line, toks[-1].col))
    body = text[start:p]
    if body.strip():
        toks.append(RawTok("annbody", body, line, start - line_start + 1, start))
    line += body.count("\n")
    if "\n" in body:
        line_start = start + body.rfind("\n") + 1
    toks.append(RawTok("punct", ")", line, p - line_start + 1, p))
    return p + 1, line, line_start


_STRING_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _annotation_close(text: str, start: int) -> int:
    """The index of the ')' that closes the annotation body starting at ``start`` (strings
    in it may hold parentheses); -1 when it is not closed."""
    depth, p, n = 1, start, len(text)
    while p < n:
        c = text[p]
        if c == '"':
            sm = _STRING_RE.match(text, p)
            p = sm.end() if sm else p + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return p
        p += 1
    return -1


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
    for i, t in enumerate(toks):
        if t.kind != "id":
            continue
        prev = toks[i - 1] if i else None
        if prev is not None and prev.kind == "punct" and prev.text == "@":
            continue
        if _starts_type_declaration(toks, i):
            name = _declared_type_name(toks, i, prev)
            if name is not None:
                names.add(name)
        else:
            _scope_type_params(toks, i, prev, names, scoped)
    return names, scoped


def _starts_type_declaration(toks: list[RawTok], i: int) -> bool:
    """True when the word at ``i`` may declare a type (then it declares no type
    parameters): ``enum``, ``typedef``, ``type``, or a type keyword or ``extern`` before
    a name."""
    t = toks[i]
    if t.text in ("enum", "typedef", "type"):
        return True
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    return (t.text in _TYPE_DECL_KEYWORDS or t.text == "extern") and (
        nxt is not None and nxt.kind == "id"
    )


def _declared_type_name(toks: list[RawTok], i: int, prev: RawTok | None) -> str | None:
    """The type the keyword at ``i`` declares, if it declares one."""
    t = toks[i]
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if t.text in _TYPE_DECL_KEYWORDS and nxt is not None and nxt.kind == "id":
        return nxt.text
    if t.text == "extern" and nxt is not None and nxt.kind == "id":
        return nxt.text if _extern_object(toks, i) else None
    if t.text == "enum":
        return _id_before(toks, i, "{")
    if t.text == "typedef" or (
        t.text == "type"
        and (prev is None or (prev.kind == "punct" and prev.text in (";", "}", ")")))
    ):
        return _id_before(toks, i, ";")
    return None


def _extern_object(toks: list[RawTok], i: int) -> bool:
    """True when ``extern name`` at ``i`` declares an object type (``extern x {`` or
    ``extern x<T> {``), not a function."""
    n = len(toks)
    after = toks[i + 2] if i + 2 < n else None
    if after is None or after.kind != "punct":
        return False
    if after.text == "{":
        return True
    if after.text == "<":
        close = _matching_close(toks, i + 2)
        return close >= 0 and close + 1 < n and toks[close + 1].text == "{"
    return False


def _id_before(toks: list[RawTok], i: int, punct: str) -> str | None:
    """The identifier right before the first ``punct`` after ``i`` (a declared name)."""
    j = i + 1
    while j < len(toks) and not (toks[j].kind == "punct" and toks[j].text == punct):
        j += 1
    return toks[j - 1].text if j < len(toks) and toks[j - 1].kind == "id" else None


def _scope_type_params(
    toks: list[RawTok],
    i: int,
    prev: RawTok | None,
    names: set[str],
    scoped: dict[int, set[str]],
) -> None:
    """For a generic declaration `T name<A, B>(` or `parser P<H>(` at ``i``: record the
    type parameters at every token of the declaration that names one."""
    n = len(toks)
    nxt = toks[i + 1] if i + 1 < n else None
    if nxt is None or nxt.kind != "punct" or nxt.text != "<" or prev is None:
        return
    if not (prev.kind == "id" or (prev.kind == "punct" and prev.text == ">")):
        return
    close = _matching_close(toks, i + 1)
    if close < 0 or close + 1 >= n or toks[close + 1].text not in ("(", "{"):
        return
    inner = toks[i + 2 : close]
    params = [x.text for x in inner if x.kind == "id"]
    if not params or any(
        x.kind != "id" and not (x.kind == "punct" and x.text == ",") for x in inner
    ):
        return
    if any(p in names for p in params):
        return  # explicit type arguments of a call, not parameters
    start, end = _decl_start(toks, i), _decl_end(toks, close + 1)
    for k in range(start, end + 1):
        if toks[k].kind == "id" and toks[k].text in params:
            scoped.setdefault(k, set()).update(params)


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


_LITERAL_TERMINALS = {"int": "INTEGER", "str": "STRING_LITERAL", "annbody": "ANNOTATION_BODY"}


def _id_terminal(
    toks: list[RawTok],
    i: int,
    terminals: Mapping[str, str],
    names: set[str],
    scoped: dict[int, set[str]],
) -> str:
    """A keyword, a type's name or a plain identifier (an annotation's name is always
    the latter)."""
    t = toks[i]
    prev = toks[i - 1] if i else None
    if prev is not None and prev.kind == "punct" and prev.text == "@":
        return "IDENTIFIER"
    if t.text in terminals:
        return terminals[t.text]
    if t.text in names or (i in scoped and t.text in scoped[i]):
        return "TYPE_IDENTIFIER"
    return "IDENTIFIER"


def classify_tokens(
    pre: Preprocessed, toks: list[RawTok], terminals: Mapping[str, str]
) -> list[tuple[str, RawTok]]:
    """Classify raw tokens into the grammar's terminals (``terminals``: literal -> name);
    the parser turns each (terminal, token) pair into a lark token."""
    names, scoped = find_type_names(toks)
    out: list[tuple[str, RawTok]] = []
    for i, t in enumerate(toks):
        if t.kind == "id":
            ttype = _id_terminal(toks, i, terminals, names, scoped)
        elif t.kind in _LITERAL_TERMINALS:
            ttype = _LITERAL_TERMINALS[t.kind]
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
