"""Serialize a TokenIndex to bytes and back: msgpack, versioned, checksummed, no pickle.

Layout: b"FSMC" | uint32 format version | msgpack body | sha256(body). The checksum is
checked before the body is parsed, so a damaged or truncated entry is a clear
ArtifactCorruptError and never a wrong mask. Each mask row is stored as whichever is
smallest: the allowed ids, the rejected ids, or the packed bitset.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.dfa import ByteDFA
from fsmcompile.errors import (
    ArtifactCorruptError,
    ArtifactVersionError,
    VocabularyMismatchError,
)
from fsmcompile.index.bits import bitmask_words, pack_bool_rows, unpack_row
from fsmcompile.index.token_index import TokenIndex
from fsmcompile.version import FORMAT_VERSION, __version__
from fsmcompile.vocabulary import Vocabulary

MAGIC = b"FSMC"
_HEADER = struct.Struct("<4sI")
_DIGEST_BYTES = 32
_DENSE, _ALLOWED, _REJECTED = 0, 1, 2


def _pack_array(array: npt.NDArray[Any]) -> dict[str, Any]:
    contiguous = np.ascontiguousarray(array)
    return {
        "dtype": contiguous.dtype.str,
        "shape": list(contiguous.shape),
        "data": contiguous.tobytes(),
    }


def _unpack_array(doc: dict[str, Any], source: str | None) -> npt.NDArray[Any]:
    try:
        array = np.frombuffer(doc["data"], dtype=np.dtype(doc["dtype"]))
        return array.reshape(doc["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactCorruptError(f"malformed array in artifact: {exc}", source) from exc


def _encode_masks(masks: npt.NDArray[np.int32], vocab_size: int) -> dict[str, Any]:
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
        "kinds": _pack_array(kinds),
        "dense": _pack_array(masks[dense_rows] if dense_rows else np.zeros((0, words), np.int32)),
        "ids": _pack_array(np.concatenate(ids) if ids else np.zeros(0, np.int32)),
        "id_lengths": _pack_array(lengths),
    }


def _decode_masks(
    doc: dict[str, Any], vocab_size: int, source: str | None
) -> npt.NDArray[np.int32]:
    kinds = _unpack_array(doc["kinds"], source)
    dense = _unpack_array(doc["dense"], source)
    ids = _unpack_array(doc["ids"], source).astype(np.int64)
    lengths = _unpack_array(doc["id_lengths"], source)
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


def to_bytes(index: TokenIndex) -> bytes:
    """The artifact for `index` (deterministic: equal indexes give equal bytes)."""
    body = msgpack.packb(
        {
            "format_version": FORMAT_VERSION,
            "compiler_version": __version__,
            "kind": index.kind,
            "spec_hash": index.spec_hash,
            "vocab_fingerprint": index.vocabulary.fingerprint,
            "vocab_size": index.vocab_size,
            "dfa": {
                "transitions": _pack_array(index.dfa.transitions.astype("<i4")),
                "class_of_byte": _pack_array(index.dfa.class_of_byte.astype("<i4")),
                "accepting": _pack_array(index.dfa.accepting.astype(np.uint8)),
            },
            "state_mask": _pack_array(index.state_mask.astype("<i4")),
            "masks": _encode_masks(index.masks, index.vocab_size),
        },
        use_bin_type=True,
    )
    return _HEADER.pack(MAGIC, FORMAT_VERSION) + body + hashlib.sha256(body).digest()


def read_header(data: bytes, source: str | None = None) -> dict[str, Any]:
    """The verified body of an artifact (checksum and version checked, arrays not decoded)."""
    if len(data) < _HEADER.size + _DIGEST_BYTES:
        raise ArtifactCorruptError("artifact is truncated or empty", source)
    magic, version = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ArtifactCorruptError("not an fsmcompile artifact (bad magic)", source)
    if version > FORMAT_VERSION:
        raise ArtifactVersionError(
            f"artifact format {version} is newer than this fsmcompile reads ({FORMAT_VERSION}); "
            "upgrade fsmcompile or recompile",
            source,
        )
    body, digest = data[_HEADER.size : -_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise ArtifactCorruptError("artifact checksum mismatch (damaged or truncated)", source)
    try:
        doc = msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ArtifactCorruptError(f"artifact body does not parse: {exc}", source) from exc
    if not isinstance(doc, dict) or doc.get("format_version") != version:
        raise ArtifactCorruptError("artifact header and body disagree", source)
    return doc


def from_bytes(data: bytes, vocab: Vocabulary, source: str | None = None) -> TokenIndex:
    """Rebuild a TokenIndex for `vocab` from artifact bytes.

    Raises:
        ArtifactCorruptError: damaged, truncated or not an artifact.
        ArtifactVersionError: written by a newer format.
        VocabularyMismatchError: compiled for another tokenizer or logits width.
    """
    doc = read_header(data, source)
    if doc["vocab_fingerprint"] != vocab.fingerprint:
        raise VocabularyMismatchError(
            "artifact was compiled for another tokenizer",
            expected=vocab.fingerprint,
            found=str(doc["vocab_fingerprint"]),
            source=source,
        )
    try:
        dfa = ByteDFA(
            transitions=_unpack_array(doc["dfa"]["transitions"], source).astype(np.int32),
            class_of_byte=_unpack_array(doc["dfa"]["class_of_byte"], source).astype(np.int32),
            accepting=_unpack_array(doc["dfa"]["accepting"], source).astype(np.bool_),
        )
        state_mask = _unpack_array(doc["state_mask"], source).astype(np.int32)
        masks = _decode_masks(doc["masks"], vocab.size, source)
    except KeyError as exc:
        raise ArtifactCorruptError(f"artifact lacks {exc}", source) from exc
    if state_mask.shape[0] != dfa.num_states or (
        state_mask.size and int(state_mask.max()) >= masks.shape[0]
    ):
        raise ArtifactCorruptError("artifact tables do not fit together", source)
    return TokenIndex(
        dfa=dfa,
        state_mask=state_mask,
        masks=masks,
        vocabulary=vocab,
        kind=str(doc["kind"]),
        spec_hash=str(doc["spec_hash"]),
    )


def save(index: TokenIndex, path: str | os.PathLike[str]) -> int:
    """Write the artifact atomically; returns its size in bytes."""
    target = Path(path)
    data = to_bytes(index)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return len(data)


def load(path: str | os.PathLike[str], vocab: Vocabulary) -> TokenIndex:
    """Read an artifact file written by `save` (see `from_bytes` for the errors)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ArtifactCorruptError(f"cannot read artifact: {exc}", source) from exc
    return from_bytes(data, vocab, source)
