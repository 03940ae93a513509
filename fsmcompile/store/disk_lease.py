"""The disk tier's compile lock: an exclusive `flock` on a per-key file.

One process per machine compiles a key while the others wait; the kernel drops the lock
when its holder dies, so a crashed compile never leaves a lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from fsmcompile.errors import StoreError
from fsmcompile.store.base import Lease

__all__ = ["FileLease", "same_file"]


class FileLease(Lease):
    """An exclusive `flock` on a per-key file; the kernel drops it if the holder dies.

    Lock files are deleted by the sweeper only while it holds the flock itself, so after
    locking, the holder checks that its descriptor still names the file at `path`; if
    the file was unlinked in between, it retries on the fresh file. Without that check
    two processes could each hold a lock on a different inode for the same key.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            raise RuntimeError("FileLease is single-use and already held")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            while True:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return False
                if same_file(fd, self._path):
                    self._fd = fd
                    return True
                os.close(fd)  # swept between open and flock: lock the new file
        except OSError as exc:
            raise StoreError(f"cannot lock {self._path}: {exc}") from exc

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def same_file(fd: int, path: Path) -> bool:
    """Whether descriptor `fd` still names the file at `path` (not unlinked or replaced)."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)
