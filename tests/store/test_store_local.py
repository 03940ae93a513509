"""Memory and disk tiers: LRU by bytes, checksums, atomic replacement, listing."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import fsmcompile.store as store_pkg
from fsmcompile.store import DiskStore, MemoryStore, default_cache_dir


def test_store_all_sorted_and_complete() -> None:
    expected = {"CacheEvent", "DiskStore", "Lease", "MemoryStore", "RedisStore", "Store"}
    expected |= {"EntryStat", "EntryVerdict", "TieredCache", "cache_key", "default_cache"}
    expected |= {"default_cache_dir"}
    assert store_pkg.__all__ == sorted(store_pkg.__all__)
    assert set(store_pkg.__all__) == expected
    for name in store_pkg.__all__:
        assert getattr(store_pkg, name) is not None


def test_memory_over_budget_evicts_least_recently_used() -> None:
    store = MemoryStore(max_bytes=1000)
    for k in "abc":
        store.put(k, k.encode() * 300)
    assert store.get("a") is not None  # a is now the most recent
    store.put("d", b"d" * 300)
    assert store.get("b") is None
    assert [k for k in "acd" if store.get(k) is not None] == ["a", "c", "d"]
    assert store.stats()["size_bytes"] == 900
    assert store.stats()["evictions"] == 1


def test_memory_value_larger_than_budget_not_stored() -> None:
    store = MemoryStore(max_bytes=100)
    store.put("small", b"x" * 10)
    store.put("huge", b"x" * 101)
    assert store.get("huge") is None
    assert store.get("small") == b"x" * 10


def test_memory_keys_filter_by_prefix() -> None:
    store = MemoryStore()
    for k in ("regex-1", "regex-2", "lark-1"):
        store.put(k, b"v")
    store.delete("regex-2")
    assert sorted(store.keys("regex-")) == ["regex-1"]


def test_disk_round_trip_and_keys(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    store.put("json_schema-v1-abc", b"\x00payload")
    store.put("regex-v1-abc", b"")
    assert store.get("json_schema-v1-abc") == b"\x00payload"
    assert store.get("regex-v1-abc") == b""
    assert store.get("missing") is None
    assert sorted(store.keys()) == ["json_schema-v1-abc", "regex-v1-abc"]
    assert list(store.keys("regex")) == ["regex-v1-abc"]
    store.delete("regex-v1-abc")
    store.delete("regex-v1-abc")
    assert store.get("regex-v1-abc") is None


def test_disk_default_directory_follows_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FSMCOMPILE_CACHE_DIR", str(tmp_path / "explicit"))
    assert DiskStore().directory == tmp_path / "explicit"
    monkeypatch.delenv("FSMCOMPILE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "fsmcompile"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "fsmcompile"


def test_disk_over_budget_evicts_least_recently_used(tmp_path: Path) -> None:
    entry = 10_000
    store = DiskStore(tmp_path, max_bytes=4 * (entry + 200))
    for k in "abcd":
        store.put(k, k.encode() * entry)
        time.sleep(0.02)  # mtime granularity is a clock tick on some filesystems
    assert store.get("a") is not None  # bump a: b is now the oldest
    time.sleep(0.02)
    store.put("e", b"e" * entry)  # 5 entries > budget: evict down to 90% of it
    stats = store.stats()
    assert stats["size_bytes"] <= store.max_bytes
    assert store.get("b") is None
    assert all(store.get(k) is not None for k in "ae")
    assert stats["evictions"] >= 1


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "append", "empty", "not_a_frame"])
def test_disk_damaged_entry_deleted_and_missed(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = DiskStore(tmp_path)
    store.put("k", os.urandom(5000))
    path = store.path_for("k")
    data = path.read_bytes()
    damaged = {
        "truncate": data[:-100],
        "flip_byte": data[:-1] + bytes([data[-1] ^ 1]),
        "append": data + b"x",
        "empty": b"",
        "not_a_frame": b"GIF89a" + data[6:],
    }[damage]
    path.write_bytes(damaged)
    with caplog.at_level(logging.WARNING, logger="fsmcompile.store.disk"):
        assert store.get("k") is None
    assert not path.exists()
    assert "corrupt" in caplog.text
    assert store.stats()["corrupt"] == 1


def test_disk_concurrent_writers_never_tear(tmp_path: Path) -> None:
    store = DiskStore(tmp_path)
    values = [bytes([i]) * 300_000 for i in range(3)]
    store.put("k", values[0])
    stop = threading.Event()
    bad: list[object] = []

    def write(value: bytes) -> None:
        for _ in range(15):
            DiskStore(tmp_path).put("k", value)  # separate instances, like processes

    def read() -> None:
        while not stop.is_set():
            got = store.get("k")
            if got not in values:
                bad.append(got if got is None else len(got))

    writers = [threading.Thread(target=write, args=(v,)) for v in values]
    reader = threading.Thread(target=read)
    reader.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert bad == []
    assert not [p for p in store.path_for("k").parent.iterdir() if p.name.startswith(".tmp")]


def test_store_import_does_not_import_redis() -> None:
    code = "import sys, fsmcompile.store; assert 'redis' not in sys.modules, 'redis imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
