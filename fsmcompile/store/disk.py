"""Local disk tier: the embedded default cache, shared by every process on one machine.

Layout under the cache directory (the `v1` level lets a future layout live beside it):

    v1/objects/ab/ab12...ef   one entry per key, named by sha256(key), framed + checksummed
    v1/locks/ab/ab12...ef     flock files that make one process per machine compile a key

Writes go to a temporary file in the same folder, are fsynced, then `os.replace`d over
the final name, so a reader sees the old entry or the new one, never a torn one, even
with several processes writing the same key at once.

Other users of the folder may plant files, so an entry is opened without following
symlinks or blocking (a FIFO), must be a regular file no larger than `max_entry_bytes`,
and is otherwise deleted as damaged before a byte of it is read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fsmcompile.errors import ArtifactCorruptError, StoreError, StoreUnavailableError
from fsmcompile.paths import default_cache_dir
from fsmcompile.store.base import (
    Lease,
    Store,
    entry_limit,
    frame_value,
    read_frame_head,
    unframe_value,
)
from fsmcompile.store.disk_lease import FileLease, same_file
from fsmcompile.store.entries import (
    EntryStat,
    EntryVerdict,
    format_of_key,
    judge_value,
    newer_format_verdict,
    reason_of,
)

__all__ = ["DiskStore", "default_cache_dir"]

logger = logging.getLogger(__name__)

DEFAULT_DISK_MAX_BYTES = 4 * 1024**3
_TMP_PREFIX = ".tmp-"
# Eviction deletes down to this fraction of max_bytes so that a full cache rescans the
# folder once per ~10% of capacity written, not on every put.
_LOW_WATER = 0.9
# Other processes write too; their bytes only show up in a scan, so rescan this often.
_RESCAN_EVERY_PUTS = 64
# Leftovers of crashed writers and lock files of long-finished compiles.
_STALE_TMP_S = 3600.0
_STALE_LOCK_S = 3600.0
# Frame header (56 bytes) plus the key, which `cache_key` keeps under 120 characters.
_FRAME_OVERHEAD_BYTES = 4096


def _hash_name(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class DiskStore(Store):
    """Content-addressed, checksummed files in a local folder, evicted least-recently-used.

    Recency is the file's mtime, which `get` bumps on every hit (atime is unreliable
    under `noatime`/`relatime` mounts). Eviction runs inside `put` once the estimated
    total passes `max_bytes`, deleting the oldest entries until the folder is below
    90% of it. The estimate counts this process's writes and is corrected by a folder
    scan every 64 puts, so other processes' writes may overshoot the bound briefly.

    Args:
        directory: cache folder; default from `default_cache_dir()`. Created on first
            write, so a read-only home only disables this tier instead of failing.
        max_bytes: bound on the total size of entry files.
        max_entry_bytes: largest entry file read or written (see `entry_limit`: default
            $FSMCOMPILE_MAX_ENTRY_BYTES, else 1 GiB); a larger file is a damaged entry.

    Raises:
        ValueError: `max_bytes` is negative, or `max_entry_bytes` is not positive.
    """

    name = "disk"

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int = DEFAULT_DISK_MAX_BYTES,
        max_entry_bytes: int | None = None,
    ) -> None:
        self.max_entry_bytes = entry_limit(max_entry_bytes)
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self._objects = self.directory / "v1" / "objects"
        self._locks = self.directory / "v1" / "locks"
        self._lock = threading.Lock()
        self._evicting = threading.Lock()
        self._approx_bytes: int | None = None  # None: unknown, scan on next put
        self._puts_since_scan = 0
        self._counters = {"hits": 0, "misses": 0, "puts": 0, "evictions": 0, "corrupt": 0}

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n

    def path_for(self, key: str) -> Path:
        """Return the file that holds `key` (whether or not it exists yet)."""
        digest = _hash_name(key)
        return self._objects / digest[:2] / digest

    def _read_path(self, path: Path, *, expected_key: str | None) -> tuple[str, bytes] | None:
        """Read and verify one entry file without deleting anything.

        Returns:
            `(key, value)`, or None when the file does not exist.

        Raises:
            ArtifactCorruptError: not a regular file (a symlink, FIFO, folder), larger
                than `max_entry_bytes`, or badly framed, truncated, for another key or
                failing its checksum.
            StoreUnavailableError: the file cannot be read.
        """
        found = self._open_entry(path)
        if found is None:
            return None
        fd, st = found
        with os.fdopen(fd, "rb") as f:
            try:
                return unframe_value(
                    f.read, st.st_size, expected_key=expected_key, source=str(path)
                )
            except OSError as exc:
                raise StoreUnavailableError(f"cannot read cache entry {path}: {exc}") from exc

    def _open_entry(self, path: Path) -> tuple[int, os.stat_result] | None:
        """Open an entry file for reading, refusing anything a writer here would not make."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ArtifactCorruptError("cache entry is a symlink", str(path)) from exc
            raise StoreUnavailableError(f"cannot read cache entry {path}: {exc}") from exc
        st = os.fstat(fd)
        limit = self.max_entry_bytes + _FRAME_OVERHEAD_BYTES
        if stat.S_ISREG(st.st_mode) and st.st_size <= limit:
            return fd, st
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactCorruptError("cache entry is not a regular file", str(path))
        raise ArtifactCorruptError(
            f"cache entry is {st.st_size} bytes, over max_entry_bytes={self.max_entry_bytes}",
            str(path),
        )

    def get(self, key: str) -> bytes | None:
        path = self.path_for(key)
        try:
            before = os.lstat(path)
            found = self._read_path(path, expected_key=key)
        except FileNotFoundError:
            found = None
        except ArtifactCorruptError as exc:
            logger.warning("deleting corrupt disk cache entry: %s", exc)
            self._count("corrupt")
            self._count("misses")
            self._unlink_if_same(path, before)
            return None
        if found is None:
            self._count("misses")
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # LRU recency
        self._count("hits")
        return found[1]

    @staticmethod
    def _unlink_if_same(path: Path, st: os.stat_result) -> None:
        """Delete `path` only if it is still the file we read, not a fresh replacement.

        Compared with `lstat`, so a planted symlink is removed, never followed.
        """
        with contextlib.suppress(OSError):
            now = os.lstat(path)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(path)

    def put(self, key: str, value: bytes) -> None:
        header, key_bytes = frame_value(key, value)
        size = len(header) + len(key_bytes) + len(value)
        if size > self.max_bytes or len(value) > self.max_entry_bytes:
            logger.debug(
                "not caching %s on disk: %d bytes > max_bytes or max_entry_bytes", key, size
            )
            return
        path = self.path_for(key)
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(key_bytes)
                f.write(value)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            kind = StoreError if exc.errno == errno.ENOSPC else StoreUnavailableError
            raise kind(f"cannot write cache entry {path}: {exc}") from exc
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        with self._lock:
            self._counters["puts"] += 1
            self._puts_since_scan += 1
            if self._approx_bytes is not None:
                self._approx_bytes += size
            must_scan = (
                self._approx_bytes is None
                or self._approx_bytes > self.max_bytes
                or self._puts_since_scan >= _RESCAN_EVERY_PUTS
            )
        if must_scan:
            self._evict(keep=path)

    def _scan(self) -> list[tuple[float, int, Path]]:
        """Return `(mtime, size, path)` of every entry; remove stale temporary files and
        anything that is not a regular file."""
        entries: list[tuple[float, int, Path]] = []
        now = time.time()
        try:
            shards = list(os.scandir(self._objects))
        except FileNotFoundError:
            return entries
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(FileNotFoundError):
                for item in os.scandir(shard.path):
                    try:
                        st = item.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if item.name.startswith(_TMP_PREFIX):
                        if now - st.st_mtime > _STALE_TMP_S:
                            with contextlib.suppress(OSError):
                                os.unlink(item.path)
                        continue
                    if not stat.S_ISREG(st.st_mode):
                        # Planted: a FIFO would block `keys()`, a symlink leads elsewhere.
                        with contextlib.suppress(OSError):
                            os.unlink(item.path)
                        continue
                    entries.append((st.st_mtime, st.st_size, Path(item.path)))
        return entries

    def _evict(self, *, keep: Path) -> None:
        """Delete least-recently-used entries until the folder fits; O(entries log entries)."""
        if not self._evicting.acquire(blocking=False):
            return  # another thread of this process is already scanning
        try:
            entries = self._scan()
            total = sum(size for _, size, _ in entries)
            evicted = 0
            if total > self.max_bytes:
                target = int(self.max_bytes * _LOW_WATER)
                for _, size, path in sorted(entries, key=lambda e: e[0]):
                    if total <= target:
                        break
                    if path == keep:
                        continue
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass  # another process evicted it first
                    except OSError:
                        continue
                    total -= size
                    evicted += 1
                logger.debug("disk cache evicted %d entries, %d bytes left", evicted, total)
                self._sweep_locks()
            with self._lock:
                self._approx_bytes = total
                self._puts_since_scan = 0
                self._counters["evictions"] += evicted
        finally:
            self._evicting.release()

    def _sweep_locks(self) -> None:
        """Delete old lock files nobody holds (lock first, so holders never lose theirs)."""
        now = time.time()
        for path in self._locks.glob("*/*"):
            try:
                if now - path.stat().st_mtime < _STALE_LOCK_S:
                    continue
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if same_file(fd, path):
                    os.unlink(path)
            except OSError:
                pass
            finally:
                os.close(fd)

    def delete(self, key: str) -> None:
        try:
            os.unlink(self.path_for(key))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreUnavailableError(f"cannot delete cache entry for {key!r}: {exc}") from exc

    def keys(self, prefix: str = "") -> Iterator[str]:
        for entry in self._listing(prefix):
            if entry.key is not None:
                yield entry.key

    @property
    def location(self) -> str:
        return str(self.directory)

    def _where(self, key: str) -> str:
        return str(self.path_for(key))

    def _head(self, path: Path) -> tuple[os.stat_result, tuple[str, int] | None] | None:
        """The file's stat and its frame's `(key, value length)` (None: unreadable header);
        None when the file is gone. Opened as `_read_path` opens it: no symlinks, no FIFOs.
        """
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError:
            try:
                return os.lstat(path), None
            except FileNotFoundError:
                return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return st, None
            try:
                return st, read_frame_head(f.read)
            except OSError:
                return st, None

    def _entry_stat(self, path: Path, key: str | None) -> EntryStat | None:
        found = self._head(path)
        if found is None:
            return None
        st, head = found
        if key is None and head is not None:
            key = head[0]
        size = head[1] if head is not None and head[0] == key else None
        return EntryStat(
            key,
            self.name,
            str(path),
            size,
            format_version=format_of_key(key),
            modified_at=st.st_mtime,
        )

    def stat(self, key: str) -> EntryStat | None:
        return self._entry_stat(self.path_for(key), key)

    def _listing(self, prefix: str) -> list[EntryStat]:
        """Every entry file under `prefix`, sorted by key; files whose header cannot be
        read come last (key None), and only when no prefix narrows the set."""
        found: list[EntryStat] = []
        for _, _, path in self._scan():
            entry = self._entry_stat(path, None)
            if entry is None:
                continue  # deleted meanwhile
            if (entry.key is None and not prefix) or (
                entry.key is not None and entry.key.startswith(prefix)
            ):
                found.append(entry)
        found.sort(key=lambda entry: (entry.key is None, entry.key or "", entry.location))
        return found

    def entries(self, prefix: str = "") -> Iterator[EntryStat]:
        """Yield every entry file under `prefix`, sorted by key, in one folder scan.

        Files whose header cannot be read are listed last with key None when `prefix` is
        empty: no key reaches them, so only `verify_entries` and `purge` can remove them.
        """
        return iter(self._listing(prefix))

    def _peek(self, key: str) -> bytes | None:
        found = self._read_path(self.path_for(key), expected_key=key)
        return None if found is None else found[1]

    def _verify_entry(self, entry: EntryStat) -> EntryVerdict:
        """Verify the file itself, not the file its key names: a misfiled or keyless
        entry is reported (and purged) as corrupt instead of being missed."""
        path = Path(entry.location)
        skipped = newer_format_verdict(entry.key, self.name, entry.location)
        if skipped is not None:
            return skipped
        try:
            found = self._read_path(path, expected_key=None)
            if found is None:
                return EntryVerdict(entry.key, self.name, entry.location, "missing")
            key, value = found
            if self.path_for(key) != path:
                raise ArtifactCorruptError(f"entry for {key!r} is filed under the wrong name")
        except ArtifactCorruptError as exc:
            return EntryVerdict(entry.key, self.name, entry.location, "corrupt", reason_of(exc))
        return judge_value(key, value, self.name, entry.location)

    def _delete_entry(self, entry: EntryStat) -> None:
        try:
            os.unlink(entry.location)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreUnavailableError(
                f"cannot delete cache entry {entry.location}: {exc}"
            ) from exc

    def stats(self, *, detailed: bool = False) -> dict[str, Any]:
        del detailed  # the folder scan below is the whole cost
        entries = self._scan()
        with self._lock:
            counters = dict(self._counters)
        return {
            "name": self.name,
            "directory": str(self.directory),
            "entries": len(entries),
            "size_bytes": sum(size for _, size, _ in entries),
            "max_bytes": self.max_bytes,
            **counters,
        }

    def lease(self, key: str, *, ttl_s: float) -> Lease:
        """Return a flock lease; `ttl_s` is ignored since the kernel frees it on death."""
        del ttl_s
        digest = _hash_name(key)
        return FileLease(self._locks / digest[:2] / digest)

    def __repr__(self) -> str:
        return f"DiskStore({str(self.directory)!r}, max_bytes={self.max_bytes})"
