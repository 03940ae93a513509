"""The interned tables a grammar index's token groups name: emitted terminal sequences and
open lexer constraints. The vocabulary walk fills them at compile time; the runtime
rebuilds the sequence table from the index's columns and extends both as it parses."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import repeat
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from fsmcompile.tables.int_columns import extend_column, int_column

Packed = TypeVar("Packed", int, npt.NDArray[np.int64])
"""One packed sequence key (`SequenceTable.key`), or an array of them."""


_MERGE_MIN = 4096
"""New sequences a walk keeps in the dictionary before the first merge."""


@dataclass(slots=True)
class SequenceTable:
    """Interned emitted sequences: id 0 is the empty one, each other id extends a parent.

    A sequence is found by one integer packing (parent, terminal, context), `key`: a walk
    looks up millions (3.6 million, 0.6 million of them new, for a WashingtonPost
    schema). Most lookups are answered by one `np.searchsorted` over the sorted keys of
    the sequences up to `_merged`; only the keys of newer sequences (and single lookups,
    remembered) sit in a dictionary, merged into the sorted columns once it holds a quarter
    as many. A dictionary of every key cost that walk 0.7 s of lookups, and a runtime
    table 0.2 s to rebuild it from the stored columns.
    """

    num_terminals: int
    num_contexts: int
    parent: array[int] = field(default_factory=lambda: int_column([-1]))
    terminal: array[int] = field(default_factory=lambda: int_column([-1]))
    context: array[int] = field(default_factory=lambda: int_column([-1]))
    _sorted_keys: array[int] = field(default_factory=lambda: int_column([]))
    _sorted_ids: array[int] = field(default_factory=lambda: int_column([]))
    _merged: int = 1
    _ids: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        parent: npt.NDArray[np.integer],
        terminal: npt.NDArray[np.integer],
        context: npt.NDArray[np.integer],
        *,
        num_terminals: int,
        num_contexts: int,
    ) -> SequenceTable:
        """The table holding these sequences under their ids (id 0 is the empty one), as
        an index stores them."""
        columns = (int_column(parent), int_column(terminal), int_column(context))
        table = cls(num_terminals, num_contexts, *columns)
        table._merge()
        return table

    def key(self, seq: Packed, terminal: Packed, context: Packed) -> Packed:
        """The packed (parent, terminal, context) that names a sequence, of one or of
        whole arrays of them (int64: the walk's keys stay far below 2**63)."""
        return (seq * self.num_terminals + terminal) * self.num_contexts + context

    def extend(self, seq: int, terminal: int, context: int) -> int:
        """The id of `seq` followed by `terminal` with lexer `context` after it (one at a
        time, as the runtime asks: a dictionary hit after the first lookup)."""
        key = self.key(seq, terminal, context)
        found = self._ids.get(key)
        if found is None:
            found = self._sorted_id(key)
            if found < 0:
                found = len(self.parent)
                self.parent.append(seq)
                self.terminal.append(terminal)
                self.context.append(context)
            self._ids[key] = found
        return found

    def extend_keys(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The id of each sequence of distinct packed `keys` (`key`), new ones added."""
        found = self._sorted_ids_of(keys)
        missing = np.flatnonzero(found < 0)
        if missing.shape[0] and self._ids:
            found[missing] = np.fromiter(
                map(self._ids.get, keys[missing].tolist(), repeat(-1)),
                dtype=np.int64,
                count=missing.shape[0],
            )
            missing = missing[found[missing] < 0]
        if missing.shape[0]:
            first = len(self.parent)
            found[missing] = ids = np.arange(first, first + missing.shape[0], dtype=np.int64)
            added = keys[missing]
            rest, context = np.divmod(added, self.num_contexts)
            seq, terminal = np.divmod(rest, self.num_terminals)
            extend_column(self.parent, seq)
            extend_column(self.terminal, terminal)
            extend_column(self.context, context)
            if len(self.parent) - self._merged > max(_MERGE_MIN, len(self._sorted_keys) // 4):
                self._merge()
            else:
                self._ids.update(zip(added.tolist(), ids.tolist(), strict=True))
        return found

    def _sorted_id(self, key: int) -> int:
        """The id of `key` among the merged sequences, or -1 (a bisection of the array:
        half the cost of a scalar `np.searchsorted`, on the runtime's one-at-a-time path)."""
        keys = self._sorted_keys
        at = bisect_left(keys, key)
        if at < len(keys) and keys[at] == key:
            return self._sorted_ids[at]
        return -1

    def _sorted_ids_of(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """int64 copy: the id of each key among the merged sequences, or -1."""
        if not self._sorted_keys:
            return np.full(keys.shape[0], -1, dtype=np.int64)
        sorted_keys = np.frombuffer(self._sorted_keys, dtype=np.int64)
        at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.shape[0] - 1)
        ids = np.frombuffer(self._sorted_ids, dtype=np.int64)
        return np.where(sorted_keys[at] == keys, ids[at], -1)

    def _merge(self) -> None:
        """Sort every sequence's key into the lookup arrays; the dictionary starts over."""
        start, stop = self._merged, len(self.parent)
        if stop > start:
            ids = np.arange(start, stop, dtype=np.int64)
            columns = (self.parent, self.terminal, self.context)
            keys = self.key(*(np.frombuffer(c, dtype=np.int64)[start:stop] for c in columns))
            keys = np.concatenate([np.frombuffer(self._sorted_keys, dtype=np.int64), keys])
            ids = np.concatenate([np.frombuffer(self._sorted_ids, dtype=np.int64), ids])
            order = np.argsort(keys, kind="stable")
            self._sorted_keys, self._sorted_ids = int_column(keys[order]), int_column(ids[order])
            self._merged = stop
        self._ids = {}


@dataclass(slots=True)
class ConstraintTable:
    """Interned constraint sets (lexer states that must die unlabelled); id 0 is empty."""

    sets: list[frozenset[int]] = field(default_factory=lambda: [frozenset()])
    _ids: dict[frozenset[int], int] = field(default_factory=lambda: {frozenset(): 0})

    def intern(self, states: frozenset[int]) -> int:
        found = self._ids.get(states)
        if found is None:
            found = len(self.sets)
            self._ids[states] = found
            self.sets.append(states)
        return found
