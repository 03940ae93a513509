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
from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique, unique_rows
from fsmcompile.index.cfg.context_sets import ContextSets
from fsmcompile.index.cfg.exits import exit_sets
from fsmcompile.index.cfg.fresh_items import countable_for
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_shapes import lexer_shapes
from fsmcompile.index.cfg.regions import DENSE_MIN_TOKENS, RegionServer, StayGroups
from fsmcompile.index.cfg.trie_walk import WalkRecords, walk_grammar_tokens, walk_levels
from fsmcompile.index.wide_rows import unique_mask_rows, unique_wide_rows
from fsmcompile.tables.bits import pack_gathered_rows, pack_token_ids
from fsmcompile.tables.grammar_index import GrammarIndex, next_contexts
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.lexer_automaton import LexerAutomaton
from fsmcompile.tables.sequences import ConstraintTable, SequenceTable
from fsmcompile.tables.sorted_keys import concatenated_ranges
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
    lexer = build_lexer_automaton(
        grammar,
        max_states=max_states,
        deadline=deadline,
        countable=countable_for(vocab, grammar),
    )
    num_terminals = len(grammar.terminals)
    ignored = grammar.ignored
    contexts_after = next_contexts(grammar.table, num_terminals)
    lexed = time.perf_counter()

    shapes = lexer_shapes(lexer, deadline)
    exits = exit_sets(lexer, num_terminals)
    # Shapes keep labels and transitions, so every state of a shape has its exit set.
    shape_xset = np.zeros(shapes.num_shapes, dtype=np.int32)
    shape_xset[shapes.of_state] = exits.state_xset
    regions = RegionServer(shapes, vocab)
    height = int(vocab.trie.node_height[0]) if vocab.trie.num_nodes else 0
    context_sets = ContextSets(
        contexts_after,
        int(lexer.context_start.shape[0]),
        int(lexer.transitions.shape[1]),
        merge=not ignored.any(),
    )
    sequences = SequenceTable(num_terminals, context_sets.capacity)
    constraints = ConstraintTable()
    levels = walk_levels(shapes, shape_xset, regions, height, deadline)
    parts = []
    for lo in range(0, lexer.num_states, _ORIGIN_CHUNK):
        origins = np.arange(lo, min(lo + _ORIGIN_CHUNK, lexer.num_states), dtype=np.int64)
        records = walk_grammar_tokens(
            shapes,
            vocab.trie,
            contexts_after,
            ignored.tolist(),
            sequences,
            constraints,
            deadline,
            levels=levels,
            regions=regions,
            origins=origins,
            context_sets=context_sets,
        )
        stays = regions.take_stays()
        parts.append(_groups(records, shape_xset, vocab, origins.shape[0], stays))
    walked = time.perf_counter()
    groups = _joined_groups(parts)
    state_kill, kill_masks = _kill_masks(lexer, vocab)
    logger.debug(
        "grammar index: %d lexer states (%d shapes), %d groups, %d dense masks; lexer %.1f ms, "
        "walk %.1f ms, groups %.1f ms",
        lexer.num_states,
        shapes.num_shapes,
        groups["group_seq"].shape[0],
        groups["masks"].shape[0],
        (lexed - started) * 1e3,
        (walked - lexed) * 1e3,
        (time.perf_counter() - walked) * 1e3,
    )
    ctxset_start, ctxset_context = context_sets.columns()
    return GrammarIndex(
        lexer=lexer,
        table=grammar.table,
        terminal_names=tuple(t.name for t in grammar.terminals),
        ignored=ignored,
        seq_parent=np.asarray(sequences.parent, dtype=np.int32),
        seq_terminal=np.asarray(sequences.terminal, dtype=np.int32),
        seq_context=np.asarray(sequences.context, dtype=np.int32),
        ctxset_start=ctxset_start,
        ctxset_context=ctxset_context,
        state_xset=exits.state_xset,
        xset_start=exits.pair_start,
        xset_terminal=exits.pair_terminal,
        xset_context=exits.pair_context,
        **groups,
        state_kill=state_kill,
        kill_masks=kill_masks,
        vocabulary=vocab,
        kind=kind,
        spec_hash=spec_hash,
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


def _set_bits_of_rows(
    rows: npt.NDArray[np.uint64], width: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, bit) of every set bit below `width` in uint64 bitset rows, by row then bit.

    Only the nonzero words are unpacked: a group's origins are a few words of a bitset
    thousands of lexer states wide, and unpacking whole rows was most of the cost."""
    row, word = np.nonzero(rows)
    values = np.ascontiguousarray(rows[row, word], dtype="<u8")
    flags = np.unpackbits(values.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    at, bit = np.nonzero(flags)
    column = word[at] * 64 + bit
    keep = column < width
    return row[at][keep].astype(np.int64), column[keep].astype(np.int64)


def _groups(
    records: WalkRecords,
    state_xset: npt.NDArray[np.int32],
    vocab: Vocabulary,
    num_origins: int,
    stays: StayGroups,
) -> dict[str, npt.NDArray[Any]]:
    """Group token outcomes by (seq, exit set, origins) and list each origin's groups.

    Grouping by the origin bitset first keeps the work linear in the records: the
    inside-a-string outcome of 100k tokens is one group shared by every string state,
    never 100k x (string states) pairs. Region stays come grouped already (after the
    walk's groups); their token patterns are packed once each.
    """
    trie = vocab.trie
    xset = state_xset[records.state].astype(np.uint64)
    keys = np.stack([records.seq.astype(np.uint64), xset], axis=1)
    first, group_of_rec = unique_wide_rows(records.origins, keys)
    walked = first.shape[0]
    num_groups = walked + len(stays.patterns)
    # Tokens of each record's trie node (several ids can share bytes).
    node_start, ids_by_node = trie.tokens_by_node()
    lo = node_start[records.node]
    counts = node_start[records.node + 1] - lo
    rec = np.repeat(np.arange(records.node.shape[0]), counts)
    tokens = ids_by_node[concatenated_ranges(counts) + lo[rec]]
    member = sorted_unique(group_of_rec[rec] * vocab.size + tokens)
    group_of, tokens = member // vocab.size, member % vocab.size
    pattern_sizes = np.asarray(stays.sizes, dtype=np.int64)
    sizes = np.concatenate([np.bincount(group_of, minlength=walked), pattern_sizes])
    dense = np.flatnonzero(sizes[:walked] >= DENSE_MIN_TOKENS)
    in_dense = np.full(walked, -1, dtype=np.int64)
    in_dense[dense] = np.arange(dense.shape[0])
    listed = in_dense[group_of] < 0
    # Dense rows: the walk's dense groups, then every dense stay pattern once.
    dense_patterns = np.flatnonzero(pattern_sizes >= DENSE_MIN_TOKENS)
    walked_rows = pack_token_ids(
        in_dense[group_of[~listed]], tokens[~listed], dense.shape[0], vocab.size
    )
    stay_rows, stay_row_of = stays.packed_rows(dense_patterns.tolist(), vocab.size)
    packed = np.concatenate([walked_rows, stay_rows])
    first_row, row_of = unique_mask_rows(packed)
    masks = packed[first_row]
    row_of_pattern = np.full(pattern_sizes.shape[0], -1, dtype=np.int64)
    row_of_pattern[dense_patterns] = row_of[dense.shape[0] + stay_row_of]
    group_dense = np.full(num_groups, -1, dtype=np.int32)
    group_dense[dense] = row_of[: dense.shape[0]]
    group_dense[walked:] = row_of_pattern
    listed_sizes = np.where(group_dense < 0, sizes, 0)
    listed_stays = [
        stays.tokens(p, vocab.size) for p in np.flatnonzero(row_of_pattern < 0).tolist()
    ]
    group_tokens = np.concatenate([tokens[listed], *listed_stays])
    # Entries: (origin, group) pairs from each group's origin bitset, sorted by origin.
    words = records.origins.shape[1]
    group_origins = np.concatenate([np.take(records.origins, first, axis=0), stays.origins(words)])
    entry_group, entry_origin = _set_bits_of_rows(group_origins, num_origins)
    order = np.lexsort((entry_group, entry_origin))
    entry_group, entry_origin = entry_group[order], entry_origin[order]
    return {
        "origin_entry_start": np.searchsorted(entry_origin, np.arange(num_origins + 1)).astype(
            np.int64
        ),
        "entry_group": entry_group.astype(np.int32),
        "group_seq": np.concatenate(
            [records.seq[first], np.asarray(stays.seq, dtype=np.int64)]
        ).astype(np.int32),
        "group_xset": np.concatenate(
            [state_xset[records.state[first]], state_xset[np.asarray(stays.state, dtype=np.int64)]]
        ).astype(np.int32),
        "group_dense": group_dense,
        "group_token_start": np.concatenate([[0], np.cumsum(listed_sizes)]).astype(np.int64),
        "group_tokens": group_tokens.astype(np.int32),
        "masks": np.ascontiguousarray(masks, dtype=np.int32),
    }
