"""The artifact envelope shared by every index kind: header, checksum, arrays, masks.

Layout: b"FSMC" | uint32 format version | msgpack body | sha256(body). The checksum is
checked before the body is parsed, so a damaged or truncated entry is a clear
ArtifactCorruptError and never a wrong mask. No pickle anywhere: arrays are raw bytes
with dtype and shape.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from fsmcompile.errors import (
    ArtifactCorruptError,
    ArtifactVersionError,
    VocabularyMismatchError,
)
from fsmcompile.index.bits import bitmask_words, pack_bool_rows, unpack_row
from fsmcompile.version import FORMAT_VERSION, __version__
from fsmcompile.vocabulary import Vocabulary

MAGIC = b"FSMC"
HEADER = struct.Struct("<4sI")
DIGEST_BYTES = 32
_DENSE, _ALLOWED, _REJECTED = 0, 1, 2


def pack_array(array: npt.NDArray[Any]) -> dict[str, Any]:
    """An array as {dtype, shape, data} with raw bytes."""
    contiguous = np.ascontiguousarray(array)
    return {
        "dtype": contiguous.dtype.str,
        "shape": list(contiguous.shape),
        "data": contiguous.tobytes(),
    }


def unpack_array(doc: dict[str, Any], source: str | None) -> npt.NDArray[Any]:
    """Inverse of `pack_array` (a read-only view of the artifact's bytes)."""
    try:
        array = np.frombuffer(doc["data"], dtype=np.dtype(doc["dtype"]))
        return array.reshape(doc["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactCorruptError(f"malformed array in artifact: {exc}", source) from exc


def encode_masks(masks: npt.NDArray[np.int32], vocab_size: int) -> dict[str, Any]:
    """Per row the smallest of: allowed ids, rejected ids, packed bitset."""
    words = masks.shape[1]
    kinds = np.zeros(masks.shape[0], dtype=np.uint8)
    dense_rows: list[int] = []
    ids: list[npt.NDArray[np.int32]] = []
    for row in range(masks.shape[0]):
        allowed = np.flatnonzero(unpack_row(masks[row], vocab_size)).astype(np.int32)
        rejected_count = vocab_size - allowed.shape[0]
        if allowed.shape[0] <= min(rejected_count, words):
            kinds[row] = _ALLOWED
            ids.append(allowed)
        elif rejected_count <= words:
            kinds[row] = _REJECTED
            bits = unpack_row(masks[row], vocab_size)
            ids.append(np.flatnonzero(~bits).astype(np.int32))
        else:
            dense_rows.append(row)
    lengths = np.asarray([len(x) for x in ids], dtype=np.int64)
    return {
        "kinds": pack_array(kinds),
        "dense": pack_array(masks[dense_rows] if dense_rows else np.zeros((0, words), np.int32)),
        "ids": pack_array(np.concatenate(ids) if ids else np.zeros(0, np.int32)),
        "id_lengths": pack_array(lengths),
    }


def decode_masks(doc: dict[str, Any], vocab_size: int, source: str | None) -> npt.NDArray[np.int32]:
    kinds = unpack_array(doc["kinds"], source)
    dense = unpack_array(doc["dense"], source)
    ids = unpack_array(doc["ids"], source).astype(np.int64)
    lengths = unpack_array(doc["id_lengths"], source)
    words = bitmask_words(vocab_size)
    masks = np.zeros((kinds.shape[0], words), dtype=np.int32)
    masks[kinds == _DENSE] = dense
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    listed = np.flatnonzero(kinds != _DENSE)
    if listed.shape[0] != lengths.shape[0] or int(offsets[-1]) != ids.shape[0]:
        raise ArtifactCorruptError("mask lists do not add up", source)
    for n, row in enumerate(listed):
        bits = np.zeros((1, vocab_size), dtype=np.bool_)
        bits[0, ids[offsets[n] : offsets[n + 1]]] = True
        if kinds[row] == _REJECTED:
            bits = ~bits
        masks[row] = pack_bool_rows(bits)[0]
    return masks


def frame(doc: dict[str, Any]) -> bytes:
    """Wrap a body document (which must hold "format_version") in header and checksum."""
    body: bytes = msgpack.packb(doc, use_bin_type=True)
    return HEADER.pack(MAGIC, FORMAT_VERSION) + body + hashlib.sha256(body).digest()


def body_header(kind: str, spec_hash: str, vocab: Vocabulary) -> dict[str, Any]:
    """The fields every artifact body starts with."""
    return {
        "format_version": FORMAT_VERSION,
        "compiler_version": __version__,
        "kind": kind,
        "spec_hash": spec_hash,
        "vocab_fingerprint": vocab.fingerprint,
        "vocab_size": vocab.size,
    }


def read_header(data: bytes, source: str | None = None) -> dict[str, Any]:
    """The verified body of an artifact (checksum and version checked, arrays not decoded)."""
    if len(data) < HEADER.size + DIGEST_BYTES:
        raise ArtifactCorruptError("artifact is truncated or empty", source)
    magic, version = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ArtifactCorruptError("not an fsmcompile artifact (bad magic)", source)
    if version > FORMAT_VERSION:
        raise ArtifactVersionError(
            f"artifact format {version} is newer than this fsmcompile reads ({FORMAT_VERSION}); "
            "upgrade fsmcompile or recompile",
            source,
        )
    if version < FORMAT_VERSION:
        # Each format changes what some index holds (3: context sets in grammar indexes),
        # so an older artifact is recompiled, not read as damaged.
        raise ArtifactVersionError(
            f"artifact format {version} is older than this fsmcompile reads ({FORMAT_VERSION}); "
            "recompile it",
            source,
        )
    body, digest = data[HEADER.size : -DIGEST_BYTES], data[-DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ArtifactCorruptError("artifact checksum mismatch (damaged or truncated)", source)
    try:
        doc = msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ArtifactCorruptError(f"artifact body does not parse: {exc}", source) from exc
    if not isinstance(doc, dict) or doc.get("format_version") != version:
        raise ArtifactCorruptError("artifact header and body disagree", source)
    return doc


def check_vocabulary(doc: dict[str, Any], vocab: Vocabulary, source: str | None) -> None:
    """Refuse an artifact compiled for another tokenizer or logits width."""
    if doc.get("vocab_fingerprint") != vocab.fingerprint:
        raise VocabularyMismatchError(
            "artifact was compiled for another tokenizer",
            expected=vocab.fingerprint,
            found=str(doc.get("vocab_fingerprint")),
            source=source,
        )
