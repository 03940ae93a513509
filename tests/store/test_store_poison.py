"""Entries others planted in the disk and Redis tiers: each ends in a fresh compile's answer.

Every attack puts something under the key `compile_spec` reads, then compiles through a
cache holding only that tier. The result must equal a compile without cache, the bad
entry must be replaced by the good one, and all of it must take seconds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import redis

from fsmcompile import Vocabulary, artifact
from fsmcompile.artifact import framing
from fsmcompile.compiler import compile_spec, index_cache_key
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.store import DiskStore, RedisStore, Store, TieredCache

SPEC = "(yes|no|maybe)"
OTHER_SPEC = "[0-9]{1,3}"
PREFIX = "fsmcompile:"


def fresh_bytes(vocab: Vocabulary, spec: str = SPEC) -> bytes:
    return artifact.to_bytes(compile_spec("regex", spec, vocab, cache=False).index)


Doc = dict[str, Any]


def reframed(data: bytes, change: Callable[[Doc], None], version: int | None = None) -> bytes:
    """`data`'s artifact with its body edited, re-checksummed: only decoding can refuse it."""
    doc = framing.read_header(data)
    change(doc)
    body = msgpack.packb(doc, use_bin_type=True)
    envelope = framing.HEADER.pack(
        framing.MAGIC, framing.FORMAT_VERSION if version is None else version
    )
    return envelope + body + hashlib.sha256(body).digest()


def _ids_past_vocabulary(doc: Doc) -> None:
    ids = doc["masks"]["ids"]
    count = len(ids["data"]) // 4
    ids["data"] = np.full(count, 10**7, dtype="<i4").tobytes()  # numpy IndexError


def _dense_rows_of_wrong_width(doc: Doc) -> None:
    dense = doc["masks"]["dense"]
    dense.update(dtype="<i4", shape=[1, 3], data=bytes(12))  # a shape mismatch: ValueError


def _dfa_of_wrong_type(doc: Doc) -> None:
    doc["dfa"] = [1, 2, 3]  # indexing a list with a str: TypeError


def _masks_of_wrong_type(doc: Doc) -> None:
    doc["masks"] = 7


# name -> planted value, from (gpt2, phi3)
ATTACKS: dict[str, Callable[[Vocabulary, Vocabulary], bytes]] = {
    "garbage": lambda v, _: os.urandom(3000),
    "truncated": lambda v, _: fresh_bytes(v)[:-10],
    "garbage_with_valid_checksum": lambda v, _: reframed(
        fresh_bytes(v), lambda d: d.update(dfa=b"\x00" * 64, masks=b"\x01")
    ),
    "index_error_on_load": lambda v, _: reframed(fresh_bytes(v), _ids_past_vocabulary),
    "value_error_on_load": lambda v, _: reframed(fresh_bytes(v), _dense_rows_of_wrong_width),
    "type_error_on_load": lambda v, _: reframed(fresh_bytes(v), _dfa_of_wrong_type),
    "wrong_typed_masks": lambda v, _: reframed(fresh_bytes(v), _masks_of_wrong_type),
    "other_spec": lambda v, _: fresh_bytes(v, OTHER_SPEC),
    "other_tokenizer": lambda _, other: fresh_bytes(other),
    "older_format": lambda v, _: reframed(
        fresh_bytes(v),
        lambda d: d.update(format_version=framing.FORMAT_VERSION - 1),
        version=framing.FORMAT_VERSION - 1,
    ),
}


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def compile_through(tier: Store, vocab: Vocabulary) -> tuple[bytes, bool]:
    """Compile SPEC through a cache of `tier` alone; `(artifact bytes, cache hit)`."""
    cache = TieredCache([tier], wait_timeout_s=3.0)
    result = compile_spec("regex", SPEC, vocab, cache=cache)
    return artifact.to_bytes(result.index), result.cache_hit


