"""The one interface every cache tier implements, plus the checksum framing they share.

A store maps a string key to opaque artifact bytes. `get` never interprets the bytes;
it only promises that what it returns is exactly what some `put` stored: a damaged
entry is detected by its checksum, deleted, logged at WARNING and reported as a
miss, so a truncated file or an overwritten Redis chunk can never reach the matcher.

Maintenance goes through the same interface without those side effects: `keys` and
`entries` list, `stat` describes one entry, `verify` says whether an entry is the artifact
its key names and why not (`entries.py`), `purge` empties. So the CLI, a health check
and the tiered cache all speak to a tier through one set of methods, never its layout.

Tiers that can coordinate several processes (disk: a file lock; Redis: a lock key) also
hand out a `Lease` so `TieredCache` can make one process compile while the rest wait.
"""

from __future__ import annotations

import hashlib
import os
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar

from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.store.entries import (
    EntryStat,
    EntryVerdict,
    judge_value,
    newer_format_verdict,
    reason_of,
)

__all__ = [
    "DEFAULT_MAX_ENTRY_BYTES",
    "DIGEST_BYTES",
    "MAX_ENTRY_BYTES_ENV",
    "EntryStat",
    "EntryVerdict",
    "Lease",
    "Store",
    "digest_of",
    "entry_limit",
    "frame_value",
    "read_frame_head",
    "unframe_value",
]

#: sha256, not blake2b: with SHA-NI it hashes ~1.7 GB/s against blake2b's ~1.1 GB/s,
#: and a 100 MB index is hashed on every read from disk or Redis.
DIGEST_BYTES = 32

#: Largest entry a shared tier serves or stores (1 GiB); bigger ones are refused unread,
#: so a planted entry or manifest cannot make a reader allocate more than this.
DEFAULT_MAX_ENTRY_BYTES = 1024**3
MAX_ENTRY_BYTES_ENV = "FSMCOMPILE_MAX_ENTRY_BYTES"

_S = TypeVar("_S", bound="Store")

# magic, format, key length, payload length, sha256(key + payload)
_HEADER = struct.Struct(">4sBxxxIQ32s")
_MAGIC = b"FSMC"
_FRAME_FORMAT = 1


