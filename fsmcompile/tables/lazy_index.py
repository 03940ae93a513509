"""A DFA token index whose mask rows are computed on first visit: a new spec masks its
first token after one walk of the vocabulary from the start state, not from every state.

The compiler builds the automaton as usual and hands its index layer's row source
(`fsmcompile.index.dfa.lazy_rows`) to this type; the runtime only reads rows, so it loads a
`LazyTokenIndex` as it loads a `TokenIndex` and never imports the compiler. The eager
`TokenIndex` stays the definition of every row: `complete()` builds it through the same
builder, and a row asked for after completion is read from it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.byte_dfa import ByteDFA
from fsmcompile.tables.completion import Completion
from fsmcompile.tables.token_index import DfaQueries, TokenIndex, token_step
from fsmcompile.types import StateId, TokenId
from fsmcompile.vocabulary import Vocabulary

RowSource = Callable[[StateId], npt.NDArray[np.int32]]
"""The int32[ceil(V/32)] mask row of one state, EOS bits included, as the eager index
would hold it."""

Completer = Callable[[], TokenIndex]
"""Builds the eager index of the same automaton and spec (and stores it where it goes)."""


@dataclass(frozen=True, slots=True, eq=False)
class LazyTokenIndex(DfaQueries):
    """A `TokenIndex` whose rows are made when a state is first asked for its mask.

    Safe to share between threads: rows are computed outside the lock (two threads may
    both walk one new state; the first row stored wins, and both are equal), and
    completion runs once.

    Attributes:
        dfa: the byte automaton; state 0 is the start.
        vocabulary: the tokenizer the rows are made for.
        kind: 'regex' or 'json'.
        spec_hash: sha256 of the canonical spec and options.
        row_source: computes one state's row (`RowSource`).
        completer: builds the full eager index, or None where none can be built.
    """

    dfa: ByteDFA
    vocabulary: Vocabulary
    kind: str
    spec_hash: str
    row_source: RowSource = field(repr=False)
    completer: Completer | None = field(default=None, repr=False)
    _rows: dict[StateId, npt.NDArray[np.int32]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _next: dict[int, int] = field(default_factory=dict, repr=False)
    _completion: Completion[TokenIndex] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_completion", Completion(self.completer))

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    @property
    def vocab_size(self) -> int:
        return self.vocabulary.size

    @property
    def num_rows_made(self) -> int:
        """How many states have a row so far (all of them once complete)."""
        return self.num_states if self._completion.done else len(self._rows)

    @property
    def completed(self) -> TokenIndex | None:
        """The eager index once `complete()` has built it, else None."""
        return self._completion.done

    def mask_row(self, state: StateId) -> npt.NDArray[np.int32]:
        """int32[W], the packed allowed tokens of `state`, EOS included (do not write to it).

        Raises:
            IndexError: `state` is no state of the automaton.
        """
        row = self._rows.get(state)
        if row is not None:
            return row
        if not 0 <= state < self.num_states:
            raise IndexError(f"no state {state}: the automaton has {self.num_states}")
        full = self._completion.done
        if full is not None:
            row = full.mask_row(state)
        else:
            row = self.row_source(state)
            row.setflags(write=False)
        with self._lock:
            return self._rows.setdefault(state, row)

    def next_state(self, state: StateId, token_id: TokenId) -> StateId:
        """The state after `token_id`'s bytes, or DEAD (as `TokenIndex.next_state`)."""
        return token_step(self.dfa, self.vocabulary, self._next, state, token_id)

    def complete(self) -> TokenIndex:
        """The full eager index of this spec, built once (later calls return it).

        Rows asked for afterwards are read from it; rows made before stay (they are
        equal to its rows, which is what the exactness tests hold the row source to).

        Raises:
            ValueError: the index was made without a completer.
            BudgetExceededError: the completer's budget ran out (a later call retries).
        """
        return self._completion.build()

    def complete_in_background(self) -> threading.Thread:
        """Start a daemon thread that runs `complete()`. A completion that fails (its
        budget ran out) is logged, and the index goes on making rows on demand.

        The vocabulary walks of a completion hold the GIL for up to tens of milliseconds
        at a time, so a serving thread's mask may wait that long while one runs.
        """
        return self._completion.in_background("a lazy index")
