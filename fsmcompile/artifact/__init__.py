"""Serialize compiled indexes to bytes and files and back: one entry point for every kind.

The envelope is `framing.py`'s; each index kind has its body module (`regex.py` for regex
and JSON Schema indexes, `grammar.py` for Lark). Loading dispatches on the kind recorded
in the verified header, so a caller never needs to know which kind a file holds.

Artifacts are untrusted input (files named by requests, shared cache entries): files are
read by `files.read_artifact_file` (regular files under a size cap), and every table of a
body is checked by `validate.py` (and `rows.py`, `parse_checks.py`) before an index is
built from it, so a loaded index cannot make the runtime read or write out of bounds or
loop. docs/artifact.md lists the invariants.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Union

from fsmcompile.artifact import grammar, regex
from fsmcompile.artifact.files import read_artifact_file, write_artifact_file
from fsmcompile.artifact.framing import read_header
from fsmcompile.artifact.rows import ALLOWED, DENSE, REJECTED
from fsmcompile.artifact.validate import Body
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.vocabulary import Vocabulary

if TYPE_CHECKING:
    from fsmcompile.tables.grammar_index import GrammarIndex

AnyIndex = Union[TokenIndex, "GrammarIndex"]

__all__ = [
    "AnyIndex",
    "from_bytes",
    "load",
    "read_artifact_file",
    "read_header",
    "save",
    "summarize",
    "to_bytes",
    "write_artifact_file",
]


def to_bytes(index: AnyIndex) -> bytes:
    """The artifact bytes for a compiled index of any kind (deterministic)."""
    if isinstance(index, TokenIndex):
        return regex.to_bytes(index)
    return grammar.to_bytes(index)


def from_bytes(
    data: bytes,
    vocab: Vocabulary,
    source: str | None = None,
    *,
    max_decoded_bytes: int | None = None,
) -> AnyIndex:
    """Rebuild the index an artifact holds, for `vocab`, every table checked first.

    Args:
        data: the artifact bytes (`to_bytes`, a file, a cache entry).
        vocab: the tokenizer it must have been compiled for.
        source: the path or cache key, for errors.
        max_decoded_bytes: mask rows up to this many decoded bytes always load; past it
            only within 64x their stored bytes. Default `$FSMCOMPILE_MAX_DECODED_BYTES`,
            else 256 MiB.

    Raises:
        ArtifactCorruptError: damaged, truncated, not an artifact, or a table that breaks
            an invariant (`pointer` names it, `expected` / `found` say how).
        ArtifactVersionError: written in another format (newer, or older: recompile).
        VocabularyMismatchError: compiled for another tokenizer or logits width.
    """
    doc = read_header(data, source)
    kind = doc.get("kind")
    if kind == "lark" or (kind == "json" and "lexer" in doc):
        return grammar.from_body(doc, vocab, source, max_decoded_bytes=max_decoded_bytes)
    if kind in ("regex", "json"):
        return regex.from_body(doc, vocab, source, max_decoded_bytes=max_decoded_bytes)
    raise ArtifactCorruptError(f"artifact of unknown kind {kind!r}", source, pointer="/kind")


def summarize(doc: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """Sizes of a verified artifact body (from `read_header`), without decoding its arrays.

    Raises:
        ArtifactCorruptError: a field it reads is missing or malformed (`pointer`).
    """
    body = Body(doc, source)
    grammar = "lexer" in doc
    shape = body.array("/lexer/transitions" if grammar else "/dfa/transitions", (None, None))
    kinds = body.array("/masks/kinds", (None,))
    summary = {
        "states": int(shape.shape[0]),
        "byte_classes": int(shape.shape[1]),
        "masks": int(kinds.shape[0]),
        "masks_by_storage": {
            "bitset": int((kinds == DENSE).sum()),
            "allowed_ids": int((kinds == ALLOWED).sum()),
            "rejected_ids": int((kinds == REJECTED).sum()),
        },
    }
    if grammar:
        summary["parser_states"] = int(body.array("/table/action", (None, None)).shape[0])
        summary["terminals"] = len(body.strings("/terminal_names"))
    return summary


def save(index: AnyIndex, path: str | os.PathLike[str]) -> int:
    """Write the artifact atomically (temporary file + rename); returns its size in bytes."""
    return write_artifact_file(to_bytes(index), path)


def load(
    path: str | os.PathLike[str],
    vocab: Vocabulary,
    *,
    max_bytes: int | None = None,
    max_decoded_bytes: int | None = None,
) -> AnyIndex:
    """Read an artifact file written by `save` (`read_artifact_file`, then `from_bytes`).

    Raises:
        ArtifactNotFoundError: no file at `path`.
        ArtifactError: not a regular file, over `max_bytes`, or unreadable.
        ArtifactCorruptError, ArtifactVersionError, VocabularyMismatchError: as `from_bytes`.
    """
    data = read_artifact_file(path, max_bytes=max_bytes)
    return from_bytes(data, vocab, os.fspath(path), max_decoded_bytes=max_decoded_bytes)
