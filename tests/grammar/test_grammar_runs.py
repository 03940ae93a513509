"""The path order of emitted sequences that lets a row skip a rejected sequence's runs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fsmcompile.runtime.grammar_tables import _sequence_preorder


@st.composite
def sequence_tables(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """Interned sequences as an index stores them: id 0 empty, a parent before its child,
    no two ids for the same (parent, terminal, context)."""
    parent, terminal, context = [-1], [-1], [-1]
    seen: set[tuple[int, int, int]] = set()
    for _ in range(draw(st.integers(0, 40))):
        key = (
            draw(st.integers(0, len(parent) - 1)),
            draw(st.integers(0, 3)),
            draw(st.integers(0, 4)),
        )
        if key not in seen:
            seen.add(key)
            for column, value in zip((parent, terminal, context), key, strict=True):
                column.append(value)
    return parent, terminal, context


def _path(seq: int, parent: list[int], terminal: list[int], context: list[int]) -> tuple:
    steps = []
    while seq > 0:
        steps.append((terminal[seq], context[seq]))
        seq = parent[seq]
    return tuple(reversed(steps))


@settings(max_examples=200, deadline=None)
@given(sequence_tables())
def test_sequence_preorder_puts_each_sequence_before_exactly_its_extensions(table):
    parent, terminal, context = table
    rank, end = _sequence_preorder(
        np.array(parent, dtype=np.int32),
        np.array(terminal, dtype=np.int32),
        np.array(context, dtype=np.int32),
    )
    paths = [_path(s, parent, terminal, context) for s in range(len(parent))]
    # Path order is the lexicographic order of the (terminal, context) steps.
    assert sorted(range(len(parent)), key=lambda s: paths[s]) == np.argsort(rank).tolist()
    for s, path in enumerate(paths):
        inside = {t for t in range(len(parent)) if rank[s] <= rank[t] < end[s]}
        assert inside == {t for t, other in enumerate(paths) if other[: len(path)] == path}
