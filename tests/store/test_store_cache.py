"""TieredCache in one process: read-through, write-to-all, corrupt copies, single flight."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.store import DiskStore, MemoryStore, RedisStore, TieredCache

MAGIC = b"ART1"


class Counter:
    """A compute function that counts its calls."""

    def __init__(self, value: bytes = MAGIC + b"payload", sleep_s: float = 0.0) -> None:
        self.value = value
        self.sleep_s = sleep_s
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        with self._lock:
            self.calls += 1
        time.sleep(self.sleep_s)
        return self.value


def decode(raw: bytes) -> str:
    """Stands in for artifact loading: rejects bytes without the magic as corrupt."""
    if not raw.startswith(MAGIC):
        raise ArtifactCorruptError("not an artifact", "test")
    return raw[len(MAGIC) :].decode()


def test_cache_miss_computes_then_every_tier_hits(tmp_path: Path) -> None:
    memory, disk = MemoryStore(), DiskStore(tmp_path)
    cache = TieredCache([memory, disk])
    compute = Counter()
    value, event = cache.get_or_compute("k", compute, decode=decode)
    assert (value, event.hit, event.tier) == ("payload", False, None)
    assert event.compile_s is not None and event.compile_s >= 0
    assert memory.get("k") == disk.get("k") == compute.value
    _, event = cache.get_or_compute("k", compute, decode=decode)
    assert (event.hit, event.tier, event.compile_s) == (True, "memory", None)
    assert compute.calls == 1


def test_cache_lower_tier_hit_is_copied_up(tmp_path: Path) -> None:
    DiskStore(tmp_path).put("k", MAGIC + b"from disk")
    memory = MemoryStore()
    cache = TieredCache([memory, DiskStore(tmp_path)])
    value, event = cache.get_or_compute("k", Counter(), decode=decode)
    assert (value, event.tier) == ("from disk", "disk")
    assert memory.get("k") == MAGIC + b"from disk"
    assert cache.get("k") == MAGIC + b"from disk"


def test_cache_decode_corrupt_deletes_recomputes_replaces(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = DiskStore(tmp_path)
    disk.put("k", b"stale junk")  # checksum fine, but not an artifact
    cache = TieredCache([MemoryStore(), disk])
    compute = Counter()
    with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
        value, event = cache.get_or_compute("k", compute, decode=decode)
    assert (value, event.hit, compute.calls) == ("payload", False, 1)
    assert disk.get("k") == compute.value
    assert "does not load" in caplog.text


@pytest.mark.parametrize("error", [IndexError, ValueError, TypeError, KeyError, RecursionError])
def test_cache_any_load_error_deletes_recomputes_replaces(
    error: type[Exception], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = DiskStore(tmp_path)
    disk.put("k", MAGIC + b"poison")

    def picky(raw: bytes) -> str:
        if raw.endswith(b"poison"):
            raise error("deep in decoding")
        return decode(raw)

    compute = Counter()
    with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
        value, event = TieredCache([MemoryStore(), disk]).get_or_compute("k", compute, decode=picky)
    assert (value, event.hit, compute.calls) == ("payload", False, 1)
    assert disk.get("k") == compute.value
    assert len(caplog.records) == 1 and error.__name__ in caplog.records[0].getMessage()


def test_cache_fresh_value_that_fails_too_raises_once_and_caches_nothing(tmp_path: Path) -> None:
    disk = DiskStore(tmp_path)
    disk.put("k", b"junk")
    compute = Counter(b"still junk")
    with pytest.raises(ArtifactCorruptError, match="not an artifact"):
        TieredCache([MemoryStore(), disk]).get_or_compute("k", compute, decode=decode)
    assert compute.calls == 1
    assert disk.get("k") is None


def test_cache_memory_error_in_decoding_recompiles_without_deleting(tmp_path: Path) -> None:
    """Maybe this process is short of memory, not the entry bad: the compile decides."""
    disk = DiskStore(tmp_path)
    disk.put("k", MAGIC + b"huge")
    deletes: list[str] = []
    real_delete = disk.delete
    disk.delete = lambda key: (deletes.append(key), real_delete(key))[1]  # type: ignore[method-assign]

    def hungry(raw: bytes) -> str:
        if raw.endswith(b"huge"):
            raise MemoryError
        return decode(raw)

    compute = Counter()
    value, _ = TieredCache([disk]).get_or_compute("k", compute, decode=hungry)
    assert (value, compute.calls, deletes) == ("payload", 1, [])
    assert disk.get("k") == compute.value  # replaced by the compile's value


def test_cache_keyboard_interrupt_in_decoding_is_not_swallowed(tmp_path: Path) -> None:
    disk = DiskStore(tmp_path)
    disk.put("k", MAGIC + b"v")

    def interrupted(raw: bytes) -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        TieredCache([disk]).get_or_compute("k", Counter(), decode=interrupted)
    assert disk.get("k") == MAGIC + b"v"


def test_cache_truncated_disk_file_recomputed_and_replaced(tmp_path: Path) -> None:
    disk = DiskStore(tmp_path)
    disk.put("k", MAGIC + b"old")
    path = disk.path_for("k")
    path.write_bytes(path.read_bytes()[:-2])
    compute = Counter()
    _, event = TieredCache([MemoryStore(), disk]).get_or_compute("k", compute, decode=decode)
    assert (event.hit, compute.calls) == (False, 1)
    assert DiskStore(tmp_path).get("k") == compute.value


@pytest.mark.redis
def test_cache_corrupt_redis_chunk_recomputed_and_replaced(redis_url: str) -> None:
    import redis

    value = MAGIC + bytes(range(256)) * 1024
    with (
        RedisStore(redis_url, chunk_bytes=16 * 1024) as store,
        redis.Redis.from_url(redis_url) as r,
    ):
        store.put("k", value)
        chunk = sorted(r.keys("fsmcompile:c:*"))[3]
        r.set(chunk, b"\xff" * 16 * 1024)
        compute = Counter(value)
        got, event = TieredCache([MemoryStore(), store]).get_or_compute("k", compute)
        assert (got, event.hit, compute.calls) == (value, False, 1)
        assert store.get("k") == value


def test_cache_threads_same_key_compute_once(tmp_path: Path) -> None:
    cache = TieredCache([MemoryStore(), DiskStore(tmp_path)])
    compute = Counter(sleep_s=0.2)
    events = []

    def ask() -> None:
        events.append(cache.get_or_compute("k", compute, decode=decode))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compute.calls == 1
    assert {v for v, _ in events} == {"payload"}
    assert sorted(e.hit for _, e in events) == [False] + [True] * 7
    assert all(e.waited_s > 0 for _, e in events if e.hit)


def test_cache_waiter_past_deadline_compiles_locally_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = TieredCache([MemoryStore(), DiskStore(tmp_path)])
    started = threading.Event()

    def slow() -> bytes:
        started.set()
        time.sleep(0.5)
        return MAGIC + b"slow"

    holder = threading.Thread(target=cache.get_or_compute, args=("k", slow))
    holder.start()
    started.wait(5)
    compute = Counter()
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
        value, event = cache.get_or_compute("k", compute, decode=decode, wait_timeout_s=0.1)
    assert time.monotonic() - t0 < 0.4  # did not wait for the holder's 0.5 s
    assert (value, event.hit, compute.calls) == ("payload", False, 1)
    assert [r.message for r in caplog.records if "wait_timeout_s" in r.message] == [
        caplog.records[0].message
    ]
    assert "compiling it here too" in caplog.records[0].message
    holder.join()


def test_cache_other_process_lock_past_deadline_compiles_locally(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lease = DiskStore(tmp_path).lease("k", ttl_s=1.0)  # another "process" compiling
    assert lease.try_acquire()
    try:
        cache = TieredCache([MemoryStore(), DiskStore(tmp_path)])
        compute = Counter()
        with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
            value, event = cache.get_or_compute("k", compute, decode=decode, wait_timeout_s=0.2)
        assert (value, event.hit, compute.calls) == ("payload", False, 1)
        assert event.waited_s >= 0.2
        assert "lock on the disk tier" in caplog.text
        assert DiskStore(tmp_path).get("k") == compute.value  # published all the same
    finally:
        lease.release()


def test_cache_waiter_loads_value_published_by_lock_holder(tmp_path: Path) -> None:
    disk = DiskStore(tmp_path)
    lease = disk.lease("k", ttl_s=1.0)
    assert lease.try_acquire()

    def publish() -> None:
        disk.put("k", MAGIC + b"theirs")
        lease.release()

    timer = threading.Timer(0.2, publish)
    timer.start()
    compute = Counter()
    value, event = TieredCache([MemoryStore(), DiskStore(tmp_path)]).get_or_compute(
        "k", compute, decode=decode
    )
    timer.join()
    assert (value, event.hit, event.tier, compute.calls) == ("theirs", True, "disk", 0)
    assert event.waited_s >= 0.15


def test_cache_compute_error_propagates_and_frees_locks(tmp_path: Path) -> None:
    cache = TieredCache([MemoryStore(), DiskStore(tmp_path)])

    def broken() -> bytes:
        raise RuntimeError("compiler bug")

    with pytest.raises(RuntimeError, match="compiler bug"):
        cache.get_or_compute("k", broken)
    assert cache.get("k") is None
    value, event = cache.get_or_compute("k", Counter(b"ok"), wait_timeout_s=0.5)
    assert (value, event.hit) == (b"ok", False)


def test_cache_requires_a_tier() -> None:
    with pytest.raises(ValueError, match="at least one tier"):
        TieredCache([])
