"""One state's mask row on demand: the row source of a `LazyTokenIndex`.

The eager builder (`build.py`) groups every state by liveness first, so that each group
walks the vocabulary once; that grouping is a pass over the whole automaton, paid before
any mask. A single state needs none of it: the C walk of `trie_walk.py` run from a few
origins with identity levels (nothing merged, no regions) visits only the trie nodes
those states keep alive. EOS is set exactly where `build.py` sets it: in accepting states.
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.index.dfa.levels import LivenessLevels
from fsmcompile.index.dfa.trie_walk import walk_live_tokens
from fsmcompile.tables.bits import bitmask_words, set_bits
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lazy_index import Completer, LazyTokenIndex
from fsmcompile.tables.nearby import NextStates, nearest_unmade
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import StateId
from fsmcompile.vocabulary import Vocabulary

ROW_BATCH = 32
"""States whose rows one walk makes after the first: one walk from 32 origins costs about
a quarter of 32 walks from one (Llama 3, corpus schemas: 64 rows in 8 ms against 30 ms).
The first row is walked alone, so the first mask does not wait for its neighbours."""


class StateRows:
    """Computes the eager index's row of any one state of `dfa` for `vocab` (`RowSource`).

    Holds what every row shares (identity levels, the EOS ids, the trie's token ids). The
    first row costs one walk from its state; a later one walks its state with up to
    `ROW_BATCH` - 1 states whose rows are not made yet, nearest first along the
    automaton's moves, and keeps their rows until they are asked for. Safe to call from
    several threads.
    """

    __slots__ = ("_dfa", "_vocab", "_levels", "_eos", "_words", "_ready", "_made", "_lock", "_next")

    def __init__(self, dfa: ByteDFA, vocab: Vocabulary) -> None:
        self._dfa = dfa
        self._vocab = vocab
        trie = vocab.trie
        height = int(trie.node_height[0]) if trie.num_nodes else 0
        identity = np.arange(dfa.num_states, dtype=np.int32)
        # No two (node, state) pairs ever merge: each state stands for itself at every
        # height, and the walk skips the equivalence pass the eager build needs.
        self._levels = LivenessLevels(
            canon=identity[None, :],
            row_of_height=np.zeros(height + 1, dtype=np.int64),
            finest=identity,
        )
        self._eos = np.asarray(vocab.eos_token_ids, dtype=np.int64)
        self._words = bitmask_words(vocab.size)
        self._ready: dict[StateId, npt.NDArray[np.int32]] = {}
        self._made = np.zeros(dfa.num_states, dtype=np.bool_)
        self._lock = threading.Lock()
        self._next = NextStates(dfa.transitions)

    def __call__(self, state: StateId) -> npt.NDArray[np.int32]:
        """int32[ceil(V/32)]: the tokens whose bytes keep `state` alive, plus EOS where
        `state` accepts (the row `build_token_index` gives it)."""
        with self._lock:
            row = self._ready.pop(state, None)
            if row is not None:
                return row
            batch = self._batch(state) if self._made.any() else [state]
            self._made[batch] = True
        rows = self._rows(np.asarray(batch, dtype=np.int32))
        with self._lock:
            for q, made in zip(batch[1:], rows[1:], strict=True):
                self._ready[q] = made
        return rows[0]

    def _batch(self, state: StateId) -> list[StateId]:
        """`state` and the states nearest it (breadth first along the moves) whose rows
        are not made yet, up to `ROW_BATCH`."""
        return nearest_unmade(state, self._next, lambda q: not self._made[q], ROW_BATCH)

    def _rows(self, origins: npt.NDArray[np.int32]) -> list[npt.NDArray[np.int32]]:
        """The rows of `origins`, from one walk."""
        trie = self._vocab.trie
        rows = [np.zeros(self._words, dtype=np.int32) for _ in range(origins.shape[0])]
        if trie.num_nodes:
            reached, _ = walk_live_tokens(self._dfa, trie, self._levels, origins)
            for i, row in enumerate(rows):  # bit i of each token's bitset: origin i
                bit = (reached[:, i // 64] >> np.uint64(i % 64)) & np.uint64(1)
                set_bits(row, trie.token_ids[bit != 0])
        for state, row in zip(origins.tolist(), rows, strict=True):
            if self._dfa.accepting[state]:
                set_bits(row, self._eos)
        return rows


def lazy_token_index(
    dfa: ByteDFA,
    vocab: Vocabulary,
    *,
    kind: str,
    spec_hash: str,
    complete: Completer | None = None,
) -> LazyTokenIndex:
    """A `LazyTokenIndex` of `dfa` whose rows come from `StateRows`.

    Args:
        complete: builds the full index (with the caller's budgets and cache); by
            default `build_token_index` without a deadline.
    """

    def build() -> TokenIndex:
        return build_token_index(dfa, vocab, kind=kind, spec_hash=spec_hash)

    return LazyTokenIndex(
        dfa=dfa,
        vocabulary=vocab,
        kind=kind,
        spec_hash=spec_hash,
        row_source=StateRows(dfa, vocab),
        completer=complete if complete is not None else build,
    )
