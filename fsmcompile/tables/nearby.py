"""The states a lazy index makes together with the one asked for: the nearest unmade ones.

A vocabulary walk from a few dozen origins costs about what a walk from one does, so a
lazy index (DFA rows, grammar origins) makes the asked state's rows together with those
of the unmade states a text is likely to visit next: the ones nearest it, breadth first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt


class NextStates:
    """The distinct states each state of a transition table (int32[S, C], -1 dead) moves
    to, ascending, listed the first time a search asks and kept: a search visits a few
    hundred of thousands of states, and listing all up front was 2-3 ms of a first mask."""

    __slots__ = ("_transitions", "_known")

    def __init__(self, transitions: npt.NDArray[np.int32]) -> None:
        self._transitions = transitions
        self._known: dict[int, list[int]] = {}

    def __call__(self, state: int) -> list[int]:
        found = self._known.get(state)
        if found is None:
            row = self._transitions[state]
            found = self._known[state] = sorted(set(row[row >= 0].tolist()))
        return found


def nearest_unmade(
    state: int,
    successors: Callable[[int], Iterable[int]],
    unmade: Callable[[int], bool],
    limit: int,
) -> list[int]:
    """`state`, then the states breadth first from it (in `successors` order) for which
    `unmade` holds, up to `limit` in all."""
    batch, seen, frontier = [state], {state}, [state]
    while frontier and len(batch) < limit:
        ahead: list[int] = []
        for q in frontier:
            for nxt in successors(q):
                if nxt not in seen:
                    seen.add(nxt)
                    ahead.append(nxt)
        batch.extend(q for q in ahead if unmade(q))
        frontier = ahead
    return batch[:limit]
