"""The automaton under construction and the small array helpers every construction shares.

A `Fragment` is a DFA over the build's global byte classes with start state 0. Unlike
the finished `ByteDFA` it need not be minimal, and it may keep unreachable states until
a construction that cares drops them; but every state can reach an accepting state
(no dead ends), because the fast concatenation and repetition paths decide on overlap
by looking at which transitions exist, and a dead-end state would fake an overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from fsmcompile import _native

Table = npt.NDArray[np.int32]
"""int32[S, C]: next state per (state, byte class); -1 is dead."""
Flags = npt.NDArray[np.bool_]
"""bool[S]: whether each state accepts."""

Unit = Literal["char", "byte"]


@dataclass(frozen=True, slots=True, eq=False)
class Fragment:
    """A DFA being built: `trans` int32[S, C] over global classes, `accepting` bool[S].

    `minimal` records a proof that the fragment is already minimal, so the final
    minimization can be skipped (the long chains of `[^"]{0,2000}` cost most there).
    `unit` is set when every word is exactly one character ("char": a CharSet) or one
    byte ("byte": a ByteSet); the chain proofs rest on it. Zero states = no string.
    """

    trans: Table
    accepting: Flags
    minimal: bool = False
    unit: Unit | None = None

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.trans.shape[1])

    @property
    def is_nothing(self) -> bool:
        return self.num_states == 0

    @property
    def nullable(self) -> bool:
        return self.num_states > 0 and bool(self.accepting[0])

    @property
    def is_empty_string(self) -> bool:
        """Matches exactly the empty string (an accepting start with no transition)."""
        return self.nullable and bool((self.trans[0] < 0).all())

    def start_has_incoming(self) -> bool:
        return bool((self.trans == 0).any())


def sorted_unique(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """`np.unique(values)` of a 1-D array, by one sort: numpy 2's plain `np.unique` hashes,
    which cost 7-8x a sort on the int arrays the builders dedupe (1.8 against 0.22 ms for
    40k values), and 50x on some."""
    ordered = _sorted(values)
    if not ordered.size:
        return ordered
    fresh = np.empty(ordered.shape[0], dtype=np.bool_)
    fresh[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=fresh[1:])
    return ordered[fresh]


_RADIX_FROM = 4096
"""Values from which `_sorted` sorts by 16-bit digits: below, numpy's own sort is as fast."""


