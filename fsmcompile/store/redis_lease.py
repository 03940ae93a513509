"""The Redis tier's compile lock: one machine of a fleet compiles a key, the rest wait.

The lock is `<prefix>l:{key}`, set with `SET NX PX` and a random token. Every lock an
fsmcompile client takes expires, so a dead holder's lock vanishes after its TTL. A lock
key written by anything else (no expiry, or one far longer than any compile lock) is
reported through `holder_ttl_s` so the cache compiles locally instead of waiting on it;
it is never deleted or overwritten here, since only its holder's token may touch it.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
from typing import TYPE_CHECKING

import redis.exceptions as rex

from fsmcompile.errors import StoreError
from fsmcompile.store.base import Lease

if TYPE_CHECKING:
    from fsmcompile.store.redis import RedisStore

__all__ = ["RedisLease"]

logger = logging.getLogger(__name__)

# Compare-and-delete / compare-and-extend: only the token holder may touch its lock.
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


class RedisLease(Lease):
    """`SET NX PX` lock with a random token, renewed every ttl/3 while held.

    If the holder dies, renewals stop and the key expires after `ttl_s`, so a waiter
    takes over; release and renewal are compare-and-act Lua scripts, so a holder whose
    lock already expired can never delete or extend someone else's.
    """

    def __init__(self, store: RedisStore, lock_key: str, *, ttl_s: float) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0, got {ttl_s}")
        self._store = store
        self._key = lock_key
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._token = secrets.token_hex(16)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._holder_ttl_ms: int | None = None

    def try_acquire(self) -> bool:
        if self._thread is not None:
            raise RuntimeError("RedisLease is single-use and already held")
        with self._store._errors("take the compile lock"):
            # One round trip: the attempt, and how long the current holder's lock has left.
            pipe = self._store.client.pipeline(transaction=False)
            pipe.set(self._key, self._token, nx=True, px=self._ttl_ms)
            pipe.pttl(self._key)
            got, pttl_ms = pipe.execute()
        if not got:
            self._holder_ttl_ms = int(pttl_ms)
            return False
        self._thread = threading.Thread(
            target=self._renew_forever, name=f"fsmcompile-lease-{self._key}", daemon=True
        )
        self._thread.start()
        return True

    def holder_ttl_s(self) -> float | None:
        """The other holder's remaining TTL at the last failed `try_acquire`.

        PTTL -1 (the key never expires) is `math.inf`; -2 (it vanished in between) and
        no failed attempt yet are None.
        """
        ttl_ms = self._holder_ttl_ms
        if ttl_ms is None or ttl_ms == -2:
            return None
        return math.inf if ttl_ms == -1 else ttl_ms / 1000

    def _renew_forever(self) -> None:
        interval_s = self._ttl_ms / 3000
        while not self._stop.wait(interval_s):
            try:
                renewed = self._store.client.eval(
                    _RENEW_LUA, 1, self._key, self._token, self._ttl_ms
                )
            except (rex.RedisError, rex.RedisClusterException, OSError, StoreError) as exc:
                logger.debug("could not renew %s: %s", self._key, exc)
                continue
            if not renewed:
                logger.warning(
                    "lost the compile lock %s (not renewed within %d ms); another process "
                    "may compile the same entry",
                    self._key,
                    self._ttl_ms,
                )
                return

    def release(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=self._store.socket_timeout_s + 1.0)
        try:
            self._store.client.eval(_RELEASE_LUA, 1, self._key, self._token)
        except (rex.RedisError, rex.RedisClusterException, OSError, StoreError) as exc:
            logger.debug("could not release %s (it will expire): %s", self._key, exc)
