"""A bounded memo for stages that many specs repeat with equal inputs.

Specs of one family share most of their machinery: every JSON Schema with free-form
members carries the same any-JSON terminals, and schemas of one shape write the same
generated grammar text. Each stage keys its result by the content of its input (never
by object identity, which Python reuses), keeps a bounded number of entries, and returns
results that callers treat as read-only. Who owns a memo decides how long it lives: the
compile stages' memos belong to a `Compiler` (`compile_memos.CompileMemos`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["StageMemo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class StageMemo(Generic[K, V]):
    """A thread-safe least-recently-used map from an input's content key to a result.

    Args:
        max_entries: entries kept; the least recently used goes first.
        max_bytes: bound on the summed `size_of` of the kept results; a result larger
            than a quarter of it is returned but not kept.
        size_of: a result's size in bytes (default: every result counts 0).
    """

    def __init__(
        self,
        max_entries: int,
        *,
        max_bytes: int | None = None,
        size_of: Callable[[V], int] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.size_of = size_of
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The result stored under `key`, else `make()` stored and returned.

        `make` runs outside the lock: two threads may both compute a missing entry, and
        the second store wins, which is harmless for the pure stages memoized here.
        Exceptions from `make` propagate and store nothing.
        """
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found[0]
            self.misses += 1
        value = make()
        size = self.size_of(value) if self.size_of is not None else 0
        if self.max_bytes is not None and size * 4 > self.max_bytes:
            return value
        with self._lock:
            old = self._entries.pop(key, None)
            self._size += size - (old[1] if old is not None else 0)
            self._entries[key] = (value, size)
            while len(self._entries) > self.max_entries or (
                self.max_bytes is not None and self._size > self.max_bytes
            ):
                self._size -= self._entries.popitem(last=False)[1][1]
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)