def _sorted(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """`np.sort(values)`; many integers in [0, 2**32) by two counting sorts of 16-bit
    digits, which numpy does 10x faster than a 64-bit sort (1.9 against 4.2 ms for the
    110k group members of a median schema)."""
    if values.shape[0] < _RADIX_FROM or values.dtype.kind not in "iu":
        return np.sort(values)
    if int(values.min()) < 0 or int(values.max()) >= 1 << 32:
        return np.sort(values)
    return values[radix_order(values, (0, 16))]


def radix_order(values: npt.NDArray[Any], shifts: tuple[int, ...]) -> npt.NDArray[np.intp]:
    """The stable order of non-negative integer `values` by their 16-bit digits at
    `shifts`, least significant first: one counting sort per digit."""
    order = np.arange(values.shape[0])
    for shift in shifts:
        digit = (np.take(values, order) >> shift).astype(np.uint16)
        order = np.take(order, np.argsort(digit, kind="stable"))
    return order


def unique_rows(
    matrix: npt.NDArray[np.int32],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(first index of each distinct row, row → distinct-row id), ids in row-byte order.

    Rows are compared as raw bytes (a void view): `np.unique(axis=0)` builds a
    structured dtype with one field per column, which is slow for 16k-wide rows.
    """
    rows = np.ascontiguousarray(matrix, dtype=np.int32)
    packed = rows.view(np.dtype((np.void, 4 * max(rows.shape[1], 1)))).reshape(-1)
    if rows.shape[1] == 0:
        packed = np.zeros(rows.shape[0], dtype=np.int8)
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def distinct_targets(table: npt.NDArray[np.int32]) -> list[list[int]]:
    """The distinct live targets of each state of a transition table (one sort for all)."""
    ordered = np.sort(table, axis=1)
    fresh = np.ones_like(ordered, dtype=np.bool_)
    fresh[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    fresh &= ordered >= 0
    # One `tolist` of every kept target, then slices: a `tolist` per row was most of the
    # cost for a lexer of thousands of states (exit sets and regions each call this).
    flat = ordered[fresh].tolist()
    bounds = [0, *np.cumsum(fresh.sum(axis=1)).tolist()]
    return [flat[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def nothing(num_classes: int) -> Fragment:
    """The fragment that matches no string."""
    return Fragment(
        np.zeros((0, num_classes), dtype=np.int32), np.zeros(0, dtype=np.bool_), minimal=True
    )


def empty_string(num_classes: int) -> Fragment:
    """The fragment that matches only the empty string."""
    return Fragment(
        np.full((1, num_classes), -1, dtype=np.int32), np.ones(1, dtype=np.bool_), minimal=True
    )


def shifted(trans: Table, offset: int) -> Table:
    """`trans` with every live target moved by `offset` (dead stays -1)."""
    return np.where(trans >= 0, trans + np.int32(offset), np.int32(-1)).astype(np.int32)


def keep_states(trans: Table, accepting: Flags, keep: Flags) -> tuple[Table, Flags]:
    """Drop the states where `keep` is False; transitions into them become dead.

    Relative order is kept, so state 0 stays the start when it is kept.
    """
    if bool(keep.all()):
        return trans, accepting
    new_id = np.cumsum(keep, dtype=np.int64).astype(np.int32) - 1
    new_id = np.where(keep, new_id, np.int32(-1)).astype(np.int32)
    lookup = np.append(new_id, np.int32(-1))  # index -1 (dead) maps to -1
    kept = trans[keep]
    return lookup[kept].astype(np.int32), accepting[keep]


def drop_orphans(trans: Table, accepting: Flags, candidates: list[int]) -> Fragment:
    """Drop the `candidates` (former start states) that no transition reaches.

    The cheap O(size) numpy trim after gluing: a full reachability walk is a Python
    loop, and a glued start is the only state such constructions orphan.
    """
    if not candidates:
        return Fragment(trans, accepting)
    incoming = np.zeros(trans.shape[0], dtype=np.bool_)
    incoming[trans[trans >= 0]] = True
    keep = np.ones(trans.shape[0], dtype=np.bool_)
    for state in candidates:
        if not incoming[state]:
            keep[state] = False
    trans, accepting = keep_states(trans, accepting, keep)
    return Fragment(trans, accepting)


def with_fresh_start(frag: Fragment) -> Fragment:
    """An equivalent fragment whose start state has no incoming transition.

    Merging a start row into other states (glue, chains) is only sound when nothing
    jumps back to the start; a copy of the start row as a new state 0 makes it so.
    """
    if not frag.start_has_incoming():
        return frag
    body = shifted(frag.trans, 1)
    trans = np.concatenate([body[:1], body], axis=0)
    accepting = np.concatenate([frag.accepting[:1], frag.accepting])
    return Fragment(trans, accepting, unit=frag.unit)


def without_empty_string(frag: Fragment) -> Fragment:
    """The fragment's language minus the empty string (start made non-accepting)."""
    if not frag.nullable:
        return frag
    fresh = with_fresh_start(frag)
    accepting = fresh.accepting.copy()
    accepting[0] = False
    return Fragment(fresh.trans, accepting)


def reachable(trans: Table, roots: list[int]) -> Flags:
    """States reachable from `roots` (a search in C, O(edges): chains make numpy rounds
    slow and Python's loop was most of an intersection's cost)."""
    mark = np.zeros(trans.shape[0], dtype=np.bool_)
    mark[roots] = True
    _native.mark_reached(np.ascontiguousarray(trans, dtype=np.int32), mark, False)
    return mark


def coreachable(trans: Table, accepting: Flags) -> Flags:
    """States from which an accepting state can be reached (a search against the
    transitions, in C)."""
    mark = np.array(accepting, dtype=np.bool_)
    _native.mark_reached(np.ascontiguousarray(trans, dtype=np.int32), mark, True)
    return mark


def trimmed(trans: Table, accepting: Flags, *, prune_dead_ends: bool) -> Fragment:
    """A fragment from raw arrays with unreachable (and optionally dead-end) states dropped.

    Returns the no-string fragment when the start cannot reach acceptance.
    """
    num_classes = int(trans.shape[1])
    if trans.shape[0] == 0:
        return nothing(num_classes)
    if prune_dead_ends:
        live = coreachable(trans, accepting)
        if not live[0]:
            return nothing(num_classes)
        trans = np.where((trans >= 0) & live[np.maximum(trans, 0)], trans, -1).astype(np.int32)
        trans, accepting = keep_states(trans, accepting, live)
    keep = reachable(trans, [0])
    trans, accepting = keep_states(trans, accepting, keep)
    return Fragment(trans, accepting)
