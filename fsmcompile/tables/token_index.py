"""The compiled token index: per DFA state, a mask id; per mask id, an allowed-token bitset."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.bits import is_bit_set, unpack_row
from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.types import DEAD, StateId, TokenId
from fsmcompile.vocabulary import Vocabulary


class DfaQueries:
    """The questions every DFA index answers the same way from its `mask_row` (eager
    `TokenIndex`, or `LazyTokenIndex` whose rows are made on first visit)."""

    __slots__ = ()
    dfa: ByteDFA

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def mask_row(self, state: StateId) -> npt.NDArray[np.int32]:
        raise NotImplementedError

    def is_allowed(self, state: StateId, token_id: TokenId) -> bool:
        """Whether `token_id` may be sampled in `state` (EOS included)."""
        return 0 <= token_id < self.vocab_size and is_bit_set(self.mask_row(state), token_id)

    def allowed_token_ids(self, state: StateId) -> npt.NDArray[np.int64]:
        """Sorted ids allowed in `state`."""
        return np.flatnonzero(unpack_row(self.mask_row(state), self.vocab_size))

    def is_accepting(self, state: StateId) -> bool:
        """Whether the text so far is complete (EOS allowed)."""
        return bool(self.dfa.accepting[state])


@dataclass(frozen=True, slots=True, eq=False)
class TokenIndex(DfaQueries):
    """What the runtime needs to mask logits for one spec and one tokenizer.

    The index never stores a state x token table: the next state after a token is a
    walk of the token's bytes through the DFA (memoized per (state, token)).

    Attributes:
        dfa: the byte automaton; state 0 is the start.
        state_mask: int32[S], the mask id of each state.
        masks: int32[M, ceil(V/32)], bit-packed allowed tokens (layout in `bits.py`);
            EOS bits are set exactly in the masks of accepting states.
        vocabulary: the tokenizer the index was compiled for.
        kind: 'regex', 'json' or 'lark'.
        spec_hash: sha256 of the canonical spec and options.
    """

    dfa: ByteDFA
    state_mask: npt.NDArray[np.int32]
    masks: npt.NDArray[np.int32]
    vocabulary: Vocabulary
    kind: str
    spec_hash: str
    _next: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.size

    def mask_row(self, state: StateId) -> npt.NDArray[np.int32]:
        """int32[W], the packed allowed tokens of `state` (a view, do not write to it)."""
        row: npt.NDArray[np.int32] = self.masks[int(self.state_mask[state])]
        return row

    def next_state(self, state: StateId, token_id: TokenId) -> StateId:
        """The state after `token_id`'s bytes, or DEAD when they leave the language.

        EOS and special ids have no bytes: they are DEAD here; callers handle EOS.
        """
        return token_step(self.dfa, self.vocabulary, self._next, state, token_id)


def token_step(
    dfa: ByteDFA, vocab: Vocabulary, memo: dict[int, int], state: StateId, token_id: TokenId
) -> StateId:
    """The state after `token_id`'s bytes from `state`, or DEAD, memoized in `memo`:
    the one definition of a token step both DFA index types answer with."""
    key = (state << 32) | token_id
    cached = memo.get(key)
    if cached is not None:
        return cached
    if not 0 <= token_id < len(vocab.token_bytes) or token_id in vocab.special_token_ids:
        result = DEAD
    else:
        data = vocab.token_bytes[token_id]
        result = dfa.walk(data, state) if data else DEAD
    memo[key] = result
    return result
