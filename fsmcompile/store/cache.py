"""Tiered cache with single flight: memory → disk → Redis, each key compiled once per fleet.

Reads go fastest tier first and copy a lower-tier hit up into the faster tiers; a
compiled value is written to every tier. On a miss, one caller compiles and the rest
wait, at three levels that nest:

    threads of one process    a per-key `threading.Lock`
    processes of one machine  the disk tier's flock lease (dies with its holder)
    machines of a fleet       the Redis tier's `SET NX PX` lease (expires if its holder
                              dies; renewed by a heartbeat while the holder compiles)

A waiter polls the tier whose lease it is waiting on, with backoff, and takes the lease
over when it expires. A waiter never fails for waiting: past `wait_timeout_s`, or at
once when the lock is one no fsmcompile client takes (it never expires, or outlives
`max_lock_ttl_s`), it compiles locally without the lock and publishes the result; the
other holder's lock is left alone. A tier that fails is skipped for `retry_after_s` (one
WARNING per outage, not per call); writes it missed meanwhile are replayed when it comes
back.

Every entry read from any tier must pass `check_entry` (by default: an artifact whose
header names its key, `entry_check.py`) and `decode`. One that fails for any reason is
deleted from its tier with one WARNING and the next tier, or a compile, answers; a
freshly compiled entry that fails them is an error, never retried.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, TypeVar, overload

from fsmcompile.errors import StoreError
from fsmcompile.store.base import Lease, Store
from fsmcompile.store.entry_check import check_entry as check_artifact_entry

__all__ = ["CacheEvent", "TieredCache"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# Writes a down tier missed, replayed when it returns; older ones are dropped.
_MAX_PENDING = 256
_POLL_FIRST_S = 0.005
_POLL_MAX_S = 0.25


@dataclass(frozen=True, slots=True)
class CacheEvent:
    """What `get_or_compute` did, for metrics and the one INFO log line.

    Attributes:
        hit: the value came from a tier (possibly after waiting for another process).
        tier: name of the tier it came from; None when this call compiled it.
        compile_s: seconds `compute` ran in this call; None on a hit.
        waited_s: seconds spent waiting for locks or another process's compile.
    """

    hit: bool
    tier: str | None
    compile_s: float | None
    waited_s: float


class _Failed(Enum):
    FAILED = 0


class _Rejected(Enum):
    REJECTED = 0


_FAILED = _Failed.FAILED
_REJECTED = _Rejected.REJECTED
EntryCheck = Callable[[str, bytes], None]


@dataclass(slots=True)
class _Health:
    down: bool = False
    retry_at: float = 0.0
    backfilling: bool = False
    pending: OrderedDict[str, None] = field(default_factory=OrderedDict)


def _identity(raw: bytes) -> bytes:
    return raw


class TieredCache:
    """Read-through, write-to-all cache over `tiers` (fastest first), with single flight.

    Args:
        tiers: stores to consult in order, e.g. `[MemoryStore(), DiskStore(), RedisStore(url)]`.
        wait_timeout_s: default bound on waiting for another process's compile.
        lock_ttl_s: default lifetime of a cross-machine lock whose holder stopped
            renewing it (died); a waiter takes over after at most this long.
        retry_after_s: how long a failed tier is skipped before it is tried again.
        max_lock_ttl_s: a lock with longer left to live (or none: it never expires) was
            not taken by an fsmcompile client, so it is not waited for.
        check_entry: `(key, bytes)` raising for an entry not to be served under `key`;
            default: an artifact whose header names the key (`entry_check.check_entry`),
            None: no check beyond `decode`.

    Raises:
        ValueError: no tiers, a negative timing argument, or `lock_ttl_s` not in
            (0, max_lock_ttl_s].
    """

    def __init__(
        self,
        tiers: Sequence[Store],
        *,
        wait_timeout_s: float = 120.0,
        lock_ttl_s: float = 10.0,
        retry_after_s: float = 30.0,
        max_lock_ttl_s: float = 60.0,
        check_entry: EntryCheck | None = check_artifact_entry,
    ) -> None:
        if not tiers:
            raise ValueError("TieredCache needs at least one tier")
        if wait_timeout_s < 0 or not 0 < lock_ttl_s <= max_lock_ttl_s or retry_after_s < 0:
            raise ValueError(
                f"need wait_timeout_s >= 0, 0 < lock_ttl_s <= max_lock_ttl_s, "
                f"retry_after_s >= 0; got {wait_timeout_s}, {lock_ttl_s}, {max_lock_ttl_s}, "
                f"{retry_after_s}"
            )
        self.tiers: tuple[Store, ...] = tuple(tiers)
        self.wait_timeout_s = wait_timeout_s
        self.lock_ttl_s = lock_ttl_s
        self.retry_after_s = retry_after_s
        self.max_lock_ttl_s = max_lock_ttl_s
        self.check_entry = check_entry
        self._health = [_Health() for _ in self.tiers]
        self._health_lock = threading.Lock()
        self._flights: dict[str, list[Any]] = {}  # key -> [Lock, number of users]
        self._flights_lock = threading.Lock()

    # -- tier health ----------------------------------------------------------------------

    def _usable(self, i: int) -> bool:
        """True if tier `i` is up, or down but due for a retry that this caller makes.

        Only one caller per `retry_after_s` gets to probe a down tier, so a Redis that
        hangs costs one socket timeout per retry period, not one per request.
        """
        health = self._health[i]
        if not health.down:
            return True
        with self._health_lock:
            now = time.monotonic()
            if now < health.retry_at:
                return False
            health.retry_at = now + self.retry_after_s
            return True

    def _call(self, i: int, fn: Callable[..., R], *args: Any) -> R | Literal[_Failed.FAILED]:
        """Run one tier operation; on `StoreError` mark the tier down instead of raising."""
        try:
            result = fn(*args)
        except StoreError as exc:
            self._mark_down(i, exc)
            return _FAILED
        if self._health[i].down:
            self._mark_up(i)
        return result

    def _mark_down(self, i: int, exc: StoreError) -> None:
        with self._health_lock:
            health = self._health[i]
            first = not health.down
            health.down = True
            health.retry_at = time.monotonic() + self.retry_after_s
        if first:
            logger.warning(
                "%s cache tier unavailable, serving from the other tiers and compiling "
                "locally; retrying it every %.0f s: %s",
                self.tiers[i].name,
                self.retry_after_s,
                exc,
            )
        else:
            logger.debug("%s cache tier still unavailable: %s", self.tiers[i].name, exc)

    def _mark_up(self, i: int) -> None:
        with self._health_lock:
            health = self._health[i]
            if not health.down:
                return
            health.down = False
        logger.info("%s cache tier is back; publishing to it again", self.tiers[i].name)
        self._kick_backfill(i)

    def _remember_missed(self, i: int, key: str) -> None:
        with self._health_lock:
            pending = self._health[i].pending
            pending[key] = None
            pending.move_to_end(key)
            while len(pending) > _MAX_PENDING:
                pending.popitem(last=False)

    def _kick_backfill(self, i: int) -> None:
        """Replay missed writes into tier `i` on a daemon thread (the first put probes it)."""
        with self._health_lock:
            health = self._health[i]
            if health.backfilling or not health.pending:
                return
            health.backfilling = True
        threading.Thread(
            target=self._backfill, args=(i,), name="fsmcompile-backfill", daemon=True
        ).start()

    def _backfill(self, i: int) -> None:
        health = self._health[i]
        try:
            while True:
                with self._health_lock:
                    if not health.pending:
                        return
                    key = next(iter(health.pending))
                raw: bytes | None = None
                for j in range(len(self.tiers)):
                    if j != i and self._usable(j):
                        got = self._call(j, self.tiers[j].get, key)
                        if not isinstance(got, bytes):
                            continue
                        if self._accept(j, key, got, _identity) is not _REJECTED:
                            raw = got
                            break
                if raw is not None and self._call(i, self.tiers[i].put, key, raw) is _FAILED:
                    return  # down again: keep the rest for the next recovery
                with self._health_lock:
                    health.pending.pop(key, None)
        finally:
            with self._health_lock:
                health.backfilling = False

    def _probe_recovering(self) -> None:
        """Let tiers whose retry time has come prove themselves by replaying missed writes.

        Without this, a process serving only memory hits would never touch Redis again
        and what it compiled during the outage would never reach the fleet.
        """
        for i, health in enumerate(self._health):
            if health.down and health.pending and self._usable(i):
                self._kick_backfill(i)

    # -- reads and writes ----------------------------------------------------------------

    def _accept(
        self, i: int, key: str, raw: bytes, decode: Callable[[bytes], T]
    ) -> T | Literal[_Rejected.REJECTED]:
        """Check and decode an entry read from tier `i`; delete it there if it fails.

        Whatever the check or decoding raises is the entry's fault: its bytes came from
        a tier others write, so an IndexError deep in decoding is as much a damaged entry
        as a checksum mismatch. BaseExceptions (KeyboardInterrupt, SystemExit) are not
        caught. A MemoryError may be this process's and not the entry's: the entry is
        then skipped but kept; the compile that follows replaces it if it was bad, and
        fails the same way if memory is short.
        """
        tier = self.tiers[i].name
        try:
            if self.check_entry is not None:
                self.check_entry(key, raw)
            return decode(raw)
        except MemoryError:
            logger.warning(
                "cache entry %s on the %s tier (%d bytes) ran out of memory while loading; "
                "compiling it again",
                key,
                tier,
                len(raw),
            )
            return _REJECTED
        except Exception as exc:  # noqa: BLE001 - see the docstring
            logger.warning(
                "cache entry %s on the %s tier does not load (%s: %s); deleting it and "
                "compiling again",
                key,
                tier,
                type(exc).__name__,
                exc,
            )
            self._call(i, self.tiers[i].delete, key)
            return _REJECTED

    def _lookup(
        self, key: str, decode: Callable[[bytes], T], tiers: Sequence[int] | None = None
    ) -> tuple[T, int] | None:
        """Return `(decoded value, tier index)` from the first tier that holds a good copy.

        A copy that fails `_accept` is deleted from its tier and the search goes on; a
        hit below the top is copied up into the faster tiers.
        """
        for i in range(len(self.tiers)) if tiers is None else tiers:
            if not self._usable(i):
                continue
            raw = self._call(i, self.tiers[i].get, key)
            if raw is _FAILED or raw is None:
                continue
            value = self._accept(i, key, raw, decode)
            if value is _REJECTED:
                continue
            for j in range(i):
                if self._usable(j):
                    self._call(j, self.tiers[j].put, key, raw)
            return value, i
        return None

    def get(self, key: str) -> bytes | None:
        """Return the bytes cached under `key` from the fastest tier that has them, or None.

        Entries that fail `check_entry` are deleted on the way, as in `get_or_compute`.
        """
        self._probe_recovering()
        found = self._lookup(key, _identity)
        return None if found is None else found[0]

    def put(self, key: str, value: bytes) -> None:
        """Write `value` to every tier; a tier that fails gets it when it comes back."""
        self._write_all(key, value, {})

    def delete(self, key: str) -> None:
        """Remove `key` from every reachable tier."""
        for i, tier in enumerate(self.tiers):
            if self._usable(i):
                self._call(i, tier.delete, key)

    def _write_all(self, key: str, raw: bytes, leases: dict[int, Lease]) -> None:
        """Write fastest tier first, releasing each tier's lease as soon as it has the value.

        Releasing the disk lease before the (slower) Redis upload lets the other
        processes of this machine load the value from disk right away.
        """
        for i, tier in enumerate(self.tiers):
            if not self._usable(i) or self._call(i, tier.put, key, raw) is _FAILED:
                self._remember_missed(i, key)
            lease = leases.pop(i, None)
            if lease is not None:
                lease.release()

    # -- single flight ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _local_flight(self, key: str, deadline: float, wait_timeout_s: float) -> Iterator[None]:
        """Hold the per-key lock of this process (threads queue here, not on files).

        Past `deadline` the caller goes on without it and compiles the key itself.
        """
        with self._flights_lock:
            entry = self._flights.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        lock: threading.Lock = entry[0]
        try:
            if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                logger.warning(
                    "waited %.1f s for another thread of this process to compile %s; "
                    "compiling it here too (raise wait_timeout_s if compiles take longer)",
                    wait_timeout_s,
                    key,
                )
                yield
                return
            try:
                yield
            finally:
                lock.release()
        finally:
            with self._flights_lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._flights[key]

    def _await_lease(
        self,
        i: int,
        lease: Lease,
        key: str,
        decode: Callable[[bytes], T],
        deadline: float,
        wait_timeout_s: float,
    ) -> bool | tuple[T, int]:
        """Take `lease`, or load what its holder publishes on tier `i` meanwhile.

        Returns:
            True when the lease is held; False to go on without it: tier `i` failed, the
            lock is not one an fsmcompile client takes, or `deadline` passed; or
            `(value, tier)` once the holder's result appeared.
        """
        delay_s = _POLL_FIRST_S
        tier = self.tiers[i].name
        late = time.monotonic() >= deadline
        while True:
            got = self._call(i, lease.try_acquire)
            if got is _FAILED:
                return False
            if got:
                return True
            found = self._lookup(key, decode, tiers=(i,))
            if found is not None:
                return found
            holder_ttl_s = lease.holder_ttl_s()
            if holder_ttl_s is not None and holder_ttl_s > self.max_lock_ttl_s:
                logger.warning(
                    "the compile lock of %s on the %s tier %s, longer than any compile lock "
                    "(max_lock_ttl_s=%.0f): not waiting for it; compiling locally and "
                    "publishing, the lock is left to its owner",
                    key,
                    tier,
                    "never expires"
                    if holder_ttl_s == float("inf")
                    else f"expires in {holder_ttl_s:.0f} s",
                    self.max_lock_ttl_s,
                )
                return False
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                # One warning per call: a caller that already gave up waiting for a
                # thread of this process has said so.
                logger.log(
                    logging.DEBUG if late else logging.WARNING,
                    "waited %.1f s for another process to compile %s (lock on the %s tier); "
                    "compiling locally and publishing (raise wait_timeout_s if compiles "
                    "take longer, or check that process)",
                    wait_timeout_s,
                    key,
                    tier,
                )
                return False
            time.sleep(min(remaining_s, delay_s * random.uniform(0.8, 1.2)))
            delay_s = min(delay_s * 1.5, _POLL_MAX_S)

    @overload
    def get_or_compute(
        self,
        key: str,
        compute: Callable[[], bytes],
        *,
        wait_timeout_s: float | None = None,
        lock_ttl_s: float | None = None,
    ) -> tuple[bytes, CacheEvent]: ...

    @overload
    def get_or_compute(
        self,
        key: str,
        compute: Callable[[], bytes],
        *,
        decode: Callable[[bytes], T],
        wait_timeout_s: float | None = None,
        lock_ttl_s: float | None = None,
    ) -> tuple[T, CacheEvent]: ...

    def get_or_compute(
        self,
        key: str,
        compute: Callable[[], bytes],
        *,
        decode: Callable[[bytes], Any] = _identity,
        wait_timeout_s: float | None = None,
        lock_ttl_s: float | None = None,
    ) -> tuple[Any, CacheEvent]:
        """Return the value for `key`, compiling it with `compute` at most once per fleet.

        Args:
            key: cache key, normally from `cache_key(...)`.
            compute: builds the artifact bytes on a miss; runs in this thread.
            decode: turns bytes into the returned object. If it (or `check_entry`)
                raises anything for a cached copy, that copy is deleted and the next tier
                (or `compute`) is used; if it raises for the freshly computed value, that
                error propagates and nothing is cached.
            wait_timeout_s: bound on waiting for another compile (default: the cache's);
                past it this call compiles locally.
            lock_ttl_s: lifetime of a dead holder's lock (default: the cache's).

        Returns:
            `(decode(bytes), CacheEvent)`.

        Raises:
            Exception: whatever `compute` raises (no lock is left behind), or what
                `check_entry` or `decode` raise for its result.
        """
        wait_s = self.wait_timeout_s if wait_timeout_s is None else wait_timeout_s
        ttl_s = self.lock_ttl_s if lock_ttl_s is None else lock_ttl_s
        self._probe_recovering()
        found = self._lookup(key, decode)
        if found is not None:
            return self._hit(key, found, 0.0)

        start = time.monotonic()
        deadline = start + wait_s
        with self._local_flight(key, deadline, wait_s):
            found = self._lookup(key, decode)
            if found is not None:
                return self._hit(key, found, time.monotonic() - start)
            held: dict[int, Lease] = {}
            try:
                for i, tier in enumerate(self.tiers):
                    lease = tier.lease(key, ttl_s=ttl_s) if self._usable(i) else None
                    if lease is None:
                        continue
                    outcome = self._await_lease(i, lease, key, decode, deadline, wait_s)
                    if isinstance(outcome, tuple):
                        return self._hit(key, outcome, time.monotonic() - start)
                    if outcome:
                        held[i] = lease
                        # The holder we waited for may have published and released.
                        found = self._lookup(key, decode)
                        if found is not None:
                            return self._hit(key, found, time.monotonic() - start)
                waited_s = time.monotonic() - start
                t0 = time.monotonic()
                raw = compute()
                compile_s = time.monotonic() - t0
                if self.check_entry is not None:
                    self.check_entry(key, raw)
                value = decode(raw)
                self._write_all(key, raw, held)
            finally:
                for lease in held.values():
                    lease.release()
        logger.info(
            "compiled %s in %.3f s (%d bytes, waited %.3f s)", key, compile_s, len(raw), waited_s
        )
        return value, CacheEvent(hit=False, tier=None, compile_s=compile_s, waited_s=waited_s)

    def _hit(self, key: str, found: tuple[T, int], waited_s: float) -> tuple[T, CacheEvent]:
        value, i = found
        tier = self.tiers[i].name
        # One INFO line per cache event, except the hot in-process tier.
        logger.log(
            logging.DEBUG if i == 0 and waited_s == 0.0 else logging.INFO,
            "cache hit %s on the %s tier (waited %.3f s)",
            key,
            tier,
            waited_s,
        )
        return value, CacheEvent(hit=True, tier=tier, compile_s=None, waited_s=waited_s)

    # -- housekeeping ----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Return each tier's stats plus whether it is currently skipped as down."""
        with self._health_lock:
            down = [h.down for h in self._health]
            pending = [len(h.pending) for h in self._health]
        return {
            "tiers": [
                {**tier.stats(), "down": d, "pending_writes": p}
                for tier, d, p in zip(self.tiers, down, pending, strict=True)
            ]
        }

    def close(self) -> None:
        """Close every tier."""
        for tier in self.tiers:
            tier.close()

    def __enter__(self) -> TieredCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
