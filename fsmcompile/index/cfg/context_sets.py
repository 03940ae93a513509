"""The sets of lexer contexts a vocabulary walk assumes after a cut terminal, interned.

After a cut the next lexeme's context is the parser's: the walk tries every context a
shift of the terminal may lead to, and those whose start states the next byte takes to the
same lexer state are one set (`ContextSets`). The index stores the sets as columns
(`GrammarIndex.ctxset_start` / `ctxset_context`).
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.errors import BudgetExceededError
from fsmcompile.tables.int_columns import extend_column, int_column
from fsmcompile.tables.sorted_keys import concatenated_ranges

CONTEXT_SET_ROOM = 1 << 20
"""Context-set ids a walk may add past the contexts themselves (a bound the packed
sequence keys rely on; a grammar meets a few thousand at most)."""


class ContextSets:
    """Sets of lexer contexts a sequence may have assumed after its last terminal.

    Id k < `num_contexts` is the context k alone; larger ids name interned sets. After a
    cut the walk tries each context the parser may be in next, and contexts whose start
    state the next byte takes to the same lexer state have identical futures: one entry
    stands for all of them, and the parser's check becomes membership. The 148 contexts
    that may follow `}` in a WashingtonPost schema made a million sequences of one entry
    each. Sets stay single contexts in grammars with ignored terminals (`merge` false),
    whose cut restarts in the context the sequence assumed.
    """

    def __init__(
        self,
        next_contexts: list[list[int]],
        num_contexts: int,
        num_classes: int,
        *,
        merge: bool = True,
    ) -> None:
        self.num_contexts = num_contexts
        self.num_classes = num_classes
        self.merge = merge
        self.members: list[tuple[int, ...]] = []
        self._ids: dict[tuple[int, ...], int] = {}
        self._fan_count = np.asarray([len(c) for c in next_contexts], dtype=np.int64)
        self._fan_start = np.concatenate([[0], np.cumsum(self._fan_count)[:-1]]).astype(np.int64)
        self._fan_flat = np.asarray([c for cs in next_contexts for c in cs], dtype=np.int64)
        # Per (terminal, byte class) split so far: where its (state, set) pairs start in
        # the flat columns (-1: not split yet), and how many there are.
        self._first = np.full(len(next_contexts) * num_classes, -1, dtype=np.int64)
        self._count = np.zeros(len(next_contexts) * num_classes, dtype=np.int64)
        self._state = int_column([])
        self._set = int_column([])

    @property
    def capacity(self) -> int:
        """The id bound a `SequenceTable` packs its keys with."""
        return self.num_contexts + CONTEXT_SET_ROOM if self.merge else self.num_contexts

    def columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """(start int64[S+1], context int32[...]): the interned sets as an index stores
        them, set k's contexts at context[start[k]:start[k + 1]]."""
        sizes = [len(members) for members in self.members]
        start = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        flat = [c for members in self.members for c in members]
        return start, np.asarray(flat, dtype=np.int32)

    def intern(self, contexts: tuple[int, ...]) -> int:
        """The id of a sorted tuple of contexts (a single context is its own id)."""
        if len(contexts) == 1:
            return contexts[0]
        found = self._ids.get(contexts)
        if found is None:
            if len(self.members) >= CONTEXT_SET_ROOM:
                raise BudgetExceededError(
                    "too many distinct lexer-context sets", limit="context_sets", value=0.0
                )
            found = self._ids[contexts] = self.num_contexts + len(self.members)
            self.members.append(contexts)
        return found

    def split(
        self,
        terminal: npt.NDArray[np.int64],
        byte_class: npt.NDArray[np.int64],
        context_start: npt.NDArray[np.int32],
        transitions: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(edge, lexer state, context-set id) per cut edge i (a cut of `terminal[i]` whose
        next byte is of `byte_class[i]`) and distinct live state that byte starts in the
        contexts that may follow the terminal; each pair is split once per walk."""
        pair = terminal * self.num_classes + byte_class
        missing = sorted_unique(pair[self._first[pair] < 0])
        if missing.shape[0]:
            self._split_new(missing, context_start, transitions)
        count = self._count[pair]
        edge = np.repeat(np.arange(pair.shape[0], dtype=np.int64), count)
        at = np.repeat(self._first[pair], count) + concatenated_ranges(count)
        state = np.frombuffer(self._state, dtype=np.int64)[at]
        return edge, state, np.frombuffer(self._set, dtype=np.int64)[at]

    def _split_new(
        self,
        pairs: npt.NDArray[np.int64],
        context_start: npt.NDArray[np.int32],
        transitions: npt.NDArray[np.int64],
    ) -> None:
        terminal, byte_class = np.divmod(pairs, self.num_classes)
        fan = self._fan_count[terminal]
        owner = np.repeat(np.arange(pairs.shape[0], dtype=np.int64), fan)
        ctx = self._fan_flat[np.repeat(self._fan_start[terminal], fan) + concatenated_ranges(fan)]
        state = transitions[context_start[ctx], byte_class[owner]]
        live = state >= 0
        owner, ctx, state = owner[live], ctx[live], state[live]
        order = np.lexsort((ctx, state, owner))
        owner, ctx, state = owner[order], ctx[order], state[order]
        if self.merge:  # one set per (pair, state); singletons are their context
            starts_set = np.ones(owner.shape[0], dtype=np.bool_)
            starts_set[1:] = (owner[1:] != owner[:-1]) | (state[1:] != state[:-1])
            heads = np.flatnonzero(starts_set)
            bounds = np.append(heads, owner.shape[0]).tolist()
            members = ctx.tolist()
            ids = [self.intern(tuple(members[lo:hi])) for lo, hi in itertools.pairwise(bounds)]
            owner, state, ctx = owner[heads], state[heads], np.asarray(ids, dtype=np.int64)
        self._count[pairs] = np.bincount(owner, minlength=pairs.shape[0])
        self._first[pairs] = len(self._state) + np.concatenate(
            [[0], np.cumsum(self._count[pairs])[:-1]]
        )
        extend_column(self._state, state)
        extend_column(self._set, ctx)
