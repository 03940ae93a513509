"""Redis tier: the fleet-wide cache, so each spec is compiled once for every server.

Key layout under `prefix` (default "fsmcompile:"); `{key}` is a Cluster hash tag, so an
entry's manifest, chunks and lock live on one node:

    <prefix>m:{key}                manifest (msgpack): size, sha256, chunk count, version id,
                                   and the value itself when it fits in one chunk
    <prefix>c:{key}:<version>:<i>  chunk i of a value larger than chunk_bytes
    <prefix>l:{key}                compile lock: random token, PX expiry, heartbeat-renewed

Chunks are written under a fresh version id first and the manifest last, so a reader
never assembles a half-written value; the previous version's chunks are left to expire
a minute later instead of being deleted, so a reader holding the old manifest can
finish. Every read is checked against the manifest's sha256.

Other clients write these keys too, so nothing read is trusted before it is checked:
the manifest is read with GETRANGE up to the entry limit and checked field by field
(`manifest.py`) before any chunk key is named, chunks are read with GETRANGE up to the
length the manifest gives them, and a key of the wrong Redis type is a damaged entry,
not an unavailable tier.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import redis.exceptions as rex

from fsmcompile.errors import ArtifactCorruptError, StoreError, StoreUnavailableError
from fsmcompile.store.base import Store, digest_of, entry_limit
from fsmcompile.store.entries import EntryStat, format_of_key
from fsmcompile.store.manifest import (
    MANIFEST_OVERHEAD_BYTES,
    MAX_CHUNKS,
    Manifest,
    decode_manifest,
    encode_manifest,
)
from fsmcompile.store.redis_connect import URL_FORMS, connect_redis, redact_url
from fsmcompile.store.redis_lease import RedisLease

__all__ = ["RedisLease", "RedisStore", "connect_redis", "redact_url"]

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024
# How long superseded chunks survive a replace, for readers still holding the old manifest.
_GRACE_MS = 60_000
# Chunks of a write that died before its manifest landed vanish after this.
_ORPHAN_MS = 3_600_000
# Chunks sent per pipeline round trip: bounds the bytes buffered in flight.
_CHUNKS_PER_ROUND = 8


class RedisStore(Store):
    """Chunked, checksummed values in Redis, with TTL and a namespace prefix.

    Construction does not connect (so a server can start while Redis is down); the first
    operation does, and every Redis failure surfaces as `StoreUnavailableError` (can't
    connect, timeout, bad credentials) or `StoreError` (the server refused a command,
    e.g. out of memory).

    Args:
        url: see `connect_redis`.
        prefix: namespace for every key this store touches.
        ttl_s: expiry of each entry in seconds; None keeps entries until deleted or
            evicted by Redis' own maxmemory policy.
        chunk_bytes: values larger than this are split into chunks of this size, which
            keeps each command small enough not to stall a single-threaded server.
        socket_timeout_s: per-operation timeout; Redis slower than this is "down".
        connect_timeout_s: TCP connect timeout.
        cluster: treat `url` as a Redis Cluster seed node.
        max_entry_bytes: largest value read or written (see `entry_limit`: default
            $FSMCOMPILE_MAX_ENTRY_BYTES, else 1 GiB); a manifest describing a larger one
            is a damaged entry, a larger value is not stored.

    Raises:
        StoreUnavailableError: malformed URL or unknown scheme.
        ValueError: non-positive `chunk_bytes`, `ttl_s` or `max_entry_bytes`.
    """

    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "fsmcompile:",
        ttl_s: float | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        socket_timeout_s: float = 2.0,
        connect_timeout_s: float = 2.0,
        cluster: bool = False,
        max_entry_bytes: int | None = None,
    ) -> None:
        self.max_entry_bytes = entry_limit(max_entry_bytes)
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be > 0, got {chunk_bytes}")
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0 or None, got {ttl_s}")
        self.url = redact_url(url)
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.chunk_bytes = chunk_bytes
        self.socket_timeout_s = socket_timeout_s
        self._connect_args = (url, cluster, socket_timeout_s, connect_timeout_s)
        self._client_lock = threading.Lock()
        self._client: Any = None
        self._closed = False
        if not cluster:
            self._client = self._new_client()  # validates the URL now; connects lazily
        elif not url.lower().startswith(("redis://", "rediss://")):
            raise StoreUnavailableError(f"bad Redis Cluster URL {self.url}; expected {URL_FORMS}")
        self._stats_lock = threading.Lock()
        self._counters = {
            "hits": 0,
            "misses": 0,
            "puts": 0,
            "corrupt": 0,
            "bytes_read": 0,
            "bytes_written": 0,
        }

    # -- plumbing ---------------------------------------------------------------------

    def _new_client(self) -> Any:
        url, cluster, socket_timeout_s, connect_timeout_s = self._connect_args
        return connect_redis(
            url,
            cluster=cluster,
            socket_timeout_s=socket_timeout_s,
            connect_timeout_s=connect_timeout_s,
        )

    @property
    def client(self) -> Any:
        """The redis-py client (created on first use for Cluster, which connects)."""
        client = self._client
        if client is None:
            with self._client_lock:
                if self._closed:
                    raise StoreUnavailableError(f"RedisStore for {self.url} is closed")
                if self._client is None:
                    self._client = self._new_client()
                client = self._client
        return client

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Translate redis-py errors into the store hierarchy with a message that helps."""
        try:
            yield
        except (rex.AuthenticationError, rex.AuthorizationError) as exc:
            raise StoreUnavailableError(
                f"Redis at {self.url} rejected the credentials while trying to {action}: "
                f"{exc}. Put the right password in the URL (redis://[user]:password@host:port"
                f"/db) or check the server's requirepass / ACL user."
            ) from exc
        except rex.NoPermissionError as exc:
            raise StoreUnavailableError(
                f"the Redis ACL user at {self.url} may not {action}: {exc}; grant it "
                f"read/write on '{self.prefix}*' keys and SET, GET, GETRANGE, DEL, PEXPIRE, "
                f"PERSIST, PTTL, SCAN, EVAL"
            ) from exc
        except (rex.ConnectionError, rex.TimeoutError, rex.ClusterError, OSError) as exc:
            raise StoreUnavailableError(
                f"cannot reach Redis at {self.url} to {action}: {exc}; is the server up, "
                f"the URL right and the network fast enough for socket_timeout_s="
                f"{self.socket_timeout_s}?"
            ) from exc
        except rex.RedisClusterException as exc:
            raise StoreUnavailableError(f"Redis Cluster at {self.url}: {exc}") from exc
        except rex.RedisError as exc:
            raise StoreError(f"Redis at {self.url} failed to {action}: {exc}") from exc

    def _count(self, **deltas: int) -> None:
        with self._stats_lock:
            for name, n in deltas.items():
                self._counters[name] += n

    def _manifest_key(self, key: str) -> str:
        return f"{self.prefix}m:{{{key}}}"

    def _chunk_keys(self, key: str, version: str, count: int) -> list[str]:
        return [f"{self.prefix}c:{{{key}}}:{version}:{i}" for i in range(count)]

    def _lock_key(self, key: str) -> str:
        return f"{self.prefix}l:{{{key}}}"

    # -- Store --------------------------------------------------------------------------

    def ping(self) -> None:
        """Check that Redis answers and accepts the credentials.

        Raises:
            StoreUnavailableError: unreachable, too slow, or authentication failed.
        """
        with self._errors("ping"):
            self.client.ping()

    def _read_manifest(self, reader: Any, mkey: str) -> bytes | None:
        """A manifest's bytes, at most the entry limit plus framing (GETRANGE, never GET).

        Raises:
            _WrongType: the key holds a list, hash, ... instead of a string.
        """
        try:
            raw = reader.getrange(mkey, 0, self.max_entry_bytes + MANIFEST_OVERHEAD_BYTES)
        except rex.ResponseError as exc:
            _raise_if_wrong_type(exc)
            raise
        return bytes(raw) if raw else None

    def _peek(self, key: str) -> bytes | None:
        """Return the value under `key`, verified, without deleting anything.

        Returns:
            The value, or None when there is none (or it was rewritten three times while
            being read: busy, not damaged).

        Raises:
            ArtifactCorruptError: the manifest or a chunk is damaged, planted or of the
                wrong Redis type; `.manifest` holds the manifest bytes read (None if none
                could be), for a delete that spares a writer's fresh replacement.
            StoreUnavailableError: Redis cannot be reached.
        """
        with self._errors(f"read {key!r}"):
            try:
                return self._read_entry(key)
            except _WrongType:
                raise _DamagedEntry("manifest key is not a string", key, None) from None

    def _read_entry(self, key: str) -> bytes | None:
        mkey = self._manifest_key(key)
        for _ in range(3):  # a concurrent replace can pull chunks from under us
            raw = self._read_manifest(self.client, mkey)
            if raw is None:
                return None
            try:
                manifest = decode_manifest(raw, self.max_entry_bytes)
            except ArtifactCorruptError as exc:
                raise _DamagedEntry(str(exc), key, raw) from exc
            value = manifest.data
            if value is None:
                value = self._read_chunks(key, manifest)
                if value is None:
                    if self._read_manifest(self.client, mkey) != raw:
                        continue  # replaced while we read: read the new version
                    raise _DamagedEntry("a chunk is missing or damaged", key, raw)
            if digest_of(value) != manifest.sha256:
                raise _DamagedEntry("checksum mismatch", key, raw)
            return value
        return None

    def _read_chunks(self, key: str, manifest: Manifest) -> bytes | None:
        """The chunks joined, or None when one is missing, short or not a string."""
        assert manifest.version is not None
        lengths = manifest.chunk_lengths()
        pipe = self.client.pipeline(transaction=False)
        for ckey, length in zip(
            self._chunk_keys(key, manifest.version, manifest.chunks), lengths, strict=True
        ):
            pipe.getrange(ckey, 0, length - 1)
        chunks = pipe.execute(raise_on_error=False)
        for chunk, length in zip(chunks, lengths, strict=True):
            if not isinstance(chunk, bytes) or len(chunk) != length:
                return None
        return b"".join(chunks)

    def get(self, key: str) -> bytes | None:
        try:
            value = self._peek(key)
        except _DamagedEntry as exc:
            self._drop_corrupt(key, exc.manifest, exc.reason)
            return None
        if value is None:
            self._count(misses=1)
            return None
        self._count(hits=1, bytes_read=len(value))
        return value

    def _drop_corrupt(self, key: str, raw: bytes | None, reason: str) -> None:
        """Delete a damaged entry, unless a writer has already replaced it."""
        logger.warning("deleting corrupt Redis cache entry %s (%s)", key, reason)
        self._count(corrupt=1, misses=1)
        mkey = self._manifest_key(key)
        try:
            with self.client.pipeline() as pipe:
                pipe.watch(mkey)
                if raw is None or self._read_manifest(pipe, mkey) == raw:
                    pipe.multi()
                    pipe.delete(mkey)
                    pipe.execute()
        except rex.WatchError:
            pass  # a writer replaced it meanwhile: the new entry is not ours to delete
        except (rex.RedisError, rex.RedisClusterException, _WrongType) as exc:
            # Cluster pipelines may refuse WATCH: delete outright; at worst a fresh
            # entry written this instant is lost and gets recompiled.
            logger.debug("conditional delete of %s failed (%s); deleting outright", key, exc)
            with contextlib.suppress(rex.RedisError, rex.RedisClusterException):
                self.client.delete(mkey)

    def put(self, key: str, value: bytes) -> None:
        view = memoryview(value)
        count = -(-len(view) // self.chunk_bytes)
        if len(view) > self.max_entry_bytes or count > MAX_CHUNKS:
            logger.debug(
                "not caching %s in Redis: %d bytes in %d chunks is over max_entry_bytes=%d "
                "or %d chunks",
                key,
                len(view),
                count,
                self.max_entry_bytes,
                MAX_CHUNKS,
            )
            return
        ttl_ms = None if self.ttl_s is None else max(1, int(self.ttl_s * 1000))
        chunk_keys: list[str] = []
        with self._errors(f"write {key!r}"):
            if len(view) <= self.chunk_bytes:
                manifest = Manifest(len(view), digest_of(view), data=bytes(view))
            else:
                version = secrets.token_hex(8)
                manifest = Manifest(
                    len(view),
                    digest_of(view),
                    version=version,
                    chunks=count,
                    chunk_bytes=self.chunk_bytes,
                )
                chunk_keys = self._chunk_keys(key, version, count)
                # Chunks outlive the manifest, so a reader never finds the manifest without
                # them; without a TTL they start with a long one and are persisted below.
                chunk_px = _ORPHAN_MS if ttl_ms is None else ttl_ms + _GRACE_MS
                for start in range(0, count, _CHUNKS_PER_ROUND):
                    pipe = self.client.pipeline(transaction=False)
                    for i in range(start, min(count, start + _CHUNKS_PER_ROUND)):
                        piece = view[i * self.chunk_bytes : (i + 1) * self.chunk_bytes]
                        pipe.set(chunk_keys[i], piece, px=chunk_px)
                    pipe.execute()
            old = self._set_manifest(key, encode_manifest(manifest), ttl_ms)
            pipe = self.client.pipeline(transaction=False)
            if ttl_ms is None:
                for ckey in chunk_keys:
                    pipe.persist(ckey)
            for ckey in self._old_chunk_keys(key, old):
                pipe.pexpire(ckey, _GRACE_MS)
            pipe.execute()
        self._count(puts=1, bytes_written=len(view))

    def _set_manifest(self, key: str, encoded: bytes, ttl_ms: int | None) -> bytes | None:
        """Publish a manifest; return the one it replaced (a planted non-string is dropped)."""
        mkey = self._manifest_key(key)
        try:
            try:
                old: bytes | None = self.client.set(mkey, encoded, px=ttl_ms, get=True)
            except rex.ResponseError as exc:
                _raise_if_wrong_type(exc)
                raise
        except _WrongType:
            logger.warning("replacing Redis key %s, which is not a string", mkey)
            self.client.delete(mkey)
            self.client.set(mkey, encoded, px=ttl_ms)
            return None
        return old

    def _old_chunk_keys(self, key: str, old: bytes | None) -> list[str]:
        if old is None:
            return []
        try:
            manifest = decode_manifest(old, self.max_entry_bytes)
        except ArtifactCorruptError:
            return []
        if manifest.version is None:
            return []
        return self._chunk_keys(key, manifest.version, manifest.chunks)

    def delete(self, key: str) -> None:
        mkey = self._manifest_key(key)
        with self._errors(f"delete {key!r}"):
            try:
                raw = self._read_manifest(self.client, mkey)
            except _WrongType:
                raw = None
            self.client.delete(mkey, *self._old_chunk_keys(key, raw))

    @property
    def location(self) -> str:
        return self.url

    def _where(self, key: str) -> str:
        return self._manifest_key(key)

    def stat(self, key: str) -> EntryStat | None:
        """The size the manifest claims (None when it is damaged) and the entry's TTL."""
        mkey = self._manifest_key(key)
        with self._errors(f"read {key!r}"):
            try:
                raw = self._read_manifest(self.client, mkey)
            except _WrongType:
                raw = b""  # present but planted: listed, sizeless, verify calls it corrupt
            if raw is None:
                return None
            ttl_ms = self.client.pttl(mkey)
        try:
            size: int | None = decode_manifest(raw, self.max_entry_bytes).size
        except ArtifactCorruptError:
            size = None
        return EntryStat(
            key,
            self.name,
            mkey,
            size,
            format_version=format_of_key(key),
            expires_in_s=ttl_ms / 1000 if isinstance(ttl_ms, int) and ttl_ms >= 0 else None,
        )

    def keys(self, prefix: str = "") -> Iterator[str]:
        head = f"{self.prefix}m:{{"
        pattern = _glob_escape(head + prefix) + "*"
        with self._errors("list keys"):
            for name in self.client.scan_iter(match=pattern, count=1000):
                text = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
                if text.startswith(head) and text.endswith("}"):
                    yield text[len(head) : -1]

    def stats(self, *, detailed: bool = False) -> dict[str, Any]:
        """Counters of this client; with `detailed`, also the entry count (a SCAN) and
        the server's version and memory figures (INFO)."""
        with self._stats_lock:
            counters = dict(self._counters)
        found: dict[str, Any] = {
            "name": self.name,
            "url": self.url,
            "prefix": self.prefix,
            "ttl_s": self.ttl_s,
            "chunk_bytes": self.chunk_bytes,
            **counters,
        }
        if detailed:
            entries = sum(1 for _ in self.keys())
            with self._errors("read server info"):
                info = self.client.info()
            found.update(
                entries=entries,
                server_version=info.get("redis_version"),
                used_memory_bytes=info.get("used_memory"),
                maxmemory_bytes=info.get("maxmemory"),
                maxmemory_policy=info.get("maxmemory_policy"),
            )
        return found

    def lease(self, key: str, *, ttl_s: float) -> RedisLease:
        """Return a lock lease on `key` that expires `ttl_s` after its holder stops renewing."""
        return RedisLease(self, self._lock_key(key), ttl_s=ttl_s)

    def close(self) -> None:
        with self._client_lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r}, ttl_s={self.ttl_s})"


class _WrongType(Exception):
    """Redis answered WRONGTYPE: a key of ours holds a list, hash, ... (planted)."""


def _raise_if_wrong_type(exc: rex.ResponseError) -> None:
    if str(exc).startswith("WRONGTYPE"):
        raise _WrongType(str(exc)) from exc


class _DamagedEntry(ArtifactCorruptError):
    """A damaged Redis entry, with the manifest bytes that describe it (None if unread)."""

    def __init__(self, reason: str, key: str, manifest: bytes | None) -> None:
        self.reason = reason
        self.manifest = manifest
        super().__init__(reason, f"redis {key}")


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
