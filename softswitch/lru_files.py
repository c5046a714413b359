"""Bounded on-disk caches: the least recently used files go first.

Why one place: the program cache, the include index and the C engine's cache each keep a
bounded number of entries by the same rule (a hit refreshes its file's mtime, the newest
mtimes stay), and several processes may prune the same directory at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def prune(entries: Iterable[Path], keep: int) -> None:
    """Removes all but the ``keep`` most recently modified of ``entries`` (a file another
    process removed already is fine)."""
    dated: list[tuple[float, Path]] = []
    for entry in entries:
        try:
            dated.append((entry.stat().st_mtime, entry))
        except FileNotFoundError:
            continue
    for _, old in sorted(dated, reverse=True)[keep:]:
        old.unlink(missing_ok=True)


def used(path: Path) -> bool:
    """True when ``path`` exists; marks it used (its mtime), so :func:`prune` keeps it."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    except OSError:  # a read-only cache still serves
        return path.exists()
    return True
