"""Read an artifact file safely (a regular file, under a size cap, never a device or
FIFO), and write one atomically.

Artifact paths can come from requests (the vLLM processor loads `index` paths under
operator-configured directories), so reading one must be bounded: `/dev/zero` used to
grow memory without end and a FIFO blocked the reader forever. The file is opened
without blocking and checked on its open descriptor (no race between a check and the
open), then read up to its size.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fsmcompile.errors import ArtifactError, ArtifactNotFoundError

MAX_ARTIFACT_BYTES_ENV = "FSMCOMPILE_MAX_ARTIFACT_BYTES"
DEFAULT_MAX_ARTIFACT_BYTES = 1 << 30
"""1 GiB: the largest corpus artifacts are tens of MB."""


def byte_limit(env: str, default: int) -> int:
    """An operator's byte limit from environment variable `env`, else `default`.

    Raises:
        ValueError: the variable is set to something other than a byte count.
    """
    value = os.environ.get(env, "").strip()
    if not value:
        return default
    try:
        return max(int(value), 0)
    except ValueError as exc:
        raise ValueError(f"{env}={value!r} is not a byte count") from exc


def write_artifact_file(data: bytes, path: str | os.PathLike[str]) -> int:
    """Write artifact bytes atomically (temporary file + rename): a reader of `path` sees
    the old file or the new one, never a torn one. Returns the size in bytes."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return len(data)


def read_artifact_file(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
    """The bytes of the artifact file at `path`.

    Args:
        path: a regular file (symlinks are followed).
        max_bytes: the largest file accepted; default `$FSMCOMPILE_MAX_ARTIFACT_BYTES`,
            else 1 GiB.

    Raises:
        ArtifactNotFoundError: nothing at `path` (also a `FileNotFoundError`).
        ArtifactError: not a regular file (a directory, device, FIFO or socket), larger
            than `max_bytes`, or unreadable (permissions, I/O error).
    """
    source = os.fspath(path)
    limit = (
        byte_limit(MAX_ARTIFACT_BYTES_ENV, DEFAULT_MAX_ARTIFACT_BYTES)
        if max_bytes is None
        else max_bytes
    )
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(source, flags)
    except FileNotFoundError as exc:
        raise ArtifactNotFoundError("no artifact file there", str(source)) from exc
    except OSError as exc:
        raise ArtifactError(f"cannot open artifact: {exc.strerror or exc}", str(source)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError(
                f"not a regular file ({_file_kind(info.st_mode)}); an artifact is a file "
                "written by `fsmcompile ... -o FILE`",
                str(source),
            )
        if info.st_size > limit:
            raise ArtifactError(
                f"artifact file is {info.st_size} bytes, over the {limit}-byte limit "
                f"(max_bytes, ${MAX_ARTIFACT_BYTES_ENV})",
                str(source),
            )
        return _read_at_most(fd, info.st_size, limit, str(source))
    except OSError as exc:
        raise ArtifactError(f"cannot read artifact: {exc.strerror or exc}", str(source)) from exc
    finally:
        os.close(fd)


def _read_at_most(fd: int, size: int, limit: int, source: str) -> bytes:
    """Up to `size` bytes, refusing a file that grew past `limit` while being read."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, max(size - total, 0) + 1 if total < size else 1 << 16)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise ArtifactError(f"artifact file grew past the {limit}-byte limit", source)
        chunks.append(chunk)


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"
