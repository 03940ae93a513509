"""One state's mask row on demand: the row source of a `LazyTokenIndex`.

The eager builder (`build.py`) groups every state by liveness first, so that each group
walks the vocabulary once; that grouping is a pass over the whole automaton, paid before
any mask. A single state needs none of it: from one origin, every trie node holds at most
one DFA state, so there is nothing to merge, and the C walk of `trie_walk.py` run from
that origin alone (identity levels, no regions) visits only the trie nodes the state
keeps alive. EOS is set exactly where `build.py` sets it: in accepting states.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fsmcompile.index.dfa.build import build_token_index
from fsmcompile.index.dfa.levels import LivenessLevels
from fsmcompile.index.dfa.trie_walk import walk_live_tokens
from fsmcompile.tables.bits import bitmask_words, set_bits
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.lazy_index import Completer, LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import StateId
from fsmcompile.vocabulary import Vocabulary


class StateRows:
    """Computes the eager index's row of any one state of `dfa` for `vocab` (`RowSource`).

    Holds what every row shares (identity levels, the EOS ids, the trie's token ids), so a
    row costs one walk from its state and one pack of the live ids. Stateless between
    calls: safe to call from several threads (the C walk holds the GIL).
    """

    __slots__ = ("_dfa", "_vocab", "_levels", "_eos", "_words")

    def __init__(self, dfa: ByteDFA, vocab: Vocabulary) -> None:
        self._dfa = dfa
        self._vocab = vocab
        trie = vocab.trie
        height = int(trie.node_height[0]) if trie.num_nodes else 0
        identity = np.arange(dfa.num_states, dtype=np.int32)
        # From one origin no two pairs can merge: each state stands for itself at every
        # height, and the walk skips the equivalence pass the eager build needs.
        self._levels = LivenessLevels(
            canon=identity[None, :],
            row_of_height=np.zeros(height + 1, dtype=np.int64),
            finest=identity,
        )
        self._eos = np.asarray(vocab.eos_token_ids, dtype=np.int64)
        self._words = bitmask_words(vocab.size)

    def __call__(self, state: StateId) -> npt.NDArray[np.int32]:
        """int32[ceil(V/32)]: the tokens whose bytes keep `state` alive, plus EOS where
        `state` accepts (the row `build_token_index` gives it)."""
        trie = self._vocab.trie
        row = np.zeros(self._words, dtype=np.int32)
        if trie.num_nodes:
            origin = np.array([state], dtype=np.int32)
            reached, _ = walk_live_tokens(self._dfa, trie, self._levels, origin)
            set_bits(row, trie.token_ids[reached[:, 0] != 0])
        if self._dfa.accepting[state]:
            set_bits(row, self._eos)
        return row


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
