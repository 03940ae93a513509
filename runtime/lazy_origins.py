"""The runs and token groups of a `LazyGrammarIndex`, grown one origin at a time.

The C parser starts with every origin pending and raises `OriginPending(state)` when a row
needs an origin's groups; `GrammarTables` then asks this loader for them. The loader
walks the origin (`LazyGrammarIndex.origins`), sorts its groups into runs as an eager
index's are sorted (`runs_of`), appends them after the runs and groups it already holds,
and hands the parser the grown tables (`Parser.regroup`). Appending keeps every id the
parser has cached (runs, groups, dense rows, context sets); dense rows equal to one held
already are stored once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.nearby import NextStates, nearest_unmade

from .grammar_parser import runs_of
from .parser_tables import GroupTables

if TYPE_CHECKING:
    from fsmcompile.tables.lazy_grammar_index import LazyGrammarIndex

ORIGIN_BATCH = 64
"""Pending origins walked together: a walk's cost is mostly per trie level, so 64 origins
cost about what one does (1-5 ms with Llama 3 on median schemas, against 0.5-1 ms for
one), and one at a time made a first walk's masks 0.8 ms a token on average."""

_EMPTY64 = np.zeros(0, dtype=np.int64)
_EMPTY32 = np.zeros(0, dtype=np.int32)


class OriginLoader:
    """Every walked origin's runs and groups, as the parser's `GroupTables`.

    Not thread-safe: the `GrammarTables` that owns it is driven by one thread.
    """

    def __init__(self, index: LazyGrammarIndex, num_words: int) -> None:
        self.index = index
        self.num_words = num_words
        self.origin_run = np.full(2 * index.num_states, -1, dtype=np.int64)
        self.walked = 0  # origins walked so far
        self._next: NextStates | None = None  # the lexer's moves, listed as searches ask
        self._starts: list[int] = []
        self._labelled: list[bool] = []
        self._run_seq = _EMPTY64
        self._run_xset = _EMPTY64
        self._run_skip = _EMPTY64
        self._run_start = np.zeros(1, dtype=np.int64)
        self._run_groups = _EMPTY32
        self._group_dense = _EMPTY32
        self._group_token_start = np.zeros(1, dtype=np.int64)
        self._group_tokens = _EMPTY32
        self._masks: list[npt.NDArray[np.int32]] = []
        self._mask_ids: dict[bytes, int] = {}
        self._masks_flat = _EMPTY32

    def tables(self) -> GroupTables:
        """The runs and groups of the origins walked so far (the rest pending)."""
        start, context = self.index.origins.context_set_columns()
        return GroupTables(
            origin_run=self.origin_run.copy(),
            run_seq=self._run_seq,
            run_xset=self._run_xset,
            run_skip=self._run_skip,
            run_start=self._run_start,
            run_groups=self._run_groups,
            group_dense=self._group_dense,
            group_token_start=self._group_token_start,
            group_tokens=self._group_tokens,
            masks=self._masks_flat,
            ctxset_start=np.ascontiguousarray(start, dtype=np.int64),
            ctxset_context=np.ascontiguousarray(context, dtype=np.int32),
        )

    def load(self, state: int) -> GroupTables:
        """Walk origin `state` (if not walked yet), with up to `ORIGIN_BATCH` - 1 pending
        origins near it (`_batch`), and return the grown tables.

        Raises:
            IndexError: `state` is no lexer state.
        """
        if not 0 <= state < self.index.num_states:
            raise IndexError(f"no lexer state {state}: the lexer has {self.index.num_states}")
        if self.origin_run[2 * state] >= 0:
            return self.tables()
        batch = self._batch(state)
        origins = self.index.origins
        groups = origins.walk(batch)
        sequences = origins.sequences
        columns = tuple(
            np.frombuffer(column, dtype=np.int64)
            for column in (sequences.parent, sequences.terminal, sequences.context)
        )
        runs = runs_of(
            (columns[0], columns[1], columns[2]),
            groups["group_seq"],
            groups["group_xset"],
            groups["origin_entry_start"],
            groups["entry_group"],
        )
        group_base = int(self._group_dense.shape[0])
        run_base = int(self._run_seq.shape[0])
        entry_base = int(self._run_groups.shape[0])
        token_base = int(self._group_tokens.shape[0])
        dense = groups["group_dense"].astype(np.int64)
        kept = self._keep_masks(groups["masks"])
        dense_ids = np.where(dense >= 0, kept[np.maximum(dense, 0)], -1) if kept.size else dense
        self._group_dense = np.concatenate([self._group_dense, dense_ids.astype(np.int32)])
        self._group_token_start = np.concatenate(
            [self._group_token_start, groups["group_token_start"][1:].astype(np.int64) + token_base]
        )
        self._group_tokens = np.concatenate(
            [self._group_tokens, groups["group_tokens"].astype(np.int32)]
        )
        self._run_seq = np.concatenate([self._run_seq, runs.seq.astype(np.int64)])
        self._run_xset = np.concatenate([self._run_xset, runs.xset.astype(np.int64)])
        self._run_skip = np.concatenate([self._run_skip, runs.skip.astype(np.int64) + run_base])
        self._run_start = np.concatenate(
            [self._run_start, runs.start[1:].astype(np.int64) + entry_base]
        )
        self._run_groups = np.concatenate(
            [self._run_groups, (runs.groups.astype(np.int64) + group_base).astype(np.int32)]
        )
        bounds = runs.origin_run.astype(np.int64) + run_base
        self.origin_run[2 * batch] = bounds[:-1]
        self.origin_run[2 * batch + 1] = bounds[1:]
        self.walked += int(batch.shape[0])
        return self.tables()

    def _batch(self, state: int) -> npt.NDArray[np.int64]:
        """`state` and the pending origins nearest it, up to `ORIGIN_BATCH`: the lexer
        states its bytes lead to (the rest of its lexeme) and, past a label, the contexts'
        start states (where the next lexeme begins), breadth first. One walk of 64
        origins costs about what a walk of one does, and a text's next steps mostly visit
        these."""
        lexer = self.index.lexer
        if self._next is None:
            self._next = NextStates(np.asarray(lexer.transitions))
            self._starts = sorted(set(np.asarray(lexer.context_start).tolist()))
            self._labelled = (np.asarray(lexer.label) >= 0).tolist()
        moves, starts, labelled = self._next, self._starts, self._labelled

        def successors(q: int) -> list[int]:
            return moves(q) + starts if labelled[q] else moves(q)

        pending = self.origin_run[0::2] < 0
        batch = nearest_unmade(state, successors, lambda q: bool(pending[q]), ORIGIN_BATCH)
        return np.asarray(batch, dtype=np.int64)

    def _keep_masks(self, masks: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
        """The dense row id of each of a walk's rows, a row equal to one held reusing it."""
        ids = np.empty(masks.shape[0], dtype=np.int64)
        added = []
        for i, row in enumerate(np.ascontiguousarray(masks, dtype=np.int32)):
            key = row.tobytes()
            found = self._mask_ids.get(key)
            if found is None:
                found = self._mask_ids[key] = len(self._masks)
                self._masks.append(row)
                added.append(row)
            ids[i] = found
        if added:
            self._masks_flat = np.concatenate([self._masks_flat, *added]).astype(np.int32)
        return ids
