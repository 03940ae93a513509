"""Artifact stores: memory, disk and Redis tiers behind one interface, and the tiered cache.

Every tier is a `Store` (`base.py`): `get/put/delete` for the cache, `keys/entries/stat/
verify/verify_entries/purge` for maintenance, answered with `EntryStat` and
`EntryVerdict` records.

`RedisStore` is imported on first use, so `import fsmcompile` never imports redis-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fsmcompile.store.base import Lease, Store
from fsmcompile.store.cache import CacheEvent, TieredCache
from fsmcompile.store.default import default_cache
from fsmcompile.store.disk import DiskStore, default_cache_dir
from fsmcompile.store.entries import EntryStat, EntryVerdict
from fsmcompile.store.keys import cache_key
from fsmcompile.store.memory import MemoryStore

if TYPE_CHECKING:
    from fsmcompile.store.redis import RedisStore

__all__ = [
    "CacheEvent",
    "DiskStore",
    "EntryStat",
    "EntryVerdict",
    "Lease",
    "MemoryStore",
    "RedisStore",
    "Store",
    "TieredCache",
    "cache_key",
    "default_cache",
    "default_cache_dir",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from fsmcompile.store.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
