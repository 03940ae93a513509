"""The matcher of a DFA `TokenIndex` (regex, JSON Schema through a DFA): one static mask
per state, so the per-token path is a dict lookup and a copy of one row."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from fsmcompile._native import write_row
from fsmcompile.tables.lazy_index import LazyTokenIndex
from fsmcompile.tables.token_index import TokenIndex
from fsmcompile.types import DEAD, StateId, TokenId

from .base import TERMINATED, Matcher
from .index_tables import IndexTables, tables_for

__all__ = ["DfaMatcher"]


class DfaMatcher(Matcher):
    """The decoding state of one request over one DFA `TokenIndex`.

    Matchers of the same index share its `IndexTables`, so the first request pays for
    the DFA walks; the per-token path is a dict lookup and a copy of one mask row.
    """

    __slots__ = ("_index", "_tables", "_state", "_eos", "_accepting", "_next", "_stride")

    @classmethod
    def serves(cls, index: object) -> bool:
        """A `TokenIndex` or `LazyTokenIndex`, or what quacks like one (a `state_mask`
        per state)."""
        return isinstance(index, TokenIndex | LazyTokenIndex) or hasattr(index, "state_mask")

    def __init__(
        self, index: TokenIndex | LazyTokenIndex, *, tables: IndexTables | None = None
    ) -> None:
        """Start at the index's start state.

        Args:
            index: the compiled `TokenIndex` to enforce, or a `LazyTokenIndex` (rows are
                made as the matcher first reaches their states).
            tables: shared lookup tables; by default those cached for `index`.
        """
        self._index = index
        self._tables = tables if tables is not None else tables_for(index)
        self._start(self._tables.num_words, self._tables.vocab_size)
        self._state: StateId = 0
        self._eos = self._tables.eos_token_ids
        self._accepting = self._tables.accepting
        self._next = self._tables._next
        self._stride = self._tables._stride

    @property
    def index(self) -> TokenIndex | LazyTokenIndex:
        """The index this matcher enforces."""
        return self._index

    @property
    def tables(self) -> IndexTables:
        """The lookup tables this matcher shares with the other matchers of its index."""
        return self._tables

    @property
    def state(self) -> StateId:
        """The current DFA state; -2 once EOS was accepted."""
        return self._state

    def advance(self, token_id: TokenId) -> bool:
        state = self._state
        if state < 0:
            return False
        if token_id in self._eos:
            if not self._accepting[state]:
                return False
            self._history.append(state)
            self._state = TERMINATED
            return True
        nxt = self._next.get(state * self._stride + token_id)
        if nxt is None or not 0 <= token_id < self._vocab_size:
            # A new step, or an id outside the vocabulary, whose key would alias another
            # state's token: the tables decide.
            nxt = self._tables.next_state(state, token_id)
        if nxt < 0:
            return False
        self._history.append(state)
        self._state = nxt
        return True

    def validate_tokens(self, token_ids: Iterable[TokenId]) -> int:
        state = self._state
        tables = self._tables
        count = 0
        for token_id in token_ids:
            if state < 0:
                break
            if token_id in self._eos:
                if not self._accepting[state]:
                    break
                state = TERMINATED
            else:
                state = tables.next_state(state, token_id)
                if state == DEAD:
                    break
            count += 1
        return count

    def _restore(self, entry: StateId) -> None:
        self._state = entry

    def is_terminated(self) -> bool:
        return self._state == TERMINATED

    def is_accepting(self) -> bool:
        state = self._state
        return state == TERMINATED or (state >= 0 and bool(self._accepting[state]))

    def is_complete(self) -> bool:
        """Whether nothing but EOS can follow: accepting with no live byte left."""
        state = self._state
        if state == TERMINATED:
            return True
        return bool(self._accepting[state]) and self._tables.live_bytes(state) == 0

    def _row(self) -> npt.NDArray[np.int32]:
        return self._tables.row_of_state(self._state)

    def _write_host_row(self, bitmask: npt.NDArray[np.int32], row: int) -> None:
        # `_row()` inlined: every token of every request comes here.
        tables = self._tables
        state = self._state
        src = tables.mask_rows[tables.state_mask[state]] if state >= 0 else tables.eos_row
        write_row(bitmask, row, src)

    def forced_bytes(self) -> bytes:
        if self._state < 0:
            return b""
        return self._tables.forced(self._state)[0]

    def forced_token_ids(self) -> list[TokenId]:
        if self._state < 0:
            return []
        return list(self._tables.forced_token_ids(self._state))
