"""Artifact body of a Lark GrammarIndex: lexer automaton, parse table and token groups.

The envelope (header, checksum, arrays) is `framing.py`'s, the mask rows `rows.py`'s, and
every table is checked by `validate.py` before the index is built.
"""

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
from fsmcompile.artifact.validate import Body, grammar_columns, max_sequence_depth
from fsmcompile.errors import ArtifactCorruptError
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lark_grammar import ParseTable
from fsmcompile.tables.lexer_automaton import LexerAutomaton
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
            "masks": encode_rows(index.masks, index.vocab_size),
            "kill_masks": encode_rows(index.kill_masks, index.vocab_size),
        }
    )


def from_bytes(
    data: bytes,
    vocab: Vocabulary,
    source: str | None = None,
    *,
    max_decoded_bytes: int | None = None,
) -> GrammarIndex:
    """Rebuild a GrammarIndex for `vocab` from artifact bytes, every table checked first
    (`validate.grammar_columns`): a body that passes can index nothing out of bounds and
    loop nowhere at run time.

    Args:
        max_decoded_bytes: mask rows up to this many decoded bytes always load (default
            `$FSMCOMPILE_MAX_DECODED_BYTES`, else 256 MiB); see `rows.check_budget`.

    Raises:
        ArtifactCorruptError: damaged, truncated, not an artifact, not a grammar one, or a
            table out of range (`pointer` names it).
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
) -> GrammarIndex:
    """`from_bytes` of a verified body (`read_header`), parsed once by the caller."""
    if doc.get("kind") not in KINDS or "lexer" not in doc:
        raise ArtifactCorruptError(f"not a grammar artifact (kind {doc.get('kind')!r})", source)
    check_vocabulary(doc, vocab, source)
    body = Body(doc, source)
    columns = grammar_columns(body, vocab.size, max_sequence_depth(vocab))
    masks = read_rows(body, "/masks", vocab.size)
    kill_masks = read_rows(body, "/kill_masks", vocab.size)
    body.check_range("/index/group_dense", columns["group_dense"], -1, masks.num_rows)
    body.check_range("/index/state_kill", columns["state_kill"], -1, kill_masks.num_rows)
    ceiling = max_decoded_bytes_default() if max_decoded_bytes is None else max_decoded_bytes
    check_budget(body, [masks, kill_masks], vocab.size, ceiling)
    arrays = {name: np.array(column) for name, column in columns.items()}  # writeable copies
    return GrammarIndex(
        lexer=LexerAutomaton(**{f: arrays[f] for f in _LEXER_FIELDS}),
        table=ParseTable(
            **{f: arrays[f] for f in _TABLE_FIELDS},
            start_state=int(doc["table"]["start_state"]),
            end_state=int(doc["table"]["end_state"]),
        ),
        terminal_names=body.strings("/terminal_names"),
        **{f: arrays[f] for f in _INDEX_FIELDS},
        masks=decode_rows(masks, vocab.size),
        kill_masks=decode_rows(kill_masks, vocab.size),
        vocabulary=vocab,
        kind=str(doc["kind"]),
        spec_hash=str(body.field("/spec_hash")),
    )
