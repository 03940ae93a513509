"""One grammar's vocabulary walk, from whichever lexer states (origins) are asked for.

`OriginWalker` builds what every walk reads once (the lexer automaton, its shapes and exit
sets, the region server, liveness levels, the interned sequences and context sets), then
walks the vocabulary trie from a batch of origins and returns their token groups. The
eager index walks every origin in chunks (`build.build_grammar_index`); a lazy one walks
an origin the first time a mask asks for it (`build.build_lazy_grammar_index`). An
origin's groups are the same whichever origins share its batch, so both give the same rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.index.cfg.context_sets import ContextSets
from fsmcompile.index.cfg.exits import ExitSets, exit_sets
from fsmcompile.index.cfg.fresh_items import countable_for
from fsmcompile.index.cfg.lexer_build import build_lexer_automaton
from fsmcompile.index.cfg.lexer_shapes import lexer_shapes
from fsmcompile.index.cfg.regions import DENSE_MIN_TOKENS, RegionServer, StayGroups
from fsmcompile.index.cfg.trie_walk import WalkRecords, walk_grammar_tokens, walk_levels
from fsmcompile.index.wide_rows import unique_mask_rows, unique_wide_rows
from fsmcompile.tables.bits import pack_token_ids
from fsmcompile.tables.grammar_index import next_contexts
from fsmcompile.tables.lark_grammar import LarkGrammar
from fsmcompile.tables.sequences import ConstraintTable, SequenceTable
from fsmcompile.tables.sorted_keys import concatenated_ranges
from fsmcompile.vocabulary import Vocabulary

OriginGroups = dict[str, npt.NDArray[Any]]
"""The token groups of a batch of origins, as `GrammarIndex` columns: origin_entry_start
(per batch position), entry_group, group_seq, group_xset, group_dense, group_token_start,
group_tokens and masks, ids local to the batch."""


class OriginWalker:
    """The shared parts of a grammar's vocabulary walks, and `walk(origins)`.

    Not thread-safe: walks extend the interned sequences and context sets, so one thread
    walks at a time (the runtime's grammar tables are driven by one engine thread).

    Raises (constructor):
        BudgetExceededError: the lexer passes `max_states` or the build its deadline.
        UnsupportedFeatureError: a terminal the lexer automaton cannot express.
    """

    def __init__(
        self,
        grammar: LarkGrammar,
        vocab: Vocabulary,
        *,
        max_states: int,
        deadline: float | None = None,
    ) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.lexer = build_lexer_automaton(
            grammar,
            max_states=max_states,
            deadline=deadline,
            countable=countable_for(vocab, grammar),
        )
        lexer = self.lexer
        num_terminals = len(grammar.terminals)
        self.contexts_after = next_contexts(grammar.table, num_terminals)
        self._ignored: list[bool] = grammar.ignored.tolist()
        self.shapes = lexer_shapes(lexer, deadline)
        self.exits: ExitSets = exit_sets(lexer, num_terminals)
        # Shapes keep labels and transitions, so every state of a shape has its exit set.
        self.shape_xset = np.zeros(self.shapes.num_shapes, dtype=np.int32)
        self.shape_xset[self.shapes.of_state] = self.exits.state_xset
        self.regions = RegionServer(self.shapes, vocab)
        height = int(vocab.trie.node_height[0]) if vocab.trie.num_nodes else 0
        self.context_sets = ContextSets(
            self.contexts_after,
            int(lexer.context_start.shape[0]),
            int(lexer.transitions.shape[1]),
            merge=not grammar.ignored.any(),
        )
        self.sequences = SequenceTable(num_terminals, self.context_sets.capacity)
        self.constraints = ConstraintTable()
        self.levels = walk_levels(self.shapes, self.shape_xset, self.regions, height, deadline)

    def walk(self, origins: npt.NDArray[np.int64], deadline: float | None = None) -> OriginGroups:
        """The token groups of `origins` (lexer states; batch position i is origins[i]).

        Raises:
            BudgetExceededError: past `deadline`, or a walk too large for memory.
        """
        records = walk_grammar_tokens(
            self.shapes,
            self.vocab.trie,
            self.contexts_after,
            self._ignored,
            self.sequences,
            self.constraints,
            deadline,
            levels=self.levels,
            regions=self.regions,
            origins=origins,
            context_sets=self.context_sets,
        )
        stays = self.regions.take_stays()
        return _groups(records, self.shape_xset, self.vocab, int(origins.shape[0]), stays)

    def context_set_columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The context sets interned so far, as `GrammarIndex.ctxset_start`/`ctxset_context`."""
        return self.context_sets.columns()


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
