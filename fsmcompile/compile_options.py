"""What a compile is given besides its spec: the budgets it runs under and the cache it
reads through, checked before any work starts."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from fsmcompile.store.cache import CacheEvent

__all__ = [
    "DEFAULT_MAX_STATES",
    "DEFAULT_TIMEOUT_S",
    "MAX_STATES_LIMIT",
    "Cache",
    "CacheArg",
    "check_budget",
    "resolve_cache_arg",
]

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_STATES = 200_000
MAX_STATES_LIMIT = 2**31 - 1
"""The largest `max_states` accepted: automaton states are int32 ids."""

T = TypeVar("T")


@runtime_checkable
class Cache(Protocol):
    """What a compile needs of a cache: `TieredCache` (`fsmcompile.store`) is one.

    Entries are artifact bytes under `index_cache_key` names. A compile calls only
    `get_or_compute`; `get` and `put` are how tools that warm or inspect a cache reach
    the same entries.
    """

    def get(self, key: str) -> bytes | None:
        """The bytes stored under `key`, or None."""
        ...

    def put(self, key: str, value: bytes) -> None:
        """Store `value` under `key`."""
        ...

    def get_or_compute(
        self, key: str, compute: Callable[[], bytes], *, decode: Callable[[bytes], T]
    ) -> tuple[T, CacheEvent]:
        """`decode` of the entry under `key`, `compute()`d and stored on a miss, with what
        happened (hit or miss, the tier that answered, seconds compiled)."""
        ...


CacheArg: TypeAlias = bool | str | Cache | None
"""A `cache=` argument: True for the default cache (memory + disk, + Redis when
`FSMCOMPILE_REDIS_URL` is set), False or None for none, a Redis URL for the default
tiers plus that Redis, or a `Cache`."""


def resolve_cache_arg(cache: CacheArg) -> Cache | None:
    """The cache a `cache=` argument names (`CacheArg`); None for none.

    Raises:
        TypeError: `cache` is none of the accepted forms.
    """
    if cache is None or cache is False:
        return None
    if cache is True:
        from fsmcompile.store.default import configured_cache

        return configured_cache()
    if isinstance(cache, str):
        from fsmcompile.store.default import default_cache

        return default_cache(redis_url=cache)
    if isinstance(cache, Cache):
        return cache
    raise TypeError(
        "cache must be True, False, None, a Redis URL or a Cache (get, put, get_or_compute), "
        f"not {type(cache).__name__}"
    )


def check_budget(timeout_s: float, max_states: int) -> None:
    """Refuse budget arguments that would switch a budget off or make it meaningless:
    every check compares against them, and `now > now + nan` is never true.

    Raises:
        TypeError: `timeout_s` is not a real number or `max_states` not an int
            (booleans are neither).
        ValueError: `timeout_s` is not finite and positive, or `max_states` is not in
            1..2**31-1.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise TypeError(f"timeout_s must be a number of seconds, not {type(timeout_s).__name__}")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be finite and positive, not {timeout_s!r}")
    if isinstance(max_states, bool) or not isinstance(max_states, int):
        raise TypeError(f"max_states must be an int, not {type(max_states).__name__}")
    if not 0 < max_states <= MAX_STATES_LIMIT:
        raise ValueError(f"max_states must be in 1..{MAX_STATES_LIMIT}, not {max_states}")
