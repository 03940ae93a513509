"""Is this entry the one its key names? The identity check every cache read goes through.

Entries travel through tiers other clients can write (a shared Redis, a cache folder), so
a valid artifact of another spec or tokenizer may sit under a key. The key's digest is
computed from the artifact header's `vocab_fingerprint` and `spec_hash` (`keys.py`), so
the header alone says whether an entry belongs to its key. Only the first fields of the
body are read, so the check costs microseconds even for a 100 MB index; the artifact's
own checksum and tables are verified when it is decoded.

This check stops mix-ups and replays of genuine artifacts. It cannot stop a writer that
forges an artifact with the right header and wrong tables: only a key the writer lacks
(a signature) could.
"""

from __future__ import annotations

from typing import Any

import msgpack

from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.store.keys import entry_digest, parse_key, readable_kind, readable_vocab

__all__ = ["check_entry", "peek_identity"]

# The artifact envelope (fsmcompile/artifact/framing.py): magic, uint32 format, body, sha256.
_MAGIC = b"FSMC"
_ENVELOPE_BYTES = 8
_DIGEST_BYTES = 32
_IDENTITY = ("format_version", "kind", "spec_hash", "vocab_fingerprint")
# body_header() writes the identity fields first; a body that hides them further down
# was not written by fsmcompile.
_MAX_FIELDS_READ = 16
_MAX_FIELD_BYTES = 4096


class _ViewReader:
    """A file-like `read` over a memoryview (io.BytesIO would copy a view whole)."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n < 0 else min(len(self._view), self._pos + n)
        piece = bytes(self._view[self._pos : end])
        self._pos = end
        return piece


def peek_identity(value: bytes, source: str) -> dict[str, Any]:
    """Return the identity fields of an artifact's body without decoding the rest.

    Returns:
        `{"envelope_version", "format_version", "kind", "spec_hash", "vocab_fingerprint"}`.

    Raises:
        ArtifactCorruptError: not an artifact, or a body whose first fields lack these.
    """
    if len(value) < _ENVELOPE_BYTES + _DIGEST_BYTES or value[:4] != _MAGIC:
        raise ArtifactCorruptError("cache entry is not an fsmcompile artifact", source)
    body = memoryview(value)[_ENVELOPE_BYTES:-_DIGEST_BYTES]
    found: dict[str, Any] = {"envelope_version": int.from_bytes(value[4:8], "little")}
    try:
        unpacker = msgpack.Unpacker(
            _ViewReader(body),
            raw=False,
            read_size=_MAX_FIELD_BYTES,
            max_buffer_size=max(len(body), _MAX_FIELD_BYTES),
            max_str_len=_MAX_FIELD_BYTES,
            max_bin_len=len(body),
            max_array_len=_MAX_FIELD_BYTES,
            max_map_len=_MAX_FIELD_BYTES,
        )
        fields = unpacker.read_map_header()
        for _ in range(min(fields, _MAX_FIELDS_READ)):
            name = unpacker.unpack()
            field = unpacker.unpack()
            if name in _IDENTITY:
                found[name] = field
                if len(found) == len(_IDENTITY) + 1:
                    return found
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ArtifactCorruptError(f"artifact body does not parse: {exc}", source) from exc
    missing = sorted(set(_IDENTITY) - set(found))
    raise ArtifactCorruptError(f"artifact header lacks {', '.join(missing)}", source)


def check_entry(key: str, value: bytes) -> None:
    """Raise unless `value` is an artifact compiled for exactly what `key` names.

    Keys not made by `cache_key` (a cache used for other bytes) are not checked.

    Raises:
        ArtifactCorruptError: not an artifact, or its kind, format version, vocabulary
            fingerprint or spec hash is not the key's.
    """
    parts = parse_key(key)
    if parts is None:
        return
    header = peek_identity(value, key)
    kind, fingerprint, spec_hash = (
        header["kind"],
        header["vocab_fingerprint"],
        header["spec_hash"],
    )
    if not (isinstance(kind, str) and isinstance(fingerprint, str) and isinstance(spec_hash, str)):
        raise ArtifactCorruptError("artifact header fields have the wrong types", key)
    envelope, body_version = header["envelope_version"], header["format_version"]
    if envelope != parts.format_version or body_version != parts.format_version:
        raise ArtifactCorruptError(
            f"artifact is format {envelope} (body says {body_version!r}), its key names "
            f"v{parts.format_version}",
            key,
        )
    if readable_kind(kind) != parts.kind:
        raise ArtifactCorruptError(f"artifact is a {kind!r} index, its key names another", key)
    if readable_vocab(fingerprint) != parts.vocab_prefix:
        raise ArtifactCorruptError(
            f"artifact was compiled for tokenizer {fingerprint[:12]!r}, its key names "
            f"{parts.vocab_prefix!r}",
            key,
        )
    if entry_digest(fingerprint, spec_hash) != parts.digest:
        raise ArtifactCorruptError("artifact was compiled for another spec than its key", key)
