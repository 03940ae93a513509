"""Partition refinement over a transition table's live moves, one hashed round at a time.

Minimizing a lexer and grouping states by liveness level both split classes by each
state's signature: its class and, column by column, the classes of its moves' targets.
They need as many rounds as the longest string telling two states apart (a hundred for
a long literal), and a dense signature row is C columns wide where a state has a few
live moves. So a round reads the moves as an edge list and hashes each state's signature
into one word; equal signatures always hash alike, so a round is exact unless two
signatures collide, which the caller checks for (`consistent`, `closed`).

Where only the final partition is wanted (`coarsest`), a round rehashes only the states
with a move into a state whose class changed in the round before: a long literal or a
bounded string splits one state per round, so a round costs its few changes, not every
edge of the automaton.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import sorted_unique
from fsmcompile.tables.sorted_keys import concatenated_ranges

FULL_ROUNDS_MAX_EDGES = 5000
"""Up to this many live moves `coarsest` rehashes every state each round; past it, only
the states a round's changes reach. Measured on lexers of JSONSchemaBench schemas: at
600-4,700 moves full rounds took 15-60% less time; above that it depends on how many
rounds a lexer needs (from 33% less to 80% more, the latter at 65,000 moves)."""


class EdgeRounds:
    """Refinement rounds over a transition table's live moves (int32[S, C], -1 dead)."""

    def __init__(self, trans: npt.NDArray[np.int32]) -> None:
        self.trans = trans
        self.source, self.column = np.nonzero(trans >= 0)  # sorted by source
        self.target = trans[self.source, self.column].astype(np.int64)
        rng = np.random.default_rng(0x5EED)
        weights = rng.integers(1, 2**63, size=trans.shape[1] + 2, dtype=np.uint64) | np.uint64(1)
        self.edge_weight = weights[self.column]
        self.own_weight, self.mix = weights[-2], weights[-1]
        # Edges of state s are source[ends[s]:ends[s + 1]].
        self.ends = np.searchsorted(self.source, np.arange(trans.shape[0] + 1))
        self.degree = np.diff(self.ends)
        # Edges into state t are pred_edge[pred_ends[t]:pred_ends[t + 1]] (built on demand).
        self._preds: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    def hashed(self, block: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """A hash of each state's (block, blocks of its moves' targets by column)."""
        hashed = self._summed(block[self.target], self.edge_weight, self.degree)
        hashed += (block + np.uint64(1)) * self.own_weight
        return hashed

    def coarsest(
        self, out: npt.NDArray[np.int64], check: Callable[[], None] | None = None
    ) -> npt.NDArray[np.int64]:
        """Class of each state in the coarsest partition refining `out` that the moves
        keep, up to a hash collision (which only merges: check with `closed`).

        Each class keeps the hash of its members' moves (`targets`, by the classes of
        the targets). A state's hash changes only when one of its targets changed class,
        so a round rehashes the sources of the last round's changes and splits, within
        each class, those whose hash left the class's own; the rest stay, under the
        class's id. A class whose members all left keeps its id for one of its parts, so
        every new id is a real split and the rounds end. `check` runs once per round (a
        deadline)."""
        states = self.trans.shape[0]
        _, label = np.unique(out, return_inverse=True)
        label = label.reshape(-1).astype(np.int64)
        if self.target.shape[0] <= FULL_ROUNDS_MAX_EDGES:
            return self._full_rounds(label, check)
        count = int(label.max(initial=-1)) + 1
        size = np.zeros(states + 1, dtype=np.int64)
        size[:count] = np.bincount(label, minlength=count)
        own = np.zeros(states + 1, dtype=np.uint64)  # each class's hash, where `known`
        known = np.zeros(states + 1, dtype=np.bool_)
        moves = np.zeros(states, dtype=np.uint64)
        dirty = np.arange(states, dtype=np.int64)
        while dirty.shape[0]:
            if check is not None:
                check()
            moves[dirty] = self.targets(label, dirty)
            block, hashed = label[dirty], moves[dirty]
            order = np.lexsort((hashed, block))
            dirty, block, hashed = dirty[order], block[order], hashed[order]
            starts = np.ones(dirty.shape[0], dtype=np.bool_)
            starts[1:] = (block[1:] != block[:-1]) | (hashed[1:] != hashed[:-1])
            group = np.cumsum(starts) - 1
            g_block, g_hash = block[starts], hashed[starts]
            g_size = np.bincount(group)
            fresh = np.ones(g_block.shape[0], dtype=np.bool_)
            fresh[1:] = g_block[1:] != g_block[:-1]  # first group of its class
            # Per class among the dirty (its groups are adjacent): how many members, and
            # whether one group kept the class's hash.
            class_of_group = np.cumsum(fresh) - 1
            firsts = np.flatnonzero(fresh)
            matches = known[g_block] & (own[g_block] == g_hash)
            matched = np.logical_or.reduceat(matches, firsts)[class_of_group]
            whole = np.add.reduceat(g_size, firsts)[class_of_group] == size[g_block]
            keep = matches | (fresh & whole & ~matched)
            own[g_block[keep]] = g_hash[keep]
            known[g_block[keep]] = True
            moved = ~keep
            new_ids = count + np.arange(int(moved.sum()), dtype=np.int64)
            count += new_ids.shape[0]
            np.subtract.at(size, g_block[moved], g_size[moved])
            size[new_ids], own[new_ids], known[new_ids] = g_size[moved], g_hash[moved], True
            g_label = g_block.copy()
            g_label[moved] = new_ids
            label[dirty] = g_label[group]
            changed = dirty[moved[group]]
            dirty = sorted_unique(self.sources(changed))
        return label

    def _full_rounds(
        self, label: npt.NDArray[np.int64], check: Callable[[], None] | None
    ) -> npt.NDArray[np.int64]:
        """`coarsest` by rounds that rehash every state: a few numpy calls a round where
        the incremental round takes a hundred, which is what a small automaton's rounds
        cost (a 324-state lexer: 16 rounds, 5 ms incremental)."""
        count = int(label.max(initial=-1)) + 1
        while True:
            if check is not None:
                check()
            targets = label[self.target].astype(np.uint64)
            moves = self._summed(targets, self.edge_weight, self.degree)
            order = np.lexsort((moves, label))
            ordered_label, ordered_moves = label[order], moves[order]
            starts = np.ones(order.shape[0], dtype=np.bool_)
            starts[1:] = (ordered_label[1:] != ordered_label[:-1]) | (
                ordered_moves[1:] != ordered_moves[:-1]
            )
            groups = int(np.count_nonzero(starts))
            if groups == count:
                return label
            label = np.empty_like(label)
            label[order] = np.cumsum(starts) - 1
            count = groups

    def targets(
        self, label: npt.NDArray[np.int64], states: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.uint64]:
        """A hash of each of `states`' moves: column by column, the target's label."""
        edges, lengths = _ranges(self.ends, states)
        target = label[self.target[edges]].astype(np.uint64)
        return self._summed(target, self.edge_weight[edges], lengths)

    def _summed(
        self,
        target: npt.NDArray[np.uint64],
        weight: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.uint64]:
        """Per run of `lengths` consecutive edges, the sum of each edge's mixed (target
        label, column weight): one state's moves per run."""
        term = (target + np.uint64(1)) * weight
        term ^= term >> np.uint64(29)
        term *= self.mix
        summed = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(term, dtype=np.uint64)])
        ends = np.cumsum(lengths)
        hashed: npt.NDArray[np.uint64] = summed[ends] - summed[ends - lengths]
        return hashed

    def sources(self, states: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The states with a move into one of `states` (repeated)."""
        if self._preds is None:
            order = np.argsort(self.target, kind="stable")
            ends = np.searchsorted(self.target[order], np.arange(self.trans.shape[0] + 1))
            self._preds = self.source[order].astype(np.int64), ends
        preds, ends = self._preds
        edges, _ = _ranges(ends, states)
        return preds[edges]

    def _mates(
        self, cls: npt.NDArray[np.int64], count: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """(one chosen member of each state's class, that member's move for each edge
        of the state along the edge's column; -1 where it has none)."""
        member = np.empty(count, dtype=np.int64)
        member[cls] = np.arange(cls.shape[0])
        mine = member[cls]
        return mine, self.trans[mine[self.source], self.column]

    def consistent(
        self, old: npt.NDArray[np.int64], new: npt.NDArray[np.int64], count: int
    ) -> bool:
        """Whether every class of `new` (`count` classes) holds states of one signature
        under `old`: the same old class, degree and, by column, old classes of targets.
        A round that passes is the exact refinement of `old` (hashes never split equal
        signatures)."""
        mine, theirs = self._mates(new, count)
        if not (np.array_equal(old, old[mine]) and np.array_equal(self.degree, self.degree[mine])):
            return False
        return bool((theirs >= 0).all() and np.array_equal(old[theirs], old[self.target]))

    def closed(self, out: npt.NDArray[np.int64], cls: npt.NDArray[np.int64], count: int) -> bool:
        """Whether the partition `cls` refines `out` and is closed under the moves: every
        state has the output, the degree and, column by column, the targets' classes of
        one chosen member of its class."""
        mine, theirs = self._mates(cls, count)
        if not (np.array_equal(out, out[mine]) and np.array_equal(self.degree, self.degree[mine])):
            return False
        return bool((theirs >= 0).all() and np.array_equal(cls[theirs], cls[self.target]))


def _ranges(
    ends: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(the positions ends[r]:ends[r + 1] of every row r of `rows`, concatenated; each
    row's count)."""
    lengths = ends[rows + 1] - ends[rows]
    return concatenated_ranges(lengths) + np.repeat(ends[rows], lengths), lengths
