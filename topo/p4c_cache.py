"""A cache of p4c's BMv2 outputs, keyed by what p4c would compile.

p4c takes ~40 s (on a loaded 2-core machine) for ``netreduce.p4`` at E = 252, and every
``make run target=bmv2`` compiled it again into its own run directory. The key is the SHA-256
of p4c's version, the compile flags, the output names and the *preprocessed* program (``p4c
-E``, about a second): any change to the program or to a file it includes, to the defines, or
to p4c itself gives a new key, so a hit is exactly what p4c would write again. Entries are
directories under ``$INA_P4C_CACHE`` (default ``~/.cache/ina-testbed/p4c``), written
under a temporary name and renamed into place, so concurrent runs never see half an entry.
``INA_P4C_CACHE=off`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
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


def compile_key(flags: Sequence[str], program: Path, outputs: Sequence[str]) -> str | None:
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
        digest = hashlib.sha256()
        for part in (version.stdout, "\0".join(flags), "\0".join(outputs)):
            digest.update(part.encode() + b"\0\0")
        digest.update(texts[0].read_bytes())
        return digest.hexdigest()


def restore(key: str, outdir: Path, outputs: Sequence[str]) -> bool:
    """Copies the entry's ``outputs`` into ``outdir``; False when there is no whole entry."""
    root = cache_root()
    if root is None:
        return False
    entry = root / key
    if not all((entry / name).is_file() for name in outputs):
        return False
    outdir.mkdir(parents=True, exist_ok=True)
    for name in outputs:
        shutil.copyfile(entry / name, outdir / name)
    log.info("p4c cache: %s from %s", ", ".join(outputs), entry)
    return True


def store(key: str, outdir: Path, outputs: Sequence[str]) -> None:
    """Keeps ``outputs`` (files in ``outdir``) under ``key``; a failure only costs the cache."""
    root = cache_root()
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=root))
        for name in outputs:
            shutil.copyfile(outdir / name, tmp / name)
        try:
            tmp.rename(root / key)
        except OSError:  # another run stored it first
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        log.debug("p4c cache: cannot store %s: %s", key, exc)


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