def digest_of(*parts: bytes | memoryview) -> bytes:
    """Return the sha256 digest of the concatenation of `parts`, without concatenating."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.digest()


def entry_limit(max_entry_bytes: int | None) -> int:
    """Resolve a tier's `max_entry_bytes`: the argument, else $FSMCOMPILE_MAX_ENTRY_BYTES,
    else 1 GiB.

    Every client sharing a tier should use the same limit: an entry above a reader's limit
    is a damaged entry to that reader, which deletes it.

    Raises:
        ValueError: the value (or the environment variable) is not a positive integer.
    """
    if max_entry_bytes is None:
        text = os.environ.get(MAX_ENTRY_BYTES_ENV, "").strip()
        if not text:
            return DEFAULT_MAX_ENTRY_BYTES
        try:
            max_entry_bytes = int(text)
        except ValueError:
            raise ValueError(
                f"{MAX_ENTRY_BYTES_ENV}={text!r} is not a whole number of bytes"
            ) from None
    if max_entry_bytes <= 0:
        raise ValueError(f"max_entry_bytes must be > 0, got {max_entry_bytes}")
    return max_entry_bytes


def frame_value(key: str, value: bytes) -> tuple[bytes, bytes]:
    """Build the header that precedes `value` on disk.

    The key is stored inside the frame so `keys()` can list entries whose file names
    are hashes, and it is covered by the checksum so a frame can't be served for a key
    it was not written under.

    Returns:
        `(header, key_bytes)`; the entry is `header + key_bytes + value`.
    """
    key_bytes = key.encode("utf-8")
    header = _HEADER.pack(
        _MAGIC, _FRAME_FORMAT, len(key_bytes), len(value), digest_of(key_bytes, value)
    )
    return header, key_bytes


def unframe_value(
    read: Callable[[int], bytes], total_bytes: int, *, expected_key: str | None, source: str
) -> tuple[str, bytes]:
    """Read and verify one framed entry through `read(n) -> bytes`.

    Args:
        read: a file's `read` method positioned at the start of the frame.
        total_bytes: the entry's size on disk, to catch truncation before hashing.
        expected_key: the key the caller asked for, or None to accept any (listing).
        source: path or key for the error message.

    Returns:
        `(key, value)`.

    Raises:
        ArtifactCorruptError: bad magic, truncated, wrong key or checksum mismatch.
    """
    head = read(_HEADER.size)
    if len(head) != _HEADER.size:
        raise ArtifactCorruptError("cache entry shorter than its header", source)
    magic, fmt, key_len, value_len, digest = _HEADER.unpack(head)
    if magic != _MAGIC or fmt != _FRAME_FORMAT:
        raise ArtifactCorruptError("not a fsmcompile cache entry (bad magic)", source)
    if total_bytes != _HEADER.size + key_len + value_len:
        raise ArtifactCorruptError(
            f"cache entry is {total_bytes} bytes, header says "
            f"{_HEADER.size + key_len + value_len} (truncated or appended)",
            source,
        )
    key_bytes = read(key_len)
    value = read(value_len)
    if len(key_bytes) != key_len or len(value) != value_len:
        raise ArtifactCorruptError("cache entry truncated while reading", source)
    if digest_of(key_bytes, value) != digest:
        raise ArtifactCorruptError("cache entry checksum mismatch", source)
    try:
        key = key_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactCorruptError("cache entry key is not UTF-8", source) from exc
    if expected_key is not None and key != expected_key:
        raise ArtifactCorruptError(f"cache entry holds key {key!r}", source)
    return key, value


def read_frame_head(read: Callable[[int], bytes]) -> tuple[str, int] | None:
    """Read only the key and value length of a framed entry (for listing); None if it is
    not a frame or its key is not UTF-8."""
    head = read(_HEADER.size)
    if len(head) != _HEADER.size:
        return None
    magic, fmt, key_len, value_len, _digest = _HEADER.unpack(head)
    if magic != _MAGIC or fmt != _FRAME_FORMAT:
        return None
    key_bytes = read(key_len)
    try:
        return key_bytes.decode("utf-8"), value_len
    except UnicodeDecodeError:
        return None


class Lease(ABC):
    """An exclusive, cross-process claim on one key, used to compile each key once.

    `try_acquire` never blocks, so the cache can poll the value while it waits and
    give up at its own deadline. A lease is single-use: acquire at most once, release
    once (releasing an unheld lease is a no-op).
    """

    @abstractmethod
    def try_acquire(self) -> bool:
        """Take the lease if nobody holds it; True when this caller now holds it.

        Raises:
            StoreError: the backing store failed (the cache then skips this lease).
        """

    @abstractmethod
    def release(self) -> None:
        """Give the lease back; never raises (a lost lease simply expires)."""

    def holder_ttl_s(self) -> float | None:
        """How long the claim that made `try_acquire` fail had left to live, in seconds.

        `math.inf` for a claim that never expires (no fsmcompile client takes one, so
        the cache does not wait for it), None when unknown or when the claim dies with
        its holder (file locks).
        """
        return None


class Store(ABC):
    """One cache tier: bytes in, the same bytes out, or None; and a look at what it holds.

    Implementations are thread-safe. Errors that mean "this tier cannot serve right now"
    are raised as `StoreUnavailableError` (or another `StoreError`) so the tiered cache
    can degrade to the other tiers instead of failing the request.

    A tier implements `get`, `put`, `delete`, `keys`, `stat`, `stats` and `_peek`; the
    maintenance methods (`verify`, `entries`, `verify_entries`, `purge`) are built on
    them here, and a tier overrides them only where its storage can hold entries that no
    key names (a disk file whose header is damaged).
    """

    #: Tier name used in `CacheEvent.tier`, logs and stats: "memory", "disk", "redis".
    name: str = "store"

    @property
    def location(self) -> str:
        """Where the tier keeps its entries, for people: a folder, a redacted URL."""
        return self.name

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """Return the value stored under `key`, or None on a miss or a corrupt entry."""

    @abstractmethod
    def put(self, key: str, value: bytes) -> None:
        """Store `value` under `key`, replacing any previous value atomically."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove `key`; deleting a missing key is not an error."""

    @abstractmethod
    def keys(self, prefix: str = "") -> Iterator[str]:
        """Yield the stored keys starting with `prefix`, in no particular order."""

    @abstractmethod
    def stat(self, key: str) -> EntryStat | None:
        """Describe the entry under `key` without reading its value; None if absent.

        Nothing is deleted, counted or marked as recently used.

        Raises:
            StoreError: the tier cannot be read.
        """

    @abstractmethod
    def stats(self, *, detailed: bool = False) -> dict[str, Any]:
        """Return counters and sizes for monitoring (JSON-serializable values).

        Args:
            detailed: also what costs a scan or a server round trip (Redis: the entry
                count and the server's memory figures); the tiered cache never asks.

        Raises:
            StoreError: only with `detailed`, when the tier cannot be read.
        """

    @abstractmethod
    def _peek(self, key: str) -> bytes | None:
        """The value under `key`, checked against the tier's own framing and checksum,
        with none of `get`'s side effects (no delete, no counters, no LRU bump).

        Raises:
            ArtifactCorruptError: the tier's framing or checksum does not hold.
            StoreError: the tier cannot be read.
        """

    def _where(self, key: str) -> str:
        """`EntryStat.location` of `key`: the file or Redis key that would hold it."""
        del key
        return self.location

    def verify(self, key: str) -> EntryVerdict:
        """Check the entry under `key` as every cache read does, deleting nothing.

        The tier's framing and checksum, then the artifact's own checksum and the identity
        check (`entry_check.check_entry`: kind, format, tokenizer and spec are the key's).
        A key naming a newer artifact format is `skipped` unread: it belongs to newer
        clients sharing the tier.

        Returns:
            The verdict; `status` is "missing" when nothing is stored under `key`.

        Raises:
            StoreError: the tier cannot be read.
        """
        where = self._where(key)
        skipped = newer_format_verdict(key, self.name, where)
        if skipped is not None:
            return skipped
        try:
            value = self._peek(key)
        except ArtifactCorruptError as exc:
            return EntryVerdict(key, self.name, where, "corrupt", reason_of(exc))
        if value is None:
            return EntryVerdict(key, self.name, where, "missing")
        return judge_value(key, value, self.name, where)

    def entries(self, prefix: str = "") -> Iterator[EntryStat]:
        """Yield `stat` of every entry whose key starts with `prefix`, sorted by key.

        Raises:
            StoreError: the tier cannot be read.
        """
        for key in sorted(self.keys(prefix)):
            found = self.stat(key)
            if found is not None:  # None: deleted meanwhile
                yield found

    def _verify_entry(self, entry: EntryStat) -> EntryVerdict:
        """`verify` for one listed entry (a tier with keyless entries overrides this)."""
        if entry.key is None:
            raise ValueError(f"{self.name} listed an entry without a key: {entry.location}")
        return self.verify(entry.key)

    def _delete_entry(self, entry: EntryStat) -> None:
        """Remove one listed entry (a tier with keyless entries overrides this)."""
        if entry.key is not None:
            self.delete(entry.key)

    def verify_entries(
        self, prefix: str = "", *, delete_corrupt: bool = False
    ) -> Iterator[EntryVerdict]:
        """Verify every entry under `prefix`, in `entries` order.

        Args:
            prefix: only keys starting with this.
            delete_corrupt: delete each `corrupt` entry (its verdict says `deleted`);
                `skipped` ones are always kept.

        Yields:
            One verdict per entry still present when its turn came.

        Raises:
            StoreError: the tier cannot be read.
        """
        for entry in self.entries(prefix):
            verdict = self._verify_entry(entry)
            if verdict.status == "missing":
                continue
            if verdict.status == "corrupt" and delete_corrupt:
                self._delete_entry(entry)
                verdict = replace(verdict, deleted=True)
            yield verdict

    def purge(self, prefix: str = "") -> list[EntryStat]:
        """Delete every entry under `prefix` (all of them when empty).

        Returns:
            The entries deleted, as listed just before.

        Raises:
            StoreError: the tier cannot be read or written.
        """
        doomed = list(self.entries(prefix))
        for entry in doomed:
            self._delete_entry(entry)
        return doomed

    def lease(self, key: str, *, ttl_s: float) -> Lease | None:
        """Return a cross-process lease on `key`, or None if this tier cannot coordinate.

        Args:
            key: the cache key being compiled.
            ttl_s: how long the lease survives its holder's death (tiers whose locks die
                with the process, such as file locks, ignore it).
        """
        del key, ttl_s
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, most tiers own nothing
        """Release sockets and file handles; the store is unusable afterwards."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
