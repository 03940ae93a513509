"""The states a lazy index makes together with the one asked for: the nearest unmade ones.

A vocabulary walk from a few dozen origins costs about what a walk from one does, so a
lazy index (DFA rows, grammar origins) makes the asked state's rows together with those
of the unmade states a text is likely to visit next: the ones nearest it, breadth first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


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
