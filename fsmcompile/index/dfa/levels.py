"""Liveness equivalence of DFA states, level by level, computed before any vocabulary walk.

Two states are j-equivalent when the same byte strings of length <= j keep each of them
alive. A trie node whose deepest token lies h bytes below it cannot tell h-equivalent
states apart, so the walk replaces a state by its class representative at that height
and walks shared futures once: the 2,000 states of `[^"]{0,2000}` collapse to about
one per byte of the longest token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile.errors import BudgetExceededError
from fsmcompile.index.edge_rounds import EdgeRounds
from fsmcompile.index.wide_rows import first_and_inverse, unique_wide_rows
from fsmcompile.tables.byte_dfa import ByteDFA

# Bound on stored canonical maps (states x levels); past it, heights round up to the
# finest stored level, which is always safe (a finer class never merges unlike states).
_MAX_LEVEL_CELLS = 32_000_000


@dataclass(frozen=True, slots=True, eq=False)
class LivenessLevels:
    """Canonical representatives of each state per equivalence level.

    Attributes:
        canon: int32[K, S], canon[k, s] is the smallest state j-equivalent to s, where j
            is the level stored in row k.
        row_of_height: int64[H + 1], which row of `canon` to use for a trie node of height h.
        finest: int32[S], the representative at the deepest level needed (max height).
    """

    canon: npt.NDArray[np.int32]
    row_of_height: npt.NDArray[np.int64]
    finest: npt.NDArray[np.int32]


def _refine(
    rounds: EdgeRounds, trans: npt.NDArray[np.int32], cls: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One refinement round: class ids and first members for signature (cls, cls[trans]).

    The signatures are hashed over the live moves (`EdgeRounds`); a round whose classes
    do not hold one signature each (a collision) is redone on the dense signature rows.
    """
    first, inv = first_and_inverse(rounds.hashed(cls.astype(np.uint64)))
    new_cls, new_first = _by_first_member(first, inv)
    if rounds.consistent(cls, new_cls, new_first.shape[0]):
        return new_cls, new_first
    nxt = np.where(trans >= 0, cls[np.maximum(trans, 0)], -1)
    sig = np.concatenate([cls[:, None], nxt], axis=1)
    first, inv = unique_wide_rows((sig + 1).astype(np.uint64))
    return _by_first_member(first, inv)


def _by_first_member(
    first: npt.NDArray[np.int64], inv: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Classes renumbered by first member, so ids are canonical and deterministic: (class
    of each state, first member of each class), from `np.unique`'s index and inverse."""
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return rank[inv.reshape(-1)], first[order]


def liveness_levels(
    dfa: ByteDFA,
    max_height: int,
    deadline: float | None = None,
    *,
    initial: npt.NDArray[np.int64] | None = None,
) -> LivenessLevels:
    """Refine the live states up to `max_height` levels (or until stable).

    Args:
        dfa: the automaton; only its transitions are read.
        max_height: the deepest level needed (the trie's height).
        deadline: `time.monotonic()` value past which the refinement stops.
        initial: int64[S], what a state must share with another to be 0-equivalent
            (a grammar walk's labels and exit sets); all states alike when None.

    Cost: O(levels * live moves) numpy work; most patterns stabilize within a few levels,
    a schema's long literal keys within a few dozen.
    """
    trans = dfa.transitions
    num_states = dfa.num_states
    if initial is None:
        cls = np.zeros(num_states, dtype=np.int64)
        first = np.zeros(min(num_states, 1), dtype=np.int64)
    else:
        _, first, inv = np.unique(initial, return_index=True, return_inverse=True)
        cls, first = _by_first_member(first, inv)
    canon_rows = [first[cls].astype(np.int32)]
    rounds = EdgeRounds(trans)
    max_rows = max(2, _MAX_LEVEL_CELLS // max(num_states, 1))
    stored_levels = [0]
    num_classes = len(first)
    for level in range(1, max_height + 1):
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceededError(
                "compile timed out while grouping states", limit="timeout_s", value=0.0
            )
        new_cls, first = _refine(rounds, trans, cls)
        if len(first) == num_classes:
            break
        cls, num_classes = new_cls, len(first)
        row = first[cls].astype(np.int32)
        if len(canon_rows) < max_rows - 1:
            canon_rows.append(row)
            stored_levels.append(level)
        else:
            canon_rows[-1] = row
            stored_levels[-1] = level
    canon = np.stack(canon_rows)
    heights = np.arange(max_height + 1)
    row_of_height = np.searchsorted(np.asarray(stored_levels), heights, side="left")
    row_of_height = np.minimum(row_of_height, len(stored_levels) - 1).astype(np.int64)
    return LivenessLevels(canon=canon, row_of_height=row_of_height, finest=canon[-1])
