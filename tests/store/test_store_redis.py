"""Redis tier against a private redis-server: chunking, TTL, corruption, errors, leases."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from fsmcompile.errors import StoreUnavailableError
from fsmcompile.store import RedisStore
from fsmcompile.store.redis import connect_redis

pytestmark = pytest.mark.redis

CHUNK = 64 * 1024


def raw_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def test_redis_50mb_value_round_trips_through_chunks(redis_url: str) -> None:
    value = os.urandom(50 * 1024 * 1024)
    with RedisStore(redis_url) as store:
        store.put("big", value)
        assert store.get("big") == value
        store.put("big", value[:1000])  # replace with an inline value
        assert store.get("big") == value[:1000]
        store.delete("big")
        assert store.get("big") is None


def test_redis_replace_keeps_old_chunks_only_for_grace(redis_url: str) -> None:
    with RedisStore(redis_url, chunk_bytes=CHUNK) as store, raw_client(redis_url) as r:
        store.put("k", os.urandom(3 * CHUNK))
        first = set(r.keys("fsmcompile:c:*"))
        store.put("k", os.urandom(3 * CHUNK + 1))
        assert len(first) == 3
        assert all(0 < r.pttl(k) <= 60_000 for k in first)  # expiring, not deleted
        assert all(r.pttl(k) == -1 for k in set(r.keys("fsmcompile:c:*")) - first)


def test_redis_ttl_expires_entries(redis_url: str) -> None:
    with RedisStore(redis_url, ttl_s=0.3, chunk_bytes=CHUNK) as store:
        store.put("small", b"v")
        store.put("large", os.urandom(2 * CHUNK))
        assert store.get("small") == b"v"
        assert store.get("large") is not None
        time.sleep(0.45)
        assert store.get("small") is None
        assert store.get("large") is None


def test_redis_prefix_namespaces_and_lists_keys(redis_url: str) -> None:
    with RedisStore(redis_url, prefix="a:") as a, RedisStore(redis_url, prefix="b:") as b:
        a.put("regex-1", b"1")
        a.put("lark-[x]*", b"2")
        b.put("regex-1", b"other")
        assert a.get("regex-1") == b"1"
        assert b.get("regex-1") == b"other"
        assert sorted(a.keys()) == ["lark-[x]*", "regex-1"]
        assert list(a.keys("lark-[")) == ["lark-[x]*"]
        assert list(b.keys()) == ["regex-1"]


def _corrupt_overwrite_chunk(r: redis.Redis) -> None:
    name = sorted(r.keys("fsmcompile:c:*"))[1]
    r.set(name, b"\x00" * CHUNK, keepttl=True)


def _corrupt_truncate_chunk(r: redis.Redis) -> None:
    name = sorted(r.keys("fsmcompile:c:*"))[2]
    r.set(name, r.get(name)[:-10])  # type: ignore[index]


def _corrupt_delete_chunk(r: redis.Redis) -> None:
    r.delete(sorted(r.keys("fsmcompile:c:*"))[0])


def _corrupt_manifest(r: redis.Redis) -> None:
    r.set(r.keys("fsmcompile:m:*")[0], b"\x93garbage")


@pytest.mark.parametrize(
    "damage",
    [_corrupt_overwrite_chunk, _corrupt_truncate_chunk, _corrupt_delete_chunk, _corrupt_manifest],
)
def test_redis_damaged_entry_deleted_and_missed(
    redis_url: str, damage: Callable[[redis.Redis], None], caplog: pytest.LogCaptureFixture
) -> None:
    with RedisStore(redis_url, chunk_bytes=CHUNK) as store, raw_client(redis_url) as r:
        store.put("k", os.urandom(4 * CHUNK + 5))
        damage(r)
        with caplog.at_level(logging.WARNING, logger="fsmcompile.store.redis"):
            assert store.get("k") is None
        assert "corrupt" in caplog.text
        assert r.keys("fsmcompile:m:*") == []
        assert store.stats()["corrupt"] == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/0",
        "redis://127.0.0.1:notaport/0",
        "redis+sentinel://",
        "redis+sentinel://127.0.0.1:26379/",
        "redis+sentinel://127.0.0.1:x/mymaster",
    ],
)
def test_redis_bad_url_raises_unavailable_with_forms(url: str) -> None:
    with pytest.raises(StoreUnavailableError, match="bad Redis URL") as exc:
        RedisStore(url)
    assert "redis://" in str(exc.value)


def test_redis_unreachable_raises_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused
        with RedisStore(f"redis://127.0.0.1:{port}/0") as store:
            with pytest.raises(StoreUnavailableError, match="cannot reach Redis"):
                store.get("k")


@pytest.mark.parametrize("userinfo", [":wrong-pw@", ""])
def test_redis_bad_credentials_raise_unavailable(
    redis_server_factory: Callable[..., object], userinfo: str
) -> None:
    server = redis_server_factory("--requirepass", "s3cret")
    port = server.port  # type: ignore[attr-defined]
    with RedisStore(f"redis://{userinfo}127.0.0.1:{port}/0") as store:
        with pytest.raises(StoreUnavailableError, match="rejected the credentials") as exc:
            store.ping()
        with pytest.raises(StoreUnavailableError, match="password"):
            store.get("k")
    assert "wrong-pw" not in str(exc.value)
    with RedisStore(f"redis://:s3cret@127.0.0.1:{port}/0") as good:
        good.put("k", b"v")
        assert good.get("k") == b"v"


def test_redis_sentinel_url_builds_sentinel_client() -> None:
    client = connect_redis("redis+sentinel://:pw@10.0.0.1:26379,[::1]:26380/mymaster/2")
    pool = client.connection_pool
    assert pool.service_name == "mymaster"
    sentinels = pool.sentinel_manager.sentinels
    hosts = [s.connection_pool.connection_kwargs["host"] for s in sentinels]
    assert hosts == ["10.0.0.1", "::1"]
    assert pool.connection_kwargs["db"] == 2
    assert pool.connection_kwargs["password"] == "pw"


def test_redis_cluster_round_trip(redis_server_factory: Callable[..., object]) -> None:
    server = redis_server_factory("--cluster-enabled", "yes")
    url = server.url  # type: ignore[attr-defined]
    with raw_client(url) as r:
        r.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        deadline = time.monotonic() + 10
        while b"cluster_state:ok" not in r.execute_command("CLUSTER", "INFO"):
            assert time.monotonic() < deadline, "single-node cluster did not come up"
            time.sleep(0.05)
    with RedisStore(url, cluster=True, chunk_bytes=CHUNK) as store:
        value = os.urandom(3 * CHUNK)
        store.put("k", value)
        assert store.get("k") == value
        assert list(store.keys()) == ["k"]
        lease = store.lease("k", ttl_s=1.0)
        assert lease.try_acquire()
        lease.release()
        assert type(store.client).__name__ == "RedisCluster"


def test_redis_lease_is_renewed_while_held_and_freed_on_release(redis_url: str) -> None:
    with RedisStore(redis_url) as holder_store, RedisStore(redis_url) as other_store:
        holder = holder_store.lease("k", ttl_s=0.3)
        assert holder.try_acquire()
        deadline = time.monotonic() + 0.8  # well past the TTL: only renewal keeps it
        while time.monotonic() < deadline:
            waiter = other_store.lease("k", ttl_s=0.3)
            assert not waiter.try_acquire()
            ttl_s = waiter.holder_ttl_s()  # every lock fsmcompile takes expires
            assert ttl_s is not None and 0 < ttl_s <= 0.3
            time.sleep(0.05)
        holder.release()
        taker = other_store.lease("k", ttl_s=0.3)
        assert taker.try_acquire()
        holder.release()  # a second release must not free the new holder's lock
        assert not holder_store.lease("k", ttl_s=0.3).try_acquire()
        taker.release()


def test_redis_unix_socket_url_round_trips(
    redis_server_factory: Callable[..., object], tmp_path: Path
) -> None:
    sock = tmp_path / "redis.sock"
    redis_server_factory("--unixsocket", str(sock), "--unixsocketperm", "700")
    with RedisStore(f"unix://{sock}?db=0") as store:
        store.put("k", b"over a socket")
        assert store.get("k") == b"over a socket"


def test_redis_tls_url_builds_ssl_client_without_connecting() -> None:
    client = connect_redis("rediss://:pw@cache.internal:6380/1")
    assert client.connection_pool.connection_class.__name__ == "SSLConnection"
    assert client.connection_pool.connection_kwargs["db"] == 1


def test_redis_closed_store_raises_unavailable(redis_url: str) -> None:
    store = RedisStore(redis_url)
    store.close()
    with pytest.raises(StoreUnavailableError, match="closed"):
        store.get("k")
