"""Leaves of the IR as fragments: byte classes for the whole build, CharSet and ByteSet DFAs.

The build uses one byte-class partition for every fragment: the coarsest partition that
keeps apart every byte range any leaf mentions. All tables then share columns, so
concatenation and products combine rows without translating alphabets. Classes are
contiguous byte intervals in increasing order, so a byte range is a slice of columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from fsmcompile.automaton.fragment import Fragment, nothing
from fsmcompile.automaton.utf8 import Utf8Sequence, byte_boundaries, utf8_sequences
from fsmcompile.ir.nodes import ByteSet, CharSet, Node, nodes

IntervalState = tuple[bool, tuple[tuple[int, int, int], ...]]
"""(accepting, ((lo, hi, target), ...)): one state of a DFA over byte intervals."""


@dataclass(frozen=True, slots=True, eq=False)
class ByteClasses:
    """A partition of the 256 bytes into contiguous intervals.

    Attributes:
        class_of_byte: int32[256], non-decreasing.
        num_classes: number of intervals.
    """

    class_of_byte: npt.NDArray[np.int32]
    num_classes: int

    @classmethod
    def from_cuts(cls, cuts: set[int]) -> ByteClasses:
        marks = np.zeros(256, dtype=np.int32)
        for cut in cuts:
            if 0 < cut < 256:
                marks[cut] = 1
        class_of_byte = np.cumsum(marks, dtype=np.int32)
        return cls(class_of_byte, int(class_of_byte[-1]) + 1)

    def columns(self, lo: int, hi: int) -> slice:
        """The columns of the byte range lo..hi (a range never splits a class)."""
        return slice(int(self.class_of_byte[lo]), int(self.class_of_byte[hi]) + 1)


def classes_for(root: Node) -> ByteClasses:
    """The coarsest byte partition that every leaf under `root` respects.

    Walks the IR as a DAG (by identity): JSON Schema lowering shares sub-trees heavily.
    """
    cuts: set[int] = {0}
    leaves = {node for node in nodes(root) if isinstance(node, (CharSet, ByteSet))}
    for leaf in leaves:
        if isinstance(leaf, CharSet):
            cuts |= _charset_cuts(leaf.ranges)
        else:
            for lo, hi in leaf.ranges:
                cuts.add(lo)
                cuts.add(hi + 1)
    return ByteClasses.from_cuts(cuts)


@lru_cache(maxsize=4096)
def _charset_cuts(ranges: tuple[tuple[int, int], ...]) -> frozenset[int]:
    return frozenset(byte_boundaries(utf8_sequences(ranges)))


@lru_cache(maxsize=2048)
def interval_automaton(ranges: tuple[tuple[int, int], ...]) -> tuple[IntervalState, ...]:
    """The minimal DFA over byte intervals for one character of the code-point set.

    State 0 is the start. Built bottom-up from the UTF-8 sequences with hash-consing of
    (accepting, maximal intervals → child), which is Revuz's minimization for acyclic
    automata: equal residual languages get equal keys, so the result is minimal.
    """
    states: list[IntervalState] = []
    by_key: dict[IntervalState, int] = {}
    by_suffixes: dict[tuple[Utf8Sequence, ...], int] = {}

    def build(seqs: tuple[Utf8Sequence, ...]) -> int:
        hit = by_suffixes.get(seqs)
        if hit is not None:
            return hit
        accepting = () in seqs
        groups: dict[tuple[int, int], list[Utf8Sequence]] = {}
        for seq in seqs:
            if seq:
                groups.setdefault(seq[0], []).append(seq[1:])
        spans = sorted(groups)
        if any(a[1] >= b[0] for a, b in zip(spans, spans[1:], strict=False)):
            groups = _split_overlaps(groups)
            spans = sorted(groups)
        edges: list[tuple[int, int, int]] = []
        for lo, hi in spans:
            child = build(tuple(sorted(set(groups[(lo, hi)]))))
            if edges and edges[-1][2] == child and edges[-1][1] + 1 == lo:
                edges[-1] = (edges[-1][0], hi, child)
            else:
                edges.append((lo, hi, child))
        key: IntervalState = (accepting, tuple(edges))
        state = by_key.get(key)
        if state is None:
            state = by_key[key] = len(states)
            states.append(key)
        by_suffixes[seqs] = state
        return state

    seqs = utf8_sequences(ranges)
    if not seqs:
        return ()
    root = build(tuple(sorted(set(seqs))))
    # Children are created first; renumber so the root is state 0.
    order = [root] + [s for s in reversed(range(len(states))) if s != root]
    new_id = {old: new for new, old in enumerate(order)}
    return tuple(
        (states[old][0], tuple((lo, hi, new_id[t]) for lo, hi, t in states[old][1]))
        for old in order
    )


def _split_overlaps(
    groups: dict[tuple[int, int], list[Utf8Sequence]],
) -> dict[tuple[int, int], list[Utf8Sequence]]:
    """Re-group sequences by elementary byte intervals when first ranges overlap."""
    cuts = sorted({b for lo, hi in groups for b in (lo, hi + 1)})
    out: dict[tuple[int, int], list[Utf8Sequence]] = {}
    for lo, nxt in zip(cuts, cuts[1:], strict=False):
        hi = nxt - 1
        members = [s for (a, b), tails in groups.items() if a <= lo and hi <= b for s in tails]
        if members:
            out[(lo, hi)] = members
    return out


def charset_fragment(charset: CharSet, classes: ByteClasses) -> Fragment:
    """One character of `charset`, as a minimal fragment over `classes`."""
    states = interval_automaton(charset.ranges)
    if not states:
        return nothing(classes.num_classes)
    trans = np.full((len(states), classes.num_classes), -1, dtype=np.int32)
    accepting = np.zeros(len(states), dtype=np.bool_)
    for index, (acc, edges) in enumerate(states):
        accepting[index] = acc
        row = trans[index]
        for lo, hi, target in edges:
            row[classes.columns(lo, hi)] = target
    return Fragment(trans, accepting, minimal=True, unit="char")


def literal_fragment(text: bytes, classes: ByteClasses) -> Fragment:
    """The bytes of `text` one after another: a chain, minimal as it stands (each state's
    residual is the rest of the text)."""
    size = len(text)
    trans = np.full((size + 1, classes.num_classes), -1, dtype=np.int32)
    columns = classes.class_of_byte[np.frombuffer(text, dtype=np.uint8)]
    trans[np.arange(size), columns] = np.arange(1, size + 1, dtype=np.int32)
    accepting = np.zeros(size + 1, dtype=np.bool_)
    accepting[size] = True
    return Fragment(trans, accepting, minimal=True)


def byteset_fragment(byteset: ByteSet, classes: ByteClasses) -> Fragment:
    """One byte of `byteset`, as a two-state fragment."""
    if not byteset.ranges:
        return nothing(classes.num_classes)
    trans = np.full((2, classes.num_classes), -1, dtype=np.int32)
    for lo, hi in byteset.ranges:
        trans[0, classes.columns(lo, hi)] = 1
    accepting = np.array([False, True], dtype=np.bool_)
    return Fragment(trans, accepting, minimal=True, unit="byte")
