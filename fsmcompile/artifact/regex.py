"""Artifact body of a regex / JSON Schema TokenIndex: the DFA, state masks and masks."""

from __future__ import annotations

from typing import Any

import numpy as np

from fsmcompile.artifact.framing import (
    body_header,
    check_vocabulary,
    frame,
    pack_array,
    read_header,
)
from fsmcompile.artifact.rows import (
    check_budget,
    decode_rows,
    encode_rows,
    max_decoded_bytes_default,
    read_rows,
)
from fsmcompile.artifact.validate import Body, dfa_columns
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.vocabulary import Vocabulary


def to_bytes(index: TokenIndex) -> bytes:
    """The artifact for `index` (deterministic: equal indexes give equal bytes)."""
    return frame(
        body_header(index.kind, index.spec_hash, index.vocabulary)
        | {
            "dfa": {
                "transitions": pack_array(index.dfa.transitions.astype("<i4")),
                "class_of_byte": pack_array(index.dfa.class_of_byte.astype("<i4")),
                "accepting": pack_array(index.dfa.accepting.astype(np.uint8)),
            },
            "state_mask": pack_array(index.state_mask.astype("<i4")),
            "masks": encode_rows(index.masks, index.vocab_size),
        }
    )


def from_bytes(
    data: bytes,
    vocab: Vocabulary,
    source: str | None = None,
    *,
    max_decoded_bytes: int | None = None,
) -> TokenIndex:
    """Rebuild a TokenIndex for `vocab` from artifact bytes, every table checked first
    (`validate.dfa_columns`, `rows.read_rows`).

    Args:
        max_decoded_bytes: mask rows up to this many decoded bytes always load (default
            `$FSMCOMPILE_MAX_DECODED_BYTES`, else 256 MiB); see `rows.check_budget`.

    Raises:
        ArtifactCorruptError: damaged, truncated, not an artifact, or a table out of range
            (`pointer` names it).
        ArtifactVersionError: written in another format (newer, or older: recompile).
        VocabularyMismatchError: compiled for another tokenizer or logits width.
    """
    return from_body(read_header(data, source), vocab, source, max_decoded_bytes=max_decoded_bytes)


def from_body(
    doc: dict[str, Any],
    vocab: Vocabulary,
    source: str | None = None,
    *,
    max_decoded_bytes: int | None = None,
) -> TokenIndex:
    """`from_bytes` of a verified body (`read_header`), parsed once by the caller."""
    check_vocabulary(doc, vocab, source)
    body = Body(doc, source)
    dfa = dfa_columns(body)
    rows = read_rows(body, "/masks", vocab.size)
    if rows.num_rows < 1:
        raise body.fail("/masks/kinds", "no mask rows", expected=">= 1", found=0)
    states = dfa["transitions"].shape[0]
    state_mask = body.ids("/state_mask", (states,), 0, rows.num_rows)
    ceiling = max_decoded_bytes_default() if max_decoded_bytes is None else max_decoded_bytes
    check_budget(body, [rows], vocab.size, ceiling)
    return TokenIndex(
        dfa=ByteDFA(
            transitions=dfa["transitions"].astype(np.int32),
            class_of_byte=dfa["class_of_byte"].astype(np.int32),
            accepting=dfa["accepting"].astype(np.bool_),
        ),
        state_mask=state_mask.astype(np.int32),
        masks=decode_rows(rows, vocab.size),
        vocabulary=vocab,
        kind=str(body.field("/kind")),
        spec_hash=str(body.field("/spec_hash")),
    )
