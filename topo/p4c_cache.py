"""A cache of p4c's BMv2 outputs, keyed by what p4c would compile.

p4c takes ~40 s (on a loaded 2-core machine) for ``netreduce.p4`` at E = 252, and every
``make run target=bmv2`` compiled it again into its own run directory. The key is the SHA-256
of p4c's version, the compile flags, the output names and the *preprocessed* program (``p4c
-E``, about a second): any change to the program or to a file it includes, to the defines, or
to p4c itself gives a new key, so a hit is exactly what p4c would write again. Entries are
directories under ``$INA_P4C_CACHE`` (default ``~/.cache/ina-testbed/p4c``), written
under a temporary name and renamed into place, so concurrent runs never see half an entry.
``INA_P4C_CACHE=off`` turns the cache off.

The key leaves out where the files are: the preprocessed text's line markers name them
(``# 1 "/home/me/testbed/p4src/netreduce.p4"``), and with the names in the key every clone,
worktree and run directory (``make run`` writes its program's wrapper there) compiled the
same program again (issue 29: a fresh clone's suite ran p4c on every program it has). p4c
writes those names into its outputs (the BMv2 JSON's source information, its warnings), and
the output directory (the JSON's "program"): absolute ones are kept as placeholders and a
hit gets the names of the compile it serves.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "INA_P4C_CACHE"
#: how the testbed has p4c compile a v1model program for BMv2 (``make run target=bmv2`` and
#: the tests that ask p4c about a program)
BMV2_FLAGS = ("--target", "bmv2", "--arch", "v1model", "--std", "p4-16")
PREPROCESS_TIMEOUT_S = 120.0


def cache_root() -> Path | None:
    """Where entries live; None when the cache is turned off."""
    value = os.environ.get(ENV, "")
    if value.lower() in ("off", "0", "no", "false"):
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ina-testbed" / "p4c"


#: a line marker of the preprocessed text: ``# LINE "FILE" FLAGS``
_MARKER = re.compile(rb'^# \d+ "([^"\\\n]*)"', re.MULTILINE)


@dataclass(frozen=True)
class Key:
    """An entry's name, and the files of the program it was computed from, in the order
    their line markers first name them (what a stored output's placeholders stand for)."""

    digest: str
    files: tuple[str, ...]


def _placeholder(index: int) -> bytes:
    return f"@p4c-cache-file-{index}@".encode()


#: what stands for the output directory (the BMv2 JSON's "program" names a file there)
_OUTDIR = b"@p4c-cache-outdir@"


def compile_key(flags: Sequence[str], program: Path, outputs: Sequence[str]) -> Key | None:
    """The key of compiling ``program`` with ``p4c FLAGS``; None when p4c cannot preprocess
    it (the compile itself then reports why) or the cache is off."""
    if cache_root() is None:
        return None
    with tempfile.TemporaryDirectory(prefix="p4c-pp-") as tmp:
        try:
            version = subprocess.run(["p4c", "--version"], capture_output=True, text=True,
                                     timeout=PREPROCESS_TIMEOUT_S, check=False)
            pre = subprocess.run(["p4c", *flags, "-E", "-o", tmp, str(program)],
                                 capture_output=True, text=True, timeout=PREPROCESS_TIMEOUT_S,
                                 check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.debug("p4c cache: cannot preprocess %s: %s", program, exc)
            return None
        texts = sorted(Path(tmp).glob("*.p4i"))
        if version.returncode != 0 or pre.returncode != 0 or len(texts) != 1:
            return None
        text = texts[0].read_bytes()
    files: list[bytes] = []
    for name in _MARKER.findall(text):
        if name not in files and _placeable(name):
            files.append(name)
    index = {name: i for i, name in enumerate(files)}

    def unnamed(m: re.Match[bytes]) -> bytes:
        name = m.group(1)
        return m.group(0).replace(name, _placeholder(index[name])) if name in index else m.group(0)

    digest = hashlib.sha256()
    for part in (version.stdout, "\0".join(flags), "\0".join(outputs)):
        digest.update(part.encode() + b"\0\0")
    digest.update(_MARKER.sub(unnamed, text))
    return Key(digest.hexdigest(), tuple(name.decode() for name in files))


def _placeable(name: bytes) -> bool:
    """A name the key leaves out, a placeholder standing for it in the outputs: an absolute
    path (a relative one, or ``<built-in>``, could be a word of the program's text too: it
    stays in the key, and a hit's outputs are right as they are) in printable ASCII that
    JSON does not escape (else the outputs could not be searched for it)."""
    return (name.startswith(b"/") and all(0x20 <= c < 0x7F for c in name)
            and b"\\" not in name and b'"' not in name)


def _swap(data: bytes, pairs: Sequence[tuple[bytes, bytes]]) -> bytes:
    """``data`` with each pair's first replaced by its second, longest first (a file's name
    may begin another's)."""
    for old, new in sorted(pairs, key=lambda pair: -len(pair[0])):
        data = data.replace(old, new)
    return data


def restore(key: Key, outdir: Path, outputs: Sequence[str]) -> bool:
    """Writes the entry's ``outputs`` into ``outdir`` with the key's file names and
    ``outdir`` in place of the placeholders; False when there is no whole entry."""
    root = cache_root()
    if root is None:
        return False
    entry = root / key.digest
    if not all((entry / name).is_file() for name in outputs):
        return False
    outdir.mkdir(parents=True, exist_ok=True)
    pairs = [(_placeholder(i), name.encode()) for i, name in enumerate(key.files)]
    pairs.append((_OUTDIR, str(outdir).encode()))
    for name in outputs:
        (outdir / name).write_bytes(_swap((entry / name).read_bytes(), pairs))
    log.info("p4c cache: %s from %s", ", ".join(outputs), entry)
    return True


def store(key: Key, outdir: Path, outputs: Sequence[str]) -> None:
    """Keeps ``outputs`` (files in ``outdir``) under ``key``, the key's file names and
    ``outdir`` replaced by placeholders; a failure only costs the cache."""
    root = cache_root()
    if root is None:
        return
    pairs = [(name.encode(), _placeholder(i)) for i, name in enumerate(key.files)]
    if _placeable(str(outdir).encode()):
        pairs.append((str(outdir).encode(), _OUTDIR))
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key.digest[:16]}-", dir=root))
        for name in outputs:
            (tmp / name).write_bytes(_swap((outdir / name).read_bytes(), pairs))
        try:
            tmp.rename(root / key.digest)
        except OSError:  # another run stored it first
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        log.debug("p4c cache: cannot store %s: %s", key.digest, exc)


def cached(flags: Sequence[str], program: Path, outdir: Path, outputs: Sequence[str],
           compile_: Callable[[], None]) -> bool:
    """Puts p4c's ``outputs`` for ``program`` into ``outdir``: from the cache, or by calling
    ``compile_`` (which runs p4c with ``flags`` into ``outdir`` and raises on failure) and
    keeping what it wrote. True when the cache served them."""
    key = compile_key(flags, program, outputs)
    if key is not None and restore(key, outdir, outputs):
        return True
    compile_()
    if key is not None:
        store(key, outdir, outputs)
    return False
