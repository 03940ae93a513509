"""The cache a compile uses when the caller names none: memory → disk (→ Redis).

Redis joins when a URL is given or `FSMCOMPILE_REDIS_URL` is set, so a whole fleet shares
one compile per spec without code changes.
"""

from __future__ import annotations

import os
import threading

from fsmcompile.store.base import Store
from fsmcompile.store.cache import TieredCache

_lock = threading.Lock()
_caches: dict[tuple[str | None, str | None], TieredCache] = {}


def default_cache(
    *, redis_url: str | None = None, cache_dir: str | os.PathLike[str] | None = None
) -> TieredCache:
    """The process-wide tiered cache for `redis_url` and `cache_dir`.

    One per pair, so every compile of a process shares one memory tier and one set of
    Redis connections.

    Args:
        redis_url: the Redis tier's URL (see `connect_redis`); None: memory + disk only.
        cache_dir: the disk tier's folder; None: `default_cache_dir()`.

    Raises:
        StoreUnavailableError: `redis_url` is malformed.
    """
    folder = None if cache_dir is None else os.fspath(cache_dir)
    with _lock:
        cache = _caches.get((redis_url, folder))
        if cache is None:
            from fsmcompile.store.disk import DiskStore
            from fsmcompile.store.memory import MemoryStore

            tiers: list[Store] = [MemoryStore(), DiskStore(folder)]
            if redis_url:
                from fsmcompile.store.redis import RedisStore

                tiers.append(RedisStore(redis_url))
            cache = TieredCache(tiers)
            _caches[redis_url, folder] = cache
        return cache


def configured_cache() -> TieredCache:
    """The default cache of this process's configuration: memory + disk, and Redis when
    `FSMCOMPILE_REDIS_URL` names one (what `cache=True` means)."""
    return default_cache(redis_url=os.environ.get("FSMCOMPILE_REDIS_URL") or None)