def assert_recovered(
    tier: Store, vocab: Vocabulary, caplog: pytest.LogCaptureFixture, started: float
) -> None:
    key = index_cache_key("regex", SPEC, vocab)
    with caplog.at_level(logging.WARNING):
        got, hit = compile_through(tier, vocab)
    expected = fresh_bytes(vocab)
    assert (got, hit) == (expected, False)
    assert tier.get(key) == expected  # the bad entry is gone, the fresh one replaced it
    assert compile_through(tier, vocab) == (expected, True)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_poisoned_disk_entry_is_deleted_and_recompiled(
    attack: str,
    tmp_path: Path,
    gpt2: Vocabulary,
    phi3: Vocabulary,
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = time.monotonic()
    disk = DiskStore(tmp_path)
    disk.put(index_cache_key("regex", SPEC, gpt2), ATTACKS[attack](gpt2, phi3))
    assert_recovered(disk, gpt2, caplog, started)


@pytest.mark.redis
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_poisoned_redis_entry_is_deleted_and_recompiled(
    attack: str,
    redis_url: str,
    gpt2: Vocabulary,
    phi3: Vocabulary,
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = time.monotonic()
    with RedisStore(redis_url, chunk_bytes=1024) as store:  # chunked: 3 KB and up
        store.put(index_cache_key("regex", SPEC, gpt2), ATTACKS[attack](gpt2, phi3))
        assert_recovered(store, gpt2, caplog, started)


def bomb(**fields: object) -> bytes:
    manifest = {"format": 1, "size": 30_000_000, "sha256": b"\0" * 32, "id": "0123456789abcdef"}
    manifest.update(chunks=30_000_000, chunk_bytes=1)
    manifest.update(fields)
    return msgpack.packb(manifest, use_bin_type=True)


MANIFESTS: dict[str, Callable[[], bytes]] = {
    "thirty_million_chunks": bomb,
    "size_over_entry_limit": lambda: bomb(size=2**40, chunks=1024, chunk_bytes=2**30),
    "chunk_count_that_does_not_add_up": lambda: bomb(size=1000, chunks=3, chunk_bytes=1000),
    "bool_for_int": lambda: bomb(size=True, chunks=True, chunk_bytes=True),
    "huge_version_id": lambda: bomb(size=1000, chunks=1, chunk_bytes=1000, id="a" * 10**6),
    "inline_size_mismatch": lambda: msgpack.packb(
        {"format": 1, "size": 10**8, "sha256": b"\0" * 32, "data": b"x"}
    ),
    "not_msgpack": lambda: b"\xc1" * 60,
}


@pytest.mark.redis
@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_bad_manifest_is_refused_before_allocation(
    name: str,
    redis_url: str,
    raw: redis.Redis,
    gpt2: Vocabulary,
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = time.monotonic()
    key = index_cache_key("regex", SPEC, gpt2)
    raw.set(f"{PREFIX}m:{{{key}}}", MANIFESTS[name]())
    with RedisStore(redis_url) as store:
        assert_recovered(store, gpt2, caplog, started)
    assert "corrupt Redis cache entry" in caplog.text


@pytest.mark.redis
def test_manifest_larger_than_the_entry_limit_is_not_downloaded(
    redis_url: str, raw: redis.Redis, gpt2: Vocabulary, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    key = index_cache_key("regex", SPEC, gpt2)
    raw.set(f"{PREFIX}m:{{{key}}}", b"\x00" * (8 * 1024 * 1024))
    sent_before = raw.info("stats")["total_net_output_bytes"]
    with RedisStore(redis_url, max_entry_bytes=64 * 1024) as store:
        assert_recovered(store, gpt2, caplog, started)
    assert raw.info("stats")["total_net_output_bytes"] - sent_before < 1024 * 1024


@pytest.mark.redis
@pytest.mark.parametrize("which", ["manifest", "chunk"])
def test_key_of_the_wrong_redis_type_is_a_damaged_entry(
    which: str, redis_url: str, raw: redis.Redis, gpt2: Vocabulary, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    key = index_cache_key("regex", SPEC, gpt2)
    with RedisStore(redis_url, chunk_bytes=256) as store:
        if which == "manifest":
            raw.rpush(f"{PREFIX}m:{{{key}}}", b"planted")
        else:
            store.put(key, fresh_bytes(gpt2))
            chunk = sorted(raw.keys(f"{PREFIX}c:*"))[0]
            raw.delete(chunk)
            raw.rpush(chunk, b"planted")
        assert_recovered(store, gpt2, caplog, started)


@pytest.mark.redis
@pytest.mark.parametrize("px", [None, 3_600_000], ids=["no_expiry", "one_hour"])
def test_planted_lock_is_not_waited_for_and_left_alone(
    px: int | None,
    redis_url: str,
    raw: redis.Redis,
    gpt2: Vocabulary,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = index_cache_key("regex", SPEC, gpt2)
    lock = f"{PREFIX}l:{{{key}}}"
    raw.set(lock, b"planted", px=px)
    started = time.monotonic()
    with RedisStore(redis_url) as store:
        cache = TieredCache([store], wait_timeout_s=10.0)
        with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
            result = compile_spec("regex", SPEC, gpt2, cache=cache)
        assert time.monotonic() - started < 2
        assert artifact.to_bytes(result.index) == fresh_bytes(gpt2)
        assert store.get(key) == fresh_bytes(gpt2)  # published for the fleet all the same
    assert raw.get(lock) == b"planted"  # not ours to delete
    assert "longer than any compile lock" in caplog.text


@pytest.mark.redis
def test_lock_that_outlives_the_wait_ends_in_a_local_compile(
    redis_url: str, raw: redis.Redis, gpt2: Vocabulary, caplog: pytest.LogCaptureFixture
) -> None:
    key = index_cache_key("regex", SPEC, gpt2)
    raw.set(f"{PREFIX}l:{{{key}}}", b"0" * 32, px=30_000)  # looks like a live compile
    started = time.monotonic()
    with RedisStore(redis_url) as store:
        cache = TieredCache([store], wait_timeout_s=1.0)
        with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
            result = compile_spec("regex", SPEC, gpt2, cache=cache)
        assert 1.0 <= time.monotonic() - started < 3
        assert artifact.to_bytes(result.index) == fresh_bytes(gpt2)
        assert store.get(key) == fresh_bytes(gpt2)
    assert "compiling locally and publishing" in caplog.text


@pytest.mark.redis
def test_stale_lock_of_a_dead_holder_expires_and_is_taken_over(
    redis_url: str, raw: redis.Redis, gpt2: Vocabulary, caplog: pytest.LogCaptureFixture
) -> None:
    key = index_cache_key("regex", SPEC, gpt2)
    raw.set(f"{PREFIX}l:{{{key}}}", b"0" * 32, px=800)  # its holder died 9 s into a 10 s TTL
    started = time.monotonic()
    with RedisStore(redis_url) as store:
        with caplog.at_level(logging.WARNING, logger="fsmcompile.store.cache"):
            result = compile_spec("regex", SPEC, gpt2, cache=TieredCache([store]))
        assert 0.7 <= time.monotonic() - started < 3
        assert (result.cache_hit, artifact.to_bytes(result.index)) == (False, fresh_bytes(gpt2))
    assert caplog.records == []


def test_planted_disk_files_are_refused_unread(
    tmp_path: Path, gpt2: Vocabulary, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO (a plain open would block), a symlink (not followed) and an oversized file."""
    key = index_cache_key("regex", SPEC, gpt2)
    disk = DiskStore(tmp_path / "cache", max_entry_bytes=64 * 1024)
    path = disk.path_for(key)
    path.parent.mkdir(parents=True)
    elsewhere = DiskStore(tmp_path / "elsewhere")
    elsewhere.put(key, fresh_bytes(gpt2))  # a valid entry: served if the link were followed
    target = elsewhere.path_for(key)
    target_bytes = target.read_bytes()
    big = tmp_path / "big"
    big.write_bytes(b"\0" * (1024 * 1024))

    def recover_from(plant: Callable[[], None]) -> None:
        caplog.clear()
        started = time.monotonic()
        plant()
        assert_recovered(disk, gpt2, caplog, started)
        path.unlink()

    os.mkfifo(path)
    reader = threading.Thread(target=disk.get, args=(key,), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "opening a planted FIFO blocked the reader"
    recover_from(lambda: os.mkfifo(path))
    recover_from(lambda: path.symlink_to(target))
    assert target.read_bytes() == target_bytes  # the link was removed, its target untouched
    recover_from(lambda: big.rename(path))


def test_fresh_compile_for_another_key_is_refused_and_not_published(
    tmp_path: Path, gpt2: Vocabulary
) -> None:
    key = index_cache_key("regex", SPEC, gpt2)
    disk = DiskStore(tmp_path)
    calls: list[int] = []

    def compute() -> bytes:
        calls.append(1)
        return fresh_bytes(gpt2, OTHER_SPEC)

    with pytest.raises(ArtifactCorruptError, match="another spec"):
        TieredCache([disk]).get_or_compute(key, compute)
    assert (calls, disk.get(key)) == ([1], None)


def test_listing_removes_planted_fifos_and_symlinks(tmp_path: Path) -> None:
    disk = DiskStore(tmp_path / "cache")
    disk.put("real", b"value")
    shard = disk.path_for("real").parent
    os.mkfifo(shard / ("f" * 64))
    (shard / ("e" * 64)).symlink_to(tmp_path)
    lister = threading.Thread(target=lambda: list(disk.keys()), daemon=True)
    lister.start()
    lister.join(5)
    assert not lister.is_alive(), "listing opened a planted FIFO"
    assert sorted(p.name for p in shard.iterdir()) == [disk.path_for("real").name]
    assert list(disk.keys()) == ["real"]


def test_entry_limit_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSMCOMPILE_MAX_ENTRY_BYTES", "1000")
    disk = DiskStore(tmp_path)
    assert disk.max_entry_bytes == 1000
    disk.put("small", b"x" * 1000)
    disk.put("large", b"x" * 1001)  # not stored: every reader would refuse it
    assert (disk.get("small"), disk.get("large")) == (b"x" * 1000, None)
    assert DiskStore(tmp_path, max_entry_bytes=5).max_entry_bytes == 5
    monkeypatch.setenv("FSMCOMPILE_MAX_ENTRY_BYTES", "1G")
    with pytest.raises(ValueError, match="FSMCOMPILE_MAX_ENTRY_BYTES='1G'"):
        DiskStore(tmp_path)
    with pytest.raises(ValueError, match="max_entry_bytes must be > 0"):
        DiskStore(tmp_path, max_entry_bytes=0)


@pytest.mark.redis
def test_redis_does_not_store_values_over_the_entry_limit(redis_url: str, raw: redis.Redis) -> None:
    with RedisStore(redis_url, max_entry_bytes=4096, chunk_bytes=1024) as store:
        store.put("fits", b"x" * 4096)
        store.put("too_big", b"x" * 4097)
        assert (store.get("fits"), store.get("too_big")) == (b"x" * 4096, None)
    assert raw.keys(f"{PREFIX}*too_big*") == []
