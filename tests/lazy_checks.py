"""Exactness checks of lazy DFA indexes against the eager `TokenIndex`, the reference
definition of every row: shared by the unit and the corpus tests."""

from __future__ import annotations

import numpy as np

from fsmcompile.runtime import Matcher
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex


def assert_rows_equal(lazy: LazyTokenIndex, eager: TokenIndex) -> int:
    """Every state's lazy row is the eager row; returns how many states were compared."""
    assert lazy.num_states == eager.num_states
    for state in range(eager.num_states):
        np.testing.assert_array_equal(lazy.mask_row(state), eager.mask_row(state), str(state))
    return eager.num_states


def assert_matchers_agree(lazy: LazyTokenIndex, eager: TokenIndex, text: str) -> int:
    """Feed `text`'s real tokens and EOS to both; masks, states and forced tokens agree at
    every step. Returns the number of steps."""
    vocab = eager.vocabulary
    lazy_matcher, eager_matcher = Matcher(lazy), Matcher(eager)
    words = (vocab.size + 31) // 32
    got, want = np.zeros((2, words), np.int32), np.zeros((2, words), np.int32)
    tokens = [*vocab.encode(text), vocab.eos_token_ids[0]]
    for token in tokens:
        lazy_matcher.fill_bitmask(got, 1)
        eager_matcher.fill_bitmask(want, 1)
        np.testing.assert_array_equal(got, want)
        assert lazy_matcher.forced_token_ids() == eager_matcher.forced_token_ids()
        assert lazy_matcher.is_complete() == eager_matcher.is_complete()
        assert lazy_matcher.advance(token) and eager_matcher.advance(token), token
        assert lazy_matcher.state == eager_matcher.state
    assert lazy_matcher.is_terminated()
    lazy_matcher.rollback(len(tokens) // 2)
    eager_matcher.rollback(len(tokens) // 2)
    assert lazy_matcher.state == eager_matcher.state
    return len(tokens)
