"""Artifact body of a regex / JSON Schema TokenIndex: the DFA, state masks and masks."""

from __future__ import annotations

import numpy as np

from fsmcompile.artifact.framing import (
    body_header,
    check_vocabulary,
    decode_masks,
    encode_masks,
    frame,
    pack_array,
    read_header,
    unpack_array,
)
from fsmcompile.automaton.dfa import ByteDFA
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.index.token_index import TokenIndex
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
            "masks": encode_masks(index.masks, index.vocab_size),
        }
    )


def from_bytes(data: bytes, vocab: Vocabulary, source: str | None = None) -> TokenIndex:
    """Rebuild a TokenIndex for `vocab` from artifact bytes.

    Raises:
        ArtifactCorruptError: damaged, truncated or not an artifact.
        ArtifactVersionError: written in another format (newer, or older: recompile).
        VocabularyMismatchError: compiled for another tokenizer or logits width.
    """
    doc = read_header(data, source)
    check_vocabulary(doc, vocab, source)
    try:
        dfa = ByteDFA(
            transitions=unpack_array(doc["dfa"]["transitions"], source).astype(np.int32),
            class_of_byte=unpack_array(doc["dfa"]["class_of_byte"], source).astype(np.int32),
            accepting=unpack_array(doc["dfa"]["accepting"], source).astype(np.bool_),
        )
        state_mask = unpack_array(doc["state_mask"], source).astype(np.int32)
        masks = decode_masks(doc["masks"], vocab.size, source)
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
