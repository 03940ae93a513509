"""Serialize compiled indexes to bytes and files and back: one entry point for every kind.

The envelope is `framing.py`'s; each index kind has its body module (`regex.py` for regex
and JSON Schema indexes, `grammar.py` for Lark). Loading dispatches on the kind recorded
in the verified header, so a caller never needs to know which kind a file holds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from fsmcompile.artifact.framing import read_header
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.index.token_index import TokenIndex
from fsmcompile.vocabulary import Vocabulary

if TYPE_CHECKING:
    from fsmcompile.index.grammar_index import GrammarIndex

AnyIndex = Union[TokenIndex, "GrammarIndex"]

__all__ = ["AnyIndex", "from_bytes", "load", "read_header", "save", "summarize", "to_bytes"]


def to_bytes(index: AnyIndex) -> bytes:
    """The artifact bytes for a compiled index of any kind (deterministic)."""
    if isinstance(index, TokenIndex):
        from fsmcompile.artifact import regex

        return regex.to_bytes(index)
    from fsmcompile.artifact import grammar

    return grammar.to_bytes(index)


def from_bytes(data: bytes, vocab: Vocabulary, source: str | None = None) -> AnyIndex:
    """Rebuild the index an artifact holds, for `vocab`.

    Raises:
        ArtifactCorruptError: damaged, truncated or not an artifact.
        ArtifactVersionError: written in another format (newer, or older: recompile).
        VocabularyMismatchError: compiled for another tokenizer or logits width.
    """
    doc = read_header(data, source)
    kind = doc.get("kind")
    if kind == "lark" or (kind == "json" and "lexer" in doc):
        from fsmcompile.artifact import grammar

        return grammar.from_bytes(data, vocab, source)
    if kind in ("regex", "json"):
        from fsmcompile.artifact import regex

        return regex.from_bytes(data, vocab, source)
    raise ArtifactCorruptError(f"artifact of unknown kind {kind!r}", source)


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """Sizes of a verified artifact body (from `read_header`), without decoding its arrays."""
    automaton = doc["dfa"] if "dfa" in doc else doc.get("lexer", {})
    shape = automaton.get("transitions", {}).get("shape", [0, 0])
    kinds = np.frombuffer(doc["masks"]["kinds"]["data"], dtype=np.uint8)
    summary = {
        "states": int(shape[0]),
        "byte_classes": int(shape[1]),
        "masks": int(kinds.shape[0]),
        "masks_by_storage": {
            "bitset": int((kinds == 0).sum()),
            "allowed_ids": int((kinds == 1).sum()),
            "rejected_ids": int((kinds == 2).sum()),
        },
    }
    if "table" in doc:
        summary["parser_states"] = int(doc["table"]["action"]["shape"][0])
        summary["terminals"] = len(doc.get("terminal_names", []))
    return summary


def save(index: AnyIndex, path: str | os.PathLike[str]) -> int:
    """Write the artifact atomically (temporary file + rename); returns its size in bytes."""
    target = Path(path)
    data = to_bytes(index)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return len(data)


def load(path: str | os.PathLike[str], vocab: Vocabulary) -> AnyIndex:
    """Read an artifact file written by `save` (see `from_bytes` for the errors)."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ArtifactCorruptError(f"cannot read artifact: {exc}", source) from exc
    return from_bytes(data, vocab, source)
