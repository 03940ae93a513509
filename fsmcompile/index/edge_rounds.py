"""Partition refinement over a transition table's live moves, one hashed round at a time.

Grouping states by liveness level (`index/dfa/levels.py`) splits classes by each state's
signature: its class and, column by column, the classes of its moves' targets. A dense
signature row is C columns wide where a state has a few live moves, so a round reads the
moves as an edge list and hashes each state's signature into one word; equal signatures
always hash alike, so a round is exact unless two signatures collide, which the caller
checks for (`consistent`). Minimization is not done here: that is the automaton stage's
(`automaton/minimize.py`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


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

    def hashed(self, block: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """A hash of each state's (block, blocks of its moves' targets by column)."""
        hashed = self._summed(block[self.target], self.edge_weight, self.degree)
        hashed += (block + np.uint64(1)) * self.own_weight
        return hashed

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
