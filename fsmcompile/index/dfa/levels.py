"""Liveness equivalence of DFA states, level by level, computed before any vocabulary walk.

Two states are j-equivalent when the same byte strings of length <= j keep each of them
alive. A trie node whose deepest token lies h bytes below it cannot tell h-equivalent
states apart, so the walk replaces a state by its class representative at that height
and walks shared futures once: the 2,000 states of `[^"]{0,2000}` collapse to about
one per byte of the longest token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsmcompile import _native
from fsmcompile.errors import BudgetExceededError
from fsmcompile.tables.byte_dfa import ByteDFA

_HASH_MASK = 2**64 - 1
"""The bits of a signature's hash the table uses (`_native.liveness_rounds`); tests set 0
to make every signature collide, which the full comparison behind each match must catch."""
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

    Cost: O(levels * live moves), one pass over the live moves a level in C
    (`_native.liveness_rounds`); most patterns stabilize within a few levels, a schema's
    long literal keys within a few dozen.
    """
    trans = np.ascontiguousarray(dfa.transitions, dtype=np.int32)
    num_states = dfa.num_states
    if initial is None:
        first = np.zeros(num_states, dtype=np.int32)
    else:
        _, first_index, inverse = np.unique(initial, return_index=True, return_inverse=True)
        first = first_index[inverse.reshape(-1)].astype(np.int32)
    max_rows = max(2, _MAX_LEVEL_CELLS // max(num_states, 1))
    limit = float("inf") if deadline is None else deadline
    found = _native.liveness_rounds(trans, first, max_height, max_rows, limit, _HASH_MASK)
    if found is None:
        raise BudgetExceededError(
            "compile timed out while grouping states", limit="timeout_s", value=0.0
        )
    rows, stored_levels = found
    canon = np.frombuffer(rows, dtype=np.int32).reshape(len(stored_levels), num_states)
    heights = np.arange(max_height + 1)
    row_of_height = np.searchsorted(np.asarray(stored_levels), heights, side="left")
    row_of_height = np.minimum(row_of_height, len(stored_levels) - 1).astype(np.int64)
    return LivenessLevels(canon=canon, row_of_height=row_of_height, finest=canon[-1])
