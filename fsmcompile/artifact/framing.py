"""The artifact envelope shared by every index kind: header, checksum, packed arrays.

Layout: b"FSMC" | uint32 format version | msgpack body | sha256(body). The checksum is
checked before the body is parsed, so a damaged or truncated entry is a clear
ArtifactCorruptError and never a wrong mask. No pickle anywhere: arrays are raw bytes
with dtype and shape. The checksum proves nothing about who wrote the body: its tables
are checked before use by `validate.py`.
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
from fsmcompile.version import FORMAT_VERSION, __version__
from fsmcompile.vocabulary import Vocabulary

MAGIC = b"FSMC"
HEADER = struct.Struct("<4sI")
DIGEST_BYTES = 32


def pack_array(array: npt.NDArray[Any]) -> dict[str, Any]:
    """An array as {dtype, shape, data} with raw bytes."""
    contiguous = np.ascontiguousarray(array)
    return {
        "dtype": contiguous.dtype.str,
        "shape": list(contiguous.shape),
        "data": contiguous.tobytes(),
    }


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
    if doc.get("vocab_size") != vocab.size and doc.get("vocab_fingerprint") == vocab.fingerprint:
        raise ArtifactCorruptError(
            "artifact header disagrees with its own tokenizer fingerprint",
            source,
            pointer="/vocab_size",
            expected=str(vocab.size),
            found=repr(doc.get("vocab_size"))[:40],
        )
    if doc.get("vocab_fingerprint") != vocab.fingerprint:
        raise VocabularyMismatchError(
            "artifact was compiled for another tokenizer",
            expected=vocab.fingerprint,
            found=str(doc.get("vocab_fingerprint")),
            source=source,
        )
