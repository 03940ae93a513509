"""Lark grammar + vocabulary → GrammarIndex: precomputed token groups the parser picks from.

For every lexer state (the origin) each text token has one or a few outcomes: the
terminals it completes (with the lexer context assumed after each), the lexer state it
ends in, and so the exit set of its last, unfinished lexeme (`fsmcompile.index.cfg.exits`). Tokens
with equal (emitted terminals, exit set) form a group with one precomputed mask, shared by
every origin that agrees on it. Tokens that stay inside the lexeme form the few big groups
(the inside-a-string group holds most of the vocabulary); tokens that cross lexeme
boundaries form many small ones, stored as token lists. Tokens whose first byte ends a
finished lexeme are not grouped at all: they read as the next context's start state, and
the runtime composes that state's row (`kill_masks`). At run time the parser decides which
groups of the current origin are valid for its stack, and their masks are ORed
(runtime/grammar_tables.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import unique_rows
from fsmcompile.index.cfg.origins import OriginGroups, OriginWalker
from fsmcompile.tables.bits import pack_gathered_rows
from fsmcompile.tables.grammar_index import GrammarIndex
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex
from fsmcompile.tables.lexer_automaton import LexerAutomaton
from fsmcompile.vocabulary import Vocabulary

logger = logging.getLogger(__name__)

_ORIGIN_CHUNK = 512
"""Origins (lexer states) walked together. Each walk entry carries a bitset of its
origins, and most entries hold one to four, so a walk of thousands of origins moved
mostly zeros: 56-word rows for a 3,544-state lexer. Chunks of 512 walked that schema's
vocabulary in 1.8 s instead of 4.1, at the price of walking again the few entries that
origins of different chunks share."""


def build_grammar_index(
    grammar: LarkGrammar,
    vocab: Vocabulary,
    *,
    spec_hash: str,
    max_states: int,
    deadline: float | None = None,
    kind: str = "lark",
) -> GrammarIndex:
    """Build the lexer automaton and every origin's token groups.

    Args:
        grammar: the analysed grammar (`fsmcompile.grammar.load_lark_grammar`).
        vocab: the tokenizer; its trie is walked from `_ORIGIN_CHUNK` lexer states at a
            time.
        spec_hash: stored in the index, keys its cache entry.
        max_states: the largest lexer automaton (and lexer NFA) allowed.
        deadline: `time.monotonic()` value past which the build stops.
        kind: the spec kind the index is stored as ('lark', or 'json' for a schema
            that needed a grammar).

    Raises:
        BudgetExceededError: the lexer passes `max_states` or the compile its deadline.
        UnsupportedFeatureError: a terminal the lexer automaton cannot express.
    """
    started = time.perf_counter()
    walker = OriginWalker(grammar, vocab, max_states=max_states, deadline=deadline)
    lexer = walker.lexer
    prepared = time.perf_counter()
    parts = []
    for lo in range(0, lexer.num_states, _ORIGIN_CHUNK):
        origins = np.arange(lo, min(lo + _ORIGIN_CHUNK, lexer.num_states), dtype=np.int64)
        parts.append(walker.walk(origins, deadline))
    walked = time.perf_counter()
    groups = _joined_groups(parts)
    logger.debug(
        "grammar index: %d lexer states (%d shapes), %d groups, %d dense masks; lexer and "
        "levels %.1f ms, walk %.1f ms, groups %.1f ms",
        lexer.num_states,
        walker.shapes.num_shapes,
        groups["group_seq"].shape[0],
        groups["masks"].shape[0],
        (prepared - started) * 1e3,
        (walked - prepared) * 1e3,
        (time.perf_counter() - walked) * 1e3,
    )
    return _index(walker, groups, spec_hash=spec_hash, kind=kind)


def _index(
    walker: OriginWalker, groups: OriginGroups, *, spec_hash: str, kind: str
) -> GrammarIndex:
    """The `GrammarIndex` of a walker's shared parts and every origin's `groups`."""
    sequences = walker.sequences
    ctxset_start, ctxset_context = walker.context_set_columns()
    parts: dict[str, Any] = {**_shared_parts(walker), **groups}
    return GrammarIndex(
        **parts,
        seq_parent=np.asarray(sequences.parent, dtype=np.int32),
        seq_terminal=np.asarray(sequences.terminal, dtype=np.int32),
        seq_context=np.asarray(sequences.context, dtype=np.int32),
        ctxset_start=ctxset_start,
        ctxset_context=ctxset_context,
        kind=kind,
        spec_hash=spec_hash,
    )


def _shared_parts(walker: OriginWalker) -> dict[str, Any]:
    """What an eager and a lazy grammar index hold alike: the lexer, the parse table, the
    terminals, the exit sets and the kill masks, and the vocabulary."""
    grammar, lexer, exits = walker.grammar, walker.lexer, walker.exits
    state_kill, kill_masks = _kill_masks(lexer, walker.vocab)
    return {
        "lexer": lexer,
        "table": grammar.table,
        "terminal_names": tuple(t.name for t in grammar.terminals),
        "ignored": grammar.ignored,
        "state_xset": exits.state_xset,
        "xset_start": exits.pair_start,
        "xset_terminal": exits.pair_terminal,
        "xset_context": exits.pair_context,
        "state_kill": state_kill,
        "kill_masks": kill_masks,
        "vocabulary": walker.vocab,
    }


def build_lazy_grammar_index(
    grammar: LarkGrammar,
    vocab: Vocabulary,
    *,
    spec_hash: str,
    max_states: int,
    deadline: float | None = None,
    kind: str = "lark",
    complete: Callable[[], GrammarIndex] | None = None,
) -> LazyGrammarIndex:
    """The lexer automaton and the walks' shared parts now; each origin's token groups
    when a mask first needs them (`LazyGrammarIndex`). Arguments and errors as
    `build_grammar_index`; `complete` builds the eager index (`LazyGrammarIndex.complete`).
    """
    walker = OriginWalker(grammar, vocab, max_states=max_states, deadline=deadline)
    return LazyGrammarIndex(
        **_shared_parts(walker),
        kind=kind,
        spec_hash=spec_hash,
        origins=walker,
        completer=complete,
    )


def _joined_groups(parts: list[dict[str, npt.NDArray[Any]]]) -> dict[str, npt.NDArray[Any]]:
    """The groups of consecutive origin chunks as one table: ids offset, equal dense
    masks stored once. A group two chunks both found stays two groups, one per chunk, so
    each origin's entries are exactly those its own chunk's walk gave it."""
    if len(parts) == 1:
        return parts[0]
    group_base = np.cumsum([0] + [p["group_seq"].shape[0] for p in parts])
    mask_base = np.cumsum([0] + [p["masks"].shape[0] for p in parts])
    token_base = np.cumsum([0] + [p["group_tokens"].shape[0] for p in parts])
    entry_base = np.cumsum([0] + [p["entry_group"].shape[0] for p in parts])
    masks = np.concatenate([p["masks"] for p in parts])
    first_row, row_of = unique_rows(masks)
    row_of = row_of.reshape(-1)
    group_dense = np.concatenate([p["group_dense"] for p in parts])
    chunk_of_group = np.repeat(np.arange(len(parts)), np.diff(group_base))
    dense = group_dense >= 0
    group_dense[dense] = row_of[group_dense[dense] + mask_base[chunk_of_group[dense]]]
    return {
        "origin_entry_start": np.concatenate(
            [parts[0]["origin_entry_start"][:1]]
            + [p["origin_entry_start"][1:] + entry_base[i] for i, p in enumerate(parts)]
        ),
        "entry_group": np.concatenate(
            [p["entry_group"] + group_base[i] for i, p in enumerate(parts)]
        ).astype(np.int32),
        "group_seq": np.concatenate([p["group_seq"] for p in parts]),
        "group_xset": np.concatenate([p["group_xset"] for p in parts]),
        "group_dense": group_dense.astype(np.int32),
        "group_token_start": np.concatenate(
            [parts[0]["group_token_start"][:1]]
            + [p["group_token_start"][1:] + token_base[i] for i, p in enumerate(parts)]
        ),
        "group_tokens": np.concatenate([p["group_tokens"] for p in parts]),
        "masks": np.ascontiguousarray(masks[first_row]),
    }


def _kill_masks(
    lexer: LexerAutomaton, vocab: Vocabulary
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Per labelled state, the tokens whose first byte kills it, as shared packed rows."""
    labelled = np.flatnonzero(lexer.label >= 0)
    kills = lexer.transitions[labelled] < 0  # bool[labelled, C]
    first_kill, row_of = unique_rows(kills.astype(np.int32))
    patterns = kills[first_kill]
    state_kill = np.full(lexer.num_states, -1, dtype=np.int32)
    state_kill[labelled] = row_of.reshape(-1)
    # Per first byte (256: no text, never killed), then one gather over the ids; `take`
    # keeps rows contiguous (`by_byte[:, ids]` is column-major, and packing it is 5x slower).
    by_byte = np.zeros((patterns.shape[0], 257), dtype=np.bool_)
    by_byte[:, :256] = patterns[:, lexer.class_of_byte]
    return state_kill, pack_gathered_rows(by_byte, vocab.trie.first_byte_by_id(vocab.size))
