"""The shard server (NFS stand-in) and the multi-level cache: memory -> disk -> remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from train.cache import MultiLevelCache
from train.dataserver import DataServer, DataServerError, ShardClient

SHARDS = {f"s{i}": bytes([i]) * (100 + i) for i in range(6)}


def test_server_get_and_list() -> None:
    """GET returns a shard byte-exact; LIST gives every shard's size."""
    with DataServer(SHARDS) as server, ShardClient(server.address, timeout=5) as client:
        assert client.get("s3") == SHARDS["s3"]
        assert client.bytes_received == 9 + len(SHARDS["s3"])  # header + payload
        assert client.list() == {k: len(v) for k, v in SHARDS.items()}
        assert server.bytes_served == len(SHARDS["s3"])


def test_server_unknown_shard() -> None:
    """An unknown shard is a clear DataServerError and the connection stays usable."""
    with DataServer(SHARDS) as server, ShardClient(server.address, timeout=5) as client:
        with pytest.raises(DataServerError, match="no shard named 'nope'"):
            client.get("nope")
        assert client.get("s0") == SHARDS["s0"]


def test_client_reports_unreachable_server() -> None:
    """A client pointed at a closed port fails with DataServerError naming the address."""
    with DataServer(SHARDS) as server:
        address = server.address
    with ShardClient(address, timeout=2) as client, pytest.raises(DataServerError, match="reach"):
        client.get("s0")


def test_cache_levels_and_hit_rates(tmp_path: Path) -> None:
    """First read is remote, a re-read is a memory hit; bytes saved count local hits."""
    with DataServer(SHARDS) as server, ShardClient(server.address, timeout=5) as client:
        cache = MultiLevelCache(client.get, tmp_path, memory_bytes=10_000)
        first = [cache.get(n) for n in SHARDS]
        snap = cache.snapshot()
        second = [cache.get(n) for n in SHARDS]
        epoch2 = cache.snapshot() - snap
    assert first == second == list(SHARDS.values())
    assert snap.hit_rate("remote") == 1.0
    assert epoch2.hit_rate("memory") == 1.0
    assert epoch2.network_bytes == 0
    assert epoch2.bytes_saved == sum(len(v) for v in SHARDS.values())


def test_cache_falls_back_to_disk(tmp_path: Path) -> None:
    """With memory too small for the working set, re-reads come from the disk level."""
    calls: list[str] = []

    def fetch(name: str) -> bytes:
        calls.append(name)
        return SHARDS[name]

    cache = MultiLevelCache(fetch, tmp_path, memory_bytes=250)  # holds two shards at most
    for n in SHARDS:
        cache.get(n)
    snap = cache.snapshot()
    for n in SHARDS:
        assert cache.get(n) == SHARDS[n]
    epoch2 = cache.snapshot() - snap
    assert calls == list(SHARDS)  # nothing fetched twice
    assert epoch2.hit_rate("disk") == 1.0 and epoch2.local_hit_rate == 1.0


def test_disk_cache_survives_the_process(tmp_path: Path) -> None:
    """A new cache on the same directory (a restarted job) reads from disk, not remote."""
    MultiLevelCache(SHARDS.__getitem__, tmp_path).get("s1")
    cache = MultiLevelCache(lambda n: pytest.fail("remote read"), tmp_path)
    assert cache.get("s1") == SHARDS["s1"]
    assert cache.snapshot().hit_rate("disk") == 1.0


def test_disk_cache_evicts_lru(tmp_path: Path) -> None:
    """The disk level never holds more than its capacity."""
    cache = MultiLevelCache(SHARDS.__getitem__, tmp_path, memory_bytes=0, disk_bytes=220)
    for n in SHARDS:
        cache.get(n)
    held = sum(p.stat().st_size for p in tmp_path.glob("*.shard"))
    assert 0 < held <= 220
    assert sorted(p.stem for p in tmp_path.glob("*.shard")) == ["s4", "s5"]


def test_cache_rejects_path_names(tmp_path: Path) -> None:
    """Shard names that could escape the cache directory are refused."""
    cache = MultiLevelCache(SHARDS.__getitem__, tmp_path)
    with pytest.raises(ValueError, match="invalid shard name"):
        cache.get("../etc/passwd")
