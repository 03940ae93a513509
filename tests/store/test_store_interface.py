"""The `Store` interface on every tier: get/put/keys/stat/delete/verify, entries and purge.

Each test runs on the memory, disk and Redis tiers (a private redis-server) with real
artifacts, so `verify` is checked against what a cache read would accept.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import redis

from fsmcompile import Vocabulary, artifact
from fsmcompile.compiler import compile_regex, index_cache_key
from fsmcompile.store import DiskStore, MemoryStore, RedisStore, Store
from fsmcompile.version import FORMAT_VERSION

PATTERNS = ("(yes|no)", "[0-9]{3}")


@pytest.fixture(scope="module")
def artifacts(gpt2: Vocabulary) -> dict[str, bytes]:
    """Two real artifacts under the keys a compile stores them under."""
    return {
        index_cache_key("regex", pattern, gpt2): artifact.to_bytes(
            compile_regex(pattern, gpt2, cache=False)
        )
        for pattern in PATTERNS
    }


@pytest.fixture(
    params=["memory", "disk", pytest.param("redis", marks=pytest.mark.redis)],
)
def tier(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store: Store
    if request.param == "memory":
        store = MemoryStore()
    elif request.param == "disk":
        store = DiskStore(tmp_path / "cache")
    else:
        store = RedisStore(request.getfixturevalue("redis_url"), ttl_s=600)
    yield store
    store.close()


def _flip_middle(value: bytes) -> bytes:
    """The value with one byte of the artifact body flipped: only its checksum can tell."""
    damaged = bytearray(value)
    damaged[len(damaged) // 2] ^= 0xFF
    return bytes(damaged)


def test_store_put_keys_stat_delete_round_trip(tier: Store) -> None:
    tier.put("alpha-1", b"a" * 10)
    tier.put("beta-1", b"b" * 20)
    assert sorted(tier.keys()) == ["alpha-1", "beta-1"]
    assert list(tier.keys("alpha-")) == ["alpha-1"]
    found = tier.stat("beta-1")
    assert found is not None and (found.key, found.tier, found.size_bytes) == (
        "beta-1",
        tier.name,
        20,
    )
    assert found.format_version is None  # not a `cache_key`
    assert tier.stat("gamma-1") is None
    assert [entry.key for entry in tier.entries()] == ["alpha-1", "beta-1"]
    tier.delete("beta-1")
    tier.delete("beta-1")  # missing is fine
    assert tier.stat("beta-1") is None and tier.get("beta-1") is None
    assert list(tier.keys()) == ["alpha-1"]


def test_store_stat_reports_format_and_tier_times(tier: Store, artifacts: dict[str, bytes]) -> None:
    key, value = next(iter(artifacts.items()))
    before = time.time()
    tier.put(key, value)
    found = tier.stat(key)
    assert found is not None
    assert found.size_bytes == len(value) and found.format_version == FORMAT_VERSION
    if isinstance(tier, RedisStore):
        assert found.modified_at is None
        assert found.expires_in_s is not None and 590 < found.expires_in_s <= 600
    else:
        assert found.modified_at is not None and before - 2 <= found.modified_at <= time.time()
        assert found.expires_in_s is None


def test_store_verify_real_artifact_is_ok(tier: Store, artifacts: dict[str, bytes]) -> None:
    for key, value in artifacts.items():
        tier.put(key, value)
    verdicts = [tier.verify(key) for key in artifacts]
    assert [(v.status, v.reason, v.tier) for v in verdicts] == [("ok", "", tier.name)] * 2
    assert all(v.ok for v in verdicts)


def test_store_verify_reports_tampered_entry_and_keeps_it(
    tier: Store, artifacts: dict[str, bytes]
) -> None:
    key, value = next(iter(artifacts.items()))
    tier.put(key, _flip_middle(value))
    verdict = tier.verify(key)
    assert (verdict.status, verdict.key, verdict.deleted) == ("corrupt", key, False)
    assert verdict.reason.startswith("artifact checksum mismatch")
    assert tier.stat(key) is not None  # verify deletes nothing


def test_store_verify_swapped_artifact_names_another_spec(
    tier: Store, artifacts: dict[str, bytes]
) -> None:
    first, second = artifacts
    tier.put(first, artifacts[second])  # valid, but another spec's
    verdict = tier.verify(first)
    assert verdict.status == "corrupt" and "another spec" in verdict.reason


def test_store_verify_missing_and_newer_format(tier: Store, artifacts: dict[str, bytes]) -> None:
    key = next(iter(artifacts))
    assert tier.verify(key).status == "missing"
    newer = key.replace(f"-v{FORMAT_VERSION}-", "-v999-", 1)
    tier.put(newer, b"a newer client's bytes")
    verdict = tier.verify(newer)
    assert verdict.status == "skipped" and "v999 is newer" in verdict.reason


def test_store_verify_entries_deletes_only_corrupt(
    tier: Store, artifacts: dict[str, bytes]
) -> None:
    (good, good_value), (bad, bad_value) = artifacts.items()
    tier.put(good, good_value)
    tier.put(bad, _flip_middle(bad_value))
    kept = list(tier.verify_entries(delete_corrupt=False))
    assert {(v.key, v.status, v.deleted) for v in kept} == {
        (good, "ok", False),
        (bad, "corrupt", False),
    }
    assert sorted(tier.keys()) == sorted([good, bad])
    deleted = list(tier.verify_entries(delete_corrupt=True))
    assert {(v.key, v.status, v.deleted) for v in deleted} == {
        (good, "ok", False),
        (bad, "corrupt", True),
    }
    assert list(tier.keys()) == [good]


def test_store_purge_honours_prefix(tier: Store) -> None:
    for key in ("regex-1", "regex-2", "json-1"):
        tier.put(key, key.encode())
    purged = tier.purge("regex-")
    assert [(entry.key, entry.size_bytes) for entry in purged] == [("regex-1", 7), ("regex-2", 7)]
    assert list(tier.keys()) == ["json-1"]
    assert [entry.key for entry in tier.purge()] == ["json-1"]
    assert list(tier.keys()) == []


def test_store_location_names_where_entries_live(tier: Store, tmp_path: Path) -> None:
    expected = {"memory": "memory", "disk": str(tmp_path / "cache")}
    if isinstance(tier, RedisStore):
        assert tier.location.startswith("redis://127.0.0.1:")
    else:
        assert tier.location == expected[tier.name]


# -- what only one tier's storage can hold -----------------------------------------------


def test_disk_verify_reports_damaged_frame_and_misfiled_and_keyless_files(
    tmp_path: Path, artifacts: dict[str, bytes]
) -> None:
    store = DiskStore(tmp_path)
    (first, first_value), (second, second_value) = artifacts.items()
    store.put(first, first_value)
    path = store.path_for(first)
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF
    path.write_bytes(bytes(raw))
    verdict = store.verify(first)
    assert (verdict.status, verdict.reason) == ("corrupt", "cache entry checksum mismatch")
    assert verdict.location == str(path) and path.exists()

    store.put(second, second_value)
    misfiled = store.path_for("elsewhere")
    misfiled.parent.mkdir(parents=True, exist_ok=True)
    misfiled.write_bytes(store.path_for(second).read_bytes())
    keyless = store.path_for("keyless")
    keyless.parent.mkdir(parents=True, exist_ok=True)
    keyless.write_bytes(b"not a frame")

    listed = list(store.entries())
    assert [entry.key for entry in listed][-1] is None  # keyless files come last
    assert [entry.key for entry in store.entries(second[:6])] == sorted([first, second, second])
    verdicts = {v.location: v for v in store.verify_entries(delete_corrupt=True)}
    assert "filed under the wrong name" in verdicts[str(misfiled)].reason
    assert verdicts[str(keyless)].key is None and verdicts[str(keyless)].status == "corrupt"
    assert verdicts[str(store.path_for(second))].ok
    assert not misfiled.exists() and not keyless.exists() and not path.exists()
    assert list(store.keys()) == [second]


@pytest.mark.redis
def test_redis_planted_manifest_is_sizeless_and_corrupt(
    redis_url: str, artifacts: dict[str, bytes]
) -> None:
    key = next(iter(artifacts))
    client = redis.Redis.from_url(redis_url)
    bomb = {"format": 1, "size": 30_000_000, "sha256": b"\0" * 32, "id": "0123456789abcdef"}
    bomb.update(chunks=30_000_000, chunk_bytes=1)
    client.set(f"fsmcompile:m:{{{key}}}", msgpack.packb(bomb, use_bin_type=True))
    client.rpush(f"fsmcompile:m:{{{key}x}}", b"a list, not a string")
    with RedisStore(redis_url) as store:
        found = store.stat(key)
        assert found is not None and found.size_bytes is None and found.expires_in_s is None
        verdict = store.verify(key)
        assert verdict.status == "corrupt" and "chunks" in verdict.reason
        assert store.verify(f"{key}x").reason == "manifest key is not a string"
        assert client.exists(f"fsmcompile:m:{{{key}}}")  # verify deletes nothing
        assert {v.key for v in store.verify_entries(delete_corrupt=True)} == {key, f"{key}x"}
        assert list(store.keys()) == []
    client.close()


@pytest.mark.redis
def test_redis_detailed_stats_count_entries_and_read_the_server(redis_url: str) -> None:
    with RedisStore(redis_url) as store:
        store.put("a", b"1")
        store.put("b", b"2")
        assert "entries" not in store.stats()
        detailed = store.stats(detailed=True)
        assert detailed["entries"] == 2 and detailed["server_version"]
        assert detailed["used_memory_bytes"] > 0
