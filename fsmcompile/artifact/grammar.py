"""Artifact body of a Lark GrammarIndex: lexer automaton, parse table and token groups.

The envelope (header, checksum, arrays, smallest-of mask encoding) is `framing.py`'s.
"""

from __future__ import annotations

from typing import Any

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
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.index.grammar_index import GrammarIndex
from fsmcompile.index.grammar_lexer import LexerAutomaton
from fsmcompile.spec.lark.grammar import ParseTable
from fsmcompile.vocabulary import Vocabulary

KINDS = ("lark", "json")
"""A Lark grammar, or a JSON Schema that needed one (recursive or free-form values)."""

_LEXER_FIELDS = (
    "transitions",
    "class_of_byte",
    "label",
    "context_start",
    "restart_context",
    "char_bound",
    "char_start",
)
_TABLE_FIELDS = ("action", "goto", "rule_lhs", "rule_len", "context_of_state")
_INDEX_FIELDS = (
    "ignored",
    "seq_parent",
    "seq_terminal",
    "seq_context",
    "ctxset_start",
    "ctxset_context",
    "state_xset",
    "xset_start",
    "xset_terminal",
    "xset_context",
    "origin_entry_start",
    "entry_group",
    "group_seq",
    "group_xset",
    "group_dense",
    "group_token_start",
    "group_tokens",
    "state_kill",
)


def to_bytes(index: GrammarIndex) -> bytes:
    """The artifact for `index` (deterministic: equal indexes give equal bytes)."""
    lexer, table = index.lexer, index.table
    return frame(
        body_header(index.kind, index.spec_hash, index.vocabulary)
        | {
            "terminal_names": list(index.terminal_names),
            "lexer": {f: pack_array(getattr(lexer, f)) for f in _LEXER_FIELDS},
            "table": {f: pack_array(getattr(table, f)) for f in _TABLE_FIELDS}
            | {"start_state": table.start_state, "end_state": table.end_state},
            "index": {f: pack_array(getattr(index, f)) for f in _INDEX_FIELDS},
            "masks": encode_masks(index.masks, index.vocab_size),
            "kill_masks": encode_masks(index.kill_masks, index.vocab_size),
        }
    )


def from_bytes(data: bytes, vocab: Vocabulary, source: str | None = None) -> GrammarIndex:
    """Rebuild a GrammarIndex for `vocab` from artifact bytes.

    Raises:
        ArtifactCorruptError: damaged, truncated, not an artifact, or not a lark one.
        ArtifactVersionError: written in another format (newer, or older: recompile).
        VocabularyMismatchError: compiled for another tokenizer or logits width.
    """
    doc = read_header(data, source)
    if doc.get("kind") not in KINDS or "lexer" not in doc:
        raise ArtifactCorruptError(f"not a grammar artifact (kind {doc.get('kind')!r})", source)
    check_vocabulary(doc, vocab, source)
    try:
        arrays: dict[str, Any] = {}
        for part, fields in (
            ("lexer", _LEXER_FIELDS),
            ("table", _TABLE_FIELDS),
            ("index", _INDEX_FIELDS),
        ):
            for f in fields:
                arrays[f] = np.array(unpack_array(doc[part][f], source))  # writeable copy
        lexer = LexerAutomaton(**{f: arrays[f] for f in _LEXER_FIELDS})
        table = ParseTable(
            **{f: arrays[f] for f in _TABLE_FIELDS},
            start_state=int(doc["table"]["start_state"]),
            end_state=int(doc["table"]["end_state"]),
        )
        index = GrammarIndex(
            lexer=lexer,
            table=table,
            terminal_names=tuple(doc["terminal_names"]),
            **{f: arrays[f] for f in _INDEX_FIELDS},
            masks=decode_masks(doc["masks"], vocab.size, source),
            kill_masks=decode_masks(doc["kill_masks"], vocab.size, source),
            vocabulary=vocab,
            kind=str(doc["kind"]),
            spec_hash=str(doc["spec_hash"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactCorruptError(f"lark artifact lacks or garbles {exc}", source) from exc
    _check_fits(index, source)
    return index


def _check_fits(index: GrammarIndex, source: str | None) -> None:
    """Cross-check table sizes so a consistent-checksum but foreign body cannot index out of
    bounds at run time."""
    states = index.lexer.num_states
    groups = index.group_seq.shape[0]
    ok = (
        index.origin_entry_start.shape[0] == states + 1
        and index.state_xset.shape[0] == states
        and index.state_kill.shape[0] == states
        and index.lexer.label.shape[0] == states
        and int(index.origin_entry_start[-1]) == index.entry_group.shape[0]
        and (groups == 0 or int(index.entry_group.max(initial=0)) < groups)
        and int(index.group_token_start[-1]) == index.group_tokens.shape[0]
        and int(index.group_dense.max(initial=-1)) < index.masks.shape[0]
        and int(index.state_kill.max(initial=-1)) < index.kill_masks.shape[0]
        and index.table.action.shape[1] == len(index.terminal_names) + 1
        and index.ignored.shape[0] == len(index.terminal_names)
        and int(index.ctxset_start[-1]) == index.ctxset_context.shape[0]
        and int(index.seq_context.max(initial=0))
        < index.lexer.context_start.shape[0] + index.ctxset_start.shape[0] - 1
        and int(index.ctxset_context.max(initial=-1)) < index.lexer.context_start.shape[0]
    )
    if not ok:
        raise ArtifactCorruptError("lark artifact tables do not fit together", source)
