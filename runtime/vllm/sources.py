"""Where a request's `{"index": ...}` may come from: registered keys, cache keys, allowed files.

The value comes from a client, so it must not become a way to read the server's files.
A reference is, in order:

1. a key given to `register_index` in the engine process;
2. a cache key in fsmcompile's format (`kind-vN-<vocab prefix>-<sha256>`, as
   `CompileResult.key` and `fsmcompile cache` print it), read from the default cache
   (memory, disk and, when `FSMCOMPILE_REDIS_URL` is set, Redis);
3. a path (it contains a `/`): allowed only when, after resolving symlinks and `..`, it
   is a regular file inside one of the directories listed (colon-separated) in
   `FSMCOMPILE_INDEX_DIRS`, and no larger than `FSMCOMPILE_INDEX_MAX_BYTES` (default
   256 MiB). Without that variable no path is accepted.

Anything else is refused with `IndexReferenceError`; at the API boundary that is an HTTP
400, in the engine an EOS-only row for that request alone.
"""

from __future__ import annotations

import os
import re
import stat
from typing import TYPE_CHECKING

from fsmcompile.errors import SpecError, VocabularyMismatchError

if TYPE_CHECKING:
    from fsmcompile.artifact import AnyIndex
    from fsmcompile.vocabulary import Vocabulary

INDEX_DIRS_ENV = "FSMCOMPILE_INDEX_DIRS"
INDEX_MAX_BYTES_ENV = "FSMCOMPILE_INDEX_MAX_BYTES"
DEFAULT_INDEX_MAX_BYTES = 256 * 1024 * 1024

_CACHE_KEY = re.compile(r"[a-z0-9_]{1,32}-v[0-9]{1,9}-[a-z0-9_]{0,12}-[0-9a-f]{64}")

_registered_indexes: dict[str, AnyIndex] = {}


class IndexReferenceError(SpecError):
    """An `index` reference that names nothing this server may serve."""


def register_index(key: str, index: AnyIndex) -> None:
    """Make `index` available to requests that ask for `{"index": key}` in this process."""
    _registered_indexes[key] = index


def is_path(reference: str) -> bool:
    """Whether `reference` is read as a file path (it contains a path separator)."""
    return "/" in reference or os.sep in reference


def index_dirs() -> list[str]:
    """The allowed directories from `FSMCOMPILE_INDEX_DIRS`, resolved; empty if unset."""
    raw = os.environ.get(INDEX_DIRS_ENV, "")
    return [os.path.realpath(part) for part in raw.split(":") if part.strip()]


def index_max_bytes() -> int:
    """The size cap for index files, from `FSMCOMPILE_INDEX_MAX_BYTES` or the default."""
    raw = os.environ.get(INDEX_MAX_BYTES_ENV)
    if not raw:
        return DEFAULT_INDEX_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise IndexReferenceError(f"{INDEX_MAX_BYTES_ENV}={raw!r} is not an integer") from None
    return max(value, 0)


def allowed_path(reference: str) -> str:
    """The resolved path of `reference` if it lies inside an allowed directory.

    Raises:
        IndexReferenceError: no directories are configured, or the resolved path is
            outside all of them. The message does not echo the resolved path.
    """
    dirs = index_dirs()
    if not dirs:
        raise IndexReferenceError(
            f"index paths are disabled on this server (set {INDEX_DIRS_ENV}); "
            "use a registered key or a cache key"
        )
    resolved = os.path.realpath(reference)
    for directory in dirs:
        if resolved != directory and os.path.commonpath((resolved, directory)) == directory:
            return resolved
    raise IndexReferenceError(f"index path is outside the directories in {INDEX_DIRS_ENV}")


def check_index_reference(reference: str) -> None:
    """The API boundary's check: a path must pass the directory rule (no file access).

    Keys are not looked up here: registered keys live in the engine process.

    Raises:
        IndexReferenceError: an empty reference, or a path outside the allowed dirs.
    """
    if not reference:
        raise IndexReferenceError("index: expected a registered key, a cache key or a path")
    if is_path(reference) and reference not in _registered_indexes:
        allowed_path(reference)


def resolve_index(reference: str, vocabulary: Vocabulary) -> AnyIndex:
    """Load the index `reference` names, checked against the engine's vocabulary.

    Raises:
        IndexReferenceError: the reference names nothing this server may serve: an
            unknown key, a cache miss, a path outside the allowed dirs, not a regular
            file, or larger than the size cap.
        VocabularyMismatchError: the index was compiled for another tokenizer.
        ArtifactError: the file or cache entry is not a valid artifact.
    """
    index = _registered_indexes.get(reference)
    if index is not None:
        if index.vocabulary.fingerprint != vocabulary.fingerprint:
            raise VocabularyMismatchError(
                "registered index was compiled for another tokenizer",
                expected=vocabulary.fingerprint,
                found=index.vocabulary.fingerprint,
                source=reference,
            )
        return index
    if _CACHE_KEY.fullmatch(reference):
        return _from_cache(reference, vocabulary)
    if not is_path(reference):
        raise IndexReferenceError("index: no registered index or cache entry under that key")
    return _from_file(allowed_path(reference), vocabulary)


def _from_cache(key: str, vocabulary: Vocabulary) -> AnyIndex:
    from fsmcompile.artifact import from_bytes
    from fsmcompile.store.default import configured_cache

    data = configured_cache().get(key)
    if data is None:
        raise IndexReferenceError("index: no cache entry under that key")
    return from_bytes(data, vocabulary, source=key)


def _from_file(path: str, vocabulary: Vocabulary) -> AnyIndex:
    from fsmcompile.artifact import load

    try:
        info = os.stat(path)
    except OSError as exc:
        raise IndexReferenceError(f"index file: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise IndexReferenceError("index path is not a regular file")
    cap = index_max_bytes()
    if info.st_size > cap:
        raise IndexReferenceError(
            f"index file is {info.st_size} bytes, over the {cap}-byte cap ({INDEX_MAX_BYTES_ENV})"
        )
    return load(path, vocabulary)


__all__ = [
    "DEFAULT_INDEX_MAX_BYTES",
    "INDEX_DIRS_ENV",
    "INDEX_MAX_BYTES_ENV",
    "IndexReferenceError",
    "check_index_reference",
    "register_index",
    "resolve_index",
]
