"""The pure-Python lexing check that `native/lexcheck.c` replaced: the reference definition
its tests compare against (`lexing_conflict` of `lexing_check.py`, witness included).

Breadth-first walks over pairs of byte automata, each automaton read as Python lists
(`Lists`): a numpy scalar read costs about ten list reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from fsmcompile.grammar.lexing_check import DROPPED
from fsmcompile.tables.byte_dfa import ByteDFA


def lexing_conflict_reference(
    a: ByteDFA, b: ByteDFA, same: bool, first: bool, follows: list[ByteDFA]
) -> tuple[bytes, int] | None:
    """`lexing_check.lexing_conflict`, every step in Python."""
    return lexing_conflict_lists(
        Lists.of(a), Lists.of(b), same, first, list(map(Lists.of, follows))
    )


def lexing_conflict_lists(
    a: Lists, b: Lists, same: bool, first: bool, follows: list[Lists]
) -> tuple[bytes, int] | None:
    """`lexing_conflict_reference` on automata read as lists (once per automaton, by the
    caller). A text showing that lexing a then a follower is ambiguous with lexing b (see
    `check_contexts`) and the index of that follower in `follows`, or None. The index
    is -1 when a and b share a whole lexeme, and `DROPPED` when a comes `first` in the
    context's order and ends a lexeme where b goes on: the lexer then drops b, so b's
    longer lexemes are never read."""
    tails: dict[tuple[int, int], bytes | None] = {}  # (b's state, follower) -> its witness
    steps: dict[int, _Steps] = {}  # follower -> b's steps with it
    for u, v, parent in _pairs(a, b, (0, 0), _lazy_steps(a, b)):
        if not a.accepting[u]:
            continue
        if not same and b.accepting[v]:
            return _spell(parent, (u, v)), -1
        if not same and first:
            return _spell(parent, (u, v)), DROPPED
        for i, f in enumerate(follows):
            if (v, i) not in tails:
                if i not in steps:
                    steps[i] = _lazy_steps(b, f)
                tails[(v, i)] = _runs_on(b, v, f, steps[i])
            tail = tails[(v, i)]
            if tail is not None:
                return _spell(parent, (u, v)) + tail, i
    return None


@dataclass(frozen=True, slots=True)
class Lists:
    """A `ByteDFA` as Python lists: the pair walks read one cell at a time, and a numpy
    scalar read costs about ten list reads."""

    transitions: list[list[int]]
    class_of_byte: list[int]
    accepting: list[bool]
    live: list[int]  # per state, the bytes it moves on (bit i: byte i)

    @staticmethod
    def of(dfa: ByteDFA) -> Lists:
        return Lists(
            dfa.transitions.tolist(),
            dfa.class_of_byte.tolist(),
            dfa.accepting.tolist(),
            _live_byte_masks(dfa),
        )


def _runs_on(b: Lists, start: int, f: Lists, steps: _Steps) -> bytes | None:
    """A non-empty text read by b from `start` and by f from its start where one of them
    ends a lexeme while the other is still alive, or None (`steps`: `_steps(b, f)`)."""
    for u, v, parent in _pairs(b, f, (start, 0), steps):
        if b.accepting[u] or f.accepting[v]:
            return _spell(parent, (u, v))
    return None


_Steps = Callable[[], list[tuple[tuple[int, int], int]]]
"""`_steps` of two automata, computed at most once (`_lazy_steps`)."""

_NARROW = 8
"""Up to this many bytes shared by a state pair, `_pairs` reads the moves off those bytes
rather than off every pair of classes: in literal keys each state moves on one byte."""


def _steps(a: Lists, b: Lists) -> list[tuple[tuple[int, int], int]]:
    """One byte per pair of classes the two automata put it in."""
    classes = zip(a.class_of_byte, b.class_of_byte, strict=True)
    return list({pair: byte for byte, pair in enumerate(classes)}.items())


def _lazy_steps(a: Lists, b: Lists) -> _Steps:
    """`_steps(a, b)` on first call only: most pair walks never need the class pairs."""
    found: list[list[tuple[tuple[int, int], int]]] = []

    def steps() -> list[tuple[tuple[int, int], int]]:
        if not found:
            found.append(_steps(a, b))
        return found[0]

    return steps


_Parents = dict[tuple[int, int], tuple[tuple[int, int], int] | None]
"""Per state pair reached, the pair and byte it was reached from (`_spell` reads it)."""


def _pairs(
    a: Lists, b: Lists, start: tuple[int, int], steps: _Steps
) -> Iterator[tuple[int, int, _Parents]]:
    """The state pairs both automata reach together from `start`, breadth first, each
    with the parents so far, from which `_spell` spells the bytes that lead there (dead
    states are not followed; `steps`: `_steps(a, b)`, read only where a pair shares more
    than `_NARROW` bytes)."""
    ta, tb = a.transitions, b.transitions
    class_a, class_b = a.class_of_byte, b.class_of_byte
    live_a, live_b = a.live, b.live
    parent: _Parents = {start: None}
    frontier = [start]
    while frontier:
        nxt: list[tuple[int, int]] = []
        for p, q in frontier:
            common = live_a[p] & live_b[q]
            if not common:
                continue
            moves: Iterable[tuple[tuple[int, int], int]]
            if common.bit_count() <= _NARROW:
                # As `_steps` lists them: class pairs in order of their first byte, each
                # with its last byte (all bytes of a class pair move alike).
                narrow: dict[tuple[int, int], int] = {}
                while common:
                    low = common & -common
                    byte = low.bit_length() - 1
                    common ^= low
                    narrow[(class_a[byte], class_b[byte])] = byte
                moves = narrow.items()
            else:
                moves = steps()
            row_a, row_b = ta[p], tb[q]
            for (ca, cb), byte in moves:
                at = (row_a[ca], row_b[cb])
                if at[0] < 0 or at[1] < 0 or at in parent:
                    continue
                parent[at] = ((p, q), byte)
                yield at[0], at[1], parent
                nxt.append(at)
        frontier = nxt


def _live_byte_masks(dfa: ByteDFA) -> list[int]:
    """Per state, the bytes it has a move on, as a 256-bit integer (bit i: byte i)."""
    live = (dfa.transitions >= 0)[:, dfa.class_of_byte]
    packed = np.packbits(live, axis=1, bitorder="little")
    data, width = packed.tobytes(), packed.shape[1]
    return [int.from_bytes(data[i : i + width], "little") for i in range(0, len(data), width)]


def _spell(parent: _Parents, at: tuple[int, int]) -> bytes:
    out = bytearray()
    step = parent[at]
    while step is not None:
        at, byte = step
        out.append(byte)
        step = parent[at]
    return bytes(reversed(out))
