"""In-process LRU tier: the first place `TieredCache` looks, bounded by total bytes."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from fsmcompile.store.base import Store
from fsmcompile.store.entries import EntryStat, format_of_key

__all__ = ["MemoryStore"]

DEFAULT_MEMORY_MAX_BYTES = 256 * 1024 * 1024


class MemoryStore(Store):
    """Least-recently-used map from key to artifact bytes, bounded by their total size.

    Unlike the disk and Redis tiers, values are not framed with a checksum: a `bytes`
    object is immutable and never leaves the process, so a checksum could only catch a
    bug in the interpreter, while hashing a 100 MB index on every hit of the hottest tier
    would cost ~60 ms.

    Args:
        max_bytes: upper bound on the sum of stored value sizes. A value larger than this
            is not stored at all (it would evict everything and still not fit).

    Raises:
        ValueError: `max_bytes` is negative.
    """

    name = "memory"

    def __init__(self, max_bytes: int = DEFAULT_MEMORY_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._written_at: dict[str, float] = {}
        self._size_bytes = 0
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._puts = 0
        self._evictions = 0

    def get(self, key: str) -> bytes | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return value

    def put(self, key: str, value: bytes) -> None:
        value = bytes(value)  # a bytearray or memoryview could change under us
        with self._lock:
            self._puts += 1
            self._discard(key)
            if len(value) > self.max_bytes:
                return
            self._entries[key] = value
            self._written_at[key] = time.time()
            self._size_bytes += len(value)
            # O(evicted entries): popitem(last=False) takes the least recently used.
            while self._size_bytes > self.max_bytes:
                old_key, old = self._entries.popitem(last=False)
                del self._written_at[old_key]
                self._size_bytes -= len(old)
                self._evictions += 1

    def delete(self, key: str) -> None:
        with self._lock:
            self._discard(key)

    def _discard(self, key: str) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._size_bytes -= len(old)
            del self._written_at[key]

    def keys(self, prefix: str = "") -> Iterator[str]:
        with self._lock:
            snapshot = [k for k in self._entries if k.startswith(prefix)]
        return iter(snapshot)

    def stat(self, key: str) -> EntryStat | None:
        with self._lock:
            value = self._entries.get(key)
            written_at = self._written_at.get(key)
        if value is None:
            return None
        return EntryStat(
            key,
            self.name,
            self.location,
            len(value),
            format_version=format_of_key(key),
            modified_at=written_at,
        )

    def _peek(self, key: str) -> bytes | None:
        with self._lock:
            return self._entries.get(key)

    def stats(self, *, detailed: bool = False) -> dict[str, Any]:
        del detailed  # everything is already counted
        with self._lock:
            return {
                "name": self.name,
                "entries": len(self._entries),
                "size_bytes": self._size_bytes,
                "max_bytes": self.max_bytes,
                "hits": self._hits,
                "misses": self._misses,
                "puts": self._puts,
                "evictions": self._evictions,
            }

    def __repr__(self) -> str:
        return f"MemoryStore(max_bytes={self.max_bytes})"
