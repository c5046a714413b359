"""Multi-level data cache: memory -> local disk -> remote (the data server).

After Shi et al. (2020): training data lives on a network filesystem, and reading it every
epoch puts the dataset on the same links as the gradients. Each worker reads shards through
its own levels; a miss falls through to the next level and the bytes are copied into every
level above on the way back (inclusive caching), so from the second epoch on a worker that
has room for its shards reads nothing over the network.

Both local levels evict the least recently used shard when a new one does not fit.
Statistics are kept per level (hits, bytes, seconds) so that hit rates, I/O time per epoch
and the network bytes saved can be reported; :meth:`MultiLevelCache.snapshot` and
:meth:`CacheStats.__sub__` give per-epoch numbers. Seconds are emulated (the cache's
:class:`vtime.VirtualClock`, the run's): a remote read crosses the dilated network, while
memory and disk reads are this machine's work, which time dilation makes look ``TDF`` times
faster (docs/training.md).
"""

from __future__ import annotations

import collections
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vtime import REAL_TIME, VirtualClock

log = logging.getLogger(__name__)

LEVELS: tuple[str, ...] = ("memory", "disk", "remote")
_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class LevelStats:
    """Reads served by one level."""

    hits: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def __sub__(self, other: LevelStats) -> LevelStats:
        return LevelStats(self.hits - other.hits, self.bytes - other.bytes,
                          self.seconds - other.seconds)


@dataclass(frozen=True)
class CacheStats:
    """Per-level statistics of one cache over some interval."""

    levels: dict[str, LevelStats] = field(default_factory=dict)

    def __sub__(self, other: CacheStats) -> CacheStats:
        return CacheStats({name: self.level(name) - other.level(name) for name in LEVELS})

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats({
            name: LevelStats(a.hits + b.hits, a.bytes + b.bytes, a.seconds + b.seconds)
            for name in LEVELS
            for a, b in [(self.level(name), other.level(name))]
        })

    def level(self, name: str) -> LevelStats:
        """Statistics of level ``name`` (zeros if it served nothing)."""
        return self.levels.get(name, LevelStats())

    @property
    def requests(self) -> int:
        """Shard reads asked of the cache."""
        return sum(self.level(n).hits for n in LEVELS)

    def hit_rate(self, name: str) -> float:
        """Fraction of all reads served by level ``name``."""
        return self.level(name).hits / self.requests if self.requests else 0.0

    @property
    def local_hit_rate(self) -> float:
        """Fraction of reads that did not cross the network (memory or disk)."""
        return 1.0 - self.hit_rate("remote") if self.requests else 0.0

    @property
    def io_seconds(self) -> float:
        """Time spent reading, all levels together."""
        return sum(self.level(n).seconds for n in LEVELS)

    @property
    def network_bytes(self) -> int:
        """Shard bytes fetched from the remote level."""
        return self.level("remote").bytes

    @property
    def bytes_saved(self) -> int:
        """Shard bytes served locally, which would otherwise have crossed the network."""
        return self.level("memory").bytes + self.level("disk").bytes

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly summary."""
        return {
            "requests": self.requests,
            "hit_rate": {n: round(self.hit_rate(n), 4) for n in LEVELS},
            "local_hit_rate": round(self.local_hit_rate, 4),
            "io_seconds": self.io_seconds,
            "network_bytes": self.network_bytes,
            "bytes_saved": self.bytes_saved,
            "levels": {n: vars(self.level(n)) for n in LEVELS},
        }


class MultiLevelCache:
    """Reads shards through memory (``memory_bytes``), a disk directory (``disk_bytes``) and
    ``fetch`` (the remote level, e.g. :meth:`~train.dataserver.ShardClient.get`).

    A capacity of 0 disables that level. Shards already in ``disk_dir`` (from an earlier
    run: a local SSD outlives the job) count as cached. One thread at a time.
    """

    def __init__(
        self,
        fetch: Callable[[str], bytes],
        disk_dir: str | Path | None,
        memory_bytes: int = 64 << 20,
        disk_bytes: int = 1 << 30,
        clock: VirtualClock = REAL_TIME,
    ) -> None:
        if memory_bytes < 0 or disk_bytes < 0:
            raise ValueError("cache capacities must be >= 0 bytes")
        self._fetch = fetch
        self._clock = clock
        self.memory_bytes = memory_bytes
        self.disk_bytes = disk_bytes if disk_dir is not None else 0
        self._memory: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._memory_used = 0
        self._disk: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._disk_used = 0
        self.disk_dir = Path(disk_dir) if disk_dir is not None else None
        if self.disk_dir is not None and self.disk_bytes:
            self.disk_dir.mkdir(parents=True, exist_ok=True)
            for path in sorted(self.disk_dir.glob("*.shard"), key=lambda p: p.stat().st_mtime):
                self._disk[path.stem] = path.stat().st_size
                self._disk_used += path.stat().st_size
            self._evict_disk(0)
        self._stats = {name: [0, 0, 0.0] for name in LEVELS}

    def snapshot(self) -> CacheStats:
        """Statistics since the cache was made (subtract two snapshots for an interval)."""
        return CacheStats({n: LevelStats(int(s[0]), int(s[1]), float(s[2]))
                           for n, s in self._stats.items()})

    def _count(self, level: str, nbytes: int, start: float) -> None:
        s = self._stats[level]
        s[0] += 1
        s[1] += nbytes
        s[2] += self._clock.now() - start

    def get(self, name: str) -> bytes:
        """The bytes of shard ``name`` from the fastest level that has them."""
        if not _SAFE.match(name):
            raise ValueError(f"invalid shard name {name!r}")
        start = self._clock.now()
        blob = self._memory.get(name)
        if blob is not None:
            self._memory.move_to_end(name)
            self._count("memory", len(blob), start)
            return blob
        blob = self._read_disk(name)
        if blob is not None:
            self._put_memory(name, blob)
            self._count("disk", len(blob), start)
            return blob
        blob = self._fetch(name)
        self._put_disk(name, blob)
        self._put_memory(name, blob)
        self._count("remote", len(blob), start)
        return blob

    # -- memory ------------------------------------------------------------------------

    def _put_memory(self, name: str, blob: bytes) -> None:
        if len(blob) > self.memory_bytes:
            return
        while self._memory_used + len(blob) > self.memory_bytes:
            _, old = self._memory.popitem(last=False)
            self._memory_used -= len(old)
        self._memory[name] = blob
        self._memory_used += len(blob)

    # -- disk --------------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        assert self.disk_dir is not None
        return self.disk_dir / f"{name}.shard"

    def _read_disk(self, name: str) -> bytes | None:
        if name not in self._disk:
            return None
        try:
            blob = self._path(name).read_bytes()
        except OSError:
            log.warning("disk cache lost %s; reading it again from the next level", name)
            self._disk_used -= self._disk.pop(name)
            return None
        self._disk.move_to_end(name)
        return blob

    def _put_disk(self, name: str, blob: bytes) -> None:
        if not self.disk_bytes or len(blob) > self.disk_bytes:
            return
        self._evict_disk(len(blob))
        path = self._path(name)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(blob)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("cannot write %s to the disk cache: %s", name, exc)
            tmp.unlink(missing_ok=True)
            return
        self._disk[name] = len(blob)
        self._disk_used += len(blob)

    def _evict_disk(self, incoming: int) -> None:
        while self._disk and self._disk_used + incoming > self.disk_bytes:
            old, size = self._disk.popitem(last=False)
            self._disk_used -= size
            self._path(old).unlink(missing_ok=True)
