"""Redis entry manifests: what a reader may believe about an entry before fetching it.

Anyone who can write the shared Redis can write a manifest, so every field is checked
against the reader's `max_entry_bytes` before a chunk key is named or a byte allocated:
a 60-byte manifest claiming thirty million one-byte chunks is refused as it is parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgpack

from fsmcompile.errors import ArtifactCorruptError

__all__ = [
    "MANIFEST_OVERHEAD_BYTES",
    "MAX_CHUNKS",
    "Manifest",
    "decode_manifest",
    "encode_manifest",
]

_FORMAT = 1
#: Most chunks one entry may have: 1 GiB in 16 KiB chunks. Bounds the chunk keys a
#: reader builds (~100 bytes each) and the commands one read pipelines.
MAX_CHUNKS = 65_536
#: What msgpack adds around an inline value; a manifest longer than the entry limit plus
#: this is not read past that length.
MANIFEST_OVERHEAD_BYTES = 4096
_VERSION_ID = re.compile(r"[0-9A-Za-z_]{1,64}")
_SHA256_BYTES = 32


@dataclass(frozen=True, slots=True)
class Manifest:
    """One entry's manifest; `data` holds the value itself when it fits in one chunk.

    Attributes:
        size: value length in bytes.
        sha256: digest of the whole value.
        data: the inline value, or None when the value is chunked.
        version: id in the chunk key names (None when inline).
        chunks: number of chunks (0 when inline).
        chunk_bytes: length of every chunk but the last (0 when inline).
    """

    size: int
    sha256: bytes
    data: bytes | None = None
    version: str | None = None
    chunks: int = 0
    chunk_bytes: int = 0

    def chunk_lengths(self) -> list[int]:
        """The length each chunk must have, in order."""
        if self.chunks == 0:
            return []
        last = self.size - (self.chunks - 1) * self.chunk_bytes
        return [self.chunk_bytes] * (self.chunks - 1) + [last]


def encode_manifest(manifest: Manifest) -> bytes:
    """The msgpack bytes stored under an entry's manifest key."""
    doc: dict[str, object] = {"format": _FORMAT, "size": manifest.size, "sha256": manifest.sha256}
    if manifest.data is not None:
        doc["data"] = manifest.data
    else:
        doc.update(id=manifest.version, chunks=manifest.chunks, chunk_bytes=manifest.chunk_bytes)
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    return packed


def _int_field(doc: dict[object, object], name: str, low: int, high: int) -> int:
    value = doc.get(name)
    if type(value) is not int or not low <= value <= high:
        raise ArtifactCorruptError(f"manifest field {name!r} is {value!r}, not in {low}..{high}")
    return value


def decode_manifest(raw: bytes, max_entry_bytes: int) -> Manifest:
    """Parse a manifest and check every field against `max_entry_bytes`.

    Raises:
        ArtifactCorruptError: not a manifest this version writes, or one that describes
            an entry larger than `max_entry_bytes`, more than `MAX_CHUNKS` chunks, chunk
            sizes that do not add up to its size, or a malformed version id.
    """
    if len(raw) > max_entry_bytes + MANIFEST_OVERHEAD_BYTES:
        raise ArtifactCorruptError(f"manifest is {len(raw)} bytes, over the entry limit")
    try:
        doc = msgpack.unpackb(raw, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ArtifactCorruptError(f"manifest does not parse: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ArtifactCorruptError("not a manifest of this format")
    size = _int_field(doc, "size", 0, max_entry_bytes)
    sha256 = doc.get("sha256")
    if not isinstance(sha256, bytes) or len(sha256) != _SHA256_BYTES:
        raise ArtifactCorruptError("manifest has no sha256 digest")
    if "data" in doc:
        data = doc["data"]
        if not isinstance(data, bytes) or len(data) != size:
            raise ArtifactCorruptError("inline value does not match the manifest's size")
        return Manifest(size, sha256, data=data)
    version = doc.get("id")
    if not isinstance(version, str) or not _VERSION_ID.fullmatch(version):
        raise ArtifactCorruptError("manifest has a malformed version id")
    chunks = _int_field(doc, "chunks", 1, MAX_CHUNKS)
    chunk_bytes = _int_field(doc, "chunk_bytes", 1, max_entry_bytes)
    if chunks != -(-size // chunk_bytes):
        raise ArtifactCorruptError(
            f"manifest claims {chunks} chunks of {chunk_bytes} bytes for {size} bytes"
        )
    return Manifest(size, sha256, version=version, chunks=chunks, chunk_bytes=chunk_bytes)
