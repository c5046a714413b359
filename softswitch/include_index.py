"""Which files a P4 program includes, remembered between processes while none has changed.

Why: bundling a program as a device config must know the files it includes, and only the
preprocessor knows them: for netreduce.p4 that is ~1 s of CPU (pcpp's macro expansion),
paid two or three times by every network start (the run's compile, the C engine's
preparation) and by every switch started with a program file, for the same answer.

An entry is kept per (main file, include dirs, front end) in the program cache's directory
(``SOFTSWITCH_PROGRAM_CACHE=off`` turns both off). It holds the files found and a stamp
(size, mtime, ctime, inode) of every file the preprocessor read and of every directory it
searched: an edited, replaced or touched file, or a file added to or removed from a
searched directory (which changes the directory's stamp), makes the entry stale and the
preprocessor runs again. As with git's index, a stamp taken within :data:`RACY_S` of the
file's last change could miss a second change in the same clock tick: such entries are not
written (a program written just now is preprocessed every time until it is older). The
:data:`MAX_ENTRIES` most recently used entries are kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from softswitch import lru_files, program_cache

log = logging.getLogger(__name__)

#: Files or directories changed this recently (seconds) are not trusted to a stamp.
RACY_S = 2.0
MAX_ENTRIES = 256  # least recently used entries beyond this are removed when one is added
_VERSION = 1

Stamp = list[int]  # size, mtime_ns, ctime_ns, inode


def _stamp(path: Path) -> Stamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _entry_path(main: Path, include_dirs: Sequence[Path]) -> Path | None:
    where = program_cache.cache_dir()
    if where is None:
        return None
    digest = hashlib.sha256(program_cache.compiler_fingerprint().encode())
    for part in (main, *include_dirs):
        digest.update(str(part).encode() + b"\0")
    return where / "includes" / f"{digest.hexdigest()}.json"


def lookup(main: Path, include_dirs: Sequence[Path]) -> list[Path] | None:
    """The user files recorded for ``main`` (resolved) with ``include_dirs`` (resolved), or
    None when there is no entry or anything it stamped has changed."""
    path = _entry_path(main, include_dirs)
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text())
        if entry.get("version") != _VERSION:
            return None
        for name, stamp in entry["stamps"].items():
            if _stamp(Path(name)) != stamp:
                return None
        lru_files.used(path)
        return [Path(p) for p in entry["files"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.debug("include index: cannot use %s (%s)", path, exc)
        return None


def record(main: Path, include_dirs: Sequence[Path], files: Sequence[Path],
           read: Iterable[Path], searched: Iterable[Path]) -> None:
    """Remember ``files`` (the answer) for ``main`` with ``include_dirs``, valid while the
    files the preprocessor ``read`` and the directories it ``searched`` stay as they are
    now. Nothing is written when one of them changed within :data:`RACY_S` or is gone;
    a cache that cannot be written only costs time."""
    path = _entry_path(main, include_dirs)
    if path is None:
        return
    stamps: dict[str, Stamp] = {}
    newest = 0
    for p in (*read, *searched):
        stamp = _stamp(p)
        if stamp is None:
            return
        stamps[str(p)] = stamp
        newest = max(newest, stamp[1], stamp[2])
    if time.time_ns() - newest < RACY_S * 1e9:
        return
    doc = {"version": _VERSION, "files": [str(f) for f in files], "stamps": stamps}
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        lru_files.prune(path.parent.glob("*.json"), MAX_ENTRIES)
    except OSError as exc:
        log.warning("include index: cannot write %s (%s)", path, exc)
